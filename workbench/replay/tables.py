"""Recorder lists -> PACKET_EVENTS / SAMPLES DataFrames (the only replay module importing polars).

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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import polars as pl

from workbench.capture.schema import PACKET_EVENTS, SAMPLES
from workbench.replay.recorder import AckRow, DropRow, HandshakeRow, RcvRow, SampleRow, SndRow

if TYPE_CHECKING:
    from workbench.replay.run import ReplayResult

__all__ = ["columns", "packet_events", "samples"]

_ACK = 0x010
_PSH = 0x008


def columns(rows: Sequence[tuple[Any, ...]], row_type: type[NamedTuple]) -> dict[str, Sequence[Any]]:
    """Recorder rows of one kind as columns by field name (empty columns for no rows)."""
    fields: tuple[str, ...] = row_type._fields
    if not rows:
        return {f: () for f in fields}
    return dict(zip(fields, zip(*rows, strict=True), strict=True))


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

    def data_frame(c: dict[str, Sequence[Any]], point: str, n: int) -> pl.DataFrame:
        """Data rows from columns by name (`SndRow` / `RcvRow` fields; no ``owd_ns``: sender side)."""
        if not n:
            return pl.DataFrame()
        owd = c.get("owd_ns")
        df = pl.DataFrame({
            "t_ns": pl.Series(c["t_ns"], dtype=pl.Int64),
            "subflow": pl.Series(c["subflow"], dtype=pl.UInt32),
            "seq": pl.Series(c["seq"], dtype=pl.Int64),
            "payload_bytes": pl.Series(c["payload_bytes"], dtype=pl.UInt32),
            "dsn": pl.Series(c["dsn"], dtype=pl.UInt64),
            "is_retrans": pl.Series(c["is_retrans"], dtype=pl.Boolean),
            "is_reinject": pl.Series(c["is_reinject"], dtype=pl.Boolean),
            "owd_ns": pl.Series(owd if owd is not None else [None] * n, dtype=pl.Int64),
        })
        return df.with_columns(
            point=pl.lit(point), dir=pl.lit(data_dir), ack=pl.lit(1, pl.UInt32),
            flags=pl.lit(_ACK | _PSH, pl.UInt16), frame_bytes=(pl.col("payload_bytes") + hdr).cast(pl.UInt32),
            rwnd_bytes=pl.lit(srv_win, pl.UInt64), data_ack=pl.lit(0, pl.UInt64),
        )

    parts.append(data_frame(columns(rec.snd, SndRow), "snd", len(rec.snd)))
    parts.append(data_frame(columns(rec.rcv, RcvRow), "rcv", len(rec.rcv)))
    drops_d = [r for r in rec.drop if r.is_data]
    drops_a = [r for r in rec.drop if not r.is_data]
    if drops_d:
        d = columns(drops_d, DropRow)
        d["seq"] = d["seq_or_ack"]
        parts.append(data_frame(d, "drop", len(drops_d)))
    if rec.ack or drops_a:
        a = columns(rec.ack, AckRow)
        x = columns(drops_a, DropRow)
        na, nx = len(rec.ack), len(drops_a)
        df = pl.DataFrame({
            "t_ns": pl.Series([*a["t_ns"], *x["t_ns"]], dtype=pl.Int64),
            "subflow": pl.Series([*a["subflow"], *x["subflow"]], dtype=pl.UInt32),
            "ack": pl.Series([*a["ack_seq"], *x["seq_or_ack"]], dtype=pl.Int64),
            "data_ack": pl.Series([*a["data_ack"], *[None] * nx], dtype=pl.UInt64),
            "rwnd_bytes": pl.Series([*a["rwnd_bytes"], *[None] * nx], dtype=pl.UInt64),
            "sack": pl.Series([*a["has_sack"], *[False] * nx], dtype=pl.Boolean),
            "point": pl.Series(["rcv"] * na + ["drop"] * nx, dtype=pl.String),
            "owd_ns": pl.Series([*a["owd_ns"], *[None] * nx], dtype=pl.Int64),
        })
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
    if rec is None or not rec.samples:
        return pl.DataFrame(schema=SAMPLES)
    c = columns(rec.samples, SampleRow)
    names = result.path_names
    rcv_ooo = pl.Series(c["rcv_ooo_bytes"], dtype=pl.UInt64)
    df = pl.DataFrame({
        "t_ns": pl.Series(c["t_ns"], dtype=pl.Int64),
        "kind": pl.Series(["periodic" if p else "ack" for p in c["is_periodic"]], dtype=pl.String),
        "conn": pl.Series([0] * len(rec.samples), dtype=pl.UInt32),
        "subflow": pl.Series(c["subflow"], dtype=pl.UInt32),
        "cwnd_segments": pl.Series(c["cwnd"], dtype=pl.Float64),
        "inflight_segments": pl.Series(c["inflight"], dtype=pl.UInt32),
        "srtt_ns": pl.Series(c["srtt_ns"], dtype=pl.Int64),
        "snd_queue_bytes": pl.Series(c["queued_bytes"], dtype=pl.UInt64),
        "snd_buf_bytes": pl.Series(c["snd_buf_bytes"], dtype=pl.UInt64),
        "rcv_ooo_bytes": rcv_ooo,
        "rcv_buf_bytes": rcv_ooo,  # the application reads in-order data at once
    })
    df = df.with_columns(path=pl.col("subflow").replace_strict(dict(enumerate(names)), return_dtype=pl.String))
    return df.select([pl.col(c).cast(t) for c, t in SAMPLES.items()]).sort("t_ns", maintain_order=True)
