"""Issue 15's failures of the page, each driven through Streamlit's AppTest and checked against an
independent truth (the library loading the same files on its own):

* a second capture dropped on the uploader replaces the first (no merged fake connection); the two
  ends of one session become capture + peer, and the page says which;
* what-if edits, the buffer box and errors do not carry over to the next input;
* Tune and Replay replay the same thing: the defaults' trial of a study reports the Replay tab's
  numbers for that scheduler;
* switching to Upload keeps the scheduler list, and an empty list says why "Run replay" is off;
* a plain TCP capture gets one line saying it is analysed as single-path TCP, and replays;
* the row of the capture's own scheduler carries its error against the observed numbers, and the
  scheduler's parameters are in the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _paths import SHARED_TRACES, needs
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
C07 = ROOT / "traces" / "lab" / "c07"
C01 = ROOT / "traces" / "lab" / "c01"
TCP_ONLY = SHARED_TRACES / "pair" / "client_1_tcp_only.pcap"
TIMEOUT = 300


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _upload_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["input"] = "upload"
    at.run()
    return at


def _upload(at: AppTest, *files: Path, peer: Path | None = None) -> None:
    at.session_state["wb_test_upload"] = {"captures": [(f.name, f.read_bytes()) for f in files],
                                          "peer": (peer.name, peer.read_bytes()) if peer else None}
    at.run()


def _frame(at: AppTest, column: str):  # type: ignore[no-untyped-def]
    frames = [d.value for d in at.dataframe if column in d.value.columns]
    assert frames, f"no table with a {column!r} column"
    return frames[0]


def _results(at: AppTest):  # type: ignore[no-untyped-def]
    return _frame(at, "role").set_index("source")


def _truth(path: Path, peer: Path | None = None) -> dict[str, object]:
    """What the library says about a capture on its own: subflows and data bytes of the main connection."""
    from workbench.capture import load
    from workbench.inspect import inspect_loaded

    d = inspect_loaded(load(path, peer=peer))["detail"]
    return {"subflows": len(d["subflows"]), "bytes": sum(s["data_bytes"] for s in d["subflows"])}


def test_second_capture_replaces_the_first_instead_of_merging() -> None:
    at = _upload_page()
    # Two unrelated sessions in the uploader's list (the second dropped after the first).
    c07 = C07 / "client.pcap"
    c01 = C01 / "client.pcap"
    _upload(at, c07, c01)
    _ok(at)
    notes = [i.value for i in at.sidebar.info]
    assert any("replaces" in n and "different session" in n for n in notes), notes
    sub = _frame(at, "RTT min ms")
    truth = _truth(c01)
    assert len(sub) == truth["subflows"] == 2
    assert int(sub["data_bytes"].sum()) == truth["bytes"]


def test_the_two_ends_of_one_session_become_capture_and_peer() -> None:
    at = _upload_page()
    _upload(at, C07 / "client.pcap", C07 / "server.pcap")
    _ok(at)
    assert any("two ends of one session" in i.value for i in at.sidebar.info)
    assert any("peer server.pcap" in c.value for c in at.caption)
    owd = _frame(at, "p50_ms")   # one-way delays exist only with a peer
    assert len(owd) >= 2
    sub = _frame(at, "RTT min ms")
    assert int(sub["data_bytes"].sum()) == _truth(C07 / "client.pcap", C07 / "server.pcap")["bytes"]


def test_removing_the_files_clears_the_old_error() -> None:
    at = _upload_page()
    at.session_state["wb_test_upload"] = {"captures": [("bad.pcap", b"not a capture at all")], "peer": None}
    at.run()
    assert len(at.error) == 1
    at.session_state["wb_test_upload"] = {"captures": [], "peer": None}   # the user removes the file
    at.run()
    assert not at.error and not at.exception
    assert any("upload a capture" in i.value for i in at.info)


@pytest.mark.slow
def test_whatif_edits_do_not_carry_over_to_the_next_trace() -> None:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    _ok(at)
    keys = [w.key for w in at.number_input if (w.key or "").startswith("wi_scale|")]
    assert len(keys) == 2
    at.number_input(key=keys[0]).set_value(4.0)
    bon = next(w.key for w in at.checkbox if (w.key or "").startswith("wi_bufon|"))
    at.checkbox(key=bon).check()
    at.run()
    assert any("×4" in str(v) or "x4" in str(v) or "4" in str(v) for v in _frame(at, "what-if")["what-if"])
    label = next(o for o in at.selectbox(key="bundled").options if o.startswith("lab/c01"))
    at.selectbox(key="bundled").set_value(label)
    at.run()
    _ok(at)
    # Fresh edits on the new trace: rate x1, no buffer set, and the buffer box shows c01's estimate.
    scales = [w for w in at.number_input if (w.key or "").startswith("wi_scale|")]
    assert len(scales) == 2 and all(w.value == 1.0 for w in scales)
    assert all(not w.value for w in at.checkbox if (w.key or "").startswith("wi_bufon|"))
    assert all(not v for v in _frame(at, "what-if")["what-if"])
    from workbench.capture import load
    from workbench.ui.work import compute_timelines

    cap = load(C01 / "client.pcap", peer=C01 / "server.pcap")
    tls = compute_timelines(cap, cap.main_connection)
    bufs = {w.key.rsplit("|", 1)[1]: w.value for w in at.number_input if (w.key or "").startswith("wi_buf|")}
    assert bufs == {p: int(tl.buffer_down_bytes or 64_000) for p, tl in tls.items()}
    assert any("carried over" in c.value for c in at.caption)


@pytest.mark.slow
def test_tune_and_replay_replay_the_same_experiment() -> None:
    """The study's first trial is the scheduler's defaults; its OOO p95 and goodput must be the Replay
    tab's numbers for the same scheduler and settings (issue 15: 360 ms vs 58 ms before)."""
    import polars as pl

    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    at.multiselect(key="schedulers").set_value(["blest"])
    at.button(key="run_replay").click()
    at.run()
    _ok(at)
    rep = _results(at).loc["blest"]
    at.selectbox(key="tune_sched").set_value("blest")
    at.multiselect(key="tune_objs").set_value(["ooo_p95"])
    at.number_input(key="tune_trials").set_value(1)
    at.button(key="run_tune").click()
    at.run()
    _ok(at)
    ch = _frame(at, "change %")
    assert len(ch) >= 2
    tr = at.session_state["wb_tune"]
    t = tr["trials"].filter(pl.col("baseline") == "defaults")
    assert t.height == 1
    assert t["agg_ooo_p95_ms"][0] == pytest.approx(rep["OOO p95 ms"], abs=1e-3)
    assert t["agg_goodput_mbps"][0] == pytest.approx(rep["goodput Mbit/s"], abs=1e-3)


