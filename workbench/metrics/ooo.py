"""MPTCP-level out-of-order (head-of-line) delay of every data segment, and the receive OOO queue.

Models STMS §5.1.1 (seed 000): "The OOO delay of a packet is defined as the time difference between
when a packet arrives at the receiver to when the packet can be submitted to the application (i.e.,
all packets with the smaller data sequence numbers have already arrived)." And OTIAS §V.A / Fig. 5
(seed 001): the size of the MPTCP-level out-of-order queue over time.

Inputs are the receiver-side rows of the data direction (``point == "rcv"``, ``dsn`` not null,
``payload_bytes > 0``): a capture at the receiver, a capture pair, or a replay. A capture taken only at
the sender has no such rows and yields empty tables.

Definitions (byte ranges, not segment numbers, because a reinjection or a retransmission can carry a
DSN range that overlaps several original segments or part of one):

* A row covers DSN bytes [dsn, dsn + payload_bytes). Rows are taken in arrival order (``t_ns``, ties
  in table order). A row's *new bytes* are the bytes no earlier row covered. A row with no new bytes is
  a *duplicate* (retransmission / reinjection that arrived after the original): it is counted but not
  part of the per-segment table.
* A(x) = arrival time of the first row covering byte x. The *in-order time* of DSN d is
  T(d) = max_{origin <= x < d} A(x): the moment every byte below d has arrived. ``origin`` is the
  lowest DSN observed (0 unless the capture missed the start).
* A segment (row with new bytes) is deliverable at t_deliverable = max(t_arrival, T(dsn)), and its
  OOO delay is t_deliverable − t_arrival >= 0.
* Bytes never observed (a *hole*, e.g. a packet the capture dropped) would block everything above
  them forever. When the receiver's own DATA_ACKs are in the table (opposite direction, ``point ==
  "snd"``), a hole is taken as filled at the first DATA_ACK at or above its end (the receiver says it
  had those bytes by then; we assume ``data_ack`` counts bytes like ``dsn``, i.e. is the next expected
  relative DSN). Otherwise segments above the hole get a null ``t_deliverable``.

Implementation: `first_cover` cuts DSN space into elementary pieces at every range boundary, so the
first arrival per piece and the prefix maximum T over pieces are plain group-by / cum_max operations.
"""

from __future__ import annotations

import polars as pl

from workbench.metrics._common import (
    INF_NS,
    check_columns,
    first_cover,
    ms,
    quantile_aggs,
    select_conn,
    with_data_dir,
)

__all__ = [
    "ooo_cdf",
    "ooo_queue_series",
    "ooo_segments",
    "ooo_summary",
]

_SEGMENT_SCHEMA: dict[str, pl.DataType] = {
    "conn": pl.UInt32(),
    "t_arrival_ns": pl.Int64(),
    "t_deliverable_ns": pl.Int64(),
    "ooo_delay_ns": pl.Int64(),
    "dsn": pl.Int64(),
    "payload_bytes": pl.Int64(),
    "new_bytes": pl.Int64(),
    "subflow": pl.UInt32(),
    "path": pl.String(),
    "is_duplicate": pl.Boolean(),
}


def _receiver_rows(events: pl.DataFrame) -> pl.DataFrame:
    ev = with_data_dir(events)
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


def _data_ack_reach(events: pl.DataFrame) -> pl.DataFrame:
    """Per connection, the first time the receiver's cumulative DATA_ACK reached each value: columns
    conn, ack (Int64, strictly increasing per conn), t_ack_ns. From the receiver's own sent ACKs."""
    ev = with_data_dir(events)
    return (
        ev.filter(~pl.col("is_data_dir") & (pl.col("point") == "snd") & pl.col("data_ack").is_not_null())
        .sort("conn", "t_ns")
        .select("conn", "t_ns", pl.col("data_ack").cast(pl.Int64).cum_max().over("conn").alias("ack"))
        .group_by("conn", "ack")
        .agg(pl.col("t_ns").min().alias("t_ack_ns"))
        .sort("conn", "ack")
    )


