"""Structure-aware capture cases: small MPTCP sessions built with scapy (link and IP layers) around
hand-assembled TCP headers, so every MPTCP option can get any subtype, length, flags and fields,
sit at the very end of the header or run past it; written as pcap or as pcapng with odd block
lengths, interface ids and timestamp resolutions.

The TCP header is assembled here rather than by scapy because scapy recomputes option lengths and
data offsets: a fuzzer needs to lie about both.
"""

from __future__ import annotations

import random
import struct

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import CookedLinux, Dot1Q, Ether
from scapy.packet import Raw

__all__ = ["LINKTYPES", "crafted_capture", "mptcp_option", "pcap_bytes", "pcapng_bytes", "tcp_header"]

# link type -> how a packet is framed (the ones the native reader takes, plus raw IP).
LINKTYPES = {"ether": 1, "raw": 101, "sll": 113}

# Lengths each subtype has in RFC 6824 / RFC 8684; the fuzzer uses them and any other length.
_VALID_LENGTHS = {0: (4, 12, 20, 22, 24), 1: (12, 16, 24), 2: (4, 8, 10, 12, 16, 18, 20, 22, 24, 26, 28, 30),
                  3: (8, 10, 16, 18, 20, 22, 28, 30), 4: (4, 5, 6), 5: (3, 4), 6: (12,), 7: (12,), 8: (4,)}


def _rand_bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(max(n, 0)))


def mptcp_option(rng: random.Random, *, subtype: int | None = None, length: int | None = None) -> bytes:
    """One kind-30 option: a subtype (0-15, so unknown ones too), a valid or random length, random
    flags and fields. DSS gets a random flag combination and the fields those flags announce."""
    st = rng.randrange(16) if subtype is None else subtype
    if length is None:
        valid = _VALID_LENGTHS.get(st, (4,))
        length = rng.choice(valid) if rng.random() < 0.7 else rng.randrange(0, 42)
    b3 = rng.getrandbits(8)
    nibble = rng.getrandbits(4) if st != 0 else rng.choice((0, 1, 1, 2, 15))
    if st == 2 and rng.random() < 0.8:
        # DSS: choose flags, then (usually) make the length agree with them.
        b3 = rng.getrandbits(5)
        ack = (8 if b3 & 0x02 else 4) if b3 & 0x01 else 0
        dsn = (8 if b3 & 0x08 else 4) if b3 & 0x04 else 0
        want = 4 + ack + (dsn + 4 + 2 if dsn else 0) + (2 if dsn and rng.random() < 0.3 else 0)
        if rng.random() < 0.85:
            length = want
    body = bytes([30, length & 0xFF, (st << 4) | nibble, b3])
    if st == 0 and rng.random() < 0.5:  # keys that are real 64-bit numbers
        body += struct.pack("!QQ", rng.getrandbits(64), rng.getrandbits(64))
    if st == 1 and rng.random() < 0.5:  # a token from a small pool: joins that match sometimes
        body += struct.pack("!I", rng.choice((0x01020304, 0xDEADBEEF, rng.getrandbits(32))))
    body += _rand_bytes(rng, max(length, 4) - len(body))
    # Keep what the length says, or, sometimes, fewer bytes (the option is cut by the header end).
    if rng.random() < 0.1:
        return body[: rng.randrange(2, max(len(body), 3))]
    return body[: max(length, 2)] if length >= 2 else body[:2]


def _other_option(rng: random.Random) -> bytes:
    kind = rng.choice((1, 1, 2, 3, 4, 5, 8, 0, 34, 254))
    if kind in (0, 1):
        return bytes([kind])
    size = {2: 4, 3: 3, 4: 2, 8: 10}.get(kind, rng.randrange(2, 12))
    if rng.random() < 0.1:
        size = rng.randrange(0, 40)
    return bytes([kind, size & 0xFF]) + _rand_bytes(rng, size - 2)


