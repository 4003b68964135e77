"""The numpy rewrites of the burst metrics (`workbench.metrics.burst`: the fast subflow, its free cwnd
at each ACK and STMS burstiness from Samples; back-to-back send bursts from PacketEvents) against the
polars formulations they replaced, kept here verbatim as oracles, on random tables."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_metrics_fast_common import (
    assert_same_frame,
    old_with_data_dir,
    packet_events,
    samples_tables,
)

from workbench.capture.schema import PACKET_EVENTS, SAMPLES
from workbench.metrics._common import check_columns, select_conn, with_data_dir
from workbench.metrics.burst import (
    DEFAULT_BURST_GAP_NS,
    burst_summary,
    burstiness,
    fast_subflows,
    free_cwnd_series,
    send_bursts,
)

# ---- the polars formulations replaced (oracles, verbatim but for names) ------------------------------


def old_ack_samples(samples: pl.DataFrame, conn: int | None) -> pl.DataFrame:
    check_columns(samples, ["t_ns", "kind", "conn", "subflow", "path", "cwnd_segments",
                            "inflight_segments", "srtt_ns"], what="Samples")
    return select_conn(samples, conn).filter(pl.col("kind") == "ack")


def old_fast_subflows(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Per connection, the fast subflow: lowest median srtt over its ACK samples (ties: lowest
    subflow index). Columns: conn, subflow, path, srtt_p50_ms."""
    return (
        old_ack_samples(samples, conn)
        .filter(pl.col("srtt_ns").is_not_null())
        .group_by("conn", "subflow")
        .agg(pl.col("path").first(), (pl.col("srtt_ns").cast(pl.Float64).median() / 1e6).alias("srtt_p50_ms"))
        .sort("conn", "srtt_p50_ms", "subflow")
        .group_by("conn", maintain_order=True)
        .first()
        .sort("conn")
    )


def old_free_cwnd_series(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Free cwnd of the fast subflow at each ACK it receives: columns conn, subflow, path, t_ns,
    free_cwnd_segments (= max(cwnd_segments − inflight_segments, 0))."""
    fast = old_fast_subflows(samples, conn).select("conn", "subflow")
    return (
        old_ack_samples(samples, conn)
        .join(fast, on=["conn", "subflow"], how="inner")
        .sort("conn", "t_ns")
        .select(
            "conn", "subflow", "path", "t_ns",
            (pl.col("cwnd_segments") - pl.col("inflight_segments").cast(pl.Float64))
            .clip(lower_bound=0.0).alias("free_cwnd_segments"),
        )
    )


def old_burstiness(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """`burstiness` itself (a polars group-by, not rewritten) over the polars formulation of
    `free_cwnd_series`."""
    import workbench.metrics.burst as burst_module

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(burst_module, "free_cwnd_series", old_free_cwnd_series)
        return burstiness(samples, conn)


def old_send_bursts(events: pl.DataFrame, conn: int | None = None, *,
                gap_ns: int = DEFAULT_BURST_GAP_NS) -> pl.DataFrame:
    """Back-to-back send bursts per subflow, from data-direction ``snd`` rows with payload.

    A new burst starts at a subflow's first segment and whenever the gap since the previous segment
    sent on the same subflow is >= ``gap_ns``. Columns: conn, subflow, path, t_start_ns, t_end_ns,
    segments, bytes. Empty when the sender was not observed.
    """
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "payload_bytes"])
    keys = ["conn", "subflow"]
    return (
        old_with_data_dir(select_conn(events, conn))
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


# ---- tests ---------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(samples_tables(), st.sampled_from([None, 0, 1, 2]))
def test_fast_subflow_free_cwnd_and_burstiness_match_the_polars_formulation(sm: pl.DataFrame,
                                                                            conn: int | None) -> None:
    assert_same_frame(fast_subflows(sm, conn), old_fast_subflows(sm, conn))
    assert_same_frame(free_cwnd_series(sm, conn), old_free_cwnd_series(sm, conn))
    assert_same_frame(burstiness(sm, conn), old_burstiness(sm, conn))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 1), st.integers(0, 4), st.integers(0, 9)),
                max_size=60))
def test_replay_like_samples(rows: list[tuple[int, int, int, int]]) -> None:
    # One connection, time-sorted and flagged so (as a replay's Samples come), many ACKs at one time.
    sm = pl.DataFrame(
        [{"t_ns": t, "kind": "ack", "conn": 0, "subflow": sf, "path": ["wifi", "lte"][sf],
          "cwnd_segments": 10.0 + sf, "inflight_segments": k, "srtt_ns": 10_000_000 * (sf + 1) + k,
          "snd_queue_bytes": 0, "snd_buf_bytes": 0, "rcv_ooo_bytes": 0, "rcv_buf_bytes": 0}
         for t, sf, _, k in sorted(rows)], schema=SAMPLES,
    ).with_columns(pl.col("t_ns").set_sorted(), pl.col("conn").set_sorted())
    assert_same_frame(free_cwnd_series(sm, 0), old_free_cwnd_series(sm, 0))
    assert_same_frame(burstiness(sm, 0), old_burstiness(sm, 0))


@settings(max_examples=150, deadline=None)
@given(packet_events(consistent_paths=True), st.sampled_from([DEFAULT_BURST_GAP_NS, 1, 3, 10]))
def test_send_bursts_match_the_polars_formulation(ev: pl.DataFrame, gap_ns: int) -> None:
    got, want = send_bursts(ev, gap_ns=gap_ns), old_send_bursts(ev, gap_ns=gap_ns)
    assert_same_frame(got, want)
    assert_same_frame(burst_summary(got, by=("conn",)), burst_summary(want, by=("conn",)))
    assert_same_frame(send_bursts(with_data_dir(ev), 0, gap_ns=gap_ns), old_send_bursts(ev, 0, gap_ns=gap_ns))


@settings(max_examples=100, deadline=None)
@given(packet_events(consistent_paths=False), st.sampled_from([1, 3, 10]))
def test_send_bursts_with_paths_changing_within_a_subflow(ev: pl.DataFrame, gap_ns: int) -> None:
    # Not a table the workbench builds, but then the order of equal times decides a burst's path:
    # polars' own order is kept.
    assert_same_frame(send_bursts(ev, gap_ns=gap_ns), old_send_bursts(ev, gap_ns=gap_ns))


def test_empty() -> None:
    sm = pl.DataFrame(schema=SAMPLES)
    assert_same_frame(burstiness(sm), old_burstiness(sm))
    ev = pl.DataFrame(schema=PACKET_EVENTS)
    assert_same_frame(send_bursts(ev), old_send_bursts(ev))
