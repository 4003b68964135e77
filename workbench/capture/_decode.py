"""Link, IP and TCP header decoding, all frames at once.

Models the protocol stack a capture frame carries, as far as TCP and its options: link-layer framing
(Ethernet with 802.1Q/QinQ tags, Linux cooked SLL/SLL2, raw IP, BSD null/loopback, PPP), IPv4 with
options, IPv6 with extension headers, the TCP header and every TCP option this workbench uses,
including every MPTCP subtype of RFC 8684 / RFC 6824.

Input is a matrix with one row per frame holding its first `width` bytes (see `decode_rows`). Every
field is read for all frames at once at per-row column offsets (one numpy gather), so mixed header
layouts need no per-packet Python; when a field sits at the same column in every row (one link type,
one IP header length: the usual capture) the read is a strided slice instead of a gather. TCP
options are walked for all packets in lock step: step k reads the k-th option of every packet that
still has options left, so a packet with four options costs four vectorised steps; the NOP NOP
timestamps prefix Linux puts on nearly every segment is taken in one step.

Frames whose headers reach past `width` are reported as TRUNCATED together with their captured
length; the caller decodes them again with wider rows, so `width` is a speed knob, not a limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

__all__ = ["FRAGMENT", "MALFORMED", "NOT_TCP", "SUPPORTED_LINK_TYPES", "TCP", "TRUNCATED", "Decoded",
           "decode_rows"]

# Per-frame outcome.
TCP, NOT_TCP, TRUNCATED, FRAGMENT, MALFORMED = 0, 1, 2, 3, 4

_ETH_IPV4, _ETH_IPV6 = 0x0800, 0x86DD
_VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)
_MAX_VLAN_TAGS = 3
_IPPROTO_TCP = 6
_IPV6_EXT = (0, 43, 44, 51, 60, 135, 139, 140)  # hop-by-hop, routing, fragment, AH, dest opts, ...
_IPV6_FRAGMENT, _IPV6_AH = 44, 51
_MAX_IPV6_EXT_HEADERS = 16
_AF_INET, _AF_INET6 = 2, (10, 24, 28, 30)  # BSD null: AF_INET6 differs by OS (Linux, BSDs, macOS)
_MPTCP_KIND = 30

ColumnData = tuple[np.ndarray, np.ndarray | None]  # values, and where they are valid (None = all)


@dataclass
class Decoded:
    """Result for one block of rows: outcome per row, and the TCP table for rows with outcome TCP."""

    status: np.ndarray                # int8 per input row
    tcp_rows: np.ndarray              # indices of rows with status TCP, ascending
    columns: dict[str, ColumnData]    # PACKETS columns (except frame/time/lengths) for tcp_rows
    payload_cut: np.ndarray           # bool per tcp row: payload not fully captured


class _Rows:
    """Header rows (one per frame) read at per-row column offsets; reads past a row never fault
    (they return another row's bytes or zeros, and every caller checks lengths before using them).

    Every read fetches the 8 bytes at a position as one big-endian uint64 (through a view with an
    item at every byte, so a gather moves whole items); a field is then a shift and a mask.
    """

    def __init__(self, hdr: np.ndarray) -> None:
        self.rows, self.width = hdr.shape
        self.flat = hdr.reshape(-1)
        self.last = self.flat.size - 8  # last position with 8 bytes after it
        # One big-endian uint64 starting at every byte: an overlapping view, so a read is one gather.
        self.words = np.ndarray(shape=(max(self.last + 1, 0),), dtype=">u8", buffer=self.flat, strides=(1,))

    def u8(self, rows: np.ndarray, col: np.ndarray | int) -> np.ndarray:
        return np.take(self.flat, rows * self.width + col, mode="clip").astype(np.int64)

    def word(self, rows: np.ndarray, col: np.ndarray | int) -> np.ndarray:
        """The 8 bytes at each position as a big-endian uint64 (bytes past the matrix read as 0)."""
        column = self._column(rows, col)
        if column is not None:
            return column
        pos = np.broadcast_to(rows * self.width + col, rows.shape)
        if self.last < 0:
            return np.zeros(rows.size, dtype=np.uint64)
        out = self.words[np.minimum(pos, self.last)].astype(np.uint64)
        past = pos > self.last  # the last row's final bytes (zero-padded), or garbage columns (0)
        if past.any():
            out[past] = 0
            for i in np.flatnonzero(past & (pos < self.flat.size)):  # at most 7 positions
                tail = self.flat[pos[i]:pos[i] + 8]
                out[i] = int.from_bytes(tail.tobytes().ljust(8, b"\0"), "big")
        return out

    def _column(self, rows: np.ndarray, col: np.ndarray | int) -> np.ndarray | None:
        """Fast path: the same column in every row is a strided slice, no gather (the usual case:
        one link type and one IP header length put every TCP field at the same column)."""
        col = np.asarray(col)
        if rows.size == 0 or (col.ndim and col.min() != col.max()):
            return None
        c = int(col.flat[0])
        if not 0 <= c <= self.width - 8:
            return None
        column = self.words[c::self.width]
        if rows.size == self.rows and rows[0] == 0 and (np.diff(rows) == 1).all():  # every row
            return column.astype(np.uint64)
        if 4 * rows.size >= self.rows:  # converting the whole column, then a native gather, is faster
            return column.astype(np.uint64)[rows]
        return column[rows].astype(np.uint64)

    def be(self, rows: np.ndarray, col: np.ndarray | int, nbytes: int) -> np.ndarray:
        """Big-endian unsigned integers of `nbytes` (2, 4 or 8); int64, or uint64 for 8 bytes."""
        values = self.word(rows, col)
        if nbytes == 8:
            return values
        return (values >> np.uint64(64 - 8 * nbytes)).astype(np.int64)


def _bits(word: np.ndarray, byte: int, nbytes: int) -> np.ndarray:
    """Bytes [byte, byte + nbytes) of big-endian 8-byte words, as int64 (nbytes <= 4)."""
    shifted = word >> np.uint64(64 - 8 * (byte + nbytes))
    return (shifted & np.uint64((1 << (8 * nbytes)) - 1)).view(np.int64)  # < 2^32: same bits


# ---------------------------------------------------------------------------------------- link layer

LinkDecoder = Callable[[_Rows, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _by_ethertype(ethertype: np.ndarray) -> np.ndarray:
    return np.select([ethertype == _ETH_IPV4, ethertype == _ETH_IPV6], [4, 6], 0)


def _ethernet(r: _Rows, rows: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    l3 = np.full(rows.size, 14, dtype=np.int64)
    ethertype = r.be(rows, 12, 2)
    for _ in range(_MAX_VLAN_TAGS):  # 802.1Q / 802.1ad tags: 4 bytes each, inner ethertype last
        tagged = np.isin(ethertype, _VLAN_TPIDS) & (avail >= l3 + 4)
        if not tagged.any():
            break
        ethertype = np.where(tagged, r.be(rows, l3 + 2, 2), ethertype)
        l3 += 4 * tagged
    return l3, np.where(avail >= l3, _by_ethertype(ethertype), 0)


def _fixed_ethertype(header_bytes: int, ethertype_at: int) -> LinkDecoder:
    def decode(r: _Rows, rows: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        version = np.where(avail >= header_bytes, _by_ethertype(r.be(rows, ethertype_at, 2)), 0)
        return np.full(rows.size, header_bytes, dtype=np.int64), version
    return decode


def _raw_ip(r: _Rows, rows: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nibble = r.u8(rows, 0) >> 4
    version = np.where((avail >= 1) & np.isin(nibble, (4, 6)), nibble, 0)
    return np.zeros(rows.size, dtype=np.int64), version


def _fixed_ip(version: int) -> LinkDecoder:
    def decode(r: _Rows, rows: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(rows.size, dtype=np.int64), np.full(rows.size, version)
    return decode


def _by_family(family: np.ndarray, avail: np.ndarray) -> np.ndarray:
    version = np.select([family == _AF_INET, np.isin(family, _AF_INET6)], [4, 6], 0)
    return np.where(avail >= 4, version, 0)


def _bsd_null(r: _Rows, rows: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # The family is in the capturing host's byte order: a value with high bytes set was swapped.
    family = r.be(rows, 0, 4)
    swapped = ((family & 0xFF) << 24) | ((family & 0xFF00) << 8) | ((family >> 8) & 0xFF00) | (family >> 24)
    family = np.where(family & 0xFFFF0000 != 0, swapped, family)
    return np.full(rows.size, 4, dtype=np.int64), _by_family(family, avail)


def _bsd_loop(r: _Rows, rows: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.full(rows.size, 4, dtype=np.int64), _by_family(r.be(rows, 0, 4), avail)


def _ppp(r: _Rows, rows: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Optional HDLC address/control bytes ff 03, then a 2-byte protocol, or 1 byte when compressed
    # (protocol field compression: an odd first byte).
    col = np.where((r.u8(rows, 0) == 0xFF) & (r.u8(rows, 1) == 0x03), 2, 0)
    first = r.u8(rows, col)
    compressed = (first & 1) == 1
    protocol = np.where(compressed, first, r.be(rows, col, 2))
    l3 = col + np.where(compressed, 1, 2)
    version = np.select([protocol == 0x21, protocol == 0x57], [4, 6], 0)
    return l3, np.where(avail >= l3, version, 0)


_LINK_DECODERS: dict[int, LinkDecoder] = {
    0: _bsd_null,
    1: _ethernet,
    9: _ppp,
    12: _raw_ip,      # DLT_RAW as Linux numbers it
    14: _raw_ip,      # DLT_RAW on some BSDs
    50: _ppp,         # PPP in HDLC-like framing
    101: _raw_ip,
    108: _bsd_loop,   # OpenBSD loopback: family always big-endian
    113: _fixed_ethertype(16, 14),   # Linux cooked SLL: protocol at 14
    228: _fixed_ip(4),
    229: _fixed_ip(6),
    276: _fixed_ethertype(20, 0),    # Linux cooked SLL2: protocol first
}
SUPPORTED_LINK_TYPES = frozenset(_LINK_DECODERS)


def _link_layer(r: _Rows, link_type: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offset of the IP header and IP version (0 = not IP) for every row."""
    l3 = np.zeros(link_type.size, dtype=np.int64)
    version = np.zeros(link_type.size, dtype=np.int64)
    codes = [link_type[0]] if link_type.size and link_type.min() == link_type.max() else np.unique(link_type)
    for code in codes:
        decoder = _LINK_DECODERS.get(int(code))
        if decoder is None:
            continue
        rows = np.arange(link_type.size) if len(codes) == 1 else np.flatnonzero(link_type == code)
        l3[rows], version[rows] = decoder(r, rows, avail[rows])
    return l3, version


# ------------------------------------------------------------------------------------------ IP layer


@dataclass
class _IpResult:
    status: np.ndarray      # int8 per row of the group
    l4: np.ndarray          # TCP header column
    ip_payload: np.ndarray  # bytes after the IP header(s), from the IP length fields
    src: tuple[np.ndarray, np.ndarray]  # (high, low) 64-bit halves; IPv4 in the low half
    dst: tuple[np.ndarray, np.ndarray]


def _ipv4(r: _Rows, rows: np.ndarray, l3: np.ndarray, avail: np.ndarray,
          frame_len: np.ndarray) -> _IpResult:
    head = r.word(rows, l3)         # version/IHL, TOS, total length, id, flags/fragment offset
    mid = r.word(rows, l3 + 8)      # TTL, protocol, checksum, source address
    addrs = r.word(rows, l3 + 12)   # source, destination
    b0 = _bits(head, 0, 1)
    ihl = (b0 & 0x0F) * 4
    protocol = _bits(mid, 1, 1)
    frag_offset = _bits(head, 6, 2) & 0x1FFF
    status = np.select(
        [(b0 >> 4) != 4, avail < l3 + 10, protocol != _IPPROTO_TCP, avail < l3 + 20, ihl < 20,
         frag_offset != 0, avail < l3 + ihl],
        [NOT_TCP, NOT_TCP, NOT_TCP, TRUNCATED, MALFORMED, FRAGMENT, TRUNCATED], TCP).astype(np.int8)
    total = _bits(head, 2, 2)
    # Total length 0 = segmentation offload on the capturing host: the frame itself is the packet.
    total = np.where(total == 0, frame_len - l3, total)
    zero = np.zeros(rows.size, dtype=np.uint64)
    src = addrs >> np.uint64(32)
    dst = addrs & np.uint64(0xFFFFFFFF)
    return _IpResult(status, l3 + ihl, total - ihl, (zero, src), (zero, dst))


def _ipv6(r: _Rows, rows: np.ndarray, l3: np.ndarray, avail: np.ndarray,
          frame_len: np.ndarray) -> _IpResult:
    next_header = r.u8(rows, l3 + 6)
    status = np.select(
        [(r.u8(rows, l3) >> 4) != 6, avail < l3 + 7,
         (avail < l3 + 40) & (next_header == _IPPROTO_TCP), avail < l3 + 40],
        [NOT_TCP, NOT_TCP, TRUNCATED, NOT_TCP], TCP).astype(np.int8)
    l4 = l3 + 40
    next_header, l4 = _ipv6_extensions(r, rows, next_header, l4, avail, status)
    status[(status == TCP) & (next_header != _IPPROTO_TCP)] = NOT_TCP
    payload = r.be(rows, l3 + 4, 2)
    payload = np.where(payload == 0, frame_len - l3 - 40, payload)  # jumbogram / offload
    src = (r.be(rows, l3 + 8, 8), r.be(rows, l3 + 16, 8))
    dst = (r.be(rows, l3 + 24, 8), r.be(rows, l3 + 32, 8))
    return _IpResult(status, l4, payload - (l4 - l3 - 40), src, dst)


def _ipv6_extensions(r: _Rows, rows: np.ndarray, next_header: np.ndarray, l4: np.ndarray,
                     avail: np.ndarray, status: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step over extension headers of all rows in lock step; updates `status` in place."""
    next_header, l4 = next_header.copy(), l4.copy()
    for _ in range(_MAX_IPV6_EXT_HEADERS):
        ext = np.flatnonzero((status == TCP) & np.isin(next_header, _IPV6_EXT))
        if ext.size == 0:
            return next_header, l4
        cut = avail[ext] < l4[ext] + 8
        status[ext[cut]] = TRUNCATED
        ext = ext[~cut]
        rr, col, kind = rows[ext], l4[ext], next_header[ext]
        following, units = r.u8(rr, col), r.u8(rr, col + 1)
        is_frag = kind == _IPV6_FRAGMENT
        size = np.where(is_frag, 8, np.where(kind == _IPV6_AH, (units + 2) * 4, (units + 1) * 8))
        later_fragment = is_frag & ((r.be(rr, col + 2, 2) >> 3) != 0)
        status[ext[later_fragment]] = np.where(following[later_fragment] == _IPPROTO_TCP, FRAGMENT, NOT_TCP)
        next_header[ext], l4[ext] = following, col + size
    status[(status == TCP) & np.isin(next_header, _IPV6_EXT)] = NOT_TCP  # absurdly long chain
    return next_header, l4


# ----------------------------------------------------------------------------------------- TCP layer


def _tcp_status(r: _Rows, rows: np.ndarray, l4: np.ndarray, avail: np.ndarray,
                ip_payload: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Outcome, header length and the two 8-byte halves of the fixed header for each row."""
    ports_seq = r.word(rows, l4)   # source port, destination port, sequence number
    ack_rest = r.word(rows, l4 + 8)  # acknowledgement, data offset/flags, window
    header_bytes = (_bits(ack_rest, 4, 1) >> 4) * 4
    status = np.select(
        [avail < l4 + 20, header_bytes < 20, avail < l4 + header_bytes, ip_payload < header_bytes],
        [TRUNCATED, MALFORMED, TRUNCATED, MALFORMED], TCP).astype(np.int8)
    return status, header_bytes, ports_seq, ack_rest


def _tcp_fixed(ports_seq: np.ndarray, ack_rest: np.ndarray) -> dict[str, ColumnData]:
    return {
        "sport": (_bits(ports_seq, 0, 2), None),
        "dport": (_bits(ports_seq, 2, 2), None),
        "seq": (_bits(ports_seq, 4, 4), None),
        "ack": (_bits(ack_rest, 0, 4), None),
        "flags": (_bits(ack_rest, 4, 2) & 0x0FFF, None),  # low 4 bits of the offset byte + flags
        "win": (_bits(ack_rest, 6, 2), None),
    }


# -------------------------------------------------------------------------------------- TCP options


@dataclass
class _Options:
    """Every well-formed option instance, ordered by position within its packet (then by packet)."""

    pkt: np.ndarray   # index into the TCP rows
    kind: np.ndarray
    col: np.ndarray   # column of the option's kind byte
    length: np.ndarray
    word: np.ndarray  # the option's first 8 bytes (big-endian uint64; bytes past it are noise)
    mptcp_cut: np.ndarray  # bool per TCP row: an MPTCP option ran past the header / had length < 2


def _walk_options(r: _Rows, rows: np.ndarray, start: np.ndarray, end: np.ndarray) -> _Options:
    found: list[tuple[np.ndarray, ...]] = []
    start = _nop_nop_timestamps(r, rows, start, end, found)
    live = np.flatnonzero(end > start)
    pos, lim = start[live], end[live]
    mptcp_cut = np.zeros(rows.size, dtype=bool)
    while live.size:  # each step consumes >= 1 byte of at most 40: bounded
        word = r.word(rows[live], pos)
        kind, length = _bits(word, 0, 1), _bits(word, 1, 1)
        nop = kind == 1
        has_length = kind > 1
        fits = has_length & (pos + 2 <= lim) & (length >= 2) & (pos + length <= lim)
        mptcp_cut[live[has_length & ~fits & (kind == _MPTCP_KIND)]] = True
        found.append((live[fits], kind[fits], pos[fits], length[fits], word[fits]))
        pos = pos + np.where(nop, 1, length)
        keep = (nop | fits) & (pos < lim)  # kind 0 (end of list) and broken lengths stop the walk
        live, pos, lim = live[keep], pos[keep], lim[keep]
    dtypes = (np.int64, np.int64, np.int64, np.int64, np.uint64)
    parts = [np.concatenate([f[i] for f in found]) if found else np.zeros(0, dt)
             for i, dt in enumerate(dtypes)]
    # five arrays, one per field before mptcp_cut
    return _Options(*cast("tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]", parts),
                    mptcp_cut=mptcp_cut)


def _nop_nop_timestamps(r: _Rows, rows: np.ndarray, start: np.ndarray, end: np.ndarray,
                        found: list[tuple[np.ndarray, ...]]) -> np.ndarray:
    """Shortcut for the layout nearly every segment of a Linux host starts with (NOP, NOP,
    timestamps): take it in one step and return where each packet's walk continues."""
    lead = r.word(rows, start) >> np.uint64(32)
    ts = np.flatnonzero((lead == 0x0101080A) & (start + 12 <= end))
    if ts.size == 0:
        return start
    col = start[ts] + 2
    stamps = r.word(rows[ts], col)
    word = (np.uint64(0x080A) << np.uint64(48)) | (stamps >> np.uint64(16))
    found.append((ts, np.full(ts.size, 8), col, np.full(ts.size, 10), word))
    start = start.copy()
    start[ts] += 12
    return start


def _winners(n: int, pkt: np.ndarray, rank: np.ndarray | None = None) -> np.ndarray | None:
    """Mask of the candidates that come first in their packet (None: all of them). `rank` orders
    candidates by position in the packet (default: array order). A scatter-minimum, no sort."""
    if pkt.size < 2 or (np.diff(pkt) > 0).all():  # one candidate per packet (the usual case)
        return None
    rank = np.arange(pkt.size) if rank is None else rank
    best = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, pkt, rank)
    return rank == best[pkt]


def _scatter(n: int, pkt: np.ndarray, win: np.ndarray | None, values: np.ndarray,
             dtype: type) -> ColumnData:
    """Per-packet column from the winning candidates; packets without one are invalid (null)."""
    if win is not None:
        pkt, values = pkt[win], values[win]
    if pkt.size == n and (n == 0 or (pkt[0] == 0 and (np.diff(pkt) == 1).all())):
        return values.astype(dtype), None  # every packet has exactly one, in order: no scatter
    out: np.ndarray = np.zeros(n, dtype=dtype)
    has = np.zeros(n, dtype=bool)
    out[pkt] = values
    has[pkt] = True
    return out, has


def _tcp_options(r: _Rows, rows: np.ndarray, opts: _Options) -> dict[str, ColumnData]:
    n = rows.size
    cols: dict[str, ColumnData] = {}

    def pick(kind: int, ok_length: np.ndarray | bool = True
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        sel = np.flatnonzero((opts.kind == kind) & ok_length)
        pkt = opts.pkt[sel]
        return sel, pkt, _winners(n, pkt)

    sel, pkt, win = pick(2, opts.length == 4)
    cols["opt_mss"] = _scatter(n, pkt, win, _bits(opts.word[sel], 2, 2), np.uint16)
    sel, pkt, win = pick(3, opts.length == 3)
    cols["opt_wscale"] = _scatter(n, pkt, win, _bits(opts.word[sel], 2, 1), np.uint8)
    sel, pkt, win = pick(4)
    sack_perm = np.zeros(n, dtype=bool)
    sack_perm[pkt] = True
    cols["opt_sack_perm"] = (sack_perm, None)
    sel, pkt, win = pick(8, opts.length == 10)
    stamps = r.word(rows[pkt], opts.col[sel] + 2)
    cols["opt_ts_val"] = _scatter(n, pkt, win, stamps >> np.uint64(32), np.uint32)
    cols["opt_ts_ecr"] = _scatter(n, pkt, win, stamps & np.uint64(0xFFFFFFFF), np.uint32)
    sel, pkt, win = pick(5, (opts.length >= 10) & ((opts.length - 2) % 8 == 0))
    cols["opt_sack_blocks"] = (_scatter(n, pkt, win, (opts.length[sel] - 2) // 8, np.uint8)[0], None)
    edges = r.word(rows[pkt], opts.col[sel] + 2)
    cols["opt_sack_le"] = _scatter(n, pkt, win, edges >> np.uint64(32), np.uint32)
    cols["opt_sack_re"] = _scatter(n, pkt, win, edges & np.uint64(0xFFFFFFFF), np.uint32)
    return cols


# ----------------------------------------------------------------------------------- MPTCP options


@dataclass
class _Mp:
    """The MPTCP option instances of a block, with their common leading fields."""

    pkt: np.ndarray
    rows: np.ndarray
    col: np.ndarray
    length: np.ndarray
    subtype: np.ndarray  # -1 when the option is too short to have one
    nibble: np.ndarray   # low 4 bits after the subtype (version / flags / IP version)
    b3: np.ndarray       # the fourth octet (flags, address id, ...)
    tail: np.ndarray     # octets 4..7 as a 32-bit number


def _mptcp_instances(rows: np.ndarray, opts: _Options) -> _Mp:
    sel = opts.kind == _MPTCP_KIND
    pkt, col, length, word = opts.pkt[sel], opts.col[sel], opts.length[sel], opts.word[sel]
    b2 = _bits(word, 2, 1)
    subtype = np.where(length >= 3, b2 >> 4, -1)
    return _Mp(pkt, rows[pkt], col, length, subtype, b2 & 0x0F, _bits(word, 3, 1), _bits(word, 4, 4))


def _dss_layout(b3: np.ndarray) -> tuple[np.ndarray, ...]:
    """From DSS flags: data-ACK bytes, DSN bytes (0 = absent) and the length without checksum."""
    low = b3 & 0x0F
    ack_bytes, dsn_bytes = _DSS_ACK_BYTES[low], _DSS_DSN_BYTES[low]
    return ack_bytes, dsn_bytes, _DSS_LENGTH[low]


# DSS flags (low 4 bits: m M a A) -> data-ACK bytes, DSN bytes, option length without checksum.
_DSS_ACK_BYTES = np.array([(f & 1) * (8 if f & 2 else 4) for f in range(16)])
_DSS_DSN_BYTES = np.array([(f >> 2 & 1) * (8 if f & 8 else 4) for f in range(16)])
_DSS_LENGTH = 4 + _DSS_ACK_BYTES + np.where(_DSS_DSN_BYTES > 0, _DSS_DSN_BYTES + 6, 0)


def _mptcp_length_ok(mp: _Mp) -> np.ndarray:
    """Whether each option's length fits its subtype (and, for DSS, its flags)."""
    ok = np.ones(mp.pkt.size, dtype=bool)  # unknown subtypes (e.g. 0xf experimental) are taken as they are
    ok[mp.subtype == -1] = False
    for sub, check in _LENGTH_CHECKS.items():
        i = np.flatnonzero(mp.subtype == sub)
        if i.size:
            ok[i] = check(mp.length[i], mp.nibble[i], mp.b3[i])
    return ok


def _dss_length_ok(ln: np.ndarray, _nibble: np.ndarray, flags: np.ndarray) -> np.ndarray:
    _, dsn_bytes, dss_len = _dss_layout(flags)
    return (ln == dss_len) | ((dsn_bytes > 0) & (ln == dss_len + 2))  # +2: DSS checksum


def _add_addr_length_ok(ln: np.ndarray, nibble: np.ndarray, _b3: np.ndarray) -> np.ndarray:
    # RFC 6824 ADD_ADDR carries the IP version in the nibble (and no HMAC); RFC 8684 has flags there.
    return np.select([nibble == 4, nibble == 6],
                     [np.isin(ln, (8, 10)), np.isin(ln, (20, 22))],
                     np.isin(ln, (8, 10, 16, 18, 20, 22, 28, 30)))


_LengthCheck = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
_LENGTH_CHECKS: dict[int, _LengthCheck] = {
    0: lambda ln, nib, _: np.isin(ln, (12, 20)) | ((nib >= 1) & np.isin(ln, (4, 22, 24))),  # MP_CAPABLE
    1: lambda ln, _n, _b: np.isin(ln, (12, 16, 24)),  # MP_JOIN: SYN, SYN/ACK, ACK
    2: _dss_length_ok,
    3: _add_addr_length_ok,
    4: lambda ln, _n, _b: ln >= 4,               # REMOVE_ADDR: one or more address ids
    5: lambda ln, _n, _b: np.isin(ln, (3, 4)),  # MP_PRIO (v1 / v0 with address id)
    6: lambda ln, _n, _b: ln == 12,              # MP_FAIL
    7: lambda ln, _n, _b: ln == 12,              # MP_FASTCLOSE
    8: lambda ln, _n, _b: ln == 4,               # MP_TCPRST
}


class _Candidates:
    """Per output column, candidate values from option instances of one or more subtypes; the
    column gets its packet's first candidate. Columns fed from the same instances share the work."""

    def __init__(self, n: int, pkt: np.ndarray) -> None:
        self.n, self.pkt = n, pkt
        self.items: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._wins: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray | None]] = {}

    def add(self, inst: np.ndarray, **values: np.ndarray) -> None:
        for name, v in values.items():
            self.items.setdefault(name, []).append((inst, v))

    def column(self, name: str, dtype: type) -> ColumnData:
        parts = self.items.get(name, [])
        key = tuple(id(p[0]) for p in parts)
        if key not in self._wins:
            inst = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
            pkt = self.pkt[inst]
            # Instance numbers follow the position in the packet, across subtypes: they rank.
            self._wins[key] = (pkt, _winners(self.n, pkt, inst))
        pkt, win = self._wins[key]
        values = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype)
        return _scatter(self.n, pkt, win, values.astype(dtype), dtype)


def _mp_capable(r: _Rows, mp: _Mp, ok: np.ndarray, c: _Candidates) -> None:
    i = np.flatnonzero(ok & (mp.subtype == 0))
    rr, col, ln = mp.rows[i], mp.col[i], mp.length[i]
    c.add(i, mp_version=mp.nibble[i], mp_capable_flags=mp.b3[i])
    k = np.flatnonzero(ln >= 12)
    c.add(i[k], mp_sender_key=r.word(rr[k], col[k] + 4))
    k = np.flatnonzero(ln >= 20)
    c.add(i[k], mp_receiver_key=r.word(rr[k], col[k] + 12))
    # An MP_CAPABLE carrying data (v1 third ACK, length 22/24) also has a data-level length and maybe
    # a checksum; they are not put in the dss_* columns, which come only from a DSS option (the
    # analysis places such data at relative DSN 0 itself).


def _mp_join(r: _Rows, mp: _Mp, ok: np.ndarray, c: _Candidates) -> None:
    i = np.flatnonzero(ok & (mp.subtype == 1))
    ln = mp.length[i]
    k = np.flatnonzero(ln != 24)  # the third-ACK form has reserved bits where the others have B / id
    c.add(i[k], mp_addr_id=mp.b3[i][k], mp_backup=(mp.nibble[i][k] & 1) == 1)
    syn = ln == 12
    c.add(i[syn], mp_join_token=mp.tail[i][syn])
    # SYN: token, then nonce at 8; SYN/ACK: 8-byte truncated HMAC, then nonce at 12.
    k = np.flatnonzero(syn | (ln == 16))
    nonce_col = mp.col[i][k] + np.where(syn[k], 8, 12)
    c.add(i[k], mp_join_nonce=r.be(mp.rows[i][k], nonce_col, 4))


def _dss(r: _Rows, mp: _Mp, ok: np.ndarray, c: _Candidates) -> None:
    i = np.flatnonzero(ok & (mp.subtype == 2))
    rr, col, ln, flags = mp.rows[i], mp.col[i], mp.length[i], mp.b3[i]
    ack_bytes, dsn_bytes, dss_len = _dss_layout(flags)
    c.add(i, dss_flags=flags, dss_data_fin=(flags & 0x10) != 0)
    a = np.flatnonzero(ack_bytes > 0)
    ack8 = ack_bytes[a] == 8
    ack_word = r.word(rr[a], col[a] + 4)
    c.add(i[a], dss_data_ack=np.where(ack8, ack_word, ack_word >> np.uint64(32)), dss_ack8=ack8)
    m = np.flatnonzero(dsn_bytes > 0)
    rm, dsn_col, dsn8 = rr[m], col[m] + 4 + ack_bytes[m], dsn_bytes[m] == 8
    dsn_word = r.word(rm, dsn_col)
    mapping = r.word(rm, dsn_col + dsn_bytes[m])  # SSN, data-level length, checksum
    c.add(i[m], dss_dsn=np.where(dsn8, dsn_word, dsn_word >> np.uint64(32)), dss_dsn8=dsn8,
          dss_ssn=_bits(mapping, 0, 4), dss_dll=_bits(mapping, 4, 2))
    csum = ln[m] == dss_len[m] + 2
    c.add(i[m][csum], dss_checksum=_bits(mapping[csum], 6, 2))


def _add_addr(r: _Rows, mp: _Mp, ok: np.ndarray, c: _Candidates) -> None:
    i = np.flatnonzero(ok & (mp.subtype == 3))
    rr, col, ln = mp.rows[i], mp.col[i], mp.length[i]
    is6 = ln >= 20
    hi = np.where(is6, r.word(rr, col + 4), np.uint64(0))
    lo = np.where(is6, r.word(rr, col + 12), mp.tail[i].astype(np.uint64))
    c.add(i, mp_addr_id=mp.b3[i], add_addr_v6=is6, add_addr_hi=hi, add_addr_lo=lo)
    port = np.flatnonzero(np.isin(ln, (10, 18, 22, 30)))
    port_col = np.where(is6[port], col[port] + 20, col[port] + 8)
    c.add(i[port], add_addr_port=r.be(rr[port], port_col, 2))


def _mp_prio(mp: _Mp, ok: np.ndarray, c: _Candidates) -> None:
    i = np.flatnonzero(ok & (mp.subtype == 5))
    c.add(i, mp_backup=(mp.nibble[i] & 1) == 1)
    v0 = mp.length[i] == 4  # RFC 6824 MP_PRIO may name an address id
    c.add(i[v0], mp_addr_id=mp.b3[i][v0])
_MP_COLUMNS = {
    "mp_version": np.uint8, "mp_capable_flags": np.uint8, "mp_sender_key": np.uint64,
    "mp_receiver_key": np.uint64, "mp_join_token": np.uint32, "mp_join_nonce": np.uint32,
    "mp_addr_id": np.uint8, "mp_backup": bool, "dss_flags": np.uint8, "dss_dsn": np.uint64,
    "dss_dsn8": bool, "dss_ssn": np.uint32, "dss_dll": np.uint16, "dss_checksum": np.uint16,
    "dss_data_ack": np.uint64, "dss_ack8": bool, "dss_data_fin": bool, "add_addr_port": np.uint16,
    "add_addr_v6": bool, "add_addr_hi": np.uint64, "add_addr_lo": np.uint64,
}


def _mptcp_options(r: _Rows, rows: np.ndarray, opts: _Options) -> dict[str, ColumnData]:
    n = rows.size
    mp = _mptcp_instances(rows, opts)
    ok = _mptcp_length_ok(mp)
    subtypes = np.zeros(n, dtype=np.uint16)
    for sub in np.unique(mp.subtype[mp.subtype >= 0]):
        subtypes[mp.pkt[mp.subtype == sub]] |= np.uint16(1 << int(sub))
    malformed = opts.mptcp_cut.copy()
    malformed[mp.pkt[~ok]] = True
    c = _Candidates(n, mp.pkt)
    _mp_capable(r, mp, ok, c)
    _mp_join(r, mp, ok, c)
    _dss(r, mp, ok, c)
    _add_addr(r, mp, ok, c)
    _mp_prio(mp, ok, c)
    cols: dict[str, ColumnData] = {"mp_subtypes": (subtypes, None), "mp_malformed": (malformed, None)}
    for name, dtype in _MP_COLUMNS.items():
        cols[name] = c.column(name, dtype)
    return cols


# ------------------------------------------------------------------------------------------- driver


def decode_rows(hdr: np.ndarray, cap_len: np.ndarray, frame_len: np.ndarray,
                link_type: np.ndarray) -> Decoded:
    """Decode frames given their first `hdr.shape[1]` bytes (uint8 rows) and record lengths."""
    n, width = hdr.shape
    r = _Rows(hdr)
    avail = np.minimum(cap_len, width)
    status = np.full(n, NOT_TCP, dtype=np.int8)
    l3, version = _link_layer(r, link_type, avail)
    l4 = np.zeros(n, dtype=np.int64)
    ip_payload = np.zeros(n, dtype=np.int64)
    ip_version = version.astype(np.uint8)
    addr = [np.zeros(n, dtype=np.uint64) for _ in range(4)]  # src hi, src lo, dst hi, dst lo
    for v, decode_ip in ((4, _ipv4), (6, _ipv6)):
        rows = np.flatnonzero(version == v)
        if rows.size:
            res = decode_ip(r, rows, l3[rows], avail[rows], frame_len[rows])
            status[rows], l4[rows], ip_payload[rows] = res.status, res.l4, res.ip_payload
            for a, values in zip(addr, (*res.src, *res.dst), strict=True):
                a[rows] = values
    rows = np.flatnonzero(status == TCP)
    tcp_status, header_bytes, ports_seq, ack_rest = _tcp_status(r, rows, l4[rows], avail[rows],
                                                                ip_payload[rows])
    status[rows] = tcp_status
    keep = np.flatnonzero(tcp_status == TCP)
    rows, header_bytes = rows[keep], header_bytes[keep]
    l4 = l4[rows]
    payload = ip_payload[rows] - header_bytes
    cols = _tcp_fixed(ports_seq[keep], ack_rest[keep])
    cols.update({"ip_version": (ip_version[rows], None), "payload_len": (payload, None),
                 "src_hi": (addr[0][rows], None), "src_lo": (addr[1][rows], None),
                 "dst_hi": (addr[2][rows], None), "dst_lo": (addr[3][rows], None)})
    opts = _walk_options(r, rows, l4 + 20, l4 + header_bytes)
    cols.update(_tcp_options(r, rows, opts))
    cols.update(_mptcp_options(r, rows, opts))
    payload_cut = cap_len[rows] < l4 + header_bytes + payload
    return Decoded(status=status, tcp_rows=rows, columns=cols, payload_cut=payload_cut)
