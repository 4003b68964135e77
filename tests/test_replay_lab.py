"""Replay vs. the real kernel: lab runs c01/c03/c05/c07 (Linux 6.18 upstream MPTCP, default scheduler,
CUBIC) replayed with their configured rates/delays/buffers and the upstream-default model. Goodput and
per-path byte share must be within 10 % of what the captures measured (results.json)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from _paths import SHARED_TRACES, needs

from workbench.scenario import lab_scenario

LAB = SHARED_TRACES / "lab"
# When the client's path manager sent the MP_JOIN, after it had the initial SYN-ACK: from the join
# SYN's time in each server.pcap (t_syn2 - owd_lte - owd_wifi). The upstream PM does not join at once.
JOIN_DELAY_MS = {"c01": 101.4, "c03": 21.3, "c05": 121.8, "c07": 101.4}


# Known model-vs-kernel gaps of the lte share (issue 13). c07's (0.189 vs 0.161 observed) closed once a
# writer blocked on the MPTCP send buffer waits for a third of it to free, as sk_stream_write_space does.
LTE_SHARE_KNOWN_GAP: set[str] = set()


def lab_replay(name: str):
    sc = lab_scenario(LAB / name / "results.json")  # upstream default scheduler, CUBIC, upstream receiver
    sc.join_after_ns = int(JOIN_DELAY_MS[name] * 1e6)
    r = sc.run(duration_ns=30_000_000_000).detail  # the model's ReplayResult
    return r, json.loads((LAB / name / "results.json").read_text())["measured"]["summary"]


@pytest.mark.slow
@needs(LAB)
@pytest.mark.parametrize("name", ["c01", "c03", "c05", "c07"])
def test_upstream_model_matches_kernel_goodput_and_shares(name: str) -> None:
    r, m = lab_replay(name)
    assert r.summary["completed"]
    rcv = r.events.filter((pl.col("point") == "rcv") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    by_path = dict(rcv.group_by("path").agg(pl.col("payload_bytes").sum()).iter_rows())
    share_wifi = by_path["wifi"] / (by_path["wifi"] + by_path["lte"])
    goodput_mbps = r.summary["delivered_bytes"] * 8e3 / r.summary["last_delivery_ns"]
    assert goodput_mbps == pytest.approx(m["goodput_mbps"], rel=0.10)
    assert share_wifi == pytest.approx(m["share_path1"], rel=0.10)
    lte_ok = 1 - share_wifi == pytest.approx(m["share_path2"], rel=0.10)
    if name in LTE_SHARE_KNOWN_GAP:
        assert not lte_ok, f"{name}: the lte share now agrees: remove it from LTE_SHARE_KNOWN_GAP"
    else:
        assert lte_ok, (name, 1 - share_wifi, m["share_path2"])
