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
    throughput rows, and the lab's applied LTE rate (rate2.csv) over the second path. The figure is
    made only while its tab is open (the page's largest: it must not delay the first plot)."""
    import json

    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    label = next(o for o in at.selectbox(key="bundled").options if o.startswith("lab/v05"))
    at.selectbox(key="bundled").set_value(label)
    at.run()
    _ok(at)
    assert at.session_state["page_tab"] == "Overview"
    assert not [c for c in at.get("plotly_chart") if "data sequence number" in c.proto.spec]
    at.session_state["page_tab"] = "Capture"   # the user opens the Capture tab
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


def _as_upload_exports(pcap: Path, out: Path) -> list[Path]:
    """tshark CSV exports (one per subflow) of an upload made from a download capture: every data and
    ACK packet turned around (the client now sends the data, DSNs and data ACKs per packet, as the
    capture's own analysis placed them), the handshakes left as they were (the client still opens the
    connection) with the two sequence spaces swapped to match. From the server's capture of lab/c07,
    this is the server's view of a 4 MB upload: what a kernel run would need root to make."""
    import polars as pl

    from workbench.capture import load, read_packets

    pk = read_packets(pcap).packets.sort("frame")
    ev = load(pcap).events
    assert ev.height == pk.height, "one event per packet"
    syn = (pl.col("flags") & 0x02) != 0
    synack = syn & ((pl.col("flags") & 0x10) != 0)
    ends = [pl.min_horizontal("src", "dst"), pl.max_horizontal("src", "dst"),
            pl.min_horizontal("sport", "dport"), pl.max_horizontal("sport", "dport")]
    pk = pk.with_columns(stream=pl.concat_str(ends, separator="|"), dsn=ev["dsn"], dack=ev["data_ack"])
    isn = pk.filter(syn).group_by("stream").agg(isn_c=pl.col("seq").sort_by("frame").first(),
                                                isn_s=pl.col("seq").sort_by("frame").last())
    rows = pk.join(isn, on="stream", how="left").sort("frame").select(
        "stream",
        t=(pl.col("t_ns") // 10**9).cast(pl.String) + "." + (pl.col("t_ns") % 10**9).cast(pl.String).str.pad_start(9, "0"),
        src=pl.when(syn).then("src").otherwise("dst"), dst=pl.when(syn).then("dst").otherwise("src"),
        sport=pl.when(syn).then("sport").otherwise("dport"), dport=pl.when(syn).then("dport").otherwise("sport"),
        seq=pl.when(synack).then("isn_c").when(syn).then("isn_s").otherwise("seq"),
        ack=pl.when(synack).then(pl.col("isn_s") + 1).when(syn).then(0).otherwise("ack"),
        length="payload_len", flags="flags",
        dsn=pl.when(pl.col("payload_len") > 0).then(pl.col("dsn") + 1), dack=pl.col("dack") + 1)
    files = []
    for i, (_, g) in enumerate(sorted(rows.group_by("stream"), key=lambda kv: kv[1]["t"][0])):
        f = out / f"upload.1795351719.sf{i}.pcap.csv"
        g.select(**{"frame.time_epoch": "t", "ip.src": "src", "ip.dst": "dst", "tcp.srcport": "sport",
                    "tcp.dstport": "dport", "tcp.seq": "seq", "tcp.ack": "ack", "tcp.seq_raw": "seq",
                    "tcp.ack_raw": "ack", "tcp.len": "length",
                    "tcp.flags": pl.col("flags").map_elements(lambda v: f"0x{v:04x}", return_dtype=pl.String),
                    "tcp.options.mptcp.rawdataseqno": "dsn", "tcp.options.mptcp.rawdataack": "dack"}).write_csv(f)
        files.append(f)
    return files


def test_an_upload_is_replayed_as_compare_replays_it(tmp_path: Path) -> None:
    """An upload capture (the client sends the data): the page replays the experiment `compare`
    replays for it (an upload on the timelines as estimated, one settings path), so the capture's own
    scheduler gets compare's goodput; the Paths tab shows and edits the direction the data took."""
    from workbench.capture import load
    from workbench.compare import compare_capture

    files = _as_upload_exports(C07 / "server.pcap", tmp_path)
    cap = load([str(f) for f in files])
    assert cap.connections["data_dir"].to_list() == ["c2s"], "an upload"
    cmp = compare_capture(cap)
    assert cmp.experiment.transfers[0].direction == "up" and cmp.settings["delivered_bytes"] == 4_000_000
    at = _upload_page()
    _upload(at, *files)
    _ok(at)
    paths = _frame(at, "what-if")
    assert "capacity up Mbit/s" in paths.columns and "buffer up B" in paths.columns
    tls = cmp.timelines
    bufs = {w.key.rsplit("|", 1)[1]: w.value for w in at.number_input if (w.key or "").startswith("wi_buf|")}
    assert bufs == {p: int(tl.buffer_up_bytes or 64_000) for p, tl in tls.items()}
    at.multiselect(key="schedulers").set_value(["upstream"])
    at.button(key="run_replay").click()
    at.run()
    _ok(at)
    t = _results(at)
    assert t.loc["upstream", "goodput Mbit/s"] == pytest.approx(cmp.replayed["goodput_mbps"], abs=1e-3)
    assert t.loc["upstream", "OOO p95 ms"] == pytest.approx(cmp.replayed["ooo_p95_ms"], abs=1e-3)
    # The Capture tab draws the estimated timeline of the direction the data took (up) over the
    # capture's throughput.
    import json

    at.session_state["page_tab"] = "Capture"
    at.run()
    _ok(at)
    spec = json.loads(next(c for c in at.get("plotly_chart") if "data sequence number" in c.proto.spec).proto.spec)
    drawn = [tr["y"] for tr in spec["data"] if tr.get("name") == "estimated timeline"]
    for p, tl in tls.items():
        up = [None if v is None else v / 1e6 for v in tl.steps["capacity_up_bps"].to_list()]
        assert any(v is not None for v in up)
        assert any(len(y) >= len(up) and all((a is None and b is None) or (a is not None and b is not None
                                                                          and abs(a - b) < 1e-9)
                                             for a, b in zip(y, up, strict=False)) for y in drawn), p
