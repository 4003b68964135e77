"""The two tables everything else is built on: raw TCP packets as a capture reader sees them, and
PacketEvents, the one schema shared by captures and replays.

``PACKETS`` is what a *reader* returns: one row per TCP segment in the file, header fields exactly as
they are on the wire (raw sequence numbers, raw DSNs, unscaled windows). Both readers (native and
tshark) must produce it identically; tests compare them field by field.

``PACKET_EVENTS`` is what *analysis* returns (capture grouping, or the replay recorder): one row per
observation of a segment of an MPTCP connection at one point, with connection, subflow, path and
relative sequence numbers resolved. Every metric is a pure function of this table, so observed and
replayed behaviour are measured by the same code.
"""

from __future__ import annotations

import polars as pl

__all__ = [
    "EVENT_POINTS",
    "MPTCP_SUBTYPES",
    "PACKETS",
    "PACKET_EVENTS",
    "SAMPLES",
    "SAMPLE_KINDS",
    "TCP_FLAGS",
    "empty_packet_events",
    "empty_packets",
    "empty_samples",
]

# TCP header flag bits, as in the 12-bit flags field (RFC 9293 + RFC 3168 ECN bits).
TCP_FLAGS = {"FIN": 0x001, "SYN": 0x002, "RST": 0x004, "PSH": 0x008, "ACK": 0x010, "URG": 0x020,
             "ECE": 0x040, "CWR": 0x080, "AE": 0x100}

# MPTCP option subtypes (RFC 8684 §3 / RFC 6824). `mp_subtypes` holds bit (1 << subtype) for each
# subtype present in the packet.
MPTCP_SUBTYPES = {"MP_CAPABLE": 0, "MP_JOIN": 1, "DSS": 2, "ADD_ADDR": 3, "REMOVE_ADDR": 4,
                  "MP_PRIO": 5, "MP_FAIL": 6, "MP_FASTCLOSE": 7, "MP_TCPRST": 8}

# Raw packet table produced by both capture readers. Column -> dtype. Nullable columns are null when
# the option/field is absent from the packet. When an option occurs more than once in one packet, the
# FIRST occurrence is kept (tshark's `-E occurrence=f`), except `mp_subtypes`, which ORs them all.
PACKETS: dict[str, pl.DataType] = {
    "frame": pl.UInt32(),          # 1-based frame number in the file (counts every frame, TCP or not)
    "t_ns": pl.Int64(),            # capture timestamp, ns since the Unix epoch
    "frame_len": pl.UInt32(),      # original length on the wire (bytes)
    "cap_len": pl.UInt32(),        # bytes captured (<= frame_len when snaplen cut it)
    "ip_version": pl.UInt8(),      # 4 or 6
    "src": pl.String(),            # source IP, textual (IPv6 in RFC 5952 form)
    "dst": pl.String(),
    "sport": pl.UInt16(),
    "dport": pl.UInt16(),
    "seq": pl.UInt32(),            # raw TCP sequence number
    "ack": pl.UInt32(),            # raw TCP acknowledgement number (whatever the ACK flag says)
    "flags": pl.UInt16(),          # 12 TCP flag bits, see TCP_FLAGS
    "win": pl.UInt16(),            # raw window field (unscaled)
    "payload_len": pl.UInt32(),    # TCP payload bytes from IP lengths (not limited by snaplen)
    # TCP options
    "opt_mss": pl.UInt16(),
    "opt_wscale": pl.UInt8(),
    "opt_sack_perm": pl.Boolean(),
    "opt_ts_val": pl.UInt32(),
    "opt_ts_ecr": pl.UInt32(),
    "opt_sack_blocks": pl.UInt8(),  # number of SACK blocks (0 when no SACK option)
    "opt_sack_le": pl.UInt32(),     # first SACK block, raw left edge
    "opt_sack_re": pl.UInt32(),     # first SACK block, raw right edge
    # MPTCP options
    "mp_subtypes": pl.UInt16(),     # OR of (1 << subtype) over every MPTCP option in the packet; 0 = none
    "mp_version": pl.UInt8(),       # MP_CAPABLE version (0 or 1)
    "mp_capable_flags": pl.UInt8(),  # MP_CAPABLE flags octet (A..H bits)
    "mp_sender_key": pl.UInt64(),   # MP_CAPABLE sender's key; MP_FASTCLOSE receiver's key is NOT put here
    "mp_receiver_key": pl.UInt64(),  # MP_CAPABLE receiver's key (third ACK, v0 and v1)
    "mp_join_token": pl.UInt32(),   # MP_JOIN SYN receiver's token
    "mp_join_nonce": pl.UInt32(),   # MP_JOIN SYN / SYN-ACK sender's random number
    "mp_addr_id": pl.UInt8(),       # address id of the first MP_JOIN / ADD_ADDR / MP_PRIO(v0) option
    "mp_backup": pl.Boolean(),      # B flag of MP_JOIN or MP_PRIO
    "dss_flags": pl.UInt8(),        # DSS flags octet (F m M a A bits)
    "dss_dsn": pl.UInt64(),         # raw data sequence number (4 or 8 bytes as sent)
    "dss_dsn8": pl.Boolean(),       # True when the DSN was 8 bytes
    "dss_ssn": pl.UInt32(),         # subflow sequence number of the mapping (relative to subflow ISN)
    "dss_dll": pl.UInt16(),         # data-level length of the mapping
    "dss_checksum": pl.UInt16(),
    "dss_data_ack": pl.UInt64(),    # raw data ACK (4 or 8 bytes as sent)
    "dss_ack8": pl.Boolean(),
    "dss_data_fin": pl.Boolean(),   # DSS F flag
    "add_addr": pl.String(),        # ADD_ADDR advertised address, textual
    "add_addr_port": pl.UInt16(),
    "mp_malformed": pl.Boolean(),   # an MPTCP option whose length does not fit its subtype/flags
}

