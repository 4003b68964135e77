"""Congestion control unit checks against their formulas, and each CC end to end."""

from __future__ import annotations

import pytest

from workbench.replay import ConnectionConfig, Finite, PathConfig, run_replay
from workbench.replay.cc import make_cc
from workbench.schedulers import get
from workbench.testing import StubSubflow

MS = 1_000_000


def FakeSF(cwnd: int, ssthresh: int, srtt_ms: float) -> StubSubflow:
    """The shipped congestion-control test double (workbench.testing.StubSubflow)."""
    return StubSubflow(cwnd=cwnd, ssthresh=ssthresh, srtt_ms=srtt_ms)


def grow_windows(cc, sf: StubSubflow, n: int) -> int:
    """Whole segments cwnd grew over ``n`` windows of single-segment ACKs."""
    start = sf.cwnd
    for _ in range(n):
        for _ in range(sf.cwnd):
            cc.cong_avoid(sf, 1, 0)
    return sf.cwnd - start


def test_reno_slow_start_and_avoidance_and_halving() -> None:
    sf = FakeSF(10, 100, 20)
    cc = make_cc("reno", [sf])
    cc.cong_avoid(sf, 5, 0)
    assert sf.cwnd == 15  # slow start: +1 per acked segment
    sf.cwnd, sf.ssthresh = 40, 40
    assert grow_windows(cc, sf, 4) == 4
    assert cc.ssthresh(sf) == 44 // 2


@pytest.mark.parametrize("name", ["lia", "olia"])
def test_coupled_increase_on_two_equal_paths_is_a_quarter_segment_per_window(name: str) -> None:
    # RFC 6356: alpha = 1/2 for two equal subflows -> each grows by alpha/cwnd_total per ACK = 1/(4w)
    a, b = FakeSF(40, 10, 20), FakeSF(40, 10, 20)
    cc = make_cc(name, [a, b])
    for s in (a, b):
        s.cwnd_cnt = 0.0
    assert grow_windows(cc, a, 8) == 2
    assert cc.ssthresh(a) == 42 // 2


def test_cubic_beta_and_fast_convergence() -> None:
    sf = FakeSF(100, 50, 20)
    cc = make_cc("cubic", [sf])
    assert cc.ssthresh(sf) == 70  # beta = 717/1024
    assert sf.cc_state.last_max_cwnd == 100
    sf.cwnd = 80
    cc.ssthresh(sf)
    assert sf.cc_state.last_max_cwnd == pytest.approx(80 * (1024 + 717) / 2048)  # fast convergence


@pytest.mark.parametrize("cc", ["reno", "cubic", "lia", "olia"])
def test_every_cc_completes_a_lossy_two_path_transfer(cc: str) -> None:
    paths = [PathConfig.constant("a", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=50_000, loss=0.002),
             PathConfig.constant("b", rate_bps=10e6, owd_ns=30 * MS, buffer_bytes=80_000, loss=0.002)]
    r = run_replay(paths, get("minrtt"), workload=Finite(size_bytes=3_000_000), conn=ConnectionConfig(cc=cc),
                   seed=1)
    assert r.summary["completed"]
    assert r.delivery_rate_bps > 8e6
