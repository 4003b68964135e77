"""The Streamlit page driven by Streamlit's AppTest (no browser): a bundled lab pair through the
Overview, a replay of two schedulers against the observed run, what-if edits reaching the replay,
a tiny tuning study whose best parameters land in the Replay tab, and bad uploads shown as one line.
Plus the page's helpers (uploads, tables, CLI line) tested as plain functions."""

from __future__ import annotations

import io
import os
import re
import stat
from pathlib import Path

import pytest
from _paths import SHARED_TRACES, needs
from streamlit.testing.v1 import AppTest

from workbench.errors import InputError
from workbench.ui.uploads import UploadStore, max_upload_bytes

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
C07 = ROOT / "traces" / "lab" / "c07"
TIMEOUT = 180


def _app() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _results(at: AppTest):
    tables = [d.value for d in at.dataframe if "source" in d.value.columns and "goodput Mbit/s" in d.value.columns]
    assert len(tables) == 1, "exactly one observed-vs-predicted table"
    return tables[0].set_index("source")


@pytest.fixture(scope="module")
def replayed() -> AppTest:
    """lab/c07 (client + server as peer, the default trace) replayed with minrtt and upstream."""
    at = _app()
    assert at.selectbox(key="bundled").value.startswith("lab/c07")
    at.multiselect(key="schedulers").set_value(["minrtt", "upstream"])
    at.button(key="run_replay").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def test_overview_shows_connections_subflows_and_owd(replayed: AppTest) -> None:
    cols = [set(d.value.columns) for d in replayed.dataframe]
    assert any({"conn", "kind", "subflows"} <= c for c in cols)
    sub = next(d.value for d in replayed.dataframe if "RTT min ms" in d.value.columns)
    assert len(sub) == 2 and (sub["data_bytes"] > 0).all()
    assert any({"dir", "p50_ms"} <= c for c in cols), "the pair gives one-way delays"
    labels = {m.label: m.value for m in replayed.metric}
    assert labels["goodput"].endswith("Mbit/s")


def test_replay_table_holds_exactly_the_chosen_schedulers_with_sane_numbers(replayed: AppTest) -> None:
    t = _results(replayed)
    assert list(t.index) == ["observed", "minrtt", "upstream"]
    obs = t.loc["observed", "goodput Mbit/s"]
    assert obs > 0
    for s in ("minrtt", "upstream"):
        g = t.loc[s, "goodput Mbit/s"]
        assert g > 0 and obs / 2 <= g <= 2 * obs, (s, g, obs)
        p50, p95 = t.loc[s, "OOO p50 ms"], t.loc[s, "OOO p95 ms"]
        assert 0 <= p50 <= p95, (s, p50, p95)
        shares = [t.loc[s, c] for c in t.columns if c.startswith("share ")]
        assert len(shares) == 2 and abs(sum(shares) - 1) < 0.05
    # OOO-delay CDF, goodput over time, burstiness (replays), per-path share.
    assert len([c for c in replayed.get("plotly_chart")]) >= 5


def test_whatif_edit_changes_what_is_replayed(replayed: AppTest) -> None:
    at = replayed
    before = _results(at).loc["upstream", "goodput Mbit/s"]
    paths = [w.key.split("|", 1)[1] for w in at.number_input if (w.key or "").startswith("wi_scale|")]
    assert len(paths) == 2
    for p in paths:
        at.number_input(key=f"wi_scale|{p}").set_value(0.5)
    at.multiselect(key="schedulers").set_value(["upstream"])
    at.run()
    assert any("settings changed" in i.value for i in at.info), "stale results are flagged"
    at.button(key="run_replay").click()
    at.run()
    assert not at.exception and not at.error
    t = _results(at)
    assert list(t.index) == ["observed", "upstream"]
    assert t.loc["upstream", "goodput Mbit/s"] < 0.75 * before


@pytest.mark.slow
def test_tune_study_and_apply_best_to_replay(replayed: AppTest) -> None:
    at = replayed
    at.selectbox(key="tune_sched").set_value("roundrobin")
    at.multiselect(key="tune_objs").set_value(["ooo_p95"])
    at.number_input(key="tune_trials").set_value(3)
    at.button(key="run_tune").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("3 complete" in m.value for m in at.markdown)
    at.button(key="apply_best").click()
    at.run()
    assert not at.exception and not at.error
    assert "roundrobin" in at.multiselect(key="schedulers").value
    assert any("applied to the Replay tab" in s.value for s in at.success)
    assert at.number_input(key="p|roundrobin|num_segments").value >= 1


