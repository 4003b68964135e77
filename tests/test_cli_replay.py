"""`workbench replay` and `workbench schedulers`: a replay end to end on a small scenario (table,
parquet with the PacketEvents/Samples schemas, pcap, JSON), saved timelines as input, the documented
example scheduler through the real command line, and one-line errors that leave no files behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from workbench.capture.schema import PACKET_EVENTS, SAMPLES
from workbench.cli_replay import parse_workload, register
from workbench.errors import InputError
from workbench.experiment import BulkWorkload, BurstsWorkload, FiniteWorkload
from workbench.schedulers import available

ROOT = Path(__file__).resolve().parents[1]
WORKBENCH = Path(sys.executable).with_name("workbench")

SCENARIO = """\
duration_s: 5
seed: 3
scheduler: minrtt
paths:
  - {name: wifi, rate_mbps: 20, owd_ms: 10, buffer_packets: 50, loss: 0.002}
  - {name: lte, rate_mbps: 10, owd_ms: 30, buffer_bytes: 150000}
workload: {finite: {bytes: 600000}}
"""


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """test app"""

    register(app)
    return app


def invoke(*args: str | Path) -> object:
    return CliRunner().invoke(_app(), [str(a) for a in args])


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    p = tmp_path / "two_paths.yaml"
    p.write_text(SCENARIO)
    return p


def _cli() -> list[str]:
    """The installed console script once workbench/cli.py registers the commands; until then the same
    app with them added (`python -m workbench.cli_replay`)."""
    from workbench.cli import app

    if any(c.name == "replay" for c in app.registered_commands):
        return [str(WORKBENCH)]
    return [sys.executable, "-m", "workbench.cli_replay"]


def run_cli(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_DEBUG"}
    return subprocess.run([*_cli(), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_replay_end_to_end(scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "run1"
    r = invoke("replay", scenario, "--out", out, "--pcap")
    assert r.exit_code == 0, r.output
    text = r.stdout
    for needle in ("MinRTT(opportunistic=True", "goodput Mbit/s", "OOO delay p95 ms", "completion s", "reinjections",
                   "wifi", "lte", "share", "wrote packet_events.parquet"):
        assert needle in text
    assert sorted(p.name for p in out.iterdir()) == ["packet_events.parquet", "replay.pcap", "samples.parquet",
                                                     "summary.json"]
    events = pl.read_parquet(out / "packet_events.parquet")
    assert dict(events.schema) == PACKET_EVENTS
    samples = pl.read_parquet(out / "samples.parquet")
    assert dict(samples.schema) == SAMPLES and samples.height > 0
    rcv = events.filter((pl.col("point") == "rcv") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    assert set(rcv["path"].unique()) == {"wifi", "lte"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"]["completed"] and summary["engine"]["delivered_bytes"] == 600_000
    assert summary["metrics"]["goodput_mbps"] > 5
    assert (out / "replay.pcap").read_bytes()[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging leftovers


def test_replay_json_with_overrides(scenario: Path) -> None:
    r = invoke("replay", scenario, "-s", "roundrobin", "-p", "num_segments=2", "--workload", "finite:300KB",
               "--seed", "9", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["scheduler"] == "RoundRobin(num_segments=2, cwnd_limited=True)"
    assert doc["seed"] == 9 and doc["engine"]["delivered_bytes"] == 300_000
    assert doc["metrics"]["share_wifi"] + doc["metrics"]["share_lte"] == pytest.approx(1.0)
    assert "files" not in doc


def test_replay_into_an_existing_folder_replaces_files(scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "existing"
    out.mkdir()
    (out / "packet_events.parquet").write_text("old")
    (out / "keep.txt").write_text("mine")
    r = invoke("replay", scenario, "--out", out, "--workload", "finite:100000")
    assert r.exit_code == 0, r.output
    assert pl.read_parquet(out / "packet_events.parquet").height > 0
    assert (out / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt", "packet_events.parquet", "samples.parquet",
                                                     "summary.json"]


def test_replay_saved_timelines(scenario: Path, tmp_path: Path) -> None:
    from workbench.timeline import save_timelines, scenario_timelines

    tl = save_timelines(scenario_timelines(__import__("yaml").safe_load(SCENARIO), tmp_path), tmp_path / "paths.parquet")
    r = invoke("replay", tl, "-s", "upstream", "--duration", "2s", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "timelines" and doc["paths"] == ["wifi", "lte"]
    assert doc["engine"]["sim_ns"] == 2_000_000_000 and doc["metrics"]["goodput_mbps"] > 5
    r = invoke("replay", tl, "-s", "minrtt", "--duration", "1s", "--workload", "bulk")
    assert r.exit_code == 0 and "ran to the time cap" in r.stdout
    r = invoke("replay", tl)
    assert r.exit_code == 2 and "timelines name no scheduler; give --scheduler NAME" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["-s", "nope"], "error: unknown scheduler 'nope'; available: "),
    (["-s", "minrtt", "-p", "lambda=3"], "error: scheduler 'minrtt' has no parameter(s) lambda"),
    (["-s", "roundrobin", "-p", "num_segments=100"], "error: parameter num_segments=100 outside [1, 64]"),
    (["-s", "minrtt", "-p", "opportunistic"], "error: --param 'opportunistic': expected NAME=VALUE"),
    (["-p", "opportunistic=false"], "error: --param goes with --scheduler"),
    (["-s", "nomodule_abc:Sched"], "error: 'nomodule_abc:Sched': no module named 'nomodule_abc'"),
    (["--workload", "finite:lots"], "error: --workload 'finite:lots': finite: 'lots' is not a size"),
    (["--workload", "bursts:ten"], "error: --workload 'bursts:ten': bursts: 'ten' is not SEGMENTS"),
    (["--duration", "soon"], "error: not a duration: 'soon'"),
])
def test_bad_options_are_one_line_errors_and_write_nothing(scenario: Path, tmp_path: Path, args: list[str],
                                                           message: str) -> None:
    out = tmp_path / "never"
    r = invoke("replay", scenario, *args, "--out", out, "--pcap")
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(message) and r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == ""
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(("content", "name", "message"), [
    ("paths: [\n", "broken.yaml", "not valid YAML"),
    ("paths: 3\n", "bad_paths.yaml", "paths:"),
    ("paths:\n  - {name: a, rate_mbps: 10, owd_ms: 10}\nscheduler: nope\n", "bad_sched.yaml", "scheduler: unknown "
                                                                                                "scheduler 'nope'"),
    ("paths:\n  - {name: a, rate_mbps: 10, owd_ms: 10}\n", "no_sched.yaml", "names no scheduler"),
    ("paths:\n  - {name: a, rate_mbps: 10, owd_ms: 10}\nscheduler: minrtt\nworkload: bulk\n", "endless.yaml",
     "this workload never ends by itself: give --duration"),
    ("", "empty.yaml", "empty file"),
])
def test_bad_scenarios_are_one_line_errors(tmp_path: Path, content: str, name: str, message: str) -> None:
    p = tmp_path / name
    p.write_text(content)
    out = tmp_path / "never"
    r = invoke("replay", p, "--out", out)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: ") and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not out.exists()


def test_inputs_replay_does_not_take(tmp_path: Path, scenario: Path) -> None:
    r = invoke("replay", tmp_path / "missing.yaml", "-s", "minrtt")
    assert r.exit_code == 2 and "missing.yaml: no such file" in r.stderr
    pcap = ROOT / "traces" / "lab" / "c07" / "client.pcap"  # bundled: always there
    r = invoke("replay", pcap, "-s", "minrtt")
    assert r.exit_code == 2 and "is a capture file; replay takes a scenario file or saved timelines" in r.stderr
    r = invoke("replay", scenario, "--pcap")
    assert r.exit_code == 2 and "--pcap writes into the --out folder" in r.stderr
    f = tmp_path / "a_file"
    f.write_text("x")
    r = invoke("replay", scenario, "--out", f)
    assert r.exit_code == 2 and "--out must be a folder" in r.stderr


def test_schedulers_table_and_json() -> None:
    r = invoke("schedulers")
    assert r.exit_code == 0, r.output
    for name in available():
        assert name in r.stdout
    assert "num_segments=1 [1..64] log" in r.stdout and "opportunistic=true {true,false}" in r.stdout
    assert "mptcp_rr.c" in r.stdout
    r = invoke("schedulers", "--json")
    doc = json.loads(r.stdout)
    assert [d["name"] for d in doc] == available()
    assert all({"description", "source", "params", "class", "layer", "queues_beyond_cwnd"} <= set(d) for d in doc)


def test_parse_workload() -> None:
    assert parse_workload("bulk") == BulkWorkload()
    assert parse_workload("bulk:3") == BulkWorkload(stop_ns=3_000_000_000)
    assert parse_workload("finite:4MB") == FiniteWorkload(4_000_000)
    assert parse_workload("finite:512KiB") == FiniteWorkload(512 * 1024)
    assert parse_workload("bursts:10:100") == BurstsWorkload(segments=10, idle_ns=100_000_000, n_bursts=10)
    assert parse_workload("Bursts:5:2.5:3") == BurstsWorkload(segments=5, idle_ns=2_500_000, n_bursts=3)
    for bad in ("", "bulk:x", "finite", "finite:0", "finite:-1", "bursts:0:10", "bursts:a:b", "trace:x"):
        with pytest.raises(InputError):
            parse_workload(bad)


# ------------------------------------------------------------------ the real command line (subprocess)

@pytest.mark.slow
def test_example_scheduler_through_the_real_cli(tmp_path: Path) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text(SCENARIO)
    out = tmp_path / "ex"
    r = run_cli("replay", sc, "--scheduler", "examples/my_scheduler.py:MyScheduler", "--param", "max_burst=8",
                "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["scheduler"] == "MyScheduler(max_burst=8)"
    assert doc["engine"]["completed"] and doc["engine"]["delivered_bytes"] == 600_000
    assert dict(pl.read_parquet(out / "packet_events.parquet").schema) == PACKET_EVENTS
    r = run_cli("replay", sc, "--scheduler", "examples/my_scheduler.py:MyScheduler", "--param", "max_burst=0")
    assert r.returncode == 2 and r.stderr == "error: parameter max_burst=0 outside [1, 64]\n"
    assert r.stdout == ""
