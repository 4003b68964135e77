"""The compiled core's layers (native/engine, issue 17) against the engine's, layer by layer as they
are ported: packets per second of wall time through one link on the event list.

The schedule: 60 s of 1514-byte packets offered at 110 % of a 30 Mbit/s link (so the buffer fills
and drops), 1 % random loss, 10 ms delay; once over a constant link and once over a link whose
capacity and delay step every 100 ms. Python = `workbench.replay.link.Link` on
`workbench.replay.events.EventLoop` (mypyc-compiled when the set-up built it), Rust =
`workbench_core.run_link`; both give the same fates (tests/test_core_link.py).

    .venv/bin/python benchmarks/bench_core.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import random
import time

import workbench_core

from workbench.replay import _compiled
from workbench.replay.events import EventLoop
from workbench.replay.link import Link
from workbench.replay.paths import StepSeries

MS = 1_000_000


def schedule(seconds: float) -> list[tuple[int, int]]:
    gap_ns = int(1514 * 8 / (30e6 * 1.1) * 1e9)
    return [(i * gap_ns, 1514) for i in range(int(seconds * 1e9) // gap_ns)]


def series(seconds: float, *, varying: bool) -> tuple[StepSeries, StepSeries]:
    if not varying:
        return StepSeries.constant(30e6), StepSeries.constant(10.0 * MS)
    rng = random.Random(1)
    ts = tuple(range(0, int(seconds * 1e9), 100 * MS))
    return (StepSeries(ts, tuple(rng.uniform(10e6, 50e6) for _ in ts)),
            StepSeries(ts, tuple(float(rng.randint(5, 40) * MS) for _ in ts)))


def run_python(sends: list[tuple[int, int]], rate: StepSeries, owd: StepSeries) -> int:
    loop = EventLoop()
    n = [0]

    def deliver(_: object) -> None:
        n[0] += 1

    link = Link(loop, name="x", rate_bps=rate, owd_ns=owd, loss=StepSeries.constant(0.01),
                buffer_bytes=150_000, rng=random.Random(0), deliver=deliver)
    send = link.send
    for i, (t, size) in enumerate(sends):
        loop.at(t, lambda i, size=size: send(i, size), i)
    loop.run()
    return n[0]


def run_rust(sends: list[tuple[int, int]], rate: StepSeries, owd: StepSeries) -> int:
    link = workbench_core.Link(rate_t_ns=list(rate.t_ns), rate_bps=list(rate.values), owd_t_ns=list(owd.t_ns),
                               owd_ns=list(owd.values), loss_t_ns=[0], loss=[0.01], buffer_bytes=150_000,
                               rng_state=list(random.Random(0).getstate()[1]))
    arrivals, _ = workbench_core.run_link(link, sends)
    return len(arrivals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args()
    sends = schedule(a.seconds)
    print(f"engine modules compiled with mypyc: {_compiled.engine_is_compiled()}; {len(sends):,} packets offered")
    for varying in (False, True):
        rate, owd = series(a.seconds, varying=varying)
        got = {}
        for name, fn in (("python", run_python), ("rust", run_rust)):
            t0 = time.perf_counter()
            got[name] = fn(sends, rate, owd)
            wall = time.perf_counter() - t0
            print(f"link {'varying ' if varying else 'constant'} {name:6s}: {got[name]:,} delivered, "
                  f"{len(sends) / wall:,.0f} packets/s, {a.seconds / wall:,.0f}x real time")
        if got["python"] != got["rust"]:
            raise SystemExit(f"the two links disagree: {got}")


if __name__ == "__main__":
    main()
