"""The loop that earns trust: estimate a capture's path timelines, replay them with the scheduler the
capture was made with, and put observed and replayed metrics side by side.

Everything the replay needs that is not a path property is read off the capture too: the amount of
data (a finite transfer of the bytes delivered), the segment size and header overhead, and how long
the client waited before opening its extra subflows (the upstream path manager does not join at once,
and a late join shifts bytes to the first path).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from workbench.capture import Capture
from workbench.errors import InputError
from workbench.metrics import summarize
from workbench.metrics.throughput import path_stats

__all__ = ["CompareResult", "compare_capture", "replay_settings"]

# Metrics put side by side, and how to judge the difference: relative (rates, delays) or absolute
# (shares, in fraction points).
_ROWS: list[tuple[str, str]] = [("goodput_mbps", "rel"), ("ooo_p50_ms", "rel"), ("ooo_p95_ms", "rel"),
                                ("ooo_mean_ms", "rel"), ("completion_s", "rel")]


@dataclass
class CompareResult:
    """Observed vs. replayed numbers of one capture (`table`), and what was replayed."""

    source: str
    scheduler: str
    table: pl.DataFrame                       # metric, observed, replayed, error, error_kind
    observed: dict[str, Any]
    replayed: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    timelines: Any = None                     # the estimated Timelines that were replayed
    replay: Any = None                        # the ReplayResult
    warnings: list[str] = field(default_factory=list)


def replay_settings(cap: Capture, conn: int) -> dict[str, Any]:
    """What the capture says about the connection, beyond its paths: bytes delivered, MSS, header
    bytes per data segment, and the delay between the initial subflow's SYN/ACK and the first join."""
    ev = cap.connection(conn)
    s = summarize(ev, conn=conn)
    data_dir = s["data_dir"]
    data = ev.filter((pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
    mss = int(data["payload_bytes"].max())  # type: ignore[arg-type]
    full = data.filter(pl.col("payload_bytes") == mss)
    header = int((full["frame_bytes"].cast(pl.Int64) - full["payload_bytes"].cast(pl.Int64)).mode().min())  # type: ignore[arg-type]
    syn = 0x002
    ack = 0x010
    # Join delay at the client: from the SYN/ACK it received on subflow 0 to the SYN it sent on
    # subflow 1 (both observed at the client when the client was captured; from the server side the
    # same difference also holds the two paths' delays, so it is only used from a client view).
    join_delay_ns = 0
    hs = ev.filter((pl.col("flags") & syn) != 0)
    synack0 = hs.filter((pl.col("subflow") == 0) & ((pl.col("flags") & ack) != 0) & (pl.col("point") == "rcv"))
    join_syn = hs.filter((pl.col("subflow") > 0) & ((pl.col("flags") & ack) == 0) & (pl.col("point") == "snd")
                         & (pl.col("dir") == "c2s"))
    if synack0.height and join_syn.height:
        join_delay_ns = max(0, int(join_syn["t_ns"].min()) - int(synack0["t_ns"].min()))  # type: ignore[arg-type]
    return {"delivered_bytes": s["delivered_bytes"], "mss_bytes": mss, "header_bytes": header,
            "join_delay_ns": join_delay_ns, "data_dir": data_dir}


def compare_capture(
    cap: Capture, *, scheduler: Any = "upstream", conn: int | None = None, cc: str = "cubic",
    rcv_buf_bytes: int = 32 << 20, seed: int = 0, bin_ns: int = 100_000_000,
) -> CompareResult:
    """Estimate `cap`'s timelines, replay them with `scheduler` (a name or an instance) and the
    capture's own transfer, and compare. The receiver is modelled as upstream Linux (no quick-ACK on
    connection-level reordering) with autotuned send buffers and a receive buffer of `rcv_buf_bytes`
    (Linux tcp_rmem max)."""
    from workbench.replay import ConnectionConfig, Finite, run_replay
    from workbench.schedulers import get
    from workbench.timeline import EstimateOptions, estimate_timelines, to_path_configs

    conn = cap.main_connection if conn is None else conn
    settings = replay_settings(cap, conn)
    if not settings["delivered_bytes"]:
        raise InputError(cap.source, "no data delivered in order in this capture: nothing to replay")
    if settings["data_dir"] != "s2c":
        raise InputError(cap.source, "the replay models downloads (server to client); this connection uploads")
    sched = get(scheduler) if isinstance(scheduler, str) else scheduler
    ev = cap.connection(conn)
    tls = estimate_timelines(ev, EstimateOptions(bin_ns=bin_ns))
    span_ns = int(ev["t_ns"].max() - ev["t_ns"].min())  # type: ignore[operator]
    paths = to_path_configs(tls, duration_ns=span_ns)
    cfg = ConnectionConfig(mss_bytes=settings["mss_bytes"], header_bytes=settings["header_bytes"], cc=cc,
                           send_buf_bytes=None, rcv_buf_bytes=rcv_buf_bytes, quickack_on_meta_ooo=False,
                           join_delay_ns=settings["join_delay_ns"])
    result = run_replay(paths, sched, workload=Finite(size_bytes=int(settings["delivered_bytes"])), conn=cfg,
                        seed=seed, duration_ns=max(4 * span_ns, 30_000_000_000))
    observed = summarize(ev, conn=conn)
    replayed = summarize(result.events, result.samples)
    rows = []
    for metric, kind in _ROWS:
        rows.append(_row(metric, observed.get(metric), replayed.get(metric), kind))
    # Shares from what arrived at the client on each path, the same point for both sides.
    shares_obs = _shares(ev)
    shares_rep = _shares(result.events)
    for path in shares_obs:
        rows.append(_row(f"share_{path}", shares_obs.get(path), shares_rep.get(path), "abs"))
    for path in shares_obs:
        key = f"rtt_p50_ms_{path}"
        rows.append(_row(key, observed.get(key), replayed.get(key), "rel"))
    table = pl.DataFrame(rows, schema={"metric": pl.String, "observed": pl.Float64, "replayed": pl.Float64,
                                       "error": pl.Float64, "error_kind": pl.String}, orient="row")
    return CompareResult(source=cap.source, scheduler=sched.name, table=table, observed=observed, replayed=replayed,
                         settings=settings, timelines=tls, replay=result,
                         warnings=[n for tl in tls.values() for n in tl.notes if "assum" in n])


def _shares(events: pl.DataFrame) -> dict[str, float]:
    ps = path_stats(events, point="rcv")
    return {r["path"]: r["share"] for r in ps.iter_rows(named=True)}


def _row(metric: str, observed: Any, replayed: Any, kind: str) -> tuple[str, float | None, float | None,
                                                                         float | None, str]:
    if observed is None or replayed is None:
        return (metric, observed, replayed, None, kind)
    if kind == "abs":
        return (metric, float(observed), float(replayed), float(replayed) - float(observed), kind)
    err = (float(replayed) - float(observed)) / float(observed) if observed else None
    return (metric, float(observed), float(replayed), err, kind)
