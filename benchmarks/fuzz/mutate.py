"""Mutation fuzzing of real captures: bit flips, runs of random bytes, truncation at header
boundaries (record header, link, IP, TCP, option), swapped chunks, corrupted pcapng blocks, and
MPTCP options rewritten in place. The seeds are small bundled captures, also rewritten as pcapng so
block-level damage is exercised."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from benchmarks.fuzz.craft import mptcp_option, pcapng_bytes

__all__ = ["load_seeds", "mutate_capture", "pcap_records"]


def pcap_records(data: bytes) -> tuple[bytes, list[tuple[int, int]], str]:
    """(file header, [(offset, length) of each record incl. its 16-byte header], byte order)."""
    magic = data[:4]
    order = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    recs, pos = [], 24
    while pos + 16 <= len(data):
        incl = struct.unpack_from(order + "I", data, pos + 8)[0]
        if pos + 16 + incl > len(data):
            break
        recs.append((pos, 16 + incl))
        pos += 16 + incl
    return data[:24], recs, order


def _as_pcapng(data: bytes, rng: random.Random) -> bytes:
    head, recs, order = pcap_records(data)
    linktype = struct.unpack_from(order + "I", head, 20)[0]
    nano = head[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    frames = []
    for off, _ln in recs:
        sec, frac, incl, _orig = struct.unpack_from(order + "IIII", data, off)
        t_ns = sec * 10**9 + (frac if nano else frac * 1000)
        frames.append((t_ns, data[off + 16: off + 16 + incl]))
    return pcapng_bytes(frames, linktype, rng)


def load_seeds(folder: Path, *, max_records: int = 400) -> list[bytes]:
    """The pcap files of `folder`, each cut to its first `max_records` records (mutations of a
    small file cost the same code paths as a big one and run a hundred times faster), plus a
    pcapng rewrite of each."""
    rng = random.Random(1)
    seeds = []
    for p in sorted(folder.glob("*.pcap")):
        data = p.read_bytes()
        _head, recs, _ = pcap_records(data)
        if not recs:
            continue
        end = recs[min(len(recs), max_records) - 1]
        cut = data[: end[0] + end[1]]
        seeds += [cut, _as_pcapng(cut, rng)]
    return seeds


def _header_boundaries(data: bytes) -> list[int]:
    """Offsets where a header ends in a pcap: record header, Ethernet, IP, TCP fixed part, options."""
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        return []
    _, recs, _ = pcap_records(data)
    cuts = []
    for off, _ln in recs[:200]:
        cuts += [off, off + 8, off + 16, off + 16 + 14, off + 16 + 34, off + 16 + 54, off + 16 + 58]
    return [c for c in cuts if c < len(data)]


def _rewrite_mptcp(data: bytearray, rng: random.Random) -> None:
    """Replace one kind-30 option in place with a random one of the same size (any subtype)."""
    starts = [i for i in range(24, len(data) - 4) if data[i] == 30 and 3 < data[i + 1] <= 40]
    if not starts:
        return
    i = rng.choice(starts)
    size = data[i + 1]
    new = mptcp_option(rng)
    new = (new + b"\x01" * size)[:size]
    new = bytes([30, rng.choice((size, size, new[1]))]) + new[2:]
    data[i: i + size] = new


def mutate_capture(seed: bytes, rng: random.Random) -> bytes:
    """One mutant of `seed` (1 to 3 stacked mutations)."""
    b = bytearray(seed)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if len(b) < 32:
            break
        kind = rng.randrange(8)
        if kind == 0:  # flip bits past the file header
            for _ in range(rng.randint(1, 20)):
                i = rng.randrange(24, len(b))
                b[i] ^= 1 << rng.randrange(8)
        elif kind == 1:  # a run of random bytes
            i = rng.randrange(24, len(b))
            n = min(rng.randint(1, 64), len(b) - i)
            b[i: i + n] = bytes(rng.getrandbits(8) for _ in range(n))
        elif kind == 2:  # truncate, at a header boundary when there is one
            cuts = _header_boundaries(bytes(b))
            b = b[: rng.choice(cuts) if cuts and rng.random() < 0.7 else rng.randrange(len(b))]
        elif kind == 3:  # swap two chunks
            i, j = sorted(rng.sample(range(24, len(b)), 2))
            n = min(rng.randint(8, 200), j - i)
            b[i: i + n], b[j: j + n] = b[j: j + n], b[i: i + n]
        elif kind == 4:  # an MPTCP option rewritten
            _rewrite_mptcp(b, rng)
        elif kind == 5:  # interesting 32-bit values at a random aligned place (lengths, ids, clocks)
            i = rng.randrange(24, len(b) - 4) & ~3
            b[i: i + 4] = struct.pack("<I", rng.choice((0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 65535, 13, 12)))
        elif kind == 6:  # duplicate a chunk (repeated records, repeated blocks)
            i = rng.randrange(24, len(b))
            n = rng.randint(16, 400)
            b[i:i] = b[i: i + n]
        else:  # a single byte set to a boundary value (data offset, option length, TTL, protocol)
            i = rng.randrange(24, len(b))
            b[i] = rng.choice((0, 1, 2, 4, 5, 6, 15, 16, 30, 40, 60, 0x7F, 0x80, 0xFF))
    return bytes(b)
