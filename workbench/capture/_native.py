"""The native capture reader: a pcap / pcapng file -> the PACKETS table, without tshark.

Models a capture file as what a TCP analysis needs from it: one row per TCP segment (IPv4 or IPv6)
with its header fields as they are on the wire and every TCP/MPTCP option decoded (see
`workbench.capture.schema.PACKETS`), plus counts of what was skipped and why (`ReadStats`).

The work is split in three layers: `_pcapfile` finds the frame records of the container, `_decode`
decodes link/IP/TCP headers for many frames at once, and this module feeds the first bytes of every
frame to the decoder in fixed-width rows, in blocks of about 64k frames, and assembles the polars
table. A frame whose headers do not fit the row width is decoded again with wider rows, so the
common case stays narrow and fast. The file is memory-mapped, not copied.

Link types it does not know raise `UnsupportedLinkType` so the caller can fall back to tshark.
"""

from __future__ import annotations

import ipaddress
import mmap
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from workbench.capture import _decode
from workbench.capture._pcapfile import MAX_RECORD_BYTES, Frames, rows_at, scan_capture
from workbench.capture.schema import PACKETS
from workbench.errors import InputError

__all__ = ["ReadStats", "UnsupportedLinkType", "read_native"]

# Bytes of each frame decoded in the first pass: Ethernet with two VLAN tags (22) + IPv4 or IPv6
# (<= 40, IPv4 options aside) + TCP with options (<= 60) fit. Frames with longer headers (IPv4
# options with TCP options, IPv6 extension chains) go through the wider passes.
_ROW_WIDTHS = (128, 4096, MAX_RECORD_BYTES)
# Size of the header matrix of one block (rows x width bytes). Blocks of ~64k frames keep every
# intermediate array small enough to be reused by the allocator and to stay in cache: measured
# 15-25% faster than one block for the 400k-packet benchmark capture, and memory stays bounded.
_BLOCK_BYTES = 8 * 1024 * 1024


class UnsupportedLinkType(InputError):
    """The capture uses a link type this reader cannot decode (the caller may fall back to tshark)."""


@dataclass(frozen=True)
class ReadStats:
    """What a read saw. Frame counts partition `frames_total`:
    frames_total = frames_tcp + frames_not_tcp + frames_truncated + ip_fragments + frames_malformed."""

    link_types: tuple[int, ...]  # LINKTYPE_* numbers seen, ascending
    frames_total: int            # complete frame records in the file
    frames_tcp: int              # rows in the table
    frames_not_tcp: int          # not IP, or IP but not TCP (incl. link headers too short to tell)
    frames_truncated: int        # TCP frames whose IP/TCP headers or options were cut by snaplen
    frames_snapped: int          # TCP rows (in the table) whose payload was cut, headers complete
    ip_fragments: int            # non-first fragments of TCP datagrams (skipped)
    mp_malformed: int            # rows with an MPTCP option whose length does not fit
    frames_malformed: int = 0    # TCP frames with impossible header lengths (not in the table)
    records_dropped: int = 0     # damaged records where reading stopped (not in frames_total)
    stop_reason: str | None = None  # why reading stopped before the end of the file


def read_native(path: str | Path) -> tuple[pl.DataFrame, ReadStats]:
    """Read a pcap or pcapng capture into the PACKETS table (see `schema.PACKETS`)."""
    path = Path(path)
    with _mapped(path) as buf:
        frames = scan_capture(buf, path)
        link_types = tuple(int(x) for x in np.unique(frames.link_type))
        unknown = sorted(set(link_types) - _decode.SUPPORTED_LINK_TYPES)
        if unknown:
            raise UnsupportedLinkType(path, f"link type {unknown[0]} is not supported by the native reader")
        table, counts, snapped = _decode_all(buf, frames)
    stats = ReadStats(
        link_types=link_types, frames_total=int(frames.t_ns.size), frames_tcp=table.height,
        frames_not_tcp=counts[_decode.NOT_TCP], frames_truncated=counts[_decode.TRUNCATED],
        frames_snapped=snapped, ip_fragments=counts[_decode.FRAGMENT],
        mp_malformed=int(table["mp_malformed"].sum()), frames_malformed=counts[_decode.MALFORMED],
        records_dropped=frames.records_dropped, stop_reason=frames.stop_reason)
    return table, stats


@contextmanager
def _mapped(path: Path) -> Iterator[np.ndarray]:
    """The whole file as a read-only uint8 array backed by the page cache (no copy)."""
    try:
        with path.open("rb") as f:
            size = path.stat().st_size
            if size == 0:
                raise InputError(path, "empty file")
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # prefault: one kernel call
            mm = mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        yield np.frombuffer(mm, dtype=np.uint8)
    finally:
        with suppress(BufferError):  # an array still views the map: it closes when that array is freed
            mm.close()


# ------------------------------------------------------------------------------------ decode passes


