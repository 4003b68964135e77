"""MPTCP-level OOO delay (STMS §5.1.1) and the receive OOO queue (OTIAS Fig. 5), on hand-built
PacketEvents whose answers are worked out in the comments, plus property tests against a byte-level
brute-force reference."""

from __future__ import annotations

import math

import polars as pl
import pytest
from _events import MS, SYN, events, row, seg
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.metrics import (
    data_direction,
    data_directions,
    ooo_cdf,
    ooo_queue_series,
    ooo_segments,
    ooo_summary,
)


def _by_dsn(df: pl.DataFrame) -> dict[int, tuple[int | None, int | None]]:
    """dsn -> (t_deliverable_ms, ooo_delay_ms) for exact comparisons."""
    out = {}
    for r in df.iter_rows(named=True):
        td, d = r["t_deliverable_ns"], r["ooo_delay_ns"]
        out[r["dsn"]] = (None if td is None else td // MS, None if d is None else d // MS)
    return out


# Two subflows, 1000-byte segments. Segment 2 (DSN 1000) goes over the slow LTE subflow and arrives at
# 50 ms; segments 3 and 4 (DSN 2000, 3000) arrive over WiFi before it, at 20 and 30 ms.
#   seg1 [0,1000)    wifi t=10  -> deliverable 10, delay 0
#   seg3 [2000,3000) wifi t=20  -> waits for seg2: deliverable 50, delay 30
#   seg4 [3000,4000) wifi t=30  -> deliverable 50, delay 20
#   seg2 [1000,2000) lte  t=50  -> all below arrived: deliverable 50, delay 0
#   seg5 [4000,5000) wifi t=60  -> deliverable 60, delay 0
# delays sorted: 0, 0, 0, 20, 30 -> mean 10, p50 0, max 30;
# p95 (linear): rank 0.95*4 = 3.8 -> 20 + 0.8*10 = 28; p99: rank 3.96 -> 29.6.
def _two_subflows() -> pl.DataFrame:
    return events([
        row(0, dir="c2s", point="snd", flags=SYN),
        seg(10, 0, 1000),
        seg(20, 2000, 1000),
        seg(30, 3000, 1000),
        seg(50, 1000, 1000, subflow=1, path="lte"),
        seg(60, 4000, 1000),
    ])


def test_segments_3_4_before_2_exact_delays() -> None:
    seg_df = ooo_segments(_two_subflows())
    assert _by_dsn(seg_df) == {0: (10, 0), 2000: (50, 30), 3000: (50, 20), 1000: (50, 0), 4000: (60, 0)}
    # Arrival order is kept, and the table carries subflow/path of the segment.
    assert seg_df["t_arrival_ns"].to_list() == [10 * MS, 20 * MS, 30 * MS, 50 * MS, 60 * MS]
    assert seg_df.filter(pl.col("dsn") == 1000)["path"].item() == "lte"
    assert seg_df.filter(pl.col("dsn") == 1000)["subflow"].item() == 1


def test_summary_numbers_of_worked_example() -> None:
    s = ooo_summary(_two_subflows()).row(0, named=True)
    assert s["n_segments"] == 5 and s["n_duplicates"] == 0 and s["n_undeliverable"] == 0
    assert s["unique_bytes"] == 5000
    assert s["ooo_delay_mean_ms"] == pytest.approx(10.0)
    assert s["ooo_delay_p50_ms"] == pytest.approx(0.0)
    assert s["ooo_delay_p95_ms"] == pytest.approx(28.0)
    assert s["ooo_delay_p99_ms"] == pytest.approx(29.6)
    assert s["ooo_delay_max_ms"] == pytest.approx(30.0)
    assert s["ooo_fraction"] == pytest.approx(2 / 5)


def test_queue_occupancy_step_series() -> None:
    # t=10: seg1 in and out at once -> 0; t=20: +1000; t=30: +1000 -> 2000; t=50: seg2 arrives and
    # releases 2000 -> 0; t=60: in and out -> no step.
    q = ooo_queue_series(_two_subflows())
    assert list(zip(q["t_ns"].to_list(), q["ooo_bytes"].to_list(), strict=True)) == [
        (10 * MS, 0), (20 * MS, 1000), (30 * MS, 2000), (50 * MS, 0)]


def test_cdf_table() -> None:
    c = ooo_cdf(_two_subflows())
    assert c["delay_ms"].to_list() == [0.0, 0.0, 0.0, 20.0, 30.0]
    assert c["cdf"].to_list() == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    thin = ooo_cdf(_two_subflows(), max_points=2)
    # Thinning keeps the last point (cdf 1) and never invents values.
    assert thin["cdf"].to_list()[-1] == 1.0 and thin.height < 5
    assert set(thin["delay_ms"].to_list()) <= {0.0, 20.0, 30.0}


# A reinjection that re-segments data: subflow 0 sends [0,1000), [1000,2000) (lost), [2000,3000);
# the scheduler reinjects [500,2500) on subflow 1, arriving at 40 ms; subflow 0's own retransmission of
# [1000,2000) arrives last, at 60 ms.
#   [0,1000)     t=10 new 1000 -> deliverable 10, delay 0
#   [2000,3000)  t=20 new 1000 -> bytes 1000..2000 first arrive at 40 -> deliverable 40, delay 20
#   [500,2500)   t=40 new 1000 (only 1000..2000 is new) -> deliverable 40, delay 0
#   [1000,2000)  t=60 nothing new -> duplicate, excluded, counted (1000 bytes)
def _reinjection() -> pl.DataFrame:
    return events([
        seg(10, 0, 1000),
        seg(20, 2000, 1000),
        seg(40, 500, 2000, subflow=1, path="lte", is_reinject=True),
        seg(60, 1000, 1000, is_retrans=True),
    ])


def test_overlapping_reinjection_byte_ranges() -> None:
    seg_df = ooo_segments(_reinjection())
    assert _by_dsn(seg_df) == {0: (10, 0), 2000: (40, 20), 500: (40, 0)}
    assert dict(zip(seg_df["dsn"].to_list(), seg_df["new_bytes"].to_list(), strict=True)) == {
        0: 1000, 2000: 1000, 500: 1000}
    alls = ooo_segments(_reinjection(), include_duplicates=True)
    dup = alls.filter(pl.col("is_duplicate"))
    assert dup["dsn"].to_list() == [1000] and dup["t_deliverable_ns"].to_list() == [None]
    s = ooo_summary(_reinjection()).row(0, named=True)
    assert (s["n_segments"], s["n_duplicates"], s["duplicate_bytes"], s["unique_bytes"]) == (3, 1, 1000, 3000)


def test_identical_copy_on_two_subflows_first_arrival_counts() -> None:
    # [0,100) arrives on lte at 5 and again on wifi at 8: the lte copy is the segment, the wifi one a duplicate.
    ev = events([seg(5, 0, 100, subflow=1, path="lte"), seg(8, 0, 100), seg(9, 100, 100)])
    seg_df = ooo_segments(ev)
    assert seg_df["path"].to_list() == ["lte", "wifi"] and seg_df["dsn"].to_list() == [0, 100]
    assert ooo_summary(ev)["n_duplicates"].item() == 1


def test_hole_without_data_ack_is_never_deliverable() -> None:
    # [1000,2000) is never observed: [2000,3000) cannot be delivered within the trace.
    ev = events([seg(10, 0, 1000), seg(20, 2000, 1000)])
    assert _by_dsn(ooo_segments(ev)) == {0: (10, 0), 2000: (None, None)}
    s = ooo_summary(ev).row(0, named=True)
    assert s["n_undeliverable"] == 1 and s["ooo_delay_max_ms"] == 0.0
    # The stuck bytes stay in the OOO queue.
    assert ooo_queue_series(ev)["ooo_bytes"].to_list()[-1] == 1000


def test_hole_filled_by_receivers_data_ack() -> None:
    # Same hole, but the receiver (c2s, point snd) DATA_ACKs 1000 at 11 ms and 3000 at 35 ms: it had
    # all bytes below 2000 by 35 ms, so [2000,3000) becomes deliverable at 35 (delay 15). The DATA_ACK
    # of 1000 at 11 ms does not reach the hole's end and must not be used.
    ev = events([
        seg(10, 0, 1000), seg(20, 2000, 1000),
        row(11, dir="c2s", point="snd", data_ack=1000),
        row(35, dir="c2s", point="snd", data_ack=3000),
        # A DATA_ACK observed at the *sender* (point rcv) is not the receiver's clock: ignored.
        row(12, dir="c2s", point="rcv", data_ack=3000),
    ])
    assert _by_dsn(ooo_segments(ev)) == {0: (10, 0), 2000: (35, 15)}


def test_in_dsn_order_means_zero_delay_and_upload_direction() -> None:
    # Upload (c2s carries the data), observed at the server: all in order -> every delay 0.
    ev = events([seg(t, (t - 1) * 500, 500, dir="c2s") for t in range(1, 21)]
                + [row(3, dir="s2c", point="snd", payload_bytes=0)])
    assert data_direction(ev, 0) == "c2s"
    seg_df = ooo_segments(ev)
    assert seg_df.height == 20 and seg_df["ooo_delay_ns"].to_list() == [0] * 20


def test_sender_only_capture_gives_empty_tables() -> None:
    ev = events([seg(1, 0, 100, point="snd"), seg(2, 100, 100, point="snd")])
    assert ooo_segments(ev).height == 0
    assert ooo_summary(ev).height == 0
    assert ooo_queue_series(ev).height == 0


def test_connections_are_independent() -> None:
    a = _two_subflows()
    b = events([seg(100, 0, 10, conn=1), seg(101, 20, 10, conn=1), seg(150, 10, 10, conn=1)])
    both = pl.concat([a, b])
    s = ooo_summary(both)
    assert s["conn"].to_list() == [0, 1]
    # conn 1: [20,30) waits from 101 to 150 -> 49 ms max.
    assert s.filter(pl.col("conn") == 1)["ooo_delay_max_ms"].item() == pytest.approx(49.0)
    assert s.filter(pl.col("conn") == 0)["ooo_delay_max_ms"].item() == pytest.approx(30.0)
    assert ooo_segments(both, conn=1).height == 3


def test_data_direction_counts_one_point_only() -> None:
    # s2c: 300 bytes seen at both points (a replay); c2s: 400 bytes at one point. Counting both points
    # would make s2c 600 > 400; per point, c2s carries more.
    ev = events([seg(1, 0, 300, point="snd"), seg(2, 0, 300), seg(3, 0, 400, dir="c2s", point="snd")])
    assert data_directions(ev)["data_dir"].to_list() == ["c2s"]


# ---------------------------------------------------------------- property tests (brute force) ----

def _reference(rows: list[tuple[int, int, int]]) -> list[tuple[int, int | None]]:
    """Byte-by-byte reference: rows are (t, dsn, length) in table order. Returns, per row in arrival
    order (t, then table order), (new_bytes, t_deliverable or None)."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], i))
    first: dict[int, int] = {}
    owner: dict[int, int] = {}
    for i in order:
        t, s, n = rows[i]
        for x in range(s, s + n):
            if x not in first:
                first[x], owner[x] = t, i
    origin = min(s for _, s, _ in rows)
    out = []
    for i in order:
        t, s, _ = rows[i]
        new = sum(1 for x, o in owner.items() if o == i)
        below = [first.get(x, math.inf) for x in range(origin, s)]
        t_in = max(below, default=-math.inf)
        td = max(t, t_in)
        out.append((new, None if new == 0 or td == math.inf else int(td)))
    return out


_row = st.tuples(st.integers(0, 50), st.integers(0, 60), st.integers(1, 25))


@settings(max_examples=150, deadline=None)
@given(st.lists(_row, min_size=1, max_size=14))
def test_matches_bytewise_reference_with_overlaps_and_holes(rows: list[tuple[int, int, int]]) -> None:
    ev = events([seg(t, s, n) for t, s, n in rows])
    got = ooo_segments(ev, include_duplicates=True)
    expect = _reference(rows)
    assert got["new_bytes"].to_list() == [n for n, _ in expect]
    assert got["t_deliverable_ns"].to_list() == [None if td is None else td * MS for _, td in expect]


@settings(max_examples=60, deadline=None)
@given(st.permutations(list(range(12))), st.lists(st.integers(1, 9), min_size=12, max_size=12))
def test_random_arrival_permutations(perm: list[int], gaps: list[int]) -> None:
    # 12 contiguous segments of 100 bytes, arriving in a random order at strictly increasing times.
    times = [sum(gaps[: k + 1]) for k in range(12)]
    ev = events([seg(times[k], perm[k] * 100, 100, subflow=perm[k] % 2) for k in range(12)])
    seg_df = ooo_segments(ev)
    assert seg_df.height == 12
    assert (seg_df["ooo_delay_ns"] >= 0).all()
    assert seg_df["new_bytes"].sum() == 1200
    # Everything is delivered exactly when the last missing piece arrives, never before its arrival;
    # the segment with the highest DSN is deliverable at the arrival of the last of all segments.
    assert seg_df["t_deliverable_ns"].max() == max(times) * MS
    top = seg_df.filter(pl.col("dsn") == 1100)
    assert top["t_deliverable_ns"].item() == max(times) * MS
    # In-order points are monotone in DSN: sorting by DSN, deliverable times never decrease.
    assert seg_df.sort("dsn")["t_deliverable_ns"].is_sorted()
    # Queue never negative and empty at the end.
    q = ooo_queue_series(ev)
    assert (q["ooo_bytes"] >= 0).all() and q["ooo_bytes"].to_list()[-1] == 0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 500), min_size=1, max_size=20))
def test_dsn_order_arrivals_have_zero_delay(lengths: list[int]) -> None:
    dsn, rows = 0, []
    for t, n in enumerate(lengths, start=1):
        rows.append(seg(t, dsn, n, subflow=t % 3))
        dsn += n
    seg_df = ooo_segments(events(rows))
    assert seg_df["ooo_delay_ns"].to_list() == [0] * len(lengths)
    assert seg_df["new_bytes"].sum() == sum(lengths)
