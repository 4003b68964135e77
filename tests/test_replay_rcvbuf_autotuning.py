"""Receive-buffer autotuning in the model (the compiled receive side, native/engine/src/receiver.rs:
mptcp_rcv_space_adjust and tcp_rcvbuf_grow), through `workbench_core.run_receiver`: the step against the
real kernel's own numbers, and what the advertised window does over random paths in whole runs.

The kernel's numbers are the skmem ``rb`` fields `ss -tmiM` printed in the client's namespace during a
kernel-backend run of the fidelity configuration buf-1bdp (Linux 6.18.44, benchmarks/kernel_sockets.py):
the MPTCP socket's buffer after its second step (rcv_space 28480 -> 52432) and the joined subflow's
after the same step, which it took from its own first space (14480). Both sockets were at the default
scaling ratio of 128/256 then, so the buffer is exactly twice the window.
"""

from __future__ import annotations

import workbench_core
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay import Bulk, ConnectionConfig, PathConfig, run_replay
from workbench.replay.tables import record_frame
from workbench.schedulers import get

_MS = 1_000_000
_MSS = 1424
_RTT = 10 * _MS


def _measurements(first_space: int, reads: list[int], *, joined: bool = False, buf_init: int = 80_478,
                  rcv_buf: int = 3_862_953) -> tuple[tuple, list[tuple]]:
    """The application reads ``reads[i]`` bytes (in order, in 1424-byte segments, a shorter one first)
    in the i-th measurement, which ends at 20 ms + i x 10 ms with the segment completing the read. The
    receiver's RTT is 10 ms: the last segment of the first read echoes a timestamp of 10 ms (none
    before it does), so the first measurement (from 0) is taken at 20 ms, and each later one one RTT
    after the last. ``joined``: a second subflow whose handshake ends at 25 ms (its buffer is set up
    then, with the first space) carries every other segment from the second read on (echoing no
    timestamp). Returns the connection's and the subflows' final state."""
    events: list[tuple[int, int, int, int, int, int, int, int]] = []
    dsn, idx = 0, [0, 0]
    for i, n in enumerate(reads):
        t_end = 20 * _MS + i * _RTT
        t_start = 1 * _MS if i == 0 else t_end - _RTT + 6 * _MS
        sizes = ([n % _MSS] if n % _MSS else []) + [_MSS] * (n // _MSS)
        for j, plen in enumerate(sizes):
            last = j == len(sizes) - 1
            sf = j % 2 if joined and i > 0 else 0
            ecr = 10 * _MS if sf == 0 and (i > 0 or last) else 0
            events.append((t_end if last else t_start + j * 10_000, 0, sf, idx[sf], dsn, plen, 0, ecr))
            idx[sf] += 1
            dsn += plen
    if joined:
        events.append((25 * _MS, 1, 1, 0, 0, 0, 0, 0))
    cfg = workbench_core.ReceiverConfig(rcv_buf_bytes=rcv_buf, wnd_init_bytes=64_240, buf_init_bytes=buf_init,
                                        rcv_space_init_bytes=first_space, mss_bytes=_MSS, delayed_ack=False,
                                        delack_ns=40 * _MS, quickack_on_meta_ooo=False, wnd_incr_bytes=2 * 1448,
                                        init_later=[False, joined] if joined else [False])
    _, meta, sfs = workbench_core.run_receiver(cfg, events)
    assert meta[0] == sum(reads)
    return meta, sfs


def test_the_step_reproduces_the_kernels_buffers_to_the_byte() -> None:
    """First space 14480. The first step reads 28480 B: 2 x 28480 + 2 x (2 x 28480 x 14000 // 14480)
    = 167102 for the socket and subflow 0; subflow 1 has no buffer yet and stays out. The second reads
    52432 B: the MPTCP socket's window from its space 28480, subflow 1's from its own first space."""
    meta, sfs = _measurements(14_480, [28_480, 52_432], joined=True)
    (_, _, _, wnd_cap, space, _), (sf0, sf1) = meta, sfs
    assert space == 52_432 and sf0[3] == sf1[3] == 52_432
    assert 2 * wnd_cap == 562_492           # the MPTCP socket's rb
    assert 2 * sf1[2] == 1_309_116          # the joined subflow's rb (its first space)
    assert sf0[2] == wnd_cap                # subflow 0 followed along from the socket's space
    first, (first_sf0,) = _measurements(14_480, [28_480])
    assert first[3] == first_sf0[2] == 167_102


def test_the_step_doubles_what_was_read_and_only_when_more_was() -> None:
    """Reading twice the space: 2 x 20000 + 2 x (2 x 20000 x 10000 // 10000) = 120000 (room for slow
    start to double again). Reading no more than the space changes nothing, but a new measurement
    starts (mptcp_rcv_space_adjust's new_measure): 30000 B read after 20000 gives
    2 x 30000 + 2 x (2 x 30000 x 10000 // 20000) = 120000, not the 400000 that 50000 B would."""
    meta, _ = _measurements(10_000, [20_000])
    assert (meta[3], meta[4]) == (120_000, 20_000)
    meta, _ = _measurements(20_000, [20_000])
    assert (meta[3], meta[4]) == (80_478, 20_000)  # tcp_rmem[1]'s window still
    meta, (sf0,) = _measurements(20_000, [20_000, 30_000])
    assert (meta[3], meta[4], sf0[2], sf0[3]) == (120_000, 30_000, 120_000, 30_000)
    capped, _ = _measurements(10_000, [20_000], rcv_buf=100_000)
    assert capped[3] == 100_000  # never beyond tcp_rmem[2]


def _conn(*, autotuned: bool, rcv_buf_bytes: int = 3_862_953) -> ConnectionConfig:
    return ConnectionConfig(send_buf_bytes=None, rcv_buf_bytes=rcv_buf_bytes, quickack_on_meta_ooo=False,
                            rcv_wnd_init_bytes=64_240, rcv_buf_init_bytes=80_478 if autotuned else None)


def _windows(rate_mbps: float, owd_ms: int, *, autotuned: bool, rcv_buf_bytes: int = 3_862_953,
             seconds: float = 2.0) -> list[tuple[int, int]]:
    paths = [PathConfig.constant("p1", rate_bps=rate_mbps * 1e6, owd_ns=owd_ms * _MS, buffer_bytes=200_000)]
    r = run_replay(paths, get("upstream"), workload=Bulk(), conn=_conn(autotuned=autotuned, rcv_buf_bytes=rcv_buf_bytes),
                   duration_ns=int(seconds * 1e9))
    assert r.recorder is not None
    acks = record_frame(r.recorder, "ack")
    return list(zip(acks["t_ns"].to_list(), acks["rwnd_bytes"].to_list(), strict=True))


def test_the_window_starts_at_what_tcp_rmem1_allows_and_grows_to_tcp_rmem2() -> None:
    tuned = _windows(20, 10, autotuned=True)
    fixed = _windows(20, 10, autotuned=False)
    early = [w for t, w in tuned if t < 60 * _MS]
    assert early and max(early) <= 80_478
    # grown well past it (to about twice what a measurement reads, not to tcp_rmem[2]: nothing here
    # asks for more), within what tcp_rmem[2] allows
    assert 4 * 80_478 < max(w for _, w in tuned) <= 3_862_953
    # autotuning holds the window below the fixed buffer's while the transfer starts
    assert max(w for t, w in tuned if t < 150 * _MS) < max(w for t, w in fixed if t < 150 * _MS)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(rate_mbps=st.sampled_from([2, 10, 30]), owd_ms=st.integers(2, 60),
       rcv_buf_bytes=st.sampled_from([100_000, 400_000, 3_862_953]))
def test_the_window_never_exceeds_the_largest_buffer(rate_mbps: int, owd_ms: int, rcv_buf_bytes: int) -> None:
    windows = [w for _, w in _windows(rate_mbps, owd_ms, autotuned=True, rcv_buf_bytes=rcv_buf_bytes, seconds=1.5)]
    assert windows, "no ACK reached the sender"
    assert max(windows) <= rcv_buf_bytes
    assert min(windows) >= 0