def _decode_all(buf: np.ndarray, frames: Frames) -> tuple[pl.DataFrame, dict[int, int], int]:
    """Decode every frame; returns the table, frame counts per outcome, and payload-cut rows."""
    pending = np.arange(frames.t_ns.size)
    pieces: list[pl.DataFrame] = []
    counts = dict.fromkeys(range(5), 0)
    snapped = 0
    for i, width in enumerate(_ROW_WIDTHS):
        last = i == len(_ROW_WIDTHS) - 1
        wider: list[np.ndarray] = []
        for block in _blocks(pending, width):
            res = _decode_block(buf, frames, block, width)
            retry = (res.status == _decode.TRUNCATED) & (frames.cap_len[block] > width) & (not last)
            wider.append(block[retry])
            for outcome, count in zip(*np.unique(res.status[~retry], return_counts=True), strict=True):
                counts[int(outcome)] += int(count)
            snapped += int(res.payload_cut.sum())
            pieces.append(_table(frames, block[res.tcp_rows], res.columns))
        pending = np.concatenate(wider) if wider else pending[:0]
        if pending.size == 0:
            break
    table = pl.concat(pieces) if pieces else _table(frames, pending[:0], None)
    if len(pieces) > 1 and not table["frame"].is_sorted():
        table = table.sort("frame")
    return table, counts, snapped


def _blocks(rows: np.ndarray, width: int) -> Iterator[np.ndarray]:
    step = max(1, _BLOCK_BYTES // width)
    for start in range(0, rows.size, step):
        yield rows[start:start + step]


def _decode_block(buf: np.ndarray, frames: Frames, block: np.ndarray, width: int) -> _decode.Decoded:
    hdr = rows_at(buf, frames.data_off[block], width)
    return _decode.decode_rows(hdr, frames.cap_len[block], frames.frame_len[block],
                               frames.link_type[block])


# --------------------------------------------------------------------------------------- the table


def _table(frames: Frames, rows: np.ndarray, cols: dict[str, _decode.ColumnData] | None) -> pl.DataFrame:
    """Assemble PACKETS for `rows` (frame indices) from decoded columns, in one polars pass."""
    if cols is None or rows.size == 0:
        return pl.DataFrame(schema=PACKETS)
    is6 = cols["ip_version"][0] == 6
    data: dict[str, np.ndarray | pl.Series] = {
        "frame": rows + 1,
        "t_ns": frames.t_ns[rows],
        "frame_len": frames.frame_len[rows],
        "cap_len": frames.cap_len[rows],
    }
    n = rows.size
    ends = _address_strings(np.concatenate([is6, is6]), np.concatenate([cols["src_hi"][0], cols["dst_hi"][0]]),
                            np.concatenate([cols["src_lo"][0], cols["dst_lo"][0]]))
    data["src"], data["dst"] = ends[:n], ends[n:]
    added = cols["add_addr_hi"][1]
    data["add_addr"] = pl.Series([None] * n, dtype=pl.String) if added is not None and not added.any() \
        else _address_strings(cols["add_addr_v6"][0], cols["add_addr_hi"][0], cols["add_addr_lo"][0])
    valid: dict[str, np.ndarray] = {}
    for name, (values, where) in cols.items():
        if name in PACKETS and name not in data:
            data[name] = values
        if where is not None and not where.all():
            valid["add_addr" if name == "add_addr_hi" else name] = where
    valid = {name: where for name, where in valid.items() if name in PACKETS}
    frame = pl.DataFrame({**data, **{f"valid:{name}": where for name, where in valid.items()}})
    exprs = [(pl.when(pl.col(f"valid:{name}")).then(pl.col(name)) if name in valid else pl.col(name))
             .cast(dtype).alias(name) for name, dtype in PACKETS.items()]
    return frame.select(exprs)


def _address_strings(is6: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> pl.Series:
    """Textual IPs (IPv4 dotted, IPv6 RFC 5952 as `ipaddress` prints it), formatted once per address
    (a capture has few distinct addresses) and mapped back with a hash lookup."""
    if not is6.any():
        keys = pl.Series(lo)
        unique = keys.unique()
        v4 = pl.Series([str(ipaddress.IPv4Address(low & 0xFFFFFFFF)) for low in unique], dtype=pl.String)
        return keys.replace_strict(unique, v4, return_dtype=pl.String)
    frame = pl.DataFrame({"v6": is6, "hi": hi, "lo": lo})
    distinct = frame.unique()
    text = [str(ipaddress.IPv6Address((h << 64) | low) if v6 else ipaddress.IPv4Address(low & 0xFFFFFFFF))
            for v6, h, low in distinct.iter_rows()]
    lookup = distinct.with_columns(text=pl.Series(text, dtype=pl.String))
    return frame.join(lookup, on=["v6", "hi", "lo"], how="left", maintain_order="left")["text"]
