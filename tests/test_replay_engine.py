"""Engine mechanics: event loop, timers, link (rate integration, drop-tail in bytes, delay pipe,
loss), determinism, workloads, the PacketEvents / Samples tables."""

from __future__ import annotations

import random

import polars as pl
import pytest

from workbench.capture.schema import PACKET_EVENTS, SAMPLES
from workbench.replay import (
    AppTrace,
    Bulk,
    Bursts,
    ConnectionConfig,
    Finite,
    PathConfig,
    StepSeries,
    run_replay,
    run_single_path_baselines,
)
from workbench.replay.events import EventLoop, Timer
from workbench.replay.link import Link
from workbench.schedulers import get

MS = 1_000_000
S = 1_000_000_000


def two_paths(**kw) -> list[PathConfig]:
    return [PathConfig.constant("wifi", rate_bps=30e6, owd_ns=10 * MS, buffer_bytes=75_000, **kw),
            PathConfig.constant("lte", rate_bps=10e6, owd_ns=40 * MS, buffer_bytes=150_000, **kw)]


# ----------------------------------------------------------------------------- event loop
def test_event_loop_orders_by_time_then_insertion() -> None:
    loop = EventLoop()
    out: list[tuple[int, str]] = []
    loop.at(5, lambda a: out.append((loop.now, a)), "b")
    loop.at(5, lambda a: out.append((loop.now, a)), "c")
    loop.at(1, lambda a: out.append((loop.now, a)), "a")
    loop.run()
    assert out == [(1, "a"), (5, "b"), (5, "c")]


def test_timer_rearm_cancel_and_lazy_reschedule() -> None:
    loop = EventLoop()
    fired: list[int] = []
    t = Timer(loop, fired.append)
    t.arm(100)
    t.arm(300)  # later: no new heap entry, the stale one re-schedules
    loop.run(until_ns=200)
    assert fired == []
    loop.run()
    assert fired == [300]
    t.arm(400)
    t.arm(350)  # earlier: fires at 350 only
    loop.run()
    assert fired == [300, 350]
    t.arm(500)
    t.cancel()
    loop.run()
    assert fired == [300, 350]


# ----------------------------------------------------------------------------- link
def _link(loop: EventLoop, *, rate: StepSeries, buffer_bytes: int, owd: StepSeries | None = None,
          loss: float = 0.0, rng: random.Random | None = None):
    arrivals: list[tuple[int, int]] = []
    drops: list[int] = []
    link = Link(loop, name="l", rate_bps=rate, owd_ns=owd or StepSeries.constant(0),
                loss=StepSeries.constant(loss), buffer_bytes=buffer_bytes, rng=rng or random.Random(1),
                deliver=lambda p: arrivals.append((loop.now, p)), on_drop=lambda p, t, r: drops.append(p))
    return link, arrivals, drops


def test_drop_tail_buffer_in_bytes_never_holds_more() -> None:
    loop = EventLoop()
    link, arrivals, drops = _link(loop, rate=StepSeries.constant(8e6), buffer_bytes=10_000)
    sizes = [1500] * 20 + [400] * 10
    for i, size in enumerate(sizes):
        link.send(i, size)
        assert link.queued_bytes <= 10_000
    assert link.max_qbytes <= 10_000
    # first packet is serialised at once, 6 x 1500 = 9000 fit, then only 400-byte packets that fit
    assert len(arrivals) == 0 and drops[:13] == list(range(7, 20))
    loop.run()
    assert [p for _, p in arrivals] == [i for i in range(len(sizes)) if i not in drops]


