"""Congestion control for replayed subflows: Reno, CUBIC (with HyStart), coupled LIA (RFC 6356), OLIA.

Follows the Linux structure: the subflow calls ``cong_avoid(sf, acked, now_ns)`` for ACKs that arrive
in the Open state and ``ssthresh(sf)`` when it enters Recovery or Loss; cwnd is an integer number of
segments grown through a fractional counter exactly like ``tcp_slow_start`` / ``tcp_cong_avoid_ai``.
Growth happens only while the subflow is cwnd-limited (``tcp_is_cwnd_limited``), otherwise an
application- or receive-window-limited flow would inflate cwnd without bound.

CUBIC uses the Linux constants (beta 717/1024, C = 410/1024, fast convergence, TCP friendliness,
initial ``cnt`` cap 20) in floating point instead of the kernel's fixed-point cube root, and HyStart
(ack-train and delay detection once per slow start, low window 16, ACKs at most 2 ms apart continue a
train, 8 samples, delay threshold clamp 4..16 ms, ack delay 1 ms) as in Linux 6.x. LIA and OLIA follow the out-of-tree ``mptcp_coupled.c`` / ``mptcp_olia.c``:
per-subflow slow start, coupled increase in congestion avoidance, Reno halving on loss.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from workbench.replay.mptcp import lia_terms, olia_terms

if TYPE_CHECKING:
    from workbench.replay.tcp import SubflowSender

__all__ = ["CUBIC", "LIA", "OLIA", "CongestionControl", "Reno", "make_cc"]

_BETA = 717 / 1024
_C = 410 / 1024
_BETA_SCALE = 8 * (1024 + 717) // 3 // (1024 - 717)  # = 15, Linux beta_scale
_HYSTART_LOW_WINDOW = 16
_HYSTART_MIN_SAMPLES = 8
_HYSTART_DELAY_MIN_US = 4000
_HYSTART_DELAY_MAX_US = 16000
_HYSTART_ACK_DELTA_US = 2000   # hystart_ack_delta_us: ACKs closer than this continue an ACK train
_HYSTART_ACK_DELAY_US = 1000   # hystart_ack_delay(): min(1 ms, 4 x GSO size / pacing rate), 1 ms here


def _slow_start(sf: SubflowSender, acked: int) -> int:
    """tcp_slow_start: grow by ``acked`` up to ssthresh; returns the acks left over for CA."""
    cwnd = sf.cwnd + acked
    if cwnd > sf.ssthresh:
        cwnd = max(sf.ssthresh, sf.cwnd)
    acked -= cwnd - sf.cwnd
    sf.cwnd = cwnd
    return acked


def _cong_avoid_ai(sf: SubflowSender, w: float, acked: int) -> None:
    """tcp_cong_avoid_ai: one segment per ``w`` segments acked (w may be fractional here)."""
    if sf.cwnd_cnt >= w:
        sf.cwnd_cnt = 0.0
        sf.cwnd += 1
    sf.cwnd_cnt += acked
    if sf.cwnd_cnt >= w:
        delta = int(sf.cwnd_cnt // w)
        sf.cwnd_cnt -= delta * w
        sf.cwnd += delta


class CongestionControl:
    """Base: Reno behaviour. ``group`` is the list of subflows of the connection (for coupled CCs)."""

    name = "reno"
    __slots__ = ("group",)

    def __init__(self, group: list[SubflowSender]) -> None:
        self.group = group

    def cong_avoid(self, sf: SubflowSender, acked: int, now_ns: int) -> None:
        if sf.cwnd < sf.ssthresh:
            acked = _slow_start(sf, acked)
            if not acked:
                return
        _cong_avoid_ai(sf, sf.cwnd, acked)

    def ssthresh(self, sf: SubflowSender) -> int:
        return max(sf.cwnd >> 1, 2)

    def on_rtt(self, sf: SubflowSender, rtt_us: int, now_ns: int) -> None:
        """An RTT sample (for delay-based parts such as HyStart)."""

    def on_state(self, sf: SubflowSender, state: int, now_ns: int) -> None:
        """Entering Recovery (3) or Loss (4) (Linux TCP_CA_* numbering)."""


class Reno(CongestionControl):
    name = "reno"
    __slots__ = ()


class CUBIC(CongestionControl):
    name = "cubic"
    __slots__ = ("hystart",)

    def __init__(self, group: list[SubflowSender], *, hystart: bool = True) -> None:
        super().__init__(group)
        self.hystart = hystart

    def _st(self, sf: SubflowSender) -> _CubicState:
        st = sf.cc_state
        if st is None:
            st = sf.cc_state = _CubicState()
        return st

    def cong_avoid(self, sf: SubflowSender, acked: int, now_ns: int) -> None:
        st = self._st(sf)
        if sf.cwnd < sf.ssthresh:
            acked = _slow_start(sf, acked)
            if not acked:
                return
        cnt = self._update(sf, st, acked, now_ns)
        _cong_avoid_ai(sf, cnt, acked)

    def _update(self, sf: SubflowSender, st: _CubicState, acked: int, now_ns: int) -> float:
        cwnd = sf.cwnd
        st.ack_cnt += acked
        if st.last_cwnd == cwnd and now_ns - st.last_time <= 31_250_000:  # HZ/32: reuse cnt
            return st.cnt
        if not (st.epoch_start and now_ns == st.last_time):
            st.last_cwnd = cwnd
            st.last_time = now_ns
            if st.epoch_start == 0:
                st.epoch_start = now_ns
                st.ack_cnt = acked
                st.tcp_cwnd = cwnd
                if st.last_max_cwnd <= cwnd:
                    st.k = 0.0
                    st.origin = float(cwnd)
                else:
                    st.k = ((st.last_max_cwnd - cwnd) / _C) ** (1 / 3)
                    st.origin = st.last_max_cwnd
            delay_min_s = (sf.min_rtt_us if sf.min_rtt_us < (1 << 60) else 0) / 1e6
            t = (now_ns - st.epoch_start) / 1e9 + delay_min_s
            target = st.origin + _C * (t - st.k) ** 3
            if target > cwnd:
                cnt = cwnd / (target - cwnd)
            else:
                cnt = 100.0 * cwnd
            if st.last_max_cwnd == 0 and cnt > 20:
                cnt = 20.0
            st.cnt = cnt
        # TCP friendliness: estimate what Reno would have by now and never be slower.
        delta = (cwnd * _BETA_SCALE) >> 3
        if delta > 0:
            while st.ack_cnt > delta:
                st.ack_cnt -= delta
                st.tcp_cwnd += 1
        if st.tcp_cwnd > cwnd:
            max_cnt = cwnd / (st.tcp_cwnd - cwnd)
            if st.cnt > max_cnt:
                st.cnt = max_cnt
        if st.cnt < 2:
            st.cnt = 2.0
        return st.cnt

    def ssthresh(self, sf: SubflowSender) -> int:
        st = self._st(sf)
        st.epoch_start = 0
        if sf.cwnd < st.last_max_cwnd:  # fast convergence
            st.last_max_cwnd = sf.cwnd * (1024 + 717) / 2048
        else:
            st.last_max_cwnd = float(sf.cwnd)
        return max(int(sf.cwnd * _BETA), 2)

    def on_state(self, sf: SubflowSender, state: int, now_ns: int) -> None:
        if state == 4:  # Loss: bictcp_reset (every field, W_max too: the next epoch grows from the
            # cwnd it starts at, at least 5 % per RTT) + bictcp_hystart_reset. delay_min, which
            # bictcp_reset clears too, stays the sender's minimum RTT here (RTT samples reach the CC
            # only in slow start).
            sf.cc_state = _CubicState()
            sf.cc_state.round_end_idx = sf.nxt

    def on_rtt(self, sf: SubflowSender, rtt_us: int, now_ns: int) -> None:
        """cubictcp_acked + hystart_update (net/ipv4/tcp_cubic.c): in slow start and until HyStart has
        found its exit point (``found``, cleared only by a loss-state reset), an ACK train longer
        than half the minimum RTT (ACKs under ``hystart_ack_delta_us`` apart; unpaced senders) or a
        round whose minimum RTT exceeds the minimum by delay_min / 8 (clamped to 4-16 ms) ends slow
        start at the current window."""
        if not self.hystart:
            return
        st = self._st(sf)
        st.delay_min_us = sf.min_rtt_us  # bictcp delay_min: the minimum RTT seen
        if st.found or sf.cwnd >= sf.ssthresh:
            return
        now_us = now_ns // 1000
        if sf.una > st.round_end_idx:  # a new round: bictcp_hystart_reset
            st.round_start_us = st.last_ack_us = now_us
            st.round_end_idx = sf.nxt
            st.curr_rtt_us = 1 << 60
            st.sample_cnt = 0
        if sf.cwnd < _HYSTART_LOW_WINDOW:
            return
        if now_us - st.last_ack_us <= _HYSTART_ACK_DELTA_US:
            st.last_ack_us = now_us
            threshold = (st.delay_min_us + _HYSTART_ACK_DELAY_US) >> 1
            if now_us - st.round_start_us > threshold:
                st.found = True
        if rtt_us < st.curr_rtt_us:
            st.curr_rtt_us = rtt_us
        if st.sample_cnt < _HYSTART_MIN_SAMPLES:
            st.sample_cnt += 1
        elif st.curr_rtt_us > st.delay_min_us + min(max(st.delay_min_us >> 3, _HYSTART_DELAY_MIN_US),
                                                    _HYSTART_DELAY_MAX_US):
            st.found = True
        if st.found:
            sf.ssthresh = sf.cwnd
            sf.hystart_exits += 1


class _CubicState:
    __slots__ = ("ack_cnt", "cnt", "curr_rtt_us", "delay_min_us", "epoch_start", "found", "k", "last_ack_us",
                 "last_cwnd", "last_max_cwnd", "last_time", "origin", "round_end_idx", "round_start_us",
                 "sample_cnt", "tcp_cwnd")

    def __init__(self) -> None:
        self.ack_cnt = 0
        self.cnt = 20.0
        self.epoch_start = 0
        self.k = 0.0
        self.last_cwnd = 0
        self.last_max_cwnd = 0.0
        self.last_time = 0
        self.origin = 0.0
        self.tcp_cwnd = 0
        self.delay_min_us = 0
        self.round_start_us = 0
        self.last_ack_us = 0
        self.round_end_idx = -1
        self.curr_rtt_us = 1 << 60
        self.sample_cnt = 0
        self.found = False


def _srtt_s(sf: SubflowSender) -> float:
    return max(sf.srtt_us8, 8) / 8e6


def _lia_terms(group: list[SubflowSender]) -> tuple[int, int, float, float]:
    """workbench.replay.mptcp.lia_terms for subflows that are not the engine's (test doubles). One
    pass; the sums keep the order and operations of the formula (bit-identical to a three-pass form)."""
    n = 0
    tot = 0
    best = 0.0
    first = True
    denom = 0.0
    for s in group:
        if not s.established:
            continue
        n += 1
        r = _srtt_s(s)
        tot += s.cwnd
        x = s.cwnd / r ** 2
        if first or x > best:
            best = x
            first = False
        denom += s.cwnd / r
    return n, tot, best, denom


class LIA(CongestionControl):
    """RFC 6356 linked increases: alpha = cwnd_tot * max(w_i/rtt_i^2) / (sum w_i/rtt_i)^2."""

    name = "lia"
    __slots__ = ()

    def cong_avoid(self, sf: SubflowSender, acked: int, now_ns: int) -> None:
        if sf.cwnd < sf.ssthresh:
            acked = _slow_start(sf, acked)
            if not acked:
                return
        # The sums over the group run on every ACK in congestion avoidance: compiled for engine
        # subflows (workbench.replay.mptcp.lia_terms), else `_lia_terms`; same results.
        terms = lia_terms(self.group)
        n, tot, best, denom = terms if terms is not None else _lia_terms(self.group)
        if n <= 1:
            _cong_avoid_ai(sf, sf.cwnd, acked)
            return
        alpha = tot * best / denom ** 2
        # increase per acked segment = min(alpha / cwnd_tot, 1 / cwnd_i) -> one segment per w acked
        w = max(tot / alpha, sf.cwnd)
        _cong_avoid_ai(sf, w, acked)


def _olia_terms(group: list[SubflowSender], sf: SubflowSender) -> tuple[int, int, float, float, int, float, int]:
    """workbench.replay.mptcp.olia_terms for subflows that are not the engine's (test doubles):
    three passes over the group; same operations in the same order as the formula."""
    n = 0
    max_cwnd = 0
    for s in group:
        if s.established:
            n += 1
            if s.cc_state is None:
                s.cc_state = [s.una_bytes] * 3
            if s.cwnd > max_cwnd:
                max_cwnd = s.cwnd
    if n <= 1:
        return n, max_cwnd, 0.0, 0.0, 0, 0.0, 0
    # best paths B: maximise inter-loss distance / rtt^2; M: paths with the largest window
    rtt = _srtt_s(sf)
    scores: list[float] = []
    best = 0.0
    rate = 0.0
    n_m = 0
    sf_score = 0.0
    for s in group:
        if not s.established:
            continue
        rs = _srtt_s(s)
        st = s.cc_state
        sc = max(st[2] - st[1], st[1] - st[0]) / rs ** 2
        scores.append(sc)
        if len(scores) == 1 or sc > best:
            best = sc
        if s.cwnd == max_cwnd:
            n_m += 1
        if s is sf:
            sf_score = sc
        rate += s.cwnd * rtt / rs
    b_not_m = 0
    k = 0
    for s in group:
        if s.established:
            if s.cwnd != max_cwnd and scores[k] == best:
                b_not_m += 1
            k += 1
    return n, max_cwnd, best, rate, n_m, sf_score, b_not_m


class OLIA(CongestionControl):
    """Opportunistic linked increases (Khalili et al.), as in out-of-tree ``mptcp_olia.c``."""

    name = "olia"
    __slots__ = ()

    def on_state(self, sf: SubflowSender, state: int, now_ns: int) -> None:
        st = sf.cc_state
        if st is None:
            return
        if st[2] != st[1]:
            st[0], st[1] = st[1], st[2]

    def cong_avoid(self, sf: SubflowSender, acked: int, now_ns: int) -> None:
        if sf.cc_state is None:
            sf.cc_state = [0, 0, 0]  # loss1, loss2, loss3: snd_una (bytes) at the last losses
        sf.cc_state[2] = sf.una_bytes
        if sf.cwnd < sf.ssthresh:
            _slow_start(sf, acked)
            return
        # The group terms run on every ACK in congestion avoidance: compiled for engine subflows
        # (workbench.replay.mptcp.olia_terms), else `_olia_terms`; same results.
        terms = olia_terms(self.group, sf)
        n, max_cwnd, best, rate, n_m, sf_score, b_not_m = (terms if terms is not None
                                                           else _olia_terms(self.group, sf))
        if n <= 1:
            _cong_avoid_ai(sf, sf.cwnd, acked)
            return
        if b_not_m == 0:
            eps = 0.0
        elif sf.cwnd < max_cwnd and sf_score == best:
            eps = 1.0 / (n * b_not_m)
        elif sf.cwnd == max_cwnd:
            eps = -1.0 / (n * n_m)
        else:
            eps = 0.0
        inc = acked * (sf.cwnd / (rate * rate) + eps / sf.cwnd)  # segments of cwnd per acked segment
        sf.cwnd_cnt += inc
        if sf.cwnd_cnt >= 1.0:
            sf.cwnd += int(sf.cwnd_cnt)
            sf.cwnd_cnt -= int(sf.cwnd_cnt)
        elif sf.cwnd_cnt <= -1.0:
            sf.cwnd = max(1, sf.cwnd + math.ceil(sf.cwnd_cnt))
            sf.cwnd_cnt = 0.0


def make_cc(name: str, group: list[SubflowSender], *, hystart: bool = True) -> CongestionControl:
    """A congestion controller by name: ``reno``, ``cubic``, ``lia``, ``olia``."""
    key = name.lower()
    if key == "reno":
        return Reno(group)
    if key == "cubic":
        return CUBIC(group, hystart=hystart)
    if key in ("lia", "coupled"):
        return LIA(group)
    if key == "olia":
        return OLIA(group)
    raise ValueError(f"unknown congestion control {name!r} (reno, cubic, lia, olia)")
