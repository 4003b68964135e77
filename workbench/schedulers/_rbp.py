"""RBP, Receive Buffer Pre-division based flow control (Han, Xue, Yue, Hong, Yu, Li: "Receive Buffer
Pre-division Based Flow Control for MPTCP", seed 004), as a flow-control `Layer` over any scheduler.
No public code exists (docs/MODEL.md §11); this follows the paper (§3, Algorithm 1).

The sender splits the receiver's buffer and window among the subflows:

* eq. (1): ``acwnd_i <- (1 - beta) * acwnd_i + beta * cwnd_i`` whenever cwnd_i changes (beta 1/16);
* eq. (2): ``Buf_i = acwnd_i * (ceil(max_{j!=i} RTT_j / (2 RTT_i) + 1/2) + 1/2)`` — the average
  maximum receive-buffer occupancy of subflow i (segments; RTT = srtt);
* eq. (3): ``B_i = recvBuffer * Buf_i / sum_j Buf_j`` — recvBuffer is the receiver's buffer as the
  sender can see it: the largest window announced so far (Linux announces 64 kB in its SYN and
  grows the window per segment received, so the first window is not the buffer);
* eq. (4): ``rwnd_i = 0`` if ``B_i <= unordered_i``, else ``rwnd * (B_i - unordered_i) /
  sum_{B_j > unordered_j} (B_j - unordered_j)``, where rwnd is the receiver's current window
  (``wnd_end - snd_una``) and ``unordered_i`` the data subflow i delivered that is not yet
  DATA_ACKed — acknowledged on the subflow but not at connection level, i.e. waiting in the
  receiver's out-of-order queue (§3.2 says "unACKed data on connection level of subflow_i" and
  §3.3 that it differs from the subflow's outstanding data; "too many out-of-order packets");
* eqs. (5), (6): ``Send_data_i = min(cwnd_i, rwnd_i) - Outstanding_i`` (subflow-level unacked data,
  queued included); subflow i may get new data only while ``Send_data_i > 0``, and at most
  ``ceil(Send_data_i / MSS)`` segments per decision.

How it sits on the seam: the seam has one connection-level window (`ConnOverride` can narrow
``wnd_end`` for all subflows at once, not per subflow), so a per-subflow window is enforced by
gating instead: before each decision the inner scheduler sees only the subflows with
``Send_data_i > 0``, and a multi-segment decision is cut to the chosen subflow's share (the real
MPTCP window is still enforced by the engine). Copies of already-sent segments
(reinjections, opportunistic retransmissions) are not new data and pass unchanged, so loss
recovery can never deadlock on a zero ``rwnd_i``. With one usable subflow, ``max_{j!=i}`` is empty
and Buf_i = acwnd_i (it gets the whole buffer). ``unordered_i`` is tracked from the decisions the
engine actually applied (checked on the next call through the segments' path masks).
"""

from __future__ import annotations

import heapq
import math
from typing import Any, ClassVar

from workbench.schedulers._registry import get, register
from workbench.schedulers.base import ConnView, Decision, Layer, ParamSpec, Scheduler, SubflowView

__all__ = ["RBP", "rbp_buffer_occupancy", "rbp_receive_windows"]


def rbp_buffer_occupancy(acwnd: list[float], rtt: list[float]) -> list[float]:
    """Eq. (2): Buf_i = acwnd_i · (⌈max_{j≠i} RTT_j / (2·RTT_i) + 1/2⌉ + 1/2), same unit as acwnd."""
    out = []
    for i, (a, r) in enumerate(zip(acwnd, rtt, strict=True)):
        others = [x for j, x in enumerate(rtt) if j != i]
        if not others or r <= 0:
            out.append(float(a))
            continue
        out.append(a * (math.ceil(max(others) / (2.0 * r) + 0.5) + 0.5))
    return out


def rbp_receive_windows(buf: list[float], unordered: list[float], *, recv_buffer: float,
                        rwnd: float) -> tuple[list[float], list[float]]:
    """Eqs. (3) and (4): the buffer shares B_i and the per-subflow receive windows rwnd_i."""
    total = sum(buf)
    b = [recv_buffer * x / total if total > 0 else recv_buffer / len(buf) for x in buf] if buf else []
    room = [bi - u for bi, u in zip(b, unordered, strict=True)]
    pos = sum(r for r in room if r > 0)
    w = [rwnd * r / pos if r > 0 and pos > 0 else 0.0 for r in room]
    return b, w


