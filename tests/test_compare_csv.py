"""`compare`, `timeline` and the report's workload choice on tshark CSV exports (issue 14): the real
high-speed-rail captures (client side only, no TCP timestamps, no frame lengths, cellular radios).

Truth is read from the CSV files themselves with the csv module, independently of the reader: the
largest segment, the handshake and first-exchange times, the silences, the DATA_ACKs."""

from __future__ import annotations

import csv
import itertools
import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, require

from workbench.capture import load
from workbench.capture._csvexport import group_csv_exports
from workbench.compare import compare_capture, finished_transfer
from workbench.metrics import summarize
from workbench.timeline import estimate_timelines

HSR = SHARED_TRACES / "hsr-mptcp"
require(HSR)
GROUPS = group_csv_exports(sorted(HSR.glob("*.csv")))
S = 1_000_000_000


def group(token: str) -> list[Path]:
    return next(g for g in GROUPS if token in g[0].name)


@cache
def rows(f: Path) -> list[dict[str, str]]:
    with open(f, newline="") as fh:
        return [r for r in csv.DictReader(fh) if r.get("frame.time_epoch")]


def _t(r: dict[str, str]) -> float:
    return float(r["frame.time_epoch"])


def _flags(r: dict[str, str]) -> int:
    return int(r["tcp.flags"], 16)


def client_addr(f: Path) -> str:
    first = rows(f)[0]
    return first["ip.src"] if _flags(first) & 0x12 == 0x02 else first["ip.dst"]


def rtt_bound_s(f: Path) -> float | None:
    """min(SYN -> SYN/ACK, first client packet after it -> first server data), straight from the file."""
    rs, client = rows(f), client_addr(f)
    syn = [_t(r) for r in rs if _flags(r) & 0x12 == 0x02 and r["ip.src"] == client]
    synack = [_t(r) for r in rs if _flags(r) & 0x12 == 0x12 and r["ip.dst"] == client]
    if not syn or not synack:
        return None
    sa = synack[0]
    samples = [sa - max(t for t in syn if t <= sa)]
    after = [_t(r) for r in rs if r["ip.src"] == client and not _flags(r) & 0x02 and _t(r) >= sa]
    if after:
        data = [_t(r) for r in rs if r["ip.dst"] == client and int(r["tcp.len"]) > 0 and _t(r) > after[0]]
        if data:
            samples.append(data[0] - after[0])
    return min(samples)


@pytest.mark.parametrize("token", ["1529184925", "1529185060", "1529185761"])
def test_compare_runs_and_takes_what_the_capture_says(token: str) -> None:
    files = group(token)
    cap = load(files)
    r = compare_capture(cap, cc=files[0].name.split(".")[2])
    # MSS from the capture (1228 on these carriers), not the engine's 1424.
    mss = max(int(x["tcp.len"]) for f in files for x in rows(f) if x["ip.dst"] == client_addr(f))
    assert r.settings["mss_bytes"] == mss == 1228
    # Delays from the capture: per path, half the smaller of handshake and first exchange.
    for f in files:
        bound = rtt_bound_s(f)
        if bound is None:
            continue
        tl = r.timelines[client_addr(f)]
        assert tl.mean("owd_down_ns") == pytest.approx(bound / 2 * 1e9, rel=0.01)
        assert set(tl.steps["owd_down_ns_src"].to_list()) == {"estimated"}
        assert not any(c.kind == "assumed" and c.quantity.startswith("owd") for c in r.warnings)
    kinds = {w.kind for w in r.warnings}
    assert {"single_vantage", "delay_handshake", "no_frame_sizes"} <= kinds
    rows_ = {x["metric"]: x for x in r.table.iter_rows(named=True)}
    assert rows_["goodput_mbps"]["replayed"] > 0


