"""`workbench report` end to end: a small batch with a corrupt capture, metrics tables, manifest,
determinism (serial vs parallel processes, two runs), exit codes and atomic writes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from workbench.report import resolve_settings, run_report

TRACES = Path(__file__).resolve().parents[1] / "traces"
C07 = TRACES / "lab" / "c07"
FIXTURE = TRACES / "fixtures" / "tests_mptcp-v0.pcap"
SCHEDULERS = "minrtt,upstream,roundrobin"


def _cli() -> typer.Typer:
    """The command as the lead registers it in workbench/cli.py."""
    from workbench.cli import _user_errors
    from workbench.report.cli import report_command

    app = typer.Typer()
    app.command("report")(_user_errors(report_command))

    @app.command("other")
    def _other() -> None:  # a second command so typer keeps "report" as a subcommand
        pass

    return app


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _corrupt(tmp: Path) -> Path:
    bad = tmp / "in" / "broken.pcap"
    bad.parent.mkdir()
    raw = (C07 / "client.pcap").read_bytes()
    bad.write_bytes(raw[:24] + b"\x00\xff" * 40)  # a pcap header followed by garbage
    return bad


def _scenario(tmp: Path) -> Path:
    s = tmp / "in" / "two-paths.yaml"
    s.write_text("duration_s: 1.0\npaths:\n  - {name: wifi, rate_mbps: 8, owd_ms: 10, buffer_packets: 40}\n"
                 "  - {name: lte, rate_mbps: 4, owd_ms: 30, buffer_packets: 100}\n")
    return s


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    tmp = tmp_path_factory.mktemp("report")
    bad = _corrupt(tmp)
    scen = _scenario(tmp)
    out = tmp / "out"
    res = CliRunner().invoke(_cli(), ["report", str(C07), str(FIXTURE), str(bad), str(scen),
                                      str(tmp / "missing.pcap"), "-o", str(out), "--schedulers", SCHEDULERS,
                                      "--param", "roundrobin.num_segments=2", "--jobs", "1", "--no-progress"])
    return tmp, out, res


@pytest.mark.slow
def test_report_completes_with_error_rows(report: tuple[Path, Path, object]) -> None:
    tmp, out, res = report
    assert res.exit_code == 1, res.output  # some inputs failed, the index is still complete
    index = (out / "index.html").read_text()
    assert "broken.pcap" in index and "missing.pcap: no such file" in index
    man = json.loads((out / "manifest.json").read_text())
    by_label = {i["label"]: i for i in man["inputs"]}
    broken = by_label[str(tmp / "in" / "broken.pcap")]
    assert broken["status"] == "error" and broken["error"].startswith(str(tmp / "in" / "broken.pcap"))
    assert broken["error"] in index and "\n" not in broken["error"]
    ok = [i for i in man["inputs"] if i["status"] == "ok"]
    assert {i["label"] for i in ok} == {str(C07), str(FIXTURE), str(tmp / "in" / "two-paths.yaml")}
    for i in ok:
        page = out / i["page"]
        assert page.is_file() and 'src="assets/plotly.min.js"' in page.read_text()
    assert (out / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    assert not list(out.glob(".*.tmp")) and not list(out.glob("*.tmp"))  # atomic writes left nothing behind


@pytest.mark.slow
def test_metrics_tables_have_observed_scheduler_and_baseline_rows(report: tuple[Path, Path, object]) -> None:
    """metrics.csv/.parquet are tidy (input x source x path x metric, with units); metrics_wide.csv has
    one row per input x source with per-path columns by the path's place, not by address."""
    _, out, _ = report
    t = pl.read_parquet(out / "metrics.parquet")
    csv = pl.read_csv(out / "metrics.csv", infer_schema_length=None, schema_overrides={"params": pl.String})
    assert csv.height == t.height and csv.columns == t.columns
    assert t.columns == ["input", "input_id", "source", "kind", "params", "seed", "path", "metric", "value", "unit"]
    c07 = t.filter(pl.col("input") == str(C07))
    assert c07["source"].unique(maintain_order=True).to_list() == [
        "observed", "minrtt", "upstream", "roundrobin", "baseline:10.0.1.1", "baseline:10.0.2.1"]
    # Every number of `summarize` is there, split into metric and path (checked against the capture's keys).
    from workbench.capture import load
    from workbench.metrics import summarize
    cap = load(C07 / "client.pcap", peer=C07 / "server.pcap")
    want = {k: v for k, v in summarize(cap.events, conn=cap.main_connection).items()
            if isinstance(v, int | float) and not isinstance(v, bool) and v is not None and k != "conn"}
    obs = c07.filter(pl.col("source") == "observed")
    have = {(m if not p else f"{m}_{p}" if not m.endswith(("_c2s", "_s2c")) else f"{m[:-4]}_{p}{m[-4:]}"): v
            for p, m, v in obs.select("path", "metric", "value").iter_rows()}
    for k, v in want.items():
        assert have[k] == pytest.approx(float(v)), k
    one = {(r["metric"], r["path"]): r for r in obs.iter_rows(named=True)}
    assert one[("delivered_bytes", "")]["value"] == 4_000_000 and one[("delivered_bytes", "")]["unit"] == "bytes"
    assert one[("goodput_mbps", "")]["value"] == pytest.approx(31.2, rel=0.02)
    assert one[("goodput_mbps", "")]["unit"] == "Mbit/s" and one[("ooo_p95_ms", "")]["unit"] == "ms"
    assert one[("share", "10.0.1.1")]["unit"] == "fraction"
    rr = c07.filter(pl.col("source") == "roundrobin")
    assert "num_segments=2" in rr["params"][0]
    gp = c07.filter((pl.col("kind") == "scheduler") & (pl.col("metric") == "goodput_mbps"))
    assert gp.height == 3 and gp["value"].min() > 10
    ab = c07.filter((pl.col("kind") == "scheduler") & (pl.col("metric") == "aggregation_benefit"))
    assert ab.height == 3
    scen = t.filter(pl.col("input").str.ends_with("two-paths.yaml"))
    assert "observed" not in scen["source"].to_list() and scen["source"].n_unique() == 3 + 2
    wide = pl.read_csv(out / "metrics_wide.csv", infer_schema_length=None)
    assert not [c for c in wide.columns if "10.0." in c], "no column named after an address"
    w07 = wide.filter(pl.col("input") == str(C07))
    assert w07.height == 6 and w07["path1_name"][0] == "10.0.1.1" and w07["path2_name"][0] == "10.0.2.1"
    assert w07.filter(pl.col("source") == "observed")["share_path1"][0] == pytest.approx(
        one[("share", "10.0.1.1")]["value"])


