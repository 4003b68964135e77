"""ECF — Earliest Completion First (Lim et al., CoNEXT 2017), docs/MODEL.md §4.

Models ``multipath-tcp/mptcp net/mptcp/mptcp_ecf.c`` (``ecf_get_available_subflow``): the default
scheduler's subflow choice (`get_available_subflow`, §1.2) and segment choice with opportunistic
retransmission + penalization (§1.3/§1.4, inherited from `MinRTT`), plus one test whenever the
default would use a subflow other than the overall fastest one: is it better to wait for the fast
subflow than to send on the slower one? The seed paper 002 (§III-C) summarises ECF the same way.

With ``k`` = bytes not yet handed to any subflow, fast subflow ``f`` (min srtt among all subflows that
can send, backups and pf included), chosen slower subflow ``s``, ``mss``, hysteresis flag ``waiting``:

    n·RTT_f < (1 + waiting·β)·(RTT_s + δ)   with n = 1 + x_f/CWND_f
        and x_s/CWND_s · RTT_s >= 2·RTT_f + δ   → wait for f (waiting = 1)
        else                                    → send on s (waiting unchanged)
    otherwise                                   → send on s, waiting = 0

Variants (the difference is in δ and in the floor on the backlog):

* ``variant="kernel"``: ``δ = max(rttvar_f, rttvar_s) / 2`` from Linux ``rttvar_us``, which Linux
  floors near ``tcp_rto_min`` (200 ms), so ``δ ≳ 100 ms``: the first test passes more often, the
  second far less — the kernel waits *less* than the paper (§4). ``x_f = max(k, CWND_f·mss)`` and
  ``x_s = max(k, CWND_s·mss)``. Integer µs maths as the C code (``srtt_us >> 3``, ``rttvar_us >> 1``).
* ``variant="paper"``: ``δ = max(σ_f, σ_s)`` with σ the RTT variability *without* the rto_min floor:
  the scheduler recovers every RTT sample from the change of Linux ``srtt`` (``srtt += m - srtt/8``
  is invertible) and keeps Jacobson's mean deviation (EWMA 1/4), the usual stand-in for σ; the
  backlog is not floored (``x = k``).

Not modelled: the kernel's ``k`` comes from socket memory accounting (truesize), which overstates
the backlog by the skb overhead; here ``k`` is payload bytes (`ConnView.unsent_bytes`).
"""

from __future__ import annotations

from typing import ClassVar

from workbench.schedulers._minrtt import MinRTT
from workbench.schedulers._registry import register
from workbench.schedulers.base import ConnView, Decision, ParamSpec, SubflowView

__all__ = ["ECF", "RttDeviation"]


class RttDeviation:
    """Per-subflow RTT mean deviation (ns) recovered from Linux srtt updates, without rto_min floor.

    Linux: ``srtt8 += m - (srtt8 >> 3)``, so a sample is ``m = srtt8_new - srtt8_old + (srtt8_old >> 3)``
    (µs). A sample equal to srtt leaves srtt unchanged and is missed (it would only shrink the
    deviation a little).
    """

    __slots__ = ("_last", "mdev_ns")

    def __init__(self) -> None:
        self._last: dict[int, int] = {}
        self.mdev_ns: dict[int, float] = {}

    def update(self, sf: SubflowView) -> None:
        s8 = sf.srtt_us8
        if not s8:
            return
        old = self._last.get(sf.index)
        self._last[sf.index] = s8
        if old is None:
            # first sample (handshake): Linux starts mdev at m/2 (mdev_us = 2m with x4 scale)
            self.mdev_ns[sf.index] = (s8 >> 3) * 500.0
            return
        if old == s8:
            return
        m_us = s8 - old + (old >> 3)
        err_ns = abs(m_us - (old >> 3)) * 1000.0
        d = self.mdev_ns.get(sf.index, err_ns)
        self.mdev_ns[sf.index] = d + (err_ns - d) / 4.0

    def get(self, index: int) -> float:
        return self.mdev_ns.get(index, 0.0)


@register
class ECF(MinRTT):
    """ECF: wait for the fastest subflow when sending on the slower one would finish later.

    ``variant="kernel"`` (default): δ = max(rttvar)/2 with Linux's rto_min-floored rttvar (≥ ~100 ms),
    backlog floored at one cwnd. ``variant="paper"``: δ = max RTT deviation σ (no floor), backlog as
    is. ``beta`` = hysteresis β (kernel ``mptcp_ecf_r_beta = 4`` → 1/4). Opportunistic retransmission
    + penalization as the default scheduler (ECF uses the default ``next_segment``).
    """

    name: ClassVar[str] = "ecf"
    description: ClassVar[str] = ("ECF: waits for the fastest subflow when the slower one would "
                                  "complete later (β hysteresis), else default minRTT")
    source: ClassVar[str] = ("Lim et al., 'ECF: An MPTCP Path Scheduler to Manage Heterogeneous Paths', "
                             "CoNEXT 2017 (seed 002 §III-C); multipath-tcp/mptcp net/mptcp/mptcp_ecf.c")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("beta", 0.25, 0.0, 1.0, doc="hysteresis β (kernel: 1/mptcp_ecf_r_beta = 1/4)"),
        ParamSpec("variant", "kernel", choices=("kernel", "paper"),
                  doc="kernel: δ = max(rttvar)/2 (rto_min floored), backlog >= 1 cwnd; paper: δ = σ"),
        *MinRTT.params,
    )
    beta: float
    variant: str

    def __init__(self, **values: object) -> None:
        super().__init__(**values)
        self._waiting = 0
        self.rtt_dev = RttDeviation()

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self._waiting = 0
        self.rtt_dev = RttDeviation()
        self._last_rbuf_opti = {}

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        if self.variant == "paper":
            self.rtt_dev.update(sf)

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        return self._select_with_wait(conn, subflows)

    def _should_wait(self, conn: ConnView, subflows: list[SubflowView], best: SubflowView, seg: int) -> bool:
        """ecf_get_available_subflow's test; True = return NULL (wait for the fast subflow)."""
        minsk = None
        for x in subflows:  # "fast" = min srtt over every subflow that can send
            if x.established and x.srtt_us8 and (minsk is None or x.srtt_us8 < minsk.srtt_us8):
                minsk = x
        if minsk is None or minsk.index == best.index:
            return False
        mss = best.mss
        k = conn.unsent_bytes
        cwnd_f = minsk.cwnd
        cwnd_s = best.cwnd
        srtt_f: float
        srtt_s: float
        delta: float
        if self.variant == "kernel":
            srtt_f = minsk.srtt_us8 >> 3
            srtt_s = best.srtt_us8 >> 3
            delta = max(minsk.rttvar_ns // 1000 >> 1, best.rttvar_ns // 1000 >> 1)
            x_f = max(k, cwnd_f * mss)
            x_s = max(k, cwnd_s * mss)
        else:
            srtt_f = minsk.srtt_ns / 1000.0
            srtt_s = best.srtt_ns / 1000.0
            self.rtt_dev.update(minsk)
            self.rtt_dev.update(best)
            delta = max(self.rtt_dev.get(minsk.index), self.rtt_dev.get(best.index)) / 1000.0
            x_f = k
            x_s = k
        lhs = srtt_f * (x_f + cwnd_f * mss)
        rhs = cwnd_f * mss * (srtt_s + delta)
        if lhs < (1.0 + self._waiting * self.beta) * rhs:
            if srtt_s * x_s >= cwnd_s * mss * (2 * srtt_f + delta):
                self._waiting = 1
                return True
            return False
        self._waiting = 0
        return False
