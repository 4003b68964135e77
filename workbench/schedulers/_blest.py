"""BLEST — BLocking ESTimation scheduler (Ferlin et al., IFIP Networking 2016), docs/MODEL.md §3.

Models seed paper 002 §IV-A (Algorithm 1) and ``multipath-tcp/mptcp net/mptcp/mptcp_blest.c``
(``blest_get_available_subflow``, ``blestsched_estimate_linger_time``, ``blestsched_estimate_bytes``,
``blestsched_update_lambda``, ``mptcp_blest_rcv_buf_optimization``). The default scheduler picks a
subflow (§1.2, inherited from `MinRTT`); when that is not the fastest subflow ``F``, BLEST estimates
how many bytes ``F`` would send while the segment occupies the MPTCP send window on the slow subflow
``S`` and, if they (scaled by λ) would not fit in the window left, waits for ``F`` instead.

λ (kernel per-mille ints): start 1.2 within [1.0, 1.3]; at most once per (slow-path) RTT it is raised
by 0.04 if a receive-window / send-buffer stall triggered the opportunistic-retransmission path
since the last update ("buffer blocking"), else lowered by 0.01. Opportunistic retransmission +
penalization as the default scheduler (§1.4).

Variants:

* ``variant="kernel"`` (code): the time ``S`` holds the segment is an *interpolated* slow-path RTT,
  ``max(srtt_S, minRTT_S + (maxRTT_S − minRTT_S)·(inflight_S + 1)/cwnd_S)`` (``maxRTT_S`` once cwnd is
  full), with historic (never decaying) min/max srtt; ``rtts = floor(linger / avgRTT_F) + 1`` with
  ``avgRTT_F = (minRTT_F + maxRTT_F)/2``; while ``F`` is in its initial slow start (ssthresh infinite)
  ``X = CWND_F·(2^rtts − 1)`` segments (rtts capped at 16), otherwise congestion avoidance with
  ``c = max(CWND_F, ssthresh_F + 1)``: ``X = (c + (rtts − 1)//2)·rtts``; the slow side counts
  ``skb.len + (write_seq − snd_una)_S`` (queued data included); window = the peer's advertised
  window (``wnd_end − snd_una``, not the free part); λ updated at most once per ``minRTT_S``.
* ``variant="paper"`` (Algorithm 1): ``rtts = srtt_S / srtt_F``,
  ``X = MSS_F·(CWND_F + (rtts − 1)/2)·rtts`` (congestion avoidance only), send on ``S`` iff
  ``X·λ ≤ MPTCP_SW − MSS_S·(inflight_S + 1)``; λ updated once per ``srtt_F``. (The paper starts λ at
  1.0; set ``lambda_init=1.0`` for that — the default 1.2 is the code's.)
"""

from __future__ import annotations

from typing import ClassVar

from workbench.schedulers._minrtt import MinRTT
from workbench.schedulers._registry import register
from workbench.schedulers.base import ConnView, Decision, ParamSpec, SubflowView

__all__ = ["BLEST"]

_SSTHRESH_INFINITE = 1 << 29  # Linux TCP_INFINITE_SSTHRESH is 0x7fffffff; the engine starts at 2^30


