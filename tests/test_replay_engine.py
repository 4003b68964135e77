"""Engine mechanics, against worked examples: the compiled link (`workbench_core.Link` / `run_link`: event
order, rate integration, drop-tail in bytes, delay pipe, loss), and whole runs of the compiled engine:
determinism, workloads, ACK sizes on every hop, the PacketEvents / Samples tables."""

from __future__ import annotations

import random

import polars as pl
import pytest
import workbench_core

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
from workbench.schedulers import get

MS = 1_000_000
S = 1_000_000_000


def two_paths(**kw) -> list[PathConfig]:
    return [PathConfig.constant("wifi", rate_bps=30e6, owd_ns=10 * MS, buffer_bytes=75_000, **kw),
            PathConfig.constant("lte", rate_bps=10e6, owd_ns=40 * MS, buffer_bytes=150_000, **kw)]


# ----------------------------------------------------------------------------- link
# The Python engine's EventLoop and Timer are gone; the compiled engine's event list and lazy timer are
# held by the cargo unit tests (tests/test_core_cargo.py): events::tests::time_then_insertion_order,
# lanes_keep_the_order_of_one_heap(_when_interleaved) and lazy_timer_rearm_and_cancel. The link is
# checked here through `workbench_core.Link` / `run_link` (the compiled link on the compiled event list).
def _link(*, rate: StepSeries, buffer_bytes: int, owd: StepSeries | None = None, loss: float = 0.0,
          seed: int = 1) -> object:
    owd = owd or StepSeries.constant(0)
    return workbench_core.Link(rate_t_ns=list(rate.t_ns), rate_bps=list(rate.values), owd_t_ns=list(owd.t_ns),
                               owd_ns=list(owd.values), loss_t_ns=[0], loss=[loss], buffer_bytes=buffer_bytes,
                               rng_state=list(random.Random(seed).getstate()[1]))


def test_events_run_by_time_then_by_scheduling_order() -> None:
    """run_link schedules the sends in list order: two at 5 ms run in that order, after the one at
    1 ms listed last. At 8 Mbit/s (1000 B = 1 ms): 2 leaves at 2 ms, 0 at 6 ms, 1 (queued) at 7 ms."""
    link = _link(rate=StepSeries.constant(8e6), buffer_bytes=10_000)
    arrivals, drops = workbench_core.run_link(link, [(5 * MS, 1000), (5 * MS, 1000), (1 * MS, 1000)])
    assert arrivals == [(2 * MS, 2), (6 * MS, 0), (7 * MS, 1)] and drops == []


def test_drop_tail_buffer_in_bytes_never_holds_more() -> None:
    link = _link(rate=StepSeries.constant(8e6), buffer_bytes=10_000)
    sizes = [1500] * 20 + [400] * 10
    fates = []
    for size in sizes:
        fates.append(link.send(0, size)[0])
        assert link.queued_bytes(0) <= 10_000
    # the first packet is serialised at once, 6 x 1500 = 9000 B wait, the 7th would make 10500: packets
    # 7-19 are dropped; then 400-byte ones fit twice (9400, 9800), the third would make 10200
    dropped = [i for i, f in enumerate(fates) if f == 0]
    assert dropped == [*range(7, 20), *range(22, 30)]
    assert link.max_qbytes == 9800 and link.n_drop_queue == len(dropped)
    # everything else leaves in order, back to back at 1 byte per µs
    again = _link(rate=StepSeries.constant(8e6), buffer_bytes=10_000)
    arrivals, drops = workbench_core.run_link(again, [(0, size) for size in sizes])
    assert [i for _, i in arrivals] == [i for i in range(len(sizes)) if i not in dropped]
    assert [t for t, _ in arrivals] == [1500 * k * 1000 for k in range(1, 8)] + [10_900_000, 11_300_000]
    assert sorted(i for _, i, _ in drops) == dropped