def test_bad_upload_is_one_line_error_not_exception() -> None:
    at = _app()
    at.radio(key="input_mode").set_value("Upload")
    at.run()
    at.session_state["wb_test_upload"] = {"captures": [("random.pcap", os.urandom(4096))], "peer": None}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1
    msg = at.error[0].value
    assert msg.startswith("random.pcap: ") and "not a pcap" in msg and "\n" not in msg
    assert "/tmp" not in msg and "Traceback" not in msg


def test_empty_upload_is_refused_before_reading() -> None:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["input"] = "upload"   # opens on the uploader, nothing read yet
    at.run()
    assert at.radio(key="input_mode").value == "Upload" and not at.exception and not at.error
    at.session_state["wb_test_upload"] = {"captures": [("x.pcap", b"")], "peer": None}
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == ["x.pcap: empty file"]


def test_the_uploader_page_gets_the_first_plot_ready() -> None:
    """While the uploader waits for a file, the server's import thread is started (once per process)
    and the page carries a script importing the front end's plotly chunk (a file of this streamlit);
    a page with a capture on it has no such script."""
    import streamlit

    from workbench.ui import warm

    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["input"] = "upload"
    at.run()
    assert not at.exception and not at.error
    body = "".join(h.proto.body for h in at.get("html"))
    m = re.search(r"import\('\./static/js/(PlotlyChart\.[\w.-]+\.js)'\)", body)
    assert m, body
    assert (Path(streamlit.__file__).parent / "static" / "static" / "js" / m.group(1)).is_file()
    assert warm.warm_imports() is False, "the page started it already"
    assert not _app().get("html")


def test_upload_of_a_lab_pair_through_the_handler() -> None:
    at = _app()
    at.radio(key="input_mode").set_value("Upload")
    at.run()
    at.session_state["wb_test_upload"] = {"captures": [("client.pcap", (C07 / "client.pcap").read_bytes())],
                                          "peer": ("server.pcap", (C07 / "server.pcap").read_bytes())}
    at.run()
    assert not at.exception and not at.error
    assert any("client.pcap" in c.value and "peer server.pcap" in c.value for c in at.caption)


def test_replays_are_cached_by_content_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Running again (or coming back to the tab) with the same input and settings reuses the result."""
    from workbench.ui import work

    calls: list[str] = []
    real = work.compute_replay

    def counted(tls, spec, *a, **k):  # type: ignore[no-untyped-def]
        calls.append(spec.scheduler)
        return real(tls, spec, *a, **k)

    monkeypatch.setattr(work, "compute_replay", counted)
    at = _app()
    at.multiselect(key="schedulers").set_value(["upstream"])
    at.number_input(key="seed").set_value(4242)   # a setting no other test used: a fresh cache key
    for _ in range(2):
        at.button(key="run_replay").click()
        at.run()
        assert list(_results(at).index) == ["observed", "upstream"]
    at.number_input(key="seed").set_value(4243)
    at.button(key="run_replay").click()
    at.run()
    assert calls == ["upstream", "upstream"], "the second run came from the cache, a new seed did not"


def test_download_buttons_are_offered_when_the_tab_is_open(replayed: AppTest) -> None:
    """Made when the Download tab is open (not on every run while another tab is shown), as files with
    a fixed address (bytes, not a callable whose address changes with every rerun)."""
    at = replayed
    assert not at.get("download_button"), "nothing made for the downloads while another tab is shown"
    at.session_state["page_tab"] = "Download"
    at.run()
    assert not at.exception and not at.error
    buttons = at.get("download_button")
    assert [b.proto.label for b in buttons] == ["HTML report", "Metrics CSV"]
    assert all(not b.proto.deferred_file_id for b in buttons)
    at.session_state["page_tab"] = "Overview"
    at.run()


HSR = SHARED_TRACES / "hsr-mptcp"
HSR_FILES = ["client.1529184872.reno.laptop3.M.D256.wlan12.M3.pcap.csv",
             "client.1529184872.reno.laptop3.M.D256.wlan14.U4.pcap.csv"]


@needs(*(HSR / f for f in HSR_FILES))
def test_csv_exports_of_one_connection_upload_and_replay() -> None:
    """Two tshark CSV exports (one per subflow) uploaded together; the unknown delay of a path is
    replayed as an assumed default and the page says so."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["input"] = "upload"
    at.run()
    at.session_state["wb_test_upload"] = {"captures": [(f, (HSR / f).read_bytes()) for f in HSR_FILES],
                                          "peer": None}
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("reader csv" in c.value for c in at.caption)
    at.multiselect(key="schedulers").set_value(["minrtt"])
    at.button(key="run_replay").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert list(_results(at).index) == ["observed", "minrtt"]
    assert any("assumed" in c.value or "default" in c.value for c in at.caption)


