"""Reading captures: pcap/pcapng (native reader, tshark as fallback and oracle) and tshark CSV
exports, resolved into PacketEvents with MPTCP connections, subflows, paths and one-way delays."""

from __future__ import annotations

from workbench.capture._load import Capture, load, parse_path_names
from workbench.capture._read import READER_VERSION, ReadResult, content_hash, read_packets
from workbench.capture.schema import PACKET_EVENTS, PACKETS, SAMPLES

__all__ = [
    "PACKETS",
    "PACKET_EVENTS",
    "READER_VERSION",
    "SAMPLES",
    "Capture",
    "ReadResult",
    "content_hash",
    "load",
    "parse_path_names",
    "read_packets",
]
