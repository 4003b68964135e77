"""The compiled engine's plug-in bridge (native/engine/src/py_sched.rs): a Python `Scheduler` runs
inside the compiled engine, called with the GIL at every decision and shown live `ConnView` /
`SubflowView` objects, and the run is the Python engine's run.

Every registered scheduler's Python implementation is forced through the bridge (``engine="bridge"``)
and held to the Python engine over random runs (tests/_engines.py): same summary, PacketEvents,
SAMPLES and observations. Then what only a plug-in does: a user's own (unregistered) class, one that
reads every attribute of the protocols and checks its types, one that acts (penalize, drop_reinject,
wake_at) and reports observations of any type, the conformance suite's probe, an exception raised in
the plug-in, a view kept past its call, malformed decisions.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import workbench_core
from _engines import Scenario, assert_same_results, scenarios
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay import Bulk, ConnectionConfig, Finite, PathConfig, _core, run_network, run_replay
from workbench.schedulers import available, get
from workbench.schedulers.base import ConnView, Decision, Layer, Scheduler, SubflowView, is_available
from workbench.testing import check_scheduler

if not hasattr(workbench_core, "ConnView") or not hasattr(_core, "scheduler_arg"):
    pytest.skip("workbench_core or workbench.replay._core without the plug-in bridge", allow_module_level=True)

compiled_spec = _core.compiled_spec
scheduler_arg = _core.scheduler_arg

MS = 1_000_000


def _run(sched: Scheduler, sc: Scenario, engine: str) -> Any:
    if sc.paths:
        return run_replay(list(sc.paths), sched, workload=sc.workload, conn=sc.conn, seed=sc.seed,
                          duration_ns=sc.duration_ns, direction=sc.direction, engine=engine)
    return run_network(list(sc.links), list(sc.routes), sched, workload=sc.workload, conn=sc.conn, seed=sc.seed,
                       duration_ns=sc.duration_ns, direction=sc.direction, engine=engine)


def assert_same_bridged_run(sched: Scheduler, sc: Scenario, engine: str = "bridge") -> None:
    """`_engines.assert_same_run` with the compiled side run through the bridge. Where the plug-in
    raises in the Python engine, it raises the same in the compiled one."""
    try:
        py = _run(sched, sc, "python")
    except Exception as e:  # whatever the plug-in raises, the bridge must raise it too
        with pytest.raises(type(e)) as info:
            _run(sched, sc, engine)
        assert str(info.value) == str(e)
        return
    rs = _run(sched, sc, engine)
    assert py.engine_stats["engine"] == "python"
    assert rs.engine_stats == {**rs.engine_stats, "engine": "compiled", "scheduler": "bridge"}
    assert_same_results(py, rs)
    oa, ob = py.observations, rs.observations
    # the plug-in's own objects, not converted copies
    assert [tuple(map(type, o)) for o in oa] == [tuple(map(type, o)) for o in ob]


# a layer over a scheduler without a compiled port goes through the bridge as a whole
def _layer_cases() -> list[tuple[str, Any]]:
    return [("drepas(ecf)", lambda: get("drepas", inner=get("ecf"))),
            ("rbp(stms_a)", lambda: get("rbp", inner=get("stms_a"))),
            ("drepas(rbp(upstream))", lambda: get("drepas", inner=get("rbp", inner=get("upstream"))))]


# non-default values of every parameter (each choice), scaled to the scenarios' 0.3-3 s
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "blest": [{"variant": "paper"}, {"lambda_init": 1.6, "lambda_bad": 0.2, "lambda_good": 0.1},
              {"lambda_min": 0.7, "lambda_max": 2.5}, {"opportunistic": False}, {"penalize_all": False}],
    "daps": [{"variant": "paper"}, {"round_delay": 2, "round_delay_ms": 5}, {"use_planned_cwnd": False},
             {"allow_optim": False}, {"max_flows": 2}],
    "drepas": [{"mincontribution": 0.3, "interval_s": 0.4, "score_period_ms": 30.0, "inflight_window_s": 0.1,
                "probe_segments": 2}],
    "ecf": [{"beta": 0.8}, {"variant": "paper"}, {"opportunistic": False}, {"penalize_all": False}],
    "minrtt": [{"opportunistic": False}, {"penalize_all": False}],
    "minrtt_noor": [{"opportunistic": True}, {"penalize_all": False}],
    "otias": [{"variant": "paper"}, {"max_batch": 3}],
    "rbp": [{"beta": 0.5}],
    "roundrobin": [{"num_segments": 5}, {"cwnd_limited": False}],
    "stms_a": [{"adjust_interval_ms": 100.0, "ewma_weight": 0.5, "min_burst_segments": 5},
               {"bandwidth": "delivery_rate"}],
    "stms_c": [{"bandwidth": "delivery_rate"}],
    "sttf": [{"reschedule": False}, {"optim": False}, {"max_batch": 3}],
    "upstream": [{"burst_bytes": 1424}, {"burst_bytes": 500_000}],
}

CASES = ([(n, (lambda n=n: get(n))) for n in available()] + _layer_cases()
         + [(f"{n}{kv}", (lambda n=n, kv=kv: get(n, **kv))) for n, vs in VARIANTS.items() for kv in vs])


@pytest.mark.parametrize(("label", "make"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_every_registered_scheduler_through_the_bridge_gives_the_python_run(label: str, make: Any,
                                                                            sc: Scenario) -> None:
    assert_same_bridged_run(make(), sc)


def test_every_registered_scheduler_and_parameter_is_covered() -> None:
    assert {c[0] for c in CASES} >= set(available())
    assert len(available()) >= 14
    for name in available():
        varied = {(k, v) for kv in VARIANTS.get(name, []) for k, v in kv.items()}
        for p in get(name).params:
            others = [c for c in p.choices if c != p.default] if p.choices else [None]
            for c in others:
                assert any(k == p.name and v != p.default and (c is None or v == c) for k, v in varied), \
                    (name, p.name, c)


# ------------------------------------------------------------------------------------ user plug-ins

class Greedy(Scheduler):
    """A user's own class (not registered): the lowest-srtt available subflow, cwnd room as count."""

    name: ClassVar[str] = "user_greedy"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        if conn.reinject_head >= 0:
            for sf in subflows:
                if is_available(sf) and not sf.carried(conn.reinject_head):
                    return Decision(sf.index, conn.reinject_head)
        if conn.head >= conn.n_segs or not conn.window_allows(conn.head):
            return None
        best = min((sf for sf in subflows if is_available(sf)), key=lambda s: s.srtt_ns, default=None)
        return None if best is None else Decision(best.index, count=max(best.cwnd - best.in_flight, 1))


