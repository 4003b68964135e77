"""``workbench tune`` as the lead registers it (``app.command("tune")(_user_errors(tune_command))``):
a small run writes every output, a second run continues the study, and bad usage is one line with
exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from workbench.cli import _user_errors
from workbench.tune.cli import tune_command


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """workbench"""

    app.command("tune")(_user_errors(tune_command))
    return app


def _scenario(path: Path) -> Path:
    path.write_text(json.dumps({
        "duration_s": 0.5, "workload": "bulk",
        "paths": [{"name": "wifi", "rate_mbps": 20, "owd_ms": 10, "buffer_packets": 50},
                  {"name": "lte", "rate_mbps": 10, "owd_ms": 60, "buffer_packets": 200}]}))
    return path


def test_run_writes_outputs_and_a_second_run_continues(tmp_path: Path) -> None:
    inp = _scenario(tmp_path / "s.json")
    out = tmp_path / "out"
    base = ["tune", str(inp), "-s", "stms_a", "--tune", "adjust_interval_ms", "--tune", "ewma_weight",
            "-o", str(out), "--no-progress", "--no-html", "--json"]
    r = CliRunner().invoke(_app(), [*base, "-n", "3", "--no-evaluate"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["trials"]["finished"] == 3 and doc["worker"]["finished_here"] == 3
    # the defaults (inside the declared ranges) are trial 0: the baseline tuning must beat
    assert json.loads((out / "best_params.json").read_text())["trials"]["complete"] == 3
    for name in ("best_params.json", "trials.csv", "trials.parquet", "study.db"):
        assert (out / name).is_file()
    # same command, more trials: continues the same study (default name from scheduler/objective/inputs)
    r = CliRunner().invoke(_app(), [*base, "-n", "5"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["trials"]["finished"] == 5 and doc["worker"]["finished_here"] == 2
    assert doc["best"]["param_line"].startswith("--scheduler stms_a --param adjust_interval_ms=")
    assert "evaluation" in doc and (out / "evaluation.csv").is_file()
    # human output: the paste line and the tuned-vs-default table
    r = CliRunner().invoke(_app(), [*base[:-1], "-n", "5", "--no-evaluate"])
    assert r.exit_code == 0 and "--param adjust_interval_ms=" in r.stdout


@pytest.mark.parametrize(("extra", "message"), [
    (["-s", "nope"], "unknown scheduler"),
    (["-s", "stms_a", "--space", "adjust_interval_ms=9:1"], "LOW < HIGH"),
    (["-s", "stms_a", "--tune", "gap"], "no parameter 'gap'"),
    (["-s", "stms_a", "--objective", "completion"], "completion time needs a finite workload"),
    (["-s", "stms_a", "--objective", "speed"], "unknown objective"),
    (["-s", "stms_a", "--aggregate", "median"], "mean or worst"),
    (["-s", "stms_a", "--storage", "nonsense"], "storage URL"),
])
def test_bad_usage_is_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    inp = _scenario(tmp_path / "s.json")
    r = CliRunner().invoke(_app(), ["tune", str(inp), *extra, "-o", str(tmp_path / "o"), "--no-progress"])
    assert r.exit_code == 2, r.output
    assert message in r.output and r.output.strip().count("\n") <= 1


def test_missing_input_is_one_line(tmp_path: Path) -> None:
    r = CliRunner().invoke(_app(), ["tune", str(tmp_path / "nothing.pcap"), "-s", "stms_a", "--no-progress",
                                    "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "no such file" in r.output
