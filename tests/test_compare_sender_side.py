"""A capture that holds the data sender only (a server capture of a download, a client capture of an
upload): goodput and completion come from the DATA_ACKs the sender received, shares from what it put
on each path, and `compare` measures its replay from the same side (issue 14: one vantage point).
Checked on the lab's real-kernel server captures against the capture pair's receiver-side values."""

from __future__ import annotations

import pytest
from _paths import SHARED_TRACES, require

from workbench.capture import load
from workbench.compare import compare_capture
from workbench.metrics import summarize

LAB = SHARED_TRACES / "lab"
RUNS = ["c01", "c07", "v05"]
require(*(LAB / run for run in RUNS))
PATHS = {"10.0.1.1": "wifi", "10.0.2.1": "lte"}


@pytest.mark.parametrize("run", RUNS)
def test_sender_capture_goodput_comes_from_data_acks(run: str) -> None:
    cap = load(LAB / run / "server.pcap", path_names=PATHS)
    assert cap.connections["vantage"].to_list() == ["server"]
    s = summarize(cap.connection(cap.main_connection))
    pair = load(LAB / run / "client.pcap", peer=LAB / run / "server.pcap", path_names=PATHS)
    truth = summarize(pair.connection(pair.main_connection))
    assert s["goodput_source"] == "data_ack" and truth["goodput_source"] == "receiver"
    assert s["delivered_bytes"] == truth["delivered_bytes"]
    assert s["goodput_mbps"] == pytest.approx(truth["goodput_mbps"], rel=0.01)
    assert s["completion_s"] == pytest.approx(truth["completion_s"], rel=0.01)
    for p in PATHS.values():  # what the sender put on each path (retransmissions included)
        assert s[f"share_{p}"] == pytest.approx(truth[f"share_{p}"], abs=0.02)
    assert s["ooo_p50_ms"] is None  # the receiver's reordering is not observable from the sender


def test_compare_measures_the_replay_from_the_sender_side_too() -> None:
    cap = load(LAB / "c01" / "server.pcap", path_names=PATHS)
    r = compare_capture(cap)
    rows = {x["metric"]: x for x in r.table.iter_rows(named=True)}
    assert r.observed["goodput_source"] == r.replayed["goodput_source"] == "data_ack"
    assert abs(rows["goodput_mbps"]["error"]) <= 0.10, rows["goodput_mbps"]
    for p in PATHS.values():
        assert abs(rows[f"share_{p}"]["error"]) <= 0.03, rows[f"share_{p}"]
    assert rows["ooo_p50_ms"]["observed"] is None and rows["ooo_p50_ms"]["error"] is None
    assert any("data sender only" in str(w) for w in r.warnings)
