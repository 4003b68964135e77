"""The capture views (sequence/DSN, delay, throughput, OOO delay per path, with the estimated timeline
and a ground truth drawn over them), checked against the capture's own rows, for a lab capture pair
and for an hsr-mptcp CSV export."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, needs

from workbench.errors import InputError
from workbench.report.capture_views import capture_view_data, capture_view_figure, lab_truth, read_truth

ROOT = Path(__file__).resolve().parents[1]
V05 = ROOT / "traces" / "lab" / "v05"
HSR = SHARED_TRACES / "hsr-mptcp"
# one connection's two subflow exports (both carried data: 640 kB and 387 kB)
HSR_FILES = [HSR / "client.1529184937.olia.laptop3.M.D1024.wlan12.M3.pcap.csv",
             HSR / "client.1529184937.olia.laptop3.M.D1024.wlan14.U4.pcap.csv"]
NAMES = {"10.0.1.1": "wifi", "10.0.2.1": "lte"}


@pytest.fixture(scope="module")
def v05():  # type: ignore[no-untyped-def]
    from workbench.capture import load
    from workbench.timeline import estimate_timelines

    cap = load(V05 / "client.pcap", peer=V05 / "server.pcap", path_names=NAMES)
    conn = cap.main_connection
    ev = cap.connection(conn)
    tls = estimate_timelines(ev)
    truth = lab_truth(V05, list(tls))
    return ev, conn, tls, truth, capture_view_data(ev, conn, timelines=tls, truth=truth, max_points=10**9)


def test_every_mark_is_a_row_of_the_capture(v05) -> None:  # type: ignore[no-untyped-def]
    ev, _, tls, _, d = v05
    assert d["paths"] == list(tls) == ["wifi", "lte"] and d["point"] == "snd" and d["data_dir"] == "s2c"
    sent = ev.filter((pl.col("dir") == "s2c") & (pl.col("point") == "snd") & (pl.col("payload_bytes") > 0))
    for p in d["paths"]:
        mine = sent.filter(pl.col("path") == p)
        v = d["per_path"][p]
        assert len(v["retrans"]["t_s"]) == mine["is_retrans"].sum()
        assert len(v["reinject"]["t_s"]) == (mine["is_reinject"] & ~mine["is_retrans"]).sum()
        assert len(v["seq"]["t_s"]) + len(v["retrans"]["t_s"]) + len(v["reinject"]["t_s"]) == mine.height
        # throughput bins add up to the path's bytes
        total = sum(m * 1e6 / 8 * 0.1 for m in v["throughput"]["mbps"])
        assert total == pytest.approx(int(mine["payload_bytes"].sum()), rel=1e-9)
        # one-way delays are the pair's, in ms
        owd = ev.filter((pl.col("path") == p) & (pl.col("dir") == "s2c") & (pl.col("point") == "rcv")
                        & (pl.col("payload_bytes") > 0) & pl.col("owd_ns").is_not_null())
        assert len(v["owd"]["ms"]) == owd.height
        assert max(v["owd"]["ms"]) == pytest.approx(owd["owd_ns"].max() / 1e6)


def test_timeline_and_ground_truth_are_drawn_over_the_capture(v05) -> None:  # type: ignore[no-untyped-def]
    _, _, tls, truth, d = v05
    assert [(t["path"], t["kind"], t["label"]) for t in truth] == [("lte", "rate", "rate2.csv")]
    raw = pl.read_csv(V05 / "rate2.csv")
    assert truth[0]["value"] == raw["rate_mbps"].to_list()
    tl = d["per_path"]["lte"]["timeline"]
    caps = [v / 1e6 if v is not None else None for v in tls["lte"].steps["capacity_down_bps"].to_list()]
    assert tl["capacity_mbps"][: len(caps)] == pytest.approx(caps)
    fig = capture_view_figure(d)
    names = [t.name for t in fig.data]
    assert names.count("estimated timeline") == 4 and "ground truth (rate2.csv)" in names
    assert sum(1 for t in fig.data if t.name == "retransmission") == 2


@needs(*HSR_FILES)
def test_an_hsr_mptcp_export_renders_per_path() -> None:
    from workbench.capture import load

    cap = load([str(f) for f in HSR_FILES])
    conn = cap.main_connection
    ev = cap.connection(conn)
    d = capture_view_data(ev, conn, max_points=10**9)
    assert len(d["paths"]) == 2 and d["point"] == "rcv"   # a client-side export of a download
    for p in d["paths"]:
        v = d["per_path"][p]
        got = ev.filter((pl.col("path") == p) & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
        assert len(v["seq"]["t_s"]) + len(v["retrans"]["t_s"]) + len(v["reinject"]["t_s"]) == got.height > 0
        assert len(v["ooo"]["ms"]) > 0
    fig = capture_view_figure(d)
    assert len([a for a in fig.layout.annotations if "(no data)" in (a.text or "")]) == 0
    assert {t.name for t in fig.data} >= {"data segment", "throughput", "OOO delay"}


def test_bad_ground_truth_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("when,what\n1,2\n")
    with pytest.raises(InputError, match=r"x\.csv"):
        read_truth(f, path_name="wifi")
    g = tmp_path / "owd1.csv"
    g.write_text("t_s,owd_ms\n0,10\n1,20\n")
    assert read_truth(g, path_name="wifi")["kind"] == "delay"
    assert lab_truth(tmp_path, ["wifi"])[0]["path"] == "wifi"
