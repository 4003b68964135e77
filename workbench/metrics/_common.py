"""Shared helpers for the metrics: connection selection, the data direction, the time origin, and the
byte-range "first cover" computation that the OOO, goodput and application-delay metrics share.

Everything here is a pure function of a PacketEvents table (``workbench.capture.schema.PACKET_EVENTS``);
nothing knows whether the rows came from a capture or a replay.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from workbench.errors import InputError

__all__ = [
    "ACK",
    "INF_NS",
    "SYN",
    "check_columns",
    "data_direction",
    "data_directions",
    "first_cover",
    "ms",
    "opposite",
    "quantile_aggs",
    "select_conn",
    "start_times",
    "with_data_dir",
]

SYN = 0x002
ACK = 0x010

# Sentinel for "never" in time arithmetic (cum_max and max() treat it as larger than any real time);
# converted back to null before anything leaves the metrics package.
INF_NS = 2**62


def check_columns(df: pl.DataFrame, needed: Iterable[str], what: str = "PacketEvents") -> None:
    """Raise `InputError` naming the missing columns, instead of a polars error deep inside a metric."""
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise InputError(None, f"{what} table lacks column(s) {', '.join(missing)}")


def select_conn(df: pl.DataFrame, conn: int | None) -> pl.DataFrame:
    """The rows of connection ``conn`` (all connections when None)."""
    if conn is None:
        return df
    return df.filter(pl.col("conn") == conn)


def ms(expr: pl.Expr) -> pl.Expr:
    """ns -> ms as Float64."""
    return expr.cast(pl.Float64) / 1e6


def opposite(direction: str) -> str:
    return "s2c" if direction == "c2s" else "c2s"


def data_directions(events: pl.DataFrame) -> pl.DataFrame:
    """Per connection, the data direction: the ``dir`` carrying more payload bytes.

    Bytes are counted at one observation point only (the point with more rows of payload in that
    direction would double-count a replay or a capture pair), so we take, per (conn, dir), the maximum
    over points of the payload sum. Ties (including no payload at all) go to ``s2c``, the download
    direction, which is the common case for the captures we study.

    Returns columns ``conn`` (UInt32) and ``data_dir`` (String, "c2s" or "s2c").
    """
    check_columns(events, ["conn", "dir", "point", "payload_bytes"])
    per_point = (
        events.filter(pl.col("point") != "drop")
        .group_by("conn", "dir", "point")
        .agg(pl.col("payload_bytes").cast(pl.Int64).sum().alias("bytes"))
        .group_by("conn", "dir")
        .agg(pl.col("bytes").max())
    )
    wide = (
        per_point.with_columns(pl.col("dir").cast(pl.String))
        .pivot(on="dir", index="conn", values="bytes")
    )
    for d in ("c2s", "s2c"):
        if d not in wide.columns:
            wide = wide.with_columns(pl.lit(0, pl.Int64).alias(d))
    conns = events.select(pl.col("conn").unique())
    return (
        conns.join(wide, on="conn", how="left")
        .with_columns(pl.col("c2s").fill_null(0), pl.col("s2c").fill_null(0))
        .select(
            "conn",
            pl.when(pl.col("c2s") > pl.col("s2c")).then(pl.lit("c2s")).otherwise(pl.lit("s2c"))
            .alias("data_dir"),
        )
        .sort("conn")
    )


def data_direction(events: pl.DataFrame, conn: int) -> str:
    """The data direction ("c2s" or "s2c") of connection ``conn``: the ``dir`` with more payload bytes
    (counted at one observation point; ties go to "s2c")."""
    dd = data_directions(select_conn(events, conn))
    if dd.height == 0:
        raise InputError(None, f"no events for connection {conn}")
    return str(dd["data_dir"][0])


def with_data_dir(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` plus a boolean column ``is_data_dir`` (row travels in its connection's data direction)."""
    dd = data_directions(events)
    return events.join(dd, on="conn", how="left").with_columns(
        (pl.col("dir").cast(pl.String) == pl.col("data_dir")).alias("is_data_dir")
    )


def start_times(events: pl.DataFrame) -> pl.DataFrame:
    """Per connection, the time origin of goodput and completion time: the first observation of a SYN
    (any subflow, any point; the MP_CAPABLE SYN is the earliest) if the table has one, else the first
    observation of a data-direction payload segment. Columns ``conn``, ``start_ns``."""
    ev = with_data_dir(events)
    syn = (
        ev.filter((pl.col("flags").cast(pl.Int32) & SYN) != 0)
        .group_by("conn")
        .agg(pl.col("t_ns").min().alias("syn_ns"))
    )
    data = (
        ev.filter(pl.col("is_data_dir") & (pl.col("payload_bytes") > 0) & (pl.col("point") != "drop"))
        .group_by("conn")
        .agg(pl.col("t_ns").min().alias("data_ns"))
    )
    conns = events.select(pl.col("conn").unique())
    return (
        conns.join(syn, on="conn", how="left")
        .join(data, on="conn", how="left")
        .select("conn", pl.coalesce("syn_ns", "data_ns").alias("start_ns"))
        .sort("conn")
    )


