"""Mahimahi packet-delivery traces -> link *capacity* timelines.

A mahimahi trace (mm-link) lists, one integer per line, the millisecond at which one packet of up to
1500 bytes may leave the bottleneck queue; a repeated value means several packets that millisecond.
mm-link replays the file in a loop: when it reaches the last line it starts again with the base time
advanced by the last timestamp, so the period is the last timestamp T and an opportunity at ms T of
one cycle is the same instant as ms 0 of the next. We fold those onto ms 0 (``t mod T``), which keeps
every line (total bytes per period = 1500 x lines) and makes a file containing just "1" mean one
packet per millisecond (12 Mbit/s), as the mahimahi README says.

Binning: opportunities are counted per bin (default 100 ms) and turned into a constant capacity
over the bin (bytes x 8 / bin width; the last bin may be shorter than the others when T is not a
multiple of the bin). Wasted opportunities: in mahimahi an opportunity that finds the queue empty is
lost, never saved for later. The replay's rate queue behaves the same way at bin granularity: a packet
is served at the rate in force while it is at the head of the queue, and capacity that passes while
the queue is empty is not banked. What binning does lose is the burst structure inside a bin (e.g. 8
packets in one ms, then 20 ms of nothing); pass ``bin_ns=1_000_000`` to keep it to the millisecond.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from workbench.errors import InputError
from workbench.timeline.model import PathTimeline, Source, steps_from_series

__all__ = ["MAX_PERIOD_MS", "MTU_BYTES", "mahimahi_bins", "read_mahimahi", "read_mahimahi_ms"]

MTU_BYTES = 1500  # bytes per delivery opportunity in mahimahi
MAX_PERIOD_MS = 86_400_000  # one day: mahimahi traces are seconds to hours long
_NS_PER_MS = 1_000_000
_MAX_BINS = 10_000_000  # 80 MB per column: a bin size that asks for more is a mistake


def read_mahimahi_ms(path: str | Path) -> np.ndarray:
    """The opportunity timestamps (ms, int64) of a mahimahi trace file, validated."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read mahimahi trace: {e}") from None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise InputError(path, "empty mahimahi trace")
    try:
        values = [int(ln) for ln in lines]
    except ValueError:
        bad = next(ln for ln in lines if not ln.lstrip("-").isdigit())
        raise InputError(path, f"not a mahimahi trace: line {bad!r} is not an integer") from None
    if max(values) > MAX_PERIOD_MS:
        # A period of more than a day is a corrupt line, and binning it would need that many bins.
        raise InputError(path, f"mahimahi timestamp {max(values)} ms is over the {MAX_PERIOD_MS} ms (one day) "
                               "a trace may span")
    ms = np.array(values, dtype=np.int64)
    if (ms < 0).any():
        raise InputError(path, "mahimahi timestamps must be >= 0")
    if (np.diff(ms) < 0).any():
        i = int(np.argmax(np.diff(ms) < 0)) + 2
        raise InputError(path, f"mahimahi timestamps must not decrease (line {i})")
    if ms[-1] == 0:
        raise InputError(path, "mahimahi trace ends at ms 0: the period (last timestamp) must be > 0")
    return ms


def _bin_counts(ms: np.ndarray, period_ms: int, bin_ns: int) -> np.ndarray:
    """Opportunities per bin over [0, period_ms), timestamps folded modulo the trace's own period."""
    own_period = int(ms[-1])
    # Tile the trace when a longer span is asked for (the other direction's period).
    reps = -(-period_ms // own_period)
    t = np.concatenate([(ms % own_period) + k * own_period for k in range(reps)])
    t = t[t < period_ms]
    n_bins = -(-period_ms * _NS_PER_MS // bin_ns)
    return np.bincount(t * _NS_PER_MS // bin_ns, minlength=n_bins)


def mahimahi_bins(path: str | Path, bin_ns: int = 100_000_000, packet_bytes: int = MTU_BYTES,
                  period_ms: int | None = None) -> pl.DataFrame:
    """Per-bin byte accounting of one trace file: ``t_ns``, ``dur_ns``, ``opportunities``, ``bytes``,
    ``capacity_bps`` over one period (the trace's last timestamp, or ``period_ms`` to tile it)."""
    if bin_ns <= 0:
        raise ValueError("bin_ns must be > 0")
    ms = read_mahimahi_ms(path)
    period = int(ms[-1]) if period_ms is None else int(period_ms)
    if period * _NS_PER_MS // bin_ns > _MAX_BINS:
        raise InputError(path, f"{period} ms in {bin_ns / 1e6:g} ms bins is over {_MAX_BINS} bins: use wider bins")
    counts = _bin_counts(ms, period, bin_ns)
    starts = np.arange(len(counts), dtype=np.int64) * bin_ns
    ends = np.minimum(starts + bin_ns, period * _NS_PER_MS)
    dur = ends - starts
    nbytes = counts.astype(np.int64) * packet_bytes
    return pl.DataFrame({
        "t_ns": starts, "dur_ns": dur, "opportunities": counts.astype(np.int64), "bytes": nbytes,
        "capacity_bps": nbytes * 8e9 / dur,
    })


def read_mahimahi(down: str | Path | None, up: str | Path | None = None, *, name: str | None = None,
                  bin_ns: int = 100_000_000, packet_bytes: int = MTU_BYTES) -> PathTimeline:
    """A capacity timeline from a mahimahi ``.down`` and/or ``.up`` trace (kind "capacity", values
    "measured"; delay, loss and buffer unknown). Periodic: the result repeats after ``end_ns``.

    When both files are given and their periods differ, the timeline spans the longer period and the
    shorter trace is wrapped inside it (as mm-link would), so its phase restarts at ``end_ns``.
    """
    files = {"down": down, "up": up}
    given = {d: Path(p) for d, p in files.items() if p is not None}
    if not given:
        raise ValueError("read_mahimahi needs a down and/or an up trace")
    periods = {d: int(read_mahimahi_ms(p)[-1]) for d, p in given.items()}
    period_ms = max(periods.values())
    series: dict[str, tuple[list[int], list[float], Source]] = {}
    for d, p in given.items():
        bins = mahimahi_bins(p, bin_ns, packet_bytes, period_ms=period_ms)
        series[f"capacity_{d}_bps"] = (bins["t_ns"].to_list(), bins["capacity_bps"].to_list(), "measured")
    notes = [
        f"mahimahi delivery-opportunity trace(s) ({packet_bytes} B per opportunity), binned at "
        f"{bin_ns / 1e6:g} ms; periodic with period {period_ms} ms (the last timestamp)",
        "wasted opportunities (queue empty) are lost, as in mm-link; intra-bin bursts are smoothed",
    ]
    if len(set(periods.values())) > 1:
        notes.append(f"periods differ ({periods}); the shorter trace wraps inside {period_ms} ms")
    first = next(iter(given.values()))
    stem = first.name.removesuffix(".down").removesuffix(".up")
    return PathTimeline(
        name=name or stem, steps=steps_from_series(series), kind="capacity",
        end_ns=period_ms * _NS_PER_MS, periodic=True,
        source="mahimahi: " + ", ".join(f"{d}={p}" for d, p in given.items()), notes=tuple(notes))
