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

    .venv/bin/python benchmarks/bench_subflows.py [--seconds 200] [--cc cubic,lia,olia] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from workbench.backends import ModelBackend
from workbench.experiment import BulkWorkload, SubflowSpec, experiment_from_paths, stack_profile, two_way_path


def experiment(n_subflows: int, cc: str, seconds: float):
    n_paths = min(n_subflows, 4)
    delays_ms = (10, 20, 30, 40)
    paths = [two_way_path(f"p{i}", rate_bps=40e6 / n_paths, owd_ns=delays_ms[i] * 1_000_000, buffer_bytes=100_000)
             for i in range(n_paths)]
    e = experiment_from_paths(paths, workload=BulkWorkload(), scheduler="minrtt",
                              stack=stack_profile("linux-upstream", congestion_control=cc),
                              duration_ns=int(seconds * 1e9))
    return replace(e, subflows=tuple(SubflowSpec(f"p{k % n_paths}") for k in range(n_subflows)))


def cpu_of_run(n_subflows: int, cc: str, seconds: float) -> tuple[float, int, int]:
    """(CPU seconds, data packets sent, events) of one run, building the experiment included."""
    c0 = time.process_time()
    run = ModelBackend(sample_interval_ns=0).run(experiment(n_subflows, cc, seconds), record=False)
    return time.process_time() - c0, run.counters["data_packets_sent"], run.counters["events"]


def least_cpu(cc: str, seconds: float, repeat: int) -> dict[tuple[int, float], tuple[float, int, int]]:
    """Per (subflows, length): the least CPU seconds of `repeat` runs, data packets, events. The
    machine is shared and its speed drifts over minutes, so the runs take turns (each repeat runs
    every count and length once) rather than one configuration's runs back to back: a drift then
    moves all of them alike instead of the 2-subflow runs against the 8-subflow ones."""
    best: dict[tuple[int, float], tuple[float, int, int]] = {}
    for _ in range(repeat):
        for n in (2, 4, 8):
            for secs in (seconds, seconds / 10):
                cpu, pkts, events = cpu_of_run(n, cc, secs)
                if (n, secs) not in best or cpu < best[(n, secs)][0]:
                    best[(n, secs)] = (cpu, pkts, events)
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
        for n in (2, 4, 8):
            cpu, pkts, events = best[(n, a.seconds)]
            cpu_short, pkts_short, events_short = best[(n, a.seconds / 10)]
            cost[n] = cpu / pkts * 1e6
            marginal[n] = (cpu - cpu_short) / (pkts - pkts_short) * 1e6
            per_event[n] = (cpu - cpu_short) / (events - events_short) * 1e6
            print(f"{cc:6s} {n} subflows: {pkts:8d} data pkts, cpu {cpu:6.2f} s, {cost[n]:5.3f} µs/pkt, "
                  f"{pkts / cpu:9,.0f} pkts/s, {a.seconds / cpu:5.1f}x real time; "
                  f"marginal {marginal[n]:5.3f} µs/pkt, {events / pkts:4.2f} events/pkt, "
                  f"{per_event[n]:5.3f} µs/event")
        print(f"{cc:6s} 2 -> 8 subflows: {100 * (cost[8] / cost[2] - 1):+.0f} % per packet, "
              f"{100 * (marginal[8] / marginal[2] - 1):+.0f} % marginal (the target's figure), "
              f"{100 * (per_event[8] / per_event[2] - 1):+.0f} % marginal per event")


if __name__ == "__main__":
    main()
