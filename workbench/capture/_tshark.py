"""The tshark capture reader: the PACKETS table (see ``schema.py``) from one ``tshark -T fields`` run.

It models what Wireshark's dissectors say about every TCP segment in a capture, reduced to the raw
header/option fields of ``PACKETS`` so that it is interchangeable with the native reader
(``_native.py``). It is used for link types and file formats the native reader does not know, and in
the tests as an independent oracle for the native reader.

How: one tshark process with lean preferences (no reassembly, no TCP sequence analysis, no name
resolution, absolute sequence numbers), ``-E occurrence=a -E aggregator=;`` so that every occurrence of
a field is printed, its stdout streamed into a temporary file, read as text by polars and decoded with
vectorised polars expressions (no Python loop per packet).

Why all occurrences: ``mp_subtypes`` must OR every MPTCP option of a packet, and tshark cannot mix
occurrence modes in one run. A packet with several MPTCP options (ADD_ADDR + DSS, say) then gives
lists per field, and the lists are NOT aligned with each other: every field is printed only by the
options that carry it (DSS prints no key, MP_FASTCLOSE prints its key in MP_CAPABLE's ``recvkey``
field, a MP_JOIN third ACK prints no flags, MP_FAIL its DSN in the DSS ``rawdataseqno`` field, ...).
So the MPTCP options are rebuilt one row per option (subtype + option length from
``tcp.option_kind``/``tcp.option_len``), the dissector's rules for which option prints which field are
applied (``_emits``, written against tshark 4.0's ``dissect_tcpopt_mptcp`` and checked on hand-built
packets), and each option's value is picked from the field's list at its rank among the options of
the packet that print that field. The one-option packets (nearly all) take a fast path.

Malformed options: ``mp_malformed`` follows the schema's definition (an MPTCP option whose length
does not fit its subtype/flags, RFC 8684 §3 / RFC 6824 §3), checked here from tshark's option lengths,
subtypes and DSS flags (``_length_fits``), plus tshark's own "[Malformed Packet: MPTCP]" exception.
tshark alone would miss options that are *longer* than their fields (it decodes those silently). As
in the native reader, the fields of such an option are not trusted (null); its subtype bit stays.

Known tshark 4.0 limitations and how they are handled:
- The DSS checksum is never printed when the option is exactly long enough for it (an off-by-two in
  4.0's length check), so ``dss_checksum`` is read from the raw option bytes (``tcp.options``) at the
  offset tshark's own option boundaries give; so is the IP-version nibble of RFC 6824 ADD_ADDR.
- Segments whose IP/TCP header or options were cut by the snaplen are left out (tshark's "Packet size
  limited during capture" on IP, TCP or MPTCP), like the native reader does; a cut payload is fine.
- IP fragments are not reassembled (``ip.defragment:FALSE``): a segment is seen where its TCP header
  is (not checked against the native reader: no fragments in the test data). For tunnelled packets
  the innermost IP addresses are used (the header that carries the TCP segment).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import polars as pl

from workbench.capture.schema import PACKETS
from workbench.errors import InputError

__all__ = ["TSHARK_PREFS", "read_tshark", "tshark_available"]

# Aggregator between the occurrences of one field. No value we ask for can contain it (numbers, hex,
# IPv4/IPv6 text, "[Malformed Packet: X]" labels).
_AGG = ";"

# (column of the raw text table, tshark field). Order = order of the -e arguments.
_FIELDS: list[tuple[str, str]] = [
    ("frame", "frame.number"),
    ("time", "frame.time_epoch"),
    ("frame_len", "frame.len"),
    ("cap_len", "frame.cap_len"),
    ("ip4_src", "ip.src"),
    ("ip4_dst", "ip.dst"),
    ("ip6_src", "ipv6.src"),
    ("ip6_dst", "ipv6.dst"),
    ("sport", "tcp.srcport"),
    ("dport", "tcp.dstport"),
    ("seq", "tcp.seq_raw"),
    ("ack", "tcp.ack_raw"),
    ("flags", "tcp.flags"),
    ("win", "tcp.window_size_value"),
    ("payload_len", "tcp.len"),
    ("opt_mss", "tcp.options.mss_val"),
    ("opt_wscale", "tcp.options.wscale.shift"),
    ("sack_perm", "tcp.options.sack_perm"),
    ("ts_val", "tcp.options.timestamp.tsval"),
    ("ts_ecr", "tcp.options.timestamp.tsecr"),
    ("sack_count", "tcp.options.sack.count"),
    ("sack_le", "tcp.options.sack_le"),
    ("sack_re", "tcp.options.sack_re"),
    # option boundaries: every option prints its kind, every option but NOP/EOL its length
    ("opt_kinds", "tcp.option_kind"),
    ("opt_lens", "tcp.option_len"),
    ("opt_bytes", "tcp.options"),
    ("l_subtype", "tcp.options.mptcp.subtype"),
    ("l_version", "tcp.options.mptcp.version"),
    ("l_flags", "tcp.options.mptcp.flags"),
    ("l_sendkey", "tcp.options.mptcp.sendkey"),
    ("l_recvkey", "tcp.options.mptcp.recvkey"),
    ("l_recvtok", "tcp.options.mptcp.recvtok"),
    ("l_sendrand", "tcp.options.mptcp.sendrand"),
    ("l_addrid", "tcp.options.mptcp.addrid"),
    ("l_backup", "tcp.options.mptcp.backup.flag"),
    ("l_dsn", "tcp.options.mptcp.rawdataseqno"),
    ("l_ssn", "tcp.options.mptcp.subflowseqno"),
    ("l_dll", "tcp.options.mptcp.datalvllen"),
    ("l_dack", "tcp.options.mptcp.rawdataack"),
    ("l_ipv4", "tcp.options.mptcp.ipv4"),
    ("l_ipv6", "tcp.options.mptcp.ipv6"),
    ("l_port", "tcp.options.mptcp.port"),
    ("malformed", "_ws.malformed"),
    ("short", "_ws.short"),
]
_LIST_FIELDS = [name for name, _ in _FIELDS if name.startswith("l_") and name != "l_subtype"]

# Lean preferences: no reassembly or sequence analysis (faster, half the memory, and raw numbers),
# absolute sequence numbers, no payload protocols we would only throw away.
TSHARK_PREFS: list[str] = [
    "-o", "tcp.desegment_tcp_streams:FALSE",
    "-o", "tcp.reassemble_out_of_order:FALSE",
    "-o", "tcp.analyze_sequence_numbers:FALSE",
    "-o", "tcp.relative_sequence_numbers:FALSE",
    "-o", "tcp.calculate_timestamps:FALSE",
    "-o", "tcp.track_bytes_in_flight:FALSE",
    "-o", "mptcp.analyze_mptcp:FALSE",
    "-o", "mptcp.relative_sequence_numbers:FALSE",
    "-o", "ip.defragment:FALSE",
    "-o", "ipv6.defragment:FALSE",
    "-o", "tls.desegment_ssl_records:FALSE",
    "--disable-protocol", "tls",
    "--disable-protocol", "ssh",
    "--disable-protocol", "http",
]

# TCP segments only; ICMP errors quote a TCP header that is not a segment of its own.
_DISPLAY_FILTER = "tcp && !icmp && !icmpv6"

_SUBTYPE_BIT = {subtype: 1 << subtype for subtype in range(16)}

# Wiretap recognises some non-capture files (MP4, MIME types such as JPEG); they hold no packets.
_NOT_CAPTURE_TYPES = {"unknown", "mime", "mp4"}


def tshark_available() -> bool:
    """True when a ``tshark`` executable is on PATH."""
    return shutil.which("tshark") is not None


def _first_error_line(stderr: bytes) -> str:
    """tshark's first meaningful stderr line (it warns about running as root first)."""
    for line in stderr.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line and not line.startswith("Running as user"):
            return line
    return "no error message"