def test_scheduler_arg_bridges_what_has_no_compiled_port() -> None:
    m = get("minrtt")
    assert scheduler_arg(m) == compiled_spec(m) and isinstance(scheduler_arg(m), tuple)
    assert scheduler_arg(m, bridge=True) is m
    g = Greedy()
    assert compiled_spec(g) is None and scheduler_arg(g) is g
    sub = type("MinRTTCopy", (type(m),), {})()  # an unregistered subclass of a compiled built-in
    assert compiled_spec(sub) is None and scheduler_arg(sub) is sub
    layer = get("drepas", inner=Greedy())  # a layer over a scheduler without a port: bridged whole
    assert compiled_spec(layer) is None and scheduler_arg(layer) is layer


_SF_TYPES = {"established": bool, "pf": bool, "backup": bool, "stale": bool, "srtt_ns": int, "srtt_us8": int,
             "rttvar_ns": int, "min_rtt_ns": int, "rto_ns": int, "cwnd": int, "ssthresh": int, "in_slow_start": bool,
             "ca_state": int, "packets_out": int, "in_flight": int, "queued": int, "queued_bytes": int,
             "unacked_bytes": int, "mss": int, "rate_bps": float, "pacing_rate_bps": float, "sndbuf_segments": int,
             "last_ack_ns": int, "index": int, "name": str}