# Where an event was observed, relative to the segment's own direction: at its sender ("snd"), at
# its receiver ("rcv"), or dropped inside the network ("drop", replays only).
EVENT_POINTS = ["snd", "rcv", "drop"]

# PacketEvents: the analysed table shared by captures and replays (the contract with the replay
# recorder and with metrics/). One row per observation of one TCP segment of one MPTCP connection.
PACKET_EVENTS: dict[str, pl.DataType] = {
    "t_ns": pl.Int64(),            # when it was observed, ns (captures: Unix epoch; replays: since start)
    "conn": pl.UInt32(),           # MPTCP connection index within the input (0-based)
    "subflow": pl.UInt32(),        # subflow index within the connection (0 = initial subflow)
    "path": pl.String(),           # path label ("wifi", "lte", or the client address by default)
    "dir": pl.Enum(["c2s", "s2c"]),  # client->server or server->client (client = opener of the MPTCP connection)
    "point": pl.Enum(EVENT_POINTS),  # observation point, see EVENT_POINTS
    "seq": pl.UInt32(),            # subflow sequence number relative to this direction's ISN (SYN = 0)
    "ack": pl.UInt32(),            # relative to the other direction's ISN; 0 when no ACK flag
    "flags": pl.UInt16(),
    "payload_bytes": pl.UInt32(),  # TCP payload length
    "frame_bytes": pl.UInt32(),    # bytes on the wire (for rate/capacity estimation)
    "rwnd_bytes": pl.UInt64(),     # advertised receive window, scaled
    "dsn": pl.UInt64(),            # MPTCP data sequence number of the first payload byte, relative to
                                   # this direction's IDSN (first data byte = 0); null when unmapped
    "data_ack": pl.UInt64(),       # DATA_ACK, relative to the opposite direction's IDSN; null if absent
    "data_fin": pl.Boolean(),
    "is_retrans": pl.Boolean(),    # subflow-level retransmission (seq range already sent on this subflow)
    "is_reinject": pl.Boolean(),   # MPTCP reinjection (DSN range already sent on another subflow)
    "ts_val": pl.UInt32(),         # TCP timestamps option, raw
    "ts_ecr": pl.UInt32(),
    "owd_ns": pl.Int64(),          # one-way delay of this segment, set on "rcv" rows when it is known
                                   # (pair of captures, or replay)
}

# Why a sample was taken: at an ACK arriving at the subflow's sender ("ack": what the burstiness
# metric reads, STMS §5.1.2), or by the periodic sampler ("periodic").
SAMPLE_KINDS = ["ack", "periodic"]

# Samples: sender/receiver state over time, recorded by the replay engine (captures have none, or
# only what can be inferred). One row per (time, subflow); connection-level columns repeat per row.
SAMPLES: dict[str, pl.DataType] = {
    "t_ns": pl.Int64(),
    "kind": pl.Enum(SAMPLE_KINDS),
    "conn": pl.UInt32(),
    "subflow": pl.UInt32(),
    "path": pl.String(),
    "cwnd_segments": pl.Float64(),       # congestion window (segments)
    "inflight_segments": pl.UInt32(),    # segments sent and not yet acked (Linux packets_in_flight)
    "srtt_ns": pl.Int64(),               # smoothed RTT of the subflow
    "snd_queue_bytes": pl.UInt64(),      # bytes queued on this subflow by the scheduler, not yet sent
    "snd_buf_bytes": pl.UInt64(),        # connection send buffer occupancy (unacked + unsent at MPTCP level)
    "rcv_ooo_bytes": pl.UInt64(),        # connection-level out-of-order queue at the receiver
    "rcv_buf_bytes": pl.UInt64(),        # receive buffer occupancy (in-order not yet read + out-of-order)
}


def empty_packets() -> pl.DataFrame:
    """An empty PACKETS table with the right dtypes."""
    return pl.DataFrame(schema=PACKETS)


def empty_packet_events() -> pl.DataFrame:
    """An empty PACKET_EVENTS table with the right dtypes."""
    return pl.DataFrame(schema=PACKET_EVENTS)


def empty_samples() -> pl.DataFrame:
    """An empty SAMPLES table with the right dtypes."""
    return pl.DataFrame(schema=SAMPLES)
