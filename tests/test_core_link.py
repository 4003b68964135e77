"""The compiled core's link and event list (native/engine: `workbench_core.Link`, `run_link`) against
the Python engine's (`workbench.replay.link.Link` on `workbench.replay.events.EventLoop`).

Issue 17 ports the engine layer by layer; each layer must give the Python engine's results exactly,
so that the golden runs pin the ported engine too. Here: random capacity / delay / loss timelines
(outages, falling delays, lossy steps), random buffers and random send schedules (bursts at one
instant included) through both links, compared packet by packet: every arrival time and its order,
every drop with its time and reason, the counters, and the random generator's state afterwards
(the same number of draws, from the same MT19937 stream).
"""

from __future__ import annotations

import random

import pytest
import workbench_core
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay.events import EventLoop
from workbench.replay.link import Link
from workbench.replay.paths import StepSeries

MS = 1_000_000


def _series(draw: st.DrawFn, values: st.SearchStrategy[float], *, max_steps: int, horizon_ns: int) -> StepSeries:
    n = draw(st.integers(1, max_steps))
    times = sorted(draw(st.sets(st.integers(1, horizon_ns), min_size=n - 1, max_size=n - 1)))
    return StepSeries((0, *times), tuple(draw(values) for _ in range(n)))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[StepSeries, StepSeries, StepSeries, int, list[tuple[int, int]], int]:
    horizon_ns = draw(st.sampled_from([20 * MS, 200 * MS]))
    rate = _series(draw, st.one_of(st.just(0.0), st.floats(2e5, 1e8)), max_steps=6, horizon_ns=horizon_ns)
    owd = _series(draw, st.integers(0, 80 * MS).map(float), max_steps=5, horizon_ns=horizon_ns)
    loss = _series(draw, st.one_of(st.just(0.0), st.floats(0.0, 0.4)), max_steps=4, horizon_ns=horizon_ns)
    buffer_bytes = draw(st.integers(1500, 120_000))
    n = draw(st.integers(1, 300))
    times = sorted(draw(st.lists(st.integers(0, horizon_ns), min_size=n, max_size=n)))
    sizes = draw(st.lists(st.sampled_from([66, 78, 1514]) | st.integers(40, 1514), min_size=n, max_size=n))
    return rate, owd, loss, buffer_bytes, list(zip(times, sizes, strict=True)), draw(st.integers(0, 2**32 - 1))


def python_link(rate: StepSeries, owd: StepSeries, loss: StepSeries, buffer_bytes: int,
                sends: list[tuple[int, int]], seed: int) -> tuple[list, list, Link, random.Random]:
    loop = EventLoop()
    rng = random.Random(seed)
    arrivals: list[tuple[int, int]] = []
    drops: list[tuple[int, int, int]] = []
    link = Link(loop, name="x", rate_bps=rate, owd_ns=owd, loss=loss, buffer_bytes=buffer_bytes, rng=rng,
                deliver=lambda i: arrivals.append((loop.now, i)),
                on_drop=lambda i, t, reason: drops.append((t, i, reason)))
    for i, (t, size) in enumerate(sends):
        loop.at(t, lambda i, size=size: link.send(i, size), i)
    loop.run()
    return arrivals, drops, link, rng


def rust_link(rate: StepSeries, owd: StepSeries, loss: StepSeries, buffer_bytes: int,
              seed: int) -> object:
    return workbench_core.Link(
        rate_t_ns=list(rate.t_ns), rate_bps=list(rate.values), owd_t_ns=list(owd.t_ns), owd_ns=list(owd.values),
        loss_t_ns=list(loss.t_ns), loss=list(loss.values), buffer_bytes=buffer_bytes,
        rng_state=list(random.Random(seed).getstate()[1]))


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_link_fates_equal_the_python_engine_packet_by_packet(sc) -> None:
    rate, owd, loss, buffer_bytes, sends, seed = sc
    py_arrivals, py_drops, py_link, py_rng = python_link(rate, owd, loss, buffer_bytes, sends, seed)
    rs = rust_link(rate, owd, loss, buffer_bytes, seed)
    rs_arrivals, rs_drops = workbench_core.run_link(rs, sends)
    assert rs_arrivals == py_arrivals
    assert rs_drops == py_drops
    assert (rs.n_sent, rs.n_drop_queue, rs.n_drop_loss, rs.max_qbytes) == (
        py_link.n_sent, py_link.n_drop_queue, py_link.n_drop_loss, py_link.max_qbytes)
    assert tuple(rs.rng_state()) == py_rng.getstate()[1]


def test_a_lossy_link_draws_the_python_stream() -> None:
    """Half the packets lost at random: the Rust link must lose the very ones Python's
    random.Random(7) picks (an independent check of the MT19937 port and its 53-bit floats)."""
    rng = random.Random(7)
    expect = [rng.random() < 0.5 for _ in range(200)]
    rs = workbench_core.Link(rate_t_ns=[0], rate_bps=[1e9], owd_t_ns=[0], owd_ns=[0.0], loss_t_ns=[0],
                             loss=[0.5], buffer_bytes=10**9, rng_state=list(random.Random(7).getstate()[1]))
    got = [rs.send(i * MS, 100)[0] == 1 for i in range(200)]
    assert got == expect
    assert 60 < sum(got) < 140


def test_queue_and_outage_by_hand() -> None:
    """8 Mbit/s = 1 byte per µs, 10 ms delay, 2500-byte buffer; an outage from 5 to 6 ms."""
    rs = workbench_core.Link(rate_t_ns=[0, 5 * MS, 6 * MS], rate_bps=[8e6, 0.0, 8e6], owd_t_ns=[0],
                             owd_ns=[10.0 * MS], loss_t_ns=[0], loss=[0.0], buffer_bytes=2500,
                             rng_state=list(random.Random(0).getstate()[1]))
    assert rs.send(0, 1000) == (2, 11 * MS)           # serialised 0-1 ms
    assert rs.send(0, 1000) == (2, 12 * MS)           # buffered, 1-2 ms
    assert rs.send(0, 1000) == (2, 13 * MS)           # buffered, 2-3 ms (2000 bytes queued)
    assert rs.send(0, 1000) == (0, 0)                 # 3000 > 2500: dropped
    assert rs.queued_bytes(1 * MS) == 1000
    assert rs.send(4_500_000, 1000) == (2, 16_500_000)  # 0.5 ms before the outage, 0.5 ms after it
    with pytest.raises(ValueError, match="strictly increasing"):
        workbench_core.Link(rate_t_ns=[0, 0], rate_bps=[1.0, 2.0], owd_t_ns=[0], owd_ns=[0.0], loss_t_ns=[0],
                            loss=[0.0], buffer_bytes=1, rng_state=list(random.Random(0).getstate()[1]))
