"""STMS §5.1.2 burstiness (free cwnd of the fast subflow at each ACK) and send-burst sizes."""

from __future__ import annotations

import polars as pl
import pytest
from _events import MS, events, samples, seg

from workbench.metrics import (
    buffer_series,
    buffer_summary,
    burst_summary,
    burstiness,
    fast_subflows,
    free_cwnd_series,
    send_bursts,
)


# Subflow 0 (wifi) has srtt 10 ms, subflow 1 (lte) 50 ms -> subflow 0 is the fast one.
# Its ACK samples: cwnd/inflight 10/4 -> 6, 10/10 -> 0, 12/2 -> 10, 8/9 -> -1 floored to 0.
# mean = (6 + 0 + 10 + 0) / 4 = 4, peak 10. The periodic sample of subflow 0 (free 30) and the
# slow subflow's ACK samples (free 40) must be ignored.
def _samples():
    return samples([
        {"t_ms": 1, "subflow": 0, "cwnd_segments": 10.0, "inflight_segments": 4, "srtt_ns": 10 * MS},
        {"t_ms": 2, "subflow": 0, "cwnd_segments": 10.0, "inflight_segments": 10, "srtt_ns": 11 * MS},
        {"t_ms": 3, "subflow": 0, "cwnd_segments": 12.0, "inflight_segments": 2, "srtt_ns": 9 * MS},
        {"t_ms": 4, "subflow": 0, "cwnd_segments": 8.0, "inflight_segments": 9, "srtt_ns": 10 * MS},
        {"t_ms": 5, "subflow": 0, "kind": "periodic", "cwnd_segments": 30.0, "inflight_segments": 0},
        {"t_ms": 1, "subflow": 1, "path": "lte", "cwnd_segments": 40.0, "inflight_segments": 0,
         "srtt_ns": 50 * MS},
        {"t_ms": 6, "subflow": 1, "path": "lte", "cwnd_segments": 40.0, "inflight_segments": 0,
         "srtt_ns": 49 * MS},
    ])


def test_fast_subflow_is_lowest_median_srtt() -> None:
    f = fast_subflows(_samples()).row(0, named=True)
    assert (f["subflow"], f["path"]) == (0, "wifi")
    assert f["srtt_p50_ms"] == pytest.approx(10.0)


def test_free_cwnd_mean_and_peak() -> None:
    s = free_cwnd_series(_samples())
    assert s["free_cwnd_segments"].to_list() == [6.0, 0.0, 10.0, 0.0]
    b = burstiness(_samples()).row(0, named=True)
    assert (b["subflow"], b["n_acks"]) == (0, 4)
    assert b["free_cwnd_mean_segments"] == pytest.approx(4.0)
    assert b["free_cwnd_peak_segments"] == pytest.approx(10.0)


def test_fast_subflow_follows_srtt_not_index() -> None:
    # Swap the srtts: now subflow 1 is fast (median 10 ms) -> its free cwnd 40 at both ACKs.
    sm = _samples().with_columns(pl.when(pl.col("subflow") == 1).then(pl.lit(10 * MS)).otherwise(pl.lit(50 * MS))
                         .alias("srtt_ns"))
    b = burstiness(sm).row(0, named=True)
    assert (b["subflow"], b["path"]) == (1, "lte")
    assert b["free_cwnd_mean_segments"] == pytest.approx(40.0)


def test_send_bursts_split_at_gap_threshold() -> None:
    # Subflow 0 sends at 0, 0.2, 0.5 (burst of 3), 5, 5.9 (gap 0.9 < 1: burst of 2), 6.9 (gap exactly
    # 1 ms: a new burst of 1). Subflow 1 sends at 0.1 and 0.3 (own burst of 2: gaps are per subflow).
    ev = events([
        seg(0.0, 0, 100, point="snd"), seg(0.2, 100, 100, point="snd"), seg(0.5, 200, 100, point="snd"),
        seg(5.0, 300, 100, point="snd"), seg(5.9, 400, 100, point="snd"), seg(6.9, 500, 100, point="snd"),
        seg(0.1, 600, 50, point="snd", subflow=1, path="lte"),
        seg(0.3, 650, 50, point="snd", subflow=1, path="lte"),
        seg(3.0, 0, 100),  # receiver row: not a send
    ])
    b = send_bursts(ev)
    assert b.filter(pl.col("subflow") == 0)["segments"].to_list() == [3, 2, 1]
    assert b.filter(pl.col("subflow") == 1)["segments"].to_list() == [2]
    assert b.filter(pl.col("subflow") == 1)["bytes"].to_list() == [100]
    s = {r["subflow"]: r for r in burst_summary(b).iter_rows(named=True)}
    assert s[0]["n_bursts"] == 3 and s[0]["burst_segments_max"] == 3
    assert s[0]["burst_segments_mean"] == pytest.approx(2.0)
    # A 5 ms threshold merges all of subflow 0's sends (largest gap 4.5 ms) into one burst of 6.
    wide = send_bursts(ev, gap_ns=5 * MS)
    assert wide.filter(pl.col("subflow") == 0)["segments"].to_list() == [6]


def test_empty_inputs() -> None:
    assert burstiness(samples([])).height == 0
    assert send_bursts(events([seg(1, 0, 10)])).height == 0


def test_buffer_series_dedupes_subflow_rows_and_prefers_periodic() -> None:
    # Two subflow rows per periodic sample repeat the connection-level values; ACK samples are ignored
    # when periodic ones exist. snd_buf: 100 then 300 -> mean 200, max 300.
    sm = samples([
        {"t_ms": 0, "kind": "periodic", "subflow": 0, "snd_buf_bytes": 100, "rcv_ooo_bytes": 5},
        {"t_ms": 0, "kind": "periodic", "subflow": 1, "snd_buf_bytes": 100, "rcv_ooo_bytes": 5},
        {"t_ms": 10, "kind": "periodic", "subflow": 0, "snd_buf_bytes": 300, "rcv_ooo_bytes": 0},
        {"t_ms": 10, "kind": "periodic", "subflow": 1, "snd_buf_bytes": 300, "rcv_ooo_bytes": 0},
        {"t_ms": 5, "kind": "ack", "subflow": 0, "snd_buf_bytes": 10_000},
    ])
    s = buffer_series(sm)
    assert s["t_ns"].to_list() == [0, 10 * MS] and s["snd_buf_bytes"].to_list() == [100, 300]
    b = buffer_summary(sm).row(0, named=True)
    assert b["snd_buf_mean_bytes"] == pytest.approx(200.0) and b["snd_buf_max_bytes"] == 300
    assert b["rcv_ooo_max_bytes"] == 5