# ----------------------------------------------------------------------------------------- helpers

def test_report_html_and_csv_of_what_is_on_screen() -> None:
    """The download functions on c07: one self-contained page (plotly.js inlined once) with the
    results table, the what-if timelines and the comparison figures; the CSV holds every row."""
    import polars as pl

    from workbench.ui import tables, work
    from workbench.ui.report import report_html

    src = work.make_source([str(C07 / "client.pcap")], str(C07 / "server.pcap"), "c07")
    cap, ov = work.compute_load(src, None)
    conn = ov["detail"]["conn"]
    tls = work.compute_whatif(work.compute_timelines(cap, conn), {p: work.WhatIf(scale=0.5) for p in ["10.0.2.1"]})
    assert any("what-if" in n for n in tls["10.0.2.1"].notes)
    spec = work.ReplaySpec("minrtt", (), work.WorkloadSpec(), work.ConnSpec())
    setup = work.replay_setup(cap, conn, ov, tls, spec.workload, spec.conn)
    assert not setup.notes and setup.conn.mss_bytes == 1424
    results = [work.compute_observed(cap, conn), work.compute_replay(setup, spec)]
    rows = [r["row"] for r in results]
    from workbench.timeline import timeline_figure

    page = report_html(title="c07", settings=["workload: captured"],
                       tables=[("Observed vs. predicted", tables.results_table(rows, list(tls)))], rows=rows,
                       sources=[r["figures"] for r in results], timeline_json=timeline_figure(tls).to_json())
    assert page.count("* plotly.js v") == 1, "plotly.js inlined once"
    assert "<script src=" not in page, "nothing loaded from elsewhere"
    for fig in ("fig-timelines", "fig-ooo_cdf", "fig-goodput", "fig-burstiness", "fig-share"):
        assert f'id="{fig}"' in page
    assert "<td>observed</td>" in page and "<td>minrtt</td>" in page
    csv = pl.read_csv(io.BytesIO(tables.metrics_csv(rows)))
    assert csv["source"].to_list() == ["observed", "minrtt"] and "goodput_mbps" in csv.columns


def test_store_is_private_uses_its_own_names_and_cleans_up(tmp_path: Path) -> None:
    store = UploadStore(max_bytes=1 << 20, parent=str(tmp_path))
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    up = store.accept([("../../etc/passwd.pcap", io.BytesIO((C07 / "client.pcap").read_bytes()[:2048]))])
    (f,) = up.files
    assert Path(f).parent == store.root and re.fullmatch(r"capture0-[0-9a-f]{12}\.pcap", Path(f).name)
    assert up.names[f] == "passwd.pcap"
    assert stat.S_IMODE(Path(f).stat().st_mode) == 0o600
    up2 = store.accept([("b.csv", b"a,b\n1,2\n")])
    assert not Path(f).exists(), "a new upload replaces the old files"
    assert up2.key != up.key
    with pytest.raises(InputError, match="over the upload limit"):
        store.accept([("big.pcap", b"\0" * ((1 << 20) + 1))])
    assert store.current == up2, "a refused upload leaves the previous one in place"
    root = store.root
    del store
    import gc

    gc.collect()
    assert not root.exists(), "the folder goes with the session's store"


def test_upload_limit_from_env_and_streamlit() -> None:
    assert max_upload_bytes({}, None) == 1024 << 20
    assert max_upload_bytes({}, 200) == 200 << 20
    assert max_upload_bytes({"WORKBENCH_MAX_UPLOAD_MB": "5"}, 200) == 5 << 20
    with pytest.raises(InputError):
        max_upload_bytes({"WORKBENCH_MAX_UPLOAD_MB": "lots"}, None)


def test_ui_command_runs_streamlit_with_the_limit() -> None:
    from workbench.ui.cli import APP as CLI_APP
    from workbench.ui.cli import streamlit_argv

    argv = streamlit_argv(8600, 64)
    assert CLI_APP == APP and argv[1:4] == ["-m", "streamlit", "run"] and argv[4] == str(APP)
    assert argv[argv.index("--server.maxUploadSize") + 1] == "64"
    assert argv[argv.index("--server.port") + 1] == "8600"
    # The page runs whatever is uploaded: it listens on this machine only unless told otherwise.
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"
