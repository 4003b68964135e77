"""The numpy rewrites of the OOO metrics (`workbench.metrics.ooo`: the per-segment table every goodput,
OOO and application-delay figure starts from, its summary, and the receive OOO queue) against the
polars formulations they replaced, kept here verbatim as oracles, on random PacketEvents tables."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from test_metrics_fast_common import assert_same_frame, old_with_data_dir, packet_events
from test_metrics_first_cover import polars_first_cover

from workbench.capture.schema import PACKET_EVENTS
from workbench.metrics._common import INF_NS, check_columns, quantile_aggs, with_data_dir
from workbench.metrics.ooo import (
    _SEGMENT_SCHEMA,
    _segments_all,
    ooo_queue_series,
    ooo_segments,
    ooo_summary,
    queue_from_segments,
    summarize_segments,
)

# ---- the polars formulations replaced (oracles, verbatim but for names) ------------------------------


def old_receiver_rows(events: pl.DataFrame) -> pl.DataFrame:
    ev = old_with_data_dir(events)
    return (
        ev.with_row_index("row_id")
        .filter(
            pl.col("is_data_dir")
            & (pl.col("point") == "rcv")
            & pl.col("dsn").is_not_null()
            & (pl.col("payload_bytes") > 0)
        )
        .select(
            "conn",
            pl.col("row_id").cast(pl.Int64),
            "t_ns",
            pl.col("dsn").cast(pl.Int64).alias("s"),
            (pl.col("dsn").cast(pl.Int64) + pl.col("payload_bytes").cast(pl.Int64)).alias("e"),
            "subflow",
            "path",
        )
    )


def old_data_ack_reach(events: pl.DataFrame) -> pl.DataFrame:
    """Per connection, the first time the receiver's cumulative DATA_ACK reached each value: columns
    conn, ack (Int64, strictly increasing per conn), t_ack_ns. From the receiver's own sent ACKs."""
    ev = old_with_data_dir(events)
    return (
        ev.filter(~pl.col("is_data_dir") & (pl.col("point") == "snd") & pl.col("data_ack").is_not_null())
        .sort("conn", "t_ns")
        .select("conn", "t_ns", pl.col("data_ack").cast(pl.Int64).cum_max().over("conn").alias("ack"))
        .group_by("conn", "ack")
        .agg(pl.col("t_ns").min().alias("t_ack_ns"))
        .sort("conn", "ack")
    )


def old_segments_all(events: pl.DataFrame) -> pl.DataFrame:
    """Every receiver-side data row with its new bytes and deliverable time (duplicates included)."""
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "payload_bytes", "dsn",
                           "data_ack", "flags"])
    rows = old_receiver_rows(events)
    if rows.height == 0:
        return pl.DataFrame(schema=_SEGMENT_SCHEMA)
    cover_rows, pieces = polars_first_cover(rows.select("conn", "row_id", "t_ns", "s", "e"))

    # Holes between covered pieces: filled when a DATA_ACK reaches the hole's end, else never.
    pieces = pieces.with_columns(
        pl.col("piece_end").shift(1).over("conn").alias("prev_end"),
        pl.col("a_ns").shift(1).over("conn").alias("prev_a_ns"),
    ).with_columns((pl.col("prev_end").is_not_null() & (pl.col("piece_start") > pl.col("prev_end")))
                   .alias("hole_before"))
    acks = old_data_ack_reach(events)
    if acks.height:
        pieces = pieces.sort("conn", "piece_start").join_asof(
            acks, left_on="piece_start", right_on="ack", by="conn", strategy="forward",
            check_sortedness=False,
        )
    else:
        pieces = pieces.with_columns(pl.lit(None, pl.Int64).alias("t_ack_ns"))
    pieces = (
        pieces.sort("conn", "piece")
        .with_columns(
            pl.when(pl.col("hole_before")).then(pl.col("t_ack_ns").fill_null(INF_NS))
            .otherwise(pl.lit(-INF_NS)).alias("hole_ns")
        )
        # barrier(j): latest time among the bytes just below piece j (previous piece, hole before it);
        # T(piece_start j) is the running maximum of the barriers over DSN order.
        .with_columns(
            pl.max_horizontal(pl.col("prev_a_ns").fill_null(-INF_NS), "hole_ns")
            .cum_max().over("conn").alias("t_inorder_ns")
        )
        .select("conn", pl.col("piece").alias("i0"), "t_inorder_ns")
    )
    out = (
        rows.join(cover_rows, on=["conn", "row_id"], how="left")
        .join(pieces, on=["conn", "i0"], how="left")
        .sort("conn", "t_ns", "row_id")
        .with_columns(pl.max_horizontal("t_ns", "t_inorder_ns").alias("t_del"))
        # Duplicates bring nothing to deliver: no deliverable time, no OOO delay.
        .with_columns(pl.when((pl.col("t_del") >= INF_NS) | (pl.col("new_bytes") == 0)).then(None)
                      .otherwise(pl.col("t_del")).alias("t_deliverable_ns"))
        .select(
            "conn",
            pl.col("t_ns").alias("t_arrival_ns"),
            "t_deliverable_ns",
            (pl.col("t_deliverable_ns") - pl.col("t_ns")).alias("ooo_delay_ns"),
            pl.col("s").alias("dsn"),
            (pl.col("e") - pl.col("s")).alias("payload_bytes"),
            pl.col("new_bytes").cast(pl.Int64),
            "subflow",
            "path",
            (pl.col("new_bytes") == 0).alias("is_duplicate"),
        )
    )
    return out.cast(_SEGMENT_SCHEMA)  # type: ignore[arg-type]


