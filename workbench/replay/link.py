"""One direction of one path: a rate-limited drop-tail FIFO followed by a delay pipe, mahimahi-style.

Nothing ticks. When a packet is handed to the link its whole fate is computed at once:

* **Rate queue**: it starts serialisation when the link is free (``busy_until_ns``) and finishes when
  the integral of the piecewise-constant capacity from that start reaches its size in bits. Capacity
  zero intervals (outages, mahimahi gaps) simply contribute nothing to the integral.
* **Drop-tail buffer in bytes**: a packet is *in the buffer* from enqueue until its serialisation
  starts (the one being serialised has left the qdisc, as with Linux pfifo + HTB). An arriving packet
  that would push the buffered bytes above ``buffer_bytes`` is dropped, so the buffer never holds more.
* **Random loss**: decided with the run's RNG at the moment serialisation finishes, from the loss
  timeline at that time (a lossy radio link wastes the capacity; the packet just never arrives).
* **Delay pipe**: arrival = finish + owd(finish), but never earlier than the previous packet's arrival,
  so a falling delay does not reorder packets (as mahimahi's delay shell and netem with rate do).

One event per surviving packet (its arrival) is put on the loop.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from heapq import heappush
from typing import Any

from workbench.replay.events import EventLoop
from workbench.replay.paths import StepSeries

__all__ = ["Link"]

_INF = 1 << 62


class _Cursor:
    """Walks a StepSeries forward in time (link times are monotone), O(1) amortised per lookup."""

    __slots__ = ("i", "n", "t", "v")

    def __init__(self, s: StepSeries) -> None:
        self.t = s.t_ns
        self.v = s.values
        self.n = len(s.t_ns)
        self.i = 0

    def at(self, t_ns: int) -> float:
        i = self.i
        t = self.t
        n = self.n
        if i + 1 < n and t[i + 1] <= t_ns:
            while i + 1 < n and t[i + 1] <= t_ns:
                i += 1
            self.i = i
        return self.v[i]


class Link:
    """Rate queue + drop-tail buffer + loss + delay pipe for one direction of a path."""

    __slots__ = (
        "_busy_until", "_last_arrival", "_loop", "_loss", "_loss_const", "_ns_per_byte", "_owd",
        "_owd_const", "_q", "_qbytes", "_rate", "_rate_s", "_rng", "buffer_bytes", "deliver",
        "deliver_by_subflow", "max_qbytes", "n_drop_loss", "n_drop_queue", "n_sent", "name", "on_drop",
    )

    def __init__(self, loop: EventLoop, *, name: str, rate_bps: StepSeries, owd_ns: StepSeries,
                 loss: StepSeries, buffer_bytes: int, rng: random.Random,
                 deliver: Callable[[Any], None],
                 on_drop: Callable[[Any, int, int], None] | None = None) -> None:
        self._loop = loop
        self.name = name
        self.buffer_bytes = int(buffer_bytes)
        self._rng = rng
        self.deliver = deliver
        # A link shared by several subflows hands each packet to its own subflow's continuation,
        # looked up here by the packet's `sf` (in compiled code, not through a Python dispatch frame).
        self.deliver_by_subflow: list[Any] | None = None
        self.on_drop = on_drop  # on_drop(pkt, t_ns, reason) reason 0 = queue overflow, 1 = random loss
        # Constant series get a fast path (the common case: scenario files, tests, the benchmark).
        self._ns_per_byte = 8e9 / rate_bps.values[0] if rate_bps.is_constant and rate_bps.values[0] > 0 else 0.0
        self._rate_s = rate_bps
        self._rate = _Cursor(rate_bps)
        self._owd_const = int(owd_ns.values[0]) if owd_ns.is_constant else -1
        self._owd = _Cursor(owd_ns)
        self._loss_const = float(loss.values[0]) if loss.is_constant else -1.0
        self._loss = _Cursor(loss)
        self._busy_until = 0
        self._last_arrival = 0
        self._q: deque[tuple[int, int]] = deque()  # (start_ns, size_bytes) of packets still buffered
        self._qbytes = 0
        self.max_qbytes = 0
        self.n_sent = 0
        self.n_drop_queue = 0
        self.n_drop_loss = 0

    @property
    def queued_bytes(self) -> int:
        """Bytes in the buffer now (not counting the packet being serialised)."""
        now = self._loop.now
        q = self._q
        while q and q[0][0] <= now:
            self._qbytes -= q.popleft()[1]
        return self._qbytes

    def _finish_time(self, start: int, size_bytes: int) -> int:
        """Integrate the capacity timeline from ``start`` until ``size_bytes`` have been serialised."""
        s = self._rate_s
        ts = s.t_ns
        vs = s.values
        n = len(ts)
        i = s.index_at(start)
        bits = size_bytes * 8.0
        t = start
        while True:
            end = ts[i + 1] if i + 1 < n else _INF
            r = vs[i]
            if r > 0:
                dt = bits * 1e9 / r
                if t + dt <= end:
                    return t + int(dt + 0.5)
                bits -= r * (end - t) / 1e9
            if end >= _INF:
                return _INF  # capacity zero forever: the packet never leaves
            t = end
            i += 1

    def send(self, pkt: Any, size_bytes: int) -> bool:
        """Hand a packet to the link now; returns False if it was dropped at the buffer."""
        now = self._loop.now
        start = self._busy_until
        if start > now:
            q = self._q
            while q and q[0][0] <= now:
                self._qbytes -= q.popleft()[1]
            qb = self._qbytes + size_bytes
            if qb > self.buffer_bytes:
                self.n_drop_queue += 1
                if self.on_drop is not None:
                    self.on_drop(pkt, now, 0)
                return False
            q.append((start, size_bytes))
            self._qbytes = qb
            if qb > self.max_qbytes:
                self.max_qbytes = qb
        else:
            if self._qbytes:  # link idle: everything buffered has left
                self._q.clear()
                self._qbytes = 0
            start = now
        npb = self._ns_per_byte
        finish = start + int(size_bytes * npb + 0.5) if npb else self._finish_time(start, size_bytes)
        self._busy_until = finish
        self.n_sent += 1
        p = self._loss_const
        if p < 0:
            p = self._loss.at(finish)
        # a packet that capacity zero holds forever never leaves: it cannot be lost either (no draw)
        if p > 0.0 and finish < _INF and self._rng.random() < p:
            self.n_drop_loss += 1
            if self.on_drop is not None:
                self.on_drop(pkt, finish, 1)
            return True
        owd = self._owd_const
        arrival = finish + (owd if owd >= 0 else int(self._owd.at(finish)))
        if arrival < self._last_arrival:
            arrival = self._last_arrival
        self._last_arrival = arrival
        by_sf = self.deliver_by_subflow
        deliver = self.deliver if by_sf is None else by_sf[pkt.sf]
        loop = self._loop  # EventLoop.at inlined (arrival >= now always holds here)
        loop._seq += 1
        heappush(loop._heap, (arrival, loop._seq, deliver, pkt))
        return True
