"""Bottleneck capacity from packet dispersion: the spacing of back-to-back segments at the receiver.

A segment that reaches the bottleneck while the one before it is still being sent leaves it exactly
``size / capacity`` after that one, whatever the sender's rate: the bottleneck spreads a burst to its
own rate, and nothing after it (in a lab or on a quiet access link) closes the gap again. This is what
packet-pair tools (bprobe, pathrate, the "packet pair" of Keshav 1991) measure, and TCP sends such
pairs all the time: two segments per ACK in slow start, a burst after every stretch ACK. So even a
path that never filled — a short download, a path left idle by the scheduler — shows its capacity
in the inter-arrival times of its segments.

Per bin, every pair of consecutive arrivals on the path gives a rate sample ``bytes(second) /
gap``. Idle gaps give lower rates, spread widely; back-to-back pairs give the same rate again and
again. The estimate is the fastest *dense* band of log-rate (``band`` wide; dense = at least half as
many samples as the densest band: an ACK-clocked sender also makes bands at C/2, C/3), refined to the
median of the samples in it, and it is trusted only when that band holds at least ``min_pairs``
samples and a fraction ``min_share`` of the bin's samples (otherwise the window widens to
neighbouring bins, up to ``max_window_bins``). A bin whose samples show no dense band gives no
estimate: the caller falls back to a lower bound.

Compressed gaps (interrupt coalescing or USB/driver batching at the receiver, a second queue after
the bottleneck) give samples far above the capacity, and batches are dense too. So gaps shorter than
``coalesced_ns`` (20 us: 1500 B at 600 Mbit/s) are taken as coalesced and left out; a window where
more than ``max_coalesced_share`` of the pairs are coalesced gives no estimate at all (the receiver's
clock saw batches, not the bottleneck); and the estimate never exceeds the fastest train of
``train_len`` consecutive arrivals in the window (a real bottleneck spacing holds over two gaps in a
row, a lone compressed gap does not; longer trains would miss the bottleneck's rate when the sender
has only two or three segments in flight).
"""

from __future__ import annotations

import numpy as np
import polars as pl

__all__ = ["dispersion_bins"]


def _mode_rate(rates_bps: np.ndarray, *, band: float, min_pairs: int, min_share: float) -> tuple[float, int] | None:
    """(rate at the densest log-rate band, samples in it), or None when no band is dense enough."""
    r = rates_bps[np.isfinite(rates_bps) & (rates_bps > 0)]
    if r.size < min_pairs:
        return None
    lg = np.sort(np.log(r))
    width = np.log1p(band)
    # For each sample, how many samples lie within `width` above it: the densest window's start.
    ends = np.searchsorted(lg, lg + width, side="right")
    counts = ends - np.arange(lg.size)
    # The fastest dense band, not simply the densest: an ACK-clocked sender with few packets in flight
    # spaces its segments at whole multiples of the bottleneck's transmission time, so bands at C/2,
    # C/3 ... can hold as many samples as the one at C; nothing but coalescing (left out above) makes
    # a dense band above C.
    need = max(min_pairs, min_share * lg.size, 0.5 * int(counts.max()))
    ok = np.nonzero(counts >= need)[0]
    if ok.size == 0:
        return None
    i = int(ok[-1])
    n = int(counts[i])
    return float(np.exp(np.median(lg[i:ends[i]]))), n


def dispersion_bins(arrivals: pl.DataFrame, *, t0_ns: int, bin_ns: int, n_bins: int, band: float = 0.04,
                    min_pairs: int = 6, min_share: float = 0.2, max_window_bins: int = 5,
                    max_gap_ns: int | None = None, coalesced_ns: int = 20_000, max_coalesced_share: float = 0.1,
                    train_len: int = 3) -> pl.DataFrame:
    """Per bin: ``bin``, ``disp_bps`` (capacity from dispersion, null where none), ``disp_pairs``
    (samples in the dense band). ``arrivals``: ``t_ns, wire_bytes`` (and optionally ``queued``) of the
    data received on one path (all its subflows: they share the bottleneck). Gaps longer than ``max_gap_ns`` (default: a bin)
    are not pairs."""
    max_gap = bin_ns if max_gap_ns is None else max_gap_ns
    a = arrivals.sort("t_ns")
    t = a["t_ns"].to_numpy()
    size = a["wire_bytes"].to_numpy().astype(np.float64)
    # Optional ``queued``: the segment is known to have waited at the bottleneck (one-way delays of a
    # capture pair); only such segments then make pair samples.
    queued = a["queued"].to_numpy().astype(bool) if "queued" in a.columns else np.ones(t.size, dtype=bool)
    out_rate = np.full(n_bins, np.nan)
    out_n = np.zeros(n_bins, dtype=np.int64)
    if t.size >= 2:
        gap = np.diff(t).astype(np.float64)
        coalesced = gap < coalesced_ns
        ok = ~coalesced & (gap <= max_gap) & queued[1:]
        rate = np.where(ok, size[1:] * 8e9 / np.where(gap > 0, gap, 1.0), np.nan)
        # Train rate ending at each arrival: bytes of the last train_len - 1 arrivals over their span.
        m = train_len - 1
        train = np.full(gap.size, np.nan)
        if gap.size >= m:
            csum = np.concatenate([[0.0], np.cumsum(size[1:])])
            span = (t[m:] - t[:-m]).astype(np.float64)
            train[m - 1:] = np.where(span > 0, (csum[m:] - csum[:-m]) * 8e9 / np.where(span > 0, span, 1.0), np.nan)
            train[m - 1:][span > max_gap] = np.nan
        b = (t[1:] - t0_ns) // bin_ns
        order = np.argsort(b, kind="stable")
        b_sorted = b[order]
        starts = np.searchsorted(b_sorted, np.arange(n_bins), side="left")
        stops = np.searchsorted(b_sorted, np.arange(n_bins), side="right")
        for k in range(n_bins):
            if starts[k] == stops[k]:
                continue
            for half in range(0, max_window_bins // 2 + 1):
                lo, hi = max(k - half, 0), min(k + half, n_bins - 1)
                idx = order[starts[lo]:stops[hi]]
                if coalesced[idx].mean() > max_coalesced_share:
                    break  # the receiver saw batches: its spacing says nothing about the bottleneck
                found = _mode_rate(rate[idx], band=band, min_pairs=min_pairs, min_share=min_share)
                if found is not None:
                    fastest = np.nanmax(train[idx]) if np.isfinite(train[idx]).any() else np.nan
                    out_rate[k] = found[0] if not np.isfinite(fastest) else min(found[0], float(fastest))
                    out_n[k] = found[1]
                    break
    return pl.DataFrame({
        "bin": np.arange(n_bins, dtype=np.int64),
        "disp_bps": pl.Series(out_rate).fill_nan(None),
        "disp_pairs": out_n,
    })
