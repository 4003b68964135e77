"""STMS, the Slide Together Multipath Scheduler (Shi et al., "STMS: Improving MPTCP Throughput Under
Heterogeneous Networks", USENIX ATC 2018, seed 000): STMS-C and STMS-A. No public code exists
(docs/MODEL.md §11); this follows the paper.

Algorithm 1 (§3.1): when the fast subflow (lowest srtt) has cwnd space it takes the lowest unsent
segments (``unsentPackets[0]``, as many as its free cwnd); otherwise a slower subflow with space takes
``unsentPackets[Gap]`` — it jumps over ``Gap`` unsent segments that are left for the fast subflow, so
that its data arrives when the fast subflow's lower data has just arrived (in-order arrival). If
fewer than ``Gap + 1`` segments are unsent (send-buffer or application limited) or the MPTCP window
does not reach that far, the slow subflow skips this round (§4).

* True gap, eq. (2): ``Gap = B_f × (OWD_s − OWD_f)``. With RTT_s = 3·RTT_f and symmetric delays it
  equals CWND_f (Fig. 9).
* STMS-C ("calculation", §4): eq. (2) from what the subflow TCP measures — one-way delays taken as
  srtt/2 (symmetric paths assumed; Linux measures no OWD) and the fast path's bandwidth as
  cwnd·MSS/srtt (the default; ``bandwidth="delivery_rate"`` uses the measured delivery rate
  instead). So Gap = cwnd_f · (srtt_s − srtt_f) / (2 · srtt_f) segments.
* STMS-A ("adjustment", Algorithm 2): on every DATA_ACK that acknowledges more than 2 segments at
  once, ``delta_gap = +data_acked`` if the segment at the old left edge of the send window was sent
  by the slow subflow (the gap is too small: slow data arrives late and blocks), else
  ``−data_acked`` (the gap is too big: slow data waited for fast data). "gap += EWMA(delta_gap,
  adjust_interval)" leaves the EWMA's form and weight open. Read here as: at the end of each
  ``adjust_interval`` the feedback asks for gap + Σ delta_gap, and the gap becomes the EWMA of that,
  ``gap <- (1 − w)·gap + w·(gap + Σ delta_gap)`` = ``gap + w·Σ delta_gap`` with ``w = ewma_weight``
  (1/16 by default, as Linux's srtt-style gains). Why not the mean of the deltas: when both paths
  send at similar rates the slow segments interleave with fast ones, every hole is short and each
  burst DATA_ACK acks only 3-5 segments whatever the gap error, so only the *number* of same-signed
  bursts per interval carries the size of the error; a mean barely moves the gap (measured: it lags
  the true gap by 100+ segments), large weights (0.5) swing it between 0 and several times the
  true gap.
  The paper's default interval (§5) is (RTT_s + RTT_f)/2; ``adjust_interval_ms = 0`` applies that
  rule with the current srtts; the first interval starts at the first ACK after a gap was set.
  The gap starts from the STMS-C value the first time a slow subflow needs it.

More than two subflows (the paper has two): each non-fastest subflow j gets its own gap,
Σ_k B_k·(OWD_j − OWD_k) over the faster subflows k for STMS-C; STMS-A attributes a burst DATA_ACK
to the slow subflow that sent the blocking left-edge segment (+) or that sent a segment inside the
acknowledged range (−; all slow subflows if none did).

Retransmissions: the reinjection queue goes first, on the subflow the out-of-tree default would pick
(§1.2 path-mask rules); no opportunistic retransmission or penalization (not part of STMS).

For analysis, every time the gap is set the scheduler reports it on the run's observer channel:
``("gap", subflow, gap_segments)`` rows in ``run.observations`` (`Scheduler.observe`).
"""

from __future__ import annotations

import bisect
from typing import Any, ClassVar

from workbench.schedulers._minrtt import get_available_subflow
from workbench.schedulers._registry import register
from workbench.schedulers.base import ConnView, Decision, ParamSpec, Scheduler, SubflowView, is_available

__all__ = ["STMSAdjust", "STMSCalc", "stms_gap_segments", "true_gap_segments"]


def true_gap_segments(*, bw_fast_bps: float, owd_fast_ns: int, owd_slow_ns: int, mss_bytes: int) -> float:
    """Eq. (2): Gap = B_f × (OWD_s − OWD_f), in segments of ``mss_bytes`` (payload)."""
    return bw_fast_bps / 8.0 * (owd_slow_ns - owd_fast_ns) / 1e9 / mss_bytes


def stms_gap_segments(*, cwnd_fast: float, srtt_fast_ns: int, srtt_slow_ns: int) -> float:
    """STMS-C's estimate of eq. (2): B_f = cwnd_f·MSS/srtt_f and OWD = srtt/2, in segments."""
    if srtt_fast_ns <= 0 or srtt_slow_ns <= srtt_fast_ns:
        return 0.0
    return cwnd_fast * (srtt_slow_ns - srtt_fast_ns) / (2.0 * srtt_fast_ns)