def test_handshake_of_an_idle_radio_is_not_the_rtt() -> None:
    # The handshake took 10x the first exchange on the joined path: the first exchange is the RTT.
    f = next(p for p in group("1529185060") if ".wlan14." in p.name)
    rs, client = rows(f), client_addr(f)
    syn = min(_t(r) for r in rs if _flags(r) & 0x12 == 0x02)
    synack = min(_t(r) for r in rs if _flags(r) & 0x12 == 0x12)
    assert synack - syn > 0.3
    tl = estimate_timelines(load(group("1529185060")))[client]
    assert tl.mean("owd_down_ns") < 0.5 * (synack - syn) / 2 * 1e9


def _silences(files: list[Path], min_gap_s: float = 0.8) -> set[str]:
    """Paths (client address) with a silence of min_gap_s or more between two packets that arrived or
    that the client sent, after the path's first data segment and followed by more data on it."""
    out = set()
    for f in files:
        if not rows(f):
            continue
        rs, client = rows(f), client_addr(f)
        t = [_t(r) for r in rs]
        data_t = [_t(r) for r in rs if r["ip.dst"] == client and int(r["tcp.len"]) > 0]
        if not data_t:
            continue
        for a, b in itertools.pairwise(t):
            if b - a >= min_gap_s and a >= data_t[0] and any(x >= b for x in data_t):
                out.add(client)
    return out


@pytest.mark.slow
def test_outages_found_in_every_connection_that_has_one() -> None:
    found_in = 0
    for files in GROUPS:
        try:
            cap = load(files)
            ev = cap.connection(cap.main_connection)
            tls = estimate_timelines(ev)
        except Exception as e:  # the few exports with no connection or no data say so cleanly
            assert "no " in str(e)
            continue
        expected = _silences(files) & set(tls)
        got = {name for name, tl in tls.items() if tl.outages}
        # Every silence with data before and after it that the estimator did not take for an outage
        # was one with nothing outstanding (the path idle, the other path busy with nothing queued
        # here); an outage is never reported where there was no silence at all.
        assert got <= expected, (files[0].name, got, expected)
        found_in += bool(got)
        for name in got:
            tl = tls[name]
            assert all(e - a >= 0.8 * S for a, e in tl.outages)
            assert (tl.steps.filter(pl.col("capacity_down_bps_src") == "outage")["capacity_down_bps"] == 0).all()
            assert "outage" in {c.kind for c in tl.caveats}
    assert found_in >= 1


def test_the_known_outage_and_its_burst() -> None:
    # 1529185357: the U4 path went silent for 1.6 s mid-download, 9 retransmissions around it.
    files = group("1529185357")
    tls = estimate_timelines(load(files))
    tl = tls["192.168.43.236"]
    assert len(tl.outages) == 1
    a, e = tl.outages[0]
    # Its span: the longest pause between two data segments on that path (from the file itself).
    f = next(p for p in files if client_addr(p) == "192.168.43.236")
    data_t = [_t(r) for r in rows(f) if r["ip.dst"] == "192.168.43.236" and int(r["tcp.len"]) > 0]
    longest = max(b - x for x, b in itertools.pairwise(data_t))
    assert longest > 1.6
    assert (e - a) / S == pytest.approx(longest, abs=0.002)
    # Its retransmissions: 3 in the second before it, a cluster of 5 within 25 ms a second earlier
    # (and one 58 ms before that cluster): at most one is taken for independent random loss.
    assert tl.loss_classes["outage"] == 3 and tl.loss_classes["burst"] == 5 and tl.loss_classes["random"] == 1
    assert float(tl.steps["loss_down"][0]) == 0.0  # one isolated loss is no loss rate
    assert "loss_bursts" in {c.kind for c in tl.caveats}


