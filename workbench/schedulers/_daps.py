"""DAPS — Delay-Aware Packet Scheduling (Kuhn et al., ICC 2014), docs/MODEL.md §8.

Models seed paper 002 §III-A and the Karlstad kernel module ``vkirany/mptcp-kau
net/mptcp/mptcp_daps.c`` (``mptcp_begin_schedule``, ``algo1``, ``mptcp_next_segment``,
``mptcp_update_scwnd``). A schedule is planned over one period ``T_end = lcm(D_1..D_n)`` of the
subflows' one-way delays ``D_i = srtt_i / 2`` (subflows sorted by srtt): walking virtual time
``t = 1..T_end``, at every multiple of ``D_i`` subflow ``i`` gets the next ``C_i`` meta segments in
order, ``C_i`` being its planned cwnd (a smoothed cwnd, EWMA 7/8 sampled once per RTT). The slow
subflow's turns come late in the period, so its segments are the higher sequence numbers and arrive
in order with the fast subflow's. Segments are handed to the subflow *without* a cwnd test (they
queue on it and leave as cwnd opens); when the schedule yields nothing (every turn used or no
subflow usable) a new period is planned, and if that yields nothing either the default min-srtt
subflow with cwnd space is used. ``allow_optim = 1``: when the MPTCP window is full, the oldest
unacked segment is resent on the lowest-srtt subflow with cwnd space if it has not carried it yet —
without penalization. Reinjected segments take the schedule's next turn (as in the code), unless
that subflow already carried them (then the default path-mask choice).

The microsecond / overflow issue (``variant``):

* ``variant="kernel"`` reproduces the code: ``srtt_us >> 3`` is **µs** although the comments say ms,
  so ``round_delay = 4`` rounds ``D_i`` to 4 µs, and ``lcm`` is computed in 32-bit ``int`` as
  ``a*b/gcd`` — the product wraps as soon as it exceeds 2^31 (e.g. one-way delays 20 ms and 110 ms),
  giving a garbage (possibly ≤ 0) period. We wrap the product to int32 exactly like two's-complement
  C and truncate the division toward zero; a period ≤ 0 makes ``algo1`` return nothing, so such a
  connection runs on the min-srtt fallback (the behaviour the kernel module would show). The virtual
  clock steps 1 µs at a time in the code; we jump straight to the next multiple of some ``D_i``,
  which visits the same turns in the same order.
* ``variant="paper"``: the intended behaviour — ``D_i`` in milliseconds rounded to
  ``round_delay_ms`` (minimum 1 ms), exact (arbitrary-precision) lcm.
"""

from __future__ import annotations

import math
from typing import ClassVar

from workbench.schedulers._minrtt import get_available_subflow
from workbench.schedulers._registry import register
from workbench.schedulers.base import (
    ConnView,
    Decision,
    ParamSpec,
    Scheduler,
    SubflowView,
    lowest_rtt_available,
)

__all__ = ["DAPS", "lcm_c_int32"]


def _wrap_int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def lcm_c_int32(a: int, b: int) -> int:
    """The kau module's ``lcm(a, b) = a*b/gcd(a, b)`` in 32-bit C ``int`` (wrapping product,
    division truncating toward zero)."""
    g = math.gcd(a, b) or 1
    p = _wrap_int32(a * b)
    q = abs(p) // g
    return q if p >= 0 else -q