def _usable(sf: SubflowView) -> bool:
    return sf.established and not sf.pf and sf.srtt_ns > 0


class _STMS(Scheduler):
    """Shared machinery of STMS-C and STMS-A (Algorithm 1)."""

    bandwidth: str

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        # segment -> slow subflow that took it out of order (§4 "mark the packets sent from the
        # slow path"); STMS-A reads it for the left edge of the window
        self._slow_sent: dict[int, int] = {}
        self._slow_keys: list[int] = []  # the keys of _slow_sent, ascending (cheap pruning)
        self._last_target = -1
        self._subflows: list[SubflowView] = []

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self._subflows = subflows  # the engine's live views (read-only)

    # ------------------------------------------------------------------ gap
    def _calc_gap(self, fast: SubflowView, slow: SubflowView, subflows: list[SubflowView]) -> float:
        """STMS-C: Σ over subflows faster than ``slow`` of B_k·(srtt_slow − srtt_k)/2, segments."""
        g = 0.0
        for k in subflows:
            if k.index == slow.index or not _usable(k) or k.backup != slow.backup or k.srtt_ns >= slow.srtt_ns:
                continue
            if self.bandwidth == "delivery_rate" and k.rate_bps > 0:
                g += true_gap_segments(bw_fast_bps=k.rate_bps, owd_fast_ns=k.srtt_ns // 2,
                                       owd_slow_ns=slow.srtt_ns // 2, mss_bytes=k.mss)
            else:
                g += stms_gap_segments(cwnd_fast=k.cwnd, srtt_fast_ns=k.srtt_ns, srtt_slow_ns=slow.srtt_ns)
        return g

    def gap(self, conn: ConnView, fast: SubflowView, slow: SubflowView, subflows: list[SubflowView]) -> int:
        """Segments to leave for the faster subflows before ``slow``'s next segment."""
        g = self._calc_gap(fast, slow, subflows)
        self.observe(conn.now_ns, "gap", slow.index, g)
        return round(g)

    # ------------------------------------------------------------------ Algorithm 1
    def on_applied(self, conn: ConnView, decision: Decision | tuple[int, int, int], n_segments: int) -> None:
        """Drop the mark of a slow decision the engine did not apply (a layer or the MPTCP window
        refused it)."""
        t = self._last_target
        if t >= 0:
            self._last_target = -1
            if not conn.seg_sent(t):
                self._slow_sent.pop(t, None)

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        rh = conn.reinject_head
        if rh >= 0:
            sf = get_available_subflow(subflows, conn.seg_path_mask(rh), True)
            return Decision(sf.index, rh) if sf is not None else None
        head = conn.head
        if head >= conn.n_segs:
            return None
        # active subflows; backups only when no active one is usable (§1.2's rule for dead paths)
        cand = [s for s in subflows if _usable(s) and not s.backup] or [s for s in subflows if _usable(s)]
        if not cand:
            # no RTT sample yet anywhere: plain first-available
            for s in subflows:
                if is_available(s) and not s.backup:
                    return Decision(s.index, -1, max(1, s.cwnd - s.in_flight - s.queued))
            return None
        cand.sort(key=lambda s: (s.srtt_us8, s.index))
        fast = cand[0]
        if is_available(fast):
            # Algorithm 1 line 3: the fast subflow always takes the lowest unsent segments
            if not conn.window_allows(head):
                return None
            n = fast.cwnd - fast.in_flight - fast.queued
            return Decision(fast.index, -1, n if n > 1 else 1)
        for slow in cand[1:]:
            if not is_available(slow):
                continue
            # Algorithm 1 line 5: the gap-th unsent segment (the engine knows which are sent ahead)
            target = conn.nth_unsent(self.gap(conn, fast, slow, subflows))
            if target >= conn.n_segs or not conn.window_allows(target):
                continue  # not enough unsent data beyond the gap: skip this round (§4)
            if target not in self._slow_sent:
                bisect.insort(self._slow_keys, target)
            self._slow_sent[target] = slow.index
            self._last_target = target
            return Decision(slow.index, target)
        return None


@register
class STMSCalc(_STMS):
    name: ClassVar[str] = "stms_c"
    description: ClassVar[str] = ("STMS-C: slow subflow sends from Gap = B_f·(OWD_s−OWD_f) segments ahead "
                                  "(eq. 2 from srtt/2 and cwnd/srtt), fast subflow sends in order")
    source: ClassVar[str] = "Shi et al., STMS: Improving MPTCP Throughput Under Heterogeneous Networks, USENIX ATC 2018 (§3.1, §4)"
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("bandwidth", "cwnd_srtt", choices=("cwnd_srtt", "delivery_rate"),
                  doc="fast-path bandwidth for eq. (2): cwnd·MSS/srtt or the measured delivery rate"),
    )


