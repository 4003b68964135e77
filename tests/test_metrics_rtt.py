"""RTT samples (TCP timestamps; seq/ack with Karn's rule) and one-way-delay summaries."""

from __future__ import annotations

import polars as pl
import pytest
from _events import MS, events, row, seg

from workbench.metrics import owd_summary, rtt_samples, rtt_seq_ack, rtt_summary, rtt_timestamps


def _ms(df: pl.DataFrame) -> list[float]:
    return (df["rtt_ns"] / MS).to_list()


def test_timestamp_echo_at_the_client() -> None:
    # Client capture. The client sends ACKs with TSval 7 at 100 and 101 ms (same 1 ms tick): the
    # sample starts at the first one. The server's data echoing TSecr 7 is received at 130 and 140:
    # the first echo after 100 counts -> RTT 30 ms, stamped at 130. An echo of 7 at 95 (before the
    # send) and the server's echo of an unknown TSval are ignored.
    ev = events([
        row(95, dir="s2c", point="rcv", ts_ecr=7, ts_val=900),
        row(100, dir="c2s", point="snd", ts_val=7, ts_ecr=900),
        row(101, dir="c2s", point="snd", ts_val=7, ts_ecr=900),
        seg(130, 0, 1000, ts_val=901, ts_ecr=7),
        seg(140, 1000, 1000, ts_val=901, ts_ecr=7),
        seg(150, 2000, 1000, ts_val=902, ts_ecr=55),
    ])
    r = rtt_timestamps(ev)
    assert r["vantage"].to_list() == ["client"]
    assert _ms(r) == [30.0]
    assert r["t_ns"].to_list() == [130 * MS]


def test_timestamp_echo_at_the_server_and_per_subflow() -> None:
    # Server capture: it sends data with TSval 50 at 0 ms on subflow 0 and TSval 50 at 1 ms on
    # subflow 1 (separate subflows have separate timestamp streams). Client ACKs echo 50 at 25 ms on
    # subflow 0 and at 61 ms on subflow 1.
    ev = events([
        seg(0, 0, 1000, point="snd", ts_val=50),
        seg(1, 1000, 1000, point="snd", subflow=1, path="lte", ts_val=50),
        row(25, dir="c2s", point="rcv", ts_ecr=50, ts_val=3),
        row(61, dir="c2s", point="rcv", subflow=1, path="lte", ts_ecr=50, ts_val=3),
    ])
    r = rtt_timestamps(ev).sort("subflow")
    assert r["vantage"].to_list() == ["server", "server"]
    assert _ms(r) == [25.0, 60.0]
    assert r["path"].to_list() == ["wifi", "lte"]


# Sender (server) vantage, subflow 0:
#   A [1,1001)    sent 0   -> first ACK >= 1001 at 20 -> 20 ms
#   B [1001,2001) sent 1, retransmitted at 100 -> Karn: no sample (neither original nor retransmission)
#   C [2001,3001) sent 2   -> first ACK >= 3001 at 120 -> 118 ms
# ACKs (c2s, rcv): 1001 at 20, 1001 at 40 (dup), 3001 at 120.
def _karn() -> pl.DataFrame:
    return events([
        seg(0, 0, 1000, point="snd", seq=1),
        seg(1, 1000, 1000, point="snd", seq=1001),
        seg(2, 2000, 1000, point="snd", seq=2001),
        row(20, dir="c2s", point="rcv", ack=1001),
        row(40, dir="c2s", point="rcv", ack=1001),
        seg(100, 1000, 1000, point="snd", seq=1001, is_retrans=True),
        row(120, dir="c2s", point="rcv", ack=3001),
    ])


def test_karn_excludes_retransmitted_segment() -> None:
    r = rtt_seq_ack(_karn())
    assert _ms(r) == [20.0, 118.0]
    assert r["vantage"].to_list() == ["server", "server"] and r["method"].to_list() == ["seq", "seq"]


def test_karn_excludes_segments_overlapped_by_a_coalesced_retransmission() -> None:
    # The retransmission re-segments [501,1501): it overlaps both A and B, so only C gives a sample.
    ev = _karn().filter(~pl.col("is_retrans"))
    ev = pl.concat([ev, events([seg(100, 500, 1000, point="snd", seq=501, is_retrans=True)])]).sort("t_ns")
    assert _ms(rtt_seq_ack(ev)) == [118.0]


def test_seq_ack_needs_the_sender_side() -> None:
    receiver_only = _karn().with_columns(
        pl.when(pl.col("point") == "snd").then(pl.lit("rcv")).otherwise(pl.lit("snd"))
        .cast(pl.Enum(["snd", "rcv", "drop"])).alias("point"))
    assert rtt_seq_ack(receiver_only).height == 0


def test_rtt_summary_per_path() -> None:
    ev = _karn()
    s = rtt_summary(rtt_samples(ev)).row(0, named=True)
    assert s["method"] == "seq" and s["n"] == 2
    assert s["rtt_min_ms"] == pytest.approx(20.0)
    assert s["rtt_p50_ms"] == pytest.approx(69.0)
    assert s["rtt_mean_ms"] == pytest.approx(69.0)
    assert s["rtt_p95_ms"] == pytest.approx(20 + 0.95 * 98)


def test_owd_summary_per_path_and_direction() -> None:
    # wifi s2c OWDs 10, 20, 30, 40 ms -> min 10, p50 25, p95 10+0.95*3*10 = 38.5, max 40; lte c2s 5.
    ev = events([seg(i, i * 10, 10, owd_ns=(i + 1) * 10 * MS) for i in range(4)]
                + [row(9, dir="c2s", path="lte", subflow=1, owd_ns=5 * MS), seg(10, 40, 10)])
    s = {(r["path"], r["dir"]): r for r in owd_summary(ev).iter_rows(named=True)}
    w = s[("wifi", "s2c")]
    assert (w["n"], w["owd_min_ms"], w["owd_p50_ms"], w["owd_max_ms"]) == (4, 10.0, 25.0, 40.0)
    assert w["owd_p95_ms"] == pytest.approx(38.5)
    assert s[("lte", "c2s")]["owd_p50_ms"] == 5.0
    assert owd_summary(events([seg(1, 0, 10)])).height == 0
