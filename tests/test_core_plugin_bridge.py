"""The compiled engine's plug-in bridge (native/engine/src/py_sched.rs): a Python `Scheduler` runs inside
the compiled engine, called with the GIL at every decision and shown live `ConnView` / `SubflowView`
objects. Held to independent truth:

* the compiled scheduler ports: every registered scheduler's Python class forced through the bridge
  (``engine="bridge"``), at its defaults and at non-default values of every parameter, layers
  included, gives its port's run over random runs (tests/_engines.py: same summary, PacketEvents,
  SAMPLES and observations, value types included); and a user's own class that decides as a
  built-in does gives that built-in's port run: an unregistered copy of each built-in (which the
  default engine sends through the bridge), a round-robin written from scratch here, a user's layer
  that delegates everything, decisions in odd but (by Python's rules) equivalent shapes, writes that
  put back the value just read, a scheduler that reads every attribute and method at every call;
* the protocol itself (workbench/schedulers/base.py): what the views show is consistent (the
  segment table's arithmetic, the window test's formula, the reinjection queue's head, the types of
  every attribute), and the actions do what the protocol says (``penalize`` halves cwnd and, out of
  slow start, ssthresh; ``drop_reinject``; ``wake_at`` calls ``on_timer`` at the earliest time asked);
* Python's own rules for what only a plug-in can do: an exception raised in the plug-in comes out of
  the run as itself, a view kept past its call refuses to be read, malformed decisions raise what
  indexing a list or comparing an int would raise, observations are the plug-in's own objects;
  plus the conformance suite's probe, which runs through the bridge.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import pytest
import workbench_core
from _engines import Scenario, assert_same_results, assert_same_run, run, scenarios
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay import Bulk, ConnectionConfig, Finite, PathConfig, _core, run_replay
from workbench.schedulers import available, get
from workbench.schedulers._minrtt import MinRTT
from workbench.schedulers.base import ConnView, Decision, Layer, Scheduler, SubflowView, is_available
from workbench.testing import check_scheduler

compiled_spec = _core.compiled_spec
scheduler_arg = _core.scheduler_arg

MS = 1_000_000
SETTINGS = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _port_run(sched: Scheduler, sc: Scenario) -> Any:
    r = run(sched, sc, "compiled")
    assert r.engine_stats["scheduler"] == "compiled", r.engine_stats
    return r


def _user_run(sched: Scheduler, sc: Scenario, engine: str = "auto") -> Any:
    """A user's class: the default engine sends it through the bridge."""
    r = run(sched, sc, engine)
    assert r.engine_stats == {**r.engine_stats, "engine": "compiled", "scheduler": "bridge"}
    return r


# ------------------------------------------------------------------- built-ins: bridged class vs port

# layers over other schedulers than minRTT, nested
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
@settings(SETTINGS, max_examples=25)
@given(sc=scenarios())
def test_every_registered_scheduler_through_the_bridge_gives_its_port_run(label: str, make: Any,
                                                                          sc: Scenario) -> None:
    assert_same_run(make(), sc)


def test_every_registered_scheduler_and_parameter_is_covered() -> None:
    assert {c[0] for c in CASES} >= set(available())
    assert len(available()) >= 14
    assert set(available()) <= set(workbench_core.compiled_schedulers())  # each has a port to hold it to
    for name in available():
        varied = {(k, v) for kv in VARIANTS.get(name, []) for k, v in kv.items()}
        for p in get(name).params:
            others = [c for c in p.choices if c != p.default] if p.choices else [None]
            for c in others:
                assert any(k == p.name and v != p.default and (c is None or v == c) for k, v in varied), \
                    (name, p.name, c)


def _unregistered_copy(sched: Scheduler) -> Scheduler:
    """``sched`` as an instance of a user's subclass of its class (same parameters, same code)."""
    mine = copy.deepcopy(sched)
    mine.__class__ = type(f"User{type(sched).__name__}", (type(sched),), {})
    return mine