def test_missing_partner_subflow_is_detected(tmp_path: Path) -> None:
    # One subflow's export alone (the one that carried 3 % of the data): its DATA_ACKs cover the whole
    # connection's data sequence space from its first DSN on.
    f = min(group("1529185357"), key=lambda p: len(rows(p)))
    alone = tmp_path / f.name
    shutil.copy(f, alone)
    client = client_addr(f)
    carried = sum(int(r["tcp.len"]) for r in rows(f) if r["ip.dst"] == client)
    dss = [int(r["tcp.options.mptcp.rawdataseqno"]) for r in rows(f)
           if r["ip.dst"] == client and r["tcp.options.mptcp.rawdataseqno"]]
    dacks = [int(r["tcp.options.mptcp.rawdataack"]) for r in rows(f)
             if r["ip.src"] == client and r["tcp.options.mptcp.rawdataack"]]
    lo, hi = min(dss), max(dacks)
    tls = estimate_timelines(load(alone))
    miss = [c for c in tls.caveats if c.kind == "missing_subflows"]
    assert len(miss) == 1
    n = int(miss[0].message.split("at least ")[1].split(" bytes")[0])
    assert n == pytest.approx((hi - lo) - carried, abs=2 * 1228)
    # The complete pair has nothing missing.
    assert not [c for c in estimate_timelines(load(group("1529185357"))).caveats if c.kind == "missing_subflows"]


def test_finished_downloads_are_finished() -> None:
    for token in ("1529184925", "1529185060", "1529185190"):
        cap = load(group(token))
        ev = cap.connection(cap.main_connection)
        s = summarize(ev, conn=cap.main_connection)
        # The export has no DSS flags (no DATA_FIN); the server's FIN says the 1 MB was all of it.
        assert not ev["data_fin"].fill_null(False).any()
        assert finished_transfer(ev, s)
        from workbench.report.pipeline import _finite_transfer
        assert _finite_transfer(ev, s)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("workbench")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_compare_cli_on_a_csv_export() -> None:
    f = group("1529185060")[0]
    p = _cli("compare", str(f), "--cc", "reno")
    assert p.returncode == 0, p.stderr
    assert "see warnings" in p.stdout and "warning 1:" in p.stdout
    assert "one vantage point" in p.stdout
    j = _cli("compare", str(f), "--cc", "reno", "--json")
    doc = json.loads(j.stdout)
    assert doc["settings"]["mss_bytes"] == 1228
    kinds = {c["kind"] for c in doc["caveats"]}
    assert {"single_vantage", "delay_handshake"} <= kinds
    # Naming one subflow's export brings its partner: both paths, nothing missing.
    assert {r["metric"] for r in doc["rows"]} >= {"share_192.168.43.127", "share_192.168.43.236"}
    assert "missing_subflows" not in kinds
    share_rows = [r for r in doc["rows"] if r["metric"].startswith("share_")]
    assert share_rows and all(r["warnings"] for r in share_rows)


@pytest.mark.slow
def test_rate_file_units_on_the_command_line(tmp_path: Path) -> None:
    f = tmp_path / "rates.csv"
    f.write_text("0,10\n1,20\n2,5\n")
    out = tmp_path / "t.json"
    bad = _cli("timeline", str(f), "-o", str(out))
    assert bad.returncode == 2 and "units not declared" in bad.stderr and not out.exists()
    ok = _cli("timeline", str(f), "-o", str(out), "--t-unit", "s", "--rate-unit", "Mbit/s")
    assert ok.returncode == 0, ok.stderr
    from workbench.timeline import load_timelines

    (tl,) = load_timelines(out).values()
    assert tl.steps["capacity_down_bps"].to_list() == [10e6, 20e6, 5e6]
    assert tl.steps["t_ns"].to_list() == [0, S, 2 * S]


def test_report_takes_the_exports_segment_size() -> None:
    # `report` used to fall back to the engine's 1424-byte MSS on every export.
    from workbench.capture_experiment import capture_settings
    from workbench.metrics import summarize
    from workbench.report.pipeline import _capture_stack

    cap = load(group("1529185060"))
    conn = cap.main_connection
    summary = summarize(cap.connection(conn), conn=conn)
    notes: list[str] = []
    stack, _join_ns = _capture_stack(cap, conn, "reno", notes, summary=summary)
    assert stack.advmss == 1228 and stack.congestion_control == "reno"
    assert not any("model defaults" in n or "engine defaults" in n for n in notes)
    # the report hands over the observed row it has; read alone, the capture says the same
    assert capture_settings(cap, conn, summary=summary) == capture_settings(cap, conn)
    assert capture_settings(cap, conn).mss_bytes == 1228