@register
class STMSAdjust(_STMS):
    name: ClassVar[str] = "stms_a"
    description: ClassVar[str] = ("STMS-A: STMS gap pre-allocation, gap adjusted from burst DATA_ACKs "
                                  "(EWMA over adjust_interval)")
    source: ClassVar[str] = ("Shi et al., STMS: Improving MPTCP Throughput Under Heterogeneous Networks, USENIX ATC 2018 "
                             "(§3.1 Algorithm 2, §5)")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("adjust_interval_ms", 0.0, 0.0, 2000.0,
                  doc="gap adjustment interval; 0 = the paper's rule (srtt_s + srtt_f)/2 (§5)"),
        ParamSpec("ewma_weight", 0.0625, 0.005, 1.0, log=True,
                  doc="weight of the newest interval's summed delta_gap in the EWMA (paper: unstated)"),
        ParamSpec("min_burst_segments", 2, 1, 16,
                  doc="a DATA_ACK adjusts the gap only if it acks more than this many segments (paper: 2)"),
        ParamSpec("bandwidth", "cwnd_srtt", choices=("cwnd_srtt", "delivery_rate"),
                  doc="bandwidth estimate for the initial (STMS-C) gap"),
    )
    adjust_interval_ms: float
    ewma_weight: float
    min_burst_segments: int

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        self._gap: dict[int, float] = {}     # slow subflow -> gap (segments)
        self._acc: dict[int, float] = {}     # Σ delta_gap of the current interval per slow subflow
        self._una = 0                        # DATA_ACK seen at the previous ACK (bytes)
        self._next_adjust_ns = -1

    def gap(self, conn: ConnView, fast: SubflowView, slow: SubflowView, subflows: list[SubflowView]) -> int:
        g = self._gap.get(slow.index)
        if g is None:
            g = self._calc_gap(fast, slow, subflows)
            self._gap[slow.index] = g
            self.observe(conn.now_ns, "gap", slow.index, g)
        return round(g)

    def _interval_ns(self, subflows: list[SubflowView]) -> int:
        if self.adjust_interval_ms > 0:
            return int(self.adjust_interval_ms * 1e6)
        r = sorted(s.srtt_ns for s in subflows if _usable(s) and not s.backup)
        if len(r) < 2:
            return 100_000_000
        return max((r[0] + r[-1]) // 2, 1_000_000)

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        una = conn.snd_una
        old = self._una
        if una > old:
            self._una = una
            mss = conn.mss
            data_acked = -(-(una - old) // mss)
            if data_acked > self.min_burst_segments and self._gap:
                first = conn.seg_at_dsn(old)
                last = conn.seg_at_dsn(una)
                blocker = self._slow_sent.get(first)
                if blocker is not None:
                    # Algorithm 2 line 5: the left edge was slow data -> the gap is too small
                    self._add(blocker, data_acked)
                else:
                    hit = {self._slow_sent[s] for s in range(first + 1, last) if s in self._slow_sent}
                    for j in hit or self._gap:
                        self._add(j, -data_acked)
            # forget marks below the new left edge (`on_applied` may have dropped a mark already:
            # a layer such as RBP can refuse the slow decision, and the key stays in _slow_keys)
            keys = self._slow_keys
            if keys and conn.seg_dsn(keys[0]) < una:
                k = bisect.bisect_left(keys, conn.seg_at_dsn(una))
                for seg in keys[:k]:
                    self._slow_sent.pop(seg, None)
                del keys[:k]
        if self._next_adjust_ns < 0:
            if self._gap:  # the first interval starts when a slow subflow first used the gap
                self._next_adjust_ns = now_ns + self._interval_ns(self._subflows)
        elif now_ns >= self._next_adjust_ns:
            self._adjust(now_ns)

    def _add(self, j: int, delta: float) -> None:
        self._acc[j] = self._acc.get(j, 0.0) + delta

    def _adjust(self, now_ns: int) -> None:
        """End of an adjust_interval: the gap the interval's feedback asks for is gap + Σ delta_gap;
        the new gap is the EWMA of it, i.e. gap += ewma_weight · Σ delta_gap."""
        w = self.ewma_weight
        for j, g in self._gap.items():
            g = max(0.0, (1.0 - w) * g + w * (g + self._acc.get(j, 0.0)))
            self._gap[j] = g
            self.observe(now_ns, "gap", j, g)
        self._acc.clear()
        self._next_adjust_ns = now_ns + self._interval_ns(self._subflows)
