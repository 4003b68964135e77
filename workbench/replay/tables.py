"""Recorder columns -> PACKET_EVENTS / SAMPLES DataFrames (the only replay module importing polars).

Conventions of a replayed download (server -> client): data rows are ``dir="s2c"``, ACK rows
``"c2s"`` (an upload swaps the two); ``seq`` is relative to the ISN with the SYN at 0 (first data byte = 1, as in captures);
``dsn`` relative to the IDSN (first data byte = 0); DATA_ACKs on c2s rows are relative DSNs of the
s2c direction; data rows carry ``data_ack = 0`` (the client sends no data). ``t_ns`` counts from
the client's connect. ``ts_val`` is the send time in ms (Linux TCP timestamps tick in ms).
Rows: data ``snd`` (at the sender), data ``rcv`` (at the receiver, with ``owd_ns``), ``drop`` (in the
network, data or ACK), ACK ``rcv`` at the sender (the DATA_ACK tap). ACK ``snd`` rows are not kept.
The handshake (SYN, SYN-ACK, ACK; for a joined upload subflow also the server's ACK of the third
ACK) has ``snd`` and ``rcv`` rows at the times the model uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from workbench.capture.schema import PACKET_EVENTS, SAMPLES
from workbench.replay.recorder import HandshakeRow

if TYPE_CHECKING:
    from workbench.replay.run import ReplayResult

__all__ = ["RECORD_SCHEMAS", "packet_events", "record_frame", "samples"]

_ACK = 0x010
_PSH = 0x008


# The recorder's row kinds (workbench.replay.recorder's rows, by field) as typed columns: the compiled
# recorder's buffers have exactly these types (native/engine/src/record.rs): a subflow index in a
# byte, payloads in two, windows, counts and buffer occupancies in four.
_I64, _U32, _U16, _U8, _BOOL = pl.Int64, pl.UInt32, pl.UInt16, pl.UInt8, pl.Boolean
_DATA = {"t_ns": _I64, "subflow": _U8, "seq": _I64, "payload_bytes": _U16, "dsn": _I64, "is_retrans": _BOOL,
         "is_reinject": _BOOL}
RECORD_SCHEMAS: dict[str, dict[str, Any]] = {
    "snd": _DATA,
    "rcv": {**_DATA, "owd_ns": _I64},
    "drop": {"t_ns": _I64, "subflow": _U8, "is_data": _BOOL, "seq_or_ack": _I64, "payload_bytes": _U16,
             "dsn": _I64, "is_retrans": _BOOL, "is_reinject": _BOOL, "reason": _U8},
    "ack": {"t_ns": _I64, "subflow": _U8, "ack_seq": _I64, "data_ack": _I64, "rwnd_bytes": _U32,
            "has_sack": _BOOL, "owd_ns": _I64},
    "samples": {"t_ns": _I64, "is_periodic": _BOOL, "subflow": _U8, "cwnd": _U32, "inflight": _U32,
                "srtt_ns": _I64, "queued_bytes": _U32, "snd_buf_bytes": _U32, "rcv_ooo_bytes": _U32},
}


def record_frame(rec: Any, kind: str) -> pl.DataFrame:
    """One row kind of a run's recorder ("snd", "rcv", "drop", "ack", "samples") as a typed frame,
    from the compiled engine's columns (Arrow buffers, not copied). A drop row of an ACK has no DSN
    (null)."""
    schema = RECORD_SCHEMAS[kind]
    got = getattr(rec, kind)
    df = pl.DataFrame([pl.Series(f, got[f]).cast(t) for f, t in schema.items()])
    if kind == "drop":
        df = df.with_columns(dsn=pl.when(pl.col("is_data")).then(pl.col("dsn")))
    return df


def packet_events(result: ReplayResult) -> pl.DataFrame:
    rec = result.recorder
    if rec is None:
        return pl.DataFrame(schema=PACKET_EVENTS)
    cfg = result.config
    names = result.path_names
    hdr = cfg.header_bytes
    ackb = cfg.ack_bytes
    srv_win = 65535 << 7  # the data sender's own receive window (it receives no data): constant
    data_dir, ack_dir = ("s2c", "c2s") if result.direction == "down" else ("c2s", "s2c")
    parts: list[pl.DataFrame] = []

    def data_frame(df: pl.DataFrame, point: str) -> pl.DataFrame:
        """Data rows (`SndRow` / `RcvRow` fields; no ``owd_ns``: sender side)."""
        if not df.height:
            return pl.DataFrame()
        if "owd_ns" not in df.columns:
            df = df.with_columns(owd_ns=pl.lit(None, pl.Int64))
        df = df.select("t_ns", "subflow", "seq", "payload_bytes", "dsn", "is_retrans", "is_reinject", "owd_ns")
        return df.with_columns(
            dsn=pl.col("dsn").cast(pl.UInt64),
            point=pl.lit(point), dir=pl.lit(data_dir), ack=pl.lit(1, pl.UInt32),
            flags=pl.lit(_ACK | _PSH, pl.UInt16),
            frame_bytes=(pl.col("payload_bytes").cast(pl.UInt32) + hdr).cast(pl.UInt32),
            rwnd_bytes=pl.lit(srv_win, pl.UInt64), data_ack=pl.lit(0, pl.UInt64),
        )

    parts.append(data_frame(record_frame(rec, "snd"), "snd"))
    parts.append(data_frame(record_frame(rec, "rcv"), "rcv"))
    drops = record_frame(rec, "drop")
    drops_d = drops.filter(pl.col("is_data"))
    drops_a = drops.filter(~pl.col("is_data"))
    if drops_d.height:
        parts.append(data_frame(drops_d.rename({"seq_or_ack": "seq"}), "drop"))
    acks = record_frame(rec, "ack")
    if acks.height or drops_a.height:
        na, nx = acks.height, drops_a.height
        df = pl.concat([
            acks.select("t_ns", "subflow", ack="ack_seq", data_ack=pl.col("data_ack").cast(pl.UInt64),
                        rwnd_bytes=pl.col("rwnd_bytes").cast(pl.UInt64), sack="has_sack", owd_ns="owd_ns"),
            drops_a.select("t_ns", "subflow", ack="seq_or_ack", data_ack=pl.lit(None, pl.UInt64),
                           rwnd_bytes=pl.lit(None, pl.UInt64), sack=pl.lit(False), owd_ns=pl.lit(None, pl.Int64)),
        ]).with_columns(point=pl.Series(["rcv"] * na + ["drop"] * nx, dtype=pl.String))
        df = df.with_columns(
            dir=pl.lit(ack_dir), seq=pl.lit(1, pl.Int64), payload_bytes=pl.lit(0, pl.UInt32),
            flags=pl.lit(_ACK, pl.UInt16),
            frame_bytes=(pl.lit(ackb) + pl.when(pl.col("sack")).then(12).otherwise(0)).cast(pl.UInt32),
            dsn=pl.lit(None, pl.UInt64), is_retrans=pl.lit(False), is_reinject=pl.lit(False),
        ).drop("sack")
        parts.append(df)
    if rec.handshake:
        # the data receiver's SYN (or SYN/ACK) and handshake ACK announce its initial window when it grows
        # one (tcp_select_initial_window); otherwise, as the sender's, a constant
        rcv_win = cfg.rcv_wnd_init_bytes if cfg.rcv_wnd_init_bytes is not None else srv_win
        parts.append(_handshake_rows(rec.handshake, ackb, {ack_dir: rcv_win, data_dir: srv_win}))
    parts = [p for p in parts if p.height]
    if not parts:
        return pl.DataFrame(schema=PACKET_EVENTS)
    df = pl.concat(parts, how="diagonal_relaxed")
    name_map = {i: n for i, n in enumerate(names)}
    df = df.with_columns(
        conn=pl.lit(0, pl.UInt32),
        path=pl.col("subflow").replace_strict(name_map, return_dtype=pl.String),
        data_fin=pl.lit(False),
        ts_val=(pl.col("t_ns") // 1_000_000).cast(pl.UInt32),
        ts_ecr=pl.lit(None, pl.UInt32),
        seq=(pl.col("seq") & 0xFFFFFFFF).cast(pl.UInt32),
        ack=(pl.col("ack") & 0xFFFFFFFF).cast(pl.UInt32),
    )
    df = df.select([pl.col(c).cast(t) for c, t in PACKET_EVENTS.items()])
    return df.sort("t_ns", maintain_order=True)


def _handshake_rows(rows: list[HandshakeRow], ack_bytes: int, rwnd_bytes: dict[str, int]) -> pl.DataFrame:
    """``snd`` and ``rcv`` rows of each handshake packet; ``rwnd_bytes``: the window each direction's
    packets announce."""
    syn = 0x002
    out: list[tuple[int, int, str, int, int, int, int, str, int | None]] = []
    for r in rows:
        flags = r.tcp_flags
        is_syn = bool(flags & syn)
        seq = 0 if is_syn else 1
        ack = 0 if flags == syn else 1
        size = ack_bytes + (12 if is_syn else 0)  # SYNs carry MSS, SACK-permitted, window scale
        out.append((r.t_sent_ns, r.subflow, r.dir, flags, seq, ack, size, "snd", None))
        out.append((r.t_arrived_ns, r.subflow, r.dir, flags, seq, ack, size, "rcv", r.t_arrived_ns - r.t_sent_ns))
    cols = list(zip(*out, strict=True))
    return pl.DataFrame({
        "t_ns": pl.Series(cols[0], dtype=pl.Int64), "subflow": pl.Series(cols[1], dtype=pl.UInt32),
        "dir": pl.Series(cols[2], dtype=pl.String), "flags": pl.Series(cols[3], dtype=pl.UInt16),
        "seq": pl.Series(cols[4], dtype=pl.Int64), "ack": pl.Series(cols[5], dtype=pl.Int64),
        "frame_bytes": pl.Series(cols[6], dtype=pl.UInt32), "point": pl.Series(cols[7], dtype=pl.String),
        "owd_ns": pl.Series(cols[8], dtype=pl.Int64),
    }).with_columns(payload_bytes=pl.lit(0, pl.UInt32), dsn=pl.lit(None, pl.UInt64), is_retrans=pl.lit(False),
                    is_reinject=pl.lit(False), rwnd_bytes=pl.col("dir").replace_strict(rwnd_bytes).cast(pl.UInt64),
                    data_ack=pl.lit(None, pl.UInt64))


def samples(result: ReplayResult) -> pl.DataFrame:
    rec = result.recorder
    if rec is None:
        return pl.DataFrame(schema=SAMPLES)
    c = record_frame(rec, "samples")
    if not c.height:
        return pl.DataFrame(schema=SAMPLES)
    names = result.path_names
    df = c.select(
        "t_ns",
        kind=pl.when(pl.col("is_periodic")).then(pl.lit("periodic")).otherwise(pl.lit("ack")),
        conn=pl.lit(0, pl.UInt32),
        subflow="subflow",
        cwnd_segments=pl.col("cwnd").cast(pl.Float64),
        inflight_segments=pl.col("inflight").cast(pl.UInt32),
        srtt_ns="srtt_ns",
        snd_queue_bytes=pl.col("queued_bytes").cast(pl.UInt64),
        snd_buf_bytes=pl.col("snd_buf_bytes").cast(pl.UInt64),
        rcv_ooo_bytes=pl.col("rcv_ooo_bytes").cast(pl.UInt64),
        rcv_buf_bytes=pl.col("rcv_ooo_bytes").cast(pl.UInt64),  # the application reads in-order data at once
    )
    df = df.with_columns(path=pl.col("subflow").replace_strict(dict(enumerate(names)), return_dtype=pl.String))
    return df.select([pl.col(c).cast(t) for c, t in SAMPLES.items()]).sort("t_ns", maintain_order=True)
