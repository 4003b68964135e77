"""STTF — Shortest Transfer Time First (Hurtig et al., IEEE/ACM ToN 2019), docs/MODEL.md §10.

Models seed paper 002 §IV-B (Algorithms 2 and 3) and the Karlstad kernel module ``vkirany/mptcp-kau
net/mptcp/mptcp_sttf.c`` (``compute_tt``, ``get_subflow_from_selectors``, ``pre_scheduler``).

Transfer time of one more segment on subflow ``s`` (Algorithm 3 / ``compute_tt``), with ``q`` = 1 +
segments already queued (or planned) on ``s``, ``free = max(0, cwnd − in_flight)``:
``q ≤ free`` → ``srtt/2``; otherwise ``q −= free`` and the remaining segments are sent in rounds of
one srtt each, the window of round ``k`` growing as the congestion state dictates — doubling while
below ``ssthresh`` (slow start; the round that crosses ssthresh is capped there), then +1 per round
(congestion avoidance) — and the segment arrives half an srtt after the start of its round:
``tt = rounds·srtt + srtt/2``. Every subflow that passes the state checks (established, not
potentially failed, not in Loss) is a candidate, with or without free cwnd; backup flags are
ignored (``g_subflow = 0``); ties go to the subflow listed first.

Scheduling and rescheduling (Algorithm 2): all unsent segments are assigned in order, each to the
subflow with the shortest transfer time given the segments assigned before it; subflows transmit
what their cwnd allows; when anything changes (an ACK) the unsent assignments are dropped and the
unsent data is planned again. The engine has no operation to pull unsent segments back out of a
subflow queue, so ``reschedule=True`` (default) keeps the plan *inside the scheduler*: only the
segments a subflow can transmit right now (its free cwnd) are handed to it — from the head if the
plan puts the head there, otherwise the later segment the plan gives it (out-of-order sending, e.g.
the slow path's share) — and the rest stays at the MPTCP level, planned again on the next call. This
is observably the same as queueing and rescheduling on every ACK. The plan is computed in closed
form: the segments subflow ``A`` gets in its free slots start at position Σ_B #{segments B would
deliver within srtt_A/2} of the unsent data. ``reschedule=False`` is the kau ``get_subflow`` without
the rescheduling caller (which was not found in the code): argmin transfer time per segment, queued
on that subflow beyond cwnd and never moved again.

Deviations, stated: the kau code uses a kau-added ``rtt_last`` field (presumably the last RTT
sample); the views expose srtt, which is used here. ``optim = 1``: when the MPTCP window is full, the
oldest unacked segment is resent on the lowest-srtt subflow with cwnd space (default gate: not yet
carried there, slow carrier srtt > 4× or cwnd ≤ 4) without penalization.
"""

from __future__ import annotations

from typing import ClassVar

from workbench.schedulers._registry import register
from workbench.schedulers.base import (
    CA_LOSS,
    ConnView,
    Decision,
    ParamSpec,
    Scheduler,
    SubflowView,
    is_available,
    lowest_rtt_available,
)

__all__ = ["STTF", "sttf_transfer_time_ns"]

_MAX_ROUNDS = 10_000


def _next_cwnd(cwnd: int, ssthresh: int) -> int:
    """Window of the next round: x2 in slow start (capped at ssthresh), +1 in congestion avoidance."""
    if cwnd < ssthresh:
        return min(2 * cwnd, max(ssthresh, cwnd + 1))
    return cwnd + 1


def sttf_transfer_time_ns(sf: SubflowView, *, extra: int = 0) -> float:
    """compute_tt: time (ns) until one more segment handed to ``sf`` arrives, with ``extra`` more
    segments pretended queued on it."""
    rtt = sf.srtt_ns
    q = 1 + sf.queued + extra
    free = sf.cwnd - sf.in_flight
    if free < 0:
        free = 0
    if q <= free:
        return 0.5 * rtt
    q -= free
    tt = rtt
    cwnd = _next_cwnd(max(sf.cwnd, 1), sf.ssthresh)
    rounds = 0
    while q > cwnd and rounds < _MAX_ROUNDS:
        q -= cwnd
        tt += rtt
        cwnd = _next_cwnd(cwnd, sf.ssthresh)
        rounds += 1
    return tt + 0.5 * rtt


def _count_within(sf: SubflowView, t_ns: float, *, inclusive: bool, limit: int) -> int:
    """How many more segments ``sf`` would be planned with transfer time < ``t_ns`` (<= if inclusive),
    at most ``limit``."""
    rtt = sf.srtt_ns

    def ok(tt: float) -> bool:
        return tt <= t_ns if inclusive else tt < t_ns

    if not ok(0.5 * rtt):
        return 0
    free = sf.cwnd - sf.in_flight
    if free < 0:
        free = 0
    cap = free  # segments (counting those already queued) delivered with tt = rtt/2
    cwnd = max(sf.cwnd, 1)
    k = 1
    while cap - sf.queued < limit and k < _MAX_ROUNDS and ok(k * rtt + 0.5 * rtt):
        cwnd = _next_cwnd(cwnd, sf.ssthresh)
        cap += cwnd
        k += 1
    n = cap - sf.queued
    return min(max(n, 0), limit)