def _segments_all(events: pl.DataFrame) -> pl.DataFrame:
    """Every receiver-side data row with its new bytes and deliverable time (duplicates included)."""
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "payload_bytes", "dsn",
                           "data_ack", "flags"])
    rows = _receiver_rows(events)
    if rows.height == 0:
        return pl.DataFrame(schema=_SEGMENT_SCHEMA)
    cover_rows, pieces = first_cover(rows.select("conn", "row_id", "t_ns", "s", "e"))

    # Holes between covered pieces: filled when a DATA_ACK reaches the hole's end, else never.
    pieces = pieces.with_columns(
        pl.col("piece_end").shift(1).over("conn").alias("prev_end"),
        pl.col("a_ns").shift(1).over("conn").alias("prev_a_ns"),
    ).with_columns((pl.col("prev_end").is_not_null() & (pl.col("piece_start") > pl.col("prev_end")))
                   .alias("hole_before"))
    acks = _data_ack_reach(events)
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


def ooo_segments(events: pl.DataFrame, conn: int | None = None, *,
                 include_duplicates: bool = False) -> pl.DataFrame:
    """Per-segment MPTCP-level OOO delay at the receiver (STMS §5.1.1), in arrival order.

    Columns: conn, t_arrival_ns, t_deliverable_ns (null = never deliverable within the trace),
    ooo_delay_ns, dsn, payload_bytes, new_bytes (bytes first brought by this segment), subflow, path,
    is_duplicate. Duplicates (no new bytes) are left out unless ``include_duplicates``.
    See the module docstring for the exact definitions.
    """
    seg = _segments_all(select_conn(events, conn))
    return seg if include_duplicates else seg.filter(~pl.col("is_duplicate"))


def summarize_segments(seg_all: pl.DataFrame) -> pl.DataFrame:
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


def ooo_summary(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """OOO delay summary per connection: n_segments, n_duplicates, duplicate_bytes, unique_bytes,
    n_undeliverable, ooo_delay_{min,mean,p50,p95,p99,max}_ms over deliverable segments, and
    ooo_fraction (share of segments with a positive OOO delay). Percentiles interpolate linearly."""
    return summarize_segments(ooo_segments(events, conn, include_duplicates=True))


def ooo_cdf(events: pl.DataFrame, conn: int | None = None, *, max_points: int | None = 2000) -> pl.DataFrame:
    """Empirical CDF of the per-segment OOO delay, for plotting: columns conn, delay_ms, cdf (fraction
    of deliverable segments with delay <= delay_ms). With ``max_points``, each connection's CDF is
    thinned to about that many evenly spaced ranks (first and last kept)."""
    return cdf_from_segments(ooo_segments(events, conn), max_points=max_points)


def cdf_from_segments(seg: pl.DataFrame, *, max_points: int | None = 2000) -> pl.DataFrame:
    """`ooo_cdf` from precomputed segments (duplicates are left out)."""
    seg = seg.filter(~pl.col("is_duplicate") & pl.col("t_deliverable_ns").is_not_null())
    cdf = (
        seg.sort("conn", "ooo_delay_ns")
        .select(
            "conn",
            ms(pl.col("ooo_delay_ns")).alias("delay_ms"),
            ((pl.int_range(pl.len()).over("conn") + 1) / pl.len().over("conn")).alias("cdf"),
            pl.int_range(pl.len()).over("conn").alias("_rank"),
            pl.len().over("conn").alias("_n"),
        )
    )
    if max_points is not None and max_points > 1:
        step = ((pl.col("_n") + max_points - 1) // max_points).clip(lower_bound=1)
        cdf = cdf.filter(((pl.col("_rank") % step) == 0) | (pl.col("_rank") == pl.col("_n") - 1))
    return cdf.select("conn", "delay_ms", "cdf")


def queue_from_segments(seg: pl.DataFrame) -> pl.DataFrame:
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


def ooo_queue_series(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """MPTCP-level receive out-of-order queue over time (OTIAS Fig. 5): bytes that have arrived but are
    not yet deliverable in order. A step series (columns conn, t_ns, ooo_bytes): the value holds from
    ``t_ns`` until the next row. Each segment adds its new bytes at its arrival and removes them at its
    deliverable time; bytes stuck behind a never-filled hole stay in the queue."""
    return queue_from_segments(ooo_segments(events, conn))
