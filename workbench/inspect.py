"""What `workbench inspect` shows, as plain data: a capture's connections and subflows with the
observed metrics of one connection. The CLI and the Streamlit page format it; tests read it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from workbench.capture import Capture, load
from workbench.capture._csvexport import group_csv_exports, is_csv_export
from workbench.errors import InputError
from workbench.metrics import summarize
from workbench.metrics.rtt import best_rtt_samples, owd_summary, rtt_summary
from workbench.metrics.throughput import path_stats

__all__ = ["inspect_capture", "inspect_loaded"]


def inspect_capture(
    file: str | Path, *, peer: str | Path | None = None, connection: int | None = None,
    path_names: dict[str, str] | None = None, reader: str = "auto",
) -> dict[str, Any]:
    """Load a capture (and its peer) and describe it; see `inspect_loaded`. A tshark CSV export of
    one subflow is loaded together with the other subflows' files of its connection beside it."""
    source: Path | list[Path]
    source = Path(file)
    if is_csv_export(source):
        if peer is not None:
            raise InputError(file, "--peer works with pcap/pcapng captures, not CSV exports")
        siblings = [p for p in source.parent.iterdir() if p.is_file() and p.suffix == source.suffix]
        source = next(g for g in group_csv_exports(siblings) if source in g)
    return inspect_loaded(load(source, peer=peer, path_names=path_names, reader=reader), connection=connection)


def inspect_loaded(cap: Capture, *, connection: int | None = None) -> dict[str, Any]:
    """Connections, subflows of one connection (default: the busiest MPTCP one) with bytes, share,
    RTT and retransmissions, its headline metrics, one-way delays (pair) and the warnings."""
    conn = cap.main_connection if connection is None else connection
    ev = cap.connection(conn)
    metrics = summarize(ev, conn=conn)
    per_path = {r["path"]: r for r in path_stats(ev).iter_rows(named=True)}
    rtts = {(r["subflow"]): r for r in rtt_summary(best_rtt_samples(ev), by=("subflow",)).iter_rows(named=True)}
    data_dir = metrics["data_dir"]
    sf_rows = []
    sfs = cap.subflows.filter(pl.col("conn") == conn)
    # Count what the sender put on each subflow when the sender was observed, else what arrived.
    data = ev.filter(pl.col("dir") == data_dir)
    point = "snd" if (data["point"] == "snd").any() else "rcv"
    data_bytes = data.filter(pl.col("point") == point).group_by("subflow").agg(
        b=pl.col("payload_bytes").sum(), retrans=pl.col("is_retrans").sum(), reinj=pl.col("is_reinject").sum(),
    )
    by_sf = {r["subflow"]: r for r in data_bytes.iter_rows(named=True)}
    total = sum(r["b"] for r in by_sf.values()) or 0
    for s in sfs.iter_rows(named=True):
        b = by_sf.get(s["subflow"], {"b": 0, "retrans": 0, "reinj": 0})
        rt = rtts.get(s["subflow"], {})
        sf_rows.append({
            "subflow": s["subflow"], "path": s["path"], "client": s["client"], "server": s["server"],
            "join": s["join"], "fallback": s["fallback"], "packets": s["packets"], "data_bytes": b["b"],
            "share": (b["b"] / total) if total else None, "duration_s": s["duration_s"],
            "rtt_min_ms": rt.get("rtt_min_ms"), "rtt_p50_ms": rt.get("rtt_p50_ms"),
            "retrans": b["retrans"], "reinjections": b["reinj"],
        })
    owd = [
        {"path": r["path"], "dir": r["dir"], "n": r["n"], "min_ms": r["owd_min_ms"], "p50_ms": r["owd_p50_ms"],
         "p95_ms": r["owd_p95_ms"], "max_ms": r["owd_max_ms"]}
        for r in owd_summary(ev).iter_rows(named=True)
    ]
    conns = cap.connections.select("conn", "kind", "version", "vantage", "subflows", "packets", "bytes_s2c",
                                   "bytes_c2s", "duration_s").to_dicts()
    ooo_note = None
    if not metrics.get("ooo_n"):
        has_rcv = ev.filter((pl.col("point") == "rcv") & (pl.col("dir") == data_dir)).height > 0
        ooo_note = ("no MPTCP out-of-order delay: plain TCP connection" if not _is_mptcp(cap, conn)
                    else "no MPTCP out-of-order delay: the capture was not taken at the receiver "
                         "(give the receiver's capture with --peer)" if not has_rcv else None)
    return {
        "source": cap.source, "peer": cap.peer, "reader": cap.reader, "connections": conns,
        "detail": {"conn": conn, "data_dir": data_dir, "subflows": sf_rows, "metrics": metrics,
                   "paths": per_path, "owd": owd, "ooo_note": ooo_note},
        "warnings": cap.warnings,
    }


def _is_mptcp(cap: Capture, conn: int) -> bool:
    row = cap.connections.filter(pl.col("conn") == conn)
    if row.is_empty():
        raise InputError(cap.source, f"no connection {conn}")
    return bool(row["is_mptcp"][0])