def test_departures_integrate_piecewise_capacity() -> None:
    # 8 Mbit/s for 1 ms, outage 1 ms, then 16 Mbit/s: 1000-byte packets (1 ms at 8 Mbit/s)
    rate = StepSeries((0, 1 * MS, 2 * MS), (8e6, 0.0, 16e6))
    link = _link(rate=rate, buffer_bytes=1 << 20)
    arrivals, _ = workbench_core.run_link(link, [(0, 1000)] * 3)
    assert [t for t, _ in arrivals] == [1 * MS, 2 * MS + MS // 2, 3 * MS]


def test_delay_pipe_follows_delay_timeline_without_reordering() -> None:
    owd = StepSeries((0, 2 * MS), (10 * MS, 1 * MS))  # delay drops from 10 ms to 1 ms at t = 2 ms
    link = _link(rate=StepSeries.constant(8e6), buffer_bytes=1 << 20, owd=owd)
    arrivals, _ = workbench_core.run_link(link, [(0, 1000)] * 4 + [(20 * MS, 1000)])
    assert [i for _, i in arrivals] == [0, 1, 2, 3, 4]
    # packet 0 departs at 1 ms + 10 ms; 1-3 depart at 2-4 ms with 1 ms of delay and would overtake it:
    # held back behind it (FIFO pipe); packet 4 departs at 21 ms, arrives 1 ms later
    assert [t for t, _ in arrivals] == [11 * MS] * 4 + [20 * MS + 1 * MS + 1 * MS]


def test_random_loss_rate() -> None:
    link = _link(rate=StepSeries.constant(1e9), buffer_bytes=1 << 30, loss=0.1)
    arrivals, drops = workbench_core.run_link(link, [(0, 100)] * 20_000)
    assert len(drops) / 20_000 == pytest.approx(0.1, abs=0.01)
    assert all(reason == 1 for *_, reason in drops)
    assert len(arrivals) + len(drops) == 20_000 == link.n_sent


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


def test_a_sack_or_dsack_keeps_its_sack_block_on_every_hop() -> None:
    """An ACK carrying a SACK or a DSACK is 12 bytes longer than a plain one, at its first hop and at
    every later hop. A whole run whose ACKs cross two links (1 Gbit/s with a delay that jumps from 10
    to 400 ms for a while, so the sender times out and resends what had arrived: duplicates, DSACKs;
    then 800 kbit/s, 10 µs per byte), with random loss on the data link (holes: SACKs): every ACK's
    arrival is recomputed here through both FIFO links from its send time and its size, 78 bytes plain
    or 90 with a block."""
    from workbench.experiment._model import LinkSpec
    from workbench.replay import Route, run_network

    ack_a = LinkSpec("a", rate_bps=StepSeries.constant(1e9), owd_ns=StepSeries((0, 1 * S, 1_300_000_000),
                                                                               (10 * MS, 400 * MS, 10 * MS)),
                     buffer_bytes=10**7)
    ack_b = LinkSpec("b", rate_bps=StepSeries.constant(8e5), owd_ns=StepSeries.constant(5 * MS), buffer_bytes=10**7)
    data = LinkSpec("d", rate_bps=StepSeries.constant(4e6), owd_ns=StepSeries.constant(10 * MS),
                    loss=StepSeries.constant(0.02), buffer_bytes=60_000)
    cfg = ConnectionConfig()
    r = run_network([data, ack_a, ack_b], [Route("p", data=("d",), ack=("a", "b"))], get("minrtt"),
                    workload=Bulk(), conn=cfg, duration_ns=3 * S, seed=5)
    ev = r.events
    assert ev.filter((pl.col("point") == "drop") & (pl.col("dir") == "c2s")).height == 0
    rcv = ev.filter((pl.col("point") == "rcv") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    assert rcv.height > rcv.select("subflow", "seq").unique().height  # duplicates arrived: DSACKs were sent
    acks = ev.filter((pl.col("point") == "rcv") & (pl.col("dir") == "c2s") & (pl.col("flags") == 0x010)
                     & (pl.col("t_ns") > 0) & pl.col("data_ack").is_not_null())
    sizes = acks["frame_bytes"].to_list()
    assert set(sizes) == {cfg.ack_bytes, cfg.ack_bytes + 12}  # both kinds occur
    sent = (acks["t_ns"] - acks["owd_ns"]).to_list()

    def through(link: LinkSpec, times: list[int]) -> list[int]:
        """FIFO: serialised from max(handed over, link free), rounded half up to the ns, then the delay
        in force at the departure, never overtaking the packet ahead."""
        out, free, last = [], 0, 0
        rate = link.rate_bps.values[0]
        for t, size in zip(times, sizes, strict=True):
            free = max(t, free) + int(size * 8e9 / rate + 0.5)
            last = max(free + int(link.owd_ns.at(free)), last)
            out.append(last)
        return out

    assert through(ack_b, through(ack_a, sent)) == acks["t_ns"].to_list()


def test_a_packet_held_forever_by_zero_capacity_is_never_lost() -> None:
    """Capacity zero for good holds packets in the buffer forever: they neither arrive nor draw a random
    loss (an earlier version recorded them as lost at t = 2^62 ns, which broke the tables)."""
    dead = PathConfig(name="dead", rate_down_bps=StepSeries.constant(0.0), rate_up_bps=StepSeries.constant(1e6),
                      owd_down_ns=StepSeries.constant(1e6), owd_up_ns=StepSeries.constant(1e6),
                      loss_down=StepSeries.constant(1.0))
    r = run_replay([dead], get("minrtt"), workload=Bulk(), duration_ns=300_000_000)
    assert r.summary["random_losses"] == 0
    assert r.summary["delivered_bytes"] == 0
    assert r.summary["data_packets_sent"] > 0  # sent, and held
    ev = r.events
    assert ev.filter(ev["point"] == "drop")["t_ns"].max() is None or ev["t_ns"].max() < 300_000_000
