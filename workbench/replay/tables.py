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

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import polars as pl

from workbench.capture.schema import EVENT_POINTS, PACKET_EVENTS, SAMPLES
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
    """The run's packets as PACKET_EVENTS rows, in time order (rows at one time in the order: data
    ``snd``, data ``rcv``, data ``drop``, ACK ``rcv``, ACK ``drop``, handshake).

    Built as numpy columns and one frame: a chain of polars expressions per row kind was most of
    its cost (a report makes one per replay). `tests/test_replay_tables.py` holds it to that
    polars formulation row for row."""
    rec = result.recorder
    if rec is None:
        return pl.DataFrame(schema=PACKET_EVENTS)
    cfg = result.config
    srv_win = 65535 << 7  # the data sender's own receive window (it receives no data): constant
    data_dir, ack_dir = ("s2c", "c2s") if result.direction == "down" else ("c2s", "s2c")
    dir_code = {d: i for i, d in enumerate(_DIRS)}
    point_code = {p: i for i, p in enumerate(EVENT_POINTS)}

    snd, rcv = record_frame(rec, "snd"), record_frame(rec, "rcv")
    drops = record_frame(rec, "drop")
    acks = record_frame(rec, "ack")
    is_data = drops["is_data"].to_numpy()
    kinds: list[tuple[pl.DataFrame, str, bool]] = [(snd, "snd", True), (rcv, "rcv", True),
                                                   (drops.filter(pl.Series(is_data)), "drop", True),
                                                   (acks, "rcv", False), (drops.filter(pl.Series(~is_data)), "drop", False)]
    parts: list[_Part] = []
    for df, point, data in kinds:
        n = df.height
        if not n:
            continue
        full = np.ones(n, dtype=bool)
        if data:
            pay = df["payload_bytes"].to_numpy().astype(np.int64)
            owd = df["owd_ns"].to_numpy() if "owd_ns" in df.columns else np.zeros(n, np.int64)
            parts.append(_Part(
                t_ns=df["t_ns"].to_numpy(), subflow=df["subflow"].to_numpy(), dir=dir_code[data_dir],
                point=point_code[point], seq=df["seq" if point != "drop" else "seq_or_ack"].to_numpy(),
                ack=np.ones(n, np.int64), flags=_ACK | _PSH, payload_bytes=pay, frame_bytes=pay + cfg.header_bytes,
                rwnd_bytes=np.full(n, srv_win, np.int64), rwnd_ok=full, dsn=df["dsn"].to_numpy(), dsn_ok=full,
                data_ack=np.zeros(n, np.int64), data_ack_ok=full, is_retrans=df["is_retrans"].to_numpy(),
                is_reinject=df["is_reinject"].to_numpy(), owd_ns=owd, owd_ok=full if point == "rcv" else ~full))
        else:
            is_ack = point == "rcv"
            sack = df["has_sack"].to_numpy() if is_ack else np.zeros(n, bool)
            none = np.zeros(n, np.int64)
            parts.append(_Part(
                t_ns=df["t_ns"].to_numpy(), subflow=df["subflow"].to_numpy(), dir=dir_code[ack_dir],
                point=point_code[point], seq=np.ones(n, np.int64),
                ack=df["ack_seq" if is_ack else "seq_or_ack"].to_numpy(), flags=_ACK, payload_bytes=none,
                frame_bytes=cfg.ack_bytes + 12 * sack.astype(np.int64),
                rwnd_bytes=df["rwnd_bytes"].to_numpy() if is_ack else none, rwnd_ok=full if is_ack else ~full,
                dsn=none, dsn_ok=~full, data_ack=df["data_ack"].to_numpy() if is_ack else none,
                data_ack_ok=full if is_ack else ~full, is_retrans=~full, is_reinject=~full,
                owd_ns=df["owd_ns"].to_numpy() if is_ack else none, owd_ok=full if is_ack else ~full))
    if rec.handshake:
        # the data receiver's SYN (or SYN/ACK) and handshake ACK announce its initial window when it grows
        # one (tcp_select_initial_window); otherwise, as the sender's, a constant
        rcv_win = cfg.rcv_wnd_init_bytes if cfg.rcv_wnd_init_bytes is not None else srv_win
        parts.append(_handshake_part(rec.handshake, cfg.ack_bytes, {ack_dir: rcv_win, data_dir: srv_win},
                                     dir_code, point_code))
    if not parts:
        return pl.DataFrame(schema=PACKET_EVENTS)

    def cat(name: str) -> np.ndarray:
        return np.concatenate([np.broadcast_to(np.asarray(getattr(p, name)), p.t_ns.shape) for p in parts])

    t_ns = cat("t_ns").astype(np.int64)
    order = np.argsort(t_ns, kind="stable")  # a stable sort: rows at one time keep the order above

    def col(name: str, dtype: type[pl.DataType], ok: str | None = None) -> pl.Series:
        # converted and masked in numpy: a polars cast and `set` per column cost as much as the rest
        values = cat(name)[order]
        if dtype in _UNSIGNED and values.size and values.min() < 0:
            raise ValueError(f"a recorded {name} is negative")  # as polars' cast to an unsigned type would
        values = values.astype(_NUMPY_TYPES[dtype])
        return pl.Series(name, values if ok is None else np.ma.masked_array(values, ~cat(ok)[order]), dtype)

    subflow = cat("subflow")[order].astype(np.int64)
    return pl.DataFrame([
        pl.Series("t_ns", t_ns[order], pl.Int64),
        pl.Series("conn", np.zeros(t_ns.size, np.uint32), pl.UInt32),
        pl.Series("subflow", subflow, pl.UInt32),
        _path_labels(subflow, result.path_names),
        pl.Series("dir", _DIRS, PACKET_EVENTS["dir"]).gather(cat("dir")[order]),
        pl.Series("point", EVENT_POINTS, PACKET_EVENTS["point"]).gather(cat("point")[order]),
        pl.Series("seq", cat("seq")[order].astype(np.int64) & 0xFFFFFFFF, pl.UInt32),
        pl.Series("ack", cat("ack")[order].astype(np.int64) & 0xFFFFFFFF, pl.UInt32),
        col("flags", pl.UInt16),
        col("payload_bytes", pl.UInt32),
        col("frame_bytes", pl.UInt32),
        col("rwnd_bytes", pl.UInt64, "rwnd_ok"),
        col("dsn", pl.UInt64, "dsn_ok"),
        col("data_ack", pl.UInt64, "data_ack_ok"),
        pl.Series("data_fin", np.zeros(t_ns.size, bool), pl.Boolean),
        col("is_retrans", pl.Boolean),
        col("is_reinject", pl.Boolean),
        # (a 32-bit millisecond clock, wrapping as TCP's timestamps do)
        pl.Series("ts_val", (t_ns[order] // 1_000_000).astype(np.uint32), pl.UInt32),
        pl.Series("ts_ecr", [None], pl.UInt32).new_from_index(0, t_ns.size),  # all null (pl.repeat: 40x slower)
        col("owd_ns", pl.Int64, "owd_ok"),
    ])


_NUMPY_TYPES: dict[type[pl.DataType], type] = {pl.UInt16: np.uint16, pl.UInt32: np.uint32, pl.UInt64: np.uint64,
                                               pl.Int64: np.int64, pl.Boolean: np.bool_}
_UNSIGNED = (pl.UInt16, pl.UInt32, pl.UInt64)
_DIRS: list[str] = PACKET_EVENTS["dir"].categories.to_list()  # type: ignore[attr-defined]


class _Part(NamedTuple):
    """One row kind's columns for `packet_events` (numpy arrays, or one value for every row);
    ``*_ok``: where the column before it is not null."""

    t_ns: np.ndarray
    subflow: np.ndarray
    dir: np.ndarray | int
    point: np.ndarray | int
    seq: np.ndarray
    ack: np.ndarray
    flags: np.ndarray | int
    payload_bytes: np.ndarray
    frame_bytes: np.ndarray
    rwnd_bytes: np.ndarray
    rwnd_ok: np.ndarray
    dsn: np.ndarray
    dsn_ok: np.ndarray
    data_ack: np.ndarray
    data_ack_ok: np.ndarray
    is_retrans: np.ndarray
    is_reinject: np.ndarray
    owd_ns: np.ndarray
    owd_ok: np.ndarray


def _handshake_part(rows: list[HandshakeRow], ack_bytes: int, rwnd_bytes: dict[str, int], dir_code: dict[str, int],
                    point_code: dict[str, int]) -> _Part:
    """``snd`` and ``rcv`` rows of each handshake packet; ``rwnd_bytes``: the window each direction's
    packets announce."""
    syn = 0x002
    cols: dict[str, list[int]] = {k: [] for k in ("t_ns", "subflow", "dir", "point", "flags", "seq", "ack",
                                                  "frame_bytes", "rwnd_bytes", "owd_ns")}
    for r in rows:
        is_syn = bool(r.tcp_flags & syn)
        for point, t_ns in (("snd", r.t_sent_ns), ("rcv", r.t_arrived_ns)):
            for k, v in (("t_ns", t_ns), ("subflow", r.subflow), ("dir", dir_code[r.dir]),
                         ("point", point_code[point]), ("flags", r.tcp_flags), ("seq", 0 if is_syn else 1),
                         ("ack", 0 if r.tcp_flags == syn else 1),
                         ("frame_bytes", ack_bytes + (12 if is_syn else 0)),  # MSS, SACK-permitted, wscale
                         ("rwnd_bytes", rwnd_bytes[r.dir]), ("owd_ns", r.t_arrived_ns - r.t_sent_ns)):
                cols[k].append(v)
    a = {k: np.asarray(v, dtype=np.int64) for k, v in cols.items()}
    n = a["t_ns"].size
    full, none = np.ones(n, bool), np.zeros(n, np.int64)
    return _Part(t_ns=a["t_ns"], subflow=a["subflow"], dir=a["dir"], point=a["point"], seq=a["seq"],
                 ack=a["ack"], flags=a["flags"], payload_bytes=none, frame_bytes=a["frame_bytes"],
                 rwnd_bytes=a["rwnd_bytes"], rwnd_ok=full, dsn=none, dsn_ok=~full, data_ack=none, data_ack_ok=~full,
                 is_retrans=~full, is_reinject=~full, owd_ns=a["owd_ns"], owd_ok=a["point"] == point_code["rcv"])


def samples(result: ReplayResult) -> pl.DataFrame:
    """The run's SAMPLES rows in time order (rows at one time in recording order), from numpy columns
    (see `packet_events`; `tests/test_replay_tables.py` holds it to the polars formulation)."""
    rec = result.recorder
    if rec is None:
        return pl.DataFrame(schema=SAMPLES)
    c = record_frame(rec, "samples")
    if not c.height:
        return pl.DataFrame(schema=SAMPLES)
    t_ns = c["t_ns"].to_numpy()
    # the recorder samples in time order: the stable sort is only a guard
    order = slice(None) if bool((np.diff(t_ns) >= 0).all()) else np.argsort(t_ns, kind="stable")

    def col(name: str) -> np.ndarray:
        return c[name].to_numpy()[order]

    subflow = col("subflow").astype(np.int64)
    kinds: list[str] = SAMPLES["kind"].categories.to_list()  # type: ignore[attr-defined]
    kind = np.where(col("is_periodic"), kinds.index("periodic"), kinds.index("ack"))
    rcv_ooo = pl.Series(col("rcv_ooo_bytes"), dtype=pl.UInt64)
    return pl.DataFrame([
        pl.Series("t_ns", t_ns[order], pl.Int64),
        pl.Series("kind", kinds, SAMPLES["kind"]).gather(kind),
        pl.Series("conn", np.zeros(subflow.size, np.uint32), pl.UInt32),
        pl.Series("subflow", subflow, pl.UInt32),
        _path_labels(subflow, result.path_names),
        pl.Series("cwnd_segments", col("cwnd"), pl.Float64),
        pl.Series("inflight_segments", col("inflight"), pl.UInt32),
        pl.Series("srtt_ns", col("srtt_ns"), pl.Int64),
        pl.Series("snd_queue_bytes", col("queued_bytes"), pl.UInt64),
        pl.Series("snd_buf_bytes", col("snd_buf_bytes"), pl.UInt64),
        rcv_ooo.alias("rcv_ooo_bytes"),
        rcv_ooo.alias("rcv_buf_bytes"),  # the application reads in-order data at once
    ])


def _path_labels(subflow: np.ndarray, names: list[str]) -> pl.Series:
    """Column ``path``: each row's path name, by subflow index."""
    if subflow.size and (subflow.min() < 0 or subflow.max() >= len(names)):
        raise ValueError(f"a recorded subflow index is not one of the {len(names)} paths")
    return pl.Series("path", names, pl.String).gather(subflow)
