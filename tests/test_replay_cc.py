"""Congestion control unit checks of the compiled CCs (`workbench_core.CcGroup`, the ones the engine
runs) against their Linux / RFC formulas worked by hand, and each CC end to end in a whole replay."""

from __future__ import annotations

import polars as pl
import pytest
import workbench_core

from workbench.replay import ConnectionConfig, Finite, PathConfig, run_replay
from workbench.schedulers import get

MS = 1_000_000


def group(name: str, *subflows: tuple[int, int, float]) -> workbench_core.CcGroup:
    """A CC over established subflows given as (cwnd, ssthresh, srtt in ms)."""
    g = workbench_core.CcGroup(name, len(subflows))
    for k, (cwnd, ssthresh, srtt_ms) in enumerate(subflows):
        g.set(k, cwnd=cwnd, ssthresh=ssthresh, srtt_us8=int(srtt_ms * 1000) << 3, min_rtt_us=int(srtt_ms * 1000),
              established=True)
    return g


def cwnd(g: workbench_core.CcGroup, k: int = 0) -> int:
    return g.subflow(k)["cwnd"]


def grow_windows(g: workbench_core.CcGroup, n: int) -> int:
    """Whole segments subflow 0's cwnd grew over ``n`` windows of single-segment ACKs."""
    start = cwnd(g)
    for _ in range(n):
        for _ in range(cwnd(g)):
            g.cong_avoid(0, 1, 0)
    return cwnd(g) - start


def test_reno_slow_start_and_avoidance_and_halving() -> None:
    g = group("reno", (10, 100, 20))
    g.cong_avoid(0, 5, 0)
    assert cwnd(g) == 15  # slow start: +1 per acked segment
    g.set(0, cwnd=40, ssthresh=40)
    # avoidance: one segment per window acked: 40 + 41 + 42 + 43 ACKs -> 44
    assert grow_windows(g, 4) == 4
    assert g.ssthresh(0) == 44 // 2


@pytest.mark.parametrize("name", ["lia", "olia"])
def test_coupled_increase_on_two_equal_paths_is_a_quarter_segment_per_window(name: str) -> None:
    # RFC 6356: alpha = tot x max(w/rtt^2) / (sum w/rtt)^2 = 80 (40/r^2) / (80/r)^2 = 1/2 for two equal
    # subflows of 40 -> each grows by alpha/cwnd_total = 1/160 per ACK = a quarter segment per window of
    # 40 ACKs (OLIA: w/(sum w)^2 = 40/80^2, the same, with no best path outside the largest windows)
    g = group(name, (40, 10, 20), (40, 10, 20))
    assert grow_windows(g, 8) == 2
    assert g.ssthresh(0) == 42 // 2
    assert cwnd(g, 1) == 40  # the other subflow got no ACK


@pytest.mark.parametrize("name", ["lia", "olia"])
def test_a_coupled_cc_alone_is_reno(name: str) -> None:
    # the second subflow is not established: it does not count, the first grows as Reno (1 per window)
    g = group(name, (40, 10, 20), (40, 10, 20))
    g.set(1, established=False)
    assert grow_windows(g, 4) == 4


def test_cubic_beta_and_fast_convergence() -> None:
    g = group("cubic", (100, 50, 20))
    assert g.ssthresh(0) == 70  # beta = 717/1024: 100 x 717 / 1024 = 70.02
    assert g.subflow(0)["cc_state"]["last_max_cwnd"] == 100
    g.set(0, cwnd=80)
    assert g.ssthresh(0) == 56  # 80 x 717 / 1024 = 56.02
    # fast convergence: a loss below W_max remembers W_max = 80 x (1024 + 717) / 2048 = 68.0078125
    assert g.subflow(0)["cc_state"]["last_max_cwnd"] == pytest.approx(80 * (1024 + 717) / 2048)


@pytest.mark.parametrize("cc", ["reno", "cubic", "lia", "olia"])
def test_every_cc_completes_a_lossy_two_path_transfer(cc: str) -> None:
    paths = [PathConfig.constant("a", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=50_000, loss=0.002),
             PathConfig.constant("b", rate_bps=10e6, owd_ns=30 * MS, buffer_bytes=80_000, loss=0.002)]
    r = run_replay(paths, get("minrtt"), workload=Finite(size_bytes=3_000_000), conn=ConnectionConfig(cc=cc),
                   seed=1)
    assert r.summary["completed"]
    assert r.delivery_rate_bps > 8e6


def cwnd_turns(r) -> list[int]:
    """The ACK samples' cwnd where it turns: peaks and troughs, in order."""
    a = r.samples.filter(pl.col("kind") == "ack")["cwnd_segments"].to_list()
    steps = [a[0]]
    for v in a[1:]:
        if v != steps[-1]:
            steps.append(v)
    return [int(steps[i]) for i in range(1, len(steps) - 1)
            if (steps[i] - steps[i - 1]) * (steps[i + 1] - steps[i]) < 0]


@pytest.mark.parametrize(("cc", "cut"), [("reno", lambda w: max(w >> 1, 2)),
                                         ("cubic", lambda w: max(w * 717 // 1024, 2))])
def test_each_cut_in_a_whole_run_is_the_ccs_decrease(cc: str, cut) -> None:
    """One path, a small buffer, no random loss: each loss is found at the cwnd's peak, and the window
    Recovery (PRR) ends at is the CC's ssthresh of that peak: Reno w/2, CUBIC w x 717/1024."""
    path = PathConfig.constant("p", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=40_000)
    r = run_replay([path], get("minrtt"), workload=Finite(size_bytes=6_000_000),
                   conn=ConnectionConfig.single_path_tcp(ConnectionConfig(cc=cc)), seed=1)
    assert r.summary["completed"]
    turns = cwnd_turns(r)
    peaks, troughs = turns[0::2], turns[1::2]
    assert len(troughs) >= 2 and all(t < p for p, t in zip(peaks, troughs, strict=False)), turns
    assert troughs == [cut(p) for p in peaks[:len(troughs)]], turns
