"""Out-of-tree redundant scheduler (v0.95, Frömmgen/Erbshäußer), docs/MODEL.md §5.1: every subflow
walks the whole meta write queue on its own pointer and sends each segment as its cwnd allows
(copies of segments another subflow already sent are reinjections); a lagging subflow skips what is
already DATA_ACKed; backups carry new data only when no active subflow is usable."""

from __future__ import annotations

from typing import ClassVar

from workbench.schedulers._minrtt import get_available_subflow
from workbench.schedulers._registry import register
from workbench.schedulers.base import ConnView, Decision, Scheduler, SubflowView, is_available

__all__ = ["Redundant"]


@register
class Redundant(Scheduler):
    name: ClassVar[str] = "redundant"
    description: ClassVar[str] = "Linux out-of-tree redundant: every segment on every subflow"
    source: ClassVar[str] = "multipath-tcp/mptcp net/mptcp/mptcp_redundant.c (v0.95)"

    def __init__(self, **values: object) -> None:
        super().__init__(**values)
        self._last: dict[int, int] = {}
        self._next = 0

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        rh = conn.reinject_head
        if rh >= 0:
            sf = get_available_subflow(subflows, conn.seg_path_mask(rh), True)
            return Decision(sf.index, rh) if sf is not None else None
        n = len(subflows)
        active_valid = sum(1 for s in subflows if not s.backup and s.established and not s.pf)
        n_segs = conn.n_segs
        oldest = conn.oldest_unacked
        for k in range(n):
            pos = (self._next + k) % n
            sf = subflows[pos]
            last = self._last.get(sf.index, -1)
            if last >= 0 and conn.seg_dsn(last) + conn.seg_len(last) <= conn.snd_una:
                last = -1
            if last < 0:
                seg = oldest if oldest >= 0 else conn.head
            else:
                seg = last + 1
            if seg >= n_segs or not is_available(sf):
                continue
            sent = conn.seg_sent(seg)
            if sent:
                if sf.backup or (conn.seg_path_mask(seg) >> sf.index) & 1:
                    if (conn.seg_path_mask(seg) >> sf.index) & 1:
                        self._last[sf.index] = seg  # already carried (e.g. after a reinjection): move on
                    continue
            else:
                if sf.backup and active_valid > 0:
                    continue
                if not conn.window_allows(seg):
                    continue
            self._last[sf.index] = seg
            self._next = (pos + 1) % n
            return Decision(sf.index, seg)
        return None
