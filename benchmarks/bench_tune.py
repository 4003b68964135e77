"""Tuning throughput: finished trials per minute of wall time for STMS-A's adjust_interval on a 30 s
two-path timeline (wifi 30 Mbit/s, 10 ms one way; lte following the mahimahi T-Mobile LTE trace, 40 ms
one way), with 1 and with 2 worker processes (`workbench tune` CLI) sharing one SQLite study.

Each trial = one 30 s replay + its metrics. The dev machine has 2 cores and is shared, so wall time is
noisy: the script also prints the load average before each run and the workers' CPU time (trials per
CPU-minute does not depend on how busy the machine is; on an idle machine N workers on N cores reach
about N times that per wall minute).

The workers run as `workbench tune` runs them, with polars' default thread pool (all cores each);
a POLARS_MAX_THREADS in the environment is passed on. Capping it at cores // workers changed the
CPU per trial by under 3 % once a trial's metrics were cheap (0.266 vs 0.273 s).

    .venv/bin/python benchmarks/bench_tune.py [--trials 6] [--seconds 30] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
MAHIMAHI = SHARED / "timelines" / "mahimahi" / "TMobile-LTE-short.down"


def scenario(folder: Path, seconds: float) -> Path:
    p = folder / "two-path-30s.json"
    # a scenario reads its traces from its own folder (the CLI refuses paths outside it)
    shutil.copyfile(MAHIMAHI, folder / MAHIMAHI.name)
    p.write_text(json.dumps({
        "duration_s": seconds, "workload": "bulk",
        "paths": [{"name": "wifi", "rate_mbps": 30, "owd_ms": 10, "buffer_packets": 50},
                  {"name": "lte", "rate_mbps": {"mahimahi": MAHIMAHI.name}, "owd_ms": 40,
                   "buffer_packets": 400}]}))
    return p


def run(n_workers: int, n_trials: int, seconds: float) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        folder = Path(tmp)
        inp = scenario(folder, seconds)
        storage = f"sqlite:///{folder / 'study.db'}"
        cmd = [sys.executable, "-m", "workbench.tune.cli", str(inp), "-s", "stms_a", "--tune", "adjust_interval_ms",
               "--space", "adjust_interval_ms=5:500:log", "-n", str(n_trials), "--storage", storage,
               "--study", "bench", "--no-evaluate", "--no-html", "--no-progress", "--json"]
        threads = os.environ.get("POLARS_MAX_THREADS", "default")
        print(f"load average {os.getloadavg()[0]:.1f}; {n_workers} worker(s), polars threads {threads}, "
              f"{n_trials} trials ...", flush=True)
        t0 = time.perf_counter()
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        procs = [subprocess.Popen([*cmd, "-o", str(folder / f"out{k}")], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for k in range(n_workers)]
        for p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise SystemExit(err)
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        study = optuna.load_study(study_name="bench", storage=storage)
        done = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished() and t.state.name != "FAIL"]
        per_trial = [t.duration.total_seconds() for t in done if t.duration is not None]
        rate = len(done) / (wall / 60)
        print(f"  {len(done)} trials in {wall:.1f} s wall (incl. process start-up): {rate:.2f} trials/min; "
              f"mean trial {sum(per_trial) / len(per_trial):.2f} s; workers' CPU {cpu:.1f} s = "
              f"{cpu / len(done):.3f} s per trial = {len(done) / (cpu / 60):.2f} trials per CPU-minute", flush=True)
        return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args()
    rates = {w: run(w, a.trials, a.seconds) for w in a.workers}
    if 1 in rates:
        for w, r in rates.items():
            print(f"{w} worker(s): {r:.2f} trials/min ({r / rates[1]:.2f}x of 1 worker)")


if __name__ == "__main__":
    main()
