"""The tshark reader: every fixture reads into the exact PACKETS schema, chosen fields equal values read
by hand from ``tshark -V`` / ``tshark -x`` output, hand-built packets (option combinations, malformed
options, headers cut by the snaplen) give the values they were built with, and bad inputs give a
one-line InputError. The packet builders here are also used by test_reader_oracle.py."""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, needs

from workbench.capture import _tshark
from workbench.capture._tshark import read_tshark, tshark_available
from workbench.capture.schema import PACKETS
from workbench.errors import InputError

TRACES = SHARED_TRACES
FIXTURES = sorted((TRACES / "fixtures").glob("*.pcap"))
PAIR = sorted((TRACES / "pair").glob("*.pcap"))

pytestmark = pytest.mark.skipif(not tshark_available(), reason="tshark is not installed")

DSS, ADD_ADDR, REMOVE_ADDR = 1 << 2, 1 << 3, 1 << 4


def row(path: Path, frame: int) -> dict:
    df = read_tshark(path).filter(pl.col("frame") == frame)
    assert df.height == 1, f"frame {frame} of {path.name} not read as one TCP segment"
    return df.row(0, named=True)


@needs(TRACES / "fixtures", TRACES / "pair")
@pytest.mark.parametrize("path", FIXTURES + PAIR, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reads_with_exact_schema(path: Path) -> None:
    df = read_tshark(path)
    assert df.schema == pl.Schema(PACKETS)
    assert df.height > 0
    assert df["frame"].is_unique().all() and df["frame"].is_sorted()
    assert df["t_ns"].null_count() == 0 and df["src"].null_count() == 0
    assert set(df["ip_version"].unique()) <= {4, 6}
    assert df["mp_malformed"].null_count() == 0


def test_plain_tcp_capture_has_no_mptcp() -> None:
    df = read_tshark(TRACES / "pair/client_1_tcp_only.pcap")
    assert (df["mp_subtypes"] == 0).all()
    assert df["dss_dsn"].null_count() == df.height


# ---- values read by hand from `tshark -V -o tcp.relative_sequence_numbers:FALSE` of single frames ----

def test_mptcp_v1_handshake() -> None:
    f = TRACES / "fixtures/tests_mptcp-v1.pcap"
    syn = row(f, 1)
    # tshark -V frame 1: Epoch 1578930666.676845000, 10.0.1.1:33306 -> 10.0.2.1:10004, Seq 2180756989,
    # Flags 0x002, Window 65535, MSS 1460, SACK permitted, TSval 464494241, TSecr 0, shift 8,
    # MP_CAPABLE version 1, flags 0x01, no key (a v1 SYN carries none).
    assert syn["t_ns"] == 1578930666_676845000
    assert (syn["src"], syn["sport"], syn["dst"], syn["dport"]) == ("10.0.1.1", 33306, "10.0.2.1", 10004)
    assert (syn["seq"], syn["ack"], syn["flags"], syn["win"]) == (2180756989, 0, 0x002, 65535)
    assert (syn["opt_mss"], syn["opt_wscale"], syn["opt_sack_perm"]) == (1460, 8, True)
    assert (syn["opt_ts_val"], syn["opt_ts_ecr"]) == (464494241, 0)
    assert (syn["mp_subtypes"], syn["mp_version"], syn["mp_capable_flags"]) == (1, 1, 0x01)
    assert syn["mp_sender_key"] is None and syn["mp_receiver_key"] is None
    # frame 2 (SYN-ACK): Sender's Key 3001306557161771836
    assert row(f, 2)["mp_sender_key"] == 3001306557161771836
    # frame 3 (third ACK): Sender's Key 2295531734017261039, Receiver's Key 3001306557161771836
    ack = row(f, 3)
    assert (ack["mp_sender_key"], ack["mp_receiver_key"]) == (2295531734017261039, 3001306557161771836)
    # frame 7: 7196 bytes on wire (GSO), TCP Segment Len 7100, DSS flags 0x0f, Data ACK
    # 14413541604287230030 (64 bits), DSN 11713449205243392242 (64 bits), SSN 1, Data-level Length 8192
    d = row(f, 7)
    assert (d["frame_len"], d["payload_len"]) == (7196, 7100)
    assert (d["mp_subtypes"], d["dss_flags"]) == (DSS, 0x0F)
    assert (d["dss_dsn"], d["dss_dsn8"], d["dss_ssn"], d["dss_dll"]) == (11713449205243392242, True, 1, 8192)
    assert (d["dss_data_ack"], d["dss_ack8"], d["dss_data_fin"]) == (14413541604287230030, True, False)


def test_lab_capture_dss_and_sack() -> None:
    server = TRACES / "lab/c07/server.pcap"
    # tshark -V lab/c07/server.pcap frame 101: 1514 bytes on wire, 128 captured (snaplen), Len 1424,
    # Seq 1101113358, Ack 3674889181, Window 63, TSval 780093722, TSecr 156018956, DSS flags 0x0d,
    # Data ACK 2917423992 (32 bits), DSN 18098490017687921147 (64 bits), SSN 91569, DLL 15664
    d = row(server, 101)
    assert (d["frame_len"], d["cap_len"], d["payload_len"]) == (1514, 128, 1424)
    assert (d["seq"], d["ack"], d["win"], d["flags"]) == (1101113358, 3674889181, 63, 0x010)
    assert (d["opt_ts_val"], d["opt_ts_ecr"]) == (780093722, 156018956)
    assert d["dss_flags"] == 0x0D
    assert (d["dss_dsn"], d["dss_dsn8"], d["dss_ssn"], d["dss_dll"]) == (18098490017687921147, True, 91569, 15664)
    assert (d["dss_data_ack"], d["dss_ack8"]) == (2917423992, False)
    client = TRACES / "lab/c07/client.pcap"
    # frame 100: pure DATA_ACK, flags 0x03, Data ACK 18098490017687902635 (64 bits), no mapping
    a = row(client, 100)
    assert (a["dss_flags"], a["dss_data_ack"], a["dss_ack8"]) == (0x03, 18098490017687902635, True)
    assert a["dss_dsn"] is None and a["dss_dsn8"] is None and a["dss_dll"] is None
    # tshark -T fields -e tcp.options.sack.count -e tcp.options.sack_le -e tcp.options.sack_re (raw):
    # frame 1354: 1 block, 1102118758 .. 1102120182
    s = row(client, 1354)
    assert (s["opt_sack_blocks"], s["opt_sack_le"], s["opt_sack_re"]) == (1, 1102118758, 1102120182)


def test_v0_join_add_addr_remove_addr() -> None:
    f = TRACES / "fixtures/tests_mptcp-v0.pcap"
    # frame 4: ADD_ADDR (id 1, 10.1.2.2) followed by DSS (Data ACK 3576348362, DSN 3518592144 32 bits);
    # DSS checksum from `tshark -x`: option 1e 14 20 05 d52abeca d1b97490 00000001 0029 082f
    a = row(f, 4)
    assert a["mp_subtypes"] == ADD_ADDR | DSS
    assert (a["mp_addr_id"], a["add_addr"], a["add_addr_port"]) == (1, "10.1.2.2", None)
    assert (a["dss_data_ack"], a["dss_dsn"], a["dss_dsn8"], a["dss_ack8"]) == (3576348362, 3518592144, False, False)
    assert (a["dss_ssn"], a["dss_dll"], a["dss_checksum"]) == (1, 41, 0x082F)
    # frame 8: MP_JOIN SYN, Receiver's Token 3833528642, Sender's Random Number 459692568, id 0, B 0
    j = row(f, 8)
    assert (j["mp_join_token"], j["mp_join_nonce"], j["mp_addr_id"], j["mp_backup"]) == (3833528642, 459692568, 0, False)
    # frame 9: MP_JOIN SYN-ACK, Sender's Random Number 866904533, id 1
    j2 = row(f, 9)
    assert (j2["mp_join_token"], j2["mp_join_nonce"], j2["mp_addr_id"]) == (None, 866904533, 1)
    # frame 210: REMOVE_ADDR (id 0) + DSS: no MP_JOIN/ADD_ADDR/MP_PRIO, so no mp_addr_id
    r = row(f, 210)
    assert r["mp_subtypes"] == REMOVE_ADDR | DSS and r["mp_addr_id"] is None


def test_dss_checksum_that_tshark_does_not_print() -> None:
    # tshark 4.0 shows no checksum for this DSS option, `tshark -x` of frame 6 does: the option is
    # 1e 14 20 05 c9dc1c61 b1712fb6 00000001 0001 9e91
    d = row(TRACES / "fixtures/tests_mptcp-fclose.pcap", 6)
    assert (d["dss_data_ack"], d["dss_dsn"], d["dss_ssn"], d["dss_dll"]) == (3386645601, 2976985014, 1, 1)
    assert d["dss_checksum"] == 0x9E91


def test_fastclose_key_is_not_a_sender_key() -> None:
    # frame 10: MP_FASTCLOSE carrying Receiver's Key 14989582283654746948 (the MP_CAPABLE field name)
    d = row(TRACES / "fixtures/tests_mptcp-fclose.pcap", 10)
    assert d["mp_subtypes"] == 1 << 7
    assert d["mp_sender_key"] is None and d["mp_receiver_key"] is None


def test_mp_capable_with_data_is_not_a_dss_mapping() -> None:
    # ptcpdump frame 4: MP_CAPABLE v1 third ACK with data (length 22, Data-level Length 5)
    d = row(TRACES / "fixtures/ptcpdump_mptcp.pcap", 4)
    assert d["mp_subtypes"] == 1 and d["payload_len"] == 5
    assert d["dss_dll"] is None and d["dss_flags"] is None
    assert (d["mp_sender_key"], d["mp_receiver_key"]) == (18337412883174771571, 16381466453332990326)


def test_add_addr_echo_and_tcprst_and_malformed() -> None:
    # aa-echo frame 2: ADD_ADDR echo (length 8, id 1, 10.0.2.1) + DSS with an 8-byte Data ACK
    d = row(TRACES / "fixtures/tests_mptcp-aa-echo.pcap", 2)
    assert (d["mp_subtypes"], d["add_addr"], d["mp_addr_id"], d["dss_ack8"]) == (ADD_ADDR | DSS, "10.0.2.1", 1, True)
    # tcprst frames 1-2: MP_TCPRST only, raw IP link type
    rst = read_tshark(TRACES / "fixtures/tests_mptcp-tcprst.pcap")
    assert rst["mp_subtypes"].to_list() == [1 << 8, 1 << 8]
    # dss-oobr: a 3-byte DSS option, tshark: "[Malformed Packet: MPTCP]"
    bad = row(TRACES / "fixtures/tests_mptcp-dss-oobr.pcap", 1)
    assert bad["mp_malformed"] is True and bad["mp_subtypes"] == DSS and bad["dss_flags"] is None


# ---- bad inputs ----

def _assert_one_line(err: InputError, path: Path, words: str) -> None:
    msg = str(err)
    assert "\n" not in msg and str(path) in msg and words in msg


def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.pcap"
    with pytest.raises(InputError) as e:
        read_tshark(p)
    _assert_one_line(e.value, p, "no such file")


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.pcap"
    p.write_bytes(b"")
    with pytest.raises(InputError) as e:
        read_tshark(p)
    _assert_one_line(e.value, p, "empty file")


@pytest.mark.parametrize("content", [b"hello\n", b"garbage garbage garbage garbage", bytes(range(256)) * 4,
                                     (TRACES / "pair/client_2.pcap").read_bytes()[:24]])
def test_not_a_capture(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "x.pcap"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_tshark(p)
    _assert_one_line(e.value, p, "not a capture")


def test_truncated_capture_shows_tshark_error(tmp_path: Path) -> None:
    p = tmp_path / "cut.pcap"
    p.write_bytes((TRACES / "pair/client_2.pcap").read_bytes()[:300_000])
    with pytest.raises(InputError) as e:
        read_tshark(p)
    _assert_one_line(e.value, p, "cut short")


def test_tshark_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tshark.shutil, "which", lambda name: None)
    assert not tshark_available()
    p = TRACES / "fixtures/tests_mptcp-v1.pcap"
    with pytest.raises(InputError) as e:
        read_tshark(p)
    _assert_one_line(e.value, p, "tshark is not installed")


def test_capture_without_tcp(tmp_path: Path) -> None:
    # the two ARP frames of the fclose fixture, cut out with their pcap header: no TCP -> empty table
    data = (TRACES / "fixtures/tests_mptcp-fclose.pcap").read_bytes()
    p = tmp_path / "arp.pcap"
    p.write_bytes(data[: 24 + 2 * (16 + 42)])
    df = read_tshark(p)
    assert df.height == 0 and df.schema == pl.Schema(PACKETS)


# ---- hand-built packets: option combinations the captures lack, with values known by construction ----

def _u32(value: int) -> bytes:
    return struct.pack("!I", value)


def _u64(value: int) -> bytes:
    return struct.pack("!Q", value)


def _mptcp(subtype_byte: int, body: bytes) -> bytes:
    return bytes([30, 3 + len(body), subtype_byte]) + body


def _tcp_packet(src: str, dst: str, options: bytes, flags: int = 0x010, payload: bytes = b"") -> bytes:
    """Ethernet + IPv4/IPv6 + TCP (ports 1000 -> 2000, seq 111, ack 222, window 333)."""
    options += b"\x01" * (-len(options) % 4)  # NOP padding to a 4-byte boundary
    tcp = struct.pack("!HHIIHHHH", 1000, 2000, 111, 222, ((20 + len(options)) // 4) << 12 | flags, 333, 0, 0)
    seg = tcp + options + payload
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    if s.version == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(seg), 1, 0x4000, 64, 6, 0, s.packed, d.packed)
        ethertype = 0x0800
    else:
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(seg), 6, 64, s.packed, d.packed)
        ethertype = 0x86DD
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack("!H", ethertype) + ip + seg


def write_synthetic_pcap(path: Path) -> dict[int, dict]:
    """Write the hand-built packets to a pcap; return {frame: expected PACKETS values}."""
    u32, u64 = _u32, _u64
    ts_opt = b"\x01\x01\x08\x0a" + u32(1234) + u32(5678)
    dss_ack4 = _mptcp(0x20, bytes([0x01]) + u32(0xA0A0A0A0))  # DSS, data ACK only, 4 bytes
    packets: list[tuple[bytes, dict]] = [
        # 1: IPv6, DSS with 8-byte data ACK and DSN
        (_tcp_packet("2001:db8::1", "2001:db8::2",
                     _mptcp(0x20, bytes([0x0F]) + u64(2**63 + 5) + u64(2**64 - 2) + u32(77) + b"\x05\xdc"),
                     payload=b"x" * 10),
         {"ip_version": 6, "src": "2001:db8::1", "dst": "2001:db8::2", "payload_len": 10, "mp_subtypes": 4,
          "dss_flags": 0x0F, "dss_data_ack": 2**63 + 5, "dss_dsn": 2**64 - 2, "dss_ssn": 77, "dss_dll": 1500,
          "dss_dsn8": True, "dss_ack8": True, "dss_checksum": None}),
        # 2: MP_FAIL (its DSN is printed in the same tshark field as the DSS one) before a DSS
        (_tcp_packet("10.0.0.1", "10.0.0.2",
                     _mptcp(0x60, b"\x00" + u64(999)) + _mptcp(0x20, bytes([0x05]) + u32(3) + u32(4) + u32(5) + b"\x00\x06")),
         {"mp_subtypes": (1 << 6) | 4, "dss_flags": 0x05, "dss_data_ack": 3, "dss_dsn": 4, "dss_ssn": 5,
          "dss_dll": 6, "dss_dsn8": False, "dss_ack8": False}),
        # 3: REMOVE_ADDR of ids 7 and 9, then ADD_ADDR v1 echo (id 3, 10.9.9.9): the address id is ADD_ADDR's
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x40, b"\x07\x09") + _mptcp(0x31, b"\x03" + bytes([10, 9, 9, 9]))),
         {"mp_subtypes": (1 << 4) | (1 << 3), "mp_addr_id": 3, "add_addr": "10.9.9.9", "add_addr_port": None}),
        # 4: ADD_ADDR v1 IPv6 with port and HMAC (length 30), then a DSS data ACK
        (_tcp_packet("10.0.0.1", "10.0.0.2",
                     _mptcp(0x30, b"\x04" + bytes.fromhex("20010db8000000000000000000000099") + b"\x1f\x90" + u64(1))
                     + dss_ack4),
         {"mp_subtypes": (1 << 3) | 4, "mp_addr_id": 4, "add_addr": "2001:db8::99", "add_addr_port": 8080,
          "dss_data_ack": 0xA0A0A0A0}),
        # 5: MP_PRIO with backup set and address id 5 (v0 form, length 4), then a DSS data ACK
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x51, b"\x05") + dss_ack4),
         {"mp_subtypes": (1 << 5) | 4, "mp_backup": True, "mp_addr_id": 5, "dss_flags": 0x01}),
        # 6: timestamps, then a DSS whose checksum tshark 4.0 does not print (0xbeef), DATA_FIN set
        (_tcp_packet("10.0.0.1", "10.0.0.2",
                     ts_opt + _mptcp(0x20, bytes([0x15]) + u32(10) + u32(20) + u32(30) + b"\x00\x01\xbe\xef"),
                     flags=0x011),
         {"opt_ts_val": 1234, "opt_ts_ecr": 5678, "dss_flags": 0x15, "dss_data_fin": True, "dss_dsn": 20,
          "dss_dll": 1, "dss_checksum": 0xBEEF, "flags": 0x011}),
        # 7: MP_JOIN SYN with backup set: address id 2, token, nonce
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x11, b"\x02" + u32(0xDEADBEEF) + u32(0x01020304)), flags=0x002),
         {"mp_subtypes": 2, "mp_backup": True, "mp_addr_id": 2, "mp_join_token": 0xDEADBEEF,
          "mp_join_nonce": 0x01020304}),
        # 8: MP_FASTCLOSE then MP_CAPABLE v0 SYN: the FASTCLOSE key is not MP_CAPABLE's receiver key
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x70, b"\x00" + u64(1111)) + _mptcp(0x00, b"\x81" + u64(2222)),
                     flags=0x002),
         {"mp_subtypes": (1 << 7) | 1, "mp_sender_key": 2222, "mp_receiver_key": None, "mp_version": 0,
          "mp_capable_flags": 0x81}),
    ]
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i, (frame, _) in enumerate(packets):
        out += struct.pack("<IIII", 1_700_000_000 + i, 123456, len(frame), len(frame)) + frame
    path.write_bytes(bytes(out))
    return {i + 1: want for i, (_, want) in enumerate(packets)}