def _check_file(path: Path) -> None:
    if not path.exists():
        raise InputError(path, "no such file")
    if not path.is_file():
        raise InputError(path, "not a file")
    if path.stat().st_size == 0:
        raise InputError(path, "empty file")
    captype = shutil.which("captype")
    if captype is None:
        return
    # captype reads only the file header: a cheap way to reject what wiretap would open as a
    # non-capture "file" (tshark then prints nothing and exits 0).
    res = subprocess.run([captype, str(path)], capture_output=True, check=False)
    kind = res.stdout.decode("utf-8", "replace").rsplit(":", 1)[-1].strip()
    if res.returncode != 0 or kind in _NOT_CAPTURE_TYPES:
        raise InputError(path, "not a capture file (tshark does not recognise its format)")


def _run_tshark(path: Path, out_path: Path) -> None:
    cmd = ["tshark", "-r", str(path), "-n", "-T", "fields", "-E", "header=n", "-E", "separator=/t",
           "-E", "occurrence=a", "-E", f"aggregator={_AGG}", "-E", "quote=n",
           "-Y", _DISPLAY_FILTER, *TSHARK_PREFS]
    for _, field in _FIELDS:
        cmd += ["-e", field]
    env = {**os.environ, "LC_ALL": "C"}
    with open(out_path, "wb") as out:
        try:
            res = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, env=env, check=False)
        except FileNotFoundError as exc:  # vanished from PATH between the check and the call
            raise InputError(path, "tshark is not installed (needed to read this file)") from exc
    if res.returncode != 0:
        msg = _first_error_line(res.stderr)
        if "isn't a capture file" in msg or "unknown file format" in msg.lower():
            raise InputError(path, "not a capture file (tshark does not recognise its format)")
        raise InputError(path, f"tshark failed: {msg}")


