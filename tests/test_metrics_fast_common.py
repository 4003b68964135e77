"""The numpy rewrites of the metrics' shared helpers (`workbench.metrics._common`: data direction,
tagging, time origin, and the building blocks the other rewrites use) against the polars formulations
they replaced, kept here verbatim as oracles, on random PacketEvents tables.

Also home of what the other ``test_metrics_fast_*`` modules share: the Hypothesis strategies for
PacketEvents / Samples tables of the shapes the metrics meet (several connections and subflows, both
directions and observation points, equal times, retransmissions, reinjections, nulls where the contract
allows them, empty tables) and the exact comparisons: frames equal value for value with the same
schema, floats bit for bit (NaN and null positions included), and the same sorted flags on the columns
the metrics group by (polars chooses its group-by algorithm, and so the rounding of a mean, by them)."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.capture.schema import PACKET_EVENTS, SAMPLES
from workbench.metrics._common import (
    SYN,
    check_columns,
    codes,
    data_directions,
    false_mask,
    labels,
    mask_eq,
    mask_ne,
    nullable_int,
    over_scalar,
    polars_sort_order,
    start_times,
    string_rank,
    true_mask,
    with_data_dir,
)

ACK, FIN = 0x010, 0x001
PATHS = ["wifi", "lte", "10.0.2.1"]

# ---- exact comparisons -------------------------------------------------------------------------------


def _bits(s: pl.Series) -> list[Any]:
    """A float column as bit patterns (None for null): NaN == NaN, 0.0 != -0.0."""
    return [None if v is None else struct.pack("<d", v) for v in s.to_list()]


# The columns the metrics group (and so average) by. Polars runs a group-by on a column flagged sorted
# over slices, otherwise by hashing, and a mean's rounding differs between the two: these columns must
# come out of the rewrites flagged as from the polars formulations. (Other columns pick up flags from
# how polars happens to hold their inputs, a literal broadcast for instance; no value depends on them.)
KEY_COLUMNS = {"conn", "subflow", "path", "method"}


def assert_same_frame(new: pl.DataFrame, old: pl.DataFrame) -> None:
    """``new`` is ``old``: schema, every value (floats bit for bit, nulls and NaNs in the same places),
    row order, and the sorted flags of the `KEY_COLUMNS`."""
    assert new.schema == old.schema, (new.schema, old.schema)
    assert new.height == old.height, (new, old)
    for c in old.columns:
        if old[c].dtype.is_float():
            assert _bits(new[c]) == _bits(old[c]), (c, new[c].to_list(), old[c].to_list())
        else:
            assert new[c].to_list() == old[c].to_list(), (c, new[c].to_list(), old[c].to_list())
        if c in KEY_COLUMNS:
            assert new[c].flags == old[c].flags, (c, new[c].flags, old[c].flags)
    assert new.equals(old)


def assert_same_summary(new: dict[str, Any], old: dict[str, Any]) -> None:
    """Two `summarize` dicts: the same keys in the same order, the same types and values (repr is
    exact for floats, NaN included)."""
    assert list(new) == list(old)
    for k in old:
        assert type(new[k]) is type(old[k]) and repr(new[k]) == repr(old[k]), (k, new[k], old[k])


# ---- strategies ----------------------------------------------------------------------------------------

_EPOCH = 1_600_000_000_000_000_000  # capture times are ns since the epoch: floats lose their last digits


@st.composite
def packet_events(draw: st.DrawFn, *, max_rows: int = 40, consistent_paths: bool | None = None) -> pl.DataFrame:
    """A PacketEvents table. Small value ranges so that times, sequence numbers and DSN ranges collide
    (equal times, overlapping and re-sent ranges, DATA_ACKs reaching holes); key columns never null,
    as in every table the workbench builds. ``consistent_paths``: one path per (conn, subflow), as
    always in real tables (None: either)."""
    conns = draw(st.sampled_from([[0], [0], [1], [0, 1], [2, 0, 1]]))
    base = draw(st.sampled_from([0, 0, _EPOCH]))
    consistent = draw(st.booleans()) if consistent_paths is None else consistent_paths
    opt = st.none()
    row = st.fixed_dictionaries({
        "t_ns": st.integers(0, 40),
        "conn": st.sampled_from(conns),
        "subflow": st.integers(0, 2),
        "path": st.sampled_from(PATHS),
        "dir": st.sampled_from(["c2s", "s2c", "s2c"]),
        "point": st.sampled_from(["snd", "rcv", "rcv", "drop"]),
        "seq": st.integers(0, 60),
        "ack": st.integers(0, 80),
        "flags": st.sampled_from([0, ACK, ACK, SYN, SYN | ACK, ACK | FIN]),
        "payload_bytes": st.one_of(st.sampled_from([0, 0, 1, 5, 10, 10, 20]), st.none()),
        "dsn": st.one_of(opt, st.integers(0, 60)),
        "data_ack": st.one_of(opt, st.integers(0, 80)),
        "data_fin": st.one_of(opt, st.booleans()),
        "is_retrans": st.one_of(opt, st.booleans(), st.just(False)),
        "is_reinject": st.one_of(opt, st.booleans(), st.just(False)),
        "ts_val": st.one_of(opt, st.integers(0, 5)),
        "ts_ecr": st.one_of(opt, st.integers(0, 5)),
        "owd_ns": st.one_of(opt, st.integers(0, 30)),
    })
    rows = draw(st.lists(row, max_size=max_rows))
    for r in rows:
        r["t_ns"] += base
        r["frame_bytes"] = (r["payload_bytes"] or 0) + 52
        r["rwnd_bytes"] = 65535
        if consistent:
            r["path"] = PATHS[(r["conn"] + r["subflow"]) % len(PATHS)]
    if draw(st.booleans()):
        rows.sort(key=lambda r: r["t_ns"])
    ev = pl.DataFrame({c: [r[c] for r in rows] for c in PACKET_EVENTS}, schema=PACKET_EVENTS)
    return draw(_as_built(ev))


@st.composite
def _as_built(draw: st.DrawFn, df: pl.DataFrame) -> pl.DataFrame:
    """``df`` as loaders and the replay build tables: columns holding one value as literals, sorted times
    flagged sorted (polars' flags steer its group-bys: the rewrites must leave the same flags)."""
    for c in ("conn", "subflow", "path", "dir", "point", "data_fin", "kind", "t_ns"):
        if c not in df.columns or df.height < 2 or draw(st.booleans()):
            continue
        s = df[c]
        if s.null_count() == 0 and s.n_unique() == 1:
            df = df.with_columns(pl.lit(s[0], s.dtype).alias(c) if draw(st.booleans()) else s.set_sorted())
        elif c == "t_ns" and s.is_sorted():
            df = df.with_columns(s.set_sorted())
    return df


@st.composite
def samples_tables(draw: st.DrawFn, *, max_rows: int = 40) -> pl.DataFrame:
    """A Samples table: ACK and periodic samples of a few subflows, equal times, nulls."""
    conns = draw(st.sampled_from([[0], [0], [0, 1], [2, 0]]))
    opt = st.none()
    row = st.fixed_dictionaries({
        "t_ns": st.integers(0, 20),
        "kind": st.sampled_from(["ack", "ack", "periodic"]),
        "conn": st.sampled_from(conns),
        "subflow": st.integers(0, 2),
        "cwnd_segments": st.one_of(opt, st.sampled_from([0.0, 1.5, 2.0, 7.25, 10.0, 33.0])),
        "inflight_segments": st.one_of(opt, st.integers(0, 40)),
        "srtt_ns": st.one_of(opt, st.sampled_from([1_000_000, 2_500_001, 10_000_000, 40_000_003])),
        "snd_queue_bytes": st.integers(0, 5),
        "snd_buf_bytes": st.integers(0, 9),
        "rcv_ooo_bytes": st.integers(0, 9),
        "rcv_buf_bytes": st.integers(0, 9),
    })
    rows = draw(st.lists(row, max_size=max_rows))
    for r in rows:
        r["path"] = PATHS[(r["conn"] + r["subflow"]) % len(PATHS)]
    if draw(st.booleans()):
        rows.sort(key=lambda r: r["t_ns"])
    return draw(_as_built(pl.DataFrame({c: [r[c] for r in rows] for c in SAMPLES}, schema=SAMPLES)))


# ---- the polars formulations replaced (oracles, verbatim but for names) ------------------------------


def old_data_directions(events: pl.DataFrame) -> pl.DataFrame:
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


def old_with_data_dir(events: pl.DataFrame) -> pl.DataFrame:
    if "is_data_dir" in events.columns and "data_dir" in events.columns:
        return events
    dd = old_data_directions(events)
    return events.join(dd, on="conn", how="left").with_columns(
        (pl.col("dir").cast(pl.String) == pl.col("data_dir")).alias("is_data_dir")
    )


def old_start_times(events: pl.DataFrame) -> pl.DataFrame:
    ev = old_with_data_dir(events)
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


# ---- tests ---------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(packet_events())
def test_data_direction_tagging_and_origin_match_the_polars_formulation(ev: pl.DataFrame) -> None:
    assert_same_frame(data_directions(ev), old_data_directions(ev))
    tagged = with_data_dir(ev)
    assert_same_frame(tagged, old_with_data_dir(ev))
    assert_same_frame(data_directions(tagged), old_data_directions(tagged))
    assert with_data_dir(tagged) is tagged
    assert_same_frame(start_times(ev), old_start_times(ev))
    assert_same_frame(start_times(tagged), old_start_times(tagged))


@settings(max_examples=60, deadline=None)
@given(packet_events(), st.integers(0, 2))
def test_one_connection_as_prepare_tags_it(ev: pl.DataFrame, conn: int) -> None:
    one = ev.filter(pl.col("conn") == conn)
    assert_same_frame(with_data_dir(one), old_with_data_dir(one))
    assert_same_frame(start_times(one), old_start_times(one))


def test_empty_tables() -> None:
    ev = pl.DataFrame(schema=PACKET_EVENTS)
    assert_same_frame(data_directions(ev), old_data_directions(ev))
    assert_same_frame(with_data_dir(ev), old_with_data_dir(ev))
    assert_same_frame(start_times(ev), old_start_times(ev))


def test_string_direction_and_point_columns() -> None:
    # Tables built by hand may carry dir/point as plain strings: the same answers.
    ev = pl.DataFrame({"t_ns": [5, 1, 2, 3], "conn": [0, 0, 1, 1], "dir": ["c2s", "c2s", "s2c", None],
                       "point": ["snd", "rcv", None, "drop"], "payload_bytes": [10, 5, 7, 9],
                       "flags": [0, SYN, 0, 0]},
                      schema={"t_ns": pl.Int64, "conn": pl.UInt32, "dir": pl.String, "point": pl.String,
                              "payload_bytes": pl.UInt32, "flags": pl.UInt16})
    assert_same_frame(data_directions(ev), old_data_directions(ev))
    assert_same_frame(with_data_dir(ev), old_with_data_dir(ev))
    assert_same_frame(start_times(ev), old_start_times(ev))


# The building blocks, against what polars itself does.

_keys = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(-3, 3)), max_size=300)


