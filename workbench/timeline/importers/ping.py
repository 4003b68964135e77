"""Ping logs with timestamps -> delay and loss timelines (no capacity).

Accepted lines: Linux ``ping`` output prefixed with a timestamp, either a wall-clock one
(``[2023-05-13 10:22:42.825268] 46 bytes from ...: icmp_seq=1 ttl=50 time=83.7 ms``, as in the NUWiNS
logs) or ``ping -D``'s Unix one (``[1683987762.825268] 64 bytes from ...``). ``(DUP!)`` replies are
ignored; a missing ``icmp_seq`` (1..transmitted, from the statistics line when present) is a loss.

Send times: the line timestamp is when the reply was printed, so a request was sent at
(timestamp - RTT); lost requests get send times interpolated from their neighbours by sequence number.
Wall-clock stamps carry no time zone: when the log has a ``Start time: <Unix ms>`` line, the offset is
taken from it (rounded to 15 min) so ``t0_epoch_ns`` is true Unix time; otherwise they are read as UTC.

Per bin (default 1 s, by send time): RTT = the bin's minimum (the least-queued sample, closest to the
path's base delay; ``stat="median"`` for the typical one); one-way delay each way = RTT x split
(default 1/2) tagged "estimated" (ping cannot tell the directions apart); round-trip loss p =
lost / sent in the bin, given to each direction as 1 - sqrt(1 - p) (equal split, "estimated"), so that
a request-and-reply survives with probability 1 - p. Bins with no reply have unknown delay.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, cast

import numpy as np
import polars as pl

from workbench.errors import InputError
from workbench.timeline.model import PathTimeline, steps_from_series

__all__ = ["PingLog", "parse_ping_log", "read_ping"]

_REPLY = re.compile(
    r"^\[(?P<ts>[^\]]+)\]\s+\d+ bytes from [^:]+:\s+icmp_seq=(?P<seq>\d+)\s.*?time[=<](?P<rtt>[\d.]+)\s*ms"
    r"(?P<dup>.*DUP!)?")
_STATS = re.compile(r"(?P<tx>\d+) packets transmitted, (?P<rx>\d+) (?:packets )?received")
_START = re.compile(r"^Start time:\s*(?P<ms>\d+)")
_PING = re.compile(r"^\[(?P<ts>[^\]]+)\]\s+PING ")


@dataclass(frozen=True)
class PingLog:
    """What a ping log says: one row per request (``seq``, ``send_ns`` since the first request,
    ``rtt_ns`` null when lost), plus the Unix time of ``send_ns = 0`` and the statistics line."""

    requests: pl.DataFrame
    t0_epoch_ns: int
    transmitted: int | None
    received: int | None
    duplicates: int


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _stamp_ns(ts: str) -> tuple[int, bool]:
    """Integer ns from a log timestamp (floats would lose ~100 ns at today's epoch); second item True
    when it was a Unix epoch stamp."""
    ts = ts.strip()
    if re.fullmatch(r"\d+(\.\d*)?", ts):
        whole, _, frac = ts.partition(".")
        return int(whole) * 10**9 + int((frac + "000000000")[:9]), True
    try:
        dt = datetime.strptime(ts, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
    except ValueError:
        dt = datetime.strptime(ts, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(microseconds=1) * 1000, False


def parse_ping_log(path: str | Path) -> PingLog:
    """Parse a timestamped ping log into per-request rows (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise InputError(path, f"cannot read ping log: {e}") from None
    seqs: list[int] = []
    stamp_ns: list[int] = []
    rtt_ms: list[float] = []
    dups = 0
    tx = rx = None
    start_ms = None
    epoch_stamps = True
    first_stamp = None
    for line in text.splitlines():
        if m := _REPLY.match(line):
            if m.group("dup"):
                dups += 1
                continue
            s, is_epoch = _stamp_ns(m.group("ts"))
            epoch_stamps &= is_epoch
            seqs.append(int(m.group("seq")))
            stamp_ns.append(s)
            rtt_ms.append(float(m.group("rtt")))
        elif m := _STATS.search(line):
            tx, rx = int(m.group("tx")), int(m.group("rx"))
        elif m := _START.match(line):
            start_ms = int(m.group("ms"))
        elif (m := _PING.match(line)) and first_stamp is None:
            first_stamp = _stamp_ns(m.group("ts"))[0]
    if not seqs:
        raise InputError(path, "no timestamped ping replies found (need lines like '[<time>] 64 bytes from ...')")
    order = np.argsort(seqs, kind="stable")
    seq = np.asarray(seqs)[order]
    if (np.diff(seq) == 0).any():
        raise InputError(path, "the same icmp_seq is answered twice without (DUP!)")
    rtt_ns = (np.asarray(rtt_ms)[order] * 1e6).round().astype(np.int64)
    sent_abs = np.asarray(stamp_ns, dtype=np.int64)[order] - rtt_ns
    ref_ns = int(sent_abs.min())
    sent = (sent_abs - ref_ns).astype(np.float64)  # small numbers: exact in float64
    n = max(int(seq.max()), tx or 0)
    all_seq = np.arange(1, n + 1)
    # Lost requests: interpolate their send times by sequence number (ping sends at a fixed interval).
    interval = float(np.median(np.diff(sent) / np.diff(seq))) if len(seq) > 1 else 1e9
    all_sent = np.interp(all_seq, seq, sent)
    all_sent = np.where(all_seq < seq[0], sent[0] - (seq[0] - all_seq) * interval, all_sent)
    all_sent = np.where(all_seq > seq[-1], sent[-1] + (all_seq - seq[-1]) * interval, all_sent)
    rtt_by_seq = dict(zip(seq.tolist(), rtt_ns.tolist(), strict=True))
    offset_ns = 0
    if not epoch_stamps and start_ms is not None:
        # Wall-clock stamps are local time: find the zone offset from the Unix "Start time" line.
        ref = first_stamp if first_stamp is not None else ref_ns
        offset_ns = round((ref - start_ms * 10**6) / (900 * 10**9)) * 900 * 10**9
    first = round(all_sent[0])
    send_ns = np.round(all_sent).astype(np.int64) - first
    requests = pl.DataFrame({
        "seq": all_seq.astype(np.int64), "send_ns": send_ns,
        "rtt_ns": [rtt_by_seq.get(int(s)) for s in all_seq],
    }, schema={"seq": pl.Int64(), "send_ns": pl.Int64(), "rtt_ns": pl.Int64()})
    return PingLog(requests=requests, t0_epoch_ns=ref_ns + first - offset_ns, transmitted=tx,
                   received=rx, duplicates=dups)


def read_ping(path: str | Path, *, name: str | None = None, bin_ns: int = 1_000_000_000,
              stat: Literal["min", "median"] = "min", rtt_split: float = 0.5) -> PathTimeline:
    """A delay + loss timeline from a ping log (capacity unknown); see the module docstring."""
    if not 0 < rtt_split < 1:
        raise ValueError("rtt_split must be in (0, 1)")
    path = Path(path)
    log = parse_ping_log(path)
    agg = pl.col("rtt_ns").min() if stat == "min" else pl.col("rtt_ns").median()
    bins = (
        log.requests.with_columns((pl.col("send_ns") // bin_ns * bin_ns).alias("t_ns"))
        .group_by("t_ns").agg(agg.alias("rtt_ns"), pl.len().alias("sent"), pl.col("rtt_ns").null_count().alias("lost"))
        .sort("t_ns")
    )
    # (the log has at least one request: max() is an int)
    full = pl.DataFrame({"t_ns": pl.int_range(0, int(cast(int, bins["t_ns"].max())) + bin_ns, bin_ns,
                                              eager=True)})
    bins = full.join(bins, on="t_ns", how="left")
    t = bins["t_ns"].to_list()
    rtt = bins["rtt_ns"].to_list()
    loss_rt = [(lo / s if s else None) for lo, s in zip(bins["lost"].to_list(), bins["sent"].to_list(), strict=True)]
    loss_way = [None if p is None else 1 - math.sqrt(1 - p) for p in loss_rt]
    down = [None if r is None else round(r * rtt_split) for r in rtt]
    up = [None if r is None else round(r * (1 - rtt_split)) for r in rtt]
    steps = steps_from_series({
        "owd_down_ns": (t, down, "estimated"), "owd_up_ns": (t, up, "estimated"),
        "loss_down": (t, loss_way, "estimated"), "loss_up": (t, loss_way, "estimated"),
    })
    n_lost = int(log.requests["rtt_ns"].null_count())
    notes = (
        f"ping log: {log.requests.height} requests, {n_lost} lost, {log.duplicates} duplicate replies ignored",
        f"owd = {stat} RTT per {bin_ns / 1e9:g} s bin x {rtt_split:g} (down) / x {1 - rtt_split:g} (up): estimated",
        "round-trip loss split equally between directions: 1 - sqrt(1 - p)",
    )
    return PathTimeline(name=name or path.parent.name or path.stem, steps=steps, kind="capacity",
                        end_ns=int(t[-1]) + bin_ns, t0_epoch_ns=log.t0_epoch_ns,
                        source=f"ping log: {path}", notes=notes)