_CONN_TYPES = {"now_ns": int, "mss": int, "snd_una": int, "write_seq": int, "wnd_end": int, "send_buf_bytes": int,
               "send_buffer_full": bool, "unsent_bytes": int, "head": int, "n_segs": int, "oldest_unacked": int,
               "reinject_head": int, "recovery": bool, "reinject_queue": tuple, "rcv_ooo_bytes": int}


def test_the_type_tables_list_every_protocol_attribute() -> None:
    def members(proto: type) -> set[str]:
        return {k for k in vars(proto) if not k.startswith("_")} | set(getattr(proto, "__annotations__", {}))
    assert members(SubflowView) - {"carried"} == set(_SF_TYPES)
    assert members(ConnView) - {"seg_dsn", "seg_len", "seg_path_mask", "seg_sent", "window_allows", "nth_unsent",
                                "seg_at_dsn", "penalize", "drop_reinject", "wake_at"} == set(_CONN_TYPES)


class Inspector(Greedy):
    """Reads every attribute and method of both protocols at every call and reports them as
    observations (so both engines must agree on every value and its type), penalizes, drops
    reinjections, sets timers, and observes values of every kind."""

    name: ClassVar[str] = "user_inspector"

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        self.n = 0
        self.by_view: dict[Any, int] = {}

    def _read(self, conn: ConnView, subflows: list[SubflowView], tag: str) -> None:
        for sf in subflows:
            self.by_view[sf] = self.by_view.get(sf, 0) + 1  # views are hashable and stable
            vals = tuple((a, getattr(sf, a)) for a in _SF_TYPES)
            for a, v in vals:
                assert type(v) is _SF_TYPES[a], (a, v)
            n = conn.n_segs
            extra = (tuple(sf.carried(i) for i in range(max(n - 3, 0), n)), sf.carried(-1) if n else None)
            self.observe(conn.now_ns, f"{tag}_sf", sf.index, (vals, extra))
        cvals = tuple((a, getattr(conn, a)) for a in _CONN_TYPES)
        for a, v in cvals:
            assert type(v) is _CONN_TYPES[a], (a, v)
        n = conn.n_segs
        segs = tuple((i, conn.seg_dsn(i), conn.seg_len(i), conn.seg_path_mask(i), conn.seg_sent(i),
                      conn.window_allows(i)) for i in (0, n // 2, n - 1, -1, -n) if n and -n <= i < n)
        nth = tuple(conn.nth_unsent(k) for k in (0, 1, 5, 10**30, -3, -(10**30)))
        at = tuple(conn.seg_at_dsn(d) for d in (0, 1, conn.snd_una, conn.write_seq, 10**30, -(10**30)))
        self.observe(conn.now_ns, tag, -1, (cvals, segs, nth, at))

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self._read(conn, subflows, "start")

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | tuple[int, int, int] | None:
        self.n += 1
        if self.n % 7 == 0:
            self._read(conn, subflows, "select")
        if self.n % 97 == 0 and len(subflows) > 1:
            conn.penalize(subflows[-1].index)
            conn.penalize(-1)  # list indexing, as the Python engine's
            self.observe(conn.now_ns, "after_penalize", 1, subflows[-1].cwnd)
        if self.n % 53 == 0 and conn.reinject_head >= 0:
            self.observe(conn.now_ns, "dropped", 0, conn.drop_reinject(conn.reinject_head))
        if self.n % 41 == 0:
            conn.wake_at(conn.now_ns + 3 * MS)
        d = super().select(conn, subflows)
        if d is not None and self.n % 2:
            return tuple(d)  # a plain tuple is a decision too
        return d

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        if self.n % 11 == 0:
            self.observe(now_ns, "ack", sf.index, (sf.cwnd, sf.rate_bps, sf.pacing_rate_bps))

    def on_loss(self, conn: ConnView, sf: SubflowView, kind: str, now_ns: int) -> None:
        self.observe(now_ns, "loss", sf.index, kind)
        self._read(conn, [sf], "loss")

    def on_timer(self, conn: ConnView, now_ns: int) -> None:
        self.observe(now_ns, "timer", 0, None)

    def on_applied(self, conn: ConnView, decision: Any, n_segments: int) -> None:
        if self.n % 5 == 0:
            self.observe(conn.now_ns, "applied", int(decision[0]), (type(decision).__name__, tuple(decision),
                                                                    n_segments))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_a_users_own_scheduler_runs_compiled_and_matches(sc: Scenario) -> None:
    assert scheduler_arg(Greedy()) is not None
    py, rs = _run(Greedy(), sc, "python"), _run(Greedy(), sc, "auto")
    assert rs.engine_stats["engine"] == "compiled" and rs.engine_stats["scheduler"] == "bridge"
    assert {k: v for k, v in py.summary.items() if k != "wall_s"} == \
           {k: v for k, v in rs.summary.items() if k != "wall_s"}
    assert py.events.equals(rs.events)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_every_view_attribute_action_and_observation_matches(sc: Scenario) -> None:
    assert_same_bridged_run(Inspector(), sc, engine="auto")


def test_the_inspector_reads_something() -> None:
    paths = [PathConfig.constant("a", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=40_000, loss=0.01),
             PathConfig.constant("b", rate_bps=10e6, owd_ns=30 * MS, buffer_bytes=80_000, loss=0.01)]
    r = run_replay(paths, Inspector(), workload=Finite(size_bytes=2_000_000), duration_ns=20_000 * MS)
    kinds = {o[1] for o in r.observations}
    assert {"start", "start_sf", "select", "select_sf", "loss", "loss_sf", "applied", "timer", "after_penalize",
            "ack"} <= kinds, kinds
    assert r.summary["penalizations"] > 0


# ------------------------------------------------------------------------------ the conformance probe

def test_the_conformance_suite_probe_runs_through_the_bridge() -> None:
    # _Probe is an unregistered Layer: run_replay's default engine bridges it (and the inner scheduler)
    assert check_scheduler("minrtt", quick=True) == []
    assert check_scheduler(Greedy, quick=True) == []

    class Meddler(Greedy):
        name: ClassVar[str] = "user_meddler"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
            conn.wnd_end = 0  # type: ignore[misc]  # the views are read-only
            return super().select(conn, subflows)

    problems = check_scheduler(Meddler, quick=True, checks=("read_only",))
    assert problems and "wnd_end" in problems[0], problems


# ------------------------------------------------------------------------------------------ errors

_PATHS = [PathConfig.constant("a", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=40_000),
          PathConfig.constant("b", rate_bps=10e6, owd_ns=30 * MS, buffer_bytes=80_000)]


class Boom(Exception):
    pass


class Raises(Greedy):
    name: ClassVar[str] = "user_raises"
    late: ClassVar[list[str]] = []  # calls after the exception (shared by the run's copy)

    def __init__(self, at: str = "select", after: int = 50) -> None:
        super().__init__()
        self.at, self.after, self.calls, self.raised = at, after, 0, False

    def _tick(self, where: str) -> None:
        if self.raised:
            self.late.append(where)
        if where == self.at:
            self.calls += 1
            if self.calls > self.after:
                self.raised = True
                raise Boom(f"{where} #{self.calls}")

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self._tick("on_start")

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        self._tick("select")
        return super().select(conn, subflows)

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        self._tick("on_ack")

    def on_applied(self, conn: ConnView, decision: Any, n_segments: int) -> None:
        self._tick("on_applied")


@pytest.mark.parametrize(("at", "after"), [("select", 50), ("select", 0), ("on_start", 0), ("on_ack", 20),
                                           ("on_applied", 30)])
@pytest.mark.parametrize("record", [True, False])
def test_an_exception_in_the_plugin_propagates_as_itself(at: str, after: int, record: bool) -> None:
    for engine in ("python", "compiled"):
        Raises.late.clear()
        with pytest.raises(Boom, match=rf"^{at} #{after + 1}$") as info:
            run_replay(_PATHS, Raises(at, after), workload=Bulk(), duration_ns=5_000 * MS, engine=engine,
                       record=record)
        # the traceback reaches into the plug-in's own frame, and the run stopped there
        assert any(tb.name == "_tick" for tb in info.traceback)
        assert Raises.late == [], (engine, Raises.late[:5])


def test_a_kept_view_raises_after_the_call() -> None:
    kept: dict[str, Any] = {}

    class Keeper(Greedy):
        name: ClassVar[str] = "user_keeper"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
            if "conn" in kept:  # the same objects at every call, valid again inside it
                assert kept["conn"] is conn and kept["subflows"] is subflows and kept["sf"] is subflows[0]
                assert kept["sf"].cwnd == subflows[0].cwnd
            kept.update(conn=conn, subflows=subflows, sf=subflows[0])
            return super().select(conn, subflows)

    run_replay(_PATHS, Keeper(), workload=Finite(size_bytes=200_000), duration_ns=5_000 * MS, engine="compiled")
    conn, sf = kept["conn"], kept["sf"]
    assert type(conn).__name__ == "ConnView" and type(sf).__name__ == "SubflowView"
    for read in (lambda: conn.head, lambda: conn.reinject_queue, lambda: conn.seg_dsn(0), lambda: conn.penalize(0),
                 lambda: conn.wake_at(0), lambda: sf.cwnd, lambda: sf.pacing_rate_bps, lambda: sf.carried(0)):
        with pytest.raises(RuntimeError, match="only valid during the scheduler call"):
            read()
    assert (sf.index, sf.name) == (0, "a")  # identity, not engine state
    assert "outside a scheduler call" in repr(sf) and "outside a scheduler call" in repr(conn)


def test_only_the_protocol_is_shown() -> None:
    seen: list[str] = []

    class Curious(Greedy):
        name: ClassVar[str] = "user_curious"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
            if not seen:
                seen.append(repr(subflows[0]))
                assert getattr(conn, "m_dsn", None) is None  # the Python engine's internals are not there
                with pytest.raises(AttributeError, match="una"):
                    _ = subflows[0].una  # type: ignore[attr-defined]
                with pytest.raises(AttributeError, match="not writable"):
                    subflows[0].in_slow_start = True  # type: ignore[misc]
                with pytest.raises(AttributeError, match="structure"):
                    conn.head = 0  # type: ignore[misc]
                with pytest.raises(AttributeError):
                    subflows[0].una = 0  # type: ignore[attr-defined]
                with pytest.raises(TypeError, match="bool object expected"):
                    subflows[0].pf = 0  # type: ignore[misc]
                with pytest.raises(TypeError, match="int object expected"):
                    subflows[0].cwnd = 2.5  # type: ignore[misc]
                with pytest.raises(IndexError):
                    conn.seg_dsn(conn.n_segs)
                with pytest.raises(TypeError):
                    conn.seg_dsn(0.5)  # type: ignore[arg-type]
                with pytest.raises(IndexError):
                    conn.penalize(len(subflows))
            return super().select(conn, subflows)

    run_replay(_PATHS, Curious(), workload=Finite(size_bytes=100_000), duration_ns=5_000 * MS, engine="compiled")
    assert seen and seen[0].startswith("Subflow(0, 'a', cwnd=")


@pytest.mark.parametrize("decision", [(5, -1, 1), (0.5, -1, 1), ("x",), 3, (0, 0.5, 1), (0, -1, None)])
def test_a_malformed_decision_raises_what_the_python_engine_raises(decision: Any) -> None:
    class Bad(Greedy):
        name: ClassVar[str] = "user_bad"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Any:
            d = super().select(conn, subflows)
            return decision if d is not None and subflows[0].established else d

    errors = []
    for engine in ("python", "compiled"):
        with pytest.raises((TypeError, IndexError)) as info:
            run_replay(_PATHS, Bad(), workload=Finite(size_bytes=100_000), duration_ns=5_000 * MS, engine=engine)
        errors.append(type(info.value))
    assert errors[0] is errors[1]


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(max_paths=2), shape=st.sampled_from(["list", "short", "float_count", "big", "negative_sub"]))
def test_odd_but_valid_decisions_give_the_python_run(sc: Scenario, shape: str) -> None:
    class Odd(Greedy):
        name: ClassVar[str] = "user_odd"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Any:
            d = super().select(conn, subflows)
            if d is None:
                return None
            sub, seg, count = d
            if shape == "list":
                return [sub, seg, count]
            if shape == "short" and seg >= 0:
                return (sub, seg)  # the engine reads d[2] only for the head
            if shape == "float_count" and seg < 0:
                return (sub, seg, count - 0.5)
            if shape == "big":
                return (sub, seg if seg >= 0 else -(10**30), 10**30 if count > 3 else count)
            if shape == "negative_sub":
                return (sub - len(subflows), seg, count)
            return d

    assert_same_bridged_run(Odd(), sc, engine="compiled")


class Mutator(Greedy):
    """Breaks the protocol: writes view attributes (the conformance suite reports it). The Python
    engine's objects take the writes; the bridge writes the engine's fields, and the run is the same."""

    name: ClassVar[str] = "user_mutator"

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        self.n = 0

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        self.n += 1
        sf = subflows[self.n % len(subflows)]
        w: Any = sf
        c: Any = conn
        k = self.n % 13
        if self.n % 3 == 0:
            if k == 0:
                w.ssthresh = max(2, sf.cwnd // 2)
            elif k == 1:
                w.cwnd = max(1, sf.cwnd - 1)
            elif k == 2:
                w.rate_bps = sf.rate_bps / 2 if self.n % 2 else int(sf.rate_bps)
            elif k == 3:
                w.pf = not sf.pf and sf.established and self.n % 7 == 0
            elif k == 4:
                c.wnd_end = conn.wnd_end + (1 if self.n % 2 else -conn.mss)
            elif k == 5:
                w.srtt_ns = sf.srtt_ns + 1000
                w.srtt_us8 = max(sf.srtt_us8 - 8, 8) if sf.srtt_us8 else 0
            elif k == 6:
                w.last_ack_ns = conn.now_ns
                w.stale = False
            elif k == 7:
                w.backup = not sf.backup if self.n % 11 == 0 else sf.backup
            elif k == 8:
                c.send_buffer_full = not conn.send_buffer_full if self.n % 5 == 0 else conn.send_buffer_full
                c.recovery = conn.recovery or self.n % 17 == 0
            elif k == 9:
                c.send_buf_bytes = conn.send_buf_bytes + conn.mss
            elif k == 10:
                w.ca_state = 0 if sf.ca_state == 3 and self.n % 2 else sf.ca_state
            elif k == 11:
                w.in_flight, w.packets_out = sf.in_flight + 1, sf.packets_out + 1
            else:
                w.queued, w.queued_bytes = sf.queued, sf.queued_bytes + 1
        return super().select(conn, subflows)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_writes_to_view_attributes_land_where_the_python_engine_puts_them(sc: Scenario) -> None:
    assert_same_bridged_run(Mutator(), sc, engine="compiled")


def test_the_connection_config_still_overrides_the_flavour() -> None:
    conn = ConnectionConfig(reinject_on_subflow_rto=False)
    lossy = [PathConfig.constant("a", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=20_000, loss=0.05),
             PathConfig.constant("b", rate_bps=10e6, owd_ns=30 * MS, buffer_bytes=20_000, loss=0.05)]
    for sched in (get("upstream"), get("ecf"), Greedy()):
        a = run_replay(lossy, sched, workload=Finite(size_bytes=500_000), conn=conn, duration_ns=30_000 * MS,
                       engine="python")
        b = run_replay(lossy, sched, workload=Finite(size_bytes=500_000), conn=conn, duration_ns=30_000 * MS,
                       engine="bridge")
        assert a.events.equals(b.events)


class _Wrap(Layer):
    """A user's layer over a compiled built-in: bridged as a whole (the inner minRTT runs in Python)."""

    name: ClassVar[str] = "user_wrap"

    def usable(self, conn: ConnView, subflows: list[SubflowView]) -> list[SubflowView]:
        return [s for s in subflows if not s.backup] or subflows


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_a_users_layer_over_a_compiled_builtin(sc: Scenario) -> None:
    assert scheduler_arg(_Wrap(get("minrtt"))) is not None and compiled_spec(_Wrap(get("minrtt"))) is None
    assert_same_bridged_run(_Wrap(get("minrtt")), sc, engine="auto")
