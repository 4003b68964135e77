"""The loop that earns trust: estimate a capture's path timelines, replay them with the scheduler the
capture was made with, and put observed and replayed metrics side by side.

Everything the replay needs that is not a path property is read off the capture too: the amount of
data (a finite transfer of the bytes delivered), the segment size and header overhead, and how long
the client waited before opening its extra subflows (the upstream path manager does not join at once,
and a late join shifts bytes to the first path).

What limits the comparison travels with it: ``CompareResult.warnings`` is a list of
`workbench.timeline.Caveat` (``path``, ``quantity``, ``kind``, ``message``; ``str()`` gives one line):
what the capture and the backend said (kind "capture" / "backend", path ""), every caveat of the
estimated timelines (one vantage point, delay from the handshake, outages, lower bounds, loss
bursts, subflows missing from the capture) and every value the replay had to assume ("assumed").
`CompareResult.warnings_for(metric)` says which of them bear on one row of the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import polars as pl

from workbench.capture import Capture
from workbench.errors import InputError
from workbench.metrics import summarize
from workbench.metrics.throughput import path_stats
from workbench.timeline.model import Caveat

__all__ = ["CompareResult", "compare_capture", "finished_transfer", "replay_settings"]

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
    replay: Any = None                        # the model's Run
    warnings: list[Caveat] = field(default_factory=list)  # each tied to a path ("" = all) and a quantity
    kernel: Any = None                        # the kernel backend's Run of the same experiment (with_kernel)
    experiment: Any = None                    # the Experiment that was replayed

    def warnings_for(self, metric: str) -> list[int]:
        """1-based indexes into ``warnings`` of those bearing on one table row: a path's rows
        (``share_<path>``, ``rtt_p50_ms_<path>``) get that path's and the session's, the others all."""
        paths = {w.path for w in self.warnings if w.path}
        if self.timelines is not None:
            paths |= set(self.timelines)
        path = next((p for p in sorted(paths, key=len, reverse=True) if metric.endswith(f"_{p}")), None)
        return [i + 1 for i, w in enumerate(self.warnings) if path is None or w.path in ("", path)]


def finished_transfer(events: pl.DataFrame, summary: dict[str, Any]) -> bool:
    """True when the capture shows a finished transfer: everything delivered, and the sender said it
    was done — a DATA_FIN, or (exports that cannot show DSS flags) a TCP FIN from the data sender on a
    subflow that carried data."""
    data_dir = summary.get("data_dir")
    if not summary.get("delivered_bytes") or summary.get("undelivered_bytes"):
        return False
    mine = events.filter(pl.col("dir") == data_dir)
    if mine.filter(pl.col("data_fin").fill_null(False)).height:
        return True
    carrying = mine.filter(pl.col("payload_bytes") > 0).select("conn", "subflow").unique()
    fin = mine.filter((pl.col("flags").cast(pl.Int64) & 0x001) != 0).join(carrying, on=["conn", "subflow"])
    return fin.height > 0


def replay_settings(cap: Capture, conn: int) -> dict[str, Any]:
    """What the capture says about the connection beyond its paths, as a mapping (see
    `workbench.capture_experiment.capture_settings`, the one reader of these values)."""
    from workbench.capture_experiment import capture_settings
    return capture_settings(cap, conn).as_dict()


def compare_capture(
    cap: Capture, *, scheduler: Any = "upstream", conn: int | None = None, cc: str = "cubic",
    rcv_buf_bytes: int | None = None, seed: int = 0, bin_ns: int = 100_000_000, backend: Any = "model",
    with_kernel: bool = False,
) -> CompareResult:
    """Estimate `cap`'s timelines, replay them with `scheduler` (a name or an instance) and the
    capture's own transfer, and compare. The receiver is modelled as upstream Linux (no quick-ACK on
    connection-level reordering) with autotuned send buffers and a receive buffer of `rcv_buf_bytes`
    (Linux tcp_rmem max; None = the buffer behind the largest window the capture shows, see
    `workbench.capture_experiment.capture_stack`). ``with_kernel`` also runs the same experiment on the real kernel (root):
    the table then has ``kernel`` and ``kernel_error`` (kernel vs observed) columns."""
    from workbench.backends import get_backend
    from workbench.capture_experiment import capture_settings, capture_stack, timelines_experiment
    from workbench.experiment import FiniteWorkload, SchedulerSpec
    from workbench.timeline import EstimateOptions, estimate_timelines

    conn = cap.main_connection if conn is None else conn
    cs = capture_settings(cap, conn)
    settings = cs.as_dict()
    if not cs.delivered_bytes:
        raise InputError(cap.source, "no data delivered in order in this capture: nothing to replay")
    spec = SchedulerSpec.of(scheduler) if isinstance(scheduler, str) else SchedulerSpec.instance(scheduler)
    ev = cap.connection(conn)
    tls = estimate_timelines(ev, EstimateOptions(bin_ns=bin_ns))
    span_ns = int(cast(int, ev["t_ns"].max()) - cast(int, ev["t_ns"].min()))
    experiment = timelines_experiment(
        tls, workload=FiniteWorkload(cs.delivered_bytes), scheduler=spec,
        stack=capture_stack(cs, congestion_control=cc, rcv_buf_bytes=rcv_buf_bytes), seed=seed,
        duration_ns=max(4 * span_ns, 30_000_000_000), span_ns=span_ns, join_after_ns=cs.join_after_ns,
        direction=cs.direction)
    result = get_backend(backend).run(experiment)
    observed = summarize(ev, conn=conn)
    rep_events = result.events
    point = "rcv"
    if observed.get("goodput_source") == "data_ack":
        # The capture holds the data sender only: the replay is measured from the same side (what its
        # sender sent and the ACKs it got), so both goodputs come from DATA_ACKs, both shares from the
        # sender's paths, and the OOO delay (the receiver's) is not compared.
        data_dir = observed["data_dir"]
        rep_events = rep_events.filter(((pl.col("dir") == data_dir) & (pl.col("point") == "snd"))
                                       | ((pl.col("dir") != data_dir) & (pl.col("point") == "rcv")))
        point = "snd"
    replayed = summarize(rep_events, result.samples)
    rows = []
    for metric, kind in _ROWS:
        rows.append(_row(metric, observed.get(metric), replayed.get(metric), kind))
    # Shares from what each path carried, at the same point for both sides: what arrived at the
    # receiver, or what the sender put on each path when only the sender was captured.
    shares_obs = _shares(ev, point)
    shares_rep = _shares(rep_events, point)
    for path in shares_obs:
        rows.append(_row(f"share_{path}", shares_obs.get(path), shares_rep.get(path), "abs"))
    for path in shares_obs:
        key = f"rtt_p50_ms_{path}"
        rows.append(_row(key, observed.get(key), replayed.get(key), "rel"))
    table = pl.DataFrame(rows, schema={"metric": pl.String, "observed": pl.Float64, "replayed": pl.Float64,
                                       "error": pl.Float64, "error_kind": pl.String}, orient="row")
    kernel_run = None
    backend_warnings = list(result.warnings)
    if with_kernel:
        kernel_run = get_backend("kernel").run(experiment)
        backend_warnings += [f"kernel: {w}" for w in kernel_run.warnings]
        ks = summarize(kernel_run.events)
        shares_k = _shares(kernel_run.events)
        kval = {m: ks.get(m) for m, _ in _ROWS} | {f"share_{p}": shares_k.get(p) for p in shares_obs} \
            | {f"rtt_p50_ms_{p}": ks.get(f"rtt_p50_ms_{p}") for p in shares_obs}
        table = table.with_columns(kernel=pl.Series([kval.get(m) for m in table["metric"]], dtype=pl.Float64))
        table = table.with_columns(kernel_error=pl.Series(
            [_row(m, o, k, kind)[3] for m, o, k, kind in
             zip(table["metric"], table["observed"], table["kernel"], table["error_kind"], strict=True)],
            dtype=pl.Float64))
    return CompareResult(source=cap.source, scheduler=spec.name, table=table, observed=observed, replayed=replayed,
                         settings=settings, timelines=tls, replay=result,
                         warnings=_caveats(tls, [*cap.warnings, *cs.warnings], backend_warnings),
                         kernel=kernel_run, experiment=experiment)


def _caveats(tls: Any, capture_warnings: Any, backend_warnings: Any) -> list[Caveat]:
    from workbench.timeline import fill_unknown

    out = [Caveat("", "capture", "capture", str(w)) for w in capture_warnings]
    out += [Caveat("", "replay", "backend", str(w)) for w in backend_warnings]
    for tl in tls.values():
        out += fill_unknown(tl).caveats  # the estimate's own caveats and what the replay assumes
    return list(dict.fromkeys(out))


def _shares(events: pl.DataFrame, point: str = "rcv") -> dict[str, float]:
    ps = path_stats(events, point=point)
    return {r["path"]: r["share"] for r in ps.iter_rows(named=True)}


def _row(metric: str, observed: Any, replayed: Any, kind: str) -> tuple[str, float | None, float | None,
                                                                         float | None, str]:
    if observed is None or replayed is None:
        return (metric, observed, replayed, None, kind)
    if kind == "abs":
        return (metric, float(observed), float(replayed), float(replayed) - float(observed), kind)
    err = (float(replayed) - float(observed)) / float(observed) if observed else None
    return (metric, float(observed), float(replayed), err, kind)