COPIES = [n for n in available() if not isinstance(get(n), Layer)] + ["drepas", "rbp"]


@pytest.mark.parametrize("name", COPIES)
@settings(SETTINGS, max_examples=10)
@given(sc=scenarios())
def test_a_users_copy_of_a_builtin_runs_bridged_and_gives_the_port_run(name: str, sc: Scenario) -> None:
    builtin = get(name, inner=get("minrtt")) if name in ("drepas", "rbp") else get(name)
    mine = _unregistered_copy(builtin)
    assert compiled_spec(mine) is None and scheduler_arg(mine) is mine
    assert_same_results(_port_run(builtin, sc), _user_run(mine, sc))


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


class MyRoundRobin(Scheduler):
    """A user's round-robin written from the out-of-tree kernel's ``mptcp_rr.c`` (one segment per
    subflow and round, only subflows with cwnd room), independently of workbench's own: each usable
    subflow takes one segment per round, the last unused one in list order first; when every usable
    one has had its turn, a new round starts among them. A reinjection goes to the last usable
    subflow that has not carried it, else to the last usable one."""

    name: ClassVar[str] = "user_rr"

    def __init__(self) -> None:
        super().__init__()
        self.had_turn: set[int] = set()

    @staticmethod
    def usable(sf: SubflowView) -> bool:
        # mptcp_is_available with the ">" queue test of mptcp_rr.c's vintage: up, not potentially
        # failed, not in loss recovery, room in cwnd net of the bytes queued on it
        room = sf.cwnd - sf.in_flight
        return (sf.established and not sf.pf and sf.ca_state != 4 and room > 0
                and sf.queued_bytes <= room * sf.mss)

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> tuple[int, int, int] | None:
        up = [sf for sf in subflows if self.usable(sf)]
        seg = conn.reinject_head
        if seg >= 0:
            fresh = [sf for sf in up if not sf.carried(seg)] or up
            return (fresh[-1].index, seg, 1) if fresh else None
        if conn.head >= conn.n_segs or not conn.window_allows(conn.head) or not up:
            return None
        waiting = [sf for sf in up if sf.index not in self.had_turn]
        if not waiting:  # everyone usable had a turn: a new round among them
            self.had_turn -= {sf.index for sf in up}
            waiting = up
        self.had_turn.add(waiting[-1].index)
        return (waiting[-1].index, -1, 1)


@settings(SETTINGS, max_examples=60)
@given(sc=scenarios())
def test_a_users_round_robin_gives_the_compiled_round_robin_run(sc: Scenario) -> None:
    assert_same_results(_port_run(get("roundrobin"), sc), _user_run(MyRoundRobin(), sc))


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


class _Delegate(Layer):
    """A user's layer over a compiled built-in that changes nothing: bridged as a whole (the inner
    minRTT runs as Python)."""

    name: ClassVar[str] = "user_delegate"


@settings(SETTINGS, max_examples=30)
@given(sc=scenarios())
def test_a_users_layer_over_a_compiled_builtin(sc: Scenario) -> None:
    mine = _Delegate(get("minrtt"))
    assert compiled_spec(mine) is None and scheduler_arg(mine) is mine
    assert_same_results(_port_run(get("minrtt"), sc), _user_run(mine, sc))


# ----------------------------------------------------------------------------- the views and actions

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