@register
class BLEST(MinRTT):
    """BLEST: skip the slow subflow when the fast one would otherwise be blocked by the MPTCP window.

    ``variant="kernel"`` (default): interpolated slow-path RTT from historic min/max srtt, average
    fast-path RTT, slow-start branch ``CWND_F·(2^rtts − 1)``, CA with ``max(CWND_F, ssthresh_F+1)``,
    queued slow-path bytes counted. ``variant="paper"``: Algorithm 1 of seed 002 (srtt ratio,
    congestion avoidance only, ``MSS_S·(inflight_S+1)``). λ starts at ``lambda_init`` and moves by
    ``+lambda_bad`` after a window stall / ``−lambda_good`` otherwise, once per RTT, within
    ``[lambda_min, lambda_max]``.
    """

    name: ClassVar[str] = "blest"
    description: ClassVar[str] = ("BLEST: waits for the fast subflow when sending on the slow one "
                                  "would block the MPTCP send window (λ-corrected estimate)")
    source: ClassVar[str] = ("Ferlin et al., 'BLEST: Blocking Estimation-based MPTCP Scheduler for "
                             "Heterogeneous Networks', IFIP Networking 2016 (seed 002 §IV-A); "
                             "multipath-tcp/mptcp net/mptcp/mptcp_blest.c")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("lambda_init", 1.2, 0.5, 2.0, doc="λ at connection start (code 1.2; paper 1.0)"),
        ParamSpec("lambda_min", 1.0, 0.5, 2.0, doc="lower bound of λ"),
        ParamSpec("lambda_max", 1.3, 0.5, 3.0, doc="upper bound of λ"),
        ParamSpec("lambda_bad", 0.04, 0.0, 0.5, doc="λ increase after a window stall (dyn_lambda_bad)"),
        ParamSpec("lambda_good", 0.01, 0.0, 0.5, doc="λ decrease otherwise (dyn_lambda_good)"),
        ParamSpec("variant", "kernel", choices=("kernel", "paper"),
                  doc="kernel: interpolated slow RTT + slow-start branch; paper: Algorithm 1"),
        *MinRTT.params,
    )
    lambda_init: float
    lambda_min: float
    lambda_max: float
    lambda_bad: float
    lambda_good: float
    variant: str

    def __init__(self, **values: object) -> None:
        super().__init__(**values)
        self._reset()

    def _reset(self) -> None:
        # λ kept in per-mille integers like the kernel (lambda_1000), so 1.2 - 0.01·k is exact
        self._lambda_1000 = round(self.lambda_init * 1000)
        self._retrans_flag = False
        self._last_lambda_update_ns: int | None = None
        self._min_srtt_us8: dict[int, int] = {}
        self._max_srtt_us8: dict[int, int] = {}
        self._last_rbuf_opti = {}

    @property
    def lambda_(self) -> float:
        """Current λ."""
        return self._lambda_1000 / 1000.0

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self._reset()

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        return self._select_with_wait(conn, subflows)

    def _window_blocked(self, conn: ConnView, subflows: list[SubflowView], sf: SubflowView) -> Decision | None:
        if not self.opportunistic:
            self._retrans_flag = True  # the window stall itself is the blocking signal
        return super()._window_blocked(conn, subflows, sf)

    def _segments_for(self, sf: SubflowView, subflows: list[SubflowView]) -> int:
        # On the slow path each segment gets its own BLEST test (kernel: per skb).
        n = super()._segments_for(sf, subflows)
        return 1 if n > 1 and sf.index != self._fastest_index(subflows) else n

    def _rcv_buf_optimization(self, conn: ConnView, subflows: list[SubflowView], sf: SubflowView, *,
                              penal: bool) -> int:
        # mptcp_blest_rcv_buf_optimization: entering with penal=1 or a full send buffer = blocking
        if penal or conn.send_buffer_full:
            self._retrans_flag = True
        return super()._rcv_buf_optimization(conn, subflows, sf, penal=penal)

    @staticmethod
    def _fastest_index(subflows: list[SubflowView]) -> int:
        best = -1
        best_rtt = 1 << 62
        for x in subflows:
            if x.established and x.srtt_us8 and x.srtt_us8 < best_rtt:
                best, best_rtt = x.index, x.srtt_us8
        return best

    def _should_wait(self, conn: ConnView, subflows: list[SubflowView], best: SubflowView, seg: int) -> bool:
        """blest_get_available_subflow's test; True = return NULL (wait for the fast subflow)."""
        seg_len = conn.seg_len(seg)
        minsk = None
        mins = self._min_srtt_us8
        maxs = self._max_srtt_us8
        for x in subflows:  # minsk over subflows that can send (no pf / cwnd / backup check)
            s8 = x.srtt_us8
            if not x.established or not s8:
                continue
            i = x.index
            if s8 < mins.get(i, 1 << 62):
                mins[i] = s8
            if s8 > maxs.get(i, 0):
                maxs[i] = s8
            if minsk is None or s8 < minsk.srtt_us8:
                minsk = x
        if minsk is None or minsk.index == best.index:
            return False
        now = conn.now_ns
        if self.variant == "kernel":
            self._update_lambda(now, mins.get(best.index, best.srtt_us8) >> 3)
            linger_us8 = self._linger_time_us8(best)
            fast_bytes = self._estimate_bytes(minsk, linger_us8)
            slow_bytes = seg_len + best.unacked_bytes
            avail = conn.wnd_end - conn.snd_una - slow_bytes
            return fast_bytes > max(avail, 0)
        self._update_lambda(now, minsk.srtt_ns // 1000)
        rtts = best.srtt_ns / minsk.srtt_ns
        x_bytes = minsk.mss * (minsk.cwnd + (rtts - 1) / 2) * rtts
        room = conn.wnd_end - conn.snd_una - best.mss * (best.in_flight + 1)
        return x_bytes * self._lambda_1000 / 1000 > room

    def _update_lambda(self, now_ns: int, period_us: int) -> None:
        """blestsched_update_lambda: at most once per ``period_us``."""
        last = self._last_lambda_update_ns
        if last is not None and now_ns - last < period_us * 1000:
            return
        if last is None:
            # kernel: last_lambda_update starts at connection init (jiffies); the first call inside
            # the first period does nothing
            self._last_lambda_update_ns = now_ns
            return
        lam = self._lambda_1000
        if self._retrans_flag:
            lam += round(self.lambda_bad * 1000)
        else:
            lam -= round(self.lambda_good * 1000)
        self._lambda_1000 = min(max(lam, round(self.lambda_min * 1000)), round(self.lambda_max * 1000))
        self._retrans_flag = False
        self._last_lambda_update_ns = now_ns

    def _linger_time_us8(self, s: SubflowView) -> int:
        """blestsched_estimate_linger_time (srtt_us units, x8)."""
        mn = self._min_srtt_us8.get(s.index, s.srtt_us8)
        mx = self._max_srtt_us8.get(s.index, s.srtt_us8)
        inflight = s.in_flight + 1
        cwnd = max(s.cwnd, 1)
        est = mx if inflight >= cwnd else mn + (mx - mn) * inflight // cwnd
        return max(s.srtt_us8, est)

    def _estimate_bytes(self, f: SubflowView, time_us8: int) -> float:
        """blestsched_estimate_bytes: bytes ``f`` sends in ``time_us8``, times λ."""
        avg = (self._min_srtt_us8.get(f.index, f.srtt_us8) + self._max_srtt_us8.get(f.index, f.srtt_us8)) // 2
        rtts = time_us8 // max(avg, 1) + 1
        if f.ssthresh >= _SSTHRESH_INFINITE:
            rtts = min(rtts, 16)
            pkts = f.cwnd * ((1 << rtts) - 1)
        else:
            c = max(f.cwnd, f.ssthresh + 1)
            pkts = (c + (rtts - 1) // 2) * rtts
        return pkts * f.mss * self._lambda_1000 / 1000
