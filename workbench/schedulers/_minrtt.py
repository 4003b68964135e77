"""Out-of-tree Linux MPTCP default scheduler ("minRTT"/LowRTT), docs/MODEL.md §1.

Subflow choice = ``get_available_subflow`` with path-mask handling and backup rules (§1.2); segment
choice = reinjection queue first, then the send head (§1.3), handing the chosen subflow as many
segments as its free cwnd (net of what is already queued on it) allows in one decision, like the
kernel's multi-MSS skb. When the MPTCP receive window blocks new data, or there is no new data and
the send buffer is full, opportunistic retransmission of the oldest unacked segment on the chosen
(fast) subflow + penalization of slower carriers (§1.4, v0.95: every slower carrier in Open state,
at most once per srtt of the fast subflow). ``opportunistic=False`` switches both off.
"""

from __future__ import annotations

from typing import ClassVar

from workbench.schedulers._registry import register
from workbench.schedulers.base import CA_LOSS, CA_OPEN, ConnView, Decision, ParamSpec, Scheduler, SubflowView

__all__ = ["MinRTT", "MinRTTNoOR", "get_available_subflow", "temp_unavailable"]

_INF = 1 << 62


def temp_unavailable(sf: SubflowView, *, strict_queue: bool = True) -> bool:
    """mptcp_is_temp_unavailable without the window tests (the engine applies those)."""
    if sf.ca_state == CA_LOSS:
        return True
    inflight = sf.in_flight
    cwnd = sf.cwnd
    if inflight >= cwnd:
        return True
    q = sf.queued_bytes
    space = (cwnd - inflight) * sf.mss
    return q >= space if strict_queue else q > space


def _select(subflows: list[SubflowView], mask: int, backup: bool) -> tuple[SubflowView | None, bool]:
    """get_subflow_from_selectors for one class (active or backup)."""
    best = None
    best_rtt = _INF
    found_unused = False
    found_unused_una = False
    for sf in subflows:
        if sf.backup != backup:
            continue
        unused = not (mask >> sf.index) & 1
        if not unused and found_unused:
            continue
        if not sf.established or sf.pf:
            continue
        if temp_unavailable(sf):
            if unused:
                found_unused_una = True
            continue
        if unused and not found_unused:
            best = None
            best_rtt = _INF
            found_unused = True
        r = sf.srtt_us8
        if r < best_rtt:
            best = sf
            best_rtt = r
    return best, (found_unused if best is not None else found_unused_una)


def _lowest_rtt_available(subflows: list[SubflowView]) -> tuple[SubflowView | None, bool, int]:
    """get_available_subflow's common case for new data (path mask 0): among active (non-backup)
    established subflows that are not potentially failed, the one with the lowest srtt that is not
    temporarily unavailable (Loss state, cwnd full, or queued bytes filling the free cwnd). Returns
    (that subflow or None, whether an active subflow was temporarily unavailable, number of backup
    subflows)."""
    sf = None
    best_rtt = _INF
    busy = False
    n_backup = 0
    for x in subflows:
        if x.backup:
            n_backup += 1
            continue
        if not x.established or x.pf:
            continue
        inflight = x.in_flight
        cwnd = x.cwnd
        if x.ca_state == CA_LOSS or inflight >= cwnd or x.queued_bytes >= (cwnd - inflight) * x.mss:
            busy = True
            continue
        r = x.srtt_us8
        if r < best_rtt:
            sf = x
            best_rtt = r
    return sf, busy, n_backup


def get_available_subflow(subflows: list[SubflowView], mask: int, has_skb: bool) -> SubflowView | None:
    """§1.2: active subflows first; backups only if no active one is merely temporarily busy; a
    segment every subflow already carried gets its path mask cleared and one more try."""
    looped = False
    while True:
        sf, force = _select(subflows, mask, False)
        if force:
            return sf
        sf, force = _select(subflows, mask, True)
        if not force and has_skb and mask:
            mask = 0
            if not looped:
                looped = True
                continue
        return sf


