"""Headline numbers of one connection as one flat dict: what the CLI prints, reports tabulate and the
tuner optimises. Every value is computed by the metric modules; this only picks and renames.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import cast

import polars as pl

from workbench.errors import InputError
from workbench.metrics._common import data_directions, select_conn, start_times, with_data_dir
from workbench.metrics.buffers import buffer_summary
from workbench.metrics.burst import burst_summary, burstiness, send_bursts
from workbench.metrics.ooo import _segments_all, queue_from_segments, summarize_segments
from workbench.metrics.rtt import best_rtt_samples, owd_summary, rtt_summary
from workbench.metrics.throughput import (
    app_delay_from_segments,
    goodput_from_data_acks,
    goodput_from_segments,
    path_stats,
)

__all__ = ["Prepared", "Summary", "main_connection", "prepare", "summarize", "summarize_prepared"]

Summary = dict[str, float | int | str | bool | None]


def main_connection(events: pl.DataFrame) -> int:
    """The connection carrying the most payload bytes (at its best-observed point)."""
    if events.height == 0:
        raise InputError(None, "no packet events to summarize")
    conns = events["conn"].unique()
    if conns.len() == 1 and conns.null_count() == 0 and (events["point"] != "drop").any():
        return int(conns[0])  # one connection (every replay): no group-by over every row
    per = (
        events.filter(pl.col("point") != "drop")
        .group_by("conn", "dir", "point")
        .agg(pl.col("payload_bytes").cast(pl.Int64).sum().alias("b"))
        .group_by("conn", "dir").agg(pl.col("b").max())
        .group_by("conn").agg(pl.col("b").max())
        .sort(["b", "conn"], descending=[True, False])
    )
    return int(per["conn"][0])


def _f(x: object) -> float | None:
    return None if x is None else float(x)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Prepared:
    """What the metrics of one connection start from, derived once and read by many: its packet events
    tagged with its data direction (`with_data_dir`), the receiver's segments with duplicates
    (`ooo.ooo_segments(..., include_duplicates=True)`) and its time origin (`start_times`). A report
    draws a source's figures from the same `Prepared` its summary came from."""

    conn: int
    events: pl.DataFrame
    segments: pl.DataFrame
    start: pl.DataFrame

    @cached_property
    def firsts(self) -> pl.DataFrame:
        """The segments that brought new bytes (`ooo_segments` without duplicates)."""
        return self.segments.filter(~pl.col("is_duplicate"))

    @cached_property
    def ooo_queue(self) -> pl.DataFrame:
        """The receive OOO queue's step series (`ooo.ooo_queue_series`)."""
        return queue_from_segments(self.firsts)


def prepare(events: pl.DataFrame, conn: int | None = None) -> Prepared:
    """`Prepared` for connection ``conn`` (default: the one carrying the most data)."""
    if conn is None:
        conn = main_connection(events)
    ev = with_data_dir(select_conn(events, conn))
    if ev.height == 0:
        raise InputError(None, f"no packet events for connection {conn}")
    return Prepared(conn, ev, _segments_all(ev), start_times(ev))


def summarize(events: pl.DataFrame, samples: pl.DataFrame | None = None, *, conn: int | None = None) -> Summary:
    """Headline metrics of connection ``conn`` (default: the one carrying the most data): `summarize_prepared`
    of `prepare`.

    Keys (absent inputs give None, never an exception):
      conn, data_dir;
      goodput_mbps, delivered_bytes, completion_s, undelivered_bytes (see `throughput.goodput`; from
      the DATA_ACKs the sender received when the receiver was not observed,
      `throughput.goodput_from_data_acks`), goodput_source ("receiver", "data_ack" or None);
      ooo_n, ooo_mean_ms, ooo_p50_ms, ooo_p95_ms, ooo_p99_ms, ooo_max_ms, ooo_fraction, duplicates,
      undeliverable, ooo_queue_max_bytes (see `ooo`);
      app_delay_mean_ms, app_delay_p95_ms, app_delay_max_ms (both points needed);
      retrans, reinjections (connection totals, data direction, at the point `path_stats` picks),
      redundant_fraction (1 − unique bytes / bytes at that point);
      per path P: bytes_P, share_P, throughput_mbps_P, retrans_P, reinjections_P,
      rtt_min_ms_P, rtt_p50_ms_P, rtt_mean_ms_P, rtt_p95_ms_P (seq/ack samples with Karn's rule when
      the sender was observed, else timestamp samples; ``rtt_method`` says which),
      owd_p50_ms_P_DIR, owd_p95_ms_P_DIR (when OWDs are known);
      burst_segments_mean, burst_segments_p95, burst_segments_max (send bursts, all subflows);
      free_cwnd_mean_segments, free_cwnd_peak_segments, fast_path, snd_buf_max_bytes,
      rcv_buf_max_bytes, rcv_ooo_max_bytes (with ``samples``).
    """
    return summarize_prepared(prepare(events, conn), samples)


