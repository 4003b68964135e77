"""MyScheduler: the lowest-RTT subflow with room in its congestion window gets the next segments,
at most ``max_burst`` per decision. The worked example of docs/SCHEDULERS-API.md."""

from typing import ClassVar

from workbench.schedulers import ConnView, Decision, ParamSpec, Scheduler, SubflowView, is_available


class MyScheduler(Scheduler):
    name: ClassVar[str] = "my_scheduler"
    description: ClassVar[str] = "lowest-RTT subflow with cwnd room, at most max_burst segments at a time"
    source: ClassVar[str] = "docs/SCHEDULERS-API.md (example)"
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("max_burst", 4, 1, 64, log=True, doc="segments handed to one subflow per decision"),
    )
    max_burst: int

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        ready = [sf for sf in subflows if is_available(sf)]  # established, not failed, cwnd room
        if not ready:
            return None  # wait: the next ACK calls select again
        rh = conn.reinject_head
        if rh >= 0:  # reinjections first, preferably on a subflow that has not carried the segment
            fresh = [sf for sf in ready if not sf.carried(rh)] or ready
            return Decision(min(fresh, key=lambda sf: (sf.srtt_ns, sf.index)).index, rh)
        if conn.head >= conn.n_segs or not conn.window_allows(conn.head):
            return None  # nothing unsent, or the receiver's window is full
        sf = min(ready, key=lambda sf: (sf.srtt_ns, sf.index))
        room = sf.cwnd - sf.in_flight - sf.queued
        return Decision(sf.index, count=max(1, min(room, self.max_burst)))
