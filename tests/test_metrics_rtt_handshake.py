"""Handshake RTT (SYN -> SYN/ACK at the opener) against tshark's own tcp.analysis.ack_rtt of the
SYN/ACK, which the published CSV exports of the high-speed-rail study carry."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, require

from workbench.capture import load
from workbench.capture._csvexport import group_csv_exports
from workbench.metrics import best_rtt_samples, rtt_handshake

HSR = SHARED_TRACES / "hsr-mptcp"
require(HSR, SHARED_TRACES / "lab" / "c07")


def _synack_rtts_from_csv(files: list[Path]) -> dict[str, float]:
    """tshark's ack_rtt on each file's SYN/ACK row, keyed by the client address of the subflow."""
    out = {}
    for f in files:
        rows = pl.read_csv(f, infer_schema_length=0)
        synack = rows.filter(pl.col("tcp.flags").str.to_lowercase().str.ends_with("12"))
        if synack.height:
            out[synack["ip.dst"][0]] = float(synack["tcp.analysis.ack_rtt"][0]) * 1e3
    return out


@pytest.mark.parametrize("token", ["1529185491", "1529186045", "1529185848"])
def test_handshake_rtt_equals_tsharks_ack_rtt(token: str) -> None:
    files = next(g for g in group_csv_exports(sorted(HSR.glob("*.csv"))) if token in g[0].name)
    cap = load(files)
    hs = rtt_handshake(cap.events)
    expected = _synack_rtts_from_csv(files)
    assert expected and hs.height == len(expected)
    for r in hs.iter_rows(named=True):
        assert r["vantage"] == "client"
        assert r["rtt_ns"] / 1e6 == pytest.approx(expected[r["path"]], abs=0.001)


def test_best_rtt_prefers_seq_then_timestamps_then_handshake() -> None:
    lab = SHARED_TRACES / "lab" / "c07"
    pair = load(lab / "client.pcap", peer=lab / "server.pcap")
    assert best_rtt_samples(pair.events)["method"].unique().to_list() == ["seq"]
    client_only = load(lab / "client.pcap")
    assert best_rtt_samples(client_only.events)["method"].unique().to_list() == ["ts"]
    files = next(g for g in group_csv_exports(sorted(HSR.glob("*.csv"))) if "1529185491" in g[0].name)
    assert best_rtt_samples(load(files).events)["method"].unique().to_list() == ["hs"]