@register
class DAPS(Scheduler):
    """DAPS: a periodic schedule over lcm(one-way delays), C_i segments per turn, queued beyond cwnd.

    ``variant="kernel"`` (default): the kau code's µs units and 32-bit lcm overflow (a wrapped period
    ≤ 0 falls back to min-srtt). ``variant="paper"``: ms units, exact lcm. See the module docstring.
    """

    name: ClassVar[str] = "daps"
    queues_beyond_cwnd: ClassVar[bool] = True  # data waits on the subflow until its cwnd opens
    description: ClassVar[str] = ("DAPS: periodic schedule over the lcm of path delays, planned cwnd "
                                  "segments per turn, for in-order arrival")
    source: ClassVar[str] = ("Kuhn et al., 'DAPS: Intelligent Delay-Aware Packet Scheduling for "
                             "Multipath Transport', ICC 2014 (seed 002 §III-A); "
                             "vkirany/mptcp-kau net/mptcp/mptcp_daps.c")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("variant", "kernel", choices=("kernel", "paper"),
                  doc="kernel: µs delays + 32-bit lcm overflow as the code; paper: ms, exact lcm"),
        ParamSpec("round_delay", 4, 1, 1000, log=True,
                  doc="kernel variant: D_i rounded to a multiple of this many µs (the code's 4 'ms')"),
        ParamSpec("round_delay_ms", 1, 1, 50, log=True,
                  doc="paper variant: D_i rounded to a multiple of this many ms"),
        ParamSpec("use_planned_cwnd", True, choices=(True, False),
                  doc="C_i = smoothed cwnd (EWMA 7/8 per RTT) instead of the current cwnd"),
        ParamSpec("allow_optim", True, choices=(True, False),
                  doc="resend the oldest unacked segment on the fastest subflow when the window is full"),
        ParamSpec("max_flows", 8, 1, 32, doc="MAX_FLOWS: subflows taking part in a schedule"),
    )
    variant: str
    round_delay: int
    round_delay_ms: int
    use_planned_cwnd: bool
    allow_optim: bool
    max_flows: int

    def __init__(self, **values: object) -> None:
        super().__init__(**values)
        self._reset()

    def _reset(self) -> None:
        self._flows: list[int] = []      # subflow indices, sorted by srtt
        self._d: list[int] = []          # D_i in the variant's unit
        self._c: list[int] = []          # planned segments per turn
        self._left: list[int] = []       # segments_left_i (-1 = turn not started)
        self._t = 1
        self._i = 0
        self._t_end = 0
        self._scwnd: dict[int, float] = {}
        self._scwnd_t_ns: dict[int, int] = {}
        self.periods_planned = 0

    @property
    def period(self) -> int:
        """T_end of the current schedule (µs for the kernel variant, ms for the paper one)."""
        return self._t_end

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self._reset()

    # -------------------------------------------------------------------------------- schedule
    def _update_scwnd(self, now_ns: int, subflows: list[SubflowView]) -> None:
        """mptcp_update_scwnd: smoothed cwnd, EWMA 7/8, at most once per srtt."""
        for sf in subflows:
            i = sf.index
            if i not in self._scwnd:
                self._scwnd[i] = float(sf.cwnd)
                self._scwnd_t_ns[i] = now_ns
            elif now_ns - self._scwnd_t_ns[i] >= sf.srtt_ns:
                self._scwnd[i] = (7 * self._scwnd[i] + sf.cwnd) / 8
                self._scwnd_t_ns[i] = now_ns

    def _delay(self, sf: SubflowView) -> int:
        if self.variant == "kernel":
            rd = self.round_delay
            owd = (sf.srtt_us8 >> 3) // 2  # µs (the code calls them ms)
        else:
            rd = self.round_delay_ms
            owd = sf.srtt_ns // 2_000_000  # ms
        d = (owd + rd // 2) // rd * rd
        return max(d, 1)

    def _begin_schedule(self, subflows: list[SubflowView]) -> None:
        """mptcp_begin_schedule: sort usable subflows by srtt, fix D_i, C_i and T_end."""
        flows = sorted((sf for sf in subflows if sf.established and sf.srtt_us8 > 0),
                       key=lambda s: (s.srtt_us8, s.index))[: self.max_flows]
        self._flows = [sf.index for sf in flows]
        self._d = [self._delay(sf) for sf in flows]
        if self.use_planned_cwnd:
            self._c = [max(1, int(self._scwnd.get(sf.index, sf.cwnd))) for sf in flows]
        else:
            self._c = [max(1, sf.cwnd) for sf in flows]
        self._left = [-1] * len(flows)
        t_end = self._d[0] if self._d else 0
        for d in self._d[1:]:
            t_end = lcm_c_int32(t_end, d) if self.variant == "kernel" else math.lcm(t_end, d)
        self._t_end = t_end
        self._t = 1
        self._i = 0
        self.periods_planned += 1

    def _algo1(self, by_index: dict[int, SubflowView]) -> int:
        """Position (in the schedule) of the subflow that gets the next in-order segment, or -1."""
        d = self._d
        n = len(d)
        if not any((sf := by_index.get(f)) is not None and sf.established and not sf.pf for f in self._flows):
            # every turn would be skipped: the kernel walks the whole period to its end (µs steps)
            self._t = self._t_end + 1
            return -1
        while self._t <= self._t_end:
            t = self._t
            while self._i < n:
                i = self._i
                if t % d[i] == 0:
                    sf = by_index.get(self._flows[i])
                    if sf is None or not sf.established or sf.pf:
                        self._left[i] = -1
                        self._i += 1
                        continue
                    if self._left[i] == -1:
                        self._left[i] = self._c[i]
                    if self._left[i] == 0:
                        self._left[i] = -1
                        self._i += 1
                        continue
                    return i
                self._i += 1
            # the code steps t by one unit; jump to the next multiple of any D_i (same turns, same order)
            self._i = 0
            self._t = min((t // x + 1) * x for x in d)
        return -1

    # -------------------------------------------------------------------------------- decisions
    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        self._update_scwnd(conn.now_ns, subflows)
        rh = conn.reinject_head
        head = conn.head
        if rh < 0 and (head >= conn.n_segs or not conn.window_allows(head)):
            if rh < 0 and head < conn.n_segs and self.allow_optim:
                return self._optim(conn, subflows)
            return None
        by_index = {sf.index: sf for sf in subflows}
        pos = self._algo1(by_index)
        if pos < 0:
            self._begin_schedule(subflows)
            pos = self._algo1(by_index)
        if pos < 0:  # get_daps_available_subflow: the default min-srtt choice
            seg = rh if rh >= 0 else -1
            sf = get_available_subflow(subflows, conn.seg_path_mask(rh) if rh >= 0 else 0, True)
            if sf is None:
                return None
            if seg >= 0:
                return Decision(sf.index, seg)
            n = sf.cwnd - sf.in_flight - sf.queued
            return Decision(sf.index, -1, n if n > 1 else 1)
        sf = by_index[self._flows[pos]]
        if rh >= 0:
            if sf.carried(rh):
                alt = get_available_subflow(subflows, conn.seg_path_mask(rh), True)
                return Decision(alt.index, rh) if alt is not None else None
            self._left[pos] -= 1
            return Decision(sf.index, rh)
        # hand the rest of this turn in one go (kernel: limit = segments_left * mss), within the window
        want = self._left[pos]
        n = 0
        i = head
        while n < want and i < conn.n_segs and conn.window_allows(i):
            n += 1
            i += 1
            while i < conn.n_segs and conn.seg_sent(i):
                i += 1
        if n == 0:
            return None
        self._left[pos] -= n
        return Decision(sf.index, -1, n)

    def _optim(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        """allow_optim: oldest unacked segment on the lowest-srtt subflow with cwnd space, no penalty."""
        old = conn.oldest_unacked
        if old < 0:
            return None
        best = lowest_rtt_available(subflows)
        if best is None or best.carried(old):
            return None
        return Decision(best.index, old)