@pytest.mark.slow
def test_manifest_pins_inputs_settings_and_versions(report: tuple[Path, Path, object]) -> None:
    tmp, out, _ = report
    man = json.loads((out / "manifest.json").read_text())
    files = {f["path"]: f["sha256"] for i in man["inputs"] for f in i["files"]}
    for p in (C07 / "client.pcap", C07 / "server.pcap", FIXTURE, tmp / "in" / "broken.pcap",
              tmp / "in" / "two-paths.yaml"):
        assert files[str(p)] == _sha(p)
    assert man["settings"]["schedulers"] == SCHEDULERS.split(",")
    assert man["scheduler_params"]["roundrobin"]["num_segments"] == 2
    assert man["seeds"] == {"replay": 0}
    cmd = man["command_line"]
    assert cmd[:2] == ["workbench", "report"] and str(C07) in cmd and "--seed" in cmd
    assert cmd[cmd.index("--param") + 1] == "roundrobin.num_segments=2"
    assert man["packages"]["polars"] and man["packages"]["workbench"]
    c07 = next(i for i in man["inputs"] if i["label"] == str(C07))
    assert c07["workload"].startswith("finite 4000000")


@pytest.mark.slow
def test_same_inputs_and_seed_give_identical_tables_serial_and_parallel(tmp_path: Path) -> None:
    settings = resolve_settings("minrtt,redundant", seed=7)
    inputs = [str(C07), str(FIXTURE)]
    a = run_report(inputs, tmp_path / "a", settings, jobs=1, show_progress=False)
    b = run_report(inputs, tmp_path / "b", settings, jobs=2, show_progress=False)
    assert a.exit_code == b.exit_code == 0
    ta, tb = pl.read_parquet(tmp_path / "a" / "metrics.parquet"), pl.read_parquet(tmp_path / "b" / "metrics.parquet")
    assert ta.select("input", "source").unique().height == 2 * (1 + 2) + 2 + 1 and ta.equals(tb)
    assert (tmp_path / "a" / "metrics.csv").read_bytes() == (tmp_path / "b" / "metrics.csv").read_bytes()
    assert set(ta["seed"].to_list()) == {7}
    # Pages are deterministic too (fixed figure ids, no timestamps).
    for r in a.results:
        assert (tmp_path / "a" / r["page"]).read_bytes() == (tmp_path / "b" / r["page"]).read_bytes()


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    app, runner = _cli(), CliRunner()
    r = runner.invoke(app, ["report", str(FIXTURE), "-o", str(tmp_path / "o"), "--schedulers", "nosuch"])
    assert r.exit_code == 2 and "unknown scheduler" in r.output
    r = runner.invoke(app, ["report", str(FIXTURE), "-o", str(tmp_path / "o"), "--schedulers", "minrtt",
                            "--param", "minrtt=3"])
    assert r.exit_code == 2 and "SCHEDULER.NAME=VALUE" in r.output
    r = runner.invoke(app, ["report", str(FIXTURE), "-o", str(tmp_path / "o"), "--schedulers", "minrtt",
                            "--param", "minrtt.no_such_knob=1"])
    assert r.exit_code == 2
    (tmp_path / "file").write_text("x")
    r = runner.invoke(app, ["report", str(FIXTURE), "-o", str(tmp_path / "file")])
    assert r.exit_code == 2 and "not a folder" in r.output
    r = runner.invoke(app, ["report", str(FIXTURE), "-o", str(tmp_path / "o"), "--executor", "dask"])
    assert r.exit_code == 2 and "--address" in r.output
    assert not (tmp_path / "o" / "index.html").exists()


