"""The scheduler conformance suite, shipped so that anyone's scheduler (built-in or a user's) can be
held to the same contract as the built-in ones.

>>> from workbench.testing import check_scheduler
>>> check_scheduler("minrtt")          # a name or spec ("file.py:Class"), a Scheduler class or
[]                                     # instance, or a zero-argument factory; [] = conforms

In pytest, one test item per (scheduler, check)::

    from workbench.testing import scheduler_conformance_cases

    @pytest.mark.parametrize("case", scheduler_conformance_cases([MyScheduler]), ids=str)
    def test_conformance(case):
        case.check()          # AssertionError listing what went wrong

The checks (`CHECKS`), each on small synthetic two-path scenarios run through `run_replay`:

``delivery``
    A finite transfer over two lossy paths completes: every byte reaches the application exactly once
    (in-order delivery ends at the transfer size, the received DSN ranges cover it with nothing
    beyond), and the replay terminates within a wall-clock budget (a scheduler that spins on
    ``wake_at`` or never says "wait" is stopped and reported).
``cwnd``
    No decision hands a subflow a segment (new or a copy) while the subflow has no congestion-window
    room for it, by the out-of-tree kernel's byte test (``in_flight < cwnd`` and queued bytes within
    ``(cwnd - in_flight) * mss``, docs/MODEL.md §0.2). Skipped for schedulers that declare
    ``queues_beyond_cwnd = True`` (class or instance attribute: upstream-style schedulers that queue
    bursts on a subflow and let its cwnd pace them).
``receive_window``
    With a receive buffer of 16 segments the transfer still completes (a scheduler that waits for
    window it can never get deadlocks here), no new data is sent beyond the window edge the sender
    last heard of, and the receiver's out-of-order queue never exceeds its buffer. The engine itself
    refuses new data beyond the window, so the last two verify the pair (engine + scheduler) on the
    output rather than the scheduler alone.
``deterministic``
    Two runs with the same seed (lossy paths, so the RNG matters) give identical PacketEvents.
``outage``
    The low-delay path goes dark (capacity 0 in both directions for 2 s via `StepSeries`) and comes
    back: the transfer completes, and the path carries data again (subflow first transmissions, new
    data or copies) in the later half of the time from its return to the end of the transfer — so
    draining what was queued on it before the outage does not count as using it again.
``read_only``
    ``select`` leaves engine state unchanged: connection counters, the window, the reinjection queue,
    the segment table where schedulers act (DSN, length, path mask, sent flag from the oldest unacked
    segment to 256 past the head, and the last 64) and every subflow's view attributes are compared
    before and after each call. The sanctioned actions (``conn.penalize``,
    ``conn.drop_reinject``, ``conn.wake_at``) are accounted for; assigning an attribute of the
    connection view is reported.

``quick=True`` uses smaller transfers and a shorter outage (about 3x faster); the checks are the same.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from workbench._backend_conformance import (
    BACKEND_CHECKS,
    BackendCase,
    backend_conformance_cases,
    check_backend,
)
from workbench._cc_conformance import CC_CHECKS, StubSubflow, check_congestion_control
from workbench.replay import ConnectionConfig, Finite, PathConfig, StepSeries, run_replay
from workbench.replay.run import ReplayResult
from workbench.schedulers.base import ConnView, Decision, Layer, Scheduler, SubflowView

__all__ = [
    "BACKEND_CHECKS",
    "CC_CHECKS",
    "CHECKS",
    "BackendCase",
    "ConformanceCase",
    "SchedulerLike",
    "StubSubflow",
    "assert_conforms",
    "backend_conformance_cases",
    "check_backend",
    "check_congestion_control",
    "check_scheduler",
    "declares_queueing_beyond_cwnd",
    "scheduler_conformance_cases",
]

CHECKS: tuple[str, ...] = ("delivery", "cwnd", "receive_window", "deterministic", "outage", "read_only")

# A scheduler spec (registered name, module:Class, file.py:Class; see workbench.plugins), a Scheduler
# subclass (built with its defaults), an instance (copied per run) or a zero-argument callable
# returning a fresh instance.
SchedulerLike = str | type[Scheduler] | Scheduler | Callable[[], Scheduler]

_MS = 1_000_000
_S = 1_000_000_000
_MAX_REPORTED = 3  # violations quoted per check; the rest are counted
_TIGHT_WINDOW_SEGMENTS = 16


def declares_queueing_beyond_cwnd(sched: Scheduler) -> bool:
    """Whether ``sched`` says it hands subflows more than their cwnd room (attribute
    ``queues_beyond_cwnd``, class or instance level; a `Layer` asks its inner scheduler)."""
    v = getattr(sched, "queues_beyond_cwnd", None)
    if v is None and isinstance(sched, Layer):
        return declares_queueing_beyond_cwnd(sched.inner)
    return bool(v)


def _factory(s: SchedulerLike) -> tuple[str, Callable[[], Scheduler]]:
    """(label, zero-argument factory) for any accepted way of naming a scheduler."""
    if isinstance(s, str):
        from workbench.plugins import resolve_scheduler

        return s, lambda: resolve_scheduler(s)
    if isinstance(s, type) and issubclass(s, Scheduler):
        return getattr(s, "name", s.__name__), s
    if isinstance(s, Scheduler):
        return repr(s), s.fresh
    if callable(s):
        return getattr(s, "__name__", repr(s)), cast("Callable[[], Scheduler]", s)
    raise TypeError(f"not a scheduler, scheduler class, registered name or factory: {s!r}")


# ---------------------------------------------------------------------------------------------- probe

class _OutOfTime(Exception):
    """Raised from inside the run when the wall-clock budget is spent (the run never terminates)."""


@dataclass
class _Findings:
    """What one probed run observed. Violations are counted, the first few kept verbatim."""

    deadline: float
    declared_queueing: bool
    cwnd: list[str] = field(default_factory=list)
    n_cwnd: int = 0
    read_only: list[str] = field(default_factory=list)
    n_read_only: int = 0
    n_select: int = 0

    def add(self, kind: str, msg: str) -> None:
        if kind == "cwnd":
            self.n_cwnd += 1
            if len(self.cwnd) < _MAX_REPORTED:
                self.cwnd.append(msg)
        else:
            self.n_read_only += 1
            if len(self.read_only) < _MAX_REPORTED:
                self.read_only.append(msg)


class _ConnProbe:
    """The connection view shown to the scheduler under test: reads pass through; the sanctioned
    actions are recorded (so their effects are not mistaken for mutations) and forwarded; assigning an
    attribute is forwarded too (the run must behave as unprobed) but recorded as a violation."""

    def __init__(self, conn: ConnView) -> None:
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_penalized", [])
        object.__setattr__(self, "_dropped", [])
        object.__setattr__(self, "_assigned", [])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._assigned.append(name)
        setattr(self._conn, name, value)

    def penalize(self, subflow: int) -> None:
        self._penalized.append(subflow)
        self._conn.penalize(subflow)

    def drop_reinject(self, seg: int) -> Any:
        self._dropped.append(seg)
        return self._conn.drop_reinject(seg)

    def wake_at(self, t_ns: int) -> None:
        self._conn.wake_at(t_ns)


_SF_FIELDS = ("established", "pf", "backup", "srtt_ns", "srtt_us8", "rttvar_ns", "min_rtt_ns", "rto_ns",
              "cwnd", "ssthresh", "ca_state", "packets_out", "in_flight", "queued", "queued_bytes",
              "unacked_bytes", "mss", "last_ack_ns")
_PENALIZABLE = frozenset(("cwnd", "ssthresh"))
_CONN_FIELDS = ("head", "n_segs", "snd_una", "write_seq", "wnd_end", "send_buffer_full", "unsent_bytes",
                "oldest_unacked", "reinject_head", "rcv_ooo_bytes")


_get_conn_fields = operator.attrgetter(*_CONN_FIELDS)
_get_sf_fields = operator.attrgetter(*_SF_FIELDS)


def _snapshot(conn: ConnView, subflows: Sequence[SubflowView]) -> tuple[Any, ...]:
    c = _get_conn_fields(conn)
    rq = tuple(conn.reinject_queue)
    sfs = tuple(map(_get_sf_fields, subflows))
    # The segment table where schedulers act: from the oldest unacked segment to a little past the
    # head, and the far end of the unsent range (STMS sends from there). The engine's own lists are
    # sliced when present (cheap); otherwise the same segments are read through the view.
    n = conn.n_segs
    head = conn.head
    oldest = conn.oldest_unacked
    lo = max(min(oldest if oldest >= 0 else head, head) - 8, 0)
    hi = min(head + 256, n)
    tail = max(n - 64, hi)
    raw = [getattr(conn, a, None) for a in ("m_dsn", "m_len", "m_mask", "m_sent")]
    if all(isinstance(t, list) for t in raw):
        tables: tuple[Any, ...] = tuple(t[lo:hi] + t[tail:n] for t in raw)  # type: ignore[index]
    else:
        tables = tuple((i, conn.seg_dsn(i), conn.seg_len(i), conn.seg_path_mask(i), conn.seg_sent(i))
                       for i in (*range(lo, hi), *range(tail, n)))
    return c, rq, sfs, tables


def _segments_handed(conn: ConnView, d: tuple[int, int, int]) -> list[int]:
    """The meta segments the engine will give the subflow for decision ``d`` (mirrors its apply step:
    from the head in order, skipping sent ones, stopping at the window; or one named segment)."""
    _, seg, count = d
    out: list[int] = []
    n_segs = conn.n_segs
    if seg < 0:
        i = conn.head
        while len(out) < count and i < n_segs and conn.window_allows(i):
            out.append(i)
            i += 1
            while i < n_segs and conn.seg_sent(i):
                i += 1
        return out
    if seg >= n_segs or conn.seg_dsn(seg) + conn.seg_len(seg) <= conn.snd_una:
        return []
    if not conn.seg_sent(seg) and not conn.window_allows(seg):
        return []
    return [seg]


class _Probe(Layer):
    """Wraps the scheduler under test; checks the cwnd and read-only contracts at every ``select``,
    and enforces the wall-clock budget."""

    name: ClassVar[str] = "conformance_probe"

    def __init__(self, inner: Scheduler, findings: _Findings) -> None:
        super().__init__(inner)
        self.findings = findings

    def fresh(self) -> _Probe:
        # run_replay copies its scheduler; the findings must stay shared with the caller
        return _Probe(self.inner.fresh(), self.findings)

    def _tick(self) -> None:
        if time.monotonic() > self.findings.deadline:
            raise _OutOfTime

    def on_timer(self, conn: ConnView, now_ns: int) -> None:
        self._tick()
        self.inner.on_timer(conn, now_ns)

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | tuple[int, int, int] | None:
        f = self.findings
        f.n_select += 1
        if f.n_select & 0xFF == 0:
            self._tick()
        before = _snapshot(conn, subflows)
        probe = _ConnProbe(conn)
        d = self.inner.select(probe, subflows)
        now = conn.now_ns
        self._check_read_only(conn, subflows, probe, before, now)
        if d is None:
            return None
        try:
            sub, seg, count = d
            sf = next(s for s in subflows if s.index == sub)
        except (TypeError, ValueError, StopIteration):
            return d  # malformed: the engine raises on it as it would unprobed ("the replay raised ...")
        handed = _segments_handed(conn, (sub, seg, count)) if sf.established else []
        if handed and not f.declared_queueing:
            # the subflow as it was when select was called (select itself may have changed it)
            pos = next(k for k, s in enumerate(subflows) if s is sf)
            state = dict(zip(_SF_FIELDS, before[2][pos], strict=True))
            self._check_cwnd(conn, sf, state, handed, now)
        return d

    def _check_cwnd(self, conn: ConnView, sf: SubflowView, state: dict[str, Any], handed: list[int],
                    now: int) -> None:
        in_flight, cwnd, mss, queued0 = state["in_flight"], state["cwnd"], state["mss"], state["queued_bytes"]
        room = (cwnd - in_flight) * mss
        queued = queued0
        for k, seg in enumerate(handed):
            if in_flight >= cwnd or queued > room:
                self.findings.add(
                    "cwnd", f"t={now / 1e9:.3f}s: subflow {sf.index} ({sf.name}) got {len(handed)} segment(s) "
                            f"with cwnd {cwnd}, in flight {in_flight}, queued {queued0} B: segment "
                            f"#{k + 1} is beyond its cwnd room ({max(room, 0)} B)")
                return
            queued += conn.seg_len(seg)

    def _check_read_only(self, conn: ConnView, subflows: list[SubflowView], probe: _ConnProbe,
                         before: tuple[Any, ...], now: int) -> None:
        f = self.findings
        when = f"t={now / 1e9:.3f}s"
        for name in probe._assigned:
            f.add("read_only", f"{when}: select assigned conn.{name}")
        after = _snapshot(conn, subflows)
        if after == before:
            return
        c0, rq0, sf0, t0 = before
        c1, rq1, sf1, t1 = after
        for name, a, b in zip(_CONN_FIELDS, c0, c1, strict=True):
            if a != b and not (name == "reinject_head" and probe._dropped):
                f.add("read_only", f"{when}: select changed conn.{name} {a!r} -> {b!r}")
        if rq0 != rq1 and rq1 != tuple(s for s in rq0 if s not in probe._dropped):
            f.add("read_only", f"{when}: select changed the reinjection queue beyond drop_reinject")
        penalized = set(probe._penalized)
        for s, a, b in zip(subflows, sf0, sf1, strict=True):
            for name, x, y in zip(_SF_FIELDS, a, b, strict=True):
                if x != y and not (name in _PENALIZABLE and s.index in penalized):
                    f.add("read_only", f"{when}: select changed subflow {s.index} {name} {x!r} -> {y!r}")
        if t0 != t1:
            f.add("read_only", f"{when}: select changed the meta segment table (dsn/len/path mask/sent)")


# ------------------------------------------------------------------------------------------ scenarios

@dataclass(frozen=True)
class _Scenario:
    paths: tuple[PathConfig, ...]
    size_bytes: int
    conn: ConnectionConfig | None = None
    seed: int = 11
    cap_ns: int = 60 * _S


def _lossy(quick: bool) -> _Scenario:
    return _Scenario(
        paths=(PathConfig.constant("wifi", rate_bps=20e6, owd_ns=10 * _MS, buffer_bytes=60_000, loss=0.005),
               PathConfig.constant("lte", rate_bps=10e6, owd_ns=40 * _MS, buffer_bytes=120_000, loss=0.005)),
        size_bytes=500_000 if quick else 1_500_000)


def _tight_window(quick: bool) -> _Scenario:
    conn = ConnectionConfig(rcv_buf_bytes=_TIGHT_WINDOW_SEGMENTS * ConnectionConfig().mss_bytes)
    return _Scenario(
        paths=(PathConfig.constant("wifi", rate_bps=20e6, owd_ns=10 * _MS, buffer_bytes=60_000),
               PathConfig.constant("lte", rate_bps=10e6, owd_ns=40 * _MS, buffer_bytes=120_000)),
        size_bytes=200_000 if quick else 600_000, conn=conn)


def _outage_window(quick: bool) -> tuple[int, int]:
    return (int(0.5 * _S), int(1.5 * _S)) if quick else (1 * _S, 3 * _S)


def _outage(quick: bool) -> _Scenario:
    t0, t1 = _outage_window(quick)
    dark = StepSeries((0, t0, t1), (10e6, 0.0, 10e6))
    wifi = PathConfig(name="wifi", rate_down_bps=dark, rate_up_bps=dark, owd_down_ns=StepSeries.constant(10 * _MS),
                      owd_up_ns=StepSeries.constant(10 * _MS), buffer_down_bytes=60_000, buffer_up_bytes=60_000)
    lte = PathConfig.constant("lte", rate_bps=10e6, owd_ns=30 * _MS, buffer_bytes=100_000)
    return _Scenario(paths=(wifi, lte), size_bytes=4_000_000 if quick else 8_000_000)


@dataclass
class _Run:
    result: ReplayResult | None
    findings: _Findings
    error: str | None = None


class _Subject:
    """One scheduler under test; runs each scenario at most once and serves every check from it."""

    def __init__(self, label: str, factory: Callable[[], Scheduler], *, quick: bool,
                 queues_beyond_cwnd: bool | None, time_budget_s: float) -> None:
        self.label = label
        self.factory = factory
        self.quick = quick
        self.override = queues_beyond_cwnd
        self.time_budget_s = time_budget_s
        self._runs: dict[str, _Run] = {}
        self._build_error: str | None = None
        self._declared: bool | None = None

    def _make(self) -> Scheduler:
        s = self.factory()
        if not isinstance(s, Scheduler):
            raise TypeError(f"the factory returned {type(s).__name__}, not a workbench Scheduler")
        return s

    def build_error(self) -> str | None:
        if self._declared is None and self._build_error is None:
            try:
                s = self._make()
                self._declared = (self.override if self.override is not None
                                  else declares_queueing_beyond_cwnd(s))
            except Exception as e:  # a user's constructor may raise anything
                self._build_error = f"could not build the scheduler: {type(e).__name__}: {e}"
        return self._build_error

    @property
    def declared_queueing(self) -> bool:
        return bool(self._declared)

    def run(self, key: str) -> _Run:
        if key not in self._runs:
            sc = {"lossy": _lossy, "lossy2": _lossy, "tight": _tight_window, "outage": _outage}[key](self.quick)
            f = _Findings(deadline=time.monotonic() + self.time_budget_s, declared_queueing=self.declared_queueing)
            try:
                r = run_replay(list(sc.paths), _Probe(self._make(), f), workload=Finite(size_bytes=sc.size_bytes),
                               conn=sc.conn, seed=sc.seed, duration_ns=sc.cap_ns)
                self._runs[key] = _Run(r, f)
            except _OutOfTime:
                self._runs[key] = _Run(None, f, f"the replay did not terminate within {self.time_budget_s:g} s "
                                                f"of wall time ({f.n_select} select calls)")
            except Exception as e:
                self._runs[key] = _Run(None, f, f"the replay raised {type(e).__name__}: {e}")
        return self._runs[key]


# --------------------------------------------------------------------------------------------- checks

def _delivery_problems(r: ReplayResult, size: int, what: str) -> list[str]:
    s = r.summary
    out = []
    if not s["completed"]:
        out.append(f"{what}: transfer of {size} B did not complete within {s['sim_ns'] / 1e9:.0f} s simulated "
                   f"({s['delivered_bytes']} B delivered in order)")
    elif s["delivered_bytes"] != size:
        out.append(f"{what}: {s['delivered_bytes']} B delivered to the application, expected exactly {size}")
    return out


def _coverage_problems(r: ReplayResult, size: int) -> list[str]:
    """Received DSN ranges (data rcv rows) cover [0, size) with nothing beyond."""
    import polars as pl

    rcv = (r.events.filter((pl.col("point") == "rcv") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
           .select(pl.col("dsn").cast(pl.Int64).alias("a"),
                   (pl.col("dsn").cast(pl.Int64) + pl.col("payload_bytes").cast(pl.Int64)).alias("b"))
           .unique().sort("a"))
    if rcv.height == 0:
        return ["no data segment reached the receiver"]
    covered = 0
    for a, b in rcv.iter_rows():
        if a > covered:
            return [f"bytes [{covered}, {a}) never reached the receiver"]
        covered = max(covered, b)
    if covered != size:
        return [f"the receiver got data up to DSN {covered}, the transfer has {size} B"]
    return []


def _window_problems(r: ReplayResult, rcv_buf: int, mss: int) -> list[str]:
    """New data sent at the server stays within the window edge the server last heard of."""
    import polars as pl

    ev = r.events
    acks = (ev.filter((pl.col("point") == "rcv") & (pl.col("dir") == "c2s"))
            .select("t_ns", (pl.col("data_ack").cast(pl.Int64) + pl.col("rwnd_bytes").cast(pl.Int64)).alias("edge"))
            .with_columns(pl.col("edge").cum_max()).group_by("t_ns").agg(pl.col("edge").max()).sort("t_ns"))
    snd = (ev.filter((pl.col("point") == "snd") & (pl.col("dir") == "s2c") & ~pl.col("is_retrans")
                     & ~pl.col("is_reinject"))
           .select("t_ns", (pl.col("dsn").cast(pl.Int64) + pl.min_horizontal(pl.col("payload_bytes"), mss)
                            .cast(pl.Int64)).alias("end")).sort("t_ns"))
    j = snd.join_asof(acks, on="t_ns", strategy="backward").with_columns(
        pl.max_horizontal(pl.col("edge").fill_null(rcv_buf), pl.lit(rcv_buf, pl.Int64)).alias("edge"))
    bad = j.filter(pl.col("end") > pl.col("edge"))
    out = []
    if bad.height:
        t, end, edge = bad.row(0)
        out.append(f"{bad.height} new-data segment(s) sent beyond the advertised window (first at "
                   f"t={t / 1e9:.3f}s: ends at DSN {end}, window edge {edge})")
    ooo = r.summary["max_rcv_ooo_bytes"]
    if ooo > rcv_buf:
        out.append(f"the receiver held {ooo} B out of order, more than its {rcv_buf} B buffer")
    return out


def _first_difference(a: Any, b: Any) -> str:
    if a.height != b.height:
        return f"{a.height} vs {b.height} events"
    for i, (x, y) in enumerate(zip(a.iter_rows(), b.iter_rows(), strict=True)):
        if x != y:
            return f"first difference at event {i} (t={x[0] / 1e9:.6f}s vs {y[0] / 1e9:.6f}s)"
    return "same rows, different dtypes"


def _check(subject: _Subject, check: str) -> list[str]:
    err = subject.build_error()
    if err is not None:
        return [err]
    q = subject.quick
    if check == "delivery":
        run = subject.run("lossy")
        if run.error or run.result is None:
            return [run.error or "no result"]
        size = _lossy(q).size_bytes
        return _delivery_problems(run.result, size, "lossy paths") or _coverage_problems(run.result, size)
    if check == "cwnd":
        if subject.declared_queueing:
            return []
        out = []
        for key in ("lossy", "tight", "outage"):
            run = subject.run(key)
            f = run.findings
            if run.error:  # no vacuous pass: a run that broke off was not checked to its end
                out.append(f"{key} scenario: {run.error}")
            elif f.n_cwnd:
                extra = f" (+{f.n_cwnd - len(f.cwnd)} more)" if f.n_cwnd > len(f.cwnd) else ""
                out.append(f"{key} scenario: {f.n_cwnd} decision(s) beyond cwnd{extra}; e.g. " + "; ".join(f.cwnd)
                           + " — set `queues_beyond_cwnd = True` on the class if this is intended")
        return out
    if check == "receive_window":
        run = subject.run("tight")
        if run.error or run.result is None:
            return [run.error or "no result"]
        sc = _tight_window(q)
        assert sc.conn is not None
        what = f"receive buffer of {_TIGHT_WINDOW_SEGMENTS} segments"
        return (_delivery_problems(run.result, sc.size_bytes, what)
                + _window_problems(run.result, sc.conn.rcv_buf_bytes, sc.conn.mss_bytes))
    if check == "deterministic":
        a, b = subject.run("lossy"), subject.run("lossy2")
        if a.error or b.error or a.result is None or b.result is None:
            return [a.error or b.error or "no result"]
        ea, eb = a.result.events, b.result.events
        if not ea.equals(eb):
            return [f"two runs with seed {_lossy(q).seed} gave different PacketEvents: {_first_difference(ea, eb)}"]
        return []
    if check == "outage":
        run = subject.run("outage")
        if run.error or run.result is None:
            return [run.error or "no result"]
        sc = _outage(q)
        t0, t1 = _outage_window(q)
        what = f"path wifi dark from {t0 / 1e9:g} s to {t1 / 1e9:g} s"
        out = _delivery_problems(run.result, sc.size_bytes, what)
        if not out:
            import polars as pl

            # what was queued on wifi before the outage drains right after it; only sending in the
            # later half of the rest of the transfer shows the scheduler uses the path again
            end = run.result.summary["all_acked_ns"]
            late = t1 + (end - t1) // 2
            n = run.result.events.filter(
                (pl.col("point") == "snd") & (pl.col("dir") == "s2c") & (pl.col("path") == "wifi")
                & ~pl.col("is_retrans") & (pl.col("t_ns") >= late)).height
            if n == 0:
                out.append(f"{what}: wifi carried no new data from {late / 1e9:.2f} s to the end of the transfer "
                           f"at {end / 1e9:.2f} s (the scheduler stopped using it)")
        return out
    if check == "read_only":
        out = []
        for key in ("lossy", "tight", "outage"):
            run = subject.run(key)
            f = run.findings
            if f.n_read_only:
                extra = f" (+{f.n_read_only - len(f.read_only)} more)" if f.n_read_only > len(f.read_only) else ""
                out.append(f"{key} scenario: {f.n_read_only} mutation(s){extra}; e.g. " + "; ".join(f.read_only))
            elif run.error:
                out.append(f"{key} scenario: {run.error}")
        return out
    raise ValueError(f"unknown check {check!r}; known: {', '.join(CHECKS)}")


# ------------------------------------------------------------------------------------------ public API

def check_scheduler(scheduler: SchedulerLike, *, quick: bool = False, checks: Iterable[str] = CHECKS,
                    queues_beyond_cwnd: bool | None = None, time_budget_s: float = 60.0) -> list[str]:
    """Run the conformance checks on ``scheduler``; returns one line per problem, ``[]`` if it conforms.

    ``queues_beyond_cwnd`` overrides what the scheduler declares (None: read its attribute).
    ``time_budget_s``: wall-clock budget per replay before it counts as not terminating.
    """
    label, factory = _factory(scheduler)
    subject = _Subject(label, factory, quick=quick, queues_beyond_cwnd=queues_beyond_cwnd,
                       time_budget_s=time_budget_s)
    out = []
    for c in checks:
        out += [f"{c}: {p}" for p in _check(subject, c)]
    return out


def assert_conforms(scheduler: SchedulerLike, **kw: Any) -> None:
    """`check_scheduler`, raising AssertionError with every problem listed."""
    problems = check_scheduler(scheduler, **kw)
    if problems:
        raise AssertionError(f"{_factory(scheduler)[0]} fails the conformance suite:\n  " + "\n  ".join(problems))


@dataclass
class ConformanceCase:
    """One (scheduler, check) pair; cases of the same scheduler share their replays."""

    label: str
    check_name: str
    _subject: _Subject = field(repr=False)

    def __str__(self) -> str:
        return f"{self.label}-{self.check_name}"

    def run(self) -> list[str]:
        """The problems found (empty = passes)."""
        return _check(self._subject, self.check_name)

    def check(self) -> None:
        """Raise AssertionError listing the problems, if any."""
        problems = self.run()
        if problems:
            raise AssertionError(f"{self.label} fails {self.check_name}:\n  " + "\n  ".join(problems))


def scheduler_conformance_cases(schedulers: Iterable[SchedulerLike] | None = None, *, quick: bool = False,
                                checks: Iterable[str] = CHECKS, time_budget_s: float = 60.0,
                                queues_beyond_cwnd: dict[str, bool] | None = None) -> list[ConformanceCase]:
    """Test cases for ``pytest.mark.parametrize(..., ids=str)``: every check for every scheduler
    (default: every registered scheduler, read when this is called — i.e. at collection time).
    ``queues_beyond_cwnd`` maps a label to an override of what that scheduler declares."""
    if schedulers is None:
        from workbench.schedulers import available

        schedulers = available()
    checks = tuple(checks)
    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown check(s) {sorted(unknown)}; known: {', '.join(CHECKS)}")
    overrides = queues_beyond_cwnd or {}
    cases = []
    for s in schedulers:
        label, factory = _factory(s)
        subject = _Subject(label, factory, quick=quick, queues_beyond_cwnd=overrides.get(label),
                           time_budget_s=time_budget_s)
        cases += [ConformanceCase(label, c, subject) for c in checks]
    return cases
