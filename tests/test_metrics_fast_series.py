"""The numpy rewrites of the report's figure series (`throughput.series_from_segments`,
`ooo.cdf_from_segments`, `buffers.buffer_series` and, over it, `buffers.buffer_summary`) against the
polars formulations they replaced, kept here verbatim as oracles, on random segment and Samples
tables (the fast subflow and its free cwnd, `burst.fast_subflows` / `burst.free_cwnd_series`, have
their oracles in tests/test_metrics_fast_burst.py; they are also checked here on replays and
captures, which is what a report hands them)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from test_metrics_fast_burst import old_fast_subflows, old_free_cwnd_series
from test_metrics_fast_common import (
    PATHS,
    assert_same_frame,
    lossy_two_path_replay,
    old_start_times,
    packet_events,
    samples_tables,
)
from test_metrics_fast_ooo import old_segments_all

from workbench.capture.schema import SAMPLES
from workbench.metrics import buffers
from workbench.metrics._common import check_columns, ms, select_conn
from workbench.metrics.buffers import buffer_series, buffer_summary
from workbench.metrics.burst import fast_subflows, free_cwnd_series
from workbench.metrics.ooo import _SEGMENT_SCHEMA, _segments_all, cdf_from_segments
from workbench.metrics.throughput import DEFAULT_BIN_NS, goodput_series, series_from_segments

# ---- the polars formulations replaced (oracles, verbatim but for names) ------------------------------


def old_series_from_segments(seg: pl.DataFrame, start: pl.DataFrame, bin_ns: int) -> pl.DataFrame:
    """`goodput_series` from precomputed segments and start times."""
    binned = (
        seg.filter(pl.col("t_deliverable_ns").is_not_null())
        .join(start, on="conn", how="left")
        .with_columns(((pl.col("t_deliverable_ns") - pl.col("start_ns")).clip(lower_bound=0) // bin_ns)
                      .alias("bin"))
        .group_by("conn", "bin")
        .agg(pl.col("new_bytes").sum().alias("bytes"), pl.col("start_ns").first())
    )
    full = (
        binned.group_by("conn")
        .agg(pl.col("bin").max().alias("last"), pl.col("start_ns").first())
        .with_columns(pl.int_ranges(0, pl.col("last") + 1).alias("bin"))
        .explode("bin")
        .select("conn", "bin", "start_ns")
    )
    return (
        full.join(binned.select("conn", "bin", "bytes"), on=["conn", "bin"], how="left")
        .with_columns(pl.col("bytes").fill_null(0).cast(pl.Int64))
        .sort("conn", "bin")
        .select(
            "conn",
            (pl.col("start_ns") + pl.col("bin") * bin_ns).alias("t_ns"),
            "bytes",
            (pl.col("bytes").cast(pl.Float64) * 8e9 / bin_ns).alias("rate_bps"),
        )
    )


def old_cdf_from_segments(seg: pl.DataFrame, *, max_points: int | None = 2000) -> pl.DataFrame:
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


_CONN_LEVEL = ["snd_buf_bytes", "rcv_buf_bytes", "rcv_ooo_bytes"]


def old_buffer_series(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Connection-level buffer occupancy per sample time: columns conn, t_ns, snd_buf_bytes,
    rcv_buf_bytes, rcv_ooo_bytes. The SAMPLES table repeats connection-level columns on every subflow
    row, so one row per (conn, t_ns) is kept. Periodic samples are used when there are any (evenly
    spaced in time, so means are time averages), else every sample."""
    check_columns(samples, ["t_ns", "kind", "conn", *_CONN_LEVEL], what="Samples")
    sm = select_conn(samples, conn)
    periodic = sm.filter(pl.col("kind") == "periodic")
    use = periodic if periodic.height else sm
    return (
        use.sort("conn", "t_ns")
        .group_by("conn", "t_ns", maintain_order=True)
        .agg(*[pl.col(c).first() for c in _CONN_LEVEL])
    )


