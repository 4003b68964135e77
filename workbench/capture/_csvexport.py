"""Reader for tshark CSV exports of the kind measurement studies publish (e.g. the high-speed-rail
MPTCP study, ``hsr-mptcp`` in docs/DATA.md): one CSV per subflow, both directions, made with
``tshark -T fields -E header=y -E separator=, -e frame.time_epoch -e ip.src ... -e
tcp.options.mptcp.rawdataseqno``.

It models such a file as a PACKETS table (see ``schema.py``) with every column the export does not
carry set to null. What these exports are, and what the reader decides about them:

- Header line with tshark field names, comma separated (tab and semicolon are accepted too), no
  quoting, empty cell = field absent from the packet. A cell holding several occurrences ("a,b",
  quoted) keeps the first, as ``-E occurrence=f`` would.
- ``frame`` is the 1-based data row number (the export has no frame numbers).
- ``tcp.seq``/``tcp.ack`` are tshark's *relative* numbers in these exports (the SYN has seq 0), and
  the raw ones cannot be recovered. They are kept as they are, so here ``seq``/``ack`` are relative
  to each direction's ISN. Analysis that makes sequence numbers relative (SYN = 0) gets the same
  values from them, so nothing downstream changes. ``tcp.seq_raw``/``tcp.ack_raw`` columns, when an
  export has them, are preferred.
- ``tcp.options.mptcp.rawdataseqno``/``rawdataack`` are the DSS option's raw DSN and data ACK. The
  export does not say whether they were sent as 4 or 8 bytes: ``dss_dsn8``/``dss_ack8`` are True only
  when the value does not fit 32 bits (the hsr files are all 32-bit). ``mp_subtypes`` is the DSS bit
  when either is present (MP_CAPABLE/MP_JOIN handshakes are not visible in the export), and
  ``dss_flags`` holds the A/a/M/m bits those two values imply (the DATA_FIN bit is unknown: 0, and
  ``dss_data_fin`` is null).
- ``mp_malformed`` is False (nothing in the export can say otherwise); ``opt_sack_blocks`` and every
  other TCP option column, window, frame/capture lengths, keys and DSS lengths are null.
- ``tcp.analysis.bytes_in_flight``/``ack_rtt`` (tshark's own analysis) are not part of PACKETS and are
  dropped; RTTs are recomputed from the packets by analysis code.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import polars as pl

from workbench.capture.schema import MPTCP_SUBTYPES, PACKETS
from workbench.errors import InputError

__all__ = ["group_csv_exports", "is_csv_export", "read_csv_export"]

# Columns every export must have (the address pair may be IPv4 or IPv6 columns).
_REQUIRED = ["frame.time_epoch", "tcp.srcport", "tcp.dstport", "tcp.seq", "tcp.ack", "tcp.len", "tcp.flags"]
_ADDR_PAIRS = [("ip.src", "ip.dst"), ("ipv6.src", "ipv6.dst")]
_SEPARATORS = [",", "\t", ";"]
_SNIFF_BYTES = 4096
_U32_MAX = 0xFFFF_FFFF
_DSS_BIT = 1 << MPTCP_SUBTYPES["DSS"]
# DSS flags octet bits (RFC 8684 §3.3)
_DSS_A, _DSS_a, _DSS_M, _DSS_m = 0x01, 0x02, 0x04, 0x08

# client.<connection start>.<cc>.<host>.<...>.<wlan>.<carrier>.pcap.csv: the connection-start token is
# the first all-digit dot-separated part of the name.
_CONN_TOKEN = re.compile(r"(?:^|\.)(\d{6,})(?=\.)")


def _header(path: Path) -> tuple[str, list[str]] | None:
    """(separator, column names) of the first line, or None when it does not look like an export."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return None
    line = head.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace").lstrip("\ufeff")
    for sep in _SEPARATORS:
        names = [name.strip().strip('"') for name in line.split(sep)]
        if "frame.time_epoch" in names:
            return sep, names
    return None


