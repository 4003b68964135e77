"""The compiled congestion controls (native/engine/src/cc.rs, `workbench_core.CcGroup`: the ones every
replay runs) against independent truth.

* Worked examples, the arithmetic in the comments, from the sources the CCs follow: Linux
  net/ipv4/tcp_cong.c (tcp_slow_start, tcp_cong_avoid_ai, tcp_reno_ssthresh), net/ipv4/tcp_cubic.c
  (beta 717/1024, C = 410/1024, fast convergence, bictcp_update's K and W(t) of RFC 8312 / RFC 9438,
  TCP friendliness, the initial cnt cap of 20, the cnt reuse period HZ/32, bictcp_reset on Loss,
  hystart_update's ACK-train and delay exits), RFC 6356 (LIA's alpha and its increase
  min(alpha * acked / cwnd_total, acked / cwnd)) and OLIA (Khalili et al., "MPTCP is not
  Pareto-optimal", and mptcp_olia.c: the per-path alpha of best paths without the largest window and
  of the largest windows). The model computes in floating point what Linux does in fixed point
  (CUBIC's cnt and K, OLIA's scaled counter); where they differ, the comment says so.
* Hypothesis invariants over random call sequences (ACKs, RTT samples, losses, state changes and the
  engine's own field changes, as the engine makes them): after every call cwnd >= 1 and only the
  fields the call may touch change; slow start adds one segment per ACKed segment and never passes
  ssthresh; ssthresh is the CC's rule (Reno, LIA, OLIA max(cwnd/2, 2); CUBIC max(cwnd x 717/1024, 2)
  with W_max and fast convergence); Reno is tcp_cong_avoid_ai exactly; CUBIC's cnt is bictcp_update's
  (W(t) one minimum RTT ahead, at least 2, friendliness, reuse, the Reno estimate counting every ACK);
  HyStart exits exactly when hystart_update's conditions hold, once per slow start; LIA grows by RFC
  6356's w and never more than an uncoupled Reno from the same state (RFC 6356 goal 2); OLIA grows by
  the paper's increase; cwnd never shrinks without a loss except OLIA's on a largest window; a Loss
  resets CUBIC; OLIA's loss record shifts only after progress; the same calls give the same states.

Small reference formulas (`slow_start`, `reno_ai`, `cubic_cnt`, `hystart_step`, `lia_w`, `olia_increase`) are
written here from those sources, not from the engine.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
import workbench_core
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MS = 1_000_000
S = 1_000_000_000
NO_RTT_US = 1 << 62  # a subflow's min_rtt_us before the first sample
BIG = 1 << 30  # the initial ssthresh ("infinite")
C = 410 / 1024  # CUBIC's C (bic_scale 41 / 1024 x 10)
BETA = 717 / 1024  # CUBIC's beta
CNT_REUSE_NS = S // 32  # HZ / 32
CCS = [("reno", True), ("cubic", True), ("cubic", False), ("lia", True), ("olia", True)]


def group(name: str, *subflows: dict, hystart: bool = True) -> workbench_core.CcGroup:
    """A CC over established subflows, each given by fields to set (``srtt_ms`` sets srtt and min RTT)."""
    g = workbench_core.CcGroup(name, len(subflows), hystart=hystart)
    for k, fields in enumerate(subflows):
        fields = dict(fields)
        if "srtt_ms" in fields:
            us = round(fields.pop("srtt_ms") * 1000)
            fields.update(srtt_us8=us << 3, min_rtt_us=us)
        g.set(k, **{"established": True, **fields})
    return g


def sf(g: workbench_core.CcGroup, k: int = 0) -> dict:
    return g.subflow(k)


def acks(g: workbench_core.CcGroup, k: int, n: int, now_ns: int = 0) -> None:
    """``n`` single-segment ACKs on subflow ``k``."""
    for _ in range(n):
        g.cong_avoid(k, 1, now_ns)


# ------------------------------------------------------------------------------- Reno (tcp_cong.c)


def test_slow_start_adds_one_segment_per_acked_segment_up_to_ssthresh() -> None:
    g = group("reno", {"cwnd": 10, "ssthresh": 100})
    g.cong_avoid(0, 5, 0)
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (15, 0.0)  # tcp_slow_start: 10 + 5
    # ssthresh 14: min(10 + 10, 14) = 14 uses 4 of the 10; tcp_cong_avoid_ai(w = 14) gets the 6 left
    # over: the counter 6 < 14, no segment yet
    g = group("reno", {"cwnd": 10, "ssthresh": 14})
    g.cong_avoid(0, 10, 0)
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (14, 6.0)


def test_reno_avoidance_is_one_segment_per_window_and_credits_are_applied_gently() -> None:
    g = group("reno", {"cwnd": 40, "ssthresh": 40})
    acks(g, 0, 39)
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (40, 39.0)
    acks(g, 0, 1)  # the 40th: cnt 40 >= w 40 -> cwnd 41, cnt 0
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (41, 0.0)
    g.cong_avoid(0, 100, 0)  # a stretch ACK: delta = 100 / 41 = 2, cnt = 100 - 82 = 18
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (43, 18.0)
    # credits accumulated at a larger w (here the window was cut to 10 with 15 in the counter):
    # "apply them gently now": +1 and the counter restarts, then this ACK counts: (11, 1)
    g.set(0, cwnd=10, ssthresh=10, cwnd_cnt=15.0)
    g.cong_avoid(0, 1, 0)
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (11, 1.0)


@pytest.mark.parametrize("name", ["reno", "lia", "olia"])
def test_reno_ssthresh_halves_but_not_below_2(name: str) -> None:
    # tcp_reno_ssthresh: max(cwnd >> 1, 2)
    for cwnd, expected in [(45, 22), (44, 22), (5, 2), (3, 2), (1, 2)]:
        g = group(name, {"cwnd": cwnd, "ssthresh": cwnd, "srtt_ms": 20})
        assert g.ssthresh(0) == expected, cwnd
        assert sf(g)["cwnd"] == cwnd  # the CC only answers; the sender cuts


def test_unknown_names_and_indices_are_errors() -> None:
    with pytest.raises(ValueError, match="unknown congestion control 'bbr'"):
        workbench_core.CcGroup("bbr", 1)
    g = workbench_core.CcGroup("coupled", 2)  # LIA's other name
    assert len(g) == 2
    with pytest.raises(IndexError):
        g.cong_avoid(2, 1, 0)
    with pytest.raises(IndexError):
        g.set(5, cwnd=3)


def test_a_new_group_is_a_subflow_before_its_handshake() -> None:
    g = workbench_core.CcGroup("cubic", 2, init_cwnd=4)
    assert sf(g, 1) == {"cwnd": 4, "ssthresh": BIG, "cwnd_cnt": 0.0, "min_rtt_us": NO_RTT_US, "srtt_us8": 0,
                        "una": 0, "nxt": 0, "una_bytes": 1, "established": False, "hystart_exits": 0,
                        "cc_state": None}


# --------------------------------------------------------------------------- CUBIC (tcp_cubic.c)


def cc_state(g: workbench_core.CcGroup, k: int = 0) -> Any:
    """The CC's own state of subflow k: CUBIC's (a dict), OLIA's loss record (a list) or None."""
    return sf(g, k)["cc_state"]


