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
