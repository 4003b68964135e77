"""Shrinking a failing capture while it still fails the same way: whole records first (a pcap
that keeps its framing), then byte ranges (delta debugging), so a regression file is as small as
the bug allows."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.fuzz.mutate import pcap_records

__all__ = ["minimize_bytes", "minimize_capture"]


def _ddmin(items: list, still_fails: Callable[[list], bool], max_tries: int) -> list:
    """Zeller's ddmin, bounded by `max_tries` calls of `still_fails`."""
    n, tries = 2, 0
    while len(items) >= 2 and tries < max_tries:
        chunk = max(len(items) // n, 1)
        reduced = False
        for start in range(0, len(items), chunk):
            candidate = items[:start] + items[start + chunk:]
            tries += 1
            if candidate and still_fails(candidate):
                items, n, reduced = candidate, max(n - 1, 2), True
                break
            if tries >= max_tries:
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(n * 2, len(items))
    return items


def minimize_bytes(data: bytes, still_fails: Callable[[bytes], bool], *, keep_head: int = 0,
                   max_tries: int = 300) -> bytes:
    head, body = data[:keep_head], list(data[keep_head:])
    out = _ddmin(body, lambda b: still_fails(head + bytes(b)), max_tries)
    return head + bytes(out)


def minimize_capture(data: bytes, still_fails: Callable[[bytes], bool], *, max_tries: int = 300) -> bytes:
    """Drop pcap records while the failure stays (pcapng and damaged files: byte ranges only)."""
    if not still_fails(data):
        return data
    if data[:4] != b"\x0a\x0d\x0d\x0a":
        head, recs, _ = pcap_records(data)
        tail = data[recs[-1][0] + recs[-1][1]:] if recs else b""
        if recs:
            chunks = [data[o: o + ln] for o, ln in recs]
            kept = _ddmin(chunks, lambda cs: still_fails(head + b"".join(cs) + tail), max_tries)
            data = head + b"".join(kept) + tail
    return minimize_bytes(data, still_fails, keep_head=24, max_tries=max_tries // 2)
