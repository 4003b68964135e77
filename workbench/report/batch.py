"""Batch report orchestration: discover inputs, run one job per input (in this process, in local
worker processes, or on a dask.distributed cluster), write each input's page as its result arrives,
then the metrics tables, the index and the manifest.

Guarantees:

* one bad input never aborts the batch: it is an index row with its one-line error;
* every file is written to a temporary file in the output folder and renamed into place, and the
  index, metrics tables and manifest are written last: an interrupted report never leaves a page
  that looks complete but is not, nor an index that lists pages that do not exist;
* the metrics tables depend only on the inputs and the settings (seed included): rows are ordered
  by input then source, never by completion order, and hold no wall-clock values;
* workers return plain data (the metrics table as parquet bytes); only the parent writes files.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.report import _worker
from workbench.report.html import with_page
from workbench.report.jobs import JobSpec, Skipped, discover
from workbench.report.pipeline import ReportSettings, run_job

if TYPE_CHECKING:
    import concurrent.futures
    import queue

__all__ = ["BatchOutcome", "resolve_settings", "run_report", "write_atomic"]

_FIXED_COLUMNS = ["input", "input_id", "source", "kind", "seed"]
_PACKAGES = ["workbench", "polars", "pyarrow", "numpy", "plotly", "typer", "rich", "PyYAML"]


def _file_mode() -> int:
    # mkstemp creates 0600 files; reports are meant to be shared, so honour the umask like open() does.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@dataclass
class BatchOutcome:
    """What a report run produced (the CLI turns it into the exit code)."""

    out_dir: Path
    n_inputs: int
    n_ok: int
    n_partial: int
    n_failed: int
    wall_s: float
    results: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def exit_code(self) -> int:
        return 0 if self.n_failed == 0 else 1


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place."""
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def resolve_settings(schedulers: str | Sequence[str], params: Sequence[str] = (), *, seed: int = 0,
                     duration_ns: int | None = None, workload: str = "auto", baselines: bool = True,
                     cc: str = "cubic", kernel: bool = False, allow_outside_refs: bool = False) -> ReportSettings:
    """Settings from CLI-style values; bad scheduler names or parameters raise `InputError` (usage)."""
    import yaml

    from workbench.schedulers import available, get

    names = [s.strip() for s in (schedulers.split(",") if isinstance(schedulers, str) else schedulers) if s.strip()]
    if not names:
        raise InputError(None, "--schedulers is empty")
    if names == ["all"]:
        names = available()
    if "all" in names:
        raise InputError(None, "--schedulers all cannot be combined with scheduler names")
    names = list(dict.fromkeys(names))
    per: dict[str, dict[str, Any]] = {n: {} for n in names}
    for spec in params:
        key, sep, raw = spec.partition("=")
        sched, dot, pname = key.strip().partition(".")
        if not sep or not dot or not sched or not pname:
            raise InputError(None, f"--param wants SCHEDULER.NAME=VALUE, got {spec!r}")
        if sched not in per:
            raise InputError(None, f"--param {spec!r}: scheduler {sched!r} is not among --schedulers")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        per[sched][pname] = value
    for n in names:
        try:
            get(n, **per[n])  # validates the name and every parameter (InputError / TypeError)
        except TypeError as e:
            raise InputError(None, f"scheduler {n}: {e}") from None
    if workload not in ("auto", "bulk", "finite"):
        raise InputError(None, f"--workload must be auto, bulk or finite, not {workload!r}")
    if duration_ns is not None and duration_ns <= 0:
        raise InputError(None, "--duration must be > 0")
    if cc not in ("cubic", "reno", "lia", "olia"):
        raise InputError(None, f"--cc must be cubic, reno, lia or olia, not {cc!r}")
    return ReportSettings(schedulers=tuple(names),
                          params=tuple((n, tuple(sorted(per[n].items()))) for n in names if per[n]),
                          seed=seed, duration_ns=duration_ns, workload=workload, baselines=baselines, cc=cc,
                          kernel=kernel, allow_outside_refs=allow_outside_refs)


def _scheduler_params(settings: ReportSettings) -> dict[str, dict[str, Any]]:
    """Every parameter of every scheduler as the replays used it (defaults + overrides)."""
    from workbench.schedulers import info

    out = {}
    for n in settings.schedulers:
        given = settings.params_of(n)
        out[n] = {p.name: given.get(p.name, p.default) for p in info(n).params} | given
    return out


