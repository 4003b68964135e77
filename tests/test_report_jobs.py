"""Input discovery of `workbench report`: what becomes one input, what is skipped, what is an error row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from _paths import SHARED_TRACES, needs

from workbench.report.jobs import discover, sniff

TRACES = Path(__file__).resolve().parents[1] / "traces"
HSR = SHARED_TRACES / "hsr-mptcp"


def test_lab_folder_pairs_client_and_server_and_skips_the_rest() -> None:
    jobs, skipped = discover([TRACES / "lab"])
    by_label = {j.label: j for j in jobs}
    c07 = by_label[str(TRACES / "lab" / "c07")]
    assert c07.kind == "capture"
    assert c07.files == (str(TRACES / "lab" / "c07" / "client.pcap"),)
    assert c07.peer == str(TRACES / "lab" / "c07" / "server.pcap")
    assert not any("server.pcap" in f for j in jobs for f in j.files)
    reasons = {Path(s.path).name: s.reason for s in skipped}
    assert "results.json" in reasons and "INDEX.md" in reasons
    assert reasons["rate2.csv"].startswith("rate trace")
    assert len({j.id for j in jobs}) == len(jobs)


def test_plus_pair_missing_files_and_unknown_named_file_are_error_rows(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    c = TRACES / "lab" / "c07"
    jobs, _ = discover([f"{c / 'client.pcap'}+{c / 'server.pcap'}", tmp_path / "nope.pcap", junk,
                        f"{c / 'client.pcap'}+{tmp_path / 'missing.pcap'}"])
    assert [j.kind for j in jobs] == ["capture", "invalid", "invalid", "invalid"]
    assert jobs[0].peer == str(c / "server.pcap")
    assert "no such file" in (jobs[1].error or "")
    assert "not a capture" in (jobs[2].error or "")
    assert "missing.pcap: no such file" in (jobs[3].error or "")


def test_same_file_named_twice_is_one_input() -> None:
    f = TRACES / "fixtures" / "tests_mptcp-v0.pcap"
    jobs, _ = discover([f, TRACES / "fixtures", f])
    assert sum(j.files == (str(f),) for j in jobs) == 1


def test_manifest_with_peer_and_path_names(tmp_path: Path) -> None:
    for n in ("client.pcap", "server.pcap"):
        shutil.copy(TRACES / "lab" / "c07" / n, tmp_path / n)
    (tmp_path / "runs.yaml").write_text(
        "- capture: client.pcap\n  peer: server.pcap\n  paths: {10.0.1.1: wifi, 10.0.2.1: lte}\n"
        "- capture: gone.pcap\n")
    assert sniff(tmp_path / "runs.yaml") == "manifest"
    jobs, _ = discover([tmp_path / "runs.yaml"])
    assert jobs[0].kind == "capture" and jobs[0].peer == str(tmp_path / "server.pcap")
    assert dict(jobs[0].path_names) == {"10.0.1.1": "wifi", "10.0.2.1": "lte"}
    assert jobs[1].kind == "invalid" and "gone.pcap" in (jobs[1].error or "")


def test_sniff_scenario_timelines_and_rate(tmp_path: Path) -> None:
    from workbench.timeline import PathTimeline, Timelines, save_timelines

    (tmp_path / "s.yaml").write_text("paths:\n  - {name: wifi, rate_mbps: 10, owd_ms: 10}\n")
    (tmp_path / "s.json").write_text(json.dumps({"paths": [{"name": "a", "rate_mbps": 5, "owd_ms": 5}]}))
    tl = Timelines([PathTimeline.constant("wifi", capacity_down_bps=1e7, owd_down_ns=10_000_000)])
    for ext in ("parquet", "csv", "json"):
        save_timelines(tl, tmp_path / f"t.{ext}")
    (tmp_path / "rate.csv").write_text("t_s,rate_mbps\n0,10\n1,20\n")
    (tmp_path / "other.json").write_text("[1, 2]")
    assert sniff(tmp_path / "s.yaml") == "scenario"
    assert sniff(tmp_path / "s.json") == "scenario"
    assert {sniff(tmp_path / f"t.{e}") for e in ("parquet", "csv", "json")} == {"timelines"}
    assert sniff(tmp_path / "rate.csv") == "rate"
    assert sniff(tmp_path / "other.json") is None
    assert sniff(TRACES / "fixtures" / "tests_mptcp-v0.pcap") == "capture"
    jobs, skipped = discover([tmp_path])
    assert sorted(j.kind for j in jobs) == ["scenario", "scenario", "timelines", "timelines", "timelines"]
    assert {Path(s.path).name for s in skipped} == {"rate.csv", "other.json"}
    jobs, _ = discover([tmp_path / "rate.csv"])  # named explicitly: an input
    assert jobs[0].kind == "rate"


@needs(HSR)
def test_csv_exports_grouped_per_connection(tmp_path: Path) -> None:
    files = sorted(HSR.glob("client.1529184872.*.csv")) + sorted(HSR.glob("client.1529184892.*.csv"))
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    jobs, skipped = discover([tmp_path])
    assert [len(j.files) for j in jobs] == [2, 2] and all(j.kind == "csv" for j in jobs)
    assert not skipped
    # A named export brings its partner file.
    jobs, _ = discover([tmp_path / files[0].name])
    assert len(jobs) == 1 and len(jobs[0].files) == 2


def test_output_folder_inside_an_input_folder_is_not_searched(tmp_path: Path) -> None:
    shutil.copy(TRACES / "fixtures" / "tests_mptcp-v0.pcap", tmp_path / "a.pcap")
    out = tmp_path / "report"
    (out / "assets").mkdir(parents=True)
    (out / "metrics.parquet").write_bytes(b"PAR1")
    (out / "old.pcap").write_bytes(b"x")
    (tmp_path / "table.parquet").write_bytes(b"PAR1 not ours")
    jobs, skipped = discover([tmp_path], exclude=[out])
    assert [Path(j.files[0]).name for j in jobs] == ["a.pcap"]
    assert [Path(s.path).name for s in skipped] == ["table.parquet"]  # a parquet that is not timelines