def tcp_header(rng: random.Random, *, sport: int, dport: int, seq: int, ack: int, flags: int,
               options: bytes, data_offset_words: int | None = None) -> bytes:
    """A TCP header with `options` put in verbatim (padded with NOPs to a word, cut at 40 bytes);
    `data_offset_words` may disagree with the real size."""
    opts = options[:40]
    opts += b"\x01" * (-len(opts) % 4)
    doff = data_offset_words if data_offset_words is not None else 5 + len(opts) // 4
    head = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, (doff & 0xF) << 4,
                       flags & 0xFF, rng.choice((65535, 502, 0)), 0, 0)
    return head + opts


def _options(rng: random.Random, mptcp: list[bytes]) -> bytes:
    parts = [*mptcp]
    for _ in range(rng.randrange(0, 3)):
        parts.insert(rng.randrange(len(parts) + 1), _other_option(rng))
    opts = b"".join(parts)
    if rng.random() < 0.25 and len(opts) < 40:
        # An option that ends exactly at the end of a full 60-byte header.
        opts = b"\x01" * (40 - len(opts)) + opts if rng.random() < 0.5 else opts
    return opts


def _frame(rng: random.Random, link: str, v6: bool, src: str, dst: str, tcp: bytes, payload: bytes) -> bytes:
    ip = (IPv6(src=src, dst=dst, nh=6, hlim=64) if v6 else IP(src=src, dst=dst, proto=6, ttl=64))
    pkt = ip / Raw(tcp + payload)
    if link == "ether":
        outer = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        pkt = (outer / Dot1Q(vlan=rng.randrange(4096)) / pkt) if rng.random() < 0.15 else outer / pkt
    elif link == "sll":
        pkt = CookedLinux(pkttype=rng.choice((0, 4)), lladdrtype=1, lladdrlen=6, src=b"\x02" * 6) / pkt
    return bytes(pkt)


def crafted_capture(rng: random.Random) -> tuple[bytes, str]:
    """A small session (an MP_CAPABLE handshake, maybe a join, then segments with random MPTCP
    options) as pcap or pcapng bytes; returns (bytes, suffix)."""
    link = rng.choice(list(LINKTYPES))
    v6 = rng.random() < 0.3
    hosts = (["2001:db8::1", "2001:db8::2", "2001:db8:1::1"] if v6 else ["10.0.0.1", "10.0.0.2", "10.0.1.1"])
    flows = [(hosts[0], rng.randrange(1024, 65535), hosts[1], 443),
             (hosts[2], rng.randrange(1024, 65535), hosts[1], 443)]
    isn = [rng.getrandbits(32) for _ in range(4)]
    frames: list[tuple[int, bytes]] = []
    t_ns = 1_700_000_000 * 10**9 + rng.getrandbits(30)

    def emit(flow: int, to_server: bool, flags: int, mptcp: list[bytes], payload_len: int = 0) -> None:
        nonlocal t_ns
        c_ip, c_port, s_ip, s_port = flows[flow]
        src, sport, dst, dport = (c_ip, c_port, s_ip, s_port) if to_server else (s_ip, s_port, c_ip, c_port)
        seq = isn[2 * flow + (0 if to_server else 1)] + rng.randrange(0, 5000)
        ack = isn[2 * flow + (1 if to_server else 0)] + rng.randrange(0, 5000)
        doff = rng.randrange(16) if rng.random() < 0.05 else None
        tcp = tcp_header(rng, sport=sport, dport=dport, seq=seq, ack=ack, flags=flags,
                         options=_options(rng, mptcp), data_offset_words=doff)
        frames.append((t_ns, _frame(rng, link, v6, src, dst, tcp, _rand_bytes(rng, payload_len))))
        t_ns += rng.choice((0, 1, 1000, 10**6, 10**7)) * (-1 if rng.random() < 0.03 else 1)

    syn, synack, ack_f, psh = 0x02, 0x12, 0x10, 0x18
    emit(0, True, syn, [mptcp_option(rng, subtype=0)])
    emit(0, False, synack, [mptcp_option(rng, subtype=0)])
    emit(0, True, ack_f, [mptcp_option(rng, subtype=0)])
    if rng.random() < 0.6:
        # A join: SYN forms with any of the three MP_JOIN lengths (16 on a SYN has no token).
        emit(1, True, syn, [mptcp_option(rng, subtype=1, length=rng.choice((12, 12, 16, 24, 8)))])
        emit(1, False, synack, [mptcp_option(rng, subtype=1, length=rng.choice((16, 16, 12)))])
        emit(1, True, ack_f, [mptcp_option(rng, subtype=1, length=24)])
    for _ in range(rng.randrange(1, 25)):
        opts = [mptcp_option(rng, subtype=2 if rng.random() < 0.5 else None) for _ in range(rng.randrange(0, 3))]
        emit(rng.randrange(2), rng.random() < 0.4, rng.choice((ack_f, psh, psh, 0x11, 0x04, 0x02, rng.getrandbits(8))),
             opts, payload_len=rng.choice((0, 0, 1, 100, 1400)))
    linktype = LINKTYPES[link]
    if rng.random() < 0.5:
        return pcap_bytes(frames, linktype, rng), ".pcap"
    return pcapng_bytes(frames, linktype, rng), ".pcapng"


