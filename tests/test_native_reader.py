"""The native capture reader (workbench.capture._native) against tshark, hand-built captures and
damaged files.

tshark is the oracle: it is called directly here with a small field list (not through the tshark
reader of the package) so the two readers are tested independently. Hand-built captures cover the
containers and link types the shared traces do not have; their expected values are what was written.
"""

from __future__ import annotations

import ipaddress
import random
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, needs
from polars.testing import assert_frame_equal

from workbench.capture._native import ReadStats, UnsupportedLinkType, read_native
from workbench.capture.schema import PACKETS
from workbench.errors import InputError

TRACES = SHARED_TRACES
FIXTURES = sorted((TRACES / "fixtures").glob("*.pcap"))
PAIR = sorted((TRACES / "pair").glob("*.pcap"))
LAB = [TRACES / "lab" / "c07" / "client.pcap", TRACES / "lab" / "c07" / "server.pcap"]
HAVE_TSHARK = shutil.which("tshark") is not None and shutil.which("editcap") is not None
needs_tshark = pytest.mark.skipif(not HAVE_TSHARK, reason="tshark/editcap not installed")
needs_traces = needs(TRACES / "fixtures", TRACES / "pair", *LAB)

# ------------------------------------------------------------------------------------------ oracle

def epoch_ns(text: str) -> int:
    seconds, fraction = text.split(".")
    return int(seconds) * 10**9 + int(fraction.ljust(9, "0")[:9])


TSHARK_FIELDS = {  # tshark field -> (our column, parser of tshark's text)
    "frame.time_epoch": ("t_ns", epoch_ns),
    "ip.src": ("src", str),
    "ipv6.src": ("src", str),
    "tcp.srcport": ("sport", int),
    "tcp.seq_raw": ("seq", int),
    "tcp.ack_raw": ("ack", int),
    "tcp.len": ("payload_len", int),
    "tcp.flags": ("flags", lambda s: int(s, 16)),
    "tcp.window_size_value": ("win", int),
    "tcp.options.timestamp.tsval": ("opt_ts_val", int),
    "tcp.options.mptcp.rawdataseqno": ("dss_dsn", int),
    "tcp.options.mptcp.rawdataack": ("dss_data_ack", int),
    "tcp.options.mptcp.sendkey": ("mp_sender_key", int),
    # beyond the required list: more of the table, where tshark 4.0 exposes the same thing
    "tcp.options.timestamp.tsecr": ("opt_ts_ecr", int),
    "tcp.options.mss_val": ("opt_mss", int),
    "tcp.options.wscale.shift": ("opt_wscale", int),
    "tcp.options.mptcp.version": ("mp_version", int),
    "tcp.options.mptcp.recvkey": ("mp_receiver_key", int),
    "tcp.options.mptcp.recvtok": ("mp_join_token", int),
    "tcp.options.mptcp.sendrand": ("mp_join_nonce", int),
    "tcp.options.mptcp.addrid": ("mp_addr_id", int),
    "tcp.options.mptcp.subflowseqno": ("dss_ssn", int),
    "tcp.options.mptcp.datalvllen": ("dss_dll", int),
    "tcp.options.mptcp.ipv4": ("add_addr", str),
    "tcp.options.mptcp.ipv6": ("add_addr", str),
    "tcp.options.mptcp.port": ("add_addr_port", int),
}
# Where the schema deliberately differs from tshark's field: (column, MPTCP subtype whose presence
# makes tshark fill the field from an option the schema leaves out of that column).
SCHEMA_NOT_TSHARK = [("mp_addr_id", 4),       # tshark also lists REMOVE_ADDR's address ids
                     ("mp_receiver_key", 7),  # tshark calls MP_FASTCLOSE's key "recvkey"
                     ("dss_dll", 0)]          # tshark also fills datalvllen from MP_CAPABLE with data
# Not compared: tcp.options.mptcp.checksum, which tshark 4.0 leaves empty for DSS options whose
# length says a checksum is there (tests_mptcp-v0, ns3 capture); the reader takes it from the wire.


def tshark_rows(path: Path) -> dict[int, dict[str, object]]:
    """What tshark says about every TCP frame: frame number -> {our column: value}."""
    cmd = ["tshark", "-r", str(path), "-n", "-Y", "tcp", "-o", "tcp.relative_sequence_numbers:FALSE",
           "-E", "occurrence=f", "-E", "header=n", "-T", "fields", "-e", "frame.number"]
    for field in TSHARK_FIELDS:
        cmd += ["-e", field]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows: dict[int, dict[str, object]] = {}
    for line in out.splitlines():
        number, *values = line.split("\t")
        row: dict[str, object] = {}
        for (column, parse), text in zip(TSHARK_FIELDS.values(), values, strict=True):
            if text:
                row[column] = parse(text)
            else:
                row.setdefault(column, None)
        rows[int(number)] = row
    return rows