def _lst(name: str) -> pl.Expr:
    return pl.col(name).str.split(_AGG)


def _first(name: str) -> pl.Expr:
    # Only a tunnel or a quoted header repeats these; the first occurrence is the outer TCP header.
    return pl.col(name).str.split(_AGG).list.first()


def _last(name: str) -> pl.Expr:
    # The innermost IP header is the one that carries the TCP segment.
    return pl.col(name).str.split(_AGG).list.last()


def _hex(expr: pl.Expr) -> pl.Expr:
    return expr.str.strip_prefix("0x").str.to_integer(base=16, strict=False)


def _epoch_ns(expr: pl.Expr) -> pl.Expr:
    """'1529184872.123456789' -> ns as Int64, exactly (a float would lose the last digits)."""
    parts = expr.str.split_exact(".", 1)
    sec = parts.struct.field("field_0").cast(pl.Int64)
    frac = parts.struct.field("field_1").fill_null("0").str.pad_end(9, "0").str.slice(0, 9).cast(pl.Int64)
    # A negative epoch prints as "-12.5": the fraction has the sign of the seconds.
    sign = pl.when(expr.str.starts_with("-")).then(-1).otherwise(1)
    return sec * 1_000_000_000 + sign * frac


def _emits(st: pl.Expr, ln: pl.Expr, dss_flags: pl.Expr) -> dict[str, pl.Expr]:
    """How many values each MPTCP option prints for each list field (tshark 4.0 dissector rules).

    ``st`` = subtype, ``ln`` = option length, ``dss_flags`` = the DSS flags octet (only used when
    st == DSS). Anything not listed prints nothing.
    """
    m_flag = (dss_flags & 0x04) != 0
    a_flag = (dss_flags & 0x01) != 0
    join_syn = (st == 1) & ln.is_in([12, 16])  # MP_JOIN SYN / SYN-ACK; the third ACK prints no fields
    one = pl.lit(1, pl.UInt32)
    zero = pl.lit(0, pl.UInt32)

    def b(cond: pl.Expr) -> pl.Expr:
        return pl.when(cond).then(one).otherwise(zero)

    return {
        "l_version": b(st == 0),
        "l_sendkey": b((st == 0) & (ln >= 12)),
        # MP_FASTCLOSE prints its key in the same field as MP_CAPABLE's receiver key
        "l_recvkey": b(((st == 0) & (ln >= 20)) | ((st == 7) & (ln >= 12))),
        "l_recvtok": b((st == 1) & (ln == 12)),
        "l_sendrand": b(join_syn),
        # REMOVE_ADDR prints one address id per removed address
        "l_addrid": pl.when((st == 4) & (ln > 3)).then((ln - 3).clip(lower_bound=0).cast(pl.UInt32))
                      .otherwise(b(join_syn | (st == 3) | ((st == 5) & (ln == 4)))),
        "l_backup": b(join_syn | (st == 5)),
        "l_dsn": b(((st == 2) & m_flag) | (st == 6)),  # MP_FAIL prints its DSN in the same field
        "l_ssn": b((st == 2) & m_flag),
        "l_dll": b(((st == 2) & m_flag) | ((st == 0) & ln.is_in([22, 24]))),  # MP_CAPABLE with data
        "l_dack": b((st == 2) & a_flag),
        "l_ipv4": b((st == 3) & ln.is_in([8, 10, 16, 18])),
        "l_ipv6": b((st == 3) & ln.is_in([20, 22, 28, 30])),
        "l_port": b((st == 3) & ((ln % 4) == 2)),
    }