def pcap_bytes(frames: list[tuple[int, bytes]], linktype: int, rng: random.Random | None = None) -> bytes:
    """Classic pcap (microsecond or nanosecond magic, either byte order)."""
    rng = rng or random.Random(0)
    order = rng.choice("<>")
    nano = rng.random() < 0.3
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, rng.choice((65535, 262144, 96)), linktype)]
    for t_ns, data in frames:
        sec, frac = divmod(max(t_ns, 0), 10**9)
        frac = frac if nano else frac // 1000
        snap = data[: rng.choice((len(data), len(data), len(data), 54, 60))]
        out.append(struct.pack(order + "IIII", sec & 0xFFFFFFFF, frac, len(snap), len(data)) + snap)
    return b"".join(out)


def _block(order: str, btype: int, body: bytes, *, bad_length: int | None = None) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    total = 12 + len(body)
    length = total if bad_length is None else bad_length
    return struct.pack(order + "II", btype, length) + body + struct.pack(order + "I", length)


def _tsresol(rng: random.Random) -> int:
    return rng.choice((6, 9, 3, 0, 0x80 | 10, 0x80 | 30, 0x7F, 0xFF, 19, 0x80 | 0x7F))


def pcapng_bytes(frames: list[tuple[int, bytes]], linktype: int, rng: random.Random) -> bytes:
    """pcapng with one or more interfaces (odd timestamp resolutions), enhanced and simple packet
    blocks, unknown blocks, and now and then a block whose length lies or an interface id that
    does not exist."""
    order = rng.choice("<>")
    shb = struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1)
    out = [_block(order, 0x0A0D0D0A, shb)]
    n_if = rng.choice((1, 1, 2, 3))
    resol = []
    for _ in range(n_if):
        r = _tsresol(rng) if rng.random() < 0.4 else 9
        resol.append(r)
        opts = struct.pack(order + "HHB", 9, 1, r) + b"\x00\x00\x00" + struct.pack(order + "HH", 0, 0)
        out.append(_block(order, 1, struct.pack(order + "HHI", linktype, 0, rng.choice((0, 65535, 96))) + opts))
    for t_ns, data in frames:
        iface = rng.randrange(n_if) if rng.random() > 0.03 else rng.choice((n_if, 0xFFFF, 7))
        r = resol[min(iface, n_if - 1)]
        ticks = t_ns // 1000 if r == 6 else t_ns  # the clock value is fuzz anyway for other resolutions
        ticks &= (1 << 64) - 1
        bad = None
        if rng.random() < 0.03:
            bad = rng.choice((0, 4, 12, 13, 0xFFFFFFFF, 12 + len(data) + 100, 7))
        if rng.random() < 0.05:
            out.append(_block(order, 3, struct.pack(order + "I", len(data)) + data, bad_length=bad))
        else:
            cap = data[: rng.choice((len(data), len(data), 40))]
            body = struct.pack(order + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(cap), len(data)) + cap
            out.append(_block(order, 6, body, bad_length=bad))
        if rng.random() < 0.02:
            out.append(_block(order, rng.choice((5, 4, 0x80000001, 2)), _rand_bytes(rng, rng.randrange(0, 40))))
    return b"".join(out)
