"""Upstream Linux MPTCP default scheduler ("burst" / linger time), docs/MODEL.md §6.

No cwnd test: the subflow whose queued memory (``sk_wmem_queued``: payload plus each skb's overhead,
`wmem_queued_bytes`) would drain soonest at its smoothed pacing rate gets the next burst of up to 64 KB
(``MPTCP_SEND_BURST_SIZE``, clamped by the MPTCP window), as long as its send buffer has room;
the subflow then sends that queue as its cwnd allows. Send buffer per subflow = Linux autotuning
model of `SubflowView.sndbuf_segments` (in payload bytes: calibrated with the overhead folded in).

Retransmission (``__mptcp_retrans``): the engine's MPTCP retransmit timer (``meta_retrans =
"upstream"``) puts the head data fragment in the reinjection queue; it is sent on the first
(non-backup preferred) subflow whose TCP queues are empty, or dropped for this round if no subflow is
idle. A subflow marked stale (no ACK over ``stale_loss_cnt`` timer periods) gets no new data until it
hears an ACK again, and everything unacknowledged is re-sent on the others (``msk->recovery``: the
reinjection queue is then served like new data, by linger time). No reinjection on subflow RTO, no
opportunistic retransmission, no penalization.
"""

from __future__ import annotations

from typing import ClassVar

from workbench.schedulers._registry import register
from workbench.schedulers.base import ConnView, Decision, ParamSpec, Scheduler, SubflowView

__all__ = ["UpstreamDefault"]

MPTCP_SEND_BURST_SIZE = 65428
# What an skb costs in sk_wmem_queued above its payload (struct sk_buff, skb_shared_info and the
# header area). Measured on this machine's kernel (6.18), server side, rtt-x3 and rate-x10-rtt-x15
# of the fidelity matrix with `benchmarks/kernel_sockets.py`: (w - notsent) / (unacked x MSS) =
# 1.29-1.31 on 2-segment skbs, i.e. 843-890 B per skb.
SKB_OVERHEAD_BYTES = 870
GSO_MAX_BYTES = 65536  # sk_gso_max_size (veth, loopback, most NICs)


