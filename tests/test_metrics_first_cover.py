"""`workbench.metrics._common.first_cover` (numpy, connection by connection) against the polars
explode / sort / group-by formulation it replaced, kept here as an independent oracle, over random
byte ranges: overlapping, re-segmented, identical, several connections, equal times; and on one
worked example."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.metrics._common import first_cover


def polars_first_cover(intervals: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`first_cover` as it was written in polars (explode the (row, piece) pairs, sort, first per piece)."""
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


def _frame(rows: list[tuple[int, int, int, int]]) -> pl.DataFrame:
    """(conn, t_ns, s, length) rows; row_id = position (increasing in observation order)."""
    return pl.DataFrame(
        {"conn": [r[0] for r in rows], "row_id": list(range(len(rows))), "t_ns": [r[1] for r in rows],
         "s": [r[2] for r in rows], "e": [r[2] + r[3] for r in rows]},
        schema={"conn": pl.UInt32, "row_id": pl.Int64, "t_ns": pl.Int64, "s": pl.Int64, "e": pl.Int64},
    )


def _same(intervals: pl.DataFrame) -> None:
    rows, pieces = first_cover(intervals)
    want_rows, want_pieces = polars_first_cover(intervals)
    assert rows.schema == want_rows.schema
    assert pieces.schema == want_pieces.schema
    assert rows.sort("conn", "row_id").equals(want_rows.sort("conn", "row_id"))
    assert pieces.equals(want_pieces)  # both sorted by (conn, piece)
    assert rows.select("row_id").equals(intervals.select("row_id"))  # in the input's order


_ranges = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 60), st.integers(1, 25)),
    min_size=1, max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_ranges)
def test_matches_polars_oracle_on_random_ranges(rows: list[tuple[int, int, int, int]]) -> None:
    _same(_frame(rows))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5), st.sampled_from([0, 1460, 2920, 4380]),
                          st.sampled_from([1460, 2920])), min_size=1, max_size=40))
def test_matches_polars_oracle_on_resent_segments(rows: list[tuple[int, int, int, int]]) -> None:
    # MSS-sized segments, re-sent identically or coalesced (the common shapes of retransmissions).
    _same(_frame(rows))


def test_worked_example() -> None:
    # [0,10) at t=5; [5,15) at t=1 (owns [5,10) and [10,15)); [0,10) again at t=5: a later row, a duplicate
    # of what the first row owns ([0,5)); [20,30) at t=2 after a gap.
    rows, pieces = first_cover(_frame([(0, 5, 0, 10), (0, 1, 5, 10), (0, 5, 0, 10), (0, 2, 20, 10)]))
    assert rows["new_bytes"].to_list() == [5, 10, 0, 10]
    assert rows["i0"].to_list() == [0, 1, 0, 4]  # boundaries 0 5 10 15 20 30: piece 3 is the gap [15, 20)
    assert pieces.select("piece", "piece_start", "piece_end", "a_ns", "owner").rows() == [
        (0, 0, 5, 5, 0), (1, 5, 10, 1, 1), (2, 10, 15, 1, 1), (4, 20, 30, 2, 3)]


def test_empty_and_bad_ranges() -> None:
    rows, pieces = first_cover(_frame([]))
    assert rows.height == 0 and pieces.height == 0
    assert pieces.schema == polars_first_cover(_frame([(0, 0, 0, 1)]))[1].schema
    with pytest.raises(ValueError, match="e > s"):
        first_cover(_frame([(0, 0, 5, 0)]))