@register
class MinRTT(Scheduler):
    name: ClassVar[str] = "minrtt"
    description: ClassVar[str] = ("Linux out-of-tree default: lowest-srtt subflow with cwnd space, "
                                  "opportunistic retransmission + penalization")
    source: ClassVar[str] = ("multipath-tcp/mptcp net/mptcp/mptcp_sched.c (v0.95); Raiciu et al., "
                             "NSDI 2012")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("opportunistic", True, choices=(True, False),
                  doc="opportunistic retransmission + penalization (§1.4)"),
        ParamSpec("penalize_all", True, choices=(True, False),
                  doc="v0.95 penalizes every slower carrier; older copies only the first"),
    )
    opportunistic: bool
    penalize_all: bool

    def __init__(self, **values: object) -> None:
        super().__init__(**values)
        self._last_rbuf_opti: dict[int, int] = {}

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | tuple[int, int, int] | None:
        rh = conn.reinject_head
        if rh >= 0:
            return self._reinject(conn, subflows, rh)
        head = conn.head
        if head >= conn.n_segs:
            return self._when_all_sent(conn, subflows)
        # New data (path mask 0): get_available_subflow's common case in one scan.
        sf: SubflowView | None
        sf, busy, n_backup = _lowest_rtt_available(subflows)
        if sf is None:
            if busy or not n_backup:
                return None  # an active subflow is only temporarily busy: wait, no backup
            sf = get_available_subflow(subflows, 0, True)
            if sf is None:
                return None
        if not conn.window_allows(head):
            return self._window_blocked(conn, subflows, sf)
        n = sf.cwnd - sf.in_flight - sf.queued
        return (sf.index, -1, n if n > 1 else 1)  # a plain tuple is a Decision (hot path)

    # The same decisions step by step, for the schedulers built on minRTT that may decline the
    # subflow it picks and wait for a faster one (ECF, BLEST: the kernel copies of this function).

    def _should_wait(self, conn: ConnView, subflows: list[SubflowView], sf: SubflowView, seg: int) -> bool:
        """Whether to leave segment ``seg`` unsent rather than put it on ``sf`` now. minRTT never waits."""
        return False

    def _segments_for(self, sf: SubflowView, subflows: list[SubflowView]) -> int:
        """How many new segments one decision gives ``sf``: all its cwnd room."""
        n = sf.cwnd - sf.in_flight - sf.queued
        return n if n > 1 else 1

    def _select_with_wait(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        """`select` for subclasses with a `_should_wait` test (minRTT's own is inlined for speed)."""
        rh = conn.reinject_head
        if rh >= 0:
            return self._reinject(conn, subflows, rh)
        head = conn.head
        if head >= conn.n_segs:
            return self._when_all_sent(conn, subflows)
        sf = get_available_subflow(subflows, 0, True)
        if sf is None or self._should_wait(conn, subflows, sf, head):
            return None
        if not conn.window_allows(head):
            return self._window_blocked(conn, subflows, sf)
        return Decision(sf.index, -1, self._segments_for(sf, subflows))

    def _reinject(self, conn: ConnView, subflows: list[SubflowView], rh: int) -> Decision | None:
        """The reinjection queue's head goes first, to a subflow that has not carried it."""
        sf = get_available_subflow(subflows, conn.seg_path_mask(rh), True)
        if sf is None or self._should_wait(conn, subflows, sf, rh):
            return None
        return Decision(sf.index, rh)

    def _when_all_sent(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        """Nothing new to send: with a full send buffer, opportunistically retransmit (§1.4)."""
        if self.opportunistic and conn.send_buffer_full:
            sf = get_available_subflow(subflows, 0, False)
            if sf is not None:
                seg = self._rcv_buf_optimization(conn, subflows, sf, penal=False)
                if seg >= 0:
                    return Decision(sf.index, seg)
        return None

    def _window_blocked(self, conn: ConnView, subflows: list[SubflowView], sf: SubflowView) -> Decision | None:
        """The MPTCP window does not allow new data: opportunistic retransmission with penalization."""
        if not self.opportunistic:
            return None
        seg = self._rcv_buf_optimization(conn, subflows, sf, penal=True)
        return Decision(sf.index, seg) if seg >= 0 else None

    def _rcv_buf_optimization(self, conn: ConnView, subflows: list[SubflowView], sf: SubflowView, *,
                              penal: bool) -> int:
        """mptcp_rcv_buf_optimization: returns the segment to retransmit on ``sf`` or -1."""
        head = conn.oldest_unacked
        if head < 0:
            return -1
        mask = conn.seg_path_mask(head)
        now = conn.now_ns
        if penal or conn.send_buffer_full:
            last = self._last_rbuf_opti.setdefault(sf.index, now)
            if now - last >= sf.srtt_ns:
                for x in subflows:
                    if x.index == sf.index or not (mask >> x.index) & 1:
                        continue
                    if sf.srtt_us8 < x.srtt_us8 and x.ca_state == CA_OPEN:
                        conn.penalize(x.index)
                        self._last_rbuf_opti[sf.index] = now
                        if not self.penalize_all:
                            break
        if (mask >> sf.index) & 1:
            return -1
        do = False
        for x in subflows:
            if x.index == sf.index or not (mask >> x.index) & 1:
                continue
            if x.cwnd <= 4:
                do = True
                break
            if 4 * sf.srtt_us8 >= x.srtt_us8:
                do = False
                break
            do = True
        if do and sf.established and not sf.pf and not temp_unavailable(sf):
            return head
        return -1


@register
class MinRTTNoOR(MinRTT):
    name: ClassVar[str] = "minrtt_noor"
    description: ClassVar[str] = "Linux out-of-tree default without opportunistic retransmission/penalization"
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("opportunistic", False, choices=(True, False)),
        ParamSpec("penalize_all", True, choices=(True, False)),
    )
