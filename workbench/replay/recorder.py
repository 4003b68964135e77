"""The row kinds a replay records, by name and field: the compiled engine's recorder
(native/engine/src/record.rs) keeps each kind as typed columns with exactly these fields, turned into
tables by ``tables.py`` (and a pcap by ``pcap.py``) after the run.

Taps: data segment sent by a subflow (``snd``: `SndRow`), dropped in the network (``drop``:
`DropRow`, queue overflow or random loss, data or ACK), received by the client subflow (``rcv``:
`RcvRow`, with one-way delay), ACK arriving at the subflow sender (``ack``: `AckRow`, the DATA_ACK at
the sender), subflow/connection state samples at each such ACK and every ``sample_interval_ns``
(``samples``: `SampleRow`), the handshake (`HandshakeRow`) and what schedulers report
(`ObservationRow`). Each row kind is a NamedTuple, the names the tables read.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["AckRow", "DropRow", "HandshakeRow", "ObservationRow", "RcvRow", "SampleRow", "SndRow"]


class SndRow(NamedTuple):
    """A data segment leaving its subflow sender."""

    t_ns: int
    subflow: int
    seq: int
    payload_bytes: int
    dsn: int
    is_retrans: bool
    is_reinject: bool


class RcvRow(NamedTuple):
    """A data segment reaching the client subflow, ``owd_ns`` after it was sent."""

    t_ns: int
    subflow: int
    seq: int
    payload_bytes: int
    dsn: int
    is_retrans: bool
    is_reinject: bool
    owd_ns: int


class DropRow(NamedTuple):
    """A packet lost in the network (``reason`` 0 = queue overflow, 1 = random loss). Data drops carry
    the segment (``seq_or_ack`` = its seq); ACK drops the acknowledged seq, payload 0 and no DSN."""

    t_ns: int
    subflow: int
    is_data: bool
    seq_or_ack: int
    payload_bytes: int
    dsn: int | None
    is_retrans: bool
    is_reinject: bool
    reason: int


class AckRow(NamedTuple):
    """An ACK reaching the subflow sender, ``owd_ns`` after it was sent."""

    t_ns: int
    subflow: int
    ack_seq: int
    data_ack: int
    rwnd_bytes: int
    has_sack: bool
    owd_ns: int


class SampleRow(NamedTuple):
    """Subflow and connection state, at an ACK (``is_periodic`` False) or on the sampling clock."""

    t_ns: int
    is_periodic: bool
    subflow: int
    cwnd: int
    inflight: int
    srtt_ns: int
    queued_bytes: int
    snd_buf_bytes: int
    rcv_ooo_bytes: int


class HandshakeRow(NamedTuple):
    """SYN / SYN-ACK / ACK at the model's times; ``dir`` is "s2c" or "c2s", ``tcp_flags`` the TCP flags."""

    t_sent_ns: int
    t_arrived_ns: int
    subflow: int
    dir: str
    tcp_flags: int


class ObservationRow(NamedTuple):
    """What a scheduler reported through `Scheduler.observe`."""

    t_ns: int
    kind: str
    subflow: int
    value: object
