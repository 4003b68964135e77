"""The cost of the compiled engine's plug-in bridge (native/engine/src/py_sched.rs), which runs a
Python scheduler inside the compiled engine, calling it with the GIL at every decision.

The bench scenario of bench_replay.py (2 paths, 30 Mbit/s / 10 ms and 10 Mbit/s / 40 ms one-way, 60 s
bulk, minRTT, recorder off), two ways, and a third that splits the bridge's cost:

* ``compiled``: minRTT's Rust port (sched/minrtt.rs), no Python in the run;
* ``bridge``: minRTT's Python implementation (workbench.schedulers._minrtt) called from the
  compiled engine through the bridge (``run_replay(..., engine="bridge")``);
* ``bridge, replayed``: a Python scheduler that returns the decisions minRTT
  made, recorded in a first run, without reading anything: the same run, so the difference to
  ``compiled`` is the cost of calling into Python and reading its answer, and the difference to the
  row above it is what minRTT's own Python code (its view reads included) costs.

All give the same run (checked: packets and events). Per way: CPU and wall time of the run, data
packets per CPU second, and µs of CPU per call into the scheduler (the run's time over its calls:
`select`, and `on_loss` / `on_timer`; minRTT has no `on_ack` or `on_applied`), and the µs per call
above the compiled run. Calls are counted once, in a separate run. The best of ``--repeat`` runs: the
dev machine is shared, so CPU time is the steadier measure and the minimum the least disturbed one
(no timing is asserted).

    .venv/bin/python benchmarks/bench_plugin.py [--seconds 60] [--repeat 3] [--scheduler minrtt]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, ClassVar

from workbench.replay import Bulk, PathConfig, run_replay
from workbench.schedulers import get
from workbench.schedulers.base import Scheduler


def paths() -> list[PathConfig]:
    return [PathConfig.constant("wifi", rate_bps=30e6, owd_ns=10_000_000, buffer_bytes=150_000),
            PathConfig.constant("lte", rate_bps=10e6, owd_ns=40_000_000, buffer_bytes=150_000)]


def run(sched: Scheduler, seconds: float, engine: str) -> Any:
    return run_replay(paths(), sched, workload=Bulk(), duration_ns=int(seconds * 1e9), record=False, engine=engine)


class _Acts:
    """The connection view, with the actions a scheduler takes on it logged."""

    def __init__(self, conn: Any, log: list[tuple[str, int]]) -> None:
        self._conn, self._log = conn, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def penalize(self, subflow: int) -> None:
        self._log.append(("penalize", subflow))
        self._conn.penalize(subflow)

    def drop_reinject(self, seg: int) -> int:
        self._log.append(("drop_reinject", seg))
        return int(self._conn.drop_reinject(seg))

    def wake_at(self, t_ns: int) -> None:
        self._log.append(("wake_at", t_ns))
        self._conn.wake_at(t_ns)


def record(sched: Scheduler, seconds: float) -> tuple[dict[str, int], list[Any]]:
    """One bridged run with counting wrappers: the calls per hook, and per `select` the actions taken
    and the decision returned."""
    counts = {"select": 0, "on_loss": 0, "on_timer": 0}
    decisions: list[Any] = []
    s = sched.fresh()
    s.fresh = lambda: s  # type: ignore[method-assign]  # run this very instance (its wrappers)

    def wrap(name: str, fn: Any) -> Any:
        def counted(*args: Any) -> Any:
            counts[name] += 1
            return fn(*args)
        return counted

    for name in ("on_loss", "on_timer"):
        setattr(s, name, wrap(name, getattr(s, name)))
    inner = s.select

    def select(conn: Any, subflows: Any) -> Any:
        counts["select"] += 1
        acts: list[tuple[str, int]] = []
        d = inner(_Acts(conn, acts), subflows)
        decisions.append((acts, None if d is None else tuple(d)))
        return d

    s.select = select  # type: ignore[method-assign]
    run(s, seconds, "bridge")
    return counts, decisions


class Replayed(Scheduler):
    """Returns recorded decisions (and takes the recorded actions) without reading anything."""

    name: ClassVar[str] = "bench_replayed"

    def __init__(self, like: Scheduler, decisions: list[Any]) -> None:
        super().__init__()
        self._like, self._decisions, self._i = like, decisions, 0
        for a in ("reinject_on_subflow_rto", "meta_rto_factor", "meta_retrans"):
            setattr(self, a, getattr(like, a))

    def fresh(self) -> Replayed:
        return Replayed(self._like, self._decisions)

    def select(self, conn: Any, subflows: Any) -> Any:
        acts, d = self._decisions[self._i]
        self._i += 1
        for act, x in acts:
            getattr(conn, act)(x)
        return d


def timed(sched: Scheduler, seconds: float, engine: str, repeat: int) -> tuple[float, float, Any]:
    """(best CPU s, best wall s, the run)."""
    cpus, walls = [], []
    r = None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        r = run(sched, seconds, engine)
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return min(cpus), min(walls), r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scheduler", default="minrtt", help="a built-in with a compiled port")
    a = ap.parse_args()
    sched = get(a.scheduler)
    calls, decisions = record(sched, a.seconds)
    n_calls = sum(calls.values())
    replayed = Replayed(sched, decisions)
    print(f"{a.scheduler}, {a.seconds:g} s bulk, recorder off; scheduler calls per run: {n_calls:,} "
          f"({', '.join(f'{k} {v:,}' for k, v in calls.items())})")
    print(f"{'way':18s} {'cpu s':>7s} {'wall s':>7s} {'data pkts':>10s} {'pkts/s cpu':>12s} {'x real':>7s} "
          f"{'us/call':>8s} {'+us/call vs compiled':>21s}")
    base = 0.0
    runs = {}
    for way, s, engine in (("compiled", sched, "compiled"), ("bridge", sched, "bridge"),
                           ("bridge, replayed", replayed, "bridge")):
        cpu, wall, r = timed(s, a.seconds, engine, a.repeat)
        runs[way] = r
        n = r.summary["data_packets_sent"]
        if way == "compiled":
            base = cpu
        extra = f"{(cpu - base) / n_calls * 1e6:+21.2f}" if way != "compiled" else f"{'':>21s}"
        print(f"{way:18s} {cpu:7.3f} {wall:7.3f} {n:10,d} {n / cpu:12,.0f} {a.seconds / cpu:7.0f} "
              f"{cpu / n_calls * 1e6:8.2f} {extra}")
    ref = runs["compiled"].summary
    same = all(r.summary["data_packets_sent"] == ref["data_packets_sent"] and r.summary["events"] == ref["events"]
               for r in runs.values())
    print(f"the same run every way (packets, events): {same}")


if __name__ == "__main__":
    main()
