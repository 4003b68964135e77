"""Observed metrics on the real Linux MPTCP lab captures against their ground truth (results.json):
goodput, per-path byte share and one-way delay; plus the public client/server pair dataset."""

from __future__ import annotations

import json

import polars as pl
import pytest
from _paths import SHARED_TRACES, require

from workbench.capture import load
from workbench.metrics import summarize
from workbench.metrics.rtt import owd_summary
from workbench.metrics.throughput import path_stats

SHARED = SHARED_TRACES
LAB = SHARED / "lab"
require(LAB, SHARED / "pair")
PATHS = {"10.0.1.1": "wifi", "10.0.2.1": "lte"}
RUNS = sorted(p.name for p in LAB.iterdir() if (p / "results.json").is_file())


@pytest.fixture(scope="module", params=RUNS)
def lab_run(request: pytest.FixtureRequest) -> tuple[str, dict, object]:
    run = LAB / request.param
    truth = json.loads((run / "results.json").read_text())
    cap = load(run / "client.pcap", peer=run / "server.pcap", path_names=PATHS)
    return request.param, truth, cap


def test_lab_runs_are_present() -> None:
    assert {"c01", "c03", "c05", "c07", "v01", "v05"} <= set(RUNS)


def test_goodput_within_2_percent(lab_run) -> None:
    name, truth, cap = lab_run
    s = summarize(cap.events, conn=cap.main_connection)
    expected = truth["client"]["goodput_mbps"]
    assert s["goodput_mbps"] == pytest.approx(expected, rel=0.02), name
    assert s["delivered_bytes"] == truth["client"]["bytes_received"], name


def test_path_share_within_1_point(lab_run) -> None:
    name, truth, cap = lab_run
    # results.json counts payload bytes received on each subflow at the client.
    ps = {r["path"]: r for r in path_stats(cap.events, cap.main_connection, point="rcv").iter_rows(named=True)}
    summary = truth["measured"]["summary"]
    for path_key, path in (("path1", "wifi"), ("path2", "lte")):
        assert ps[path]["bytes"] == summary[f"bytes_{path_key}"], (name, path)
        assert ps[path]["share"] == pytest.approx(summary[f"share_{path_key}"], abs=0.01), (name, path)


def test_min_one_way_delay_matches_configuration(lab_run) -> None:
    name, truth, cap = lab_run
    owd = {(r["path"], r["dir"]): r for r in owd_summary(cap.events, cap.main_connection).iter_rows(named=True)}
    for path_key, path in (("path1", "wifi"), ("path2", "lte")):
        configured_ms = truth["configured"][path_key]["one_way_delay_ms"]
        for d in ("s2c", "c2s"):
            assert owd[(path, d)]["owd_min_ms"] == pytest.approx(configured_ms, abs=0.5), (name, path, d)
            # Queueing only ever adds delay.
            assert owd[(path, d)]["owd_min_ms"] >= configured_ms - 0.05


def test_one_connection_two_subflows_named_paths(lab_run) -> None:
    name, _, cap = lab_run
    mptcp = cap.connections.filter(pl.col("is_mptcp"))
    assert mptcp.height == 1, name
    row = mptcp.row(0, named=True)
    assert row["version"] == 1 and row["subflows"] == 2 and row["vantage"] == "client"
    subflows = cap.subflows.filter(pl.col("conn") == row["conn"]).sort("subflow")
    assert subflows["path"].to_list() == ["wifi", "lte"]
    assert subflows["join"].to_list() == [False, True]
    assert not cap.warnings, cap.warnings


def test_pair_dataset_matches_connections_and_owd() -> None:
    cap = load(SHARED / "pair" / "client_2.pcap", peer=SHARED / "pair" / "server_2.pcap")
    # PROVENANCE: 4-5 MPTCP connections seen at both ends with matching keys.
    mptcp = cap.connections.filter(pl.col("is_mptcp") & pl.col("client_key").is_not_null())
    assert mptcp.height >= 4
    assert set(cap.events["point"].unique().to_list()) == {"snd", "rcv"}
    rcv = cap.events.filter(pl.col("point") == "rcv")
    assert rcv["owd_ns"].null_count() / rcv.height < 0.01
    # The long subflows (most packets) see 50-57 ms one way.
    busiest = (cap.events.filter(pl.col("owd_ns").is_not_null())
               .group_by("conn", "subflow", "dir").agg(n=pl.len(), p50=pl.col("owd_ns").median() / 1e6)
               .filter(pl.col("n") >= 300))
    assert busiest.height >= 4
    assert busiest["p50"].is_between(50, 57).all(), busiest
