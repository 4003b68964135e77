"""Choosing a reader for an input file and caching what it read.

pcap/pcapng go to the native reader; link types it does not know go to tshark; tshark CSV exports go
to the CSV reader. Parsed tables are cached as parquet keyed by the file's content hash and the
reader version, so a second look at the same capture costs a parquet read. Each cache entry carries
the SHA-256 of its table: a corrupt entry is detected, deleted and rebuilt, never trusted.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from workbench._files import write_atomic
from workbench.capture.schema import PACKETS
from workbench.errors import InputError

__all__ = ["READER_VERSION", "ReadResult", "cache_dir", "content_hash", "read_packets"]

# Bump when any reader's output for the same bytes changes: it invalidates every cached table.
READER_VERSION = "1"

_PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d"}
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


@dataclass
class ReadResult:
    packets: pl.DataFrame
    reader: str                      # "native", "tshark" or "csv"
    content_hash: str
    from_cache: bool = False
    notes: list[str] = field(default_factory=list)  # what the reader wants the user to know


def cache_dir() -> Path:
    """Where parsed tables are cached: $WORKBENCH_CACHE, else ~/.cache/workbench."""
    env = os.environ.get("WORKBENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "workbench"


def content_hash(path: Path) -> str:
    """SHA-256 of a file's bytes: its parse cache entry's name, part of the analysis cache's key, and
    what a report's manifest records to pin an input."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _sniff(path: Path) -> str:
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    if not head:
        raise InputError(path, "empty file")
    if head in _PCAP_MAGICS or head == _PCAPNG_MAGIC:
        return "capture"
    from workbench.capture._csvexport import is_csv_export

    if is_csv_export(path):
        return "csv"
    raise InputError(path, "not a pcap or pcapng capture, nor a tshark CSV export")


def _read_uncached(path: Path, kind: str, reader: str) -> tuple[pl.DataFrame, str, list[str]]:
    if kind == "csv":
        from workbench.capture._csvexport import read_csv_export

        return read_csv_export(path), "csv", []
    if reader == "tshark":
        from workbench.capture._tshark import read_tshark

        return read_tshark(path), "tshark", []
    from workbench.capture._native import UnsupportedLinkType, read_native

    try:
        packets, stats = read_native(path)
    except UnsupportedLinkType as e:
        if reader == "native":
            raise
        from workbench.capture._tshark import read_tshark, tshark_available

        if not tshark_available():
            raise InputError(path, f"{e.problem}, and tshark (the fallback reader) is not installed") from None
        return read_tshark(path), "tshark", [f"{e.problem}: read with tshark instead"]
    notes = []
    if stats.stop_reason:
        notes.append(f"read stopped early, the rest of the file is damaged or cut off: {stats.stop_reason}")
    if stats.frames_truncated:
        notes.append(f"{stats.frames_truncated} TCP frames had headers cut by the snap length and were skipped")
    # Payload cut by the snap length is normal and harmless (lengths come from the IP headers): not noted.
    if stats.mp_malformed:
        notes.append(f"{stats.mp_malformed} packets with a malformed MPTCP option")
    return packets, "native", notes


def read_packets(path: str | Path, *, reader: str = "auto", use_cache: bool = True,
                 digest: str | None = None) -> ReadResult:
    """Read one capture or CSV export into a PACKETS table. `reader`: "auto", "native" or "tshark";
    ``digest``: the file's `content_hash` when the caller has it already (else it is read)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "no such file" if not p.exists() else "not a regular file")
    kind = _sniff(p)
    digest = digest or content_hash(p)
    cached = cache_dir() / f"{digest[:32]}-{kind}-{reader}-v{READER_VERSION}.parquet"
    if use_cache:
        hit = _read_cached(cached)
        if hit is not None:
            df, used, notes = hit
            return ReadResult(df, used, digest, from_cache=True, notes=notes)
    df, used, notes = _read_uncached(p, kind, reader)
    if list(df.schema.items()) != list(PACKETS.items()):
        raise AssertionError(f"reader {used} returned a table that does not follow the PACKETS schema")
    if use_cache:
        _write_cached(cached, df, used, notes)
    return ReadResult(df, used, digest, notes=notes)


# A cache entry is two files: the table (parquet) and beside it ``.meta.json`` with the reader used,
# its notes and the SHA-256 of the table's bytes. The meta file is written last, so it is the commit
# point; an entry is used only when the table's bytes match its checksum and it follows the PACKETS
# schema. Anything else (a torn write, a flipped bit that parquet itself would not notice, a table
# from another entry, a meta file of an older format) is deleted and rebuilt, never trusted.
_META_FORMAT = 1


def _meta_path(table: Path) -> Path:
    return table.with_suffix(".meta.json")


def _read_cached(table: Path) -> tuple[pl.DataFrame, str, list[str]] | None:
    hit = read_entry(table, PACKETS)
    if hit is None:
        return None
    df, meta = hit
    return df, str(meta["reader"]), [str(n) for n in meta["notes"]]


def read_entry(table: Path, schema: Mapping[str, pl.DataType] | None = None
               ) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    """A cache entry's table and its meta dict, or None when there is no valid entry (an invalid one,
    or one whose table does not follow ``schema``, is deleted)."""
    import json

    meta_file = _meta_path(table)
    try:
        raw = table.read_bytes()
        meta = json.loads(meta_file.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        drop_entry(table)
        return None
    try:
        ok = (isinstance(meta, dict) and meta.get("format") == _META_FORMAT
              and meta.get("sha256") == hashlib.sha256(raw).hexdigest())
        if not ok:
            drop_entry(table)
            return None
        df = pl.read_parquet(io.BytesIO(raw))
        if schema is not None and list(df.schema.items()) != list(schema.items()):
            drop_entry(table)
            return None
        return df, meta
    except Exception:  # a checksum-valid entry that still does not read: rebuilt, never trusted
        drop_entry(table)
        return None


def drop_entry(table: Path) -> None:
    """Delete a cache entry (its table and meta file)."""
    for f in (table, _meta_path(table), table.with_suffix(".notes")):
        f.unlink(missing_ok=True)


def _write_cached(target: Path, df: pl.DataFrame, reader: str, notes: list[str]) -> None:
    write_entry(target, df, {"reader": reader, "notes": notes})


def write_entry(target: Path, df: pl.DataFrame, meta: dict[str, Any]) -> str | None:
    """Cache entry: the table, then its meta file (``meta`` with the format and the table's checksum),
    each written atomically. The checksum, or None when it could not be written (caching is an
    optimisation: a read-only home must not break analysis)."""
    import json

    try:
        buf = io.BytesIO()
        df.write_parquet(buf)
        raw = buf.getvalue()
        write_atomic(target, raw)
        digest = hashlib.sha256(raw).hexdigest()
        write_atomic(_meta_path(target), json.dumps(meta | {"format": _META_FORMAT, "sha256": digest}))
    except OSError:
        return None
    return digest