def _ints(name: str) -> pl.Expr:
    return _lst(name).cast(pl.List(pl.Int32), strict=False)


def _mptcp_option_lengths() -> pl.Expr:
    """Lengths of the packet's MPTCP options, in order. Every option prints its kind, every option but
    NOP (1) and EOL (0) its length: the lengths line up with the kinds that are not NOP/EOL."""
    kinds = _ints("opt_kinds").list.eval(pl.element().filter(pl.element() > 1))
    where = kinds.list.eval(pl.arg_where(pl.element() == 30))
    return _ints("opt_lens").list.gather(where, null_on_oob=True)


def _mptcp_option_offsets(rows: pl.DataFrame) -> pl.DataFrame:
    """(row, j, off): byte offset of the j-th MPTCP option inside the packet's options area."""
    kinds = (rows.select("row", k=_ints("opt_kinds")).explode("k")
             .with_columns(has_len=pl.col("k") > 1)
             .with_columns(i=(pl.col("has_len").cast(pl.Int32).cum_sum() - 1).over("row")))
    lens = (rows.select("row", ln=_ints("opt_lens")).explode("ln")
            .with_columns(i=pl.int_range(pl.len(), dtype=pl.Int32).over("row")))
    return (kinds.join(lens, on=["row", "i"], how="left")
            # NOP and EOL take one byte
            .with_columns(size=pl.when(pl.col("has_len")).then(pl.col("ln")).otherwise(1))
            .with_columns(off=(pl.col("size").cum_sum() - pl.col("size")).over("row"))
            .filter(pl.col("k") == 30)
            .with_columns(j=pl.int_range(pl.len(), dtype=pl.Int32).over("row"))
            .select("row", "j", "off"))


