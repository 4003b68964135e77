"""Capture containers: pcap (libpcap) and pcapng files, reduced to per-frame arrays.

Models the two on-disk formats as a sequence of frame records. For every frame it yields where its
captured bytes start in the file, how many were captured, its original length, its timestamp in ns
since the Unix epoch and its link type. Nothing above the link layer is looked at here.

Only the walk over record/block headers is a Python loop (each record's length decides where the next
one starts, so that walk is inherently sequential); every per-frame field is then read for all frames
at once with numpy.

A damaged file is read up to the last complete, plausible record; where and why reading stopped is
returned (`stop_reason`) so the caller can report it. If nothing valid precedes the damage, an
`InputError` naming the file is raised instead.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from workbench.errors import InputError

if TYPE_CHECKING:
    # numpy's stubs give ndarray __buffer__ only for Python >= 3.12 (mypy checks as 3.11)
    from _typeshed import ReadableBuffer

__all__ = ["MAX_RECORD_BYTES", "Frames", "rows_at", "scan_capture"]

# Largest plausible captured length of one frame (tcpdump's and Wireshark's maximum snaplen).
MAX_RECORD_BYTES = 256 * 1024

_PCAP_MAGICS = {  # magic as read little-endian -> (struct byte order, ns per timestamp fraction unit)
    0xA1B2C3D4: ("<", 1000),
    0xA1B23C4D: ("<", 1),
    0xD4C3B2A1: (">", 1000),
    0x4D3CB2A1: (">", 1),
}
_PCAP_HEADER_BYTES = 24
_PCAP_RECORD_HEADER_BYTES = 16

_SHB = 0x0A0D0D0A
_IDB = 0x00000001
_PB = 0x00000002   # obsolete Packet Block
_SPB = 0x00000003
_EPB = 0x00000006
_BYTE_ORDER_MAGIC = 0x1A2B3C4D
_IDB_OPT_TSRESOL = 9
_IDB_OPT_TSOFFSET = 14
# Block body up to the packet data: EPB and PB both have 20 bytes after type+length before the data.
_EPB_DATA_OFFSET = 28
_SPB_DATA_OFFSET = 12
_BEYOND_END = 2  # packet-block problem code: the block runs past the end of the file
# Non-packet blocks larger than this are not believed (name resolution blocks are the largest real ones).
_MAX_OTHER_BLOCK_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Frames:
    """Per-frame arrays for the complete records of a capture, in file order."""

    data_off: np.ndarray   # int64, byte offset of the frame's first captured byte in the file
    cap_len: np.ndarray    # int64, captured bytes
    frame_len: np.ndarray  # int64, original length on the wire
    t_ns: np.ndarray       # int64, ns since the Unix epoch
    link_type: np.ndarray  # int64, LINKTYPE_* number of the frame's interface
    stop_reason: str | None  # why reading stopped before the end of the file, None if it did not
    records_dropped: int     # records not read because of that (1 when reading stopped early, else 0)


@dataclass
class _Interface:
    link_type: int
    snaplen: int
    tsresol: int = 6        # if_tsresol octet: bit 7 set = power of 2, else power of 10
    tsoffset_s: int = 0     # if_tsoffset, seconds added to every timestamp


def scan_capture(buf: np.ndarray, source: str | Path) -> Frames:
    """Find every frame record in a whole capture file held in `buf` (uint8)."""
    if buf.size == 0:
        raise InputError(source, "empty file")
    if buf.size < 4:
        raise InputError(source, "not a pcap or pcapng capture")
    magic = int(buf[:4].view("<u4")[0])
    if magic in _PCAP_MAGICS:
        return _scan_pcap(buf, source, *_PCAP_MAGICS[magic])
    if magic == _SHB:
        return _scan_pcapng(buf, source)
    raise InputError(source, "not a pcap or pcapng capture")


def _stop(source: str | Path, n_valid: int, problem: str | None) -> tuple[str | None, int]:
    """Turn a reason to stop into (stop_reason, records_dropped), or raise if nothing was valid."""
    if problem is None:
        return None, 0
    if n_valid == 0:
        raise InputError(source, problem)
    return problem, 1


# ---------------------------------------------------------------------------------------------- pcap


def _scan_pcap(buf: np.ndarray, source: str | Path, order: str, frac_ns: int) -> Frames:
    size = buf.size
    if size < _PCAP_HEADER_BYTES:
        raise InputError(source, "truncated pcap file header")
    # upper bits: FCS info
    link_type = struct.unpack_from(order + "I", cast("ReadableBuffer", buf), 20)[0] & 0xFFFF
    rec_off = _pcap_record_chain(memoryview(cast("ReadableBuffer", buf)), order)
    rec_off = rec_off[rec_off < size]  # the chain's last step lands on the end of a complete file
    complete = rec_off <= size - _PCAP_RECORD_HEADER_BYTES
    heads = np.zeros((rec_off.size, 4), dtype=np.int64)  # ts_sec, ts_frac, incl_len, orig_len
    heads[complete] = rows_at(buf, rec_off[complete], 16).view(order + "u4").astype(np.int64)
    incl_len = heads[:, 2]
    bad = ~complete | (incl_len > MAX_RECORD_BYTES) | (rec_off + 16 + incl_len > size)
    n = int(np.argmax(bad)) if bad.any() else rec_off.size
    problem = _pcap_problem(n, bool(complete[n]), int(incl_len[n]), size - int(rec_off[n]) - 16) \
        if n < rec_off.size else None
    stop_reason, dropped = _stop(source, n, problem)
    rec_off, heads = rec_off[:n], heads[:n]
    t_ns = heads[:, 0] * 1_000_000_000 + heads[:, 1] * frac_ns
    return Frames(data_off=rec_off + _PCAP_RECORD_HEADER_BYTES, cap_len=heads[:, 2].copy(),
                  frame_len=heads[:, 3].copy(), t_ns=t_ns,
                  link_type=np.full(n, link_type, dtype=np.int64),
                  stop_reason=stop_reason, records_dropped=dropped)


def _pcap_problem(index: int, header_complete: bool, incl_len: int, bytes_left: int) -> str:
    frame_no = index + 1
    if not header_complete:
        return f"truncated: record {frame_no} header cut at end of file"
    if incl_len > MAX_RECORD_BYTES:
        return f"record {frame_no} claims {incl_len} captured bytes (more than {MAX_RECORD_BYTES})"
    return f"truncated: record {frame_no} needs {incl_len} bytes, file ends after {bytes_left}"


def _pcap_record_chain(mv: memoryview, order: str) -> np.ndarray:
    """Offsets reached by following record lengths from the file header; the last one may be the
    end of the file or a damaged record (the caller validates them all at once).

    This walk is the one sequential part of reading a pcap (each record's length says where the
    next one starts), so it is kept to a few bytecodes per record: native-order files index four
    uint32 views of the file (one per byte alignment) instead of calling struct.
    """
    size = len(mv)
    offsets: list[int] = []
    append = offsets.append
    pos = _PCAP_HEADER_BYTES
    if order == ("<" if sys.byteorder == "little" else ">"):
        words = [mv[k:k + (size - k) // 4 * 4].cast("I") for k in range(4)]
        try:
            while True:
                append(pos)
                pos += _PCAP_RECORD_HEADER_BYTES + words[pos & 3][(pos + 8) >> 2]
        except IndexError:  # stepped past the last complete length field
            pass
    else:
        unpack_len = struct.Struct(order + "I").unpack_from
        last = size - 12
        while pos <= last:
            append(pos)
            pos += _PCAP_RECORD_HEADER_BYTES + unpack_len(mv, pos + 8)[0]
        append(pos)
    return np.array(offsets, dtype=np.int64)


def rows_at(buf: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """The `width` bytes at each offset as rows of a (n, width) uint8 matrix; bytes past the end
    of `buf` are 0. A view of `buf` with one `width`-byte item starting at every byte makes this a
    single 1-D gather of whole items (about twice as fast as gathering from a 2-D window view)."""
    rows = np.zeros((offsets.size, width), dtype=np.uint8)
    inside = offsets <= buf.size - width
    if buf.size >= width and inside.any():
        items = np.ndarray(shape=(buf.size - width + 1,), dtype=f"V{width}", buffer=buf, strides=(1,))
        rows[inside] = items[offsets[inside]].view(np.uint8).reshape(-1, width)
    for i in np.flatnonzero(~inside):  # only the last few records of a file
        tail = buf[offsets[i]:offsets[i] + width]
        rows[i, :tail.size] = tail
    return rows


# -------------------------------------------------------------------------------------------- pcapng


@dataclass
class _Section:
    order: str
    iface_base: int                 # index of this section's first interface in the global list
    n_ifaces: int = 0
    blocks: list[int] | None = None  # offsets of packet blocks
    kinds: list[int] | None = None   # their block types


def _scan_pcapng(buf: np.ndarray, source: str | Path) -> Frames:
    mv = memoryview(cast("ReadableBuffer", buf))
    ifaces: list[_Interface] = []
    sections: list[_Section] = []
    pos, problem, n_packets = 0, None, 0
    while pos < buf.size and problem is None:
        section, pos, problem = _read_shb(mv, pos, len(ifaces))
        if section is None:
            break
        sections.append(section)
        pos, problem = _scan_section(mv, pos, section, ifaces)
        n_packets += len(section.blocks or ())
    stop_reason, dropped = _stop(source, n_packets, problem)
    parts = [_section_frames(buf, s, ifaces) for s in sections]
    frames = [np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64) for i in range(6)]
    data_off, cap_len, frame_len, t_ns, link, bad = frames
    bad_at = np.flatnonzero(bad)
    if bad_at.size:  # a packet block whose lengths or interface do not add up: keep what precedes it
        first_bad = int(bad_at[0])
        problem = (f"truncated: block for frame {first_bad + 1} runs past the end of the file"
                   if bad[first_bad] == _BEYOND_END else f"bad packet block for frame {first_bad + 1}")
        stop_reason, dropped = _stop(source, first_bad, problem)
        data_off, cap_len, frame_len, t_ns, link = (a[:first_bad] for a in frames[:5])
    return Frames(data_off=data_off, cap_len=cap_len, frame_len=frame_len, t_ns=t_ns, link_type=link,
                  stop_reason=stop_reason, records_dropped=dropped)


def _read_shb(mv: memoryview, pos: int, iface_base: int) -> tuple[_Section | None, int, str | None]:
    """Parse a Section Header Block at `pos`: its byte-order magic decides the section's byte order."""
    if len(mv) - pos < 28:
        return None, pos, "truncated: section header block cut at end of file"
    bom = struct.unpack_from("<I", mv, pos + 8)[0]
    if bom == _BYTE_ORDER_MAGIC:
        order = "<"
    elif bom == 0x4D3C2B1A:
        order = ">"
    else:
        return None, pos, "not a pcap or pcapng capture" if pos == 0 else "bad section header block"
    (length,) = struct.unpack_from(order + "I", mv, pos + 4)
    if length < 28 or length % 4 or pos + length > len(mv):
        return None, pos, "bad section header block length"
    return _Section(order=order, iface_base=iface_base, blocks=[], kinds=[]), pos + length, None