def read_views(conn: ConnView, subflows: list[SubflowView], *, whole: bool = True) -> tuple[Any, ...]:
    """Every attribute and method of both protocols, checked for type and consistency (what the
    protocol's comments define); returns what was read. ``whole``: ``subflows`` is the list a
    `select` gets (subflow k at position k), not one subflow."""
    sfv = tuple(tuple((a, getattr(sf, a)) for a in _SF_TYPES) for sf in subflows)
    cv = tuple((a, getattr(conn, a)) for a in _CONN_TYPES)
    for vals, types in [*((v, _SF_TYPES) for v in sfv), (cv, _CONN_TYPES)]:
        for a, v in vals:
            assert type(v) is types[a], (a, v)
    n, head, mss = conn.n_segs, conn.head, conn.mss
    assert 0 <= conn.snd_una <= conn.write_seq and 0 <= head <= n
    q = conn.reinject_queue
    assert list(q) == sorted(set(q)) and conn.reinject_head == (q[0] if q else -1)
    # the written data is cut into consecutive segments of at most one MSS each
    assert conn.write_seq == (conn.seg_dsn(n - 1) + conn.seg_len(n - 1) if n else 0)
    assert conn.unsent_bytes == (conn.write_seq - conn.seg_dsn(head) if head < n else 0)
    ou = conn.oldest_unacked
    if ou >= 0:  # the sent segment holding the first byte not DATA_ACKed
        assert conn.seg_sent(ou) and conn.seg_dsn(ou) <= conn.snd_una < conn.seg_dsn(ou) + conn.seg_len(ou)
    segs = []
    for i in sorted({0, 1, n // 2, head - 1, head, head + 1, ou, n - 1} & set(range(n))):
        dsn, ln, mask, sent = conn.seg_dsn(i), conn.seg_len(i), conn.seg_path_mask(i), conn.seg_sent(i)
        assert 0 < ln <= mss and conn.seg_at_dsn(dsn) == i
        assert i + 1 == n or conn.seg_dsn(i + 1) == dsn + ln
        assert sent == (mask != 0) and (sent if i < head else True) and (not sent if i == head else True)
        # meta_snd_wnd_test: the segment's first MSS ends inside the peer's window
        assert conn.window_allows(i) == (dsn + min(ln, mss) <= conn.wnd_end)
        assert conn.seg_dsn(i - n) == dsn  # list indexing
        assert [sf.carried(i) for sf in subflows] == [bool(mask >> sf.index & 1) for sf in subflows]
        segs.append((i, dsn, ln, mask, sent, conn.window_allows(i)))
    nth = [conn.nth_unsent(k) for k in range(4)]
    assert nth[0] == head and conn.nth_unsent(10**30) == n and conn.nth_unsent(2**62) == n
    assert all(x == n or (x > y and not conn.seg_sent(x)) for x, y in zip(nth[1:], nth, strict=False))
    for pos, sf in enumerate(subflows):
        assert sf.index == pos or not whole
        assert sf.mss == mss and sf.cwnd >= 1 and sf.ssthresh >= 2
        assert sf.in_slow_start == (sf.cwnd < sf.ssthresh)
        assert sf.srtt_ns == (sf.srtt_us8 >> 3) * 1000  # srtt_us is kept x8, in whole µs
        assert 0 <= sf.queued_bytes <= sf.queued * mss and (sf.queued == 0) == (sf.queued_bytes == 0)
        assert sf.unacked_bytes >= sf.queued_bytes and sf.last_ack_ns <= conn.now_ns
        assert sf.established or sf.packets_out == sf.queued == 0
    return sfv, cv, tuple(segs), tuple(nth)


class Reader(MinRTT):
    """minRTT that reads (and checks) every attribute and method of both protocols at every call."""

    name: ClassVar[str] = "user_reader"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | tuple[int, int, int] | None:
        read_views(conn, subflows)
        return super().select(conn, subflows)

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        assert now_ns == conn.now_ns
        read_views(conn, [sf], whole=False)

    def on_loss(self, conn: ConnView, sf: SubflowView, kind: str, now_ns: int) -> None:
        assert now_ns == conn.now_ns and kind in ("fast", "rto")


@settings(SETTINGS, max_examples=40)
@given(sc=scenarios())
def test_reading_every_view_attribute_is_consistent_and_changes_nothing(sc: Scenario) -> None:
    assert_same_results(_port_run(get("minrtt"), sc), _user_run(Reader(), sc))


class Inspector(Greedy):
    """Greedy that reads every attribute (checked by `read_views`) and reports it as observations of
    any type, and acts: penalizes, drops reinjections, sets timers, each checked against what the
    protocol promises. The values it observes are kept (class-wide) to compare with the run's."""

    name: ClassVar[str] = "user_inspector"
    observed: ClassVar[list[Any]] = []

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        self.n = 0
        self.t_prev = 0
        self.timer_due: int | None = None  # the earliest time asked with wake_at, not yet served
        self.by_view: dict[Any, int] = {}

    def observe(self, t_ns: int, kind: str, subflow: int, value: Any) -> None:
        self.observed.append(value)
        super().observe(t_ns, kind, subflow, value)

    def _read(self, conn: ConnView, subflows: list[SubflowView], tag: str, *, whole: bool = True) -> None:
        assert conn.now_ns >= self.t_prev  # time never goes back
        self.t_prev = conn.now_ns
        for sf in subflows:
            self.by_view[sf] = self.by_view.get(sf, 0) + 1  # views are hashable and stable
        self.observe(conn.now_ns, tag, -1, read_views(conn, subflows, whole=whole))

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self._read(conn, subflows, "start")

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | tuple[int, int, int] | None:
        self.n += 1
        if self.n % 7 == 0:
            self._read(conn, subflows, "select")
        if self.n % 97 == 0 and len(subflows) > 1:
            sf = subflows[-1]

            def halved(cwnd: int, ssthresh: int) -> tuple[int, int]:
                # the protocol: halve cwnd, and ssthresh out of slow start (Linux's floors: 1 and 2)
                return max(cwnd // 2, 1), (max(ssthresh // 2, 2) if cwnd >= ssthresh else ssthresh)

            expect = halved(sf.cwnd, sf.ssthresh)
            conn.penalize(sf.index)
            assert (sf.cwnd, sf.ssthresh) == expect
            expect = halved(*expect)
            conn.penalize(-1)  # list indexing: the same subflow
            assert (sf.cwnd, sf.ssthresh) == expect
            self.observe(conn.now_ns, "penalized", sf.index, 2)
        if self.n % 53 == 0 and conn.reinject_head >= 0:
            queue = conn.reinject_queue
            assert conn.drop_reinject(queue[0]) == 1
            assert conn.reinject_queue == queue[1:] and conn.reinject_head == (queue[1] if queue[1:] else -1)
            assert conn.drop_reinject(queue[0]) == 0  # not queued any more
            self.observe(conn.now_ns, "dropped", 0, queue[0])
        if self.n % 41 == 0:
            t = conn.now_ns + 3 * MS
            conn.wake_at(t)
            self.timer_due = t if self.timer_due is None else min(self.timer_due, t)
        d = super().select(conn, subflows)
        if d is not None and self.n % 2:
            return tuple(d)  # a plain tuple is a decision too
        return d

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        if self.n % 11 == 0:
            self.observe(now_ns, "ack", sf.index, (sf.cwnd, sf.rate_bps, sf.pacing_rate_bps))

    def on_loss(self, conn: ConnView, sf: SubflowView, kind: str, now_ns: int) -> None:
        self.observe(now_ns, "loss", sf.index, kind)
        self._read(conn, [sf], "loss", whole=False)

    def on_timer(self, conn: ConnView, now_ns: int) -> None:
        assert now_ns == conn.now_ns == self.timer_due, (now_ns, self.timer_due)  # the earliest time asked
        self.timer_due = None
        self.observe(now_ns, "timer", 0, None)

    def on_applied(self, conn: ConnView, decision: Any, n_segments: int) -> None:
        if self.n % 5 == 0:
            self.observe(conn.now_ns, "applied", int(decision[0]), (type(decision).__name__, tuple(decision),
                                                                    n_segments))


def _inspect(sc: Scenario) -> Any:
    Inspector.observed.clear()
    r = _user_run(Inspector(), sc)
    obs = r.observations
    # the plug-in's own objects, in the order it reported them, not converted copies
    assert len(obs) == len(Inspector.observed) and all(o[3] is v for o, v in zip(obs, Inspector.observed,
                                                                                  strict=True))
    assert r.summary["penalizations"] == sum(o[3] for o in obs if o[1] == "penalized")
    return r


@settings(SETTINGS, max_examples=40)
@given(sc=scenarios())
def test_every_view_attribute_action_and_observation_holds(sc: Scenario) -> None:
    _inspect(sc)


def test_the_inspector_reads_and_acts() -> None:
    paths = [PathConfig.constant("a", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=40_000, loss=0.01),
             PathConfig.constant("b", rate_bps=10e6, owd_ns=30 * MS, buffer_bytes=80_000, loss=0.01)]
    sc = Scenario(paths=tuple(paths), links=(), routes=(), conn=ConnectionConfig(),
                  workload=Finite(size_bytes=2_000_000), duration_ns=20_000 * MS, seed=0, direction="down")
    r = _inspect(sc)
    kinds = {o[1] for o in r.observations}
    assert {"start", "select", "loss", "applied", "timer", "penalized", "ack"} <= kinds, kinds
    assert r.summary["penalizations"] > 0 and r.summary["completed"]


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
    Raises.late.clear()
    with pytest.raises(Boom, match=rf"^{at} #{after + 1}$") as info:
        run_replay(_PATHS, Raises(at, after), workload=Bulk(), duration_ns=5_000 * MS, record=record)
    # the traceback reaches into the plug-in's own frame, and the run stopped there
    assert any(tb.name == "_tick" for tb in info.traceback)
    assert Raises.late == [], Raises.late[:5]


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
                assert getattr(conn, "m_dsn", None) is None  # no engine internals
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


# A decision is read as the tuple ``(subflow, seg, count)``: ``subflows[d[0]]``, then ``d[1]`` compared
# with 0 and used as a segment index, then for the head ``n < d[2]``. What Python raises for each of
# these on a malformed one (two subflows here):
MALFORMED = [
    ((5, -1, 1), IndexError, r"^list index out of range$"),
    ((0.5, -1, 1), TypeError, r"^list indices must be integers or slices, not float$"),
    (("x",), TypeError, r"^list indices must be integers or slices, not str$"),
    (3, TypeError, r"'int' object is not subscriptable"),
    ((0, 0.5, 1), TypeError, r"^list indices must be integers or slices, not float$"),
    ((0, -1, None), TypeError, r"^'<' not supported between instances of 'int' and 'NoneType'$"),
    ((0,), IndexError, r"tuple index out of range"),
]


@pytest.mark.parametrize(("decision", "error", "message"), MALFORMED, ids=[repr(m[0]) for m in MALFORMED])
def test_a_malformed_decision_raises_what_python_raises(decision: Any, error: type, message: str) -> None:
    class Bad(Greedy):
        name: ClassVar[str] = "user_bad"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Any:
            d = super().select(conn, subflows)
            return decision if d is not None and subflows[0].established else d

    with pytest.raises(error, match=message):
        run_replay(_PATHS, Bad(), workload=Finite(size_bytes=100_000), duration_ns=5_000 * MS)


class Reshaped(Greedy):
    """Greedy's decisions in another shape that Python reads the same way."""

    name: ClassVar[str] = "user_reshaped"

    def __init__(self, shape: str = "list") -> None:
        super().__init__()
        self.shape = shape

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Any:
        d = super().select(conn, subflows)
        if d is None:
            return None
        sub, seg, count = d
        shape = self.shape
        if shape == "list":
            return [sub, seg, count]
        if shape == "short" and seg >= 0:
            return (sub, seg)  # the count is read only for the head
        if shape == "float_count" and seg < 0:
            return (sub, seg, count - 0.5)  # n < count - 0.5 for the same n as n < count
        if shape == "negative_sub":
            return (sub - len(subflows), seg, count)  # subflows[-k] is subflows[len - k]
        if shape == "big":  # any negative seg is the head; a count beyond any run's segments is unbounded
            return (sub, seg if seg >= 0 else -(10**30), 10**30 if count > 3 else count)
        if shape == "big_plain":
            return (sub, seg, 2**62 if count > 3 else count)
        return d


@settings(SETTINGS, max_examples=30)
@given(sc=scenarios(max_paths=2), shape=st.sampled_from(["list", "short", "float_count", "negative_sub", "big"]))
def test_odd_but_valid_decisions_are_read_as_python_reads_them(sc: Scenario, shape: str) -> None:
    same = "big_plain" if shape == "big" else "plain"
    assert_same_results(_user_run(Reshaped(same), sc), _user_run(Reshaped(shape), sc))


# the attributes the bridge lets a plug-in assign (the conformance suite reports it), by type
_WRITABLE_SF = ("established", "pf", "backup", "stale", "srtt_ns", "srtt_us8", "cwnd", "ssthresh", "ca_state",
                "packets_out", "in_flight", "queued", "queued_bytes", "last_ack_ns", "rate_bps")
_WRITABLE_CONN = ("wnd_end", "send_buf_bytes", "send_buffer_full", "recovery")


class PutBack(MinRTT):
    """minRTT that assigns every writable attribute the value it just read, before deciding."""

    name: ClassVar[str] = "user_put_back"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | tuple[int, int, int] | None:
        c: Any = conn
        for a in _WRITABLE_CONN:
            setattr(c, a, getattr(conn, a))
        for sf in subflows:
            w: Any = sf
            for a in _WRITABLE_SF:
                setattr(w, a, getattr(sf, a))
        return super().select(conn, subflows)


@settings(SETTINGS, max_examples=30)
@given(sc=scenarios())
def test_writing_back_what_was_read_changes_nothing(sc: Scenario) -> None:
    assert_same_results(_port_run(get("minrtt"), sc), _user_run(PutBack(), sc))


class Mutator(Greedy):
    """Breaks the protocol: writes view attributes. The bridge writes the engine's fields: a write is
    what the next read sees, and the run goes on (deterministically)."""

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
        writes: list[tuple[Any, str, Any]] = []
        if self.n % 3 == 0:
            if k == 0:
                writes = [(w, "ssthresh", max(2, sf.cwnd // 2))]
            elif k == 1:
                writes = [(w, "cwnd", max(1, sf.cwnd - 1))]
            elif k == 2:
                writes = [(w, "rate_bps", sf.rate_bps / 2)]
            elif k == 3:
                writes = [(w, "pf", not sf.pf and sf.established and self.n % 7 == 0)]
            elif k == 4:
                writes = [(c, "wnd_end", conn.wnd_end + (1 if self.n % 2 else -conn.mss))]
            elif k == 5:
                writes = [(w, "srtt_ns", sf.srtt_ns + 1000),
                          (w, "srtt_us8", max(sf.srtt_us8 - 8, 8) if sf.srtt_us8 else 0)]
            elif k == 6:
                writes = [(w, "last_ack_ns", conn.now_ns), (w, "stale", False)]
            elif k == 7:
                writes = [(w, "backup", not sf.backup if self.n % 11 == 0 else sf.backup)]
            elif k == 8:
                writes = [(c, "send_buffer_full", not conn.send_buffer_full if self.n % 5 == 0
                           else conn.send_buffer_full), (c, "recovery", conn.recovery or self.n % 17 == 0)]
            elif k == 9:
                writes = [(c, "send_buf_bytes", conn.send_buf_bytes + conn.mss)]
            elif k == 10:
                writes = [(w, "ca_state", 0 if sf.ca_state == 3 and self.n % 2 else sf.ca_state)]
            elif k == 11:
                writes = [(w, "in_flight", sf.in_flight + 1), (w, "packets_out", sf.packets_out + 1)]
            else:
                writes = [(w, "queued", sf.queued), (w, "queued_bytes", sf.queued_bytes + 1)]
        for obj, a, v in writes:
            setattr(obj, a, v)
            assert getattr(obj, a) == v and type(getattr(obj, a)) is type(v), (a, v)
        return super().select(conn, subflows)


@settings(SETTINGS, max_examples=30)
@given(sc=scenarios())
def test_writes_to_view_attributes_are_read_back_and_the_run_goes_on(sc: Scenario) -> None:
    a, b = _user_run(Mutator(), sc), _user_run(Mutator(), sc)
    assert_same_results(a, b)
    assert a.summary["sim_ns"] > 0 or a.summary["completed"]


def test_writes_reach_the_engine() -> None:
    """A subflow view's cwnd written to 1 at every call holds the subflow to one segment in flight: the
    transfer takes a round trip per segment instead of filling the pipe."""

    class OneAtATime(Greedy):
        name: ClassVar[str] = "user_one"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
            for sf in subflows:
                w: Any = sf
                w.cwnd = 1
            return super().select(conn, subflows)

    paths = [PathConfig.constant("a", rate_bps=20e6, owd_ns=10 * MS)]
    conn = ConnectionConfig(handshake=False, delayed_ack=False)
    one = run_replay(paths, OneAtATime(), workload=Finite(size_bytes=10 * 1424), conn=conn, duration_ns=10_000 * MS)
    free = run_replay(paths, Greedy(), workload=Finite(size_bytes=10 * 1424), conn=conn, duration_ns=10_000 * MS)
    # 10 segments, one per round trip of ~20.6 ms (20 ms + 0.6 ms serialisation + 0.03 ms for the ACK)
    assert one.summary["all_acked_ns"] >= 10 * 20 * MS > free.summary["all_acked_ns"]


class _Flavour(Greedy):
    name: ClassVar[str] = "user_flavour"


@pytest.mark.parametrize("flavour", [False, True])
@pytest.mark.parametrize("name", ["upstream", "ecf", "greedy"])
def test_the_connection_config_overrides_the_flavour(name: str, flavour: bool) -> None:
    """``ConnectionConfig.reinject_on_subflow_rto`` set: the run is that of the same scheduler whose
    class declares that flavour (a user's subclass, through the bridge); for a built-in, its port
    agrees. Two lossy set-ups with subflow RTOs; on one of them at least the flavour changes the run."""
    sched = _Flavour() if name == "greedy" else get(name)
    declared = _unregistered_copy(sched)
    type(declared).reinject_on_subflow_rto = flavour  # type: ignore[misc]
    matters = []
    for buffer_bytes in (20_000, 6_000):
        lossy = tuple(PathConfig.constant(n, rate_bps=r, owd_ns=d * MS, buffer_bytes=buffer_bytes, loss=0.05)
                      for n, r, d in (("a", 20e6, 10), ("b", 10e6, 30)))

        def scenario(override: bool | None, paths: tuple[PathConfig, ...] = lossy) -> Scenario:
            return Scenario(paths=paths, links=(), routes=(), conn=ConnectionConfig(reinject_on_subflow_rto=override),
                            workload=Finite(size_bytes=500_000), duration_ns=30_000 * MS, seed=0, direction="down")

        overridden = _user_run(sched, scenario(flavour), "bridge")
        assert_same_results(_user_run(declared, scenario(None), "bridge"), overridden)
        if name != "greedy":
            assert_same_results(overridden, _port_run(sched, scenario(flavour)))
        matters.append(not _user_run(sched, scenario(not flavour), "bridge").events.equals(overridden.events))
    assert any(matters)
