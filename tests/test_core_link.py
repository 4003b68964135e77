"""The compiled core's link and event list (native/engine: `workbench_core.Link`, `run_link`) against an
independent truth: a tiny reference of a trace-driven drop-tail link written here, and invariants.

The model (mahimahi-style, docs of native/engine/src/link.rs): a packet handed over at `now` starts
serialisation when the link is free (`start = max(now, busy_until)`); while it waits it is in a drop-tail
buffer counted in bytes, and one that would push the waiting bytes above the buffer is dropped at
once (a packet that finds the link idle goes straight to the wire, whatever its size). Serialisation
ends when the integral of the piecewise-constant capacity from `start` reaches its size in bits (zero
capacity contributes nothing; zero for good holds the packet for ever: it neither arrives nor is lost),
rounded half up to the ns. Random loss is decided at that moment from the loss timeline there, by one
`random()` of the link's MT19937 stream per packet on a lossy step (none on a loss-free one); a
survivor then arrives after the one-way delay in force when it left the queue, but never before the
packet ahead of it (FIFO: a falling delay does not reorder).

The reference integrates the capacity in exact rational arithmetic (`fractions.Fraction`) and draws
its losses from Python's own `random.Random(seed)`, so the check covers the integration, the rounding,
the buffer, the delay pipe, the counters and the random stream (its state after the run included).
Invariants over the same random scenarios: conservation, FIFO order, the buffer never exceeded,
departure spacing at a constant rate, zero capacity holding packets without losing them, determinism.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from fractions import Fraction
from itertools import pairwise

import pytest
import workbench_core
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay.paths import StepSeries

MS = 1_000_000
NEVER = 1 << 62  # the engine's "never" (native/engine/src/link.rs: INF)


def _series(draw: st.DrawFn, values: st.SearchStrategy[float], *, max_steps: int, horizon_ns: int) -> StepSeries:
    n = draw(st.integers(1, max_steps))
    times = sorted(draw(st.sets(st.integers(1, horizon_ns), min_size=n - 1, max_size=n - 1)))
    return StepSeries((0, *times), tuple(draw(values) for _ in range(n)))


Scenario = tuple[StepSeries, StepSeries, StepSeries, int, list[tuple[int, int]], int]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """Random capacity / delay / loss timelines (outages, falling delays, lossy steps), random buffers
    and random send schedules (bursts at one instant included)."""
    horizon_ns = draw(st.sampled_from([20 * MS, 200 * MS]))
    rate = _series(draw, st.one_of(st.just(0.0), st.just(8e6), st.floats(2e5, 1e8)), max_steps=6,
                   horizon_ns=horizon_ns)
    owd = _series(draw, st.integers(0, 80 * MS).map(float), max_steps=5, horizon_ns=horizon_ns)
    loss = _series(draw, st.one_of(st.just(0.0), st.floats(0.0, 0.4)), max_steps=4, horizon_ns=horizon_ns)
    buffer_bytes = draw(st.integers(1500, 120_000) | st.sampled_from([3028, 4542, 15140]))  # a full buffer, exactly
    n = draw(st.integers(1, 300))
    times = sorted(draw(st.lists(st.integers(0, horizon_ns), min_size=n, max_size=n)))
    sizes = draw(st.lists(st.sampled_from([66, 78, 1514]) | st.integers(40, 1514), min_size=n, max_size=n))
    return rate, owd, loss, buffer_bytes, list(zip(times, sizes, strict=True)), draw(st.integers(0, 2**32 - 1))


def rust_link(rate: StepSeries, owd: StepSeries, loss: StepSeries, buffer_bytes: int, seed: int) -> object:
    return workbench_core.Link(
        rate_t_ns=list(rate.t_ns), rate_bps=list(rate.values), owd_t_ns=list(owd.t_ns), owd_ns=list(owd.values),
        loss_t_ns=list(loss.t_ns), loss=list(loss.values), buffer_bytes=buffer_bytes,
        rng_state=list(random.Random(seed).getstate()[1]))


# ----------------------------------------------------------------------------- the reference
def departure_ns(rate: StepSeries, start: int, size_bytes: int) -> int | None:
    """When serialisation of `size_bytes` started at `start` ends: the exact integral of the capacity,
    rounded half up to the ns; None when capacity zero for good never lets it finish."""
    ts, vs = rate.t_ns, rate.values
    i = max(bisect_right(ts, start) - 1, 0)
    t, bits = Fraction(start), Fraction(8 * size_bytes)
    while True:
        end = ts[i + 1] if i + 1 < len(ts) else None
        r = Fraction(vs[i])
        if r > 0:
            dt = bits * 10**9 / r
            if end is None or t + dt <= end:
                return math.floor(t + dt + Fraction(1, 2))
            bits -= r * (end - t) / 10**9
        elif end is None:
            return None
        t, i = Fraction(end), i + 1


def reference_link(rate: StepSeries, owd: StepSeries, loss: StepSeries, buffer_bytes: int,
                   sends: list[tuple[int, int]], seed: int) -> dict:
    """Each packet's fate by the rules in the module docstring. Packets are handed over in time order,
    those of one instant in list order (the event list's tie-break)."""
    rng = random.Random(seed)
    in_service: list[tuple[float, int]] = []  # (start, size) of every packet accepted, in order
    busy_until: float = 0
    last_arrival = 0
    out: dict = {"arrivals": [], "drops": [], "held": [], "n_sent": 0, "max_q": 0}
    for i in sorted(range(len(sends)), key=lambda i: sends[i][0]):
        now, size = sends[i]
        start = max(now, busy_until)
        if start > now:  # waits: in the buffer with everything else still waiting
            waiting = 0
            for s, b in reversed(in_service):  # starts never decrease: the waiting ones are the last
                if s <= now:
                    break
                waiting += b
            if waiting + size > buffer_bytes:
                out["drops"].append((now, i, 0))
                continue
            out["max_q"] = max(out["max_q"], waiting + size)
        in_service.append((start, size))
        out["n_sent"] += 1
        finish = departure_ns(rate, start, size) if start != math.inf else None
        if finish is None:
            busy_until = math.inf
            out["held"].append(i)
            continue
        busy_until = finish
        p = loss.at(finish)
        if p > 0 and rng.random() < p:
            out["drops"].append((finish, i, 1))
            continue
        last_arrival = max(finish + int(owd.at(finish)), last_arrival)
        out["arrivals"].append((last_arrival, i))
    out["rng_state"] = rng.getstate()[1]
    return out


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_link_fates_equal_the_reference_packet_by_packet(sc: Scenario) -> None:
    rate, owd, loss, buffer_bytes, sends, seed = sc
    ref = reference_link(rate, owd, loss, buffer_bytes, sends, seed)
    rs = rust_link(rate, owd, loss, buffer_bytes, seed)
    arrivals, drops = first = workbench_core.run_link(rs, sends)
    # a held packet's arrival is the engine's "never" (2^62 + delay); run_link runs events up to and
    # including 2^62, so with zero delay it shows up there: not an arrival
    arrivals = [(t, i) for t, i in arrivals if t < NEVER]
    assert arrivals == ref["arrivals"]
    assert drops == ref["drops"]
    n_queue = sum(1 for d in ref["drops"] if d[2] == 0)
    assert (rs.n_sent, rs.n_drop_queue, rs.n_drop_loss, rs.max_qbytes) == (
        ref["n_sent"], n_queue, len(ref["drops"]) - n_queue, ref["max_q"])
    # the same number of draws from the same stream as Python's random.Random(seed)
    assert tuple(rs.rng_state()) == ref["rng_state"]
    # the same random state gives the same fates
    assert workbench_core.run_link(rust_link(rate, owd, loss, buffer_bytes, seed), sends) == first

    # invariants, whatever the reference says
    arrived, dropped = [i for _, i in arrivals], [i for _, i, _ in drops]
    assert len(set(arrived)) == len(arrived) and len(set(dropped)) == len(dropped)  # each fate once...
    assert not set(arrived) & set(dropped)  # ...and one fate per packet
    held = set(range(len(sends))) - set(arrived) - set(dropped)
    # conservation: sent = arrived + dropped + held, and the counters agree with the fates
    assert rs.n_sent == len(sends) - rs.n_drop_queue == len(arrivals) + rs.n_drop_loss + len(held)
    assert held == set(ref["held"])
    assert [i for _, i in arrivals] == sorted(i for _, i in arrivals)  # FIFO: in send order...
    assert [t for t, _ in arrivals] == sorted(t for t, _ in arrivals)  # ...and in time order
    assert all(t >= sends[i][0] + min(owd.values) for t, i in arrivals)
    assert all(t >= sends[i][0] for t, i, _ in drops)
    assert rs.max_qbytes <= buffer_bytes
    if held:  # only capacity zero for good holds packets: all after the first held one are held or dropped
        assert rate.values[-1] == 0.0
        first = min(held, key=lambda i: (sends[i][0], i))
        later = [i for i in range(len(sends)) if (sends[i][0], i) > (sends[first][0], first)]
        assert not {i for _, i in arrivals} & set(later)
        assert all(reason == 0 for _, i, reason in drops if i in later)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(), rate_bps=st.floats(2e5, 1e8), owd_ns=st.integers(0, 80 * MS))