def test_switching_to_upload_keeps_the_scheduler_list_and_says_why_run_is_off() -> None:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    at.multiselect(key="schedulers").set_value(["ecf", "blest"])
    at.run()
    at.radio(key="input_mode").set_value("Upload")
    at.run()   # nothing uploaded yet: the Replay tab (and its widgets) is not drawn
    _upload(at, C07 / "client.pcap", peer=C07 / "server.pcap")
    _ok(at)
    assert at.multiselect(key="schedulers").value == ["ecf", "blest"]
    assert not at.button(key="run_replay").disabled
    at.multiselect(key="schedulers").set_value([])
    at.run()
    assert at.button(key="run_replay").disabled
    assert any("Pick at least one scheduler" in i.value for i in at.info)


@needs(TCP_ONLY)
def test_plain_tcp_capture_is_said_to_be_single_path_and_replays() -> None:
    at = _upload_page()
    _upload(at, TCP_ONLY)
    _ok(at)
    lines = [i.value for i in at.info if "single-path TCP" in i.value]
    assert len(lines) == 1
    at.multiselect(key="schedulers").set_value(["upstream"])
    at.button(key="run_replay").click()
    at.run()
    _ok(at)
    t = _results(at)
    assert t.loc["upstream", "goodput Mbit/s"] > 0
    # The sender-side capture: the transfer replayed is what was sent, and the settings say so.
    assert any("sent in the capture" in c.value for c in at.caption)


@pytest.mark.slow
def test_own_scheduler_row_carries_its_error_and_parameters_are_recorded() -> None:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    at.multiselect(key="schedulers").set_value(["upstream", "blest"])
    at.button(key="run_replay").click()
    at.run()
    _ok(at)
    t = _results(at)
    assert t.loc["upstream", "role"] == "capture's own scheduler"
    assert t.loc["blest", "role"] == "what-if" and t.loc["observed", "role"] == "observed"
    from workbench.schedulers import info

    for p in info("blest").params:
        assert f"{p.name}=" in t.loc["blest", "params"]
    err = _frame(at, "error %").set_index("metric")
    obs, rep = t.loc["observed", "OOO p95 ms"], t.loc["upstream", "OOO p95 ms"]
    assert err.loc["OOO p95 ms", "error"] == pytest.approx(rep - obs, abs=2e-3)
    assert err.loc["goodput Mbit/s", "observed"] == pytest.approx(t.loc["observed", "goodput Mbit/s"], abs=1e-3)


def test_capture_tab_draws_every_path_with_timeline_and_ground_truth() -> None:
    """lab/v05 in the Capture tab: four rows per path, the estimated timeline over the delay and
    throughput rows, and the lab's applied LTE rate (rate2.csv) over the second path."""
    import json

    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    label = next(o for o in at.selectbox(key="bundled").options if o.startswith("lab/v05"))
    at.selectbox(key="bundled").set_value(label)
    at.run()
    _ok(at)
    chart = next(c for c in at.get("plotly_chart") if "data sequence number" in c.proto.spec)
    spec = json.loads(chart.proto.spec)
    names = [t.get("name") for t in spec["data"]]
    assert names.count("data segment") == 2 and names.count("estimated timeline") == 4
    truth = [t for t in spec["data"] if t.get("name") == "ground truth (rate2.csv)"]
    assert len(truth) == 1 and truth[0]["xaxis"] == "x6"   # row 3 (throughput), column 2 (the second path)
    import polars as pl

    assert truth[0]["y"] == pl.read_csv(ROOT / "traces" / "lab" / "v05" / "rate2.csv")["rate_mbps"].to_list()