def old_summarize_segments(seg_all: pl.DataFrame) -> pl.DataFrame:
    """OOO summary per connection from `ooo_segments(..., include_duplicates=True)`."""
    firsts = seg_all.filter(~pl.col("is_duplicate"))
    delivered = firsts.filter(pl.col("t_deliverable_ns").is_not_null())
    counts = seg_all.group_by("conn").agg(
        (~pl.col("is_duplicate")).sum().cast(pl.Int64).alias("n_segments"),
        pl.col("is_duplicate").sum().cast(pl.Int64).alias("n_duplicates"),
        pl.col("payload_bytes").filter(pl.col("is_duplicate")).sum().cast(pl.Int64)
        .alias("duplicate_bytes"),
        pl.col("new_bytes").sum().cast(pl.Int64).alias("unique_bytes"),
        (~pl.col("is_duplicate") & pl.col("t_deliverable_ns").is_null()).sum().cast(pl.Int64)
        .alias("n_undeliverable"),
    )
    stats = delivered.group_by("conn").agg(
        *quantile_aggs("ooo_delay_ns", "ooo_delay_", "_ms", 1e6, with_count=False),
        (pl.col("ooo_delay_ns") > 0).mean().alias("ooo_fraction"),
    )
    return counts.join(stats, on="conn", how="left").sort("conn")


def old_queue_from_segments(seg: pl.DataFrame) -> pl.DataFrame:
    """Receive OOO queue step series from (non-duplicate) segments; see `ooo_queue_series`."""
    firsts = seg.filter(~pl.col("is_duplicate"))
    plus = firsts.select("conn", pl.col("t_arrival_ns").alias("t_ns"), pl.col("new_bytes").alias("delta"))
    minus = firsts.filter(pl.col("t_deliverable_ns").is_not_null()).select(
        "conn", pl.col("t_deliverable_ns").alias("t_ns"), (-pl.col("new_bytes")).alias("delta")
    )
    return (
        pl.concat([plus, minus])
        .group_by("conn", "t_ns")
        .agg(pl.col("delta").sum())
        .sort("conn", "t_ns")
        .with_columns(pl.col("delta").cum_sum().over("conn").alias("ooo_bytes"))
        # Drop steps that do not change the level (segments delivered on arrival), keeping the first.
        .filter((pl.col("delta") != 0) | (pl.int_range(pl.len()).over("conn") == 0))
        .select("conn", "t_ns", "ooo_bytes")
    )


# ---- tests ---------------------------------------------------------------------------------------------


def _check(ev: pl.DataFrame) -> None:
    seg = _segments_all(ev)
    want = old_segments_all(ev)
    assert_same_frame(seg, want)
    # The rest from the same segments (the report's path: `Prepared`), and the public functions.
    assert_same_frame(summarize_segments(seg), old_summarize_segments(want))
    firsts = seg.filter(~pl.col("is_duplicate"))
    assert_same_frame(queue_from_segments(firsts), old_queue_from_segments(want.filter(~pl.col("is_duplicate"))))
    assert_same_frame(queue_from_segments(seg), old_queue_from_segments(want))
    assert_same_frame(ooo_summary(ev), old_summarize_segments(want))
    assert_same_frame(ooo_queue_series(ev), old_queue_from_segments(want.filter(~pl.col("is_duplicate"))))


@settings(max_examples=200, deadline=None)
@given(packet_events())
def test_segments_summary_and_queue_match_the_polars_formulation(ev: pl.DataFrame) -> None:
    _check(ev)
    _check(with_data_dir(ev))  # as `prepare` hands it over: tagged


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 12), st.sampled_from([0, 10, 20, 30, 40]),
                          st.sampled_from([10, 20]), st.integers(0, 1), st.booleans()),
                min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 1), st.integers(0, 14), st.sampled_from([0, 10, 20, 30, 50, 60])),
                max_size=10))
def test_receiver_shapes(segs: list[tuple[int, int, int, int, int, bool]],
                         acks: list[tuple[int, int, int]]) -> None:
    # What a receiver sees: MSS-sized segments on two subflows, re-sent identically or coalesced,
    # holes, equal arrival times, and its own cumulative DATA_ACKs filling holes.
    rows = [{"t_ns": t, "conn": c, "subflow": sf, "path": ["wifi", "lte"][sf], "dir": "s2c", "point": "rcv",
             "seq": 1, "ack": 1, "flags": 0x010, "payload_bytes": n, "frame_bytes": n + 52, "rwnd_bytes": 1,
             "dsn": d, "data_ack": None, "data_fin": False, "is_retrans": r, "is_reinject": False,
             "ts_val": None, "ts_ecr": None, "owd_ns": None} for c, t, d, n, sf, r in segs]
    rows += [{"t_ns": t, "conn": c, "subflow": 0, "path": "wifi", "dir": "c2s", "point": "snd", "seq": 1,
              "ack": 1, "flags": 0x010, "payload_bytes": 0, "frame_bytes": 52, "rwnd_bytes": 1, "dsn": None,
              "data_ack": a, "data_fin": False, "is_retrans": False, "is_reinject": False, "ts_val": None,
              "ts_ecr": None, "owd_ns": None} for c, t, a in acks]
    _check(pl.DataFrame(rows, schema=PACKET_EVENTS))


def test_no_receiver_rows() -> None:
    ev = pl.DataFrame(schema=PACKET_EVENTS)
    _check(ev)
    assert ooo_segments(ev).schema == _SEGMENT_SCHEMA
