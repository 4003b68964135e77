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

import polars as pl

from workbench.metrics._common import check_columns, select_conn, with_data_dir

__all__ = [
    "DEFAULT_BURST_GAP_NS",
    "burst_summary",
    "burstiness",
    "fast_subflows",
    "free_cwnd_series",
    "send_bursts",
]

DEFAULT_BURST_GAP_NS = 1_000_000  # 1 ms


def _ack_samples(samples: pl.DataFrame, conn: int | None) -> pl.DataFrame:
    check_columns(samples, ["t_ns", "kind", "conn", "subflow", "path", "cwnd_segments",
                            "inflight_segments", "srtt_ns"], what="Samples")
    return select_conn(samples, conn).filter(pl.col("kind") == "ack")


def fast_subflows(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Per connection, the fast subflow: lowest median srtt over its ACK samples (ties: lowest
    subflow index). Columns: conn, subflow, path, srtt_p50_ms."""
    return (
        _ack_samples(samples, conn)
        .filter(pl.col("srtt_ns").is_not_null())
        .group_by("conn", "subflow")
        .agg(pl.col("path").first(), (pl.col("srtt_ns").cast(pl.Float64).median() / 1e6).alias("srtt_p50_ms"))
        .sort("conn", "srtt_p50_ms", "subflow")
        .group_by("conn", maintain_order=True)
        .first()
        .sort("conn")
    )


def free_cwnd_series(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Free cwnd of the fast subflow at each ACK it receives: columns conn, subflow, path, t_ns,
    free_cwnd_segments (= max(cwnd_segments − inflight_segments, 0))."""
    fast = fast_subflows(samples, conn).select("conn", "subflow")
    return (
        _ack_samples(samples, conn)
        .join(fast, on=["conn", "subflow"], how="inner")
        .sort("conn", "t_ns")
        .select(
            "conn", "subflow", "path", "t_ns",
            (pl.col("cwnd_segments") - pl.col("inflight_segments").cast(pl.Float64))
            .clip(lower_bound=0.0).alias("free_cwnd_segments"),
        )
    )


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
    keys = ["conn", "subflow"]
    return (
        with_data_dir(select_conn(events, conn))
        .filter(pl.col("is_data_dir") & (pl.col("point") == "snd") & (pl.col("payload_bytes") > 0))
        .sort(*keys, "t_ns")
        .with_columns(
            (pl.col("t_ns").diff().over(keys).fill_null(gap_ns) >= gap_ns).cum_sum().over(keys).alias("burst")
        )
        .group_by(*keys, "burst")
        .agg(
            pl.col("path").first(),
            pl.col("t_ns").min().alias("t_start_ns"),
            pl.col("t_ns").max().alias("t_end_ns"),
            pl.len().cast(pl.Int64).alias("segments"),
            pl.col("payload_bytes").cast(pl.Int64).sum().alias("bytes"),
        )
        .sort(*keys, "t_start_ns")
        .select("conn", "subflow", "path", "t_start_ns", "t_end_ns", "segments", "bytes")
    )


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