def first_cover(intervals: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Which observation first covered each byte of a set of byte ranges.

    ``intervals`` has columns ``conn``, ``row_id`` (unique, and increasing in observation order among
    rows with equal ``t_ns``), ``t_ns``, ``s``, ``e`` (byte range [s, e), Int64, e > s).

    The ranges can overlap arbitrarily (a reinjection that re-segments data differently, a retransmission
    that coalesces two segments). We cut the DSN space at every range boundary into elementary pieces;
    every piece is either entirely inside or entirely outside each range, so "who first covered byte x"
    becomes "who first covered piece p", an exact, vectorised group-by over the exploded (row, piece)
    pairs. The explode is cheap in practice: a range spans as many pieces as there are boundaries
    inside it (1 for the usual non-overlapping or identically re-sent segments).

    Returns ``(rows, pieces)``:
      * rows: ``conn``, ``row_id``, ``i0`` (index of the piece starting at s), ``new_bytes`` (bytes
        this row was the first to cover; 0 for a pure duplicate);
      * pieces: ``conn``, ``piece``, ``piece_start``, ``piece_end``, ``a_ns`` (time of the first
        covering observation), ``owner`` (its row_id); only pieces that some range covers, sorted by
        (conn, piece). Uncovered gaps between pieces are detected by ``piece_start`` != previous end.
    """
    bounds = (
        pl.concat([intervals.select("conn", pl.col("s").alias("b")),
                   intervals.select("conn", pl.col("e").alias("b"))])
        .unique()
        .sort("conn", "b")
        .with_columns(
            pl.int_range(pl.len(), dtype=pl.Int64).over("conn").alias("idx"),
            pl.col("b").shift(-1).over("conn").alias("b_next"),
        )
    )
    idx = bounds.select("conn", "b", "idx")
    rows = (
        intervals.join(idx.rename({"b": "s", "idx": "i0"}), on=["conn", "s"], how="left")
        .join(idx.rename({"b": "e", "idx": "i1"}), on=["conn", "e"], how="left")
    )
    exploded = rows.select("conn", "row_id", "t_ns", pl.int_ranges("i0", "i1").alias("piece")).explode(
        "piece"
    )
    # The owner of a piece is its earliest observation; row_id breaks ties in observation order.
    pieces = (
        exploded.sort("conn", "piece", "t_ns", "row_id")
        .group_by("conn", "piece", maintain_order=True)
        .agg(pl.col("t_ns").first().alias("a_ns"), pl.col("row_id").first().alias("owner"))
        .join(
            bounds.select("conn", pl.col("idx").alias("piece"), pl.col("b").alias("piece_start"),
                          pl.col("b_next").alias("piece_end")),
            on=["conn", "piece"],
            how="left",
        )
        .sort("conn", "piece")
    )
    owned = pieces.group_by("conn", "owner").agg(
        (pl.col("piece_end") - pl.col("piece_start")).sum().alias("new_bytes")
    )
    rows_out = (
        rows.select("conn", "row_id", "i0")
        .join(owned.rename({"owner": "row_id"}), on=["conn", "row_id"], how="left")
        .with_columns(pl.col("new_bytes").fill_null(0))
    )
    return rows_out, pieces


def quantile_aggs(col: str, prefix: str, suffix: str = "", scale: float = 1.0, *,
                  with_count: bool = True) -> list[pl.Expr]:
    """Aggregations ``{prefix}{stat}{suffix}`` of ``col`` / ``scale`` for stat in n, min, mean, p50, p95,
    p99, max (percentiles interpolate linearly between order statistics)."""
    c = pl.col(col).cast(pl.Float64) / scale
    out = [
        c.min().alias(f"{prefix}min{suffix}"),
        c.mean().alias(f"{prefix}mean{suffix}"),
        c.quantile(0.5, "linear").alias(f"{prefix}p50{suffix}"),
        c.quantile(0.95, "linear").alias(f"{prefix}p95{suffix}"),
        c.quantile(0.99, "linear").alias(f"{prefix}p99{suffix}"),
        c.max().alias(f"{prefix}max{suffix}"),
    ]
    if with_count:
        out.insert(0, pl.col(col).count().cast(pl.Int64).alias(f"{prefix}n"))
    return out
