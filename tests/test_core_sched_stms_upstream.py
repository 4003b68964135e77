"""The compiled ports of STMS-C, STMS-A (native/engine/src/sched/stms.rs) and the upstream Linux default
(sched/upstream.rs) against their Python classes (workbench/schedulers/_stms.py, _upstream.py) run in
the compiled engine through the plug-in bridge: the defaults and every non-default value of every
parameter through random runs (tests/_engines.py: the same summary, PacketEvents, SAMPLES and
observations, value types included), plus runs aimed at what
random runs reach rarely: a path that dies mid-run (upstream's stale subflows and `msk->recovery`,
reinjection) and clearly heterogeneous paths (STMS's gap, STMS-A's burst DATA_ACKs and adjustments,
upstream's linger-time choice between steady subflows).
The gap observations must come back with the Python class's value types (floats), not just equal values."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import workbench_core
from _engines import Scenario, assert_same_run, scenarios
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay import Bulk, ConnectionConfig, PathConfig, StepSeries
from workbench.schedulers import get
from workbench.schedulers._upstream import UpstreamDefault

MS = 1_000_000

# (scheduler, parameters): each parameter at non-default values, each `bandwidth` choice
VARIANTS: list[tuple[str, dict[str, object]]] = [
    ("stms_c", {"bandwidth": "delivery_rate"}),
    ("stms_a", {"bandwidth": "delivery_rate"}),
    ("stms_a", {"adjust_interval_ms": 37.5}),
    ("stms_a", {"adjust_interval_ms": 2000.0, "min_burst_segments": 16}),
    ("stms_a", {"ewma_weight": 1.0, "min_burst_segments": 1}),
    ("stms_a", {"ewma_weight": 0.005, "min_burst_segments": 5, "adjust_interval_ms": 250.0}),
    ("upstream", {"burst_bytes": 1424}),
    ("upstream", {"burst_bytes": 9_000}),
    ("upstream", {"burst_bytes": 1 << 20}),
]
DEFAULTS: list[tuple[str, dict[str, object]]] = [("stms_c", {}), ("stms_a", {}), ("upstream", {})]
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _ids(v: tuple[str, dict[str, object]]) -> str:
    return v[0] + "".join(f"-{k}={x}" for k, x in v[1].items())


def _dies(draw: st.DrawFn, horizon_ns: int) -> StepSeries:
    """A rate that drops to nothing for good (or for a long while) at a random time."""
    t0 = draw(st.integers(50 * MS, horizon_ns // 4))
    rate = draw(st.floats(2e6, 30e6))
    if draw(st.integers(0, 2)):
        return StepSeries((0, t0), (rate, 0.0))
    return StepSeries((0, t0, t0 + draw(st.integers(300 * MS, 1500 * MS))), (rate, 0.0, rate))


@st.composite
def outages(draw: st.DrawFn) -> Scenario:
    """Two or three paths, bulk or finite data, one path (both directions) dying mid-run: its subflow
    times out, goes stale under upstream, and its data is reinjected."""
    sc = draw(scenarios())
    horizon_ns = 3000 * MS
    n = draw(st.integers(2, 3))
    victim = draw(st.integers(0, n - 1))
    paths = []
    for i in range(n):
        p = PathConfig.constant(f"p{i}", rate_bps=draw(st.floats(2e6, 30e6)), owd_ns=draw(st.integers(2, 60)) * MS,
                                buffer_bytes=draw(st.integers(20_000, 300_000)),
                                loss=draw(st.sampled_from([0.0, 0.0, 0.01])))
        if i == victim:
            dead = _dies(draw, horizon_ns)
            p = dataclasses.replace(p, rate_down_bps=dead, rate_up_bps=dead)
        paths.append(p)
    # with handshakes: without them a subflow has no RTT sample, and upstream no pacing rate, until it
    # carried data, so a path dying early may never have been used
    conn = dataclasses.replace(sc.conn, handshake=True,
                               send_buf_bytes=draw(st.sampled_from([None, 4 << 20, sc.conn.send_buf_bytes])),
                               backup=tuple(p.name for p in paths[1:] if draw(st.booleans()))
                               if draw(st.booleans()) else ())
    wl = Bulk() if draw(st.integers(0, 3)) else sc.workload
    return dataclasses.replace(sc, paths=tuple(paths), links=(), routes=(), conn=conn, workload=wl,
                               duration_ns=horizon_ns)


@st.composite
def heterogeneous(draw: st.DrawFn) -> Scenario:
    """Two or three steady paths with clearly different RTTs and rates, bulk download: the slow
    subflows send from the gap and STMS-A sees burst DATA_ACKs; upstream's linger times stay close
    enough for its skb-size model to decide which subflow gets a burst."""
    sc = draw(scenarios())
    n = draw(st.integers(2, 3))
    owd_ms = sorted(draw(st.lists(st.integers(3, 120), min_size=n, max_size=n, unique=True)))
    paths = tuple(PathConfig.constant(f"p{i}", rate_bps=draw(st.floats(3e6, 40e6)), owd_ns=owd_ms[i] * MS,
                                      buffer_bytes=draw(st.integers(30_000, 400_000)),
                                      loss=draw(st.sampled_from([0.0, 0.0, 0.002, 0.02])))
                  for i in range(n))
    conn = dataclasses.replace(sc.conn, backup=(), rcv_buf_bytes=draw(st.sampled_from([128_000, 6 * 1024 * 1024])))
    return dataclasses.replace(sc, paths=paths, links=(), routes=(), conn=conn, direction="down",
                               workload=Bulk(), duration_ns=draw(st.sampled_from([1500 * MS, 3000 * MS])))


def test_the_ports_are_registered() -> None:
    assert {"stms_a", "stms_c", "upstream"} <= set(workbench_core.compiled_schedulers())


@pytest.mark.parametrize("variant", DEFAULTS + VARIANTS, ids=_ids)
@SETTINGS
@given(sc=scenarios())
def test_parameter_variants_give_the_bridged_run(variant: tuple[str, dict[str, object]], sc: Scenario) -> None:
    assert_same_run(get(variant[0], **variant[1]), sc)


@pytest.mark.parametrize("variant", DEFAULTS + VARIANTS[:2] + VARIANTS[6:7], ids=_ids)
@settings(SETTINGS, max_examples=30)
@given(sc=outages())
def test_a_dying_path_gives_the_bridged_run(variant: tuple[str, dict[str, object]], sc: Scenario) -> None:
    assert_same_run(get(variant[0], **variant[1]), sc)


@pytest.mark.parametrize("variant", DEFAULTS + VARIANTS, ids=_ids)
@settings(SETTINGS, max_examples=30)
@given(sc=heterogeneous())
def test_heterogeneous_paths_give_the_bridged_run(variant: tuple[str, dict[str, object]], sc: Scenario) -> None:
    assert_same_run(get(variant[0], **variant[1]), sc)


def _dying_path(victim: int, t0_ms: int) -> Scenario:
    """Two paths, bulk download, path ``victim`` dead (both directions) from ``t0_ms`` on."""
    paths = []
    for i, (rate, owd_ms) in enumerate([(20e6, 10), (10e6, 30)]):
        p = PathConfig.constant(f"p{i}", rate_bps=rate, owd_ns=owd_ms * MS)
        if i == victim:
            dead = StepSeries((0, t0_ms * MS), (rate, 0.0))
            p = dataclasses.replace(p, rate_down_bps=dead, rate_up_bps=dead)
        paths.append(p)
    return Scenario(paths=tuple(paths), links=(), routes=(), conn=ConnectionConfig(), workload=Bulk(),
                    duration_ns=3000 * MS, seed=1, direction="down")


DYING = [(v, t0) for v in (0, 1) for t0 in (100, 300, 700)]


@pytest.mark.parametrize(("victim", "t0_ms"), DYING)
@pytest.mark.parametrize("variant", DEFAULTS + VARIANTS[:2] + VARIANTS[6:7], ids=_ids)
def test_a_dead_path_gives_the_bridged_run(variant: tuple[str, dict[str, object]], victim: int, t0_ms: int,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand-made outages that are known to reach upstream's stale subflow and `msk->recovery` (checked on
    the bridged Python class's run), and STMS's reinjection and gap adjustments."""
    seen: set[str] = set()
    sel = UpstreamDefault.select

    def spy(self: UpstreamDefault, conn: Any, subflows: Any) -> Any:
        if conn.recovery and conn.reinject_head >= 0:
            seen.add("recovery")
        return sel(self, conn, subflows)

    monkeypatch.setattr(UpstreamDefault, "select", spy)  # only the bridged run calls it
    sched = get(variant[0], **variant[1])
    sc = _dying_path(victim, t0_ms)
    py = assert_same_run(sched, sc)
    assert py.summary["reinjections"] > 0
    if variant[0] == "upstream":
        assert "recovery" in seen
    else:
        gaps = [o[3] for o in py.observations if o[1] == "gap"]
        assert gaps and all(type(g) is float for g in gaps)
        if variant[0] == "stms_a" and t0_ms > 100:
            assert len(set(gaps)) > 1  # adjusted, not only the first STMS-C value
