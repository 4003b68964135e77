"""Write a replay as a pcap file (nanosecond timestamps, Ethernet / IPv4 / TCP with timestamps and
MPTCP DSS options) so it opens in Wireshark / tshark like a server-side capture.

What is written: every data segment the server sent (``snd``) and every ACK that reached the server
(``rcv`` c2s), in time order. Path k uses client 10.0.(k+1).1:(40000+k) and server 10.0.(k+1).2:5201.
Frames are truncated after the headers (captured length < original length, like a snaplen capture);
the original length is header + payload (90 + payload bytes for data, as modelled by default). Sequence numbers: ISN per subflow + relative seq;
DSNs and DATA_ACKs are written as 8-byte values equal to the relative DSN (IDSN taken as 0, no
MP_CAPABLE handshake is written, so Wireshark shows raw DSNs). TCP checksums are left 0.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.replay.recorder import AckRow, SndRow

if TYPE_CHECKING:
    from workbench.replay.run import ReplayResult

__all__ = ["write_pcap"]

_ISN = 0x10000000
_SERVER_PORT = 5201


def _ip_checksum(hdr: bytes) -> int:
    s = sum(struct.unpack("!10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _frame(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int, win: int,
           tsval: int, tsecr: int, dss: bytes, payload_len: int) -> tuple[bytes, int]:
    opts = struct.pack("!BBBBII", 1, 1, 8, 10, tsval & 0xFFFFFFFF, tsecr & 0xFFFFFFFF)
    opts += b"\x01" * (-len(dss) % 4) + dss  # NOP padding ahead of the DSS keeps 32-bit alignment
    thl = 20 + len(opts)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, (thl // 4) << 4,
                      flags, min(win, 0xFFFF), 0, 0) + opts
    total = 20 + thl + payload_len
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", _ip_checksum(ip)) + ip[12:]
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    hdr = eth + ip + tcp
    return hdr, len(hdr) + payload_len


def write_pcap(result: ReplayResult, path: str | Path) -> Path:
    """Write ``result`` (recorded with ``record=True``) as a server-side pcap; returns the path."""
    rec = result.recorder
    if rec is None:
        raise ValueError("write_pcap needs a replay run with record=True")
    from workbench.replay.tables import record_frame  # polars only here, after the run
    snd_rows = (SndRow(*r) for r in record_frame(rec, "snd").iter_rows())
    ack_rows = (AckRow(*r) for r in record_frame(rec, "ack").iter_rows())
    # both were recorded in simulation-time order: merge them
    rows: Iterator[tuple[int, int, SndRow | AckRow]] = heapq.merge(
        ((r.t_ns, 0, r) for r in snd_rows), ((r.t_ns, 1, r) for r in ack_rows))
    out = Path(path)
    tmp = out.with_suffix(out.suffix + ".part")
    with tmp.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))  # ns-resolution pcap
        for t, _kind, r in rows:
            k = r.subflow
            server = bytes((10, 0, k + 1, 2))
            client = bytes((10, 0, k + 1, 1))
            cport = 40000 + k
            ts = t // 1_000_000
            if isinstance(r, SndRow):
                seq, plen, dsn = r.seq, r.payload_bytes, r.dsn
                # DSS: flags A|M|m = 4-byte data ACK + mapping with 8-byte DSN, no checksum (22 bytes:
                # with timestamps the headers are exactly the modelled 90 bytes incl. Ethernet)
                dss = struct.pack("!BBBBIQIH", 30, 22, 2 << 4, 0x0D, 0, dsn, seq, plen)
                hdr, wire = _frame(server, client, _SERVER_PORT, cport, _ISN + seq, _ISN + 1, 0x18, 65535,
                                   ts, 0, dss, plen)
            else:
                ack, data_ack, rwnd = r.ack_seq, r.data_ack, r.rwnd_bytes
                dss = struct.pack("!BBBBQ", 30, 12, 2 << 4, 0x03, data_ack)
                hdr, wire = _frame(client, server, cport, _SERVER_PORT, _ISN + 1, _ISN + ack, 0x10,
                                   rwnd >> 7, ts, 0, dss, 0)
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(hdr), wire))
            f.write(hdr)
    tmp.replace(out)
    return out
