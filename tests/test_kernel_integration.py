"""The kernel backend beside the model where users look: `compare --backend both` on a bundled lab
capture and `report --kernel` on a scenario put the real kernel's numbers next to the model's, with
their differences, and the report's trust table carries the kernel column."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests._kernel import require_lab
from tests._paths import REPO

pytestmark = pytest.mark.slow

SCENARIO = """
duration_s: 3
scheduler: upstream
paths:
  - {name: wifi, rate_mbps: 20, owd_ms: 10, buffer_packets: 60}
  - {name: lte, rate_mbps: 8, owd_ms: 30, buffer_packets: 100}
workload: {bulk: {stop_s: 2.5}}
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True,
                          timeout=900, cwd=REPO)


@pytest.mark.exclusive  # the kernel held to what was observed: alone on the machine
def test_compare_puts_model_and_kernel_side_by_side() -> None:
    require_lab()
    # c01 (8 s bulk), not c07: the kernel's own run-to-run spread on c07's 1 s, 4 MB transfer is
    # 17-29 Mbit/s here (slow-start overshoot, then RTO or not), too wide to say anything with one run
    run = REPO / "traces" / "lab" / "c01"
    r = _cli("compare", str(run / "client.pcap"), "--peer", str(run / "server.pcap"), "--path", "10.0.1.1=wifi",
             "--path", "10.0.2.1=lte", "--backend", "both")
    assert r.returncode == 0, r.stderr
    assert "kernel difference" in r.stdout and "goodput_mbps" in r.stdout
    from workbench.capture import load
    from workbench.compare import compare_capture
    cap = load(run / "client.pcap", peer=run / "server.pcap", path_names={"10.0.1.1": "wifi", "10.0.2.1": "lte"})
    c = compare_capture(cap, with_kernel=True)
    rows = {row["metric"]: row for row in c.table.iter_rows(named=True)}
    g = rows["goodput_mbps"]
    # the kernel replays the estimated timelines of a kernel capture: it should land near what was observed
    # (measured on c01: 33.2-35.7 vs 36.6 Mbit/s observed over five runs)
    assert g["kernel"] == pytest.approx(g["observed"], rel=0.2)
    assert g["kernel_error"] == pytest.approx((g["kernel"] - g["observed"]) / g["observed"])
    assert c.kernel is not None and c.kernel.backend == "kernel"
    assert abs(rows["share_wifi"]["kernel"] - rows["share_wifi"]["observed"]) < 0.05


def test_report_with_the_kernel_row(tmp_path: Path) -> None:
    require_lab()
    sc = tmp_path / "two.yaml"
    sc.write_text(SCENARIO)
    out = tmp_path / "rep"
    r = _cli("report", str(sc), "-o", str(out), "--schedulers", "upstream,minrtt", "--kernel", "--jobs", "1",
             "--no-progress")
    assert r.returncode == 0, r.stderr
    wide = pl.read_csv(next(out.glob("metrics_wide.csv")))
    kinds = dict(zip(wide["source"], wide["kind"], strict=False))
    assert kinds.get("kernel") == "kernel" and kinds.get("upstream") == "scheduler"
    k = wide.filter(pl.col("source") == "kernel")["goodput_mbps"][0]
    m = wide.filter(pl.col("source") == "upstream")["goodput_mbps"][0]
    assert 0 < k <= 28 * 1424 / 1514 and 0 < m <= 28 * 1424 / 1514
    page = next(p for p in out.glob("*.html") if p.name != "index.html").read_text()
    assert "model − kernel" in page  # the trust table carries the kernel column
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["kernel"] is True


def test_page_runs_the_kernel_beside_the_model() -> None:
    """The Replay tab's kernel checkbox: a "kernel" row in the results and a kernel column in the
    trust table, with the model's difference from it."""
    require_lab()
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)
    at.run()
    assert at.selectbox(key="bundled").value.startswith("lab/c07")
    at.multiselect(key="schedulers").set_value(["upstream"])
    assert not at.checkbox(key="with_kernel").disabled
    at.checkbox(key="with_kernel").check()
    at.button(key="run_replay").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    results = next(d.value for d in at.dataframe if "source" in d.value.columns and "role" in d.value.columns)
    roles = dict(zip(results["source"], results["role"], strict=False))
    assert roles.get("kernel") == "real kernel (upstream)"
    trust = next(d.value for d in at.dataframe if "model − kernel" in d.value.columns)
    assert trust["kernel"].notna().any()