def assert_matches_tshark(path: Path) -> pl.DataFrame:
    table, _ = read_native(path)
    expected = tshark_rows(path)
    assert table["frame"].to_list() == sorted(expected), "different TCP frames than tshark"
    columns = sorted({c for c, _ in TSHARK_FIELDS.values()})
    mismatches = []
    for row in table.select("frame", "mp_subtypes", *columns).iter_rows(named=True):
        want = expected[row["frame"]]
        for column, subtype in SCHEMA_NOT_TSHARK:
            if row["mp_subtypes"] & (1 << subtype):
                want[column] = row[column]
        diff = {c: (want[c], row[c]) for c in columns if want[c] != row[c]}
        if diff:
            mismatches.append((row["frame"], diff))
    assert not mismatches, f"{len(mismatches)} frames differ from tshark, first: {mismatches[:3]}"
    return table


@needs_tshark
@needs_traces
@pytest.mark.parametrize("path", FIXTURES + PAIR, ids=lambda p: p.name)
def test_agrees_with_tshark_on_shared_captures(path: Path) -> None:
    table = assert_matches_tshark(path)
    assert table.schema == pl.Schema(PACKETS)


@needs_tshark
@needs_traces
@pytest.mark.slow
@pytest.mark.parametrize("path", LAB, ids=lambda p: p.parent.name + "-" + p.name)
def test_agrees_with_tshark_on_lab_captures(path: Path) -> None:
    table = assert_matches_tshark(path)
    _, stats = read_native(path)
    assert stats.frames_snapped > 0  # snaplen 128: data segments are cut, headers are not
    assert stats.frames_truncated == 0
    assert table["dss_dsn"].null_count() < table.height


@needs_tshark
@needs_traces
@pytest.mark.parametrize("path", FIXTURES + PAIR[:1], ids=lambda p: p.name)
@pytest.mark.parametrize("file_type", ["pcapng", "nsecpcap", "pcap"])
def test_container_conversions_give_the_same_table(path: Path, file_type: str, tmp_path: Path) -> None:
    converted = tmp_path / f"{path.stem}.{file_type}"
    subprocess.run(["editcap", "-F", file_type, str(path), str(converted)], check=True, capture_output=True)
    original, stats = read_native(path)
    again, stats_again = read_native(converted)
    if file_type == "pcap":  # microsecond pcap: ns timestamps of a pcapng source are cut to µs
        original = original.with_columns(pl.col("t_ns") // 1000 * 1000)
    assert_frame_equal(original, again)
    assert stats == stats_again


# -------------------------------------------------------------------------------- capture builders


def tcp_segment(sport: int = 40000, dport: int = 443, seq: int = 1000, ack: int = 2000, flags: int = 0x18,
                win: int = 502, options: bytes = b"", payload: bytes = b"") -> bytes:
    options += b"\x00" * (-len(options) % 4)  # end-of-list padding
    offset = (20 + len(options)) // 4
    return struct.pack("!HHIIHHHH", sport, dport, seq, ack, (offset << 12) | flags, win, 0, 0) + options + payload


def ipv4_packet(l4: bytes, src: str = "10.0.0.1", dst: str = "10.0.0.2", proto: int = 6,
                frag: int = 0x4000, ip_options: bytes = b"") -> bytes:
    ihl = (20 + len(ip_options)) // 4
    total = 4 * ihl + len(l4)
    return struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 7, frag, 64, proto, 0,
                       socket.inet_aton(src), socket.inet_aton(dst)) + ip_options + l4