def _scan_section(mv: memoryview, pos: int, section: _Section,
                  ifaces: list[_Interface]) -> tuple[int, str | None]:
    """Walk the blocks of one section: the sequential loop of the pcapng path."""
    unpack_head = struct.Struct(section.order + "II").unpack_from
    size = len(mv)
    blocks, kinds = section.blocks, section.kinds
    assert blocks is not None and kinds is not None
    add_block, add_kind = blocks.append, kinds.append
    native = section.order == ("<" if sys.byteorder == "little" else ">")
    words = mv[:size // 4 * 4].cast("I") if native else None  # blocks are 32-bit aligned
    while pos + 12 <= size:
        if words is not None:
            pos = _epb_run(words, pos, blocks, kinds)
            if pos + 12 > size:
                break
        btype, length = unpack_head(mv, pos)
        if btype == _SHB:
            return pos, None
        if length < 12 or length % 4 or pos + length > size:
            return pos, _block_problem(len(blocks), length, pos, size)
        if btype in (_EPB, _SPB, _PB):
            add_block(pos)
            add_kind(btype)
        elif btype == _IDB:
            iface = _read_idb(mv, pos, length, section.order)
            if iface is None:
                return pos, "bad interface description block"
            ifaces.append(iface)
            section.n_ifaces += 1
        elif length > _MAX_OTHER_BLOCK_BYTES:
            return pos, f"block of {length} bytes is not believable"
        pos += length
    if pos != size:
        return pos, f"truncated: block header cut at end of file (frame {len(blocks) + 1})"
    return pos, None


def _epb_run(words: memoryview, pos: int, blocks: list[int], kinds: list[int]) -> int:
    """Follow a run of Enhanced Packet Blocks (nearly every block of a capture) with as little
    work per block as possible; returns where the run ends. A block that runs past the end of the
    file is still listed: `_section_frames` finds it and reading stops there."""
    first = len(blocks)
    append = blocks.append
    i = pos >> 2
    try:
        while words[i] == _EPB:
            length = words[i + 1]
            if length < _EPB_DATA_OFFSET + 4 or length & 3:
                break
            append(i << 2)
            i += length >> 2
    except IndexError:  # stepped past the end of the file
        pass
    kinds.extend([_EPB] * (len(blocks) - first))
    return i << 2


def _block_problem(n_blocks: int, length: int, pos: int, size: int) -> str:
    if pos + length > size and length >= 12:
        return f"truncated: block for frame {n_blocks + 1} needs {length} bytes, file ends after {size - pos}"
    return f"bad block length {length} at byte {pos}"


def _read_idb(mv: memoryview, pos: int, length: int, order: str) -> _Interface | None:
    if length < 20:
        return None
    link_type, _, snaplen = struct.unpack_from(order + "HHI", mv, pos + 8)
    iface = _Interface(link_type=link_type, snaplen=snaplen)
    opt, end = pos + 16, pos + length - 4
    while opt + 4 <= end:
        code, olen = struct.unpack_from(order + "HH", mv, opt)
        if code == 0 or opt + 4 + olen > end:
            break
        if code == _IDB_OPT_TSRESOL and olen >= 1:
            iface.tsresol = mv[opt + 4]
        elif code == _IDB_OPT_TSOFFSET and olen >= 8:
            offset_s = struct.unpack_from(order + "q", mv, opt + 4)[0]
            iface.tsoffset_s = max(-(2**33), min(offset_s, 2**33))  # keep ns inside int64
        opt += 4 + (olen + 3) // 4 * 4  # option values are padded to 32 bits
    return iface


def _section_frames(buf: np.ndarray, section: _Section,
                    ifaces: list[_Interface]) -> tuple[np.ndarray, ...]:
    """Per-frame arrays for one section's packet blocks (vectorised; byte order fixed per section)."""
    offs = np.array(section.blocks, dtype=np.int64)
    kinds = np.array(section.kinds, dtype=np.int64)
    n = offs.size
    # Every packet block has at least 12 bytes of body+trailer; gather the first 28 bytes where present.
    head = rows_at(buf, offs, _EPB_DATA_OFFSET)
    words = head.view(section.order + "u4").astype(np.int64)  # (n, 7) 32-bit words
    block_len = words[:, 1]
    is_spb = kinds == _SPB
    is_pb = kinds == _PB
    # PB: a 16-bit interface id then a 16-bit drop count; SPB: always interface 0.
    pb_if_id = words[:, 2] >> 16 if section.order == ">" else words[:, 2] & 0xFFFF
    if_id = np.where(is_pb, pb_if_id, np.where(is_spb, 0, words[:, 2]))
    ts = (words[:, 3] << 32) | words[:, 4]
    cap_len = np.where(is_spb, 0, words[:, 5])
    frame_len = np.where(is_spb, words[:, 2], words[:, 6])
    data_off = offs + np.where(is_spb, _SPB_DATA_OFFSET, _EPB_DATA_OFFSET)
    room_in_block = block_len - np.where(is_spb, _SPB_DATA_OFFSET + 4, _EPB_DATA_OFFSET + 4)
    bad = np.where(offs + block_len > buf.size, _BEYOND_END,
                   ((if_id >= section.n_ifaces) | (room_in_block < 0)).astype(np.int8))
    gid = section.iface_base + np.minimum(if_id, max(section.n_ifaces - 1, 0))
    if section.n_ifaces == 0:
        return data_off, cap_len, frame_len, np.zeros(n, np.int64), np.full(n, -1), np.maximum(bad, 1)
    snaplen = np.array([ifaces[section.iface_base].snaplen or MAX_RECORD_BYTES], dtype=np.int64)
    # SPB: captured length is implied by the block length, the original length and the snaplen.
    cap_len = np.where(is_spb, np.minimum(np.minimum(frame_len, room_in_block), snaplen), cap_len)
    bad = np.maximum(bad, (cap_len > room_in_block) | (cap_len > MAX_RECORD_BYTES))
    t_ns = np.zeros(n, dtype=np.int64)
    link = np.zeros(n, dtype=np.int64)
    for g in np.unique(gid):
        sel = gid == g
        t_ns[sel] = _ticks_to_ns(ts[sel].astype(np.uint64), ifaces[g])
        link[sel] = ifaces[g].link_type
    t_ns[is_spb] = 0  # a Simple Packet Block carries no timestamp
    return data_off, cap_len, frame_len, t_ns, link, bad


def _ticks_to_ns(ticks: np.ndarray, iface: _Interface) -> np.ndarray:
    """Timestamp ticks (uint64, units of if_tsresol) -> int64 ns, plus if_tsoffset."""
    exp = iface.tsresol & 0x7F
    if iface.tsresol & 0x80:  # 2^-exp seconds per tick
        if exp >= 64:
            secs, frac = np.zeros_like(ticks), ticks
        else:
            secs, frac = ticks >> np.uint64(exp), ticks & np.uint64((1 << exp) - 1)
        if exp > 34:  # keep frac * 1e9 inside 64 bits: drop low fraction bits first
            frac, exp = frac >> np.uint64(exp - 30), 30
        ns = secs * np.uint64(1_000_000_000) + ((frac * np.uint64(1_000_000_000)) >> np.uint64(exp))
    elif exp <= 9:
        ns = ticks * np.uint64(10 ** (9 - exp))
    elif exp - 9 <= 19:
        ns = ticks // np.uint64(10 ** (exp - 9))
    else:
        ns = np.zeros_like(ticks)
    return ns.astype(np.int64) + np.int64(iface.tsoffset_s) * 1_000_000_000