@pytest.mark.exclusive  # a kernel run held to a goodput tolerance: alone on the machine (beside the fuzz
# campaigns of the parallel part it once measured -29 % where it measures +4 % alone)
def test_upload_capture_from_the_kernel_compares_and_reports(tmp_path: Path) -> None:
    """A real-kernel upload (the client sends) captured at both ends: `compare` replays it as an
    upload (measured here: goodput -2.5 to -6.5 %, shares within 3 points) and `report` replays it instead of
    refusing it."""
    require_lab()
    from workbench.backends import get_backend
    from workbench.capture import load
    from workbench.compare import compare_capture
    from workbench.experiment import FiniteWorkload, experiment_from_paths, two_way_path

    e = experiment_from_paths(
        [two_way_path("wifi", rate_bps=40e6, rate_up_bps=8e6, owd_ns=10e6, buffer_packets=60),
         two_way_path("lte", rate_bps=30e6, rate_up_bps=4e6, owd_ns=30e6, buffer_packets=80)],
        workload=FiniteWorkload(2_000_000), scheduler="upstream", direction="up", duration_ns=20_000_000_000)
    run = get_backend("kernel").run(e, workdir=tmp_path / "lab")
    if not run.counters.get("emulation_ok", True):
        # the delay line missed its own accuracy targets (a loaded machine): one re-run, as the fidelity
        # test does. Three runs on a quiet machine gave goodput errors of -2.5 to -6.5 %; a CI run once +16 %.
        run = get_backend("kernel").run(e, workdir=tmp_path / "lab-again")
    client, server = run.provenance["client_pcap"], run.provenance["server_pcap"]
    c = compare_capture(load(client, peer=server))
    rows = {row["metric"]: row for row in c.table.iter_rows(named=True)}
    assert c.settings["data_dir"] == "c2s" and c.experiment.transfers[0].direction == "up"
    assert abs(rows["goodput_mbps"]["error"]) <= 0.15
    shares = [r for m, r in rows.items() if m.startswith("share_")]
    assert len(shares) == 2 and all(abs(r["error"]) <= 0.05 for r in shares)
    out = tmp_path / "rep"
    r = _cli("report", f"{client}+{server}", "-o", str(out), "--schedulers", "upstream", "--jobs", "1",
             "--no-progress", "--no-baselines")
    assert r.returncode == 0, r.stderr
    wide = pl.read_csv(out / "metrics_wide.csv")
    assert set(wide["source"]) >= {"observed", "upstream"}


def test_tune_replays_an_upload_capture_as_compare_does(tmp_path: Path) -> None:
    """An upload made by the real kernel (the client sends): `tune`'s input for its capture pair is the
    experiment `compare` replays, an upload with the capture's stack, not the timelines turned around."""
    require_lab()
    from workbench.backends import get_backend
    from workbench.capture import load
    from workbench.compare import compare_capture
    from workbench.experiment import BulkWorkload, experiment_from_paths, stack_profile, two_way_path
    from workbench.tune.inputs import load_inputs

    paths = [two_way_path("wifi", rate_bps=20e6, owd_ns=10_000_000, buffer_bytes=75_000),
             two_way_path("lte", rate_bps=8e6, owd_ns=30_000_000, buffer_bytes=120_000)]
    e = experiment_from_paths(paths, workload=BulkWorkload(stop_ns=2_000_000_000), scheduler="upstream",
                              direction="up", stack=stack_profile("linux-upstream"), duration_ns=3_000_000_000)
    run = get_backend("kernel").run(e, workdir=tmp_path / "lab")
    client, server = Path(run.provenance["workdir"]) / "client.pcap", Path(run.provenance["workdir"]) / "server.pcap"
    tuned = load_inputs([f"{client}+{server}"])[0].experiment
    cmp = compare_capture(load(client, peer=server))
    assert cmp.experiment.transfers[0].direction == "up"
    assert tuned.transfers[0].direction == "up"
    assert tuned.links == cmp.experiment.links and tuned.stack == cmp.experiment.stack
