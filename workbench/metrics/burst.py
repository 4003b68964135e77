"""Burstiness of the fast subflow (STMS §5.1.2, seed 000) and back-to-back send bursts.

STMS: "We print the CWND free space of the fast sub-flow when it receives ACK. Since all schedulers try
to fill this free space, the peak value of CWND free space reflects the burst of fast path. The average
CWND free space throughout the running time is used as a metric of burstness of fast subflow."

* `free_cwnd_series` / `burstiness`: from SAMPLES rows with ``kind == "ack"``; the fast subflow is the
  one with the lowest median ``srtt_ns`` over its ACK samples; free cwnd = cwnd_segments −
  inflight_segments at each ACK, floored at 0 (after a window reduction in-flight can exceed cwnd;
  the free space is then nothing, not negative). Mean = plain average over ACK samples (one value per
  ACK, as STMS prints them), peak = maximum.
* `send_bursts`: from PacketEvents ``snd`` rows of the data direction, a burst is a maximal run of
  segments on one subflow whose inter-send gaps are all below ``gap_ns`` (default 1 ms). Sizes are
  counted in segments (rows; a TSO/GSO super-segment in a capture counts once) and bytes.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from workbench.metrics._common import (
    check_columns,
    codes,
    dense_key,
    int_array,
    mask_eq,
    masked_series,
    nullable_float,
    nullable_int,
    over_scalar,
    payload,
    polars_sort_order,
    select_conn,
    take,
    true_mask,
    with_data_dir,
)

__all__ = [
    "DEFAULT_BURST_GAP_NS",
    "burst_summary",
    "burstiness",
    "fast_subflows",
    "free_cwnd_series",
    "send_bursts",
]

DEFAULT_BURST_GAP_NS = 1_000_000  # 1 ms


def _ack_rows(samples: pl.DataFrame, conn: int | None) -> np.ndarray:
    """Positions of the ACK samples (of connection ``conn``)."""
    check_columns(samples, ["t_ns", "kind", "conn", "subflow", "path", "cwnd_segments",
                            "inflight_segments", "srtt_ns"], what="Samples")
    ack = mask_eq(samples["kind"], "ack")
    if conn is not None:
        ack &= samples["conn"].to_numpy() == conn
    return np.flatnonzero(ack)


def _fast(samples: pl.DataFrame, acks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`fast_subflows` of the ACK samples at positions ``acks``, as arrays: per connection (in conn
    order) the position of the fast subflow's first ACK sample with an srtt, and its srtt_p50_ms."""
    has_srtt, srtt_ns = nullable_int(samples["srtt_ns"])
    rows = acks[has_srtt[acks]]
    c, sf = samples["conn"].to_numpy()[rows], samples["subflow"].to_numpy()[rows]
    group = dense_key(c, sf)  # per (conn, subflow), numbered in that order
    k = int(group.max()) + 1 if len(group) else 0
    # Per group, the median of srtt as polars' group-by computes it over the Float64 values: the
    # "linear" 0.5-quantile of the sorted values, lower + 0.5 * (upper - lower) between the two middle
    # ones (not their mean, which can round differently).
    srtt = srtt_ns[rows].astype(np.float64)
    n = np.bincount(group, minlength=k)
    by_group = np.split(srtt[np.argsort(group, kind="stable")], np.cumsum(n)[:-1]) if k > 1 else [srtt][:k]
    middle = [np.partition(v, ((len(v) - 1) // 2, len(v) // 2)) for v in by_group]  # the two middle values
    lower = np.array([v[(len(v) - 1) // 2] for v in middle], np.float64)
    upper = np.array([v[len(v) // 2] for v in middle], np.float64)
    median = np.where(lower == upper, lower, 0.5 * (upper - lower) + lower)
    # / 1e6 on the aggregated column: as polars divides a column by a number (`over_scalar`).
    srtt_p50_ms = over_scalar(median, 1e6)
    first = np.full(k, len(rows), np.int64)  # the group's first row: its path
    np.minimum.at(first, group, np.arange(len(rows)))
    # Per connection the first by (srtt_p50_ms, subflow).
    g_conn, g_sf = c[first], sf[first]
    order = np.lexsort((g_sf, srtt_p50_ms, g_conn))
    best = order[np.r_[True, g_conn[order][1:] != g_conn[order][:-1]]] if k else order
    return rows[first[best]], srtt_p50_ms[best]


def fast_subflows(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Per connection, the fast subflow: lowest median srtt over its ACK samples (ties: lowest
    subflow index). Columns: conn, subflow, path, srtt_p50_ms.

    In numpy, the median as polars' group-by computes it; the polars formulation it replaced, a
    group-by and two sorts, is the oracle in tests/test_metrics_fast_burst.py (as is
    `free_cwnd_series`'s)."""
    at, srtt_p50_ms = _fast(samples, _ack_rows(samples, conn))
    out = take(samples, ["conn", "subflow", "path"], at)
    return pl.DataFrame([out["conn"].set_sorted(), out["subflow"], out["path"],  # sorted by conn: flagged
                         pl.Series("srtt_p50_ms", srtt_p50_ms, pl.Float64)])


def free_cwnd_series(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Free cwnd of the fast subflow at each ACK it receives: columns conn, subflow, path, t_ns,
    free_cwnd_segments (= max(cwnd_segments − inflight_segments, 0))."""
    rows = _ack_rows(samples, conn)
    fast_at, _ = _fast(samples, rows)
    conn_all, sf_all = samples["conn"].to_numpy(), samples["subflow"].to_numpy()
    c, sf = conn_all[rows], sf_all[rows]
    on_fast = np.zeros(len(rows), bool)
    for fc, fs in zip(conn_all[fast_at], sf_all[fast_at], strict=True):
        on_fast |= (c == fc) & (sf == fs)
    rows = rows[on_fast]
    rows = rows[polars_sort_order({"conn": (c[on_fast], samples["conn"].dtype),
                                   "t_ns": (int_array(samples["t_ns"])[rows], samples["t_ns"].dtype)})]
    sub = take(samples, ["conn", "subflow", "path", "t_ns"], rows)
    has_cwnd, cwnd = nullable_float(samples["cwnd_segments"])
    has_inflight, inflight = nullable_int(samples["inflight_segments"])
    free = cwnd[rows] - inflight[rows].astype(np.float64)
    free = np.where(free < 0.0, 0.0, free)  # polars' clip: NaN and -0.0 stay
    return pl.DataFrame([sub["conn"].set_sorted(), sub["subflow"], sub["path"], sub["t_ns"],
                         masked_series("free_cwnd_segments", free, ~(has_cwnd & has_inflight)[rows],
                                       pl.Float64())])


def burstiness(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """STMS burstiness of the fast subflow per connection: columns conn, subflow, path, n_acks,
    free_cwnd_mean_segments, free_cwnd_peak_segments. Empty without ACK samples."""
    return (
        free_cwnd_series(samples, conn)
        .group_by("conn", "subflow", "path")
        .agg(
            pl.len().cast(pl.Int64).alias("n_acks"),
            pl.col("free_cwnd_segments").mean().alias("free_cwnd_mean_segments"),
            pl.col("free_cwnd_segments").max().alias("free_cwnd_peak_segments"),
        )
        .sort("conn")
    )


def send_bursts(events: pl.DataFrame, conn: int | None = None, *,
                gap_ns: int = DEFAULT_BURST_GAP_NS) -> pl.DataFrame:
    """Back-to-back send bursts per subflow, from data-direction ``snd`` rows with payload.

    A new burst starts at a subflow's first segment and whenever the gap since the previous segment
    sent on the same subflow is >= ``gap_ns``. Columns: conn, subflow, path, t_start_ns, t_end_ns,
    segments, bytes. Empty when the sender was not observed.
    """
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "payload_bytes"])
    ev = with_data_dir(select_conn(events, conn))
    pay = payload(ev)
    rows = np.flatnonzero(true_mask(ev["is_data_dir"]) & mask_eq(ev["point"], "snd") & (pay > 0))
    c, sf, t = int_array(ev["conn"])[rows], int_array(ev["subflow"])[rows], int_array(ev["t_ns"])[rows]
    # In (conn, subflow, t_ns) order as polars' sort gives it; the order of equal times only matters
    # through the path of a burst's first segment, so not when each subflow has one path.
    by = polars_sort_order({"conn": (c, ev["conn"].dtype), "subflow": (sf, ev["subflow"].dtype),
                            "t_ns": (t, ev["t_ns"].dtype)},
                           ties_only_through=codes(ev["path"][rows])[0])
    rows, c, sf, t = rows[by], c[by], sf[by], t[by]
    # A new burst at a subflow's first segment and after every gap >= gap_ns.
    new = np.ones(len(rows), bool)
    new[1:] = (c[1:] != c[:-1]) | (sf[1:] != sf[:-1]) | (np.diff(t) >= gap_ns)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(rows))[:len(starts)] - 1
    return pl.DataFrame([
        pl.Series("conn", c[starts], ev["conn"].dtype).set_sorted(),  # sorted by it: flagged, as polars does
        pl.Series("subflow", sf[starts], ev["subflow"].dtype),
        ev["path"][rows[starts]],
        pl.Series("t_start_ns", t[starts], ev["t_ns"].dtype),
        pl.Series("t_end_ns", t[ends], ev["t_ns"].dtype),
        pl.Series("segments", ends - starts + 1, pl.Int64),
        pl.Series("bytes", np.add.reduceat(pay[rows], starts) if len(starts) else np.zeros(0, np.int64), pl.Int64),
    ])


def burst_summary(bursts: pl.DataFrame, by: tuple[str, ...] = ("conn", "subflow", "path")) -> pl.DataFrame:
    """Distribution of burst sizes (from `send_bursts`) grouped by ``by``: n_bursts,
    burst_segments_{mean,p50,p95,max}, burst_bytes_max."""
    s = pl.col("segments").cast(pl.Float64)
    return (
        bursts.group_by(*by)
        .agg(
            pl.len().cast(pl.Int64).alias("n_bursts"),
            s.mean().alias("burst_segments_mean"),
            s.quantile(0.5, "linear").alias("burst_segments_p50"),
            s.quantile(0.95, "linear").alias("burst_segments_p95"),
            pl.col("segments").max().alias("burst_segments_max"),
            pl.col("bytes").max().alias("burst_bytes_max"),
        )
        .sort(*by)
    )