def old_buffer_summary(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """`buffer_summary` itself over the polars formulation of `buffer_series`."""
    mp = pytest.MonkeyPatch()
    mp.setattr(buffers, "buffer_series", old_buffer_series)
    try:
        return buffer_summary(samples, conn)
    finally:
        mp.undo()


# ---- comparisons -----------------------------------------------------------------------------------------


def same(new: pl.DataFrame, old: pl.DataFrame) -> None:
    """Exactly the old frame: polars' own exact comparison, and `assert_same_frame` (floats bit for bit,
    the sorted flags of the key columns, which steer a later group-by's rounding)."""
    assert_frame_equal(new, old, check_exact=True)
    assert_same_frame(new, old)


MAX_POINTS = [None, 0, 1, 2, 3, 7, 2000]


def _check_segments(seg: pl.DataFrame, start: pl.DataFrame) -> None:
    """Every rewritten series from ``seg`` (`_segments_all` rows, duplicates included or not) and
    ``start`` (one row per connection)."""
    t = seg["t_deliverable_ns"].drop_nulls()
    low_ns = min([int(t.min()), *start["start_ns"].drop_nulls().to_list()]) if len(t) else 0  # type: ignore[arg-type]
    span_ns = int(t.max()) - low_ns if len(t) else 0  # type: ignore[arg-type]
    for bin_ns in (DEFAULT_BIN_NS, 1, 3, 7, 10, 1_000_000):
        if span_ns // bin_ns > 100_000:  # a bin per ns of a replay: too many rows for the oracle
            continue
        same(series_from_segments(seg, start, bin_ns), old_series_from_segments(seg, start, bin_ns))
    for max_points in MAX_POINTS:
        same(cdf_from_segments(seg, max_points=max_points), old_cdf_from_segments(seg, max_points=max_points))


def _check_samples(sm: pl.DataFrame, conn: int | None) -> None:
    same(buffer_series(sm, conn), old_buffer_series(sm, conn))
    same(buffer_summary(sm, conn), old_buffer_summary(sm, conn))
    same(fast_subflows(sm, conn), old_fast_subflows(sm, conn))
    same(free_cwnd_series(sm, conn), old_free_cwnd_series(sm, conn))


# ---- strategies --------------------------------------------------------------------------------------------

_EPOCH = 1_600_000_000_123_456_789


@st.composite
def segment_tables(draw: st.DrawFn, *, max_rows: int = 40) -> pl.DataFrame:
    """A table with `_segments_all`'s columns drawn directly (not derived from packets): several
    connections in any order, equal arrival and deliverable times and OOO delays, never-deliverable
    segments, duplicates, epoch or replay times, and delays whose ms differ by the last bit between a
    true division and polars' multiplication by the reciprocal."""
    conns = draw(st.sampled_from([[0], [1], [0, 1], [2, 0, 1]]))
    base = draw(st.sampled_from([0, _EPOCH]))
    # Not what `_segments_all` writes, but the contract allows it: a null delay of a deliverable segment.
    lost_delay = draw(st.booleans())
    row = st.tuples(st.sampled_from(conns), st.integers(0, 50),
                    st.one_of(st.none(), st.integers(0, 300), st.sampled_from([0, 1, 3, 7, 123_456_789])),
                    st.sampled_from([0, 1, 10, 20]), st.booleans())
    rows = draw(st.lists(row, max_size=max_rows))
    out = {
        "conn": [c for c, *_ in rows],
        "t_arrival_ns": [base + t for _, t, *_ in rows],
        "t_deliverable_ns": [None if d is None else base + t + d for _, t, d, _, _ in rows],
        "ooo_delay_ns": [None if lost_delay and t % 5 == 0 else d for _, t, d, _, _ in rows],
        "dsn": [0] * len(rows),
        "payload_bytes": [20] * len(rows),
        "new_bytes": [n for *_, n, _ in rows],
        "subflow": [0] * len(rows),
        "path": [PATHS[0]] * len(rows),
        "is_duplicate": [dup for *_, dup in rows],
    }
    seg = pl.DataFrame(out, schema=_SEGMENT_SCHEMA)
    if draw(st.booleans()):  # as `_segments_all` leaves it: sorted by conn, flagged
        seg = seg.sort("conn", "t_arrival_ns").with_columns(pl.col("conn").set_sorted())
    return seg


@st.composite
def start_tables(draw: st.DrawFn, seg: pl.DataFrame) -> pl.DataFrame:
    """A `start_times`-shaped table for ``seg``'s connections: one row per connection, some missing,
    some null, some after the first deliveries (bins clipped to 0)."""
    conns = sorted(set(seg["conn"].to_list()) | {draw(st.integers(0, 3))})
    t0 = int(seg["t_arrival_ns"].min() or 0)  # type: ignore[arg-type]
    keep = [c for c in conns if draw(st.integers(0, 5))]
    starts = [draw(st.one_of(st.none(), st.integers(t0 - 20, t0 + 30))) for _ in keep]
    return pl.DataFrame({"conn": keep, "start_ns": starts}, schema={"conn": pl.UInt32, "start_ns": pl.Int64})


# ---- tests ---------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(packet_events())
def test_series_from_packet_events_match_the_polars_formulation(ev: pl.DataFrame) -> None:
    # What a report draws: `prepare`'s segments (and without duplicates, `Prepared.firsts`) and origin.
    seg = _segments_all(ev)
    start = old_start_times(ev)
    same(seg, old_segments_all(ev))
    _check_segments(seg, start)
    _check_segments(seg.filter(~pl.col("is_duplicate")), start)
    same(goodput_series(ev), old_series_from_segments(old_segments_all(ev).filter(~pl.col("is_duplicate")),
                                                      start, DEFAULT_BIN_NS))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_series_from_any_segments_match_the_polars_formulation(data: st.DataObject) -> None:
    seg = data.draw(segment_tables())
    _check_segments(seg, data.draw(start_tables(seg)))


def test_single_rows_and_empty_tables() -> None:
    empty = pl.DataFrame(schema=_SEGMENT_SCHEMA)
    no_start = pl.DataFrame(schema={"conn": pl.UInt32, "start_ns": pl.Int64})
    _check_segments(empty, no_start)
    one = pl.DataFrame({"conn": [3], "t_arrival_ns": [_EPOCH], "t_deliverable_ns": [_EPOCH + 7],
                        "ooo_delay_ns": [7], "dsn": [0], "payload_bytes": [10], "new_bytes": [10],
                        "subflow": [0], "path": ["wifi"], "is_duplicate": [False]}, schema=_SEGMENT_SCHEMA)
    for start_ns in (_EPOCH - 3, None):
        _check_segments(one, pl.DataFrame({"conn": [3], "start_ns": [start_ns]},
                                          schema={"conn": pl.UInt32, "start_ns": pl.Int64}))
    _check_segments(one, no_start)
    for sm in (pl.DataFrame(schema=SAMPLES), pl.DataFrame([{
            "t_ns": 5, "kind": "ack", "conn": 0, "subflow": 1, "path": "lte", "cwnd_segments": 3.0,
            "inflight_segments": 1, "srtt_ns": 2_500_001, "snd_queue_bytes": 0, "snd_buf_bytes": 7,
            "rcv_ooo_bytes": 1, "rcv_buf_bytes": 2}], schema=SAMPLES)):
        for conn in (None, 0, 1):
            _check_samples(sm, conn)


def test_a_null_delay_sorts_first() -> None:
    # A deliverable segment without a delay (the contract allows it): polars sorts the null before a
    # delay of 0 that came earlier in the table.
    seg = pl.DataFrame({"conn": [0, 0, 0, 1], "t_arrival_ns": [1, 2, 3, 4], "t_deliverable_ns": [1, 2, 8, 4],
                        "ooo_delay_ns": [0, None, 5, None], "dsn": [0] * 4, "payload_bytes": [10] * 4,
                        "new_bytes": [10] * 4, "subflow": [0] * 4, "path": ["wifi"] * 4,
                        "is_duplicate": [False] * 4}, schema=_SEGMENT_SCHEMA)
    for max_points in MAX_POINTS:
        same(cdf_from_segments(seg, max_points=max_points), old_cdf_from_segments(seg, max_points=max_points))
    assert cdf_from_segments(seg)["delay_ms"].to_list()[:2] == [None, 0.0]


def test_series_rejects_a_bin_width_that_is_not_positive() -> None:
    for bin_ns in (0, -5):
        with pytest.raises(ValueError, match="bin_ns"):
            series_from_segments(pl.DataFrame(schema=_SEGMENT_SCHEMA),
                                 pl.DataFrame(schema={"conn": pl.UInt32, "start_ns": pl.Int64}), bin_ns)


@settings(max_examples=200, deadline=None)
@given(samples_tables(), st.sampled_from([None, 0, 1, 2]))
def test_samples_series_match_the_polars_formulation(sm: pl.DataFrame, conn: int | None) -> None:
    _check_samples(sm, conn)


@st.composite
def tied_samples(draw: st.DrawFn) -> pl.DataFrame:
    """Samples whose rows tie on (conn, t_ns) with connection-level values that differ (not what a
    replay writes, but then which tied row comes first is polars' unstable sort order), and srtts of
    any value (medians whose ms differ in the last bit between the two ways of dividing)."""
    row = st.fixed_dictionaries({
        "t_ns": st.integers(0, 3),
        "kind": st.sampled_from(["ack", "periodic"]),
        "conn": st.sampled_from([0, 1]),
        "subflow": st.integers(0, 3),
        "cwnd_segments": st.one_of(st.none(), st.floats(-2, 50, allow_nan=False), st.just(-0.0),
                                   st.just(float("nan"))),
        "inflight_segments": st.one_of(st.none(), st.just(0), st.integers(0, 40)),
        # Beyond 2**53 the two middle values' mean and polars' interpolation between them differ.
        "srtt_ns": st.one_of(st.none(), st.integers(1, 10**10), st.integers(2**53, 2**62)),
        "snd_queue_bytes": st.integers(0, 5),
        "snd_buf_bytes": st.one_of(st.none(), st.integers(0, 3)),
        "rcv_ooo_bytes": st.integers(0, 3),
        "rcv_buf_bytes": st.one_of(st.none(), st.integers(0, 2**40)),
    })
    rows = draw(st.lists(row, max_size=150))  # polars sorts fewer than ~20 rows stably, more not
    for r in rows:
        r["path"] = draw(st.sampled_from(PATHS)) if draw(st.integers(0, 9)) == 0 else PATHS[r["subflow"] % 3]
    return pl.DataFrame({c: [r[c] for r in rows] for c in SAMPLES}, schema=SAMPLES)


@settings(max_examples=200, deadline=None)
@given(tied_samples(), st.sampled_from([None, 0, 1]))
def test_tied_samples_match_the_polars_formulation(sm: pl.DataFrame, conn: int | None) -> None:
    _check_samples(sm, conn)


def test_long_tied_samples() -> None:
    # Long enough for polars' parallel sort and group-by, one connection, every time shared by all
    # subflows, values differing between tied rows now and then.
    rng = np.random.default_rng(11)
    n = 60_000
    sm = pl.DataFrame({
        "t_ns": np.sort(rng.integers(0, 5_000, n)), "kind": rng.choice(["ack", "periodic"], n, p=[0.8, 0.2]),
        "conn": np.zeros(n, np.uint32), "subflow": rng.integers(0, 3, n).astype(np.uint32),
        "path": rng.choice(PATHS, n), "cwnd_segments": rng.integers(0, 80, n) / 4,
        "inflight_segments": rng.integers(0, 40, n).astype(np.uint32),
        "srtt_ns": rng.integers(1_000_000, 90_000_000, n), "snd_queue_bytes": np.zeros(n, np.uint64),
        "snd_buf_bytes": rng.integers(0, 3, n).astype(np.uint64), "rcv_ooo_bytes": np.zeros(n, np.uint64),
        "rcv_buf_bytes": rng.integers(0, 2, n).astype(np.uint64),
    }, schema=SAMPLES)
    _check_samples(sm, None)
    _check_samples(sm.with_columns(pl.col("t_ns").set_sorted(), pl.col("conn").set_sorted()), 0)
    _check_samples(sm.sample(fraction=1.0, shuffle=True, seed=3), None)  # a sort that moves rows


def test_medians_of_large_srtts() -> None:
    # One subflow per connection, two to five ACKs each: every connection reports its median, which
    # for values beyond 2**53 depends on how the two middle ones are combined.
    rng = np.random.default_rng(5)
    n_acks = rng.integers(2, 6, 400)
    conn = np.repeat(np.arange(400), n_acks)
    sm = pl.DataFrame({
        "t_ns": rng.integers(0, 100, len(conn)), "kind": ["ack"] * len(conn), "conn": conn.astype(np.uint32),
        "subflow": np.zeros(len(conn), np.uint32), "path": ["wifi"] * len(conn),
        "cwnd_segments": np.ones(len(conn)), "inflight_segments": np.zeros(len(conn), np.uint32),
        "srtt_ns": rng.integers(1, 2**62, len(conn)), "snd_queue_bytes": np.zeros(len(conn), np.uint64),
        "snd_buf_bytes": np.zeros(len(conn), np.uint64), "rcv_ooo_bytes": np.zeros(len(conn), np.uint64),
        "rcv_buf_bytes": np.zeros(len(conn), np.uint64)}, schema=SAMPLES)
    _check_samples(sm, None)
    _check_samples(sm.sample(fraction=1.0, shuffle=True, seed=1), None)


# ---- what a report hands them: replays and captures ------------------------------------------------


def _check_prepared(events: pl.DataFrame, samples: pl.DataFrame | None) -> None:
    from workbench.metrics import prepare

    prep = prepare(events)
    _check_segments(prep.segments, prep.start)
    _check_segments(prep.firsts, prep.start)
    if samples is not None:
        for conn in (None, prep.conn):
            _check_samples(samples, conn)


@pytest.mark.parametrize("scheduler", ["minrtt", "redundant", "roundrobin"])
def test_replays(scheduler: str) -> None:
    r = lossy_two_path_replay(scheduler)
    _check_prepared(r.events, r.samples)


def test_bundled_captures() -> None:
    from test_metrics_fast_summary import _captures

    for label, events in _captures():
        if events.height == 0:
            continue
        try:
            _check_prepared(events, None)
        except AssertionError as e:
            raise AssertionError(label) from e
