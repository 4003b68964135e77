"""What a local worker process of a batch report runs (`run_in_worker`), and the worker processes
themselves: a fork server that imports, once, everything a job needs, and forks each worker from it.

Why a fork server: a worker started from scratch ("spawn") spends about 0.4 s of CPU importing
polars, numpy, plotly and the engine before its first input, and every worker pays it again: on two
cores that was about a tenth of the bundled-traces report. The fork server imports it once
(`WORKER_MODULES`); it is started as soon as the report knows it will run inputs in parallel, and
while it imports, the report process runs its first input itself (`batch._run_processes`).
Forking the report process itself is not an option: it has polars' thread pool running, and forking a
threaded process can deadlock the child. The fork server only imports (no polars query has run in it).

Polars sizes its thread pool from ``POLARS_MAX_THREADS`` when it is imported, so the server is started
with the worker's share of the cores in its environment and serves only pools of that size; a report
asking for another size in the same process gets spawned workers (still correct, only slower to start).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from collections.abc import Iterator
from typing import Any

from workbench.report.html import with_page
from workbench.report.jobs import JobSpec
from workbench.report.pipeline import ReportSettings, run_job

__all__ = ["WORKER_MODULES", "init_worker", "run_in_worker", "spawn_env", "start_workers", "threads_per_worker", "worker_context"]

# What the fork server imports (`_preload`: everything a job needs; this module for the entry point).
WORKER_MODULES = ("workbench.report._worker", "workbench.report._preload")

# The POLARS_MAX_THREADS the fork server of this process was started with (None: not started).
_server_threads: str | None = None


def threads_per_worker(n_workers: int) -> str:
    """Each worker's polars pool gets its share of the cores (oversubscription slows every worker
    down), unless the user set ``POLARS_MAX_THREADS`` themselves."""
    return os.environ.get("POLARS_MAX_THREADS") or str(max(1, (os.cpu_count() or 1) // n_workers))


@contextlib.contextmanager
def _polars_threads(threads: str) -> Iterator[None]:
    """``POLARS_MAX_THREADS`` set while processes started now inherit it."""
    saved = os.environ.get("POLARS_MAX_THREADS")
    os.environ["POLARS_MAX_THREADS"] = threads
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("POLARS_MAX_THREADS", None)
        else:
            os.environ["POLARS_MAX_THREADS"] = saved


def start_workers(n_workers: int) -> None:
    """Start the fork server (it imports `WORKER_MODULES` in the background) for pools of
    ``n_workers``; a no-op where there is no fork server or one already runs."""
    global _server_threads
    if _server_threads is not None or "forkserver" not in mp.get_all_start_methods():
        return
    from multiprocessing import forkserver

    threads = threads_per_worker(n_workers)
    mp.get_context("forkserver").set_forkserver_preload(list(WORKER_MODULES))
    with _polars_threads(threads):
        forkserver.ensure_running()
    _server_threads = threads


def worker_context(n_workers: int) -> tuple[Any, str]:
    """(the multiprocessing context to start ``n_workers`` workers with, their POLARS_MAX_THREADS)."""
    start_workers(n_workers)
    threads = threads_per_worker(n_workers)
    if _server_threads == threads:
        return mp.get_context("forkserver"), threads
    return mp.get_context("spawn"), threads


def spawn_env(threads: str) -> contextlib.AbstractContextManager[None]:
    """The environment spawned workers must start in (a forked one already has it)."""
    return _polars_threads(threads)


# Where a worker's steps go (`init_worker`); None: nowhere.
_progress: Any = None


def init_worker(progress: Any) -> None:
    """A worker process's initializer: its steps go to ``progress`` (a multiprocessing queue the
    report reads). Best effort: a worker never waits at exit for steps the report did not read."""
    global _progress
    progress.cancel_join_thread()
    _progress = progress


def run_in_worker(spec: JobSpec, settings: ReportSettings) -> dict[str, Any]:
    """Entry point in a worker process: run the job and make its page (`html.with_page`), report its
    steps (`init_worker`)."""
    def cb(done: int, total: int, label: str) -> None:
        # Progress is best effort: a full or closed queue never fails a job.
        with contextlib.suppress(Exception):
            _progress.put_nowait((spec.id, done, total, label))
    return with_page(run_job(spec, settings, cb if _progress is not None else None))