def test_cubic_ssthresh_is_717_of_1024_with_fast_convergence() -> None:
    g = group("cubic", {"cwnd": 100, "ssthresh": 50})
    assert g.ssthresh(0) == 70  # 100 x 717 / 1024 = 70.02
    assert cc_state(g)["last_max_cwnd"] == 100.0  # W_max = cwnd at the loss
    assert cc_state(g)["epoch_start"] == 0  # the epoch ends
    g.set(0, cwnd=80)
    assert g.ssthresh(0) == 56  # 80 x 717 / 1024 = 56.02
    # below the last W_max: fast convergence remembers 80 x (1024 + 717) / 2048 = 68.0078125 (Linux
    # divides in integers: 68)
    assert cc_state(g)["last_max_cwnd"] == 68.0078125
    g.set(0, cwnd=2)
    assert g.ssthresh(0) == 2  # 2 x 0.7 = 1.4 -> at least 2
    assert cc_state(g)["last_max_cwnd"] == 1.7001953125  # 2 x 1741 / 2048
    g.on_state(0, 3, 0)  # Recovery: nothing resets
    assert cc_state(g)["last_max_cwnd"] == 1.7001953125
    g.set(0, nxt=77)
    g.on_state(0, 4, 0)  # Loss: bictcp_reset (every field, W_max too) + bictcp_hystart_reset (end_seq = snd_nxt)
    st = cc_state(g)
    assert st["last_max_cwnd"] == 0.0 and st["epoch_start"] == 0 and st["round_end_idx"] == 77
    assert not st["found"] and st["cnt"] == 20.0


def test_cubic_k_and_w_of_t_after_a_loss() -> None:
    """RFC 9438 4.2: W(t) = C (t - K)^3 + W_max, K = cbrt((W_max - cwnd_epoch) / C). W_max 100, the
    epoch starts at cwnd 70: K = cbrt(30 / 0.400390625) = cbrt(74.927) = 4.2158 s (Linux: bic_K =
    cubic_root(cube_factor x 30) = 4317 / 1024 s). bictcp_update aims one minimum RTT (20 ms) ahead:
    cnt = cwnd / (W(t + 20 ms) - cwnd) ACKs per segment."""
    t0 = 5 * S
    g = group("cubic", {"cwnd": 100, "ssthresh": BIG, "srtt_ms": 20}, hystart=False)
    assert g.ssthresh(0) == 70
    g.set(0, cwnd=70, ssthresh=70)
    g.cong_avoid(0, 1, t0)
    st = cc_state(g)
    k = ((100 - 70) / C) ** (1 / 3)
    assert st["k"] == pytest.approx(4.2158, abs=1e-4) and st["k"] == pytest.approx(k, rel=1e-12)
    assert (st["origin"], st["epoch_start"], st["tcp_cwnd"], st["ack_cnt"]) == (100.0, t0, 70, 1)
    # t = 0.02 s: W = 100 + 0.4004 x (0.02 - 4.2158)^3 = 100 - 29.575 = 70.425 -> cnt = 70 / 0.425 = 164.7
    assert st["cnt"] == pytest.approx(164.73, abs=0.01)
    assert sf(g)["cwnd_cnt"] == 1.0 and sf(g)["cwnd"] == 70
    # at t = K (20 ms ahead of now) the curve is back at W_max: cnt = 70 / (100 - 70) = 2.333
    g.cong_avoid(0, 1, t0 + round((k - 0.02) * S))
    assert cc_state(g)["cnt"] == pytest.approx(70 / 30, rel=1e-9)
    # 1 s past K: W = 100 + C x 1^3 = 100.4004: cnt = 70 / 30.4004 = 2.3026
    g.cong_avoid(0, 1, t0 + round((k + 1 - 0.02) * S))
    assert cc_state(g)["cnt"] == pytest.approx(70 / (30 + C), rel=1e-9)
    # far past K the cubic would ask for more than one segment per 2 ACKs: cnt is held at 2 (1.5x per RTT)
    g.cong_avoid(0, 1, t0 + 60 * S)
    assert cc_state(g)["cnt"] == 2.0


def test_cubic_first_epoch_caps_cnt_at_20() -> None:
    """No W_max yet (last_max_cwnd 0): K = 0, origin = cwnd 100, W(20 ms) = 100 + 0.4 x 0.02^3 =
    100.0000032 asks for cnt = 100 / 3.2e-6; "increase cwnd 5% per RTT": cnt = 20. Reno's estimate:
    delta = 100 x 15 >> 3 = 187 ACKs per segment (beta_scale = 8 (1024 + 717) / 3 / (1024 - 717) = 15),
    far from 1 ACK: no friendliness cap."""
    g = group("cubic", {"cwnd": 100, "ssthresh": 100, "srtt_ms": 20})
    g.cong_avoid(0, 1, S)
    st = cc_state(g)
    assert (st["cnt"], st["k"], st["origin"], st["tcp_cwnd"], st["ack_cnt"]) == (20.0, 0.0, 100.0, 100, 1)
    acks(g, 0, 19, S)  # 20 ACKs at cnt 20: one segment
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (101, 0.0)


def test_cubic_tcp_friendliness_never_slower_than_reno() -> None:
    """cwnd 10, first epoch (cnt 20 from the cap). 40 ms later (past the HZ/32 reuse period) 54 more
    ACKs: ack_cnt = 1 + 54 = 55, Reno's estimate grows a segment per delta = 10 x 15 >> 3 = 18 ACKs:
    55 -> 37 -> 19 -> 1, tcp_cwnd 10 -> 13 > cwnd 10, so cnt = min(20, 10 / (13 - 10)) = 3.333 (Linux:
    integer 10 / 3 = 3). tcp_cong_avoid_ai(3.333, 54): counter 1 + 54 = 55, 55 / 3.333 = 16.5 -> +16,
    counter 55 - 53.333 = 1.667."""
    g = group("cubic", {"cwnd": 10, "ssthresh": 10, "srtt_ms": 20})
    g.cong_avoid(0, 1, S)
    g.cong_avoid(0, 54, S + 40 * MS)
    st = cc_state(g)
    assert (st["ack_cnt"], st["tcp_cwnd"]) == (1, 13)
    assert st["cnt"] == pytest.approx(10 / 3, rel=1e-12)
    assert sf(g)["cwnd"] == 26 and sf(g)["cwnd_cnt"] == pytest.approx(5 / 3, rel=1e-12)


