"""Holding a scheduler's compiled port (native/engine/src/sched/*.rs, ``engine="compiled"``) to its Python
class (workbench/schedulers/*.py) run inside the same compiled engine through the plug-in bridge
(native/engine/src/py_sched.rs, ``engine="bridge"``): the same run through both must give the same
summary (every counter but the wall time), the same PacketEvents and SAMPLES tables row for row, and the
same scheduler observations, value types included. The engine around the scheduler is the same code on
both sides, so a difference is the port's (or the bridge's) bug, never noise: both are deterministic.

`scenarios()` draws random runs wide enough to reach every mechanism: 1-3 paths with stepping
capacity (outages included), stepping delay, random loss and small or large buffers, or a shared
bottleneck; downloads and uploads; every congestion control; delayed ACKs on or off; small receive
buffers (window-limited), receive-window growth and buffer autotuning; autotuned or fixed send buffers;
with or without handshakes, join delays and backup subflows; bulk, finite, burst and application-trace
workloads. `assert_same_run(scheduler, scenario)` runs one through the port and the bridged class and
compares; `run(scheduler, scenario, engine)` runs it once.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from workbench.experiment._model import LinkSpec
from workbench.replay import (
    AppTrace,
    Bulk,
    Bursts,
    ConnectionConfig,
    Finite,
    PathConfig,
    ReplayResult,
    Route,
    StepSeries,
    Workload,
    run_network,
    run_replay,
)
from workbench.schedulers.base import Scheduler

__all__ = ["Scenario", "assert_same_results", "assert_same_run", "run", "run_both", "scenarios"]

MS = 1_000_000


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One run: either ``paths`` (run_replay) or ``links`` + ``routes`` (run_network, shared links)."""

    paths: tuple[PathConfig, ...]
    links: tuple[LinkSpec, ...]
    routes: tuple[Route, ...]
    conn: ConnectionConfig
    workload: Workload
    duration_ns: int
    seed: int
    direction: str


def _steps(draw: st.DrawFn, values: st.SearchStrategy[float], *, max_steps: int, horizon_ns: int) -> StepSeries:
    n = draw(st.integers(1, max_steps))
    times = sorted(draw(st.sets(st.integers(1, horizon_ns), min_size=n - 1, max_size=n - 1)))
    return StepSeries((0, *times), tuple(draw(values) for _ in range(n)))


def _rate(draw: st.DrawFn, horizon_ns: int) -> StepSeries:
    return _steps(draw, st.one_of(st.floats(1e6, 40e6), st.just(0.0), st.just(5e5)), max_steps=3,
                  horizon_ns=horizon_ns) if draw(st.booleans()) else StepSeries.constant(draw(st.floats(1e6, 40e6)))


def _owd(draw: st.DrawFn, horizon_ns: int) -> StepSeries:
    return _steps(draw, st.integers(1 * MS, 80 * MS).map(float), max_steps=3, horizon_ns=horizon_ns)


def _loss(draw: st.DrawFn, horizon_ns: int) -> StepSeries:
    return _steps(draw, st.one_of(st.just(0.0), st.floats(0.0, 0.05)), max_steps=2, horizon_ns=horizon_ns)


@st.composite
def _path(draw: st.DrawFn, name: str, horizon_ns: int) -> PathConfig:
    return PathConfig(
        name=name, rate_down_bps=_rate(draw, horizon_ns), rate_up_bps=_rate(draw, horizon_ns),
        owd_down_ns=_owd(draw, horizon_ns), owd_up_ns=_owd(draw, horizon_ns),
        loss_down=_loss(draw, horizon_ns), loss_up=_loss(draw, horizon_ns),
        buffer_down_bytes=draw(st.integers(4_000, 400_000)), buffer_up_bytes=draw(st.integers(2_000, 200_000)))


@st.composite
def _workload(draw: st.DrawFn, horizon_ns: int) -> Workload:
    kind = draw(st.sampled_from(["bulk", "bulk_stop", "finite", "bursts", "apptrace"]))
    if kind == "bulk":
        return Bulk()
    if kind == "bulk_stop":
        return Bulk(stop_ns=draw(st.integers(1, horizon_ns)))
    if kind == "finite":
        return Finite(size_bytes=draw(st.integers(1, 3_000_000)))
    if kind == "bursts":
        return Bursts(segments=draw(st.integers(1, 60)), idle_ns=draw(st.integers(0, 200 * MS)),
                      n_bursts=draw(st.integers(1, 6)))
    n = draw(st.integers(0, 8))
    return AppTrace(writes=[(draw(st.integers(0, horizon_ns)), draw(st.integers(0, 300_000))) for _ in range(n)])