def _mptcp_options(mp: pl.DataFrame) -> pl.DataFrame:
    """One row per MPTCP option, sorted by (row, j): row, j (index among the packet's MPTCP options),
    subtype ``st``, length ``ln``, flags octet ``fl`` and the option's value of every list field (null
    when the option does not carry it)."""
    mp = mp.with_columns(st_list=_ints("l_subtype"), ln_list=_mptcp_option_lengths())
    n_opts = pl.col("st_list").list.len()
    lists = [_lst(c) for c in _LIST_FIELDS]

    # Fast path, nearly every packet: one MPTCP option, so every printed value is that option's.
    single = mp.filter(n_opts == 1).select(
        "row", *lists, j=pl.lit(0, pl.Int32), st=pl.col("st_list").list.first(),
        ln=pl.col("ln_list").list.first())
    # Several options: one row per option; an option too short to hold its subtype prints none, so
    # subtypes and lengths are joined by position rather than exploded together.
    multi = mp.filter(n_opts > 1)
    subs = (multi.select("row", st="st_list").explode("st")
            .with_columns(j=pl.int_range(pl.len(), dtype=pl.Int32).over("row")))
    lens = (multi.select("row", ln="ln_list").explode("ln")
            .with_columns(j=pl.int_range(pl.len(), dtype=pl.Int32).over("row")))
    multi_opts = (subs.join(lens, on=["row", "j"], how="left")
                  .join(multi.select("row", *lists), on="row", how="left"))
    opts = pl.concat([single, multi_opts.select(single.columns)]).sort("row", "j")

    # A field's value for an option = the field's list at the option's rank among the options of the
    # packet that print that field. Flags first: the DSS flags decide what a DSS option prints.
    st, ln = pl.col("st"), pl.col("ln").fill_null(0)
    is_multi = pl.col("row").is_in(multi["row"].implode())

    def rank(count: pl.Expr) -> pl.Expr:
        return pl.when(is_multi).then((count.cum_sum() - count).over("row")).otherwise(0)

    emits_flags = (st.is_in([0, 2, 5, 8]) | ((st == 1) & ln.is_in([12, 16]))).cast(pl.UInt32)
    opts = opts.with_columns(
        fl=pl.when(emits_flags == 1).then(_hex(pl.col("l_flags").list.get(rank(emits_flags), null_on_oob=True)))
    )
    emits = _emits(st, ln, pl.col("fl").fill_null(0))
    picked = [
        pl.when(emits[name] > 0).then(pl.col(name).list.get(rank(emits[name]), null_on_oob=True)).alias(name[2:])
        for name in _LIST_FIELDS if name != "l_flags"
    ]
    opts = opts.with_columns(picked).drop(_LIST_FIELDS)

    # The IP-version nibble of RFC 6824 ADD_ADDR options decides their lengths; it is not a tshark
    # field, so it is read from the raw option bytes (ADD_ADDR is rare: offsets only for those rows).
    aa_rows = opts.filter(st == 3).select("row").unique()
    if aa_rows.height:
        rows = mp.join(aa_rows, on="row", how="semi")
        nibble = (_mptcp_option_offsets(rows)
                  .join(rows.select("row", opt_bytes=_first("opt_bytes")), on="row", how="left")
                  .select("row", "j", nibble=_hex(pl.col("opt_bytes").str.slice(pl.col("off") * 2 + 5, 1))))
        opts = opts.join(nibble, on=["row", "j"], how="left", maintain_order="left")
    else:
        opts = opts.with_columns(nibble=pl.lit(None, pl.Int64))
    ok = _length_fits(st, ln, pl.col("fl"), pl.col("version").cast(pl.Int32, strict=False), pl.col("nibble"))
    # Fields of an option whose length does not fit its subtype/flags are not trusted.
    values = ["fl", *[name[2:] for name in _LIST_FIELDS if name != "l_flags"]]
    return (opts.with_columns(ok=ok)
            .with_columns(pl.when(pl.col("ok")).then(pl.col(c)).alias(c) for c in values)
            .drop("nibble"))


def _length_fits(st: pl.Expr, ln: pl.Expr, fl: pl.Expr, version: pl.Expr, nibble: pl.Expr) -> pl.Expr:
    """Whether an MPTCP option's length fits its subtype (and DSS flags, MP_CAPABLE version, ADD_ADDR
    form), per RFC 8684 §3 and RFC 6824 §3. Unknown subtypes are taken as they are."""
    fl = fl.fill_null(0)
    ack_bytes = pl.when((fl & 0x01) != 0).then(pl.when((fl & 0x02) != 0).then(8).otherwise(4)).otherwise(0)
    dsn_bytes = pl.when((fl & 0x04) != 0).then(pl.when((fl & 0x08) != 0).then(8).otherwise(4)).otherwise(0)
    dss_len = 4 + ack_bytes + pl.when(dsn_bytes > 0).then(dsn_bytes + 6).otherwise(0)
    fits = (
        pl.when(st == 0).then(ln.is_in([12, 20]) | ((version >= 1) & ln.is_in([4, 22, 24])))
        .when(st == 1).then(ln.is_in([12, 16, 24]))  # MP_JOIN SYN, SYN-ACK, ACK
        .when(st == 2).then((ln == dss_len) | ((dsn_bytes > 0) & (ln == dss_len + 2)))  # +2: checksum
        # RFC 6824 puts the IP version in the nibble (no HMAC); RFC 8684 has flags there
        .when((st == 3) & (nibble == 4)).then(ln.is_in([8, 10]))
        .when((st == 3) & (nibble == 6)).then(ln.is_in([20, 22]))
        .when(st == 3).then(ln.is_in([8, 10, 16, 18, 20, 22, 28, 30]))
        .when(st == 4).then(ln >= 4)  # REMOVE_ADDR: one or more address ids
        .when(st == 5).then(ln.is_in([3, 4]))  # MP_PRIO (with the v0 address id)
        .when(st.is_in([6, 7])).then(ln == 12)  # MP_FAIL, MP_FASTCLOSE
        .when(st == 8).then(ln == 4)  # MP_TCPRST
        .otherwise(True)
    )
    return fits.fill_null(False) & st.is_not_null() & (ln >= 3).fill_null(False)