def test_constant_rate_spaces_departures_by_the_serialisation_time(sc: Scenario, rate_bps: float,
                                                                   owd_ns: int) -> None:
    """At a constant rate and delay, two packets that arrive back to back (nothing lost between them)
    are at least the second one's serialisation time apart (less the two roundings, 1 ns), and exactly
    that when the second had to wait for the first."""
    _, _, _, buffer_bytes, sends, seed = sc
    rate = StepSeries.constant(rate_bps)
    owd = StepSeries.constant(float(owd_ns))
    rs = rust_link(rate, owd, StepSeries.constant(0.0), buffer_bytes, seed)
    arrivals, drops = workbench_core.run_link(rs, sends)
    assert all(reason == 0 for *_, reason in drops)  # no loss configured: queue drops only
    assert len(arrivals) + len(drops) == len(sends)
    for (t0, _), (t1, i1) in pairwise(arrivals):
        ser = sends[i1][1] * 8e9 / rate_bps
        assert t1 - t0 >= ser - 1
        if sends[i1][0] < t0 - owd_ns:  # handed over before the one ahead had left: it waited
            assert abs((t1 - t0) - ser) <= 1
    again = rust_link(rate, owd, StepSeries.constant(0.0), buffer_bytes, seed)
    assert workbench_core.run_link(again, sends) == (arrivals, drops)  # deterministic


