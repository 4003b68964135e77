"""The upstream scheduler's view of a subflow's queued memory (`wmem_queued_bytes`, the kernel's
sk_wmem_queued): tcp_tso_autosize's skb size, the per-skb overhead measured on this kernel, and what it
changes in the linger-time choice (docs/MODEL.md §6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.schedulers._upstream import SKB_OVERHEAD_BYTES, UpstreamDefault
from workbench.schedulers._upstream import wmem_queued_bytes as _wmem

MSS = 1448


@dataclass
class _Subflow:
    """The SubflowView fields the linger time reads (a stand-in: no engine state behind it)."""

    index: int = 0
    queued_bytes: int = 0
    unacked_bytes: int = 0
    pacing_rate_bps: float = 0.0
    min_rtt_ns: int = 0
    mss: int = MSS
    established: bool = True
    stale: bool = False
    backup: bool = False


def wmem_queued_bytes(sf: _Subflow) -> int:
    return _wmem(cast(Any, sf))


def _in_flight(segs: int, *, pacing_bps: float, min_rtt_ms: float = 10.0) -> _Subflow:
    return _Subflow(unacked_bytes=segs * MSS, pacing_rate_bps=pacing_bps, min_rtt_ns=int(min_rtt_ms * 1e6))


@pytest.mark.parametrize(("pacing_bps", "min_rtt_ms", "segs_per_skb"), [
    # tcp_tso_autosize: pacing bytes per 2^-10 s, at least tcp_min_tso_segs = 2
    (22.8e6, 10.0, 2),    # rtt-x3's fast subflow: 2.85 MB/s -> 2783 B -> 1.9 segments -> 2
    (100e6, 10.0, 8),     # 12.5 MB/s -> 12207 B -> 8 segments
    (400e6, 10.0, 33),    # 50 MB/s -> 48828 B -> 33 segments
    (22.8e6, 0.3, 45),    # min_rtt 300 us: 300 >> 9 = 0, the 64 KB boost -> gso_max_size / MSS = 45
    (22.8e6, 2.0, 7),     # min_rtt 2 ms: 2000 >> 9 = 3 -> +65536 >> 3 = 8192 B -> (2783 + 8192) / MSS = 7
])
def test_sent_data_sits_in_tso_autosized_skbs(pacing_bps: float, min_rtt_ms: float, segs_per_skb: int) -> None:
    n = 10 * segs_per_skb
    sf = _in_flight(n, pacing_bps=pacing_bps, min_rtt_ms=min_rtt_ms)
    assert wmem_queued_bytes(sf) == n * MSS + 10 * SKB_OVERHEAD_BYTES


def test_in_flight_weighs_what_the_kernel_showed() -> None:
    """`ss -tmi` on the kernel backend (rtt-x3, server side, 195 samples per subflow): (w - notsent) /
    (unacked x MSS) had p10-p90 1.27-1.31 on the 20 Mbit/s subflow (cwnd 41-50) and 1.29-1.31 on the
    10 Mbit/s one; the unsent queue (64 KB skbs) adds ~1 %."""
    fast = _in_flight(44, pacing_bps=1.2 * 44 * MSS * 8 / 0.027)
    slow = _in_flight(65, pacing_bps=1.2 * 65 * MSS * 8 / 0.078, min_rtt_ms=30.0)
    for sf in (fast, slow):
        assert 1.27 <= wmem_queued_bytes(sf) / sf.unacked_bytes <= 1.32
    queued = _Subflow(queued_bytes=200_000, unacked_bytes=200_000, pacing_rate_bps=20e6)
    assert 1.0 < wmem_queued_bytes(queued) / 200_000 < 1.02


@given(queued=st.integers(0, 4 << 20), in_flight=st.integers(0, 4 << 20), pacing_bps=st.floats(0, 10e9),
       min_rtt_us=st.integers(0, 2_000_000), mss=st.integers(536, 9000))
def test_overhead_is_bounded_and_grows_with_the_data(queued: int, in_flight: int, pacing_bps: float,
                                                     min_rtt_us: int, mss: int) -> None:
    sf = _Subflow(queued_bytes=queued, unacked_bytes=queued + in_flight, pacing_rate_bps=pacing_bps,
                  min_rtt_ns=min_rtt_us * 1000, mss=mss)
    w = wmem_queued_bytes(sf)
    payload = queued + in_flight
    # at least the payload; at most one overhead per 2-segment skb sent and per 64 KB queued (+ the partial ones)
    assert payload <= w <= payload + SKB_OVERHEAD_BYTES * (in_flight // (2 * mss) + queued // 65536 + 2)
    more = _Subflow(queued_bytes=queued, unacked_bytes=queued + in_flight + mss, pacing_rate_bps=pacing_bps,
                    min_rtt_ns=min_rtt_us * 1000, mss=mss)
    assert wmem_queued_bytes(more) > w


def test_a_subflow_whose_bytes_are_in_flight_looks_fuller_than_its_payload() -> None:
    """The choice the overhead changes: equal payload per unit of pacing rate, one subflow's bytes all in
    flight (2-segment skbs), the other's mostly queued. By payload they tie; the kernel's accounting picks
    the one whose bytes are queued in 64 KB skbs."""
    sched = UpstreamDefault()
    rate = 20e6
    in_flight = _Subflow(index=0, unacked_bytes=100 * MSS, pacing_rate_bps=rate, min_rtt_ns=30_000_000)
    queued = _Subflow(index=1, queued_bytes=90 * MSS, unacked_bytes=100 * MSS, pacing_rate_bps=rate,
                      min_rtt_ns=30_000_000)
    pick = sched._pick(cast(Any, [in_flight, queued]))
    assert pick is queued
    pick = sched._pick(cast(Any, [queued, in_flight]))
    assert pick is queued  # not the first one listed: the order does not decide
