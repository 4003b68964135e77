"""When a joined subflow starts and what window each subflow announces, against what the kernel does
(measured with the kernel backend, Linux 6.18; docs/FIDELITY.md, receive-buffer limit):

* The client's path manager sends its MP_JOINs once the MPTCP connection is fully established at the
  client, i.e. with the server's first packet after the handshake: one round trip of the initial path
  after the SYN-ACK, downloads and uploads alike (the kernel's captures: SYN-ACK at 20.5 ms, the join's
  SYN at 41.1 ms on 10 ms paths; 40.5 -> 81.3 ms on 20 ms ones). Before, the model sent them at the
  SYN-ACK.
* Each subflow announces its own window, min(the MPTCP socket's free space, its rcv_ssthresh), or the
  connection's furthest right edge when that lies further (mptcp_set_rwin): the edge never moves back.
* A joined subflow's buffer is set up at its end of the handshake (tcp_init_buffer_space); the
  connection's buffer steps before that pass it by (mptcp_rcv_space_adjust skips subflows whose
  rcvq_space.space is still 0), so a subflow that joins after the last step keeps tcp_rmem[1]'s window.
  The kernel's signature on rmem-256k: 10-21 % of the slow subflow's ACKs announce exactly 80128 bytes,
  the window of a 131072-byte buffer, in 9 of 11 runs.
"""

from __future__ import annotations

import dataclasses

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.backends import get_backend
from workbench.experiment import BulkWorkload, experiment_from_paths, stack_profile, two_way_path
from workbench.experiment._model import Experiment

MS = 1_000_000
S = 1_000_000_000
SYN, ACK = 0x002, 0x010


def _experiment(*, owd_ms: tuple[int, int], rate_mbps: tuple[float, float] = (30, 10), direction: str = "down",
                join_after_ms: int = 0, seconds: float = 0.5, **stack: object) -> Experiment:
    paths = [two_way_path(f"p{k + 1}", rate_bps=rate_mbps[k] * 1e6, owd_ns=owd_ms[k] * MS,
                          buffer_bytes=int(rate_mbps[k] * 1e6 / 8 * 2 * owd_ms[k] / 1e3)) for k in range(2)]
    return experiment_from_paths(paths, workload=BulkWorkload(), direction=direction,  # type: ignore[arg-type]
                                 stack=stack_profile("linux-upstream", **stack), seed=0,
                                 duration_ns=int(seconds * S), join_after_ns=join_after_ms * MS)


def _events(e: Experiment, *, autotuning: bool = False) -> pl.DataFrame:
    return get_backend("model", rcv_buf_autotuning=autotuning).run(e).events


def _syns(ev: pl.DataFrame) -> pl.DataFrame:
    return ev.filter(((pl.col("flags") & SYN) != 0) & (pl.col("point") == "snd")).sort("t_ns")


def _synack_at_client(ev: pl.DataFrame) -> int:
    sa = ev.filter(((pl.col("flags") & (SYN | ACK)) == SYN | ACK) & (pl.col("point") == "rcv") & (pl.col("path") == "p1"))
    return int(sa["t_ns"].min())  # type: ignore[arg-type]


def _join_syn(ev: pl.DataFrame) -> int:
    j = _syns(ev).filter((pl.col("path") == "p2") & ((pl.col("flags") & ACK) == 0))
    return int(j["t_ns"].min())  # type: ignore[arg-type]


def test_the_join_waits_one_initial_path_rtt_after_the_synack_both_directions() -> None:
    for direction in ("down", "up"):
        for owd in ((10, 30), (20, 50), (4, 60)):
            ev = _events(_experiment(owd_ms=owd, direction=direction, seconds=0.3))
            sa = _synack_at_client(ev)
            assert _join_syn(ev) - sa == 2 * owd[0] * MS, (direction, owd)


def test_a_later_join_after_is_kept_and_the_out_of_tree_profile_joins_at_the_synack() -> None:
    ev = _events(_experiment(owd_ms=(10, 30), join_after_ms=75, seconds=0.3))
    assert _join_syn(ev) - _synack_at_client(ev) == 75 * MS   # later than the 20 ms round trip: as asked
    ev = _events(_experiment(owd_ms=(10, 30), join_after_ms=5, seconds=0.3))
    assert _join_syn(ev) - _synack_at_client(ev) == 20 * MS   # earlier: not before full establishment
    ev = _events(_experiment(owd_ms=(10, 30), seconds=0.3, join_when_established=False))
    assert _join_syn(ev) == _synack_at_client(ev)


def _acks_sent(ev: pl.DataFrame) -> pl.DataFrame:
    """The receiver's ACKs carrying a DATA_ACK, in the order it sent them (arrival less one-way delay: the
    model records an ACK where it arrives), with the right edge each announced."""
    data_dir = ev.filter(pl.col("payload_bytes") > 0)["dir"][0]
    return (ev.filter((pl.col("point") == "rcv") & (pl.col("dir") != data_dir) & pl.col("data_ack").is_not_null()
                      & ((pl.col("flags") & SYN) == 0))
            .with_columns((pl.col("t_ns") - pl.col("owd_ns")).alias("t_sent_ns"),
                          (pl.col("data_ack").cast(pl.Int64) + pl.col("rwnd_bytes")).alias("edge"))
            .sort("t_sent_ns", maintain_order=True))


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(owd_ms=st.tuples(st.integers(2, 40), st.integers(2, 80)), rate_mbps=st.tuples(st.sampled_from([2, 10, 30]),
                                                                                      st.sampled_from([2, 10, 30])),
       rmem_max=st.sampled_from([131072, 262144, 1048576, 6291456]), autotuning=st.booleans(),
       direction=st.sampled_from(["down", "up"]))
