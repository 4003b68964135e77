"""Wall time of a batch report over the bundled traces (``traces/``) with every registered scheduler,
serial (``--jobs 1``) vs two worker processes (``--jobs 2``).

Usage: bench_report.py [INPUT ...] [--schedulers all] [--jobs-list 1,2] [--engines auto]

``--engines python,auto`` times the same report with every replay forced into the Python engine
(``run_network(engine="python")``, patched in the report process; use it with ``--jobs-list 1``, since
worker processes may not inherit the patch) against the default (the compiled engine).

Each run is a fresh Python process (interpreter start, imports, discovery, every replay, pages,
index, tables), as a user's ``workbench report`` would be; the parse cache is warmed by a first
untimed run so both timings replay the same way. Prints the wall time per setting, the speed-up,
and checks the metrics tables of all runs are identical.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_RUN = """
import functools, sys
import workbench.replay.run as replay_run
from workbench.report import resolve_settings, run_report
if __name__ == "__main__":
    out, jobs, scheds, engine, *inputs = sys.argv[1:]
    replay_run.run_network = functools.partial(replay_run.run_network, engine=engine)
    o = run_report(inputs, out, resolve_settings(scheds), jobs=int(jobs), show_progress=False)
    print(o.n_inputs, o.n_ok, o.n_partial, o.n_failed)
"""


def run(out: Path, jobs: int, schedulers: str, inputs: list[str], *, engine: str = "auto") -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _RUN, str(out), str(jobs), schedulers, engine, *inputs],
                       check=True, capture_output=True, text=True, cwd=REPO)
    return time.perf_counter() - t0, p.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="*", default=[str(REPO / "traces")])
    ap.add_argument("--schedulers", default="all")
    ap.add_argument("--jobs-list", default="1,2")
    ap.add_argument("--engines", default="auto", help="comma-separated: auto (compiled), python")
    args = ap.parse_args()
    import polars as pl

    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "warm", 2, "minrtt", args.inputs)  # warms the parsed-capture cache
        times: dict[str, float] = {}
        tables: dict[str, pl.DataFrame] = {}
        for engine in args.engines.split(","):
            for jobs in (int(j) for j in args.jobs_list.split(",")):
                label = f"--jobs {jobs}, engine {engine}"
                out = Path(tmp) / f"jobs{jobs}-{engine}"
                wall, counts = run(out, jobs, args.schedulers, args.inputs, engine=engine)
                times[label] = wall
                tables[label] = pl.read_parquet(out / "metrics.parquet")
                n, ok, partial, failed = counts.split()
                print(f"{label}: {wall:6.1f} s  ({n} inputs: {ok} replayed, {partial} without replay, "
                      f"{failed} failed; {tables[label].height} metric rows)", flush=True)
        first = next(iter(times))
        for label, wall in times.items():
            if label != first:
                print(f"speed-up {label} vs {first}: {times[first] / wall:.2f}x")
        ref = tables[first]
        same = all(t.equals(ref) for t in tables.values())
        print(f"metrics tables identical across runs: {same}")
        if not same:
            for label, t in tables.items():
                if t.equals(ref):
                    continue
                if t.shape != ref.shape:
                    print(f"  {label}: shape {t.shape} vs {ref.shape}")
                    continue
                for i in range(ref.height):
                    a, b = ref.row(i, named=True), t.row(i, named=True)
                    diff = [k for k in a if a[k] != b[k] and not (a[k] != a[k] and b[k] != b[k])]
                    if diff:
                        print(f"  {label}: {a['input_id']} / {a['source']} differs in {diff[:5]}")
            sys.exit(1)


if __name__ == "__main__":
    main()