# -- executors ---------------------------------------------------------------------------------------

ResultSink = Callable[[int, dict[str, Any]], None]
StepSink = Callable[[str, int, int, str], None]


def _run_serial(jobs: list[JobSpec], settings: ReportSettings, sink: ResultSink, steps: StepSink) -> None:
    for i, spec in enumerate(jobs):
        sink(i, run_job(spec, settings, functools.partial(steps, spec.id)))


def _run_processes(jobs: list[JobSpec], settings: ReportSettings, n_workers: int, sink: ResultSink,
                   steps: StepSink) -> None:
    """``n_workers`` inputs at a time: one in this process (a thread), the others in worker processes.

    Why this process runs inputs too: a worker's first input waits for the fork server's imports
    (about 0.6 s, see `_worker`), while this process has most of them already and would otherwise only
    wait; on two cores that wait was about a tenth of the bundled-traces report. What it gives up: a
    worker that dies (a crash in native code) becomes that input's error row, while a crash in this
    process ends the report, as with ``--jobs 1``. Each slot takes the next input when its own is
    done, biggest inputs first (longest-processing-time-first: a large capture started last would run
    alone at the end while the other slots idle). The tables are ordered by input index, not by
    completion, so none of this changes the output."""
    import collections
    import concurrent.futures as cf
    import queue as queue_mod

    # Forked from the fork server when it runs with this pool size (see `_worker`), else spawned.
    ctx, threads = _worker.worker_context(n_workers)
    todo = collections.deque(sorted(range(len(jobs)), key=lambda i: (-_input_bytes(jobs[i]), i)))
    here: queue_mod.SimpleQueue[tuple[str, int, int, str]] = queue_mod.SimpleQueue()  # this process's steps
    # Progress from the workers (best effort, see `_worker.init_worker`); steps are shown by this thread only.
    there = ctx.Queue()
    running: dict[cf.Future[dict[str, Any]], tuple[int, bool]] = {}
    finished: set[str] = set()
    pool: cf.ProcessPoolExecutor | None = None  # made at the first input a worker runs

    def new_pool() -> cf.ProcessPoolExecutor:
        with _worker.spawn_env(threads):
            return cf.ProcessPoolExecutor(max_workers=n_workers - 1, mp_context=ctx, initializer=_worker.init_worker,
                                          initargs=(there,))

    def start(*, local: bool) -> None:
        nonlocal pool
        i = todo.popleft()
        if local:
            running[_in_thread(jobs[i], settings, here)] = (i, True)
            return
        if pool is None:
            pool = new_pool()
        try:
            running[pool.submit(_worker.run_in_worker, jobs[i], settings)] = (i, False)
        except cf.process.BrokenProcessPool:
            # A worker died (its input is an error row, below): the inputs after it get new workers.
            pool.shutdown(wait=False)
            pool = new_pool()
            running[pool.submit(_worker.run_in_worker, jobs[i], settings)] = (i, False)

    def show_steps() -> None:
        for q in (here, there):
            while True:
                try:
                    step = q.get_nowait()
                except queue_mod.Empty:
                    break
                if step[0] not in finished:  # a worker's step can arrive after its result
                    steps(*step)

    start(local=True)  # first: starting a worker waits for the fork server's imports
    try:
        for _ in range(n_workers - 1):
            if todo:
                start(local=False)
        while running:
            done, _ = cf.wait(running, timeout=0.1, return_when=cf.FIRST_COMPLETED)
            show_steps()
            ended = sorted((running.pop(f), f) for f in done)
            for (_, local), _f in ended:
                if todo:  # each slot's next input starts before any page is written
                    start(local=local)
            for (i, _), f in ended:
                finished.add(jobs[i].id)
                try:
                    sink(i, f.result())
                except Exception as e:  # a worker that died: that input becomes an error row
                    sink(i, _crashed(jobs[i], e))
    except BaseException:
        # Interrupted (Ctrl-C) or the parent failed: do not start queued inputs, do not wait (the
        # thread running this process's input is a daemon: it does not hold the exit up either).
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        raise
    if pool is not None:
        pool.shutdown(wait=True)
    there.close()


