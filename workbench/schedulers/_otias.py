"""OTIAS — Out-of-order Transmission for In-order Arrival Scheduling (Yang & Amer), docs/MODEL.md §9.

Models the seed paper 001 (§II-C eqs. 1–3, Fig. 3, §III) and the Karlstad kernel module
``vkirany/mptcp-kau net/mptcp/mptcp_otias.c`` (``mptcp_otias_calc_metric``,
``get_otias_available_subflow``). Each meta segment goes to the subflow on which it is expected to
*arrive* first, counting the whole RTTs it has to wait behind data already queued on that subflow;
subflows without free cwnd are candidates too, so new data is queued on subflows beyond cwnd and
leaves as their cwnd opens (the essence of OTIAS).

Arrival-time estimate for the next segment on subflow ``j`` (``sendable = max(0, cwnd - in_flight)``,
``queued`` = segments queued on ``j`` and not yet sent):

* ``variant="kernel"`` (kau code): ``T = 0.5·srtt`` if ``queued < sendable`` else
  ``T = (ceil((queued - sendable + 1) / cwnd) + 0.5)·srtt`` — i.e. one RTT *more* than the paper
  once the free cwnd is used up (the new segment itself is counted and ceil is used).
* ``variant="paper"`` (seed eq. 3): ``T = (floor((queued - sendable) / cwnd) + 0.5)·srtt`` with
  the floor clamped at 0 (a negative count means "can go now"; the paper does not say, and an
  unclamped floor would rank a subflow with free cwnd *below* half its RTT).

The paper's own narrative (§II-A: PDU 5 on the 20 ms subflow "needs to wait at most 1 RTT to be sent
out", total 30 ms) agrees with the kernel formula, not with eq. 3.

Retransmissions (reinjection queue): never on a subflow that already carried the segment unless
no other subflow can take it (then the path mask is ignored); the kernel variant additionally
requires free cwnd for them (``has_space``), the paper variant does not. ``optim = 0`` in the module,
so no opportunistic retransmission and no penalization: when the MPTCP window is full nothing is
sent. Ties go to the subflow listed first (the kernel's strict ``<``).

Behaviour to expect (faithful, not a bug): with no cwnd test, everything the MPTCP window and send
buffer admit is queued on subflows at once — at connection start, before the second subflow has
joined, that is the whole send buffer on the first subflow. Estimates for long queues assume cwnd and
srtt stay as they are (and one-way delay = srtt/2, wrong for paths whose queueing is one-sided), so
with large receive windows the arrival order degrades; OTIAS shines when the window is small.
"""

from __future__ import annotations

from typing import ClassVar

from workbench.schedulers._registry import register
from workbench.schedulers.base import CA_LOSS, ConnView, Decision, ParamSpec, Scheduler, SubflowView

__all__ = ["OTIAS", "otias_metric_ns"]

_INF = float("inf")


def otias_metric_ns(sf: SubflowView, *, extra_queued: int = 0, variant: str = "kernel") -> float:
    """Expected time (ns) until one more segment handed to ``sf`` now arrives at the receiver.

    ``extra_queued`` pretends that many more segments are already queued on ``sf`` (to size a batch).
    """
    cwnd = max(sf.cwnd, 1)
    srtt_ns = sf.srtt_ns
    sendable = cwnd - sf.in_flight
    if sendable < 0:
        sendable = 0
    queued = sf.queued + extra_queued
    if variant == "kernel":
        if queued < sendable:
            return 0.5 * srtt_ns
        rtts_wait = -(-(queued - sendable + 1) // cwnd)  # ceil
    else:
        rtts_wait = (queued - sendable) // cwnd  # floor (Python floors negatives)
        if rtts_wait < 0:
            rtts_wait = 0
    return (rtts_wait + 0.5) * srtt_ns


def _usable(sf: SubflowView) -> bool:
    """State checks of get_otias_available_subflow (no cwnd test: OTIAS queues beyond cwnd)."""
    return sf.established and not sf.pf and sf.ca_state != CA_LOSS and sf.srtt_ns > 0


def _has_space(sf: SubflowView) -> bool:
    free = sf.cwnd - sf.in_flight
    return free > 0 and sf.queued < free


@register
class OTIAS(Scheduler):
    """OTIAS: per-segment earliest expected arrival, queueing on subflows beyond cwnd.

    ``variant="kernel"`` (default): kau ``mptcp_otias.c`` metric, one RTT more than the paper once a
    subflow's free cwnd is used up; retransmissions only on subflows with free cwnd.
    ``variant="paper"``: seed eq. 3, ``(floor((not_yet_sent - can_send)/cwnd) + 0.5)·srtt`` (floor
    clamped at 0). See the module docstring.
    """

    name: ClassVar[str] = "otias"
    queues_beyond_cwnd: ClassVar[bool] = True  # data waits on the subflow until its cwnd opens
    description: ClassVar[str] = ("OTIAS: each segment to the subflow where it is expected to arrive "
                                  "first, queueing beyond cwnd (out-of-order send, in-order arrival)")
    source: ClassVar[str] = ("Yang & Amer, 'Out-of-order Transmission for In-order Arrival Scheduling "
                             "for MPTCP' (seed 001, §II-C, Fig. 3); vkirany/mptcp-kau net/mptcp/mptcp_otias.c")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("variant", "kernel", choices=("kernel", "paper"),
                  doc="kernel: +1 RTT once free cwnd is used (kau code); paper: seed eq. 3"),
        ParamSpec("max_batch", 64, 1, 4096, log=True,
                  doc="segments handed to one subflow per decision while it stays the earliest "
                      "(a speed knob: the per-segment choice is unchanged)"),
    )
    variant: str
    max_batch: int

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        rh = conn.reinject_head
        if rh >= 0:
            return self._retransmit(conn, subflows, rh)
        head = conn.head
        if head >= conn.n_segs or not conn.window_allows(head):
            return None  # optim = 0: a full MPTCP window stops sending (no OR, no penalization)
        variant = self.variant
        best: SubflowView | None = None
        best_t = _INF
        second_t = _INF
        second_idx = 1 << 30
        for sf in subflows:
            if not _usable(sf):
                continue
            t = otias_metric_ns(sf, variant=variant)
            if t < best_t:
                if best is not None:
                    second_t, second_idx = best_t, best.index
                best, best_t = sf, t
            elif t < second_t:
                second_t, second_idx = t, sf.index
        if best is None:
            return None
        # How many consecutive segments stay on `best`: while its estimate for the next one does not
        # exceed the runner-up's (ties go to the subflow listed first, as in the kernel loop).
        n = 1
        cap = min(self.max_batch, conn.n_segs - head)
        while n < cap:
            t = otias_metric_ns(best, extra_queued=n, variant=variant)
            if t > second_t or (t == second_t and second_idx < best.index):
                break
            n += 1
        return Decision(best.index, -1, n)

    def _retransmit(self, conn: ConnView, subflows: list[SubflowView], seg: int) -> Decision | None:
        """get_otias_available_subflow for a segment in the reinjection queue."""
        need_space = self.variant == "kernel"
        best: SubflowView | None = None
        best_t = _INF
        backup: SubflowView | None = None
        backup_t = _INF
        for sf in subflows:
            if not _usable(sf):
                continue
            t = otias_metric_ns(sf, variant=self.variant)
            space = _has_space(sf)
            if sf.carried(seg):
                if space and t < backup_t:
                    backup, backup_t = sf, t
            elif (space or not need_space) and t < best_t:
                best, best_t = sf, t
        pick = best if best is not None else backup
        return Decision(pick.index, seg) if pick is not None else None