def _missing_columns(names: list[str]) -> list[str]:
    missing = [c for c in _REQUIRED if c not in names]
    if not any(src in names and dst in names for src, dst in _ADDR_PAIRS):
        missing.append("ip.src/ip.dst (or ipv6.src/ipv6.dst)")
    return missing


def is_csv_export(path: str | Path) -> bool:
    """True when the file's first line is the header of a tshark CSV export we can read (cheap: reads
    at most a few KB)."""
    found = _header(Path(path))
    return found is not None and not _missing_columns(found[1])


def _first_value(col: str) -> pl.Expr:
    # A quoted multi-occurrence cell ("a,b", tshark's default aggregator) keeps its first value.
    return pl.col(col).str.split(",").list.first().str.strip_chars()


def _epoch_ns(expr: pl.Expr) -> pl.Expr:
    """'1529184886.287095000' -> ns, exactly (a float would lose the last digits)."""
    parts = expr.str.split_exact(".", 1)
    sec = parts.struct.field("field_0").str.to_integer(strict=False)
    frac_txt = parts.struct.field("field_1").fill_null("0")
    frac = pl.when(frac_txt.str.contains(r"^\d*$")).then(
        frac_txt.str.pad_end(9, "0").str.slice(0, 9).str.to_integer(strict=False))
    sign = pl.when(expr.str.starts_with("-")).then(-1).otherwise(1)
    return sec * 1_000_000_000 + sign * frac