def _in_thread(spec: JobSpec, settings: ReportSettings, steps: queue.SimpleQueue[tuple[str, int, int, str]]
               ) -> concurrent.futures.Future[dict[str, Any]]:
    """`run_job` in a daemon thread of this process, as a future; its steps go into ``steps``."""
    import concurrent.futures as cf
    import threading

    fut: cf.Future[dict[str, Any]] = cf.Future()

    def run() -> None:
        try:
            fut.set_result(with_page(run_job(spec, settings, lambda d, t, lab: steps.put((spec.id, d, t, lab)))))
        except BaseException as e:  # run_job turns an input's errors into its result; this is a bug
            fut.set_exception(e)

    threading.Thread(target=run, name=f"report-{spec.id}", daemon=True).start()
    return fut


def _input_bytes(spec: JobSpec) -> int:
    total = 0
    for f in [*spec.files, *([spec.peer] if spec.peer else [])]:
        with contextlib.suppress(OSError):
            total += Path(f).stat().st_size
    return total


def _run_dask(jobs: list[JobSpec], settings: ReportSettings, address: str, sink: ResultSink) -> None:
    # dask is imported only here: the rest of the workbench never needs it.
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise InputError(None, "--executor dask needs the 'distributed' package") from None
    try:
        client = Client(address, timeout="5s")
    except (OSError, TimeoutError) as e:
        raise InputError(None, f"cannot reach the dask scheduler at {address}: {e}") from None
    try:
        token = f"{os.getpid()}-{time.time_ns()}"
        futures = {client.submit(run_job, spec, settings, key=f"workbench-report-{spec.id}-{token}", pure=False): i
                   for i, spec in enumerate(jobs)}
        for f in as_completed(list(futures)):
            i = futures[f]
            try:
                sink(i, f.result())
            except Exception as e:
                sink(i, _crashed(jobs[i], e))
    finally:
        client.close()


def _crashed(spec: JobSpec, e: BaseException) -> dict[str, Any]:
    return {"id": spec.id, "label": spec.label, "kind": spec.kind, "status": "error",
            "error": f"worker failed: {type(e).__name__}: {e}", "note": None, "files": [], "warnings": [],
            "notes": [], "metrics_parquet": None, "figures": None, "workload": None, "duration_ns": None,
            "connection": None, "wall_s": 0.0, "trace": None}


# -- outputs -----------------------------------------------------------------------------------------

def _copy_plotly(out_dir: Path) -> None:
    import plotly

    src = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    dst = out_dir / "assets" / "plotly.min.js"
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() and dst.stat().st_size == src.stat().st_size:
        return
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=".plotly.min.js.", suffix=".tmp")
    os.close(fd)
    shutil.copyfile(src, tmp)
    os.chmod(tmp, _file_mode())
    os.replace(tmp, dst)


def _write_page(out_dir: Path, result: dict[str, Any]) -> str | None:
    """Write the input's page, made here unless it was where the input ran (`html.with_page`)."""
    if "page_html" not in result:  # the serial and Dask paths, and discovery's error rows
        with_page(result)
    page = result.pop("page_html")
    if page is None:
        return None
    name = f"{result['id']}.html"
    write_atomic(out_dir / name, page)
    return name


def _per_input(results: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], list[str] | None]]:
    import polars as pl

    return [(pl.read_parquet(io.BytesIO(r["metrics_parquet"])).to_dicts(), r.get("paths"))
            for r in results if r.get("metrics_parquet")]


def _metrics_table(results: list[dict[str, Any]]) -> Any:
    """The tidy table (`workbench.report.tidy`): one row per input x source x path x metric."""
    from workbench.report.tidy import tidy_metrics

    return tidy_metrics(_per_input(results))


def _metrics_wide(results: list[dict[str, Any]]) -> Any:
    """One row per input x source, per-path columns by the path's place (path1 = primary)."""
    from workbench.report.tidy import wide_metrics

    return wide_metrics(_per_input(results))