def test_cubic_reuses_cnt_for_hz_32_while_cwnd_stays() -> None:
    """bictcp_update returns early while cwnd is unchanged and at most HZ/32 (31.25 ms) has passed: cnt
    and last_time stay, the ACKs are counted."""
    g = group("cubic", {"cwnd": 100, "ssthresh": 100, "srtt_ms": 20})
    g.cong_avoid(0, 1, S)
    g.cong_avoid(0, 1, S + CNT_REUSE_NS)
    st = cc_state(g)
    assert (st["last_time"], st["ack_cnt"]) == (S, 2)
    g.cong_avoid(0, 1, S + CNT_REUSE_NS + 1)  # 1 ns later: computed again
    assert cc_state(g)["last_time"] == S + CNT_REUSE_NS + 1


# --------------------------------------------------------------------------- HyStart (tcp_cubic.c)


def slow_start_cubic(cwnd: int, min_rtt_us: int) -> workbench_core.CcGroup:
    g = group("cubic", {"cwnd": cwnd, "ssthresh": BIG, "srtt_us8": min_rtt_us << 3, "min_rtt_us": min_rtt_us})
    g.set(0, una=1, nxt=1000)  # one round: until segment 1000 is acked
    return g


@pytest.mark.parametrize(("min_rtt_us", "threshold_us"), [(20_000, 24_000), (40_000, 45_000), (200_000, 216_000)])
def test_hystart_delay_exit(min_rtt_us: int, threshold_us: int) -> None:
    """HYSTART_DELAY: after HYSTART_MIN_SAMPLES = 8 samples in a round, the round's minimum RTT above
    delay_min + clamp(delay_min / 8, 4 ms, 16 ms) ends slow start: 20 ms + max(2.5, 4) = 24 ms,
    40 ms + 5 ms = 45 ms, 200 ms + min(25, 16) = 216 ms. Samples 10 ms apart: no ACK train."""
    for rtt_us, exits in [(threshold_us, False), (threshold_us + 1, True)]:
        g = slow_start_cubic(20, min_rtt_us)
        for i in range(8):  # these fill the round's sample count
            g.on_rtt(0, rtt_us, S + i * 10 * MS)
        assert sf(g)["hystart_exits"] == 0 and sf(g)["ssthresh"] == BIG
        g.on_rtt(0, rtt_us, S + 80 * MS)  # the 9th is compared
        assert (sf(g)["hystart_exits"], sf(g)["ssthresh"]) == ((1, 20) if exits else (0, BIG)), rtt_us
        assert cc_state(g)["found"] is exits


@settings(max_examples=300, deadline=None, derandomize=True)
@given(dm=st.integers(1, 400_000), cwnd=st.integers(16, 10_000), near=st.booleans(),
       offsets=st.lists(st.integers(-3, 3) | st.integers(-30_000, 30_000), min_size=9, max_size=9))
def test_hystart_delay_exit_is_the_clamped_threshold(dm: int, cwnd: int, near: bool, offsets: list[int]) -> None:
    """Any delay_min and round: 9 samples 10 ms apart (no ACK train), all at least delay_min, end slow
    start exactly when their minimum exceeds delay_min + clamp(delay_min >> 3, 4 ms, 16 ms)."""
    threshold = dm + min(max(dm >> 3, 4000), 16000)
    rtts = [max(dm, threshold + o if near else dm + abs(o)) for o in offsets]
    g = slow_start_cubic(cwnd, dm)
    for i, rtt in enumerate(rtts):
        g.on_rtt(0, rtt, S + i * 10 * MS)
    exits = min(rtts) > threshold
    assert (sf(g)["hystart_exits"], sf(g)["ssthresh"]) == ((1, cwnd) if exits else (0, BIG)), (threshold, rtts)


def test_hystart_ack_train_exit() -> None:
    """HYSTART_ACK_TRAIN: ACKs at most 2 ms apart continue the round's train; once it is longer than
    (delay_min + hystart_ack_delay 1 ms) >> 1 (unpaced) = (10 + 1) / 2 = 5.5 ms, slow start ends."""
    g = slow_start_cubic(30, 10_000)
    for i in range(6):  # 0 .. 5 ms: the train is 5 ms long
        g.on_rtt(0, 10_000, S + i * MS)
    assert sf(g)["hystart_exits"] == 0
    g.on_rtt(0, 10_000, S + 6 * MS)  # 6 ms > 5.5 ms
    assert (sf(g)["hystart_exits"], sf(g)["ssthresh"]) == (1, 30)


def test_hystart_waits_for_the_low_window_and_slow_start() -> None:
    # hystart_low_window = 16: a 15-segment window takes no decision however long the train
    g = slow_start_cubic(15, 10_000)
    for i in range(20):
        g.on_rtt(0, 50_000, S + i * MS)
    assert sf(g)["hystart_exits"] == 0 and sf(g)["ssthresh"] == BIG
    # past slow start (cwnd >= ssthresh) HyStart is not consulted
    g = slow_start_cubic(30, 10_000)
    g.set(0, ssthresh=30)
    for i in range(20):
        g.on_rtt(0, 50_000, S + i * MS)
    assert sf(g)["hystart_exits"] == 0 and sf(g)["ssthresh"] == 30
    # without HyStart nothing happens at all
    g = group("cubic", {"cwnd": 30, "ssthresh": BIG, "srtt_ms": 10}, hystart=False)
    for i in range(20):
        g.on_rtt(0, 50_000, S + i * MS)
    assert sf(g)["hystart_exits"] == 0 and sf(g)["cc_state"] is None


# ----------------------------------------------------------------------------------- LIA (RFC 6356)


def test_lia_two_equal_paths_one_segment_per_160_acks() -> None:
    """alpha = cwnd_tot x max(w_i / rtt_i^2) / (sum w_i / rtt_i)^2 = 80 (40/r^2) / (80/r)^2 = 1/2; the
    increase per ACK min(alpha / cwnd_tot, 1 / cwnd_i) = min(1/160, 1/40): one segment per 160 ACKs.
    Then tot 81, cwnd 41: alpha = 81 x 41 / 81^2, cwnd_tot / alpha = 81^2 / 41 = 160.02 ACKs."""
    g = group("lia", *[{"cwnd": 40, "ssthresh": 10, "srtt_ms": 20}] * 2)
    acks(g, 0, 159)
    assert sf(g)["cwnd"] == 40
    acks(g, 0, 1)
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (41, 0.0)
    acks(g, 0, 160)
    assert sf(g)["cwnd"] == 41  # 160 < 160.02
    acks(g, 0, 1)
    assert sf(g)["cwnd"] == 42 and sf(g, 1)["cwnd"] == 40


