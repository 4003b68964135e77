"""The capture -> timelines -> replay loop on every lab capture: observed vs replayed goodput, per-path
share and OOO delay (issue 4 goals: goodput within 10 %, OOO-delay median within 25 %)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import SHARED_TRACES, require

from workbench.capture import load
from workbench.compare import compare_capture

LAB = SHARED_TRACES / "lab"
RUNS = ["c01", "c03", "c05", "c07", "v01", "v05"]
require(*(LAB / run for run in RUNS))
PATHS = {"10.0.1.1": "wifi", "10.0.2.1": "lte"}


# Known model-vs-kernel gaps (issue 13, fidelity), strict: each fails the day the model agrees. Since the
# upstream scheduler weighs a subflow's queued memory as the kernel's sk_wmem_queued does (each sent skb's
# overhead on top of its payload: docs/MODEL.md §6), c07's OOO p95 agrees (41.6 vs 37.1 ms; was 66.9) and
# c01's moved from one side to the other (p50 0.0 vs 7.8 ms, was 19.2; p95 33.1 vs 44.3, was 57.0), but
# two went out: c05's OOO median is 2.9 ms where the capture has 0.0 (was 0.0; the tolerance is 2 ms) and
# v05's p95 153.5 vs 106.4 ms (+44 %, was 86.2, -19 %): v05's LTE path follows a real trace behind a
# 600-packet buffer, and the replay of its estimated timeline queues the slow path's bursts deeper than the
# capture shows. On the fidelity matrix, where the kernel runs the same configured paths, the same change
# moved OOO p50 inside on 22 -> 41 of 54 configurations (10 s runs).
OOO_P50_KNOWN_GAP = {"c01", "c05"}
OOO_P95_KNOWN_GAP = {"v05"}


@pytest.fixture(scope="module", params=RUNS)
def compared(request: pytest.FixtureRequest):
    run = LAB / request.param
    cap = load(run / "client.pcap", peer=run / "server.pcap", path_names=PATHS)
    return request.param, compare_capture(cap)


@pytest.mark.slow
def test_replay_of_estimated_timelines_matches_capture(compared) -> None:
    name, r = compared
    rows = {row["metric"]: row for row in r.table.iter_rows(named=True)}
    truth = json.loads((LAB / name / "results.json").read_text())
    # The observed side is the capture itself: check it against the ground truth first.
    assert rows["goodput_mbps"]["observed"] == pytest.approx(truth["client"]["goodput_mbps"], rel=0.02)
    assert rows["goodput_mbps"]["replayed"] == pytest.approx(rows["goodput_mbps"]["observed"], rel=0.10), name
    for path in ("wifi", "lte"):
        assert abs(rows[f"share_{path}"]["error"]) <= 0.03, (name, path)
    # OOO median within 25 % — or within 2 ms where the median itself is a few ms or less, where a
    # relative error says nothing.
    obs, rep = rows["ooo_p50_ms"]["observed"], rows["ooo_p50_ms"]["replayed"]
    within = abs(rep - obs) <= max(0.25 * obs, 2.0)
    if name in OOO_P50_KNOWN_GAP:
        # Strict known gap: fails the day the model agrees, so the entry gets removed.
        assert not within, (f"{name}: OOO p50 now agrees ({obs} vs {rep} ms): remove it from OOO_P50_KNOWN_GAP")
    else:
        assert within, (name, obs, rep)
    obs95, rep95 = rows["ooo_p95_ms"]["observed"], rows["ooo_p95_ms"]["replayed"]
    within95 = abs(rep95 - obs95) <= 0.30 * obs95
    if name in OOO_P95_KNOWN_GAP:
        assert not within95, (f"{name}: OOO p95 now agrees ({obs95} vs {rep95} ms): remove it from "
                              "OOO_P95_KNOWN_GAP")
    else:
        assert within95, (name, obs95, rep95)
    assert r.settings["join_delay_ns"] > 10_000_000  # the upstream path manager joined late


def test_compare_cli_json(tmp_path: Path) -> None:
    run = LAB / "c07"
    exe = Path(sys.executable).with_name("workbench")
    p = subprocess.run([str(exe), "compare", str(run / "client.pcap"), "--peer", str(run / "server.pcap"),
                        "--path", "10.0.1.1=wifi", "--path", "10.0.2.1=lte", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["scheduler"] == "upstream"
    metrics = {r["metric"] for r in doc["rows"]}
    assert {"goodput_mbps", "ooo_p50_ms", "ooo_p95_ms", "share_wifi", "share_lte"} <= metrics


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS)
def test_compare_from_the_client_capture_alone(run: str) -> None:
    # Issue 14: one vantage point, the best estimate it allows: goodput within 15 %, shares within
    # 3 points, and the result says it came from one end.
    cap = load(LAB / run / "client.pcap", path_names=PATHS)
    r = compare_capture(cap)
    rows = {row["metric"]: row for row in r.table.iter_rows(named=True)}
    assert abs(rows["goodput_mbps"]["error"]) <= 0.15, (run, rows["goodput_mbps"])
    for path in ("wifi", "lte"):
        assert abs(rows[f"share_{path}"]["error"]) <= 0.03, (run, path)
    assert "single_vantage" in {w.kind for w in r.warnings}
