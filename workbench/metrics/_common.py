"""Shared helpers for the metrics: connection selection, the data direction, the time origin, and the
byte-range "first cover" computation that the OOO, goodput and application-delay metrics share.

Everything here is a pure function of a PacketEvents table (``workbench.capture.schema.PACKET_EVENTS``);
nothing knows whether the rows came from a capture or a replay.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
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
    if "data_dir" in events.columns:  # tagged by `with_data_dir`: per connection, already decided
        return events.select("conn", pl.col("data_dir").cast(pl.String)).unique("conn").sort("conn")
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
    """``events`` plus the columns ``data_dir`` (its connection's data direction) and ``is_data_dir``
    (the row travels in it). A table that has them already is returned as is: a caller deriving many
    metrics from one connection tags it once (each metric function tags what it is given, and deciding
    the direction is a group-by over every row)."""
    if "is_data_dir" in events.columns and "data_dir" in events.columns:
        return events
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
    rows with equal ``t_ns``), ``t_ns``, ``s``, ``e`` (byte range [s, e), Int64, e > s; no nulls).

    The ranges can overlap arbitrarily (a reinjection that re-segments data differently, a retransmission
    that coalesces two segments). We cut the DSN space at every range boundary into elementary pieces;
    every piece is either entirely inside or entirely outside each range, so "who first covered byte x"
    becomes "who first covered piece p": the earliest (t_ns, row_id) over the (row, piece) pairs. A
    range spans as many pieces as there are boundaries inside it (1 for the usual non-overlapping or
    identically re-sent segments), so the pairs are about as many as the rows.

    Returns ``(rows, pieces)``:
      * rows: ``conn``, ``row_id``, ``i0`` (index of the piece starting at s), ``new_bytes`` (bytes
        this row was the first to cover; 0 for a pure duplicate), in the order of ``intervals``;
      * pieces: ``conn``, ``piece``, ``a_ns`` (time of the first covering observation), ``owner`` (its
        row_id), ``piece_start``, ``piece_end``; only pieces that some range covers, sorted by
        (conn, piece). Piece p of a connection spans its p-th and (p+1)-th distinct boundary, so
        uncovered gaps show as ``piece_start`` != previous ``piece_end``.

    In numpy, connection by connection: the same computation as a polars explode / sort / group-by /
    join chain (kept in tests/test_metrics_first_cover.py as the oracle it is checked against), which
    cost a report more than any other metric, for the overhead of its dozen steps more than their work.
    """
    check_columns(intervals, ["conn", "row_id", "t_ns", "s", "e"], "intervals")
    conn_dtype = intervals.schema["conn"]
    conn = intervals["conn"].to_numpy()
    row_id = intervals["row_id"].cast(pl.Int64).to_numpy()
    t_ns = intervals["t_ns"].cast(pl.Int64).to_numpy()
    s = intervals["s"].cast(pl.Int64).to_numpy()
    e = intervals["e"].cast(pl.Int64).to_numpy()
    if (e <= s).any():
        raise ValueError("first_cover: every range needs e > s")
    i0_out = np.zeros(len(s), np.int64)
    new_bytes_out = np.zeros(len(s), np.int64)
    pieces: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for c in np.unique(conn):
        at = np.flatnonzero(conn == c)
        cs, ce, ct, cr = s[at], e[at], t_ns[at], row_id[at]
        bounds = np.unique(np.concatenate([cs, ce]))
        i0 = np.searchsorted(bounds, cs)
        n_pieces = np.searchsorted(bounds, ce) - i0
        # One (row, piece) pair per piece a row spans: the explode.
        pair_row = np.repeat(np.arange(len(at)), n_pieces)
        pair_piece = (np.arange(len(pair_row)) - np.repeat(np.cumsum(n_pieces) - n_pieces, n_pieces)
                      + i0[pair_row])
        # Sorted by (piece, t_ns, row_id), the first pair of each piece is its owner.
        order = np.lexsort((cr[pair_row], ct[pair_row], pair_piece))
        sorted_piece = pair_piece[order]
        first = np.ones(len(order), bool)
        first[1:] = sorted_piece[1:] != sorted_piece[:-1]
        piece, owner = sorted_piece[first], pair_row[order][first]
        start, end = bounds[piece], bounds[piece + 1]
        owned = np.zeros(len(at), np.int64)
        np.add.at(owned, owner, end - start)
        i0_out[at], new_bytes_out[at] = i0, owned
        pieces.append((int(c), piece, ct[owner], cr[owner], start, end))
    rows_out = pl.DataFrame({"conn": pl.Series(conn, dtype=conn_dtype), "row_id": row_id, "i0": i0_out,
                             "new_bytes": new_bytes_out})
    pieces_out = pl.DataFrame(
        {"conn": pl.Series(np.concatenate([np.full(len(p[1]), p[0]) for p in pieces]) if pieces else [],
                           dtype=conn_dtype),
         **{name: np.concatenate([p[k] for p in pieces]) if pieces else np.zeros(0, np.int64)
            for k, name in enumerate(("piece", "a_ns", "owner", "piece_start", "piece_end"), start=1)}},
        schema_overrides={"piece": pl.Int64, "a_ns": pl.Int64, "owner": pl.Int64, "piece_start": pl.Int64,
                          "piece_end": pl.Int64},
    )
    return rows_out, pieces_out


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