def test_lia_paths_of_different_rtts() -> None:
    """Path 0: cwnd 10, rtt 10 ms; path 1: cwnd 30, rtt 100 ms. w/rtt^2: 10 / 1e-4 = 1e5 (the max) and
    30 / 1e-2 = 3000; sum w/rtt = 1000 + 300 = 1300; alpha = 40 x 1e5 / 1300^2 = 2.3669, alpha /
    cwnd_tot = 0.0592 per ACK. Path 0: min(0.0592, 1/10) = 0.0592, one segment per 40 / 2.3669 = 16.9
    ACKs. Path 1: min(0.0592, 1/30) = 1/30: capped at Reno's one segment per window of 30."""
    g = group("lia", {"cwnd": 10, "ssthresh": 2, "srtt_ms": 10}, {"cwnd": 30, "ssthresh": 2, "srtt_ms": 100})
    acks(g, 0, 16)
    assert sf(g)["cwnd"] == 10
    acks(g, 0, 1)  # 17 >= 16.9
    assert sf(g)["cwnd"] == 11 and sf(g)["cwnd_cnt"] == pytest.approx(17 - 16.9, abs=1e-9)
    acks(g, 1, 29)
    assert sf(g, 1)["cwnd"] == 30
    acks(g, 1, 1)
    assert (sf(g, 1)["cwnd"], sf(g, 1)["cwnd_cnt"]) == (31, 0.0)


@pytest.mark.parametrize("name", ["lia", "olia"])
def test_coupled_cc_over_one_established_subflow_is_reno(name: str) -> None:
    g = group(name, {"cwnd": 40, "ssthresh": 10, "srtt_ms": 20}, {"cwnd": 40, "ssthresh": 10, "srtt_ms": 20})
    g.set(1, established=False)  # it does not count
    acks(g, 0, 40)
    assert (sf(g)["cwnd"], sf(g)["cwnd_cnt"]) == (41, 0.0)


def test_lia_floors_the_segments_due_not_the_rounded_quotient() -> None:
    """tcp_cong_avoid_ai's delta = cnt / w is a floor. Paths cwnd 40 / srtt 50.618 ms and cwnd 30 /
    srtt 53.861 ms give w = cwnd_tot / alpha = 116.2594625558...; a counter of 0.33516... + 1046 acked
    = 1046.3351630025068 is just under 9 w (the exact quotient 8.99999999999999...) though the double
    quotient rounds to 9.0: the window grows by 8, and almost a whole w stays in the counter."""
    g = group("lia", {"cwnd": 40, "ssthresh": 10, "srtt_us8": 404_944},
              {"cwnd": 30, "ssthresh": 10, "srtt_us8": 430_888})
    w = lia_w([(40, 404_944), (30, 430_888)], 40)
    cnt = 0.3351630025067607 + 1046
    assert cnt / w == 9.0 and math.floor(Fraction(cnt) / Fraction(w)) == 8  # the case meant
    g.set(0, cwnd_cnt=0.3351630025067607)
    g.cong_avoid(0, 1046, 0)
    assert sf(g)["cwnd"] == 48
    assert sf(g)["cwnd_cnt"] == pytest.approx(cnt - 8 * w, rel=1e-9)
    assert 116.259 < sf(g)["cwnd_cnt"] < w


# ------------------------------------------------------------------------------------------- OLIA


def olia_pair() -> workbench_core.CcGroup:
    """Path 0: cwnd 10, rtt 20 ms, 1 MB acknowledged since its last loss (its loss record is
    [0, 0, 1000001]); path 1: cwnd 30, rtt 200 ms, nothing acknowledged (record [1, 1, 1])."""
    g = group("olia", {"cwnd": 10, "ssthresh": BIG, "srtt_ms": 20, "una_bytes": 1_000_001},
              {"cwnd": 30, "ssthresh": 5, "srtt_ms": 200})
    g.cong_avoid(0, 1, 0)  # in slow start: records snd_una, grows to 11
    g.set(0, cwnd=10, ssthresh=5)
    assert cc_state(g) == [0, 0, 1_000_001]
    return g


def test_olia_a_best_path_without_the_largest_window_takes_more_than_reno() -> None:
    """OLIA: increase per ACK on path r = (w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2 + alpha_r / w_r. The
    best paths B maximise l_r / rtt_r^2 (l: the larger of the last two inter-loss distances): path 0
    (1e6 bytes / 0.02^2) against path 1 (0); M, the largest windows: path 1. B \\ M = {0}, so
    alpha_0 = 1 / (|R| |B \\ M|) = 1/2. First term: w_0 / (sum_p w_p rtt_0 / rtt_p)^2 = 10 / (10 + 30
    x 0.1)^2 = 10/169. Per ACK 10/169 + 0.5/10 = 0.10917 > Reno's 1/10: after 10 ACKs the window is 11
    and the counter 100/169 + 0.5 - 1 = 0.0917 (Reno: 11 and 0)."""
    g = olia_pair()
    acks(g, 0, 9)
    assert sf(g)["cwnd"] == 10 and sf(g)["cwnd_cnt"] == pytest.approx(9 * (10 / 169 + 0.05), rel=1e-9)
    acks(g, 0, 1)
    assert sf(g)["cwnd"] == 11 and sf(g)["cwnd_cnt"] == pytest.approx(100 / 169 - 0.5, rel=1e-9)


def test_olia_a_largest_window_gives_some_up_while_a_better_path_has_less() -> None:
    """Path 1 is in M while B \\ M = {0} is not empty: alpha_1 = -1 / (|R| |M|) = -1/2. First term:
    30 / (10 x 0.2 / 0.02 + 30)^2 = 30/16900; per ACK 30/16900 - 0.5/30 = -0.014892: the 68th ACK takes
    the counter past -1 (67 x 0.014892 = 0.9977, 68 x = 1.0126): cwnd 30 -> 29, counter reset
    (mptcp_olia.c: snd_cwnd - 1)."""
    g = olia_pair()
    inc = 30 / 16900 - 0.5 / 30
    acks(g, 1, 67)
    assert sf(g, 1)["cwnd"] == 30 and sf(g, 1)["cwnd_cnt"] == pytest.approx(67 * inc, rel=1e-9)
    acks(g, 1, 1)
    assert (sf(g, 1)["cwnd"], sf(g, 1)["cwnd_cnt"]) == (29, 0.0)
    # a stretch ACK of 3000 segments counts each (mptcp_olia.c counts an ACK once, whatever it acks, and
    # moves at most one segment): per ACK now 29 / (100 + 29)^2 - 0.5/29 = -0.0155, x 3000 = -46.5 ->
    # 29 - 46 < 1: the window stays at 1
    g.cong_avoid(1, 3000, 0)
    assert (sf(g, 1)["cwnd"], sf(g, 1)["cwnd_cnt"]) == (1, 0.0)


