"""Tiny builders for hand-made PacketEvents / Samples tables used by the metrics tests.

Times are given in milliseconds for readability and stored as ns. Every column of the contract is
present with its contract dtype; unspecified columns take neutral defaults (no flags, not a
retransmission, no timestamps, no owd).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from workbench.capture.schema import PACKET_EVENTS, SAMPLES

MS = 1_000_000  # ns per ms

SYN, ACK = 0x002, 0x010

_DEFAULTS: dict[str, Any] = {
    "conn": 0, "subflow": 0, "path": "wifi", "dir": "s2c", "point": "rcv", "seq": 0, "ack": 0,
    "flags": ACK, "payload_bytes": 0, "frame_bytes": None, "rwnd_bytes": 65535, "dsn": None,
    "data_ack": None, "data_fin": False, "is_retrans": False, "is_reinject": False, "ts_val": None,
    "ts_ecr": None, "owd_ns": None,
}


def row(t_ms: float, **kw: Any) -> dict[str, Any]:
    r = dict(_DEFAULTS)
    r.update(kw)
    r["t_ns"] = round(t_ms * MS)
    if r["frame_bytes"] is None:
        r["frame_bytes"] = r["payload_bytes"] + 52
    return r


def seg(t_ms: float, dsn: int, n: int, **kw: Any) -> dict[str, Any]:
    """A data segment carrying DSN bytes [dsn, dsn + n) (default: s2c, observed at the receiver)."""
    kw.setdefault("seq", dsn + 1)
    return row(t_ms, dsn=dsn, payload_bytes=n, **kw)


def events(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """A PacketEvents table from row dicts, with the contract's column order and dtypes."""
    cols = {c: [r.get(c) for r in rows] for c in PACKET_EVENTS}
    return pl.DataFrame(cols, schema=PACKET_EVENTS)


def samples(rows: list[dict[str, Any]]) -> pl.DataFrame:
    base = {"kind": "ack", "conn": 0, "subflow": 0, "path": "wifi", "cwnd_segments": 10.0,
            "inflight_segments": 0, "srtt_ns": 10 * MS, "snd_queue_bytes": 0, "snd_buf_bytes": 0,
            "rcv_ooo_bytes": 0, "rcv_buf_bytes": 0}
    full = []
    for r in rows:
        d = dict(base)
        d.update(r)
        d["t_ns"] = round(d.pop("t_ms") * MS) if "t_ms" in d else d["t_ns"]
        full.append(d)
    return pl.DataFrame({c: [r.get(c) for r in full] for c in SAMPLES}, schema=SAMPLES)
