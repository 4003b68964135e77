"""The local worker processes of a batch report (`workbench.report._worker`): forked from a fork server
that imported what a job needs, each with its share of the cores in polars' pool, and giving the same
tables as a serial report."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
from polars.testing import assert_frame_equal

from workbench.report import _worker, resolve_settings, run_report

REPO = Path(__file__).resolve().parents[1]

_IMPORTS_OF_A_JOB = """
import json, sys
from workbench.report import _worker, resolve_settings
for m in _worker.WORKER_MODULES:
    __import__(m)
before = set(sys.modules)
from workbench.report.jobs import discover
spec = discover([sys.argv[1]])[0][0]
r = _worker.run_job(spec, resolve_settings("all"))
assert r["status"] == "ok", r.get("error")
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_worker_modules_cover_what_a_job_imports() -> None:
    """A job with replays, pages' figures and a lab capture imports nothing of ours, nor any of the
    heavy libraries, that the fork server did not import already (each worker would import it again)."""
    lab = REPO / "traces" / "lab" / "c07"
    out = subprocess.run([sys.executable, "-c", _IMPORTS_OF_A_JOB, str(lab)], check=True, capture_output=True,
                         text=True, cwd=REPO, env=os.environ | {"POLARS_MAX_THREADS": "1"})
    new = json.loads(out.stdout.strip().splitlines()[-1])
    heavy = ("workbench", "polars", "numpy", "plotly", "pyarrow", "_plotly_utils", "narwhals")
    assert [m for m in new if m.split(".")[0] in heavy] == []


def test_workers_fork_from_the_server_with_their_share_of_cores() -> None:
    ctx, threads = _worker.worker_context(2)
    assert ctx.get_start_method() == "forkserver"
    assert threads == (os.environ.get("POLARS_MAX_THREADS") or str(max(1, (os.cpu_count() or 1) // 2)))
    with cf.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        sizes = [f.result() for f in [pool.submit(pl.thread_pool_size) for _ in range(2)]]
    assert sizes == [int(threads)] * 2
    # Another pool size than the server's: spawned workers, their environment set for them.
    other = next(n for n in range(1, 64) if _worker.threads_per_worker(n) != threads) \
        if "POLARS_MAX_THREADS" not in os.environ else None
    if other is not None:
        ctx2, threads2 = _worker.worker_context(other)
        assert ctx2.get_start_method() == "spawn"
        with _worker.spawn_env(threads2), cf.ProcessPoolExecutor(1, mp_context=ctx2) as pool:
            assert pool.submit(pl.thread_pool_size).result() == int(threads2)


def test_forked_workers_give_the_serial_tables(tmp_path: Path) -> None:
    inputs = [str(REPO / "traces" / "fixtures" / name) for name in
              ("tests_mptcp-v1.pcap", "tests_mptcp-aa-v1.pcap", "tests_mptcp-tcprst.pcap")]
    settings = resolve_settings("minrtt,blest")
    serial = run_report(inputs, tmp_path / "serial", settings, jobs=1, show_progress=False)
    forked = run_report(inputs, tmp_path / "forked", settings, jobs=2, show_progress=False)
    assert (serial.n_ok, serial.n_partial, serial.n_failed) == (forked.n_ok, forked.n_partial, forked.n_failed)
    assert serial.n_ok + serial.n_partial == 3
    assert _worker.worker_context(2)[0].get_start_method() == "forkserver"
    assert_frame_equal(pl.read_parquet(tmp_path / "serial" / "metrics.parquet"),
                       pl.read_parquet(tmp_path / "forked" / "metrics.parquet"))


def _children_of(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def test_a_worker_that_dies_is_one_error_row_and_the_others_run(tmp_path: Path) -> None:
    """The worker process is killed (SIGKILL) in the middle of an input: that input is an error row
    saying the worker failed; the inputs after it get a new worker, the input in the report's own
    process runs on, and the batch finishes."""
    import signal
    from multiprocessing import forkserver

    from workbench.report import batch
    from workbench.report.jobs import discover

    lab = REPO / "traces" / "lab"
    inputs = [str(lab / "c07"), str(lab / "c01"), *(str(REPO / "traces" / "fixtures" / n) for n in
                                                     ("tests_mptcp-v1.pcap", "tests_mptcp-v0.pcap", "tests_mptcp-fclose.pcap"))]
    jobs, _ = discover(inputs)
    # Biggest first: c01 runs in this process, c07 (the next) in the worker, which dies during it.
    victim = next(j.id for j in jobs if j.id.endswith("c07"))
    results: dict[int, dict[str, Any]] = {}
    killed: list[int] = []

    def steps(job_id: str, done: int, total: int, label: str) -> None:
        if job_id == victim and not killed:
            server = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
            killed.extend(_children_of(server))
            for pid in killed:
                os.kill(pid, signal.SIGKILL)

    batch._run_processes(jobs, resolve_settings("minrtt"), 2, lambda i, r: results.__setitem__(i, r), steps)
    assert killed, "no step of the worker's input was seen while it ran"
    assert len(results) == len(jobs)
    by_id = {jobs[i].id: r for i, r in results.items()}
    assert by_id[victim]["status"] == "error" and "worker failed" in by_id[victim]["error"]
    assert all(r["status"] in ("ok", "partial") for k, r in by_id.items() if k != victim), \
        {k: r.get("error") for k, r in by_id.items()}
