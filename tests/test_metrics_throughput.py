"""Goodput, completion time, application delay and per-path accounting on hand-built schedules."""

from __future__ import annotations

import polars as pl
import pytest
from _events import MS, SYN, events, row, seg

from workbench.metrics import app_delay, app_delay_summary, goodput, goodput_series, path_stats, start_times


# Known delivery schedule at the receiver (SYN seen at t = 0):
#   [0,1000)     arrives 10  -> delivered 10
#   [2000,3000)  arrives 20  -> delivered 50 (waits for [1000,2000))
#   [1000,2000)  arrives 50  -> delivered 50
#   [3000,6000)  arrives 250 -> delivered 250
# 100 ms bins from t=0: [0,100): 3000 B -> 3000*8/0.1 = 240 kbit/s; [100,200): 0; [200,300): 3000 B.
# Overall: 6000 B over 0..250 ms -> 6000*8/0.25 = 192 kbit/s; completion 0.25 s.
def _schedule(with_syn: bool = True) -> pl.DataFrame:
    rows = [
        seg(10, 0, 1000),
        seg(20, 2000, 1000),
        seg(50, 1000, 1000, subflow=1, path="lte"),
        seg(250, 3000, 3000, data_fin=True),
    ]
    if with_syn:
        rows.insert(0, row(0, dir="c2s", point="snd", flags=SYN))
    return events(rows)


def test_goodput_series_known_schedule() -> None:
    s = goodput_series(_schedule())
    assert s["t_ns"].to_list() == [0, 100 * MS, 200 * MS]
    assert s["bytes"].to_list() == [3000, 0, 3000]
    assert s["rate_bps"].to_list() == pytest.approx([240_000.0, 0.0, 240_000.0])
    # 50 ms bins: [0,50): 1000 (the 2000.. and 1000.. segments are delivered at exactly 50).
    s50 = goodput_series(_schedule(), bin_ns=50 * MS)
    assert s50["bytes"].to_list() == [1000, 2000, 0, 0, 0, 3000]
    assert s50["bytes"].sum() == 6000


def test_overall_goodput_and_completion() -> None:
    g = goodput(_schedule()).row(0, named=True)
    assert g["start_ns"] == 0 and g["end_ns"] == 250 * MS and g["bytes"] == 6000
    assert g["goodput_bps"] == pytest.approx(192_000.0)
    assert g["completion_s"] == pytest.approx(0.25)
    assert g["data_fin"] is True and g["undelivered_bytes"] == 0


def test_start_falls_back_to_first_data_without_syn() -> None:
    # No SYN: start = first data observation (10 ms) -> 6000 B over 240 ms = 200 kbit/s.
    g = goodput(_schedule(with_syn=False)).row(0, named=True)
    assert g["start_ns"] == 10 * MS
    assert g["goodput_bps"] == pytest.approx(200_000.0)
    assert g["completion_s"] == pytest.approx(0.24)
    assert start_times(_schedule())["start_ns"].to_list() == [0]


def test_completion_is_null_with_a_permanent_hole() -> None:
    ev = events([row(0, dir="c2s", point="snd", flags=SYN), seg(10, 0, 1000), seg(20, 2000, 1000)])
    g = goodput(ev).row(0, named=True)
    assert g["bytes"] == 1000 and g["undelivered_bytes"] == 1000
    assert g["completion_s"] is None and g["end_ns"] == 10 * MS


# Replay-like: both points on one clock. Sender sends, receiver receives:
#   [0,1000)     snd 0 wifi,  rcv 10        -> deliverable 10 -> app delay 10
#   [1000,2000)  snd 1 lte,   rcv 50 (late); reinjected on wifi at 20, rcv 30 (first arrival)
#                                            -> deliverable 30 -> app delay 30 - 1 = 29 (from first send)
#   [2000,3000)  snd 2 wifi,  rcv 12        -> deliverable 30 -> app delay 28
#   [3000,4000)  snd 3 wifi,  rcv 13        -> deliverable 30 -> app delay 27
# mean = (10+29+28+27)/4 = 23.5 ms, max 29 ms.
def _pair() -> pl.DataFrame:
    rows = []
    for i, (ts, tr, sf) in enumerate([(0, 10, 0), (1, 50, 1), (2, 12, 0), (3, 13, 0)]):
        p = "wifi" if sf == 0 else "lte"
        rows += [seg(ts, i * 1000, 1000, point="snd", subflow=sf, path=p),
                 seg(tr, i * 1000, 1000, subflow=sf, path=p)]
    rows += [seg(20, 1000, 1000, point="snd", is_reinject=True), seg(30, 1000, 1000, is_reinject=True)]
    return events(rows)