def test_olia_loss_record_shifts_only_after_progress() -> None:
    """mptcp_olia_set_state: on a loss, loss1 <- loss2, loss2 <- loss3 only if loss3 != loss2 (data was
    acknowledged since); loss3 follows snd_una on every ACK. A subflow with no record yet keeps none."""
    g = group("olia", {"cwnd": 10, "ssthresh": BIG, "srtt_ms": 20})
    g.on_state(0, 3, 0)
    assert cc_state(g) is None
    g.set(0, una_bytes=5000)
    g.cong_avoid(0, 1, 0)
    # the record starts at 0 on a subflow's first ACK (mptcp_olia_init: snd_una at the start, byte 1
    # here: one byte apart)
    assert cc_state(g) == [0, 0, 5000]
    g.on_state(0, 3, 0)
    assert cc_state(g) == [0, 5000, 5000]
    g.on_state(0, 4, 0)  # no progress since: no shift
    assert cc_state(g) == [0, 5000, 5000]
    g.set(0, una_bytes=9000)
    g.cong_avoid(0, 1, 0)
    g.on_state(0, 3, 0)
    assert cc_state(g) == [5000, 9000, 9000]
    # in avoidance the other established subflows get a record too: snd_una at their start
    g = group("olia", {"cwnd": 10, "ssthresh": 2, "srtt_ms": 20}, {"cwnd": 10, "ssthresh": 2, "srtt_ms": 20,
                                                                    "una_bytes": 777})
    g.cong_avoid(0, 1, 0)
    assert cc_state(g, 1) == [777, 777, 777]


# ----------------------------------------------------------------------------- reference formulas


def floor_div(x: float, w: float) -> int:
    """The exact floor of x / w (what tcp_cong_avoid_ai's integer division is)."""
    return math.floor(Fraction(x) / Fraction(w))


def slow_start(cwnd: int, ssthresh: int, acked: int) -> tuple[int, int]:
    """tcp_slow_start: (cwnd, acked left over)."""
    new = min(cwnd + acked, ssthresh) if cwnd < ssthresh else cwnd
    return new, acked - (new - cwnd)


def reno_ai(cwnd: int, cnt: float, w: float, acked: int) -> tuple[int, float]:
    """tcp_cong_avoid_ai(w, acked) on (cwnd, snd_cwnd_cnt)."""
    if cnt >= w:  # credits accumulated at a higher w: apply them gently now
        cwnd, cnt = cwnd + 1, 0.0
    cnt += acked
    if cnt >= w:
        delta = floor_div(cnt, w)
        cnt -= delta * w
        cwnd += delta
    return cwnd, cnt


def srtt_s(s: dict) -> float:
    return max(s["srtt_us8"], 8) / 8e6


def lia_w(paths: list[tuple[int, int]], cwnd: int) -> float:
    """RFC 6356 as ACKs per segment: 1 / min(alpha / cwnd_tot, 1 / cwnd) over (cwnd, srtt_us8) paths."""
    tot = sum(c for c, _ in paths)
    rtts = [max(s8, 8) / 8e6 for _, s8 in paths]
    best = max(c / r / r for (c, _), r in zip(paths, rtts, strict=True))
    denom = sum(c / r for (c, _), r in zip(paths, rtts, strict=True))
    alpha = tot * best / denom / denom
    return max(tot / alpha, cwnd)


def olia_increase(subflows: list[dict], k: int) -> float:
    """OLIA's increase of subflow k's window per acked segment (the paper's formula, rtt_k^2 taken into
    the rate sum as mptcp_olia.c does), over the established subflows, from their loss records."""
    est = [s for s in subflows if s["established"]]
    me = subflows[k]
    rate = sum(s["cwnd"] * srtt_s(me) / srtt_s(s) for s in est)
    score = [max(s["cc_state"][2] - s["cc_state"][1], s["cc_state"][1] - s["cc_state"][0]) / srtt_s(s) ** 2
             for s in est]
    max_cwnd = max(s["cwnd"] for s in est)
    best = [sc == max(score) for sc in score]
    in_m = [s["cwnd"] == max_cwnd for s in est]
    b_not_m = sum(b and not m for b, m in zip(best, in_m, strict=True))
    i = next(j for j, s in enumerate(est) if s is me)
    if b_not_m == 0:
        alpha = 0.0
    elif best[i] and not in_m[i]:
        alpha = 1 / (len(est) * b_not_m)
    elif in_m[i]:
        alpha = -1 / (len(est) * sum(in_m))
    else:
        alpha = 0.0
    return me["cwnd"] / rate ** 2 + alpha / me["cwnd"]


CUBIC_RESET = {"ack_cnt": 0, "cnt": 20.0, "epoch_start": 0, "k": 0.0, "last_cwnd": 0, "last_max_cwnd": 0.0,
               "last_time": 0, "origin": 0.0, "tcp_cwnd": 0, "delay_min_us": 0, "round_start_us": 0,
               "last_ack_us": 0, "round_end_idx": -1, "curr_rtt_us": 1 << 60, "sample_cnt": 0, "found": False}


def cubic_cnt(st: dict, cwnd: int, acked: int, now_ns: int, min_rtt_us: int) -> dict:
    """bictcp_update (tcp_cubic.c) in floating point: the state after ``acked`` segments at ``now_ns``."""
    st = dict(st)
    st["ack_cnt"] += acked
    if st["last_cwnd"] == cwnd and now_ns - st["last_time"] <= CNT_REUSE_NS:
        return st
    if not (st["epoch_start"] and now_ns == st["last_time"]):  # at most once per instant ("jiffy")
        st.update(last_cwnd=cwnd, last_time=now_ns)
        if st["epoch_start"] == 0:
            st.update(epoch_start=now_ns, ack_cnt=acked, tcp_cwnd=cwnd)
            if st["last_max_cwnd"] <= cwnd:
                st.update(k=0.0, origin=float(cwnd))
            else:
                st.update(k=((st["last_max_cwnd"] - cwnd) / C) ** (1 / 3), origin=st["last_max_cwnd"])
        t = (now_ns - st["epoch_start"]) / 1e9 + (min_rtt_us if min_rtt_us < 1 << 60 else 0) / 1e6
        target = st["origin"] + C * (t - st["k"]) ** 3
        cnt = cwnd / (target - cwnd) if target > cwnd else 100.0 * cwnd
        st["cnt"] = 20.0 if st["last_max_cwnd"] == 0 and cnt > 20 else cnt
    delta = (cwnd * 15) >> 3  # Reno's ACKs per segment, x beta_scale / 8
    while delta > 0 and st["ack_cnt"] > delta:
        steps = (st["ack_cnt"] - 1) // delta  # the kernel's loop, counted at once
        st["ack_cnt"] -= steps * delta
        st["tcp_cwnd"] += steps
    if st["tcp_cwnd"] > cwnd:
        st["cnt"] = min(st["cnt"], cwnd / (st["tcp_cwnd"] - cwnd))
    st["cnt"] = max(st["cnt"], 2.0)
    return st