@st.composite
def _conn(draw: st.DrawFn, path_names: list[str]) -> ConnectionConfig:
    return ConnectionConfig(
        cc=draw(st.sampled_from(["reno", "cubic", "lia", "olia"])),
        hystart=draw(st.booleans()),
        init_cwnd=draw(st.sampled_from([1, 4, 10, 32])),
        send_buf_bytes=draw(st.sampled_from([None, 64_000, 4 * 1024 * 1024])),
        rcv_buf_bytes=draw(st.sampled_from([30_000, 128_000, 6 * 1024 * 1024])),
        delayed_ack=draw(st.booleans()),
        quickack_on_meta_ooo=draw(st.booleans()),
        reinject_on_subflow_rto=draw(st.sampled_from([None, True, False])),
        handshake=draw(st.booleans()),
        join_delay_ns=draw(st.sampled_from([0, 50 * MS])),
        join_when_established=draw(st.booleans()),
        sample_interval_ns=draw(st.sampled_from([0, 10 * MS])),
        backup=tuple(n for n in path_names[1:] if draw(st.booleans())) if draw(st.booleans()) else (),
        rcv_wnd_init_bytes=draw(st.sampled_from([None, 64_000])),
        rcv_buf_init_bytes=draw(st.sampled_from([None, 131_072])),
        rto_min_ns=draw(st.sampled_from([200 * MS, 50 * MS])),
    )


@st.composite
def scenarios(draw: st.DrawFn, *, max_paths: int = 3) -> Scenario:
    horizon_ns = draw(st.sampled_from([300 * MS, 1500 * MS, 3000 * MS]))
    n = draw(st.integers(1, max_paths))
    names = [f"p{i}" for i in range(n)]
    conn = draw(_conn(names))
    shared = n > 1 and draw(st.booleans())
    links: tuple[LinkSpec, ...] = ()
    routes: tuple[Route, ...] = ()
    paths: tuple[PathConfig, ...] = tuple(draw(_path(nm, horizon_ns)) for nm in names)
    if shared:
        # every subflow's data crosses its own access link and then one shared bottleneck
        links = (LinkSpec("core", rate_bps=_rate(draw, horizon_ns), owd_ns=_owd(draw, horizon_ns),
                          loss=_loss(draw, horizon_ns), buffer_bytes=draw(st.integers(8_000, 300_000))),)
        for p in paths:
            links += (LinkSpec(f"{p.name}/down", rate_bps=p.rate_down_bps, owd_ns=p.owd_down_ns, loss=p.loss_down,
                               buffer_bytes=p.buffer_down_bytes),
                      LinkSpec(f"{p.name}/up", rate_bps=p.rate_up_bps, owd_ns=p.owd_up_ns, loss=p.loss_up,
                               buffer_bytes=p.buffer_up_bytes))
        routes = tuple(Route(p.name, data=(f"{p.name}/down", "core"), ack=(f"{p.name}/up",),
                             backup=p.name in conn.backup) for p in paths)
        paths = ()
    wl = draw(_workload(horizon_ns))
    return Scenario(paths=paths, links=links, routes=routes, conn=conn, workload=wl, duration_ns=horizon_ns,
                    seed=draw(st.integers(0, 2**31)), direction=draw(st.sampled_from(["down", "up"])))


def run(sched: Scheduler, sc: Scenario, engine: str = "compiled", *, record: bool = True) -> ReplayResult:
    """The scenario through the compiled engine (``engine``: "compiled", "auto" or "bridge")."""
    if sc.paths:
        return run_replay(list(sc.paths), sched, workload=sc.workload, conn=sc.conn, seed=sc.seed,
                          duration_ns=sc.duration_ns, direction=sc.direction, engine=engine, record=record)
    return run_network(list(sc.links), list(sc.routes), sched, workload=sc.workload, conn=sc.conn, seed=sc.seed,
                       duration_ns=sc.duration_ns, direction=sc.direction, engine=engine, record=record)


def run_both(sched: Scheduler, sc: Scenario) -> tuple[ReplayResult, ReplayResult]:
    """The scenario with the scheduler's Python class through the bridge, and with its compiled port
    (in that order: the reference first)."""
    bridged, port = run(sched, sc, "bridge"), run(sched, sc, "compiled")
    assert bridged.engine_stats["scheduler"] == "bridge", bridged.engine_stats
    # a port that is not wired in (sched/mod.rs NAMES, build_spec) would run through the bridge too and
    # pass as its own reference
    assert port.engine_stats["scheduler"] == "compiled", f"{sched!r} has no compiled port: it ran bridged"
    return bridged, port


def assert_same_run(sched: Scheduler, sc: Scenario) -> ReplayResult:
    """The compiled port gives the bridged Python class's run (summary, tables, observations); returns
    the bridged run."""
    bridged, port = run_both(sched, sc)
    assert_same_results(bridged, port)
    return bridged


def assert_same_results(ref: ReplayResult, got: ReplayResult) -> None:
    """Two runs gave the same results: summary (but wall time), PacketEvents, SAMPLES, observations
    (with their value types: an int must not come back a float)."""
    a = {k: v for k, v in ref.summary.items() if k != "wall_s"}
    b = {k: v for k, v in got.summary.items() if k != "wall_s"}
    assert a == b, {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
    ea, eb = ref.events, got.events
    assert ea.height == eb.height, (ea.height, eb.height)
    assert ea.equals(eb), "PacketEvents differ"
    assert ref.samples.equals(got.samples), "SAMPLES differ"
    oa, ob = ref.observations, got.observations
    assert oa == ob
    assert [tuple(map(type, o)) for o in oa] == [tuple(map(type, o)) for o in ob]
