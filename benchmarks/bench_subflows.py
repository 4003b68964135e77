"""Cost per packet as the number of subflows grows: 2, 4 and 8 subflows sharing the same total
capacity (40 Mbit/s over up to 4 paths, two subflows per path at 8), 200 s bulk, for a plain CC
(CUBIC) and the coupled ones (LIA, OLIA). Prints CPU µs per simulated data packet and the growth
from 2 to 8 subflows (target: at most +25 %).

Three figures per run. The first (kept as it was) is the whole run's CPU over its data packets: it
includes what a run costs whatever its length (building the experiment and the engine, slow start,
handing the results back). The second, the marginal cost, is what the target means, the steady
state: the same experiment also run for a tenth of the time, and (cpu - cpu_short) / (pkts -
pkts_short), the extra CPU per extra packet. Each CPU figure is the least of `--repeat` runs. The
default length is 200 s: at 20 s a run took about 6 ms of CPU and its short twin under 1 ms, so the
marginal cost moved by several percent from one invocation to the next.

A third figure, the marginal cost per event, separates the engine costing more per thing it does
from the model doing more per data packet: at 8 subflows the model runs more events per data packet
(printed: 1.54 at 2 subflows, 1.61 at 8 with CUBIC) and keeps a larger reordering queue at the MPTCP
level (`max_rcv_ooo_bytes` 0.26 MB at 2 subflows, 1.15 MB at 8, in the 40 s CUBIC runs).

The reference: `htsim_subflows.cpp` runs the same scenario on htsim (Broadcom/csg-htsim, built apart;
its header says how). Measured on this machine: uncoupled subflows +8 to +15 % from 2 to 8 subflows
(134 -> 145 ns per packet), LIA (`COUPLED_INC`) +35 to +42 % (150 -> 204 ns): a coupled congestion
control's per-ACK work over all subflows grows there as it does here (LIA +37 to +45 %). With
uncoupled subflows this engine grows more than htsim (CUBIC +36 to +41 %): htsim has no packet
scheduler (each subflow takes the next data when its window opens), where minRTT, here as in the
kernel, reads every subflow on every decision, and its TCP has no SACK scoreboard, RACK or HyStart.

A fourth layout separates the subflow count from subflows sharing a path: 4 subflows on 2 paths (two
per path) beside 4 on 4 paths (one each), the same count; the last line prints both. Measured with
CUBIC over 2 subflows: 4 on 4 paths +8 to +12 %, 4 on 2 paths +15 to +22 %, 8 on 4 paths +35 to
+41 % (in a one-off run, 8 on 2 paths +46 % and 8 on 1 path +33 %). So most of the growth comes with
sharing, not with the count, and it is not more work: from 4 to 8 subflows the engine's instructions
per packet grow by 5 % (cachegrind: 1,755 -> 1,850) and its L1 misses by 0.65 per packet. The likely
cause, not measured (this machine exposes no hardware counters, and cachegrind's simple branch model
does not see it): packets of two subflows interleave on a link at random, so each subflow's
per-packet branches (whether this segment completes a delayed ACK, whether its cwnd has room) no
longer follow the link's rhythm, and the branch predictor misses them more often.

    .venv/bin/python benchmarks/bench_subflows.py [--seconds 200] [--cc cubic,lia,olia] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from workbench.backends import ModelBackend
from workbench.experiment import BulkWorkload, SubflowSpec, experiment_from_paths, stack_profile, two_way_path


def experiment(n_subflows: int, cc: str, seconds: float, *, n_paths: int | None = None):
    """`n_subflows` subflows spread round-robin over `n_paths` paths (default: one per path, up to 4)."""
    n_paths = n_paths or min(n_subflows, 4)
    delays_ms = (10, 20, 30, 40)
    paths = [two_way_path(f"p{i}", rate_bps=40e6 / n_paths, owd_ns=delays_ms[i] * 1_000_000, buffer_bytes=100_000)
             for i in range(n_paths)]
    e = experiment_from_paths(paths, workload=BulkWorkload(), scheduler="minrtt",
                              stack=stack_profile("linux-upstream", congestion_control=cc),
                              duration_ns=int(seconds * 1e9))
    return replace(e, subflows=tuple(SubflowSpec(f"p{k % n_paths}") for k in range(n_subflows)))


def cpu_of_run(n_subflows: int, n_paths: int, cc: str, seconds: float) -> tuple[float, int, int]:
    """(CPU seconds, data packets sent, events) of one run, building the experiment included."""
    c0 = time.process_time()
    run = ModelBackend(sample_interval_ns=0).run(experiment(n_subflows, cc, seconds, n_paths=n_paths),
                                                 record=False)
    return time.process_time() - c0, run.counters["data_packets_sent"], run.counters["events"]


# (subflows, paths): the target's three counts, one subflow per path up to 4, and 4 subflows sharing
# 2 paths, which separates sharing a path from the count
LAYOUTS = ((2, 2), (4, 4), (8, 4), (4, 2))


def least_cpu(cc: str, seconds: float, repeat: int) -> dict[tuple[int, int, float], tuple[float, int, int]]:
    """Per (subflows, paths, length): the least CPU seconds of `repeat` runs, data packets, events.
    The machine is shared and its speed drifts over minutes, so the runs take turns (each repeat runs
    every layout and length once) rather than one configuration's runs back to back: a drift then
    moves all of them alike instead of the 2-subflow runs against the 8-subflow ones."""
    best: dict[tuple[int, int, float], tuple[float, int, int]] = {}
    for _ in range(repeat):
        for n, n_paths in LAYOUTS:
            for secs in (seconds, seconds / 10):
                cpu, pkts, events = cpu_of_run(n, n_paths, cc, secs)
                key = (n, n_paths, secs)
                if key not in best or cpu < best[key][0]:
                    best[key] = (cpu, pkts, events)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=200.0)
    ap.add_argument("--cc", default="cubic,lia,olia")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    for cc in a.cc.split(","):
        cost, marginal, per_event = {}, {}, {}
        best = least_cpu(cc, a.seconds, a.repeat)
        for n, n_paths in LAYOUTS:
            cpu, pkts, events = best[(n, n_paths, a.seconds)]
            cpu_short, pkts_short, events_short = best[(n, n_paths, a.seconds / 10)]
            cost[n, n_paths] = cpu / pkts * 1e6
            marginal[n, n_paths] = (cpu - cpu_short) / (pkts - pkts_short) * 1e6
            per_event[n, n_paths] = (cpu - cpu_short) / (events - events_short) * 1e6
            print(f"{cc:6s} {n} subflows on {n_paths} paths: {pkts:8d} data pkts, cpu {cpu:6.2f} s, "
                  f"{cost[n, n_paths]:5.3f} µs/pkt, {pkts / cpu:9,.0f} pkts/s, {a.seconds / cpu:5.1f}x real time; "
                  f"marginal {marginal[n, n_paths]:5.3f} µs/pkt, {events / pkts:4.2f} events/pkt, "
                  f"{per_event[n, n_paths]:5.3f} µs/event")
        two, eight = (2, 2), (8, 4)
        print(f"{cc:6s} 2 -> 8 subflows: {100 * (cost[eight] / cost[two] - 1):+.0f} % per packet, "
              f"{100 * (marginal[eight] / marginal[two] - 1):+.0f} % marginal (the target's figure), "
              f"{100 * (per_event[eight] / per_event[two] - 1):+.0f} % marginal per event")
        print(f"{cc:6s} 4 subflows, marginal over 2: {100 * (marginal[4, 4] / marginal[two] - 1):+.0f} % "
              f"on 4 paths (one per path), {100 * (marginal[4, 2] / marginal[two] - 1):+.0f} % on 2 paths "
              f"(two per path): the difference is sharing a path")


if __name__ == "__main__":
    main()