def hystart_step(st: dict, s: dict, rtt_us: int, now_ns: int) -> tuple[dict, bool]:
    """hystart_update as cubictcp_acked calls it (delay_min: the subflow's minimum RTT; unpaced, so the
    ACK-train threshold is (delay_min + 1 ms) >> 1): the state after, and whether slow start ends."""
    st = dict(st, delay_min_us=s["min_rtt_us"])
    if st["found"] or s["cwnd"] >= s["ssthresh"]:
        return st, False
    now_us = now_ns // 1000
    if s["una"] > st["round_end_idx"]:  # after(snd_una, end_seq): bictcp_hystart_reset
        st.update(round_start_us=now_us, last_ack_us=now_us, round_end_idx=s["nxt"], curr_rtt_us=1 << 60,
                  sample_cnt=0)
    if s["cwnd"] < 16:  # hystart_low_window. NB the kernel tests it before hystart_update, so below 16
        return st, False  # no round starts there; the model starts rounds below it too (a known difference)
    dm = st["delay_min_us"]
    if now_us - st["last_ack_us"] <= 2000:  # hystart_ack_delta_us
        st["last_ack_us"] = now_us
        if now_us - st["round_start_us"] > (dm + 1000) >> 1:
            st["found"] = True
    st["curr_rtt_us"] = min(st["curr_rtt_us"], rtt_us)
    if st["sample_cnt"] < 8:
        st["sample_cnt"] += 1
    elif st["curr_rtt_us"] > dm + min(max(dm >> 3, 4000), 16000):
        st["found"] = True
    return st, st["found"]


# ------------------------------------------------------------------------------------ the checker

CC_OWNED = ("cwnd", "ssthresh", "cwnd_cnt", "hystart_exits", "cc_state")


