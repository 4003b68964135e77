"""Wall time of a batch report over the bundled traces (``traces/``) with every registered scheduler,
serial (``--jobs 1``) vs two worker processes (``--jobs 2``).

Usage: bench_report.py [INPUT ...] [--schedulers all] [--jobs-list 1,2] [--against DIR] [--repeat N]

``--against DIR`` also times the same report in another checkout of the project (with its own
``.venv``, made by its ``scripts/setup.sh``), e.g. the commit the issue was measured at, and prints the
speed-up against it:

    git worktree add /tmp/base b9bf175 && bash /tmp/base/scripts/setup.sh
    .venv/bin/python benchmarks/bench_report.py --against /tmp/base

Each run is a fresh Python process (interpreter start, imports, discovery, every replay, pages,
index, tables), as a user's ``workbench report`` would be; the parse cache is warmed by a first
untimed run so both timings replay the same way. ``--repeat N`` runs every setting N times, the
settings taking turns (a slow spell of a shared machine then hits each of them), and keeps each
setting's fastest run. Prints the wall time per setting, the speed-up, and checks the metrics tables
of all runs are identical.
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
import sys
from workbench.report import resolve_settings, run_report
if __name__ == "__main__":
    out, jobs, scheds, *inputs = sys.argv[1:]
    o = run_report(inputs, out, resolve_settings(scheds), jobs=int(jobs), show_progress=False)
    print(o.n_inputs, o.n_ok, o.n_partial, o.n_failed)
"""


def run(out: Path, jobs: int, schedulers: str, inputs: list[str], *, checkout: Path | None = None
        ) -> tuple[float, str]:
    python = sys.executable if checkout is None else str(checkout / ".venv" / "bin" / "python")
    cmd, cwd = [python, "-c", _RUN, str(out), str(jobs), schedulers, *inputs], checkout or REPO
    t0 = time.perf_counter()
    p = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=cwd)
    return time.perf_counter() - t0, p.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="*", default=[str(REPO / "traces")])
    ap.add_argument("--schedulers", default="all")
    ap.add_argument("--jobs-list", default="1,2")
    ap.add_argument("--against", type=Path, help="another checkout (with its .venv) to time the same report in")
    ap.add_argument("--repeat", type=int, default=1, help="runs per setting, taking turns; the fastest is kept")
    args = ap.parse_args()
    inputs = [str(Path(i).resolve()) for i in args.inputs]  # the other checkout runs in its own folder
    import polars as pl

    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "warm", 2, "minrtt", inputs)  # warms the parsed-capture cache
        if args.against is not None:
            run(Path(tmp) / "warm-against", 2, "minrtt", inputs, checkout=args.against)
        times: dict[str, float] = {}
        tables: dict[str, pl.DataFrame] = {}
        jobs_list = [int(j) for j in args.jobs_list.split(",")]
        settings: list[tuple[int, Path | None]] = [(jobs, None) for jobs in jobs_list]
        if args.against is not None:
            settings = [(jobs, args.against) for jobs in jobs_list] + settings
        for rep in range(args.repeat):
            for jobs, checkout in settings:
                label = f"--jobs {jobs}" if checkout is None else f"--jobs {jobs}, checkout {checkout}"
                out = Path(tmp) / f"jobs{jobs}-{checkout is not None}-{rep}"
                wall, counts = run(out, jobs, args.schedulers, inputs, checkout=checkout)
                times[label] = min(wall, times.get(label, wall))
                table = pl.read_parquet(out / "metrics.parquet")
                # (another checkout's runs are not checked: b9bf175's tables differ from run to run)
                if not tables.setdefault(label, table).equals(table) and checkout is None:
                    print(f"{label}: run {rep + 1} gave other metrics than run 1")
                    sys.exit(1)
                n, ok, partial, failed = counts.split()
                print(f"{label}: {wall:6.1f} s  ({n} inputs: {ok} replayed, {partial} without replay, "
                      f"{failed} failed; {table.height} metric rows)", flush=True)
        if args.repeat > 1:
            for label, wall in times.items():
                print(f"{label}: fastest of {args.repeat}: {wall:6.1f} s")
        first = next(iter(times))
        for (jobs, checkout), (label, wall) in zip(settings, times.items(), strict=True):
            # against the other checkout at the same --jobs, else against the first setting
            ref_label = f"--jobs {jobs}, checkout {args.against}" if args.against is not None else first
            if checkout is None and label != ref_label:
                print(f"speed-up {label} vs {ref_label}: {times[ref_label] / wall:.2f}x")
        if args.against is not None:  # another version of the code: its numbers may differ (it is not checked)
            tables = {k: v for k, v in tables.items() if "checkout" not in k}
            first = next(iter(tables))
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