@settings(max_examples=150, deadline=None)
@given(_keys)
def test_polars_sort_order_is_polars_sort(rows: list[tuple[int, int, int]]) -> None:
    a, b, c = (np.array([r[i] for r in rows], np.int64) for i in range(3))
    frame = pl.DataFrame({"a": pl.Series(a, dtype=pl.UInt32), "b": pl.Series(b, dtype=pl.UInt32),
                          "c": c}).with_row_index("i")
    want = frame.sort("a", "b", "c")["i"].to_numpy()
    got = polars_sort_order({"a": (a, pl.UInt32), "b": (b, pl.UInt32), "c": (c, pl.Int64)})
    assert got.tolist() == want.tolist()


def test_polars_sort_order_ties_on_a_long_table() -> None:
    # Long enough for polars' parallel sort, many ties: still its exact permutation.
    rng = np.random.default_rng(7)
    a, b = np.zeros(50_000, np.int64), rng.integers(0, 40, 50_000)
    frame = pl.DataFrame({"a": a, "b": b}).with_row_index("i")
    assert polars_sort_order({"a": (a, pl.Int64), "b": (b, pl.Int64)}).tolist() == \
        frame.sort("a", "b")["i"].to_list()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 10**12), min_size=0, max_size=6),
       st.sampled_from([1e9, 1e6, 3.0, 7.3]))
