"""Taps into a replay, appended to plain Python lists (one tuple per observation; cheaper than one
list per column in CPython), turned into tables by ``tables.py`` after the run.

Taps: data segment sent by a subflow (``snd``), dropped in the network (``drop``: queue overflow or
random loss, data or ACK), received by the client subflow (``rcv``, with one-way delay), ACK arriving
at the subflow sender (``ack``: the DATA_ACK at the sender), and subflow/connection state samples at
each such ACK and every ``sample_interval_ns`` (``samples``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.replay.mptcp import Connection

__all__ = ["Recorder"]


class Recorder:
    __slots__ = ("ack", "conn", "drop", "handshake", "observations", "rcv", "samples", "snd")

    def __init__(self) -> None:
        # (t_ns, subflow, seq, payload, dsn, is_retrans, is_reinject)
        self.snd: list[tuple] = []
        # (t_ns, subflow, seq, payload, dsn, is_retrans, is_reinject, owd_ns)
        self.rcv: list[tuple] = []
        # (t_ns, subflow, is_data, seq_or_ack, payload, dsn, is_retrans, is_reinject, reason)
        self.drop: list[tuple] = []
        # (t_ns, subflow, ack_seq, data_ack, rwnd, has_sack, owd_ns)
        self.ack: list[tuple] = []
        # (t_ns, is_periodic, subflow, cwnd, inflight, srtt_ns, queued_bytes, snd_buf, rcv_ooo)
        self.samples: list[tuple] = []
        # (t_sent_ns, t_arrived_ns, subflow, dir, tcp_flags): SYN / SYN-ACK / ACK at the model's times
        self.handshake: list[tuple] = []
        # (t_ns, kind, subflow, value): what schedulers report through `Scheduler.observe`
        self.observations: list[tuple] = []
        self.conn: Connection | None = None

    def on_data_drop(self, pkt: tuple, t_ns: int, reason: int) -> None:
        """A data packet (sf, idx, seq, plen, dsn, t_snd, retrans, reinj) was lost on a data link."""
        self.drop.append((t_ns, pkt[0], True, pkt[2], pkt[3], pkt[4], pkt[6], pkt[7], reason))

    def on_ack_drop(self, pkt: tuple, t_ns: int, reason: int) -> None:
        """An ACK (sf, ack, sack, data_ack, rwnd, t_snd) was lost on an ACK link."""
        ack = pkt[1]
        if self.conn is not None:
            s = self.conn.subflows[pkt[0]]
            ack = s.sseq[ack] if ack < s.end else s.write_bytes
        self.drop.append((t_ns, pkt[0], False, ack, 0, None, False, False, reason))

    def observe(self, t_ns: int, kind: str, subflow: int, value: object) -> None:
        self.observations.append((t_ns, kind, subflow, value))

    def sample_all(self, conn: Connection, now: int) -> None:
        wq = conn.write_seq - conn.snd_una
        ooo = conn.rx.ooo_bytes
        for sf in conn.subflows:
            self.samples.append((now, True, sf.index, sf.cwnd, sf.in_flight, sf.srtt_ns, sf.queued_bytes,
                                 wq, ooo))