def _index_row(result: dict[str, Any]) -> dict[str, Any]:
    import polars as pl

    from workbench.report.figures import winners

    row = {k: result.get(k) for k in ("id", "label", "kind", "status", "error", "note", "page")}
    row["finite"] = result.get("finite")
    if result.get("metrics_parquet"):
        rows = pl.read_parquet(io.BytesIO(result["metrics_parquet"])).to_dicts()
        obs = next((r for r in rows if r["source"] == "observed"), None)
        if obs:
            row["observed_goodput_mbps"] = obs.get("goodput_mbps")
            row["observed_ooo_p95_ms"] = obs.get("ooo_p95_ms")
        finite = result.get("finite")
        best = winners(rows, "goodput_mbps", "higher", finite=finite)
        if best:
            b = next(r for r in rows if r["source"] == best[0])
            row["best_scheduler"] = " = ".join(best)
            row["best_goodput_mbps"] = b.get("goodput_mbps")
            row["best_ooo_p95_ms"] = b.get("ooo_p95_ms")
        row["best_ooo_scheduler"] = " = ".join(winners(rows, "ooo_p95_ms", "lower", finite=finite)) or None
    return row


def _wins(results: list[dict[str, Any]], schedulers: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per summary metric, on how many inputs each scheduler had the best value: only inputs where
    the metric applies to the workload (completion: finite transfers) and only among the rows that
    delivered data (`winners`)."""
    import polars as pl

    from workbench.report.figures import METRICS, SUMMARY_METRICS, winners

    better = {k: b for k, _, _, b in METRICS}
    counts: dict[str, dict[str, int]] = {m: dict.fromkeys(schedulers, 0) for m in SUMMARY_METRICS}
    for r in results:
        if r["status"] != "ok" or not r.get("metrics_parquet"):
            continue
        rows = pl.read_parquet(io.BytesIO(r["metrics_parquet"])).to_dicts()
        for m in SUMMARY_METRICS:
            for s in winners(rows, m, better[m], finite=r.get("finite")):
                counts[m][s] = counts[m].get(s, 0) + 1
    return {m: c for m, c in counts.items() if any(c.values())}


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def _manifest(jobs: list[JobSpec], results: list[dict[str, Any]], skipped: list[Skipped], settings: ReportSettings,
              executor: dict[str, Any], command_line: list[str] | None, wall_s: float) -> dict[str, Any]:
    from workbench.capture import READER_VERSION

    inputs = []
    for spec, r in zip(jobs, results, strict=True):
        inputs.append({
            "id": spec.id, "label": spec.label, "kind": spec.kind, "status": r["status"], "error": r.get("error"),
            "note": r.get("note"), "page": r.get("page"), "figures": r.get("n_figures"), "files": r.get("files", []),
            "path_names": dict(spec.path_names), "workload": r.get("workload"), "duration_ns": r.get("duration_ns"),
            "connection": r.get("connection"),
            "wall_s": round(float(r.get("wall_s") or 0.0), 3), "traceback": r.get("trace"),
        })
    versions = _versions()
    if executor.get("kind") == "dask":
        for p in ("dask", "distributed"):
            try:
                versions[p] = metadata.version(p)
            except metadata.PackageNotFoundError:
                versions[p] = None
    return {
        "format": "workbench-report", "version": 1,
        "command_line": command_line if command_line is not None else list(sys.argv),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": sys.version.split()[0], "platform": platform.platform(),
        "packages": versions, "reader_version": READER_VERSION,
        "settings": settings.to_dict(),
        "seeds": {"replay": settings.seed},
        "scheduler_params": _scheduler_params(settings),
        "executor": executor,
        "wall_s": round(wall_s, 3),
        "inputs": inputs,
        "skipped": [{"path": s.path, "reason": s.reason} for s in skipped],
        "outputs": {"index": "index.html", "metrics_csv": "metrics.csv", "metrics_parquet": "metrics.parquet",
                    "metrics_wide_csv": "metrics_wide.csv", "plotly": "assets/plotly.min.js"},
    }


def run_report(inputs: Sequence[str | Path], out_dir: str | Path, settings: ReportSettings, *,
               jobs: int | None = None, executor: str = "local", address: str | None = None,
               path_names: dict[str, str] | None = None, show_progress: bool = True,
               command_line: list[str] | None = None) -> BatchOutcome:
    """Write a report over ``inputs`` into ``out_dir``; see the module docstring. Bad usage (no
    inputs, an output path that is a file, an unknown executor, another report writing into the
    same folder) raises `InputError`. The folder is locked for the run and pages are published
    only when all inputs are done (`workbench.report._folder`)."""
    from workbench.report._folder import ReportFolder

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(out, "output path exists and is not a folder")
    if not inputs:
        raise InputError(None, "no inputs given")
    with ReportFolder(out) as folder:
        return _run_report_locked(inputs, out, settings, folder, jobs=jobs, executor=executor, address=address,
                                  path_names=path_names, show_progress=show_progress, command_line=command_line)


def _run_report_locked(inputs: Sequence[str | Path], out_dir: str | Path, settings: ReportSettings, folder: Any, *,
                       jobs: int | None = None, executor: str = "local", address: str | None = None,
                       path_names: dict[str, str] | None = None, show_progress: bool = True,
                       command_line: list[str] | None = None) -> BatchOutcome:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from workbench.report.figures import METRICS
    from workbench.report.html import index_page

    t0 = time.perf_counter()
    if not inputs:
        raise InputError(None, "no inputs given")
    if executor not in ("local", "dask"):
        raise InputError(None, f"--executor must be local or dask, not {executor!r}")
    if executor == "dask" and not address:
        raise InputError(None, "--executor dask needs --address tcp://HOST:PORT")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(out, "output path exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    job_list, skipped = discover(inputs, path_names=path_names, exclude=[out])
    if not job_list:
        raise InputError(None, "no inputs found (folders held no capture, CSV export, timelines or scenario)")
    n_workers = max(1, jobs if jobs is not None else (os.cpu_count() or 1))
    if executor == "local" and min(n_workers, sum(j.error is None for j in job_list)) > 1:
        _worker.start_workers(n_workers)  # its imports run while this process goes on (its first input)
    _copy_plotly(out)
    results: list[dict[str, Any] | None] = [None] * len(job_list)
    console = Console(stderr=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=not show_progress, transient=False)
    tasks: dict[str, Any] = {}

    with progress:
        overall = progress.add_task(f"report ({len(job_list)} inputs)", total=len(job_list))

        def steps(job_id: str, done: int, total: int, label: str) -> None:
            if job_id not in tasks:
                tasks[job_id] = progress.add_task(f"  {job_id}", total=total)
            progress.update(tasks[job_id], completed=done, total=total, description=f"  {job_id}: {label}")

        def sink(i: int, result: dict[str, Any]) -> None:
            result["page"] = _write_page(folder.staging, result)  # published when every input is done
            results[i] = result
            tid = tasks.pop(job_list[i].id, None)
            if tid is not None:
                progress.remove_task(tid)
            progress.advance(overall)

        runnable = [(i, j) for i, j in enumerate(job_list) if j.error is None]
        for i, j in enumerate(job_list):
            if j.error is not None:
                sink(i, run_job(j, settings))
        sub = [j for _, j in runnable]

        def sub_sink(k: int, r: dict[str, Any]) -> None:
            sink(runnable[k][0], r)

        if executor == "dask":
            assert address is not None
            _run_dask(sub, settings, address, sub_sink)
        elif n_workers == 1 or len(sub) <= 1:
            _run_serial(sub, settings, sub_sink, steps)
        else:
            _run_processes(sub, settings, min(n_workers, len(sub)), sub_sink, steps)

    final = [r for r in results if r is not None]
    assert len(final) == len(job_list)
    folder.publish_pages()
    # Written last, so an interrupted run leaves no index pointing at missing pages.
    table = _metrics_table(final)
    buf = io.BytesIO()
    table.write_parquet(buf)
    write_atomic(out / "metrics.parquet", buf.getvalue())
    write_atomic(out / "metrics.csv", table.write_csv())
    write_atomic(out / "metrics_wide.csv", _metrics_wide(final).write_csv())
    n_ok = sum(r["status"] == "ok" for r in final)
    n_partial = sum(r["status"] == "partial" for r in final)
    n_failed = sum(r["status"] == "error" for r in final)
    labels = {k: label for k, label, _, _ in METRICS}
    header = {"n_ok": n_ok + n_partial, "schedulers": list(settings.schedulers), "seed": settings.seed}
    write_atomic(out / "index.html", index_page([_index_row(r) for r in final], _wins(final, settings.schedulers),
                                                labels, [{"path": s.path, "reason": s.reason} for s in skipped],
                                                header))
    wall = time.perf_counter() - t0
    exec_info = {"kind": executor, "jobs": n_workers if executor == "local" else None, "address": address}
    manifest = _manifest(job_list, final, skipped, settings, exec_info, command_line, wall)
    write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, default=str) + "\n")
    return BatchOutcome(out_dir=out, n_inputs=len(final), n_ok=n_ok, n_partial=n_partial, n_failed=n_failed,
                        wall_s=wall, results=final)