class Checked:
    """A CcGroup whose every call is checked against the rules above."""

    def __init__(self, name: str, hystart: bool, inits: list[dict]) -> None:
        self.name, self.hystart = name, hystart
        self.g = workbench_core.CcGroup(name, len(inits), hystart=hystart)
        for k, fields in enumerate(inits):
            self.g.set(k, **fields)
        self.history: list[list[dict]] = [self.states()]

    def states(self) -> list[dict]:
        return [self.g.subflow(k) for k in range(len(self.g))]

    def get(self, k: int, field: str) -> Any:
        return self.g.subflow(k)[field]

    def set(self, k: int, **fields: Any) -> None:
        self.g.set(k, **fields)
        after = self.states()
        assert {f: after[k][f] for f in fields} == fields
        self.history.append(after)

    def call(self, method: str, k: int, *args: int) -> Any:
        before = self.states()
        out = getattr(self.g, method)(k, *args)
        after = self.states()
        where = (self.name, self.hystart, method, k, args, before[k])
        for j, (b, a) in enumerate(zip(before, after, strict=True)):
            assert type(a["cwnd"]) is int and a["cwnd"] >= 1, (where, j, a)
            assert type(a["cwnd_cnt"]) is float and math.isfinite(a["cwnd_cnt"]), (where, j, a)
            # what the sender owns, the CC never writes
            assert {f: v for f, v in a.items() if f not in CC_OWNED} == {f: v for f, v in b.items()
                                                                           if f not in CC_OWNED}, (where, j)
            if j != k:
                others = {f: a[f] for f in CC_OWNED if f != "cc_state"}
                assert others == {f: b[f] for f in CC_OWNED if f != "cc_state"}, (where, j)
                if a["cc_state"] != b["cc_state"]:
                    # only OLIA's group sums give an established subflow its first loss record
                    assert (self.name, method, b["cc_state"], a["established"]) == ("olia", "cong_avoid", None, True)
                    assert a["cc_state"] == [a["una_bytes"]] * 3, (where, j)
        getattr(self, "check_" + method)(k, args, before, after, out, where)
        self.history.append(after)
        return out

    # ---- per call

    def check_ssthresh(self, k, args, before, after, out, where) -> None:
        b, a = before[k], after[k]
        assert {f: a[f] for f in ("cwnd", "ssthresh", "cwnd_cnt", "hystart_exits")} == \
            {f: b[f] for f in ("cwnd", "ssthresh", "cwnd_cnt", "hystart_exits")}, where
        if self.name != "cubic":
            assert out == max(b["cwnd"] >> 1, 2), where
            assert a["cc_state"] == b["cc_state"], where
            return
        assert out == max(b["cwnd"] * 717 // 1024, 2), where
        st0 = b["cc_state"] or CUBIC_RESET
        w_max = b["cwnd"] * (1024 + 717) / 2048 if b["cwnd"] < st0["last_max_cwnd"] else float(b["cwnd"])
        assert a["cc_state"] == {**st0, "epoch_start": 0, "last_max_cwnd": w_max}, where

    def check_on_state(self, k, args, before, after, out, where) -> None:
        b, a = before[k], after[k]
        state = args[0]
        assert {f: a[f] for f in CC_OWNED if f != "cc_state"} == {f: b[f] for f in CC_OWNED if f != "cc_state"}
        if self.name == "cubic" and state == 4:  # bictcp_reset + bictcp_hystart_reset
            assert a["cc_state"] == {**CUBIC_RESET, "round_end_idx": b["nxt"]}, where
        elif self.name == "olia" and b["cc_state"] is not None:
            l1, l2, l3 = b["cc_state"]
            assert a["cc_state"] == ([l2, l3, l3] if l3 != l2 else [l1, l2, l3]), where
        else:
            assert a["cc_state"] == b["cc_state"], where

    def check_on_rtt(self, k, args, before, after, out, where) -> None:
        b, a = before[k], after[k]
        rtt_us, now_ns = args
        if self.name != "cubic" or not self.hystart:
            assert a == b, where
            return
        st, exits = hystart_step(b["cc_state"] or CUBIC_RESET, b, rtt_us, now_ns)
        assert a["cc_state"] == st, where
        assert (a["cwnd"], a["cwnd_cnt"]) == (b["cwnd"], b["cwnd_cnt"]), where
        if exits:  # the exit point: ssthresh = cwnd, counted once
            assert (a["ssthresh"], a["hystart_exits"]) == (b["cwnd"], b["hystart_exits"] + 1), where
        else:
            assert (a["ssthresh"], a["hystart_exits"]) == (b["ssthresh"], b["hystart_exits"]), where

    def check_cong_avoid(self, k, args, before, after, out, where) -> None:
        b, a = before[k], after[k]
        acked, now_ns = args
        name = self.name
        in_ss = b["cwnd"] < b["ssthresh"]
        cwnd, left = slow_start(b["cwnd"], b["ssthresh"], acked)
        if in_ss and b["cwnd"] + acked <= b["ssthresh"]:
            # pure slow start: one segment per acked segment, nothing to the counter
            assert (a["cwnd"], a["cwnd_cnt"]) == (b["cwnd"] + acked, b["cwnd_cnt"]), where
        if in_ss:
            assert a["cwnd"] >= min(b["cwnd"] + acked, b["ssthresh"]), where
        if name == "olia":
            self.check_olia(k, b, a, before, after, acked, where)
            return
        # Reno, CUBIC, LIA never shrink the window on an ACK
        assert a["cwnd"] >= b["cwnd"], where
        if name == "cubic":
            st0 = b["cc_state"] or CUBIC_RESET
            if in_ss and left == 0:
                assert a["cc_state"] == st0, where
                return
            st = cubic_cnt(st0, cwnd, left, now_ns, b["min_rtt_us"])
            exact = {f: v for f, v in st.items() if f not in ("cnt", "k")}
            assert {f: v for f, v in a["cc_state"].items() if f not in ("cnt", "k")} == exact, where
            assert a["cc_state"]["k"] == pytest.approx(st["k"], rel=1e-12, abs=1e-12), where
            assert a["cc_state"]["cnt"] == pytest.approx(st["cnt"], rel=1e-9), where
            assert a["cc_state"]["cnt"] >= 2.0, where  # at most 1.5x per RTT
            # and the window grows by tcp_cong_avoid_ai with that cnt
            assert (a["cwnd"], a["cwnd_cnt"]) == reno_ai(cwnd, b["cwnd_cnt"], a["cc_state"]["cnt"], left), where
            return
        if in_ss and left == 0:
            assert (a["cwnd"], a["cwnd_cnt"]) == (cwnd, b["cwnd_cnt"]), where
            return
        reno = reno_ai(cwnd, b["cwnd_cnt"], cwnd, left)
        est = [s for s in after if s["established"]]
        if name == "reno" or len(est) <= 1:
            assert (a["cwnd"], a["cwnd_cnt"]) == reno, where
            return
        # LIA: RFC 6356's w (as ACKs per segment), within rounding; never more than Reno from the same state
        assert a["cwnd"] <= reno[0], (where, reno)
        w = lia_w([(s["cwnd"] if s is not a else cwnd, s["srtt_us8"]) for s in est], cwnd)
        lo = reno_ai(cwnd, b["cwnd_cnt"], w * (1 + 1e-12), left)
        hi = reno_ai(cwnd, b["cwnd_cnt"], w * (1 - 1e-12), left)
        assert lo[0] <= a["cwnd"] <= hi[0], (where, w, lo, hi)
        if lo[0] == hi[0]:
            assert a["cwnd_cnt"] == pytest.approx(lo[1], rel=1e-9, abs=1e-6), (where, w)

    def check_olia(self, k, b, a, before, after, acked, where) -> None:
        # loss3 follows snd_una on every ACK
        rec0 = b["cc_state"] if b["cc_state"] is not None else [0, 0, 0]
        assert a["cc_state"] == [rec0[0], rec0[1], b["una_bytes"]], where
        if b["cwnd"] < b["ssthresh"]:  # slow start; what is left over is dropped (mptcp_olia.c)
            assert (a["cwnd"], a["cwnd_cnt"]) == (min(b["cwnd"] + acked, b["ssthresh"]), b["cwnd_cnt"]), where
            return
        est = [s for s in after if s["established"]]
        if len(est) <= 1:
            assert (a["cwnd"], a["cwnd_cnt"]) == reno_ai(b["cwnd"], b["cwnd_cnt"], b["cwnd"], acked), where
            return
        view = [dict(s, cwnd=b["cwnd"]) if j == k else s for j, s in enumerate(after)]
        inc = olia_increase(view, k)
        # the coupled term alone never exceeds Reno's 1/cwnd (the rate sum holds cwnd itself); OLIA's
        # alpha adds at most 1/(|R| cwnd) on a best path without the largest window
        n = len(est)
        assert inc <= (1 + 1 / n) / b["cwnd"] * (1 + 1e-12), where
        c = b["cwnd_cnt"] + acked * inc
        if min(abs(c - 1), abs(c + 1)) < 1e-9 or (c > 1 and abs(c - round(c)) < 1e-9):
            return  # within rounding of a whole segment: either way is right
        if c >= 1.0:  # whole segments to the window, the fraction stays
            expected = (b["cwnd"] + math.floor(c), c - math.floor(c))
        elif c <= -1.0:  # a largest window gives up segments (at least 1 stays), the counter restarts
            expected = (max(1, b["cwnd"] + math.ceil(c)), 0.0)
        else:
            expected = (b["cwnd"], c)
        assert a["cwnd"] == expected[0], (where, inc, c)
        assert a["cwnd_cnt"] == pytest.approx(expected[1], rel=1e-9, abs=1e-9), (where, inc, c)


# ------------------------------------------------------------------------------------------ scenarios

cwnds = st.integers(1, 300) | st.integers(1, 100_000) | st.sampled_from([15, 16])  # 16: HyStart's low window
durations_ns = (st.sampled_from([0, 1000, CNT_REUSE_NS]) | st.integers(0, 3 * MS) | st.integers(0, 100 * MS)
                | st.integers(0, 3000 * MS))
rtts_us = st.integers(0, 2000) | st.integers(1000, 400_000) | st.integers(100_000, 300_000)


@st.composite
def subflow_init(draw: st.DrawFn) -> dict:
    nxt = draw(st.integers(0, 100))
    return {
        "cwnd": draw(cwnds),
        "ssthresh": draw(st.just(BIG) | st.integers(2, 300)),
        "cwnd_cnt": draw(st.just(0.0) | st.floats(0.0, 300.0)),
        "srtt_us8": draw(st.just(0) | st.integers(1, 8 * 400_000)),
        "min_rtt_us": draw(st.just(NO_RTT_US) | rtts_us),
        "una": draw(st.integers(0, nxt)),
        "nxt": nxt,
        "una_bytes": draw(st.integers(1, 10**6)),
        "established": draw(st.sampled_from([True, True, True, False])),
    }


def rtt_train(gap_us: tuple[int, int]) -> st.SearchStrategy[list[tuple[int, int]]]:
    """RTT samples within one round (una stays), as (gap before it, RTT) µs: close together an ACK
    train, spread out a round of samples for HyStart's delay detection; all above a random floor."""
    floors_us = st.integers(0, 40_000) | st.integers(100_000, 300_000)  # past 128 ms: the 16 ms clamp
    return floors_us.flatmap(lambda floor_us: st.lists(
        st.tuples(st.integers(*gap_us), st.integers(floor_us, floor_us + 30_000)), min_size=2, max_size=16))


def ops(n: int) -> st.SearchStrategy[tuple]:
    k = st.integers(0, n - 1)
    by_kind = {
        # (segments acked, segments acked in sequence, segments sent meanwhile, bytes acked)
        "ack": st.tuples(st.integers(0, 64) | st.integers(0, 3000), st.integers(0, 40), st.integers(0, 40),
                         st.integers(0, 60_000)),
        "rtt": rtts_us,
        "rtts": st.sampled_from([(0, 3000), (2001, 20_000)]).flatmap(rtt_train),
        # entering Recovery (3) or Loss (4), and the window after the cut as a share of ssthresh
        "loss": st.tuples(st.sampled_from([3, 4]), st.floats(0.0, 1.0)),
        "state": st.integers(0, 4),
        # the engine's own changes: a window set (recovery's end, PRR), a join, a counter reset
        "set": st.tuples(st.just("cwnd"), st.integers(1, 400)) | st.tuples(st.just("ssthresh"), st.integers(2, 400))
        | st.tuples(st.just("established"), st.just(True)) | st.tuples(st.just("cwnd_cnt"), st.just(0.0)),
    }
    # most calls are ACKs, as in a replay
    kinds = st.sampled_from(["ack", "ack", "ack", "ack", "rtt", "rtts", "loss", "state", "set"])
    return kinds.flatmap(lambda kind: st.tuples(st.just(kind), k, durations_ns, by_kind[kind]))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[dict], int, list[tuple]]:
    n = draw(st.integers(1, 4))
    inits = [draw(subflow_init()) for _ in range(n)]
    t0_ns = draw(st.just(0) | st.integers(0, 10_000 * MS))  # 0: CUBIC's epoch_start 0 means "none"
    return inits, t0_ns, draw(st.lists(ops(n), min_size=10, max_size=50))


