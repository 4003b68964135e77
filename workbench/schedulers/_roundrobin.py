"""Out-of-tree round-robin scheduler (``mptcp_rr.c``), docs/MODEL.md §2: ``num_segments`` segments
per subflow per round among subflows with cwnd space (``cwnd_limited``), the last zero-quota subflow
in list order starts a round, no backup handling, no opportunistic retransmission."""

from __future__ import annotations

from typing import ClassVar

from workbench.schedulers._registry import register
from workbench.schedulers.base import ConnView, Decision, ParamSpec, Scheduler, SubflowView, is_available

__all__ = ["RoundRobin"]


@register
class RoundRobin(Scheduler):
    name: ClassVar[str] = "roundrobin"
    description: ClassVar[str] = "Linux out-of-tree round-robin: num_segments per subflow in turn"
    source: ClassVar[str] = "multipath-tcp/mptcp net/mptcp/mptcp_rr.c"
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("num_segments", 1, 1, 64, log=True, doc="burst length per subflow and round"),
        ParamSpec("cwnd_limited", True, choices=(True, False),
                  doc="skip subflows without cwnd space (else queue beyond cwnd)"),
    )
    num_segments: int
    cwnd_limited: bool

    def __init__(self, **values: object) -> None:
        super().__init__(**values)
        self._quota: dict[int, int] = {}

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        rh = conn.reinject_head
        if rh >= 0:
            mask = conn.seg_path_mask(rh)
            chosen = None
            for sf in subflows:  # last available that has not carried it, else any available
                if is_available(sf, strict_queue=False) and not (mask >> sf.index) & 1:
                    chosen = sf
            if chosen is None:
                for sf in subflows:
                    if is_available(sf, strict_queue=False):
                        chosen = sf
            return Decision(chosen.index, rh) if chosen is not None else None
        head = conn.head
        if head >= conn.n_segs or not conn.window_allows(head):
            return None
        q = self._quota
        num = self.num_segments
        for _retry in range(2):
            it = full = 0
            choose = None
            split = num
            for sf in subflows:
                if not is_available(sf, cwnd_test=self.cwnd_limited, strict_queue=False):
                    continue
                it += 1
                quota = q.get(sf.index, 0)
                if 0 < quota < num:
                    choose = sf
                    split = num - quota
                    break
                if quota == 0:
                    choose = sf
                    split = num
                if quota >= num:
                    full += 1
            if it and it == full:
                for sf in subflows:
                    if is_available(sf, cwnd_test=self.cwnd_limited, strict_queue=False):
                        q[sf.index] = 0
                continue
            break
        if choose is None or not is_available(choose, strict_queue=False):
            return None
        q[choose.index] = q.get(choose.index, 0) + split
        return Decision(choose.index, -1, split)