@register
class UpstreamDefault(Scheduler):
    name: ClassVar[str] = "upstream"
    description: ClassVar[str] = ("Linux upstream default: 64 KB bursts to the subflow whose queue "
                                  "drains first at its pacing rate, no cwnd test")
    source: ClassVar[str] = "Linux net/mptcp/protocol.c mptcp_subflow_get_send / __mptcp_retrans (6.x)"
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("burst_bytes", MPTCP_SEND_BURST_SIZE, 1424, 1 << 20, log=True,
                  doc="MPTCP_SEND_BURST_SIZE"),
    )
    reinject_on_subflow_rto: ClassVar[bool] = False
    meta_rto_factor: ClassVar[float] = 1.0
    meta_retrans: ClassVar[str] = "upstream"
    queues_beyond_cwnd: ClassVar[bool] = True  # data waits on the subflow until its cwnd opens
    burst_bytes: int

    def __init__(self, **values: object) -> None:
        super().__init__(**values)
        self._avg_pacing: dict[int, float] = {}
        self._rtx_index = -1  # the subflow taking the current reinjection
        self._picked_wmem = 0  # wmem_queued_bytes of the subflow `_pick` returned last (no need to redo it)

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        rh = conn.reinject_head
        if rh >= 0 and conn.recovery:
            # __mptcp_retransmit_pending_data rewound the send head: re-sent like new data
            ssk = self._pick(subflows)
            if ssk is None or ssk.unacked_bytes >= ssk.sndbuf_segments * ssk.mss:
                return None
            while rh >= 0 and ssk.carried(rh):  # already on its way there
                conn.drop_reinject(rh)
                rh = conn.reinject_head
            if rh >= 0:
                return Decision(ssk.index, rh)
        if rh < 0:
            self._rtx_index = -1
        else:
            # __mptcp_retrans: the whole head fragment goes to one subflow whose TCP queues were empty
            for sf in subflows:
                if sf.index == self._rtx_index and sf.established and not sf.carried(rh):
                    return Decision(sf.index, rh)
            for want_backup in (False, True):
                for sf in subflows:
                    if sf.backup == want_backup and sf.established and sf.packets_out == 0 and sf.queued == 0:
                        self._rtx_index = sf.index
                        return Decision(sf.index, rh)
            while rh >= 0:  # no idle subflow: no reinjection this time
                conn.drop_reinject(rh)
                rh = conn.reinject_head
            self._rtx_index = -1
        head = conn.head
        if head >= conn.n_segs:
            return None
        ssk = self._pick(subflows)
        if ssk is None:
            return None
        mss = ssk.mss
        limit = ssk.sndbuf_segments * mss
        used = ssk.unacked_bytes  # payload against the payload-calibrated buffer (not wmem_queued_bytes)
        if used >= limit:
            return None  # !sk_stream_memory_free(ssk)
        burst = min(self.burst_bytes, conn.wnd_end - conn.seg_dsn(head))
        if burst <= 0:
            return None
        pacing = ssk.pacing_rate_bps
        if pacing:
            avg = self._avg_pacing
            tw = self._picked_wmem
            avg[ssk.index] = (avg[ssk.index] * tw + pacing * burst) / (burst + tw)
        # keep pushing dfrags while the burst lasts and the subflow's send buffer has room
        n_burst = -(-burst // mss)
        n_mem = -(-(limit - used) // mss)
        return Decision(ssk.index, -1, max(1, min(n_burst, n_mem)))

    def _pick(self, subflows: list[SubflowView]) -> SubflowView | None:
        """mptcp_subflow_get_send: the active (else backup) subflow with the least linger time."""
        best: list[SubflowView | None] = [None, None]  # active, backup
        best_linger = [float("inf"), float("inf")]
        best_wmem = [0, 0]
        nr_active = 0
        avg = self._avg_pacing
        for sf in subflows:
            if not sf.established or sf.stale:
                continue
            nr_active += not sf.backup
            pace = avg.get(sf.index, 0.0)
            if not pace:
                pace = sf.pacing_rate_bps
                if not pace:
                    continue
                avg[sf.index] = pace
            wmem = wmem_queued_bytes(sf)
            linger = wmem * 8 / pace
            k = 1 if sf.backup else 0
            if linger < best_linger[k]:
                best_linger[k] = linger
                best[k] = sf
                best_wmem[k] = wmem
        k = 0 if nr_active else 1
        self._picked_wmem = best_wmem[k]
        return best[k]


def wmem_queued_bytes(sf: SubflowView) -> int:
    """The subflow's ``sk_wmem_queued``: what its skbs hold, payload plus each skb's own overhead.

    The scheduler's linger time divides this, not the payload, by the pacing rate, so a subflow's
    sent-unacknowledged data weighs more than its queue: sent data sits in skbs of
    tcp_tso_autosize's size (about 1 ms at the pacing rate, at least 2 segments; the overhead is
    ~30 % of the payload at the rates of a cellular or WiFi path), unsent data in skbs of up to 64 KB
    (~1 %). Without it the model sent the slower subflow bursts earlier than the kernel: its data
    came too late and the faster path's waited at the MPTCP level (docs/MODEL.md §6).
    """
    queued = sf.queued_bytes
    in_flight = sf.unacked_bytes - queued
    mss = sf.mss
    # tcp_tso_autosize: the bytes the pacing rate sends in 2^-10 s (sk_pacing_shift), plus a boost
    # for very short RTTs (sysctl_tcp_tso_rtt_log = 9: min_rtt in units of 512 us)
    tso_bytes = int(sf.pacing_rate_bps / 8) >> 10
    min_rtt_us = sf.min_rtt_ns // 1000
    if min_rtt_us and (min_rtt_us >> 9) < 32:
        tso_bytes += GSO_MAX_BYTES >> (min_rtt_us >> 9)
    skb_bytes = max(min(tso_bytes, GSO_MAX_BYTES) // mss, 2) * mss  # tcp_min_tso_segs = 2
    n_skbs = -(-in_flight // skb_bytes) + -(-queued // GSO_MAX_BYTES)
    return queued + in_flight + SKB_OVERHEAD_BYTES * n_skbs