def summarize_prepared(prep: Prepared, samples: pl.DataFrame | None = None) -> Summary:
    """`summarize` of a connection already prepared (see `summarize` for the keys)."""
    conn, ev, seg_all = prep.conn, prep.events, prep.segments
    out: Summary = {"conn": conn, "data_dir": str(data_directions(ev)["data_dir"][0])}

    seg = prep.firsts
    gp = goodput_from_segments(ev, seg, prep.start)
    out["goodput_source"] = "receiver" if gp.height else None
    if not gp.height and "data_ack" in ev.columns and "dsn" in ev.columns:
        gp = goodput_from_data_acks(ev)  # the sender's capture alone
        out["goodput_source"] = "data_ack" if gp.height else None
    g = gp.row(0, named=True) if gp.height else {}
    goodput_bps = _f(g.get("goodput_bps"))
    out["goodput_mbps"] = goodput_bps / 1e6 if goodput_bps is not None else None
    out["delivered_bytes"] = g.get("bytes")
    out["completion_s"] = _f(g.get("completion_s"))
    out["undelivered_bytes"] = g.get("undelivered_bytes")

    oo = summarize_segments(seg_all)
    o = oo.row(0, named=True) if oo.height else {}
    out["ooo_n"] = o.get("n_segments")
    for stat in ("mean", "p50", "p95", "p99", "max"):
        out[f"ooo_{stat}_ms"] = _f(o.get(f"ooo_delay_{stat}_ms"))
    out["ooo_fraction"] = _f(o.get("ooo_fraction"))
    out["duplicates"] = o.get("n_duplicates")
    out["undeliverable"] = o.get("n_undeliverable")
    q = prep.ooo_queue
    out["ooo_queue_max_bytes"] = int(q["ooo_bytes"].max()) if q.height else None  # type: ignore[arg-type]

    ad = app_delay_from_segments(ev, seg)  # (it leaves out the segments never deliverable)
    a_ms = ad["app_delay_ns"].cast(pl.Float64) / 1e6
    out["app_delay_mean_ms"] = _f(a_ms.mean()) if ad.height else None
    out["app_delay_p95_ms"] = _f(a_ms.quantile(0.95, "linear")) if ad.height else None
    out["app_delay_max_ms"] = _f(a_ms.max()) if ad.height else None

    ps = path_stats(ev)
    out["retrans"] = int(ps["retrans"].sum()) if ps.height else None
    out["reinjections"] = int(ps["reinjections"].sum()) if ps.height else None
    # Share of the data-direction bytes that were redundant (retransmitted or reinjected copies).
    out["redundant_fraction"] = (1.0 - cast(int, ps["unique_bytes"].sum()) / cast(int, ps["bytes"].sum())
                                 if ps.height and ps["bytes"].sum() > 0 else None)
    for p in ps.iter_rows(named=True):
        name = p["path"]
        out[f"bytes_{name}"] = p["bytes"]
        out[f"share_{name}"] = _f(p["share"])
        throughput_bps = _f(p["throughput_bps"])
        out[f"throughput_mbps_{name}"] = throughput_bps / 1e6 if throughput_bps is not None else None
        out[f"retrans_{name}"] = p["retrans"]
        out[f"reinjections_{name}"] = p["reinjections"]

    rs = best_rtt_samples(ev)
    method = rs["method"][0] if rs.height else None
    out["rtt_method"] = method
    if method is not None:
        for r in rtt_summary(rs, by=("path",)).iter_rows(named=True):
            for stat in ("min", "p50", "mean", "p95"):
                out[f"rtt_{stat}_ms_{r['path']}"] = _f(r[f"rtt_{stat}_ms"])

    for r in owd_summary(ev).iter_rows(named=True):
        out[f"owd_p50_ms_{r['path']}_{r['dir']}"] = _f(r["owd_p50_ms"])
        out[f"owd_p95_ms_{r['path']}_{r['dir']}"] = _f(r["owd_p95_ms"])

    bs = burst_summary(send_bursts(ev), by=("conn",))
    b = bs.row(0, named=True) if bs.height else {}
    out["burst_segments_mean"] = _f(b.get("burst_segments_mean"))
    out["burst_segments_p95"] = _f(b.get("burst_segments_p95"))
    out["burst_segments_max"] = b.get("burst_segments_max")

    bu = burstiness(samples, conn) if samples is not None and samples.height else None
    c = bu.row(0, named=True) if bu is not None and bu.height else {}
    out["free_cwnd_mean_segments"] = _f(c.get("free_cwnd_mean_segments"))
    out["free_cwnd_peak_segments"] = _f(c.get("free_cwnd_peak_segments"))
    out["fast_path"] = c.get("path")
    bf = buffer_summary(samples, conn) if samples is not None and samples.height else None
    f = bf.row(0, named=True) if bf is not None and bf.height else {}
    for k in ("snd_buf_max_bytes", "rcv_buf_max_bytes", "rcv_ooo_max_bytes"):
        out[k] = f.get(k)
    return out