def rtt_sample(c: Checked, k: int, rtt_us: int, now_ns: int) -> None:
    """As the sender takes an RTT sample (minimum and smoothed RTT), then the CC's on_rtt."""
    srtt_us8 = c.get(k, "srtt_us8")
    srtt_us8 = rtt_us << 3 if srtt_us8 == 0 else srtt_us8 + rtt_us - (srtt_us8 >> 3)
    c.set(k, min_rtt_us=min(c.get(k, "min_rtt_us"), rtt_us), srtt_us8=max(srtt_us8, 1))
    c.call("on_rtt", k, rtt_us, now_ns)


def run_op(c: Checked, op: tuple, now_ns: int) -> int:
    """Run `op` at `now_ns`; returns the time after it (a train of RTT samples takes time)."""
    kind, k = op[0], op[1]
    if kind != "set" and not c.get(k, "established"):
        # Only an established subflow gets ACKs, samples and losses (and it stays established). OLIA
        # would not be defined otherwise: the rate sum leaves out a subflow that is not established, so
        # its cwnd / rate^2 has no bound.
        c.set(k, established=True)
    if kind == "ack":
        acked, d_una, d_nxt, d_bytes = op[3]
        nxt = c.get(k, "nxt") + d_nxt
        c.set(k, nxt=nxt, una=min(c.get(k, "una") + d_una, nxt), una_bytes=c.get(k, "una_bytes") + d_bytes)
        c.call("cong_avoid", k, acked, now_ns)
    elif kind == "rtt":
        rtt_sample(c, k, op[3], now_ns)
    elif kind == "rtts":
        for gap_us, rtt_us in op[3]:
            now_ns += gap_us * 1000
            rtt_sample(c, k, rtt_us, now_ns)
    elif kind == "loss":
        state, share = op[3]
        ssthresh = c.call("ssthresh", k)
        cut: dict[str, Any] = {"ssthresh": ssthresh, "cwnd": max(1, int(ssthresh * share))}
        if state == 4:
            cut["cwnd_cnt"] = 0.0
        c.set(k, **cut)
        c.call("on_state", k, state, now_ns)
    elif kind == "state":
        c.call("on_state", k, op[3], now_ns)
    else:
        field, value = op[3]
        c.set(k, **{field: value})
    return now_ns


def play(name: str, hystart: bool, sc: tuple) -> Checked:
    inits, now_ns, script = sc
    c = Checked(name, hystart, inits)
    for op in script:
        now_ns = run_op(c, op, now_ns + op[2])
    return c


@pytest.mark.parametrize(("name", "hystart"), CCS, ids=[f"{n}{'' if h else '-nohystart'}" for n, h in CCS])
@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sc=scenarios())
def test_every_call_keeps_the_ccs_rules(name: str, hystart: bool, sc) -> None:
    first = play(name, hystart, sc)
    # the same calls again: the same state after every one of them
    assert play(name, hystart, sc).history == first.history


@pytest.mark.parametrize("name", ["reno", "cubic", "lia", "olia"])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(cwnd=st.integers(2, 200), acked=st.integers(1, 4), n_acks=st.integers(1, 2000), n=st.integers(1, 4),
       rtt_ms=st.lists(st.integers(5, 300), min_size=4, max_size=4))
def test_without_loss_the_window_never_shrinks_and_coupled_never_beats_reno(name: str, cwnd: int, acked: int,
                                                                             n_acks: int, n: int,
                                                                             rtt_ms: list[int]) -> None:
    """ACK clocking on subflow 0 of ``n`` (a window of ACKs per RTT, ``acked`` segments each), no loss,
    in congestion avoidance: the window only grows (OLIA too here: subflow 0, the only one ACKed, has
    the largest window and the only inter-loss distance, so no path is a best one without the largest
    window and every alpha is 0), and a coupled CC's subflow ends no larger than an uncoupled Reno's
    fed the same ACKs (RFC 6356 goal 2: do no harm)."""
    subflows = [{"cwnd": cwnd if j == 0 else cwnd // 2 + 1, "ssthresh": cwnd, "srtt_ms": rtt_ms[j]}
                for j in range(n)]
    g = group(name, *subflows)
    reno = group("reno", subflows[0])
    t = S
    for _ in range(n_acks):
        prev = sf(g)["cwnd"]
        g.cong_avoid(0, acked, t)
        reno.cong_avoid(0, acked, t)
        assert sf(g)["cwnd"] >= prev
        t += rtt_ms[0] * MS * acked // sf(g)["cwnd"] + 1
    if name in ("lia", "olia"):
        assert sf(g)["cwnd"] <= sf(reno)["cwnd"], (sf(g), sf(reno))
    if name == "reno":
        assert sf(g) == sf(reno)
