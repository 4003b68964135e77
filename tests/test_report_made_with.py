"""The report's trust table takes as its reference the scheduler the input says made it (a lab run's
results.json ``system.mptcp_scheduler``, a scenario's ``scheduler:``), and says when nothing does and
Linux's default is assumed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workbench.report.figures import page_figure_data
from workbench.report.html import _trust_table
from workbench.report.made_with import MadeWith, from_lab_run

ROOT = Path(__file__).resolve().parents[1]
C07 = ROOT / "traces" / "lab" / "c07"

ROWS = [{"source": "observed", "kind": "observed", "delivered_bytes": 10, "goodput_mbps": 40.0, "ooo_p95_ms": 96.0},
        {"source": "upstream", "kind": "scheduler", "delivered_bytes": 10, "goodput_mbps": 38.0, "ooo_p95_ms": 22.0},
        {"source": "roundrobin", "kind": "scheduler", "delivered_bytes": 10, "goodput_mbps": 30.0,
         "ooo_p95_ms": 120.0}]


def _results_json(folder: Path, doc: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def test_a_lab_run_says_which_scheduler_made_its_capture(tmp_path: Path) -> None:
    # The bundled lab runs ran upstream Linux's default scheduler.
    assert from_lab_run(C07) == MadeWith("upstream", "results.json: system.mptcp_scheduler = default")
    said = from_lab_run(_results_json(tmp_path / "rr", {"system": {"mptcp_scheduler": "bpf_rr"}}))
    assert said == MadeWith("roundrobin", "results.json: system.mptcp_scheduler = bpf_rr")
    assert from_lab_run(_results_json(tmp_path / "blest", {"system": {"mptcp_scheduler": "blest"}})).scheduler == "blest"
    # Saying nothing is not an error: no file, no such field, not JSON.
    assert from_lab_run(tmp_path / "none") is None
    assert from_lab_run(_results_json(tmp_path / "nofield", {"system": {"kernel": "6.1"}})) is None
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("{not json")
    assert from_lab_run(tmp_path / "bad") is None


def test_trust_table_compares_the_captures_own_scheduler_and_says_where_that_came_from() -> None:
    data = page_figure_data([], ROWS, None, finite=False)
    html = _trust_table(data, "roundrobin", "results.json: system.mptcp_scheduler = bpf_rr")
    assert "<b>roundrobin</b>" in html and "results.json: system.mptcp_scheduler = bpf_rr" in html
    assert "assumed to have made the capture" not in html
    assert '<td class="num">-10</td><td class="num">-25.0 %</td>' in html    # 30 - 40 Mbit/s
    assert '<td class="num">24</td><td class="num">+25.0 %</td>' in html     # 120 - 96 ms
    assert '<td class="num">-2</td>' not in html                             # not upstream's 38 - 40


def test_trust_table_says_when_the_scheduler_is_assumed() -> None:
    data = page_figure_data([], ROWS, None, finite=False)
    html = _trust_table(data)                                   # the input said nothing
    assert "<b>upstream</b>" in html and "assumed" in html and "does not say" in html
    assert '<td class="num">-2</td><td class="num">-5.0 %</td>' in html      # 38 - 40 Mbit/s
    # Made with a scheduler that was not replayed: one line saying so, no made-up comparison.
    line = _trust_table(data, "blest", "results.json: system.mptcp_scheduler = blest")
    assert "<table>" not in line and "<b>blest</b>" in line and "not replayed" in line


def test_the_kernel_is_compared_with_the_model_of_the_scheduler_it_ran() -> None:
    rows = [*ROWS, {"source": "kernel", "kind": "kernel", "delivered_bytes": 10, "goodput_mbps": 37.0,
                    "ooo_p95_ms": 30.0}]
    html = _trust_table(page_figure_data([], rows, None, finite=False), "roundrobin", "scenario")
    assert "model (roundrobin) − observed" in html and "model (upstream) − kernel" in html
    assert "kernel − observed" not in html                       # the kernel did not run roundrobin
    assert '<td class="num">1</td><td class="num">+2.7 %</td>' in html       # upstream 38 vs kernel 37


@pytest.mark.slow
def test_report_reads_the_lab_run_beside_the_capture(tmp_path: Path) -> None:
    """End to end: a lab run whose results.json names bpf_rr is reported against roundrobin's replay;
    the same capture without results.json against upstream's, said to be assumed."""
    from workbench.report.html import input_page
    from workbench.report.jobs import discover
    from workbench.report.pipeline import ReportSettings, run_job

    settings = ReportSettings(schedulers=("upstream", "roundrobin"), baselines=False)
    pages = {}
    for name, doc in (("rr", {"system": {"mptcp_scheduler": "bpf_rr"}}), ("plain", None)):
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(C07 / "client.pcap", folder / "client.pcap")
        if doc is not None:
            _results_json(folder, doc)
        jobs, _ = discover([folder / "client.pcap"])
        result = run_job(jobs[0], settings)
        assert result["status"] == "ok", result["error"]
        pages[name] = (result, input_page(result, []))
    rr, rr_page = pages["rr"]
    assert rr["made_with"] == {"scheduler": "roundrobin", "source": "results.json: system.mptcp_scheduler = bpf_rr"}
    assert "<b>roundrobin</b>" in rr_page and "assumed to have made the capture" not in rr_page
    table = {m["key"]: m["values"] for m in rr["figures"]["table"]}
    gp = table["goodput_mbps"]
    from workbench.report.html import fmt

    assert f'<td class="num">{fmt(gp["roundrobin"] - gp["observed"])}</td>' in rr_page
    plain, plain_page = pages["plain"]
    assert plain["made_with"] == {"scheduler": "upstream", "source": None}
    assert "<b>upstream</b>" in plain_page and "assumed to have made the capture" in plain_page


def test_a_scenario_names_its_scheduler(tmp_path: Path) -> None:
    from workbench.report.jobs import discover
    from workbench.report.pipeline import ReportSettings, run_job

    sc = tmp_path / "two.yaml"
    sc.write_text("paths:\n  - {name: a, rate_mbps: 10, owd_ms: 10}\n  - {name: b, rate_mbps: 5, owd_ms: 30}\n"
                  "scheduler: minrtt\nworkload: {finite: {bytes: 200000}}\nduration_s: 5\n")
    jobs, _ = discover([sc])
    result = run_job(jobs[0], ReportSettings(schedulers=("minrtt",), baselines=False))
    assert result["status"] == "ok", result["error"]
    assert result["made_with"] == {"scheduler": "minrtt", "source": "the scenario's scheduler: minrtt"}