def test_hand_built_option_combinations(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.pcap"
    expected = write_synthetic_pcap(path)
    df = read_tshark(path)
    assert df["frame"].to_list() == list(expected)
    assert df["t_ns"][0] == 1_700_000_000_123_456_000
    for frame, want in expected.items():
        got = df.row(frame - 1, named=True)
        assert got["mp_malformed"] is False
        for name, value in want.items():
            assert got[name] == value, f"frame {frame} {name}: {got[name]!r} != {value!r}"


def write_malformed_pcap(path: Path) -> dict[int, dict]:
    """MPTCP options whose length does not fit their subtype/flags: {frame: expected values}. The
    option's bit stays in mp_subtypes; its fields are not trusted (null)."""
    u32 = _u32
    packets: list[tuple[bytes, dict]] = [
        # 1: DSS with a 4-byte data ACK and 2 bytes too many (tshark decodes it without complaint)
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x20, bytes([0x01]) + u32(7) + b"\x00\x00")),
         {"mp_subtypes": 4, "dss_flags": None, "dss_data_ack": None}),
        # 2: DSS claiming a data ACK and a mapping, too short for the mapping (tshark: exception)
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x20, bytes([0x05]) + u32(7) + u32(8))),
         {"mp_subtypes": 4, "dss_flags": None, "dss_dsn": None}),
        # 3: MP_CAPABLE v0 of length 8
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x00, b"\x81" + b"\x00" * 4), flags=0x002),
         {"mp_subtypes": 1, "mp_version": None, "mp_sender_key": None}),
        # 4: MP_JOIN of length 8
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x11, b"\x02" + u32(5)), flags=0x002),
         {"mp_subtypes": 2, "mp_join_token": None, "mp_addr_id": None, "mp_backup": None}),
        # 5: an MPTCP option of length 2 (no room for a subtype)
        (_tcp_packet("10.0.0.1", "10.0.0.2", bytes([30, 2])), {"mp_subtypes": 0}),
        # 6: ADD_ADDR of length 7
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x30, b"\x01" + bytes([1, 2, 3]))),
         {"mp_subtypes": 8, "mp_addr_id": None, "add_addr": None}),
        # 7: DSS with a mapping and 3 bytes too many
        (_tcp_packet("10.0.0.1", "10.0.0.2",
                     _mptcp(0x20, bytes([0x05]) + u32(1) + u32(2) + u32(3) + b"\x00\x04" + b"\x00" * 3)),
         {"mp_subtypes": 4, "dss_dsn": None, "dss_dll": None}),
        # 8: RFC 6824 ADD_ADDR saying IPv4 (nibble 4) with an RFC 8684 HMAC length (16)
        (_tcp_packet("10.0.0.1", "10.0.0.2", _mptcp(0x34, b"\x01" + bytes([1, 2, 3, 4]) + b"\x00" * 8)),
         {"mp_subtypes": 8, "add_addr": None}),
    ]
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i, (frame, _) in enumerate(packets):
        out += struct.pack("<IIII", 1_700_000_100 + i, 0, len(frame), len(frame)) + frame
    path.write_bytes(bytes(out))
    return {i + 1: want for i, (_, want) in enumerate(packets)}