def test_app_delay_from_first_send_to_deliverable() -> None:
    a = app_delay(_pair())
    assert dict(zip(a["dsn"].to_list(), (a["app_delay_ns"] // MS).to_list(), strict=True)) == {
        0: 10, 1000: 29, 2000: 28, 3000: 27}
    # The [1000,2000) bytes were brought by the wifi reinjection.
    assert a.filter(pl.col("dsn") == 1000)["path"].item() == "wifi"
    s = app_delay_summary(_pair()).row(0, named=True)
    assert s["app_delay_mean_ms"] == pytest.approx(23.5)
    assert s["app_delay_max_ms"] == pytest.approx(29.0)
    assert s["app_delay_n"] == 4


def test_app_delay_needs_both_points() -> None:
    receiver_only = _pair().filter(pl.col("point") == "rcv")
    assert app_delay(receiver_only).height == 0
    assert app_delay_summary(receiver_only).height == 0


def test_app_delay_uses_sender_segment_containing_the_first_byte() -> None:
    # The sender sent [0,2000) as one TSO segment at 0; the receiver got it as two 1000-byte halves.
    ev = events([seg(0, 0, 2000, point="snd"), seg(10, 0, 1000), seg(11, 1000, 1000)])
    a = app_delay(ev)
    assert (a["app_delay_ns"] // MS).to_list() == [10, 11]


# Sender-side accounting (point snd chosen automatically):
#   wifi: 3 x 1000 B at 0, 2, 20 ms, the one at 20 a reinjection -> bytes 3000, unique 2000,
#         active 20 ms -> 3000*8/0.02 = 1.2 Mbit/s
#   lte:  1 x 1000 B at 1 ms -> active period 0 -> throughput null
# shares: wifi 3000/4000 = 0.75, lte 0.25; unique: wifi 2000/3000, lte 1000/3000.
def test_path_stats_sender_side() -> None:
    ev = events([
        seg(0, 0, 1000, point="snd"), seg(1, 1000, 1000, point="snd", subflow=1, path="lte"),
        seg(2, 2000, 1000, point="snd"), seg(20, 1000, 1000, point="snd", is_reinject=True),
        seg(30, 0, 1000),  # a receiver row: not counted when the sender side is there
    ])
    ps = {r["path"]: r for r in path_stats(ev).iter_rows(named=True)}
    w, lte = ps["wifi"], ps["lte"]
    assert (w["point"], w["segments"], w["bytes"], w["unique_bytes"], w["reinjections"], w["retrans"]) == (
        "snd", 3, 3000, 2000, 1, 0)
    assert w["throughput_bps"] == pytest.approx(1_200_000.0)
    assert lte["throughput_bps"] is None
    assert w["share"] == pytest.approx(0.75) and lte["share"] == pytest.approx(0.25)
    assert w["unique_share"] == pytest.approx(2 / 3)


def test_path_stats_receiver_capture_and_retransmissions() -> None:
    # Client capture of a download: only rcv rows of the data direction.
    ev = events([
        seg(0, 0, 1000), seg(5, 1000, 1000, subflow=1, path="lte"),
        seg(9, 1000, 1000, subflow=1, path="lte", is_retrans=True),
        seg(10, 2000, 500, subflow=1, path="lte"),
    ])
    ps = {r["path"]: r for r in path_stats(ev).iter_rows(named=True)}
    assert ps["lte"]["point"] == "rcv"
    assert (ps["lte"]["bytes"], ps["lte"]["unique_bytes"], ps["lte"]["retrans"], ps["lte"]["retrans_bytes"]) == (
        2500, 1500, 1, 1000)
    assert ps["wifi"]["bytes"] == 1000


def test_app_delay_skips_bytes_never_seen_sent() -> None:
    # The sender capture lacks [1000,2000): that segment has no send time, so no app delay, instead of
    # borrowing the send time of the neighbouring [0,1000). [2000,3000) waits for it: 30 - 2 = 28.
    ev = events([
        seg(0, 0, 1000, point="snd"), seg(2, 2000, 1000, point="snd"),
        seg(10, 0, 1000), seg(12, 2000, 1000), seg(30, 1000, 1000),
    ])
    a = app_delay(ev)
    assert a["dsn"].to_list() == [0, 2000]
    assert (a["app_delay_ns"] // MS).to_list() == [10, 28]