def _uint(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    # Digits only; anything else (or out of range) becomes null and is reported as unparseable.
    return pl.when(expr.str.contains(r"^\d+$")).then(expr).cast(dtype, strict=False)


def _csv_error(path: Path, sep: str, n_columns: int, exc: Exception) -> str:
    """Say which line broke the CSV reader (error path only, so a plain line scan is fine)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        for line_no, cells in enumerate(csv.reader(fh, delimiter=sep), start=1):
            if cells and len(cells) != n_columns:
                return f"line {line_no}: {len(cells)} cells where the header has {n_columns}"
    return f"cannot parse as CSV: {str(exc).splitlines()[0]}"


def read_csv_export(path: str | Path) -> pl.DataFrame:
    """Read one tshark CSV export into the PACKETS table (exact schema and column order).

    Raises ``InputError`` naming the file (and the line, for a bad row) when the file is empty, has
    no usable header, lacks a required column or has a cell that does not parse.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file")
    if path.stat().st_size == 0:
        raise InputError(path, "empty file")
    found = _header(path)
    if found is None:
        raise InputError(path, "line 1: not a tshark CSV export (no header with frame.time_epoch)")
    sep, names = found
    missing = _missing_columns(names)
    if missing:
        raise InputError(path, f"line 1: missing column(s) {', '.join(missing)}")
    if len(set(names)) != len(names):
        raise InputError(path, "line 1: repeated column names in the header")

    try:
        raw = pl.read_csv(path, separator=sep, has_header=True, infer_schema=False, quote_char='"',
                          schema={name: pl.String for name in names}, truncate_ragged_lines=False)
    except pl.exceptions.PolarsError as exc:
        raise InputError(path, _csv_error(path, sep, len(names), exc)) from exc

    def cell(name: str) -> pl.Expr:
        return _first_value(name) if name in raw.columns else pl.lit(None, pl.String)

    src_col, dst_col = next((s, d) for s, d in _ADDR_PAIRS if s in names and d in names)
    seq_col = "tcp.seq_raw" if "tcp.seq_raw" in names else "tcp.seq"
    ack_col = "tcp.ack_raw" if "tcp.ack_raw" in names else "tcp.ack"
    src = cell(src_col)
    parsed = raw.select(
        frame=pl.int_range(1, pl.len() + 1, dtype=pl.UInt32),
        t_ns=_epoch_ns(cell("frame.time_epoch")),
        ip_version=pl.when(src.str.contains(":", literal=True)).then(6).otherwise(4).cast(pl.UInt8),
        src=src,
        dst=cell(dst_col),
        sport=_uint(cell("tcp.srcport"), pl.UInt16()),
        dport=_uint(cell("tcp.dstport"), pl.UInt16()),
        seq=_uint(cell(seq_col), pl.UInt32()),
        ack=_uint(cell(ack_col), pl.UInt32()),
        flags=cell("tcp.flags").str.strip_prefix("0x").str.to_integer(base=16, strict=False),
        payload_len=_uint(cell("tcp.len"), pl.UInt32()),
        dss_dsn=_uint(cell("tcp.options.mptcp.rawdataseqno"), pl.UInt64()),
        dss_data_ack=_uint(cell("tcp.options.mptcp.rawdataack"), pl.UInt64()),
    )

    # Every required cell must parse; optional ones may be empty but not garbage.
    checks = {
        "frame.time_epoch": parsed["t_ns"].is_null(),
        src_col: parsed["src"].is_null(),
        dst_col: parsed["dst"].is_null(),
        "tcp.srcport": parsed["sport"].is_null(),
        "tcp.dstport": parsed["dport"].is_null(),
        seq_col: parsed["seq"].is_null(),
        ack_col: parsed["ack"].is_null(),
        "tcp.len": parsed["payload_len"].is_null(),
        "tcp.flags": parsed["flags"].is_null() | (parsed["flags"] > 0xFFF) | (parsed["flags"] < 0),  # "0x-1" parses
    }
    for name, col in (("tcp.options.mptcp.rawdataseqno", "dss_dsn"),
                      ("tcp.options.mptcp.rawdataack", "dss_data_ack")):
        if name in raw.columns:
            checks[name] = raw[name].is_not_null() & parsed[col].is_null()
    for name, bad in checks.items():
        if bad.any():
            row = int(cast(int, bad.arg_max()))  # first True (there is one: bad.any())
            value = raw[name][row] if name in raw.columns else None
            raise InputError(path, f"line {row + 2}: cannot parse {name} = {value!r}")

    dsn, dack = pl.col("dss_dsn"), pl.col("dss_data_ack")
    has_dsn, has_dack = dsn.is_not_null(), dack.is_not_null()
    dsn8 = pl.when(has_dsn).then(dsn > _U32_MAX)
    ack8 = pl.when(has_dack).then(dack > _U32_MAX)
    dss_flags = (pl.when(has_dack).then(_DSS_A).otherwise(0)
                 + pl.when(dack > _U32_MAX).then(_DSS_a).otherwise(0)
                 + pl.when(has_dsn).then(_DSS_M).otherwise(0)
                 + pl.when(dsn > _U32_MAX).then(_DSS_m).otherwise(0))
    has_dss = has_dsn | has_dack
    out = parsed.with_columns(
        mp_subtypes=pl.when(has_dss).then(_DSS_BIT).otherwise(0),
        dss_flags=pl.when(has_dss).then(dss_flags),
        dss_dsn8=dsn8,
        dss_ack8=ack8,
        mp_malformed=pl.lit(False),
    )
    return out.select(
        pl.col(name).cast(dtype) if name in out.columns else pl.lit(None, dtype).alias(name)
        for name, dtype in PACKETS.items()
    )


def _connection_token(path: Path) -> str | None:
    match = _CONN_TOKEN.search(path.name)
    return match.group(1) if match else None


def group_csv_exports(paths: Sequence[Path]) -> list[list[Path]]:
    """Group the per-subflow files of one connection: files in the same directory whose names share
    the connection-start token (``client.<start>.…``). A file without a token, or without a partner,
    is a group of its own. Groups come in order of their first file (sorted by name), files sorted."""
    groups: dict[tuple[Path, str], list[Path]] = {}
    singles: list[list[Path]] = []
    for p in sorted((Path(p) for p in paths), key=lambda q: (str(q.parent), q.name)):
        token = _connection_token(p)
        if token is None:
            singles.append([p])
        else:
            groups.setdefault((p.parent, token), []).append(p)
    result = [*groups.values(), *singles]
    result.sort(key=lambda g: (str(g[0].parent), g[0].name))
    return result