def test_malformed_options(tmp_path: Path) -> None:
    path = tmp_path / "malformed.pcap"
    expected = write_malformed_pcap(path)
    df = read_tshark(path)
    assert df["frame"].to_list() == list(expected)
    for frame, want in expected.items():
        got = df.row(frame - 1, named=True)
        assert got["mp_malformed"] is True, f"frame {frame}"
        for name, value in want.items():
            assert got[name] == value, f"frame {frame} {name}: {got[name]!r} != {value!r}"


def write_snaplen_cut_pcap(path: Path) -> list[int]:
    """One segment (TS + 8-byte DSS, 100-byte payload) recorded with shrinking snaplens: whole, headers
    only, cut inside the DSS option, inside the TS option, inside the TCP header, inside the IP header.
    Returns the frames whose headers are complete (the only ones a reader may return)."""
    options = (b"\x01\x01\x08\x0a" + _u32(1) + _u32(2)
               + _mptcp(0x20, bytes([0x0F]) + _u64(5) + _u64(6) + _u32(7) + b"\x05\xdc"))
    frame = _tcp_packet("10.0.0.1", "10.0.0.2", options, payload=b"x" * 100)
    headers = 14 + 20 + 20 + 40
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i, cut in enumerate([len(frame), headers, headers - 10, 14 + 20 + 20 + 6, 14 + 20 + 10, 14 + 10]):
        out += struct.pack("<IIII", 1_700_000_200 + i, 0, cut, len(frame)) + frame[:cut]
    path.write_bytes(bytes(out))
    return [1, 2]


def test_segments_with_cut_headers_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    complete = write_snaplen_cut_pcap(path)
    df = read_tshark(path)
    assert df["frame"].to_list() == complete
    assert df["cap_len"].to_list() == [194, 94] and df["payload_len"].to_list() == [100, 100]
    assert df["dss_dsn"].to_list() == [6, 6]