def _first_of(opts: pl.DataFrame, cond: pl.Expr, cols: dict[str, pl.Expr]) -> pl.DataFrame:
    """Per packet, the listed values of its first MPTCP option satisfying ``cond``."""
    # opts is sorted by (row, j): the first row of each packet left by the filter is its first option
    return opts.filter(cond).filter(pl.col("row").is_first_distinct()).select("row", **cols)


# A dissector ran out of captured bytes (snaplen) inside these headers: the segment's header fields are
# incomplete, so it is left out, as the native reader does (payload cut by snaplen is fine).
_HEADER_CUT = r"Packet size limited during capture: (?:MPTCP|TCP|IPv4|IPv6) truncated"


def _decode(raw: pl.DataFrame) -> pl.DataFrame:
    raw = raw.filter(~pl.col("short").fill_null("").str.contains(_HEADER_CUT)).with_row_index("row")
    is_v6 = pl.col("ip4_src").is_null() & pl.col("ip6_src").is_not_null()
    sack_count = _first("sack_count").cast(pl.UInt8, strict=False)
    base = raw.select(
        "row",
        frame=pl.col("frame").cast(pl.UInt32),
        t_ns=_epoch_ns(pl.col("time")),
        frame_len=pl.col("frame_len").cast(pl.UInt32),
        cap_len=pl.col("cap_len").cast(pl.UInt32),
        ip_version=pl.when(is_v6).then(6).otherwise(4).cast(pl.UInt8),
        src=pl.when(is_v6).then(_last("ip6_src")).otherwise(_last("ip4_src")),
        dst=pl.when(is_v6).then(_last("ip6_dst")).otherwise(_last("ip4_dst")),
        sport=_first("sport").cast(pl.UInt16),
        dport=_first("dport").cast(pl.UInt16),
        seq=_first("seq").cast(pl.UInt32),
        ack=_first("ack").cast(pl.UInt32),
        flags=_hex(_first("flags")).cast(pl.UInt16),
        win=_first("win").cast(pl.UInt16),
        payload_len=_first("payload_len").cast(pl.UInt32),
        opt_mss=_first("opt_mss").cast(pl.UInt16, strict=False),
        opt_wscale=_first("opt_wscale").cast(pl.UInt8, strict=False),
        opt_sack_perm=pl.col("sack_perm").is_not_null(),
        opt_ts_val=_first("ts_val").cast(pl.UInt32, strict=False),
        opt_ts_ecr=_first("ts_ecr").cast(pl.UInt32, strict=False),
        opt_sack_blocks=sack_count.fill_null(0),
        opt_sack_le=_first("sack_le").cast(pl.UInt32, strict=False),
        opt_sack_re=_first("sack_re").cast(pl.UInt32, strict=False),
        # OR of (1 << subtype): the set of distinct subtypes, summed as bits
        mp_subtypes=_lst("l_subtype").list.eval(
            pl.element().cast(pl.Int64, strict=False)
            .replace_strict(_SUBTYPE_BIT, default=0, return_dtype=pl.UInt16)
        ).list.unique().list.sum().fill_null(0).cast(pl.UInt16),
        # tshark labels an exception inside the MPTCP option dissector "[Malformed Packet: MPTCP]";
        # an MPTCP option too short to print a subtype is malformed too
        mp_malformed=pl.col("malformed").fill_null("").str.contains("Malformed Packet: MPTCP", literal=True)
        | (_mptcp_option_lengths().list.len().fill_null(0) > _lst("l_subtype").list.len().fill_null(0)),
    )

    mp = raw.filter(pl.col("l_subtype").is_not_null())
    if mp.height:
        opts = _mptcp_options(mp)
        bad = opts.filter(~pl.col("ok")).select("row").unique()
        base = base.with_columns(mp_malformed=pl.col("mp_malformed") | pl.col("row").is_in(bad["row"].implode()))
        opts = opts.filter(pl.col("ok"))
        st = pl.col("st")
        ln = pl.col("ln").fill_null(0)
        mpc = _first_of(opts, st == 0, {
            "mp_version": pl.col("version"), "mp_capable_flags": pl.col("fl"),
            "mp_sender_key": pl.col("sendkey"), "mp_receiver_key": pl.col("recvkey")})
        join = _first_of(opts, st == 1, {"mp_join_token": pl.col("recvtok"),
                                          "mp_join_nonce": pl.col("sendrand")})
        addr_id = _first_of(opts, pl.col("addrid").is_not_null() & st.is_in([1, 3, 5]),
                            {"mp_addr_id": pl.col("addrid")})
        backup = _first_of(opts, pl.col("backup").is_not_null(), {"mp_backup": pl.col("backup") == "1"})
        add = _first_of(opts, st == 3, {"add_addr": pl.coalesce("ipv4", "ipv6"), "add_addr_port": pl.col("port")})

        # DSS: the checksum sits after the mapping (RFC 8684 §3.3) and is read from the raw option
        # bytes, because tshark 4.0 does not print it (see the module docstring). Only options long
        # enough to hold one need their byte offset, which costs an explode of all options.
        fl = pl.col("fl")
        has_m, has_a = (fl & 0x04) != 0, (fl & 0x01) != 0
        csum_at = (4 + pl.when(has_a).then(pl.when((fl & 0x02) != 0).then(8).otherwise(4)).otherwise(0)
                   + pl.when((fl & 0x08) != 0).then(8).otherwise(4) + 6)
        dss = _first_of(opts, st == 2, {
            "j": pl.col("j"),
            "dss_flags": fl,
            "dss_dsn": pl.col("dsn"),
            "dss_dsn8": pl.when(has_m).then((fl & 0x08) != 0),
            "dss_ssn": pl.col("ssn"),
            "dss_dll": pl.col("dll"),
            "csum_at": pl.when(has_m & (ln >= csum_at + 2)).then(csum_at),
            "dss_data_ack": pl.col("dack"),
            "dss_ack8": pl.when(has_a).then((fl & 0x02) != 0),
            "dss_data_fin": (fl & 0x10) != 0,
        })
        with_csum = dss.filter(pl.col("csum_at").is_not_null())
        if with_csum.height:
            rows = mp.join(with_csum.select("row"), on="row", how="semi")
            csum = (with_csum.join(_mptcp_option_offsets(rows), on=["row", "j"], how="left")
                    .join(rows.select("row", opt_bytes=_first("opt_bytes")), on="row", how="left")
                    .select("row", dss_checksum=_hex(
                        pl.col("opt_bytes").str.slice((pl.col("off") + pl.col("csum_at")) * 2, 4))))
            dss = dss.join(csum, on="row", how="left", maintain_order="left")
        dss = dss.drop("j", "csum_at")
        for part in (mpc, join, addr_id, backup, dss, add):
            base = base.join(part, on="row", how="left", maintain_order="left")

    out = base.select(
        pl.col(name).cast(dtype, strict=True) if name in base.columns else pl.lit(None, dtype).alias(name)
        for name, dtype in PACKETS.items()
    )
    return out


def read_tshark(path: str | Path) -> pl.DataFrame:
    """Read a capture with tshark into the PACKETS table (exact schema and column order).

    Raises ``InputError`` (one line naming the file) when tshark is missing or fails, or the file is
    empty or not a capture. A capture without TCP gives an empty table.
    """
    path = Path(path)
    if not tshark_available():
        raise InputError(path, "tshark is not installed (needed to read this file)")
    _check_file(path)
    names = [name for name, _ in _FIELDS]
    with tempfile.TemporaryDirectory(prefix="wb-tshark-") as tmp:
        out_path = Path(tmp) / "fields.tsv"
        _run_tshark(path, out_path)
        if out_path.stat().st_size == 0:
            return pl.DataFrame(schema=PACKETS)
        raw = pl.read_csv(out_path, separator="\t", has_header=False, new_columns=names,
                          schema={name: pl.String for name in names}, quote_char=None,
                          infer_schema=False)
    try:
        return _decode(raw)
    except pl.exceptions.PolarsError as exc:  # a value tshark printed that we cannot decode
        raise InputError(path, f"cannot decode tshark output: {str(exc).splitlines()[0]}") from exc