def test_handshake_only_capture_is_analysed_without_replay(tmp_path: Path) -> None:
    out = tmp_path / "o"
    o = run_report([TRACES / "fixtures" / "tests_mptcp-tcprst.pcap"], out, resolve_settings("minrtt"), jobs=1,
                   show_progress=False)
    assert o.exit_code == 0 and o.n_partial == 1
    r = o.results[0]
    assert r["status"] == "partial" and "nothing to replay" in r["note"]
    assert (out / r["page"]).is_file()
    assert pl.read_parquet(out / "metrics.parquet")["source"].unique().to_list() == ["observed"]


def test_atomic_write_leaves_old_file_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from workbench.report import batch

    target = tmp_path / "page.html"
    target.write_text("old, complete")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        batch.write_atomic(target, "new" * 1000)
    assert target.read_text() == "old, complete"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_interrupted_report_writes_no_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.report import batch

    real = batch.run_job
    calls = []

    def flaky(spec, settings, progress=None):  # type: ignore[no-untyped-def]
        calls.append(spec.id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(spec, settings, progress)

    monkeypatch.setattr(batch, "run_job", flaky)
    out = tmp_path / "o"
    inputs = [str(FIXTURE), str(TRACES / "fixtures" / "tests_mptcp-aa-v1.pcap")]
    with pytest.raises(KeyboardInterrupt):
        run_report(inputs, out, resolve_settings("minrtt"), jobs=1, show_progress=False)
    # The first input's page was written, but into the run's staging folder, which the interrupted
    # run removed: pages of an unfinished report are absent (workbench.report._folder).
    assert not list(out.glob("*.html")) and not list(out.glob(".unfinished-report-*"))
    assert not (out / "index.html").exists() and not (out / "manifest.json").exists()
    assert not (out / "metrics.csv").exists() and not list(out.glob(".*.tmp"))