@register
class RBP(Layer):
    name: ClassVar[str] = "rbp"
    description: ClassVar[str] = ("RBP flow control: per-subflow receive windows from the predicted "
                                  "buffer occupancy (acwnd EWMA, Buf_i, proportional split)")
    source: ClassVar[str] = ("Han, Xue, Yue, Hong, Yu, Li: Receive Buffer Pre-division Based Flow "
                             "Control for MPTCP (§3, Algorithm 1)")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("beta", 1.0 / 16, 1.0 / 256, 1.0, log=True,
                  doc="EWMA weight of the newest cwnd in acwnd, eq. (1) (paper: 1/16)"),
    )
    beta: float

    def __init__(self, inner: Scheduler | str = "minrtt", *, inner_params: dict[str, Any] | None = None,
                 **values: Any) -> None:
        if isinstance(inner, str):
            inner = get(inner, **(inner_params or {}))
        elif inner_params:
            raise TypeError("inner_params only go with an inner scheduler given by name")
        super().__init__(inner, **values)
        self.recv_buffer = 0
        self._acwnd: dict[int, float] = {}
        self._last_cwnd: dict[int, int] = {}
        # per subflow: heap of (dsn_end, bytes) of segments it carried above snd_una, and their sum
        self._carried: dict[int, list[tuple[int, int]]] = {}
        self._unordered: dict[int, int] = {}
        self._pending: tuple[int, list[int], int] | None = None  # (subflow, segments, mask bits before)

    # ------------------------------------------------------------------ state
    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self.recv_buffer = conn.wnd_end - conn.snd_una
        for s in subflows:
            self._acwnd[s.index] = float(s.cwnd)
            self._last_cwnd[s.index] = s.cwnd
            self._carried[s.index] = []
            self._unordered[s.index] = 0
        self.inner.on_start(conn, subflows)

    def _update_acwnd(self, sf: SubflowView) -> None:
        c = sf.cwnd
        if c != self._last_cwnd.get(sf.index):
            self._last_cwnd[sf.index] = c
            a = self._acwnd.get(sf.index, float(c))
            self._acwnd[sf.index] = (1.0 - self.beta) * a + self.beta * c

    def _settle(self, conn: ConnView) -> None:
        """Count the segments of the last decision the engine applied; drop DATA_ACKed ones."""
        p = self._pending
        if p is not None:
            self._pending = None
            sub, segs, before = p
            bit = 1 << sub
            heap = self._carried[sub]
            for k, seg in enumerate(segs):
                if conn.seg_path_mask(seg) & bit and not (before >> k) & 1:
                    end = conn.seg_dsn(seg) + conn.seg_len(seg)
                    heapq.heappush(heap, (end, conn.seg_len(seg)))
                    self._unordered[sub] += conn.seg_len(seg)
        una = conn.snd_una
        for i, heap in self._carried.items():
            while heap and heap[0][0] <= una:
                self._unordered[i] -= heapq.heappop(heap)[1]

    def unordered(self, sf: SubflowView) -> int:
        """unordered_i: data subflow i delivered (subflow-level ACKed) that is not yet DATA_ACKed —
        it sits in the receiver's connection-level out-of-order queue. = bytes it carried above
        snd_una minus its subflow-level outstanding bytes (Outstanding_i, queued included)."""
        u = self._unordered.get(sf.index, 0) - sf.unacked_bytes
        return u if u > 0 else 0

    def windows(self, conn: ConnView, subflows: list[SubflowView]) -> dict[int, float]:
        """rwnd_i (bytes) of every established subflow with an RTT sample, eq. (2)-(4)."""
        subs = [s for s in subflows if s.established and s.srtt_ns > 0]
        if not subs:
            return {}
        if conn.wnd_end - conn.snd_una > self.recv_buffer:
            self.recv_buffer = conn.wnd_end - conn.snd_una
        mss = conn.mss
        buf = rbp_buffer_occupancy([self._acwnd[s.index] * mss for s in subs], [float(s.srtt_ns) for s in subs])
        _, w = rbp_receive_windows(buf, [float(self.unordered(s)) for s in subs],
                                   recv_buffer=float(self.recv_buffer), rwnd=float(conn.wnd_end - conn.snd_una))
        return {s.index: x for s, x in zip(subs, w, strict=True)}

    def _send_data(self, sf: SubflowView, rwnd_i: float) -> float:
        """Eqs. (5), (6): min(cwnd_i, rwnd_i) - Outstanding_i, bytes."""
        return min(sf.cwnd * sf.mss, rwnd_i) - sf.unacked_bytes

    # ------------------------------------------------------------------ Layer
    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        self._settle(conn)
        for s in subflows:
            self._update_acwnd(s)
        w = self.windows(conn, subflows)
        room = {s.index: self._send_data(s, w[s.index]) for s in subflows if s.index in w}
        # subflows without an RTT sample yet are not divided (nothing known about them): let them be
        usable = [s for s in subflows if room.get(s.index, 1.0) > 0]
        d = self.inner.select(conn, usable if usable else subflows)
        if d is None:
            return None
        sub, seg, count = d
        if seg >= 0 and conn.seg_sent(seg):
            # a copy (reinjection / opportunistic retransmission): not new data, not divided
            self._pending = (sub, [seg], (conn.seg_path_mask(seg) >> sub) & 1)
            return Decision(sub, seg, count)
        r = room.get(sub)
        if r is not None:
            if r <= 0:
                return None
            if seg < 0:
                count = min(count, -(-int(r) // conn.mss))
        segs = [seg] if seg >= 0 else self._next_unsent(conn, count)
        self._pending = (sub, segs, 0)
        return Decision(sub, seg, count)

    @staticmethod
    def _next_unsent(conn: ConnView, count: int) -> list[int]:
        out: list[int] = []
        i = conn.head
        n = conn.n_segs
        while len(out) < count and i < n:
            if not conn.seg_sent(i):
                out.append(i)
            i += 1
        return out

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        self._settle(conn)
        self._update_acwnd(sf)
        self.inner.on_ack(conn, sf, now_ns)
