"""`summarize`: the flat dict of headline numbers, and metrics at 100k+ rows."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest
from _events import MS, SYN, events, row, samples, seg

from workbench.capture.schema import PACKET_EVENTS
from workbench.errors import InputError
from workbench.metrics import main_connection, ooo_segments, summarize


# Replay-like connection with both points (see test_metrics_throughput._pair for the delivery times):
#   [0,1000) wifi snd 0 rcv 10; [1000,2000) lte snd 1 rcv 50 and reinjected on wifi snd 20 rcv 30;
#   [2000,3000) wifi snd 2 rcv 12; [3000,4000) wifi snd 3 rcv 13 (data_fin). SYN at -10 ms.
# Deliverable: 10, 30, 30, 30 -> OOO delays 0, 0 (reinjection), 18, 17 -> mean 8.75, max 18.
# Goodput: 4000 B over -10..30 ms = 40 ms -> 0.8 Mbit/s; completion 0.04 s.
# Sender side: wifi 4 segments (4000 B), lte 1 (1000 B) -> shares 0.8 / 0.2; 1 reinjection.
def _conn() -> pl.DataFrame:
    rows = [row(-10, dir="c2s", point="snd", flags=SYN)]
    for i, (ts, tr, sf) in enumerate([(0, 10, 0), (1, 50, 1), (2, 12, 0), (3, 13, 0)]):
        p = "wifi" if sf == 0 else "lte"
        rows += [seg(ts, i * 1000, 1000, point="snd", subflow=sf, path=p, owd_ns=None),
                 seg(tr, i * 1000, 1000, subflow=sf, path=p, owd_ns=(tr - ts) * MS, data_fin=i == 3)]
    rows += [seg(20, 1000, 1000, point="snd", is_reinject=True),
             seg(30, 1000, 1000, is_reinject=True, owd_ns=10 * MS)]
    return events(rows)


def test_summarize_headline_numbers() -> None:
    s = summarize(_conn())
    assert s["conn"] == 0 and s["data_dir"] == "s2c"
    assert s["goodput_mbps"] == pytest.approx(0.8)
    assert s["completion_s"] == pytest.approx(0.04)
    assert s["ooo_n"] == 4 and s["duplicates"] == 1
    assert s["ooo_mean_ms"] == pytest.approx(8.75)
    assert s["ooo_max_ms"] == pytest.approx(18.0)
    assert s["ooo_p50_ms"] == pytest.approx(8.5)
    assert s["ooo_queue_max_bytes"] == 2000
    assert s["share_wifi"] == pytest.approx(0.8) and s["share_lte"] == pytest.approx(0.2)
    assert s["reinjections"] == 1 and s["reinjections_wifi"] == 1 and s["retrans"] == 0
    # 1000 of the 5000 sent bytes were the reinjected copy.
    assert s["redundant_fraction"] == pytest.approx(0.2)
    assert s["app_delay_max_ms"] == pytest.approx(29.0)
    assert s["owd_p50_ms_lte_s2c"] == pytest.approx(49.0)
    # No ACK rows and no timestamps: no RTT; no samples: no burstiness.
    assert s["rtt_method"] is None
    assert s["free_cwnd_mean_segments"] is None
    assert all(isinstance(v, (int, float, str, bool)) or v is None for v in s.values())


def test_summarize_with_samples_and_rtt() -> None:
    ev = pl.concat([_conn(), events([row(40, dir="c2s", point="rcv", ack=1001)])])
    sm = samples([{"t_ms": 5, "cwnd_segments": 10.0, "inflight_segments": 3, "rcv_buf_bytes": 777}])
    s = summarize(ev, sm)
    assert s["rcv_buf_max_bytes"] == 777
    assert s["free_cwnd_mean_segments"] == pytest.approx(7.0) and s["fast_path"] == "wifi"
    # The wifi segment [0,1000) has seq 1..1001, sent at 0 and ACKed at 40 -> 40 ms (seq/ack).
    assert s["rtt_method"] == "seq" and s["rtt_min_ms_wifi"] == pytest.approx(40.0)


def test_summarize_sender_only_capture_and_empty_input() -> None:
    # A server capture of a download: no receiver rows -> no OOO/goodput/app delay, but path shares,
    # seq/ack RTT and send bursts are there. wifi sends at 0, 2, 3, 20 ms: bursts 1, 2 (gap 1 ms
    # starts a new one, so 2 and 3 are separate: sizes 1, 1, 1, 1), lte one burst of 1.
    ev = pl.concat([_conn().filter(pl.col("point") == "snd"),
                    events([row(40, dir="c2s", point="rcv", ack=1001)])])
    s = summarize(ev)
    assert s["goodput_mbps"] is None and s["ooo_n"] is None and s["app_delay_mean_ms"] is None
    assert s["share_wifi"] == pytest.approx(0.8)
    assert s["rtt_method"] == "seq" and s["rtt_p50_ms_wifi"] == pytest.approx(40.0)
    assert s["burst_segments_max"] == 1
    with pytest.raises(InputError):
        summarize(events([]))


def test_main_connection_and_explicit_conn() -> None:
    small = events([seg(1, 0, 10, conn=3), seg(2, 10, 10, conn=3)])
    both = pl.concat([small, _conn()])
    assert main_connection(both) == 0
    assert summarize(both)["conn"] == 0
    s3 = summarize(both, conn=3)
    assert s3["conn"] == 3 and s3["ooo_n"] == 2 and s3["goodput_mbps"] is not None
    with pytest.raises(InputError):
        summarize(both, conn=7)


def _big(n: int) -> pl.DataFrame:
    """n segments of 1400 B sent 1 ms apart; every 10th over a 40 ms path, the rest over 10 ms."""
    k = np.arange(n, dtype=np.int64)
    slow = (k % 10) == 0
    owd = np.where(slow, 40, 10) * MS
    t_snd = k * MS
    mss = 1400

    def mk(t: np.ndarray, point: str) -> pl.DataFrame:
        return pl.DataFrame({
            "t_ns": t, "conn": np.zeros(n, np.uint32), "subflow": slow.astype(np.uint32),
            "path": np.where(slow, "lte", "wifi"), "dir": ["s2c"] * n, "point": [point] * n,
            "seq": (k * mss + 1).astype(np.uint32), "ack": np.zeros(n, np.uint32),
            "flags": np.full(n, 0x10, np.uint16), "payload_bytes": np.full(n, mss, np.uint32),
            "frame_bytes": np.full(n, mss + 52, np.uint32), "rwnd_bytes": np.full(n, 1 << 20, np.uint64),
            "dsn": (k * mss).astype(np.uint64), "data_ack": None, "data_fin": np.zeros(n, bool),
            "is_retrans": np.zeros(n, bool), "is_reinject": np.zeros(n, bool), "ts_val": None, "ts_ecr": None,
            "owd_ns": owd if point == "rcv" else None,
        }).cast(PACKET_EVENTS)  # type: ignore[arg-type]

    return pl.concat([mk(t_snd, "snd"), mk(t_snd + owd, "rcv")]).sort("t_ns")


@pytest.mark.slow
def test_large_table_exact_and_fast() -> None:
    # Fast segment k waits for the slow segment j = 10*floor(k/10) (arrives j+40 vs k+10):
    # delay 30 - (k - j) ms for k - j = 1..9 -> 29..21; slow segments 0. Mean = (270 - 45)/10 = 22.5.
    ev = _big(150_000)
    t0 = time.perf_counter()
    seg_df = ooo_segments(ev)
    s = summarize(ev)
    elapsed = time.perf_counter() - t0
    assert seg_df.height == 150_000
    assert s["ooo_mean_ms"] == pytest.approx(22.5)
    assert s["ooo_max_ms"] == pytest.approx(29.0)
    # Sorted delays: 15000 each of 0, 21, ..., 29; the median sits between rank 74999 (a 24) and
    # 75000 (a 25) -> 24.5 with linear interpolation.
    assert s["ooo_p50_ms"] == pytest.approx(24.5)
    assert s["share_lte"] == pytest.approx(0.1)
    # Generous bound (the machine is shared); a per-row Python loop would take minutes.
    assert elapsed < 30