def test_over_scalar_is_polars_division_by_a_number(xs: list[int], d: float) -> None:
    x = np.array(xs, np.int64).astype(np.float64)
    want = pl.DataFrame({"x": pl.Series(xs, dtype=pl.Int64)}).select(pl.col("x").cast(pl.Float64) / d)["x"]
    assert _bits(pl.Series(over_scalar(x, d))) == _bits(want)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(["snd", "rcv", "drop"])), max_size=20),
       st.lists(st.one_of(st.none(), st.booleans()), max_size=20),
       st.lists(st.one_of(st.none(), st.integers(0, 2**40)), max_size=20))
def test_column_helpers_are_polars_filters(points: list[str | None], flags: list[bool | None],
                                           ints: list[int | None]) -> None:
    for s in (pl.Series(points, dtype=pl.Enum(["snd", "rcv", "drop"])), pl.Series(points, dtype=pl.String)):
        for v in ("snd", "drop", "nowhere"):
            assert mask_eq(s, v).tolist() == (s == v).fill_null(False).to_list()
            assert mask_ne(s, v).tolist() == (s != v).fill_null(False).to_list()
    b = pl.Series(flags, dtype=pl.Boolean)
    assert true_mask(b).tolist() == b.fill_null(False).to_list()
    assert false_mask(b).tolist() == (~b).fill_null(False).to_list()
    i = pl.Series(ints, dtype=pl.UInt64)
    ok, v = nullable_int(i)
    assert ok.tolist() == i.is_not_null().to_list() and v.tolist() == i.fill_null(0).to_list()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=4), st.sampled_from(["wifi", "lte", "10.0.2.1"])),
                max_size=30),
       st.sampled_from([pl.String, pl.Categorical]))