def test_the_announced_right_edge_never_moves_back(owd_ms: tuple[int, int], rate_mbps: tuple[int, int],
                                                   rmem_max: int, autotuning: bool, direction: str) -> None:
    e = _experiment(owd_ms=owd_ms, rate_mbps=rate_mbps, direction=direction, seconds=1.5,
                    tcp_rmem=(4096, 131072, rmem_max))
    acks = _acks_sent(_events(e, autotuning=autotuning))
    assert acks.height > 50
    # ACKs sent at the same nanosecond on two subflows are in no known order: compare each with those
    # sent strictly before it
    by_t = (acks.group_by("t_sent_ns").agg(pl.col("edge").min().alias("lo"), pl.col("edge").max().alias("hi"))
            .sort("t_sent_ns").with_columns(pl.col("hi").cum_max().shift(1).alias("before")))
    back = by_t.filter(pl.col("lo") < pl.col("before"))
    assert back.height == 0, f"a right edge short of one already announced: {back.head(3)}"
    assert acks["rwnd_bytes"].min() >= 0  # type: ignore[operator]
    assert acks["rwnd_bytes"].max() <= int(rmem_max * e.stack.scaling_ratio)  # type: ignore[operator]


def _own_windows_of_the_joined_subflow(*, join_when_established: bool) -> tuple[list[int], int]:
    """rmem-256k of the fidelity matrix (30 / 10 Mbit/s, 20 / 50 ms, tcp_rmem max 256 kB) with the
    autotuning model: the windows the joined subflow announced where it moved the connection's right
    edge (its own window, not the connection's), after the first second; and tcp_rmem[1]'s window."""
    e = _experiment(owd_ms=(20, 50), seconds=4, tcp_rmem=(4096, 131072, 262144),
                    join_when_established=join_when_established)
    acks = _acks_sent(_events(e, autotuning=True))
    acks = acks.with_columns(pl.col("edge").cum_max().shift(1, fill_value=0).alias("edge_before"))
    own = acks.filter((pl.col("path") == "p2") & (pl.col("edge") > pl.col("edge_before"))
                     & (pl.col("t_sent_ns") > S))
    return own["rwnd_bytes"].to_list(), int(131072 * e.stack.scaling_ratio)


def test_a_subflow_joining_after_the_last_buffer_step_keeps_tcp_rmem1s_window() -> None:
    # The connection's buffer reaches tcp_rmem[2] in one step at 162 ms; the join's SYN-ACK reaches the
    # client at 180 ms (40 + 40 + 100 ms), too late to follow it: the kernel's slow mode.
    late, rmem1_window = _own_windows_of_the_joined_subflow(join_when_established=True)
    assert late, "the joined subflow never announced its own window"
    assert max(late) <= rmem1_window
    assert late.count(rmem1_window) >= len(late) // 2  # its rcv_ssthresh sits at that cap
    # Joining at the SYN-ACK (140 ms) it takes the step, and its own window grows past tcp_rmem[1]'s.
    early, _ = _own_windows_of_the_joined_subflow(join_when_established=False)
    assert early and max(early) > rmem1_window


def test_the_join_time_is_the_same_through_the_engine_and_the_experiment() -> None:
    """`join_when_established` reaches the engine from the stack profile, and only from there."""
    from workbench.backends._model import engine_connection
    assert engine_connection(stack_profile("linux-upstream")).join_when_established
    assert not engine_connection(stack_profile("mptcp.org-v0.95")).join_when_established
    e = _experiment(owd_ms=(10, 30))
    assert dataclasses.replace(e.stack, join_when_established=False) == stack_profile(
        "linux-upstream", join_when_established=False)


def test_a_captures_measured_join_time_is_kept_as_it_is() -> None:
    """A replay of a capture joins when the capture's client did (join_after_ns from its packets), even
    earlier than full establishment would allow: what happened is not second-guessed. Without a measured
    join, the upstream rule applies."""
    from workbench.capture_experiment import CaptureSettings, capture_stack
    measured = CaptureSettings(delivered_bytes=1, mss_bytes=1424, header_bytes=90, join_after_ns=7 * MS,
                               direction="down", warnings=(), rcv_wnd_max_bytes=None)
    assert not capture_stack(measured).join_when_established
    assert capture_stack(dataclasses.replace(measured, join_after_ns=0)).join_when_established
    e = dataclasses.replace(_experiment(owd_ms=(10, 30), join_after_ms=7, seconds=0.3), stack=capture_stack(measured))
    ev = _events(e)
    assert _join_syn(ev) - _synack_at_client(ev) == 7 * MS
