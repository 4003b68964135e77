"""One layer of the compiled core alone (native/engine/src/link.rs): packets per second of wall time
through one trace-driven link on the event list (`workbench_core.run_link`), no TCP above it.

The schedule: 60 s of 1514-byte packets offered at 110 % of a 30 Mbit/s link (so the buffer fills
and drops), 1 % random loss, 10 ms delay; once over a constant link and once over a link whose
capacity and delay step every 100 ms. Prints what was delivered, dropped at the buffer and lost.

    .venv/bin/python benchmarks/bench_core.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import random
import time

import workbench_core

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


def run_link(sends: list[tuple[int, int]], rate: StepSeries, owd: StepSeries) -> tuple[int, int, int]:
    """(delivered, dropped at the buffer, lost at random)."""
    link = workbench_core.Link(rate_t_ns=list(rate.t_ns), rate_bps=list(rate.values), owd_t_ns=list(owd.t_ns),
                               owd_ns=list(owd.values), loss_t_ns=[0], loss=[0.01], buffer_bytes=150_000,
                               rng_state=list(random.Random(0).getstate()[1]))
    arrivals, drops = workbench_core.run_link(link, sends)
    queue = sum(1 for _, _, reason in drops if reason == 0)
    return len(arrivals), queue, len(drops) - queue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args()
    sends = schedule(a.seconds)
    print(f"{len(sends):,} packets offered")
    for varying in (False, True):
        rate, owd = series(a.seconds, varying=varying)
        t0 = time.perf_counter()
        delivered, queued_out, lost = run_link(sends, rate, owd)
        wall = time.perf_counter() - t0
        print(f"link {'varying ' if varying else 'constant'}: {delivered:,} delivered, {queued_out:,} dropped at "
              f"the buffer, {lost:,} lost; {len(sends) / wall:,.0f} packets/s, {a.seconds / wall:,.0f}x real time")

if __name__ == "__main__":
    main()