def test_departures_integrate_piecewise_capacity() -> None:
    loop = EventLoop()
    # 8 Mbit/s for 1 ms, outage 1 ms, then 16 Mbit/s: 1000-byte packets (1 ms at 8 Mbit/s)
    rate = StepSeries((0, 1 * MS, 2 * MS), (8e6, 0.0, 16e6))
    link, arrivals, _ = _link(loop, rate=rate, buffer_bytes=1 << 20)
    for i in range(3):
        link.send(i, 1000)
    loop.run()
    assert [t for t, _ in arrivals] == [1 * MS, 2 * MS + MS // 2, 3 * MS]


def test_delay_pipe_follows_delay_timeline_without_reordering() -> None:
    loop = EventLoop()
    owd = StepSeries((0, 2 * MS), (10 * MS, 1 * MS))  # delay drops from 10 ms to 1 ms at t = 2 ms
    link, arrivals, _ = _link(loop, rate=StepSeries.constant(8e6), buffer_bytes=1 << 20, owd=owd)
    for i in range(4):
        link.send(i, 1000)
    loop.run()
    times = [t for t, _ in arrivals]
    assert [p for _, p in arrivals] == [0, 1, 2, 3]
    assert times[0] == 11 * MS  # departs at 1 ms + 10 ms
    # packets departing after the delay fell would overtake packet 0: held back behind it (FIFO pipe)
    assert times == [11 * MS] * 4
    loop.at(20 * MS, lambda _: link.send(4, 1000))
    loop.run()
    assert arrivals[-1] == (20 * MS + 1 * MS + 1 * MS, 4)


def test_random_loss_rate() -> None:
    loop = EventLoop()
    link, arrivals, drops = _link(loop, rate=StepSeries.constant(1e9), buffer_bytes=1 << 30, loss=0.1)
    for i in range(20_000):
        link.send(i, 100)
    loop.run()
    assert len(drops) / 20_000 == pytest.approx(0.1, abs=0.01)
    assert len(arrivals) + len(drops) == 20_000


# ----------------------------------------------------------------------------- runs
def test_same_seed_identical_events_different_seed_with_loss_differs() -> None:
    paths = two_paths(loss=0.01)
    runs = [run_replay(paths, get("minrtt"), workload=Finite(size_bytes=2_000_000), seed=s)
            for s in (7, 7, 8)]
    a, b, c = (r.events for r in runs)
    assert a.equals(b)
    assert not a.equals(c)
    assert runs[0].summary["random_losses"] > 0


def test_finite_transfer_delivers_every_byte_once_in_order_point() -> None:
    size = 3_000_000
    r = run_replay(two_paths(), get("minrtt"), workload=Finite(size_bytes=size))
    assert r.summary["completed"]
    assert r.summary["delivered_bytes"] == size
    ev = r.events
    rcv = ev.filter((pl.col("point") == "rcv") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    # union of received DSN ranges covers [0, size)
    ranges = rcv.select("dsn", "payload_bytes").unique().sort("dsn")
    ends = (ranges["dsn"] + ranges["payload_bytes"]).to_list()
    assert ranges["dsn"][0] == 0 and max(ends) == size
    assert (rcv["owd_ns"] >= 10 * MS).all()
    acks = ev.filter(pl.col("dir") == "c2s")
    assert acks["data_ack"].max() == size


def test_tables_follow_schema() -> None:
    r = run_replay(two_paths(loss=0.005), get("minrtt"), workload=Finite(size_bytes=1_000_000), seed=3)
    ev = r.events
    assert dict(ev.schema) == PACKET_EVENTS
    assert set(ev["point"].unique().to_list()) <= {"snd", "rcv", "drop"}
    snd = ev.filter((pl.col("point") == "snd") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    assert snd["seq"].min() == 1 and snd["dsn"].min() == 0  # SYN = 0; first data byte DSN = 0
    assert set(ev["path"].unique().to_list()) == {"wifi", "lte"}
    assert ev["t_ns"].is_sorted()
    assert snd["is_retrans"].sum() == r.summary["retransmissions"]
    sm = r.samples
    assert dict(sm.schema) == SAMPLES
    assert set(sm["kind"].unique().to_list()) == {"ack", "periodic"}


def test_retransmissions_flagged_and_match_drops() -> None:
    r = run_replay([PathConfig.constant("p", rate_bps=20e6, owd_ns=20 * MS, buffer_bytes=30_000)],
                   get("minrtt"), workload=Finite(size_bytes=3_000_000))
    ev = r.events
    drops = ev.filter((pl.col("point") == "drop") & (pl.col("dir") == "s2c")).height
    retr = ev.filter((pl.col("point") == "snd") & pl.col("is_retrans")).height
    assert drops > 0
    assert drops <= retr <= drops + 5  # SACK recovery resends what was lost, few spurious
    assert r.summary["delivered_bytes"] == 3_000_000


def test_workloads_app_trace_and_bursts() -> None:
    writes = [(0, 50_000), (200 * MS, 10_000), (500 * MS, 100_000)]
    r = run_replay(two_paths(), get("minrtt"), workload=AppTrace(writes=writes))
    assert r.summary["completed"] and r.summary["delivered_bytes"] == 160_000
    snd = r.events.filter(pl.col("point") == "snd")
    assert snd.filter(pl.col("dsn") >= 60_000)["t_ns"].min() >= 500 * MS
    rb = run_replay(two_paths(), get("minrtt"), workload=Bursts(segments=20, idle_ns=100 * MS, n_bursts=3))
    assert rb.summary["completed"] and rb.summary["delivered_bytes"] == 3 * 20 * 1424


def test_bulk_needs_a_duration() -> None:
    with pytest.raises(ValueError):
        run_replay(two_paths(), get("minrtt"), workload=Bulk())
    with pytest.raises(TypeError):
        run_replay(two_paths(), "minrtt", workload=Bulk(), duration_ns=S)  # type: ignore[arg-type]


def test_send_buffer_limit_is_respected() -> None:
    cfg = ConnectionConfig(send_buf_bytes=100_000)
    r = run_replay(two_paths(), get("minrtt"), workload=Bulk(), conn=cfg, duration_ns=2 * S)
    assert r.samples["snd_buf_bytes"].max() <= 100_000


def test_single_path_baselines() -> None:
    res = run_single_path_baselines(two_paths(), workload=Bulk(), duration_ns=3 * S, record=False)
    assert set(res) == {"wifi", "lte"}
    assert res["wifi"].delivery_rate_bps > 2.5 * res["lte"].delivery_rate_bps
    assert res["wifi"].config.mss_bytes == 1448
    both = run_replay(two_paths(), get("minrtt"), workload=Bulk(), duration_ns=3 * S, record=False)
    assert both.delivery_rate_bps > res["wifi"].delivery_rate_bps


def test_time_varying_rate_is_followed() -> None:
    rate = StepSeries((0, 3 * S), (20e6, 5e6))
    p = PathConfig(name="v", rate_down_bps=rate, rate_up_bps=StepSeries.constant(20e6),
                   owd_down_ns=StepSeries.constant(10 * MS), owd_up_ns=StepSeries.constant(10 * MS),
                   buffer_down_bytes=60_000, buffer_up_bytes=60_000)
    r = run_replay([p], get("minrtt"), workload=Bulk(), duration_ns=6 * S)
    rcv = r.events.filter((pl.col("point") == "rcv") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    def rate_between(a: int, b: int) -> float:
        x = rcv.filter((pl.col("t_ns") >= a) & (pl.col("t_ns") < b))
        return x["payload_bytes"].sum() * 8e9 / (b - a)
    assert rate_between(1 * S, 3 * S) == pytest.approx(20e6 * 1424 / 1514, rel=0.05)
    # from 4.5 s: the drop overflows the queue and may cost one or two RTOs before the window settles
    assert rate_between(4 * S + S // 2, 6 * S) == pytest.approx(5e6 * 1424 / 1514, rel=0.05)


def test_a_dsack_keeps_its_sack_block_on_every_hop() -> None:
    """An ACK carrying a SACK or a DSACK is 12 bytes longer than a plain one, at its first hop
    (SubflowReceiver.send_ack) and at every later hop (network.wire): over a second link of one byte
    per ms, a 66-byte ACK takes 66 ms and both 78-byte ones 78 ms (plus 1 ns on the first link)."""
    from workbench.replay.network import Route, wire
    from workbench.replay.tcp import AckPkt

    loop = EventLoop()
    fast = Link(loop, name="a", rate_bps=StepSeries.constant(1e12), owd_ns=StepSeries.constant(0.0),
                loss=StepSeries.constant(0.0), buffer_bytes=10**6, rng=random.Random(0), deliver=None)  # type: ignore[arg-type]
    slow = Link(loop, name="b", rate_bps=StepSeries.constant(8e3), owd_ns=StepSeries.constant(0.0),
                loss=StepSeries.constant(0.0), buffer_bytes=10**6, rng=random.Random(0), deliver=None)  # type: ignore[arg-type]
    got: list[tuple[int, int]] = []
    wire({"a": fast, "b": slow}, [Route("p", data=(), ack=("a", "b"))], data_ends=[lambda _: None],
         ack_ends=[lambda p: got.append((p.sack, loop.now))], data_header_bytes=66, ack_bytes=66)
    for i, sack in enumerate((-1, 5, -2)):
        loop.at(i * S, lambda s: fast.send(AckPkt(0, 1, s, 0, 1000, loop.now), 66 + (12 if s != -1 else 0)), sack)
    loop.run()
    assert got == [(-1, 66 * MS + 1), (5, S + 78 * MS + 1), (-2, 2 * S + 78 * MS + 1)]


def test_a_packet_held_forever_by_zero_capacity_is_never_lost() -> None:
    """Capacity zero for good holds packets in the buffer forever: they neither arrive nor draw a random
    loss (an earlier version recorded them as lost at t = 2^62 ns, which broke the tables)."""
    from workbench.replay import PathConfig, StepSeries, run_replay
    from workbench.schedulers import get
    dead = PathConfig(name="dead", rate_down_bps=StepSeries.constant(0.0), rate_up_bps=StepSeries.constant(1e6),
                      owd_down_ns=StepSeries.constant(1e6), owd_up_ns=StepSeries.constant(1e6),
                      loss_down=StepSeries.constant(1.0))
    for engine in ("python", "compiled"):
        r = run_replay([dead], get("minrtt"), workload=Bulk(), duration_ns=300_000_000, engine=engine)
        assert r.summary["random_losses"] == 0
        assert r.summary["delivered_bytes"] == 0
        ev = r.events
        assert ev.filter(ev["point"] == "drop")["t_ns"].max() is None or ev["t_ns"].max() < 300_000_000
