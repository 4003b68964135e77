"""The dask executor: the same job function submitted to a running dask.distributed cluster (here a
LocalCluster with one worker process started by the test) gives the same tables as a local run."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from workbench.report import resolve_settings, run_report

ROOT = Path(__file__).resolve().parents[1]
INPUTS = [str(ROOT / "traces" / "lab" / "c07"), str(ROOT / "traces" / "fixtures" / "tests_mptcp-v0.pcap")]

pytestmark = pytest.mark.slow


def _cli() -> typer.Typer:
    from workbench.cli import _user_errors
    from workbench.report.cli import report_command

    app = typer.Typer()
    app.command("report")(_user_errors(report_command))

    @app.command("other")
    def _other() -> None:
        pass

    return app


def test_dask_executor_matches_local_run(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as cluster:
        res = CliRunner().invoke(_cli(), ["report", *INPUTS, "-o", str(tmp_path / "dask"), "--schedulers",
                                          "minrtt,upstream", "--executor", "dask", "--address",
                                          cluster.scheduler_address, "--no-progress"])
    assert res.exit_code == 0, res.output
    local = run_report(INPUTS, tmp_path / "local", resolve_settings("minrtt,upstream"), jobs=1, show_progress=False)
    assert local.exit_code == 0
    a = pl.read_parquet(tmp_path / "dask" / "metrics.parquet")
    b = pl.read_parquet(tmp_path / "local" / "metrics.parquet")
    assert a.select("input", "source").unique().height == 2 * (1 + 2) + 2 + 1 and a.equals(b)  # tidy rows
    man = json.loads((tmp_path / "dask" / "manifest.json").read_text())
    assert man["executor"]["kind"] == "dask" and man["executor"]["address"].startswith("tcp://")
    assert man["packages"]["distributed"]
    assert [i["status"] for i in man["inputs"]] == ["ok", "ok"]


def test_unreachable_dask_scheduler_is_a_usage_error(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    res = CliRunner().invoke(_cli(), ["report", INPUTS[1], "-o", str(tmp_path / "o"), "--schedulers", "minrtt",
                                      "--executor", "dask", "--address", "tcp://127.0.0.1:9", "--no-progress"])
    assert res.exit_code == 2 and "cannot reach the dask scheduler" in res.output