def test_zero_capacity_holds_packets_without_losing_them() -> None:
    """8 Mbit/s until 2 ms, then nothing for good, on a link losing every packet that leaves: the
    packets serialised before 2 ms are lost (one draw each), the one starting at 2 ms and those queued
    behind it are held for ever (no arrival, no loss, no draw), the one beyond the buffer overflows."""
    rs = workbench_core.Link(rate_t_ns=[0, 2 * MS], rate_bps=[8e6, 0.0], owd_t_ns=[0], owd_ns=[5.0 * MS],
                             loss_t_ns=[0], loss=[1.0], buffer_bytes=3000,
                             rng_state=list(random.Random(3).getstate()[1]))
    # 1000 B = 1 ms at 8 Mbit/s: packet 0 leaves at 1 ms, packet 1 at 2 ms (the step's instant: still
    # served). At 1.5 ms packet 2 waits for 2 ms and then never ends; 3 and 4 wait behind it (3000 B
    # waiting), 5 would make 4000 B: dropped.
    sends = [(0, 1000)] * 2 + [(1_500_000, 1000)] * 4
    arrivals, drops = workbench_core.run_link(rs, sends)
    assert arrivals == []
    assert drops == [(1 * MS, 0, 1), (2 * MS, 1, 1), (1_500_000, 5, 0)]
    assert (rs.n_sent, rs.n_drop_loss, rs.n_drop_queue, rs.max_qbytes) == (5, 2, 1, 3000)
    assert rs.queued_bytes(10**15) == 2000  # 3 and 4 still wait (2 is "in service"), for ever
    r = random.Random(3)
    r.random(), r.random()
    assert tuple(rs.rng_state()) == r.getstate()[1]  # exactly two draws
    ref = reference_link(StepSeries((0, 2 * MS), (8e6, 0.0)), StepSeries.constant(5.0 * MS), StepSeries.constant(1.0),
                         3000, sends, 3)
    assert (ref["arrivals"], ref["drops"], ref["held"]) == ([], drops, [2, 3, 4])


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


def test_loss_is_drawn_only_on_lossy_steps() -> None:
    """Loss 0.5 from 10 ms: packets leaving before draw nothing, so the first one after the step takes
    the stream's first number (random.Random(11)), not a later one."""
    rs = workbench_core.Link(rate_t_ns=[0], rate_bps=[8e9], owd_t_ns=[0], owd_ns=[0.0], loss_t_ns=[0, 10 * MS],
                             loss=[0.0, 0.5], buffer_bytes=10**6, rng_state=list(random.Random(11).getstate()[1]))
    assert all(rs.send(i * MS, 1000)[0] == 2 for i in range(10))  # 1 µs each, all before 10 ms
    rng = random.Random(11)
    expect = [rng.random() < 0.5 for _ in range(50)]
    assert [rs.send(10 * MS + i * MS, 1000)[0] == 1 for i in range(50)] == expect


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


def test_rounding_is_half_up_to_the_ns() -> None:
    """16 Mbit/s = 2 bytes per µs: 1 byte takes 500 ns exactly; at 3.2 Gbit/s, 1 byte takes 2.5 ns,
    rounded up to 3, and the next one starts from that rounded end (3 + 2.5 -> 6)."""
    rs = workbench_core.Link(rate_t_ns=[0], rate_bps=[16e6], owd_t_ns=[0], owd_ns=[0.0], loss_t_ns=[0],
                             loss=[0.0], buffer_bytes=10**6, rng_state=list(random.Random(0).getstate()[1]))
    assert rs.send(0, 1) == (2, 500)
    fast = workbench_core.Link(rate_t_ns=[0, 10**9], rate_bps=[3.2e9, 3.2e9 + 1], owd_t_ns=[0], owd_ns=[0.0],
                               loss_t_ns=[0], loss=[0.0], buffer_bytes=10**6,
                               rng_state=list(random.Random(0).getstate()[1]))
    assert [fast.send(0, 1), fast.send(0, 1)] == [(2, 3), (2, 6)]
    assert departure_ns(StepSeries((0, 10**9), (3.2e9, 3.2e9 + 1)), 3, 1) == 6  # the reference agrees
