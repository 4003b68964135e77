"""What the server application writes into the MPTCP send buffer, and when.

* `Bulk`: greedy, keeps the send buffer full (iperf); optionally stops writing at ``stop_ns``
  (the lab runs: "8 s" transfers), after which the connection drains and the run ends.
* `Finite`: N bytes as fast as the buffer takes them (completion time = last DATA_ACK).
* `Bursts`: N segments, then an idle period after the burst is fully acknowledged, repeated.
* `AppTrace`: ``[(t_ns, bytes)]`` application writes (e.g. recovered from a capture); bytes that do
  not fit in the send buffer wait in the application, in order.

A workload is bound to one run (it keeps state); ``run_replay`` copies the one it is given.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.replay.mptcp import Connection

__all__ = ["AppTrace", "Bulk", "Bursts", "Finite", "Workload"]

_BIG = 1 << 62


class Workload:
    """Base class: ``start`` at time 0 of the connection, ``on_acked`` whenever buffer space frees."""

    finished: bool = False

    def fresh(self) -> Workload:
        return copy.deepcopy(self)

    def start(self, conn: Connection, now: int) -> None:
        raise NotImplementedError

    def on_acked(self, conn: Connection, now: int) -> None:
        """Send-buffer space was freed by a DATA_ACK (do not push here; the caller pushes)."""

    @property
    def total_bytes(self) -> int | None:
        return None


@dataclass
class Bulk(Workload):
    """Always-full send buffer until ``stop_ns`` (None = for the whole run)."""

    stop_ns: int | None = None
    finished: bool = False

    def start(self, conn: Connection, now: int) -> None:
        conn.app_write(_BIG, now)
        if self.stop_ns is not None:
            conn.loop.at(self.stop_ns, self._stop, conn)
        conn.push(now)

    def _stop(self, conn: Connection) -> None:
        self.finished = True
        conn.send_buffer_full = False
        if conn.snd_una >= conn.write_seq:
            conn._finish(conn.loop.now)

    def on_acked(self, conn: Connection, now: int) -> None:
        if not self.finished:
            conn.app_write(_BIG, now)


@dataclass
class Finite(Workload):
    """Transfer ``size_bytes`` once."""

    size_bytes: int
    written: int = 0
    finished: bool = False

    def __post_init__(self) -> None:
        if self.size_bytes <= 0:
            raise ValueError("Finite.size_bytes must be > 0")

    @property
    def total_bytes(self) -> int | None:
        return self.size_bytes

    def _write(self, conn: Connection, now: int) -> None:
        left = self.size_bytes - self.written
        if left > 0:
            self.written += conn.app_write(left, now)
        if self.written >= self.size_bytes:
            self.finished = True
            conn.send_buffer_full = False

    def start(self, conn: Connection, now: int) -> None:
        self._write(conn, now)
        conn.push(now)

    def on_acked(self, conn: Connection, now: int) -> None:
        if not self.finished:
            self._write(conn, now)


@dataclass
class Bursts(Workload):
    """``n_bursts`` bursts of ``segments`` full segments; the next burst is written ``idle_ns`` after
    the previous one was completely DATA_ACKed."""

    segments: int
    idle_ns: int
    n_bursts: int = 10
    done_bursts: int = 0
    pending: int = 0
    finished: bool = False

    @property
    def total_bytes(self) -> int | None:
        return None

    def _burst(self, conn: Connection) -> None:
        now = conn.loop.now
        self.pending += self.segments * conn.mss
        self.done_bursts += 1
        if self.done_bursts >= self.n_bursts:
            self.finished = True
        self.pending -= conn.app_write(self.pending, now)
        conn.push(now)

    def start(self, conn: Connection, now: int) -> None:
        self._burst(conn)

    def on_acked(self, conn: Connection, now: int) -> None:
        if self.pending:
            self.pending -= conn.app_write(self.pending, now)
        elif conn.snd_una >= conn.write_seq and not self.finished:
            conn.loop.at(now + self.idle_ns, lambda _c: self._burst(conn), None)


@dataclass
class AppTrace(Workload):
    """Application writes ``(t_ns, bytes)``, in time order."""

    writes: list[tuple[int, int]] = field(default_factory=list)
    pending: int = 0
    n_done: int = 0
    finished: bool = False

    def __post_init__(self) -> None:
        self.writes = sorted((int(t), int(b)) for t, b in self.writes)
        if any(b < 0 for _, b in self.writes):
            raise ValueError("AppTrace byte counts must be >= 0")

    @property
    def total_bytes(self) -> int | None:
        return sum(b for _, b in self.writes)

    def start(self, conn: Connection, now: int) -> None:
        if not self.writes:
            self.finished = True
            conn._finish(now)
            return
        for t, b in self.writes:
            conn.loop.at(t, self._write, (conn, b))

    def _write(self, arg: tuple[Connection, int]) -> None:
        conn, b = arg
        now = conn.loop.now
        self.n_done += 1
        self.pending += b
        self.pending -= conn.app_write(self.pending, now)
        if self.n_done >= len(self.writes) and not self.pending:
            self.finished = True
        conn.push(now)

    def on_acked(self, conn: Connection, now: int) -> None:
        if self.pending:
            self.pending -= conn.app_write(self.pending, now)
            if self.n_done >= len(self.writes) and not self.pending:
                self.finished = True