def ipv6_packet(l4: bytes, src: str = "2001:db8::1", dst: str = "2001:db8:0:1::2",
                ext: list[tuple[int, bytes]] | None = None, next_header: int = 6) -> bytes:
    """`ext`: (header type, body after the next-header/length bytes) in order."""
    chain, kinds = b"", [k for k, _ in ext or []] + [next_header]
    for (kind, body), following in zip(ext or [], kinds[1:], strict=True):
        if kind == 44:  # fragment header: fixed 8 bytes
            chain += bytes([following, 0]) + body
        else:
            chain += bytes([following, (len(body) + 2) // 8 - 1]) + body
    payload = chain + l4
    return struct.pack("!IHBB16s16s", 0x60000000, len(payload), kinds[0], 64,
                       ipaddress.IPv6Address(src).packed, ipaddress.IPv6Address(dst).packed) + payload


def ethernet(ip: bytes, vlans: tuple[int, ...] = ()) -> bytes:
    ethertype = 0x86DD if ip[0] >> 4 == 6 else 0x0800
    tags = b"".join(struct.pack("!HH", tpid, 100 + i) for i, tpid in enumerate(vlans))
    return b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02" + tags + struct.pack("!H", ethertype) + ip


def pcap_file(link_type: int, frames: list[bytes], order: str = "<", nsec: bool = False,
              t0_ns: int = 1_700_000_000_123_456_000, snaplen: int = 65535) -> bytes:
    magic = 0xA1B23C4D if nsec else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link_type)
    for i, frame in enumerate(frames):
        t = t0_ns + i * 1_000_000
        frac = t % 10**9 if nsec else (t % 10**9) // 1000
        cut = frame[:snaplen]
        out += struct.pack(order + "IIII", t // 10**9, frac, len(cut), len(frame)) + cut
    return out


def pcapng_block(order: str, block_type: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    length = 12 + len(body)
    return struct.pack(order + "II", block_type, length) + body + struct.pack(order + "I", length)


def shb(order: str) -> bytes:
    return pcapng_block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(order: str, link_type: int, tsresol: int | None = None, tsoffset_s: int | None = None,
        snaplen: int = 0) -> bytes:
    opts = b""
    if tsresol is not None:
        opts += struct.pack(order + "HHB3x", 9, 1, tsresol)
    if tsoffset_s is not None:
        opts += struct.pack(order + "HHq", 14, 8, tsoffset_s)
    if opts:
        opts += struct.pack(order + "HH", 0, 0)
    return pcapng_block(order, 1, struct.pack(order + "HHI", link_type, 0, snaplen) + opts)


def epb(order: str, if_id: int, ticks: int, frame: bytes) -> bytes:
    return pcapng_block(order, 6, struct.pack(order + "IIIII", if_id, ticks >> 32, ticks & 0xFFFFFFFF,
                                              len(frame), len(frame)) + frame)


def spb(order: str, frame: bytes) -> bytes:
    return pcapng_block(order, 3, struct.pack(order + "I", len(frame)) + frame)


def obsolete_pb(order: str, if_id: int, ticks: int, frame: bytes) -> bytes:
    return pcapng_block(order, 2, struct.pack(order + "HHIIII", if_id, 0, ticks >> 32, ticks & 0xFFFFFFFF,
                                              len(frame), len(frame)) + frame)


# MPTCP options (kind 30), RFC 8684 layouts.
def mp_capable(version: int = 1, flags: int = 0x01, *keys: int, dll: int | None = None,
               csum: int | None = None) -> bytes:
    body = bytes([version, flags]) + b"".join(struct.pack("!Q", k) for k in keys)
    body += b"" if dll is None else struct.pack("!H", dll)
    body += b"" if csum is None else struct.pack("!H", csum)
    return bytes([30, 2 + len(body)]) + body


def dss(ack: int | None = None, ack8: bool = True, dsn: int | None = None, dsn8: bool = True, ssn: int = 0,
        dll: int = 0, csum: int | None = None, fin: bool = False) -> bytes:
    flags = (0x10 if fin else 0) | (0x01 | (0x02 if ack8 else 0) if ack is not None else 0)
    body = b""
    if ack is not None:
        body += struct.pack("!Q" if ack8 else "!I", ack)
    if dsn is not None:
        flags |= 0x04 | (0x08 if dsn8 else 0)
        body += struct.pack("!Q" if dsn8 else "!I", dsn) + struct.pack("!IH", ssn, dll)
        body += b"" if csum is None else struct.pack("!H", csum)
    return bytes([30, 4 + len(body), 0x20, flags]) + body


LONG_HOP_BY_HOP = (0, b"\x01\xfc" + b"\x00" * 252)  # one PadN option: a 256-byte header
NOP_NOP_TS = b"\x01\x01\x08\x0a" + struct.pack("!II", 123456, 654321)


def read_bytes(tmp_path: Path, data: bytes, name: str = "x.pcap") -> tuple[pl.DataFrame, ReadStats]:
    path = tmp_path / name
    path.write_bytes(data)
    return read_native(path)


# ---------------------------------------------------------------------------- hand-built captures


def test_link_types_and_byte_orders(tmp_path: Path) -> None:
    seg = tcp_segment(seq=0xDEADBEEF, ack=0x01020304, flags=0x010, win=777, payload=b"x" * 10)
    v4, v6 = ipv4_packet(seg), ipv6_packet(seg)
    cases = {
        "sll2": (276, struct.pack("!HHIHBB8s", 0x0800, 0, 1, 1, 0, 6, b"\x02" * 8) + v4),
        "sll": (113, struct.pack("!HHH8sH", 0, 1, 6, b"\x02" * 8, 0x86DD) + v6),
        "null-le": (0, struct.pack("<I", 2) + v4),
        "null-be-inet6": (0, struct.pack(">I", 30) + v6),
        "null-le-inet6-bsd": (0, struct.pack("<I", 24) + v6),
        "loop": (108, struct.pack(">I", 2) + v4),
        "vlan": (1, ethernet(v4, vlans=(0x8100,))),
        "qinq": (1, ethernet(v6, vlans=(0x88A8, 0x8100))),
        "raw": (101, v6),
        "raw-linux": (12, v4),
        "ipv4": (228, v4),
        "ipv6": (229, v6),
        "ppp": (9, b"\xff\x03\x00\x21" + v4),
        "ppp-no-address": (9, b"\x00\x57" + v6),
        "ppp-hdlc": (50, b"\xff\x03\x00\x21" + v4),
    }
    for name, (link_type, frame) in cases.items():
        for order in "<>":
            table, stats = read_bytes(tmp_path, pcap_file(link_type, [frame], order=order), f"{name}{order}.pcap")
            assert table.height == 1, name
            row = table.row(0, named=True)
            assert (row["seq"], row["ack"], row["flags"], row["win"], row["payload_len"]) == \
                (0xDEADBEEF, 0x01020304, 0x010, 777, 10), name
            assert row["src"] in ("10.0.0.1", "2001:db8::1"), name
            assert stats.link_types == (link_type,)


def test_ipv6_extension_headers_and_fragments(tmp_path: Path) -> None:
    seg = tcp_segment(sport=1, dport=2, payload=b"y" * 7)
    hop = (0, b"\x01\x04\x00\x00\x00\x00")       # hop-by-hop, PadN: 8 bytes in all
    routing = (43, b"\x00\x00\x00\x00\x00\x00" + b"\x00" * 16)  # 24 bytes
    dest = (60, b"\x01\x04\x00\x00\x00\x00")
    first_frag = (44, struct.pack("!HI", 0x0001, 99))  # offset 0, more fragments
    later_frag = (44, struct.pack("!HI", 0x0010, 99))  # offset 2 (x 8 bytes)
    frames = [
        ipv6_packet(seg, ext=[hop, routing, dest]),
        ipv6_packet(seg, ext=[hop, first_frag]),
        ipv6_packet(b"z" * 16, ext=[later_frag]),
        ipv4_packet(b"z" * 16, frag=0x0002),             # IPv4 non-first fragment
        ipv4_packet(seg, ip_options=b"\x01\x01\x01\x00"),  # IPv4 with options (IHL 6)
        ipv4_packet(b"\x00" * 8, proto=17),              # UDP
        ipv6_packet(seg, ext=[LONG_HOP_BY_HOP, dest]),   # headers past the first pass's row width
    ]
    table, stats = read_bytes(tmp_path, pcap_file(101, frames))
    assert table["frame"].to_list() == [1, 2, 5, 7]
    assert table["payload_len"].to_list() == [7, 7, 7, 7]
    assert table["src"].to_list() == ["2001:db8::1", "2001:db8::1", "10.0.0.1", "2001:db8::1"]
    assert table["dst"].to_list()[0] == "2001:db8:0:1::2"
    assert (stats.frames_total, stats.frames_tcp, stats.ip_fragments, stats.frames_not_tcp) == (7, 4, 2, 1)


def test_tcp_options(tmp_path: Path) -> None:
    syn_opts = struct.pack("!BBH", 2, 4, 1460) + b"\x04\x02" + NOP_NOP_TS[2:] + b"\x01\x03\x03\x07"
    sack = b"\x01\x01\x05\x12" + struct.pack("!IIII", 10, 20, 30, 40)
    frames = [ethernet(ipv4_packet(tcp_segment(flags=0x002, options=syn_opts))),
              ethernet(ipv4_packet(tcp_segment(options=NOP_NOP_TS + sack)))]
    table, _ = read_bytes(tmp_path, pcap_file(1, frames))
    syn, ack = table.row(0, named=True), table.row(1, named=True)
    assert (syn["opt_mss"], syn["opt_wscale"], syn["opt_sack_perm"], syn["opt_ts_val"], syn["opt_ts_ecr"]) == \
        (1460, 7, True, 123456, 654321)
    assert (ack["opt_sack_blocks"], ack["opt_sack_le"], ack["opt_sack_re"]) == (2, 10, 20)
    assert (ack["opt_mss"], ack["opt_sack_perm"], syn["opt_sack_blocks"]) == (None, False, 0)


def mptcp_table(tmp_path: Path, options: list[bytes]) -> pl.DataFrame:
    frames = [ethernet(ipv4_packet(tcp_segment(options=NOP_NOP_TS + o))) for o in options]
    table, stats = read_bytes(tmp_path, pcap_file(1, frames))
    assert stats.mp_malformed == int(table["mp_malformed"].sum())
    return table


def test_mptcp_capable_join_dss(tmp_path: Path) -> None:
    k1, k2 = 0x1122334455667788, 0x99AABBCCDDEEFF00
    table = mptcp_table(tmp_path, [
        mp_capable(1, 0x81),                     # v1 SYN: no key
        mp_capable(1, 0x01, k1),                 # SYN/ACK
        mp_capable(1, 0x01, k1, k2, dll=100, csum=0xBEEF),  # third ACK with data and checksum
        mp_capable(0, 0x81, k2, k1),             # v0 third ACK
        bytes([30, 12, 0x11, 5]) + struct.pack("!II", 0xCAFE, 0xF00D),    # MP_JOIN SYN, backup
        bytes([30, 16, 0x10, 6]) + b"\xaa" * 8 + struct.pack("!I", 0xABCD),  # MP_JOIN SYN/ACK
        dss(ack=2**63 + 5, dsn=2**64 - 1, ssn=9, dll=1400, csum=0x1234),
        dss(ack=77, ack8=False, dsn=88, dsn8=False, ssn=1, dll=1, fin=True),
    ])
    rows = table.to_dicts()
    assert [r["mp_version"] for r in rows[:4]] == [1, 1, 1, 0]
    assert [r["mp_sender_key"] for r in rows[:4]] == [None, k1, k1, k2]
    # MP_CAPABLE's own data-level length and checksum stay out of the dss_* columns (DSS only).
    assert (rows[2]["mp_receiver_key"], rows[2]["dss_dll"], rows[2]["dss_checksum"]) == (k2, None, None)
    assert (rows[4]["mp_join_token"], rows[4]["mp_join_nonce"], rows[4]["mp_addr_id"], rows[4]["mp_backup"]) == \
        (0xCAFE, 0xF00D, 5, True)
    assert (rows[5]["mp_join_token"], rows[5]["mp_join_nonce"], rows[5]["mp_backup"]) == (None, 0xABCD, False)
    assert (rows[6]["dss_data_ack"], rows[6]["dss_dsn"], rows[6]["dss_ssn"], rows[6]["dss_dll"]) == \
        (2**63 + 5, 2**64 - 1, 9, 1400)
    assert (rows[6]["dss_checksum"], rows[6]["dss_dsn8"], rows[6]["dss_ack8"], rows[6]["dss_data_fin"]) == \
        (0x1234, True, True, False)
    assert (rows[7]["dss_data_ack"], rows[7]["dss_dsn"], rows[7]["dss_dsn8"], rows[7]["dss_data_fin"]) == \
        (77, 88, False, True)
    assert [r["mp_subtypes"] for r in rows] == [1, 1, 1, 1, 2, 2, 4, 4]
    assert not any(r["mp_malformed"] for r in rows)


def test_mptcp_address_and_control_subtypes(tmp_path: Path) -> None:
    v6 = ipaddress.IPv6Address("2001:db8::5").packed
    table = mptcp_table(tmp_path, [
        bytes([30, 18, 0x30, 3]) + socket.inet_aton("198.51.100.1") + b"\x01\xbb" + b"h" * 8,  # v1, port, HMAC
        bytes([30, 8, 0x31, 4]) + socket.inet_aton("192.0.2.9"),     # v1 echo
        bytes([30, 22, 0x36, 2]) + v6 + b"\x1f\x90",                 # v0 IPv6 with port
        bytes([30, 5, 0x40, 1, 2]),                                  # REMOVE_ADDR two ids
        bytes([30, 4, 0x51, 7]),                                     # MP_PRIO v0 with address id
        bytes([30, 12, 0x60, 0]) + struct.pack("!Q", 5),             # MP_FAIL
        bytes([30, 12, 0x70, 0]) + struct.pack("!Q", 6),             # MP_FASTCLOSE
        bytes([30, 4, 0x80, 0x01]),                                  # MP_TCPRST
        dss(ack=1) + bytes([30, 8, 0x31, 9]) + socket.inet_aton("192.0.2.1"),  # DSS + ADD_ADDR echo
    ])
    rows = table.to_dicts()
    assert [(r["add_addr"], r["add_addr_port"], r["mp_addr_id"]) for r in rows[:3]] == \
        [("198.51.100.1", 443, 3), ("192.0.2.9", None, 4), ("2001:db8::5", 8080, 2)]
    assert (rows[4]["mp_backup"], rows[4]["mp_addr_id"]) == (True, 7)
    assert [r["mp_subtypes"] for r in rows[3:8]] == [1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8]
    assert rows[5]["mp_sender_key"] is None and rows[6]["mp_sender_key"] is None  # FASTCLOSE key is not it
    assert (rows[8]["mp_subtypes"], rows[8]["add_addr"], rows[8]["dss_data_ack"]) == (0b1100, "192.0.2.1", 1)
    assert not any(r["mp_malformed"] for r in rows)


def test_malformed_mptcp_options_are_flagged_not_decoded(tmp_path: Path) -> None:
    table = mptcp_table(tmp_path, [
        bytes([30, 3, 0x20]),                            # DSS without flags (the dss-oobr case)
        bytes([30, 12, 0x20, 0x05]) + b"\x00" * 8,       # DSS says 4-byte ack + 4-byte DSN: too short
        bytes([30, 10, 0x00, 0x01]) + b"\x00" * 6,       # MP_CAPABLE of length 10
        bytes([30, 40, 0x20, 0x01]) + b"\x00" * 4,       # length runs past the header
        bytes([30, 2]),                                  # too short to have a subtype
        bytes([30, 13, 0x10, 0x01]) + b"\x00" * 9,       # MP_JOIN of length 13
    ])
    assert table["mp_malformed"].to_list() == [True] * 6
    assert table["dss_data_ack"].null_count() == 6 and table["mp_sender_key"].null_count() == 6
    assert table["mp_subtypes"].to_list()[:3] == [4, 4, 1]


def test_snaplen_cuts(tmp_path: Path) -> None:
    big = ethernet(ipv4_packet(tcp_segment(options=NOP_NOP_TS, payload=b"p" * 1000)))
    frames = [big, big[:60], big[:40]]
    data = pcap_file(1, [big], snaplen=100)[:24]  # header only, then records cut by hand
    for i, frame in enumerate(frames):
        cut = frame[:100]
        data += struct.pack("<IIII", 1_700_000_000, i, len(cut), len(big)) + cut
    table, stats = read_bytes(tmp_path, data)
    assert table["frame"].to_list() == [1]
    assert table.row(0, named=True)["payload_len"] == 1000
    assert (stats.frames_snapped, stats.frames_truncated, stats.frames_tcp) == (1, 2, 1)


def test_pcapng_interfaces_resolutions_and_blocks(tmp_path: Path) -> None:
    seg = tcp_segment(seq=42, payload=b"q" * 3)
    eth, raw = ethernet(ipv4_packet(seg)), ipv6_packet(seg)
    le, be = "<", ">"
    data = (shb(le) + idb(le, 1) + idb(le, 101, tsresol=9, tsoffset_s=100)
            + epb(le, 0, 1_700_000_000_250_000, eth)          # µs
            + epb(le, 1, 5_000_000_007, raw)                   # ns, +100 s offset
            + pcapng_block(le, 5, b"\x00" * 8)                 # interface statistics: skipped
            + spb(le, eth)                                     # no timestamp
            + obsolete_pb(le, 1, 3_000_000_000, raw)
            + shb(be) + idb(be, 276, tsresol=0x80 | 10)        # new section: big-endian, 2^-10 s
            + epb(be, 0, 1024 * 1_600_000_000 + 512, struct.pack("!HHIHBB8s", 0x86DD, 0, 1, 1, 0, 6,
                                                                   b"\x02" * 8) + raw))
    table, stats = read_bytes(tmp_path, data, "two.pcapng")
    assert table["t_ns"].to_list() == [1_700_000_000_250_000_000, 105_000_000_007, 0, 103_000_000_000,
                                       1_600_000_000_500_000_000]
    assert table["seq"].to_list() == [42] * 5
    assert table["src"].to_list() == ["10.0.0.1", "2001:db8::1", "10.0.0.1", "2001:db8::1", "2001:db8::1"]
    assert stats.link_types == (1, 101, 276)
    assert stats.frames_total == 5


@needs_tshark
def test_hand_built_captures_agree_with_tshark(tmp_path: Path) -> None:
    """Link types the shared traces lack, as one pcapng with an interface per link type."""
    seg = tcp_segment(options=NOP_NOP_TS + dss(ack=5, dsn=6, ssn=1, dll=3), payload=b"abc")
    frames = {
        276: struct.pack("!HHIHBB8s", 0x0800, 0, 1, 1, 0, 6, b"\x02" * 8) + ipv4_packet(seg),
        0: struct.pack("<I", 30) + ipv6_packet(seg, ext=[(0, b"\x01\x04\x00\x00\x00\x00")]),
        1: ethernet(ipv4_packet(seg), vlans=(0x88A8, 0x8100)),
        9: b"\xff\x03\x00\x57" + ipv6_packet(seg),
        101: ipv4_packet(seg, ip_options=b"\x01\x01\x01\x00"),
        229: ipv6_packet(seg, ext=[LONG_HOP_BY_HOP]),
    }
    data = shb(">") + b"".join(idb(">", link, tsresol=9) for link in frames)
    data += b"".join(epb(">", i, 1_700_000_000_000_000_000 + 1000 * i + 7, frame)
                     for i, frame in enumerate(frames.values()))
    path = tmp_path / "links.pcapng"
    path.write_bytes(data)
    assert assert_matches_tshark(path).height == len(frames)
    (tmp_path / "links.pcap").write_bytes(pcap_file(0, [frames[0]] * 2, order=">", nsec=True))
    assert assert_matches_tshark(tmp_path / "links.pcap").height == 2


# ------------------------------------------------------------------------------------ bad input


def good_capture() -> bytes:
    frame = ethernet(ipv4_packet(tcp_segment(payload=b"d" * 50)))
    return pcap_file(1, [frame] * 3)


def assert_input_error(path: Path, fragment: str) -> InputError:
    with pytest.raises(InputError) as info:
        read_native(path)
    message = str(info.value)
    assert str(path) in message and fragment in message and "\n" not in message
    return info.value


def test_empty_and_not_a_capture(tmp_path: Path) -> None:
    (tmp_path / "empty.pcap").write_bytes(b"")
    assert_input_error(tmp_path / "empty.pcap", "empty file")
    (tmp_path / "text.pcap").write_bytes(b"hello, this is not a capture\n" * 10)
    assert_input_error(tmp_path / "text.pcap", "not a pcap or pcapng capture")
    (tmp_path / "tiny.pcap").write_bytes(b"\xd4")
    assert_input_error(tmp_path / "tiny.pcap", "not a pcap or pcapng capture")
    assert_input_error(tmp_path / "missing.pcap", "cannot read")
    assert_input_error(tmp_path, "cannot read")
    (tmp_path / "head.pcap").write_bytes(good_capture()[:20])
    assert_input_error(tmp_path / "head.pcap", "truncated")


def test_truncated_file_keeps_complete_records(tmp_path: Path) -> None:
    data = good_capture()
    for cut in (len(data) - 1, len(data) - 60, len(data) - 95):
        table, stats = read_bytes(tmp_path, data[:cut])
        assert table.height == 2 and stats.frames_total == 2
        assert stats.records_dropped == 1 and "truncated" in (stats.stop_reason or "")
    table, stats = read_bytes(tmp_path, data + b"\x00" * 7)  # partial record header at the end
    assert table.height == 3 and stats.records_dropped == 1
    table, stats = read_bytes(tmp_path, data[:24])  # no records at all: an empty capture, not an error
    assert table.height == 0 and stats.frames_total == 0 and table.schema == pl.Schema(PACKETS)
    table, stats = read_bytes(tmp_path, shb("<") + idb("<", 1), "empty.pcapng")
    assert table.height == 0 and stats.stop_reason is None


def test_bogus_record_lengths(tmp_path: Path) -> None:
    data = bytearray(good_capture())
    record = 24 + 16 + 104  # second record header
    data[record + 8:record + 12] = struct.pack("<I", 10_000_000)  # absurd
    table, stats = read_bytes(tmp_path, bytes(data))
    assert table.height == 1 and "more than" in (stats.stop_reason or "")
    data[24 + 8:24 + 12] = struct.pack("<I", 1_000_000)  # first record absurd: nothing valid
    (tmp_path / "bogus.pcap").write_bytes(bytes(data))
    assert_input_error(tmp_path / "bogus.pcap", "more than")
    first_too_long = bytearray(good_capture())
    first_too_long[24 + 8:24 + 12] = struct.pack("<I", 200_000)  # plausible but past the end of file
    (tmp_path / "long.pcap").write_bytes(bytes(first_too_long))
    assert_input_error(tmp_path / "long.pcap", "truncated")


def test_pcapng_damage(tmp_path: Path) -> None:
    frame = ethernet(ipv4_packet(tcp_segment()))
    data = shb("<") + idb("<", 1) + epb("<", 0, 1, frame) + epb("<", 0, 2, frame)
    table, stats = read_bytes(tmp_path, data[:-5], "cut.pcapng")
    assert table.height == 1 and stats.records_dropped == 1
    (tmp_path / "noidb.pcapng").write_bytes(shb("<") + epb("<", 0, 1, frame))
    assert_input_error(tmp_path / "noidb.pcapng", "bad packet block")
    (tmp_path / "shb.pcapng").write_bytes(shb("<")[:20])
    assert_input_error(tmp_path / "shb.pcapng", "section header")


def test_unsupported_link_type(tmp_path: Path) -> None:
    (tmp_path / "wifi.pcap").write_bytes(pcap_file(105, [b"\x00" * 40]))
    error = assert_input_error(tmp_path / "wifi.pcap", "link type 105")
    assert isinstance(error, UnsupportedLinkType)


# ------------------------------------------------------------------------------------------- fuzz


def pcap_to_pcapng(data: bytes) -> bytes:
    """Re-wrap the records of a little-endian µs pcap as pcapng EPBs (nanosecond interface)."""
    link_type = struct.unpack_from("<I", data, 20)[0]
    out, pos = shb("<") + idb("<", link_type, tsresol=9), 24
    while pos + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack_from("<IIII", data, pos)
        out += epb("<", 0, sec * 10**9 + usec * 1000, data[pos + 16:pos + 16 + incl])
        pos += 16 + incl
    return out


def fuzz_seeds() -> list[bytes]:
    seeds = [p.read_bytes() for p in FIXTURES if p.stat().st_size < 50_000]
    seeds += [pcap_to_pcapng(seed) for seed in seeds[:4]]
    frame = ethernet(ipv4_packet(tcp_segment(options=NOP_NOP_TS + dss(ack=1, dsn=2, ssn=3, dll=4))))
    seeds.append(shb("<") + idb("<", 1) + epb("<", 0, 1, frame) + spb("<", frame) + epb("<", 0, 3, frame))
    seeds.append(pcap_file(0, [struct.pack("<I", 30) + ipv6_packet(tcp_segment(), ext=[(44, b"\x00\x01" + b"\x00" * 4)])] * 3))
    return seeds


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:  # truncation at a random point
        return bytes(buf[:rng.randrange(len(buf) + 1)])
    if kind == 1:  # random byte flips, anywhere
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if kind == 2:  # bogus length field (a 32-bit value at a random 4-byte position)
        at = rng.randrange(max(1, len(buf) - 4))
        buf[at:at + 4] = struct.pack("<I", rng.choice([0, 1, 7, 0xFFFF, 0x40000, 0xFFFFFFFF, rng.getrandbits(32)]))
        return bytes(buf)
    # 3, 4: hit header areas of the first frames, where link/IP/TCP headers and options live
    for _ in range(rng.randint(1, 6)):
        at = min(len(buf) - 1, 24 + rng.randrange(min(len(buf), 400)))
        buf[at] = rng.choice([0, 1, 2, 5, 8, 30, 0x20, 0x45, 0x60, 0xFF, rng.randrange(256)])
    return bytes(buf)


def test_fuzzed_captures_never_crash_or_hang(tmp_path: Path) -> None:
    rng = random.Random(8684)
    seeds = fuzz_seeds()
    path = tmp_path / "fuzz.cap"
    outcomes = {"table": 0, "error": 0}
    started = time.monotonic()
    for case in range(1000):
        path.write_bytes(mutate(rng.choice(seeds), rng))
        try:
            table, stats = read_native(path)
        except InputError as error:
            assert "\n" not in str(error) and str(path) in str(error), f"case {case}"
            outcomes["error"] += 1
            continue
        assert table.schema == pl.Schema(PACKETS), f"case {case}"
        assert stats.frames_total == (stats.frames_tcp + stats.frames_not_tcp + stats.frames_truncated
                                      + stats.ip_fragments + stats.frames_malformed), f"case {case}"
        outcomes["table"] += 1
    assert time.monotonic() - started < 60
    assert outcomes["table"] > 300 and outcomes["error"] > 50, outcomes