def _usable(sf: SubflowView) -> bool:
    return sf.established and not sf.pf and sf.ca_state != CA_LOSS and sf.srtt_ns > 0


@register
class STTF(Scheduler):
    """STTF: each segment to the subflow with the shortest predicted transfer time (slow-start and
    congestion-avoidance rounds), unsent data replanned whenever conditions change.

    ``reschedule=True`` (default, paper Algorithm 2): the plan lives in the scheduler and only what a
    subflow can send now is committed. ``reschedule=False``: kau ``get_subflow`` alone, segments
    queued beyond cwnd on their argmin subflow for good. ``optim``: opportunistic retransmission
    without penalization when the MPTCP window is full (kau ``optim = 1``).
    """

    name: ClassVar[str] = "sttf"
    description: ClassVar[str] = ("STTF: shortest predicted transfer time (slow-start/CA rounds) per "
                                  "segment, unsent data rescheduled when conditions change")
    source: ClassVar[str] = ("Hurtig et al., 'Low-Latency Scheduling in MPTCP', IEEE/ACM ToN 2019 "
                             "(seed 002 §IV-B, Alg. 2-3); vkirany/mptcp-kau net/mptcp/mptcp_sttf.c")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("reschedule", True, choices=(True, False),
                  doc="replan unsent data on every event (paper) vs. queue for good (kau get_subflow)"),
        ParamSpec("optim", True, choices=(True, False),
                  doc="opportunistic retransmission (no penalization) when the MPTCP window is full"),
        ParamSpec("max_batch", 64, 1, 4096, log=True,
                  doc="reschedule=False: segments per decision while one subflow stays the shortest"),
    )
    reschedule: bool
    optim: bool
    max_batch: int

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        cands = [sf for sf in subflows if _usable(sf)]
        if not cands:
            return None
        rh = conn.reinject_head
        # A reinjection goes out now or not at all: only to a subflow with room in its cwnd (the
        # out-of-tree reinjection path calls the availability test with the cwnd check on).
        if rh >= 0:
            room = [sf for sf in cands if is_available(sf)]
            if not room:
                return None  # reinjections first: wait for cwnd room rather than send new data
            cands = room
            best = None
            best_t = float("inf")
            for sf in cands:
                if sf.carried(rh):
                    continue
                t = sttf_transfer_time_ns(sf)
                if t < best_t:
                    best, best_t = sf, t
            if best is None:  # path mask cleared: the overall shortest
                best = min(cands, key=sttf_transfer_time_ns)
            return Decision(best.index, rh)
        head = conn.head
        if head >= conn.n_segs:
            return None
        if not conn.window_allows(head):
            return self._optim(conn, subflows) if self.optim else None
        if self.reschedule:
            return self._plan(conn, cands)
        return self._greedy(conn, cands)

    def _greedy(self, conn: ConnView, cands: list[SubflowView]) -> Decision:
        times = [(sttf_transfer_time_ns(sf), sf.index, sf) for sf in cands]
        times.sort(key=lambda x: (x[0], x[1]))
        _, best_i, best = times[0]
        second_t, second_i = (times[1][0], times[1][1]) if len(times) > 1 else (float("inf"), 1 << 30)
        n = 1
        cap = min(self.max_batch, conn.n_segs - conn.head)
        while n < cap:
            t = sttf_transfer_time_ns(best, extra=n)
            if t > second_t or (t == second_t and second_i < best_i):
                break
            n += 1
        return Decision(best.index, -1, n)

    def _plan(self, conn: ConnView, cands: list[SubflowView]) -> Decision | None:
        n_unsent = 0
        i = conn.head
        # unsent segments (a few may have been sent out of order already); count lazily up to need
        best_pos = None
        best_sf = None
        best_slots = 0
        for a in cands:
            slots = a.cwnd - a.in_flight - a.queued
            if slots <= 0:
                continue
            t_a = 0.5 * a.srtt_ns
            pos = 0
            for b in cands:
                if b is a:
                    continue
                # ties go to the subflow listed first
                pos += _count_within(b, t_a, inclusive=b.index < a.index, limit=1 << 40)
            if best_pos is None or pos < best_pos:
                best_pos, best_sf, best_slots = pos, a, slots
        if best_sf is None:
            return None  # every subflow's cwnd is full: the plan waits at the MPTCP level
        if best_pos == 0:
            return Decision(best_sf.index, -1, best_slots)
        # the best_pos-th unsent segment (0-based) goes out of order on best_sf now
        n_segs = conn.n_segs
        while i < n_segs:
            if not conn.seg_sent(i):
                if n_unsent == best_pos:
                    return Decision(best_sf.index, i) if conn.window_allows(i) else None
                n_unsent += 1
            i += 1
        return None  # the plan puts all unsent data on faster subflows: wait for them

    def _optim(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        """mptcp_rcv_buf_optimization with optim = 1 and no penalization."""
        old = conn.oldest_unacked
        if old < 0:
            return None
        sf = lowest_rtt_available(subflows)
        if sf is None or sf.carried(old):
            return None
        do = False
        for x in subflows:
            if x.index == sf.index or not x.carried(old):
                continue
            if x.cwnd <= 4:
                do = True
                break
            if 4 * sf.srtt_us8 >= x.srtt_us8:
                do = False
                break
            do = True
        return Decision(sf.index, old) if do else None