def test_string_codes_and_ranks(values: list[str | None], dtype: pl.DataType) -> None:
    """`codes` numbers distinct values in order of first appearance, null last (as Arrow's dictionary
    encoding, which it replaced, does); `string_rank` is the rank in sorted order, -1 for null; both
    against plain Python."""
    s = pl.Series(values, dtype=dtype)
    distinct = list(dict.fromkeys(v for v in values if v is not None))
    got, n_codes = codes(s)
    assert n_codes == len(distinct) + 1
    assert got.tolist() == [len(distinct) if v is None else distinct.index(v) for v in values]
    ranked = sorted(distinct)  # code point order, which is UTF-8 byte order, polars' order
    assert string_rank(s).tolist() == [-1 if v is None else ranked.index(v) for v in values]


def test_labels_flag_constant_literals_sorted() -> None:
    assert labels("m", ["seq"], np.zeros(3, np.int64), literal=True).flags["SORTED_ASC"]
    assert not labels("v", ["a", "b"], np.array([1, 0, 1]), literal=True).flags["SORTED_ASC"]
    assert labels("v", ["a", "b"], np.array([1, 1]), literal=False).to_list() == ["b", "b"]


@pytest.mark.parametrize(("value", "near"), [(0.1, float(np.nextafter(0.1, 1.0))), (-0.0, 0.0), (math.nan, None)])
def test_frame_comparison_is_bitwise(value: float, near: float | None) -> None:
    x = pl.DataFrame({"x": [value]}, schema={"x": pl.Float64})
    assert_same_frame(x, x.clone())
    with pytest.raises(AssertionError):
        assert_same_frame(pl.DataFrame({"x": [near]}, schema={"x": pl.Float64}), x)


def lossy_two_path_replay(scheduler: str) -> Any:
    """A 1.5 s bulk replay over a lossy 30 Mbit/s WiFi and a 10 Mbit/s LTE path, with events and samples:
    the real tables the metrics meet, beside the random ones."""
    from workbench.replay import Bulk, PathConfig, StepSeries, run_replay
    from workbench.schedulers import get

    c = StepSeries.constant
    paths = [PathConfig(name="wifi", rate_down_bps=c(30e6), rate_up_bps=c(30e6), owd_down_ns=c(5e6),
                        owd_up_ns=c(5e6), loss_down=c(0.01)),
             PathConfig(name="lte", rate_down_bps=c(10e6), rate_up_bps=c(10e6), owd_down_ns=c(20e6),
                        owd_up_ns=c(20e6))]
    return run_replay(paths, get(scheduler), workload=Bulk(stop_ns=int(1e9)), duration_ns=int(1.5e9))
