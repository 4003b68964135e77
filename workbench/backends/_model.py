"""The ``model`` backend: the discrete-event engine (`workbench.replay`) runs the experiment.

This module is the one place that translates an `Experiment` into the engine's objects (path
configurations, connection settings, workload writer, scheduler instance) and back, so no caller
wires the engine itself."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from workbench.backends._base import Backend, Run, UnsupportedExperiment
from workbench.experiment import (
    BulkWorkload,
    BurstsWorkload,
    Experiment,
    FiniteWorkload,
    StackProfile,
    TraceWorkload,
    WorkloadSpec,
)

if TYPE_CHECKING:
    from workbench.replay import ConnectionConfig, PathConfig, Route, Workload

__all__ = ["ModelBackend", "engine_connection", "engine_paths", "engine_routes", "engine_scheduler",
           "engine_workload"]


def engine_workload(w: WorkloadSpec) -> Workload:
    from workbench.replay import AppTrace, Bulk, Bursts, Finite
    if isinstance(w, BulkWorkload):
        return Bulk(stop_ns=w.stop_ns)
    if isinstance(w, FiniteWorkload):
        return Finite(size_bytes=w.size_bytes)
    if isinstance(w, BurstsWorkload):
        return Bursts(segments=w.segments, idle_ns=w.idle_ns, n_bursts=w.n_bursts)
    if isinstance(w, TraceWorkload):
        return AppTrace(writes=list(w.writes))
    raise TypeError(f"unknown workload spec {w!r}")


def engine_connection(stack: StackProfile, *, join_after_ns: int = 0, backup: tuple[str, ...] = (),
                      sample_interval_ns: int = 10_000_000, plain_tcp: bool = False,
                      rcv_buf_autotuning: bool = False) -> ConnectionConfig:
    """Engine connection settings from kernel-named stack settings. The engine's receive window at most
    is the share the kernel advertises of the largest receive buffer (scaling_ratio x tcp_rmem[2]); the
    send buffer is autotuned unless SO_SNDBUF locks it. ``rcv_buf_autotuning``: grow the receive buffer
    from tcp_rmem[1] as Linux 6.18 does where the stack has tcp_moderate_rcvbuf (docs/MODEL.md A5; off by
    default until its 3 s fidelity loss is understood)."""
    from workbench.replay import ConnectionConfig
    extra: dict[str, Any] = {}
    if stack.frame_overhead_bytes is not None:
        extra["header_bytes"] = stack.frame_overhead_bytes
    cfg = ConnectionConfig(
        mss_bytes=stack.advmss, send_buf_bytes=stack.tcp_wmem[2] if stack.sndbuf_locked else None,
        rcv_buf_bytes=int(stack.tcp_rmem[2] * stack.scaling_ratio), cc=stack.congestion_control, hystart=stack.hystart,
        init_cwnd=stack.initcwnd, rto_min_ns=int(stack.rto_min_ms * 1e6), delayed_ack=not stack.quickack,
        delack_ns=int(stack.delack_min_ms * 1e6), quickack_on_meta_ooo=stack.mptcp_ooo_quickack,
        reinject_on_subflow_rto=stack.reinject_on_subflow_rto, join_delay_ns=join_after_ns,
        join_when_established=stack.join_when_established,
        sample_interval_ns=sample_interval_ns, backup=backup, **extra)
    if stack.rcv_wnd_growth:
        # tcp_select_initial_window: win_from_space(tcp_rmem[1]) at the default ratio (1/2), at most
        # 65535 (the SYN's window is not scaled), rounded down to whole MSS
        mss = cfg.tcp_mss_bytes
        cfg = replace(cfg, rcv_wnd_init_bytes=max(min(stack.tcp_rmem[1] // 2, 65535) // mss, 1) * mss)
        if rcv_buf_autotuning and stack.tcp_moderate_rcvbuf:
            # receive-buffer autotuning from tcp_rmem[1]: the window that first buffer allows
            cfg = replace(cfg, rcv_buf_init_bytes=int(stack.tcp_rmem[1] * stack.scaling_ratio))
    return ConnectionConfig.single_path_tcp(cfg) if plain_tcp else cfg


def engine_paths(e: Experiment) -> list[PathConfig]:
    """One engine path per subflow, in subflow order, for experiments whose subflows each have their
    own single-link path (what `run_replay` and the path-level helpers take)."""
    from workbench.replay import PathConfig
    out = []
    for s in e.subflows:
        p = e.path(s.path)
        down, up = e.link(p.down[0]), e.link(p.up[0])
        out.append(PathConfig(name=p.name, rate_down_bps=down.rate_bps, rate_up_bps=up.rate_bps,
                              owd_down_ns=down.owd_ns, owd_up_ns=up.owd_ns, loss_down=down.loss,
                              loss_up=up.loss, buffer_down_bytes=down.buffer_size_bytes,
                              buffer_up_bytes=up.buffer_size_bytes))
    return out


def engine_routes(e: Experiment) -> list[Route]:
    """One route per subflow: its data cross the path's links in the transfer's direction."""
    from workbench.replay import Route
    (transfer,) = e.transfers
    out = []
    for s in e.subflows:
        p = e.path(s.path)
        data, ack = (p.down, p.up) if transfer.direction == "down" else (p.up, p.down)
        out.append(Route(p.name, data=data, ack=ack, backup=s.backup))
    return out


def engine_scheduler(e: Experiment) -> Any:
    if e.scheduler.obj is not None:
        return e.scheduler.obj
    from workbench.plugins import resolve_scheduler
    return resolve_scheduler(e.scheduler.name, e.scheduler.params_dict)


class ModelBackend(Backend):
    """The replay engine. ``sample_interval_ns`` sets the Samples period (0 = none);
    ``rcv_buf_autotuning`` turns on the receive-buffer autotuning model (`engine_connection`)."""

    name: ClassVar[str] = "model"
    capabilities: ClassVar[frozenset[str]] = frozenset({
        "upload", "shared-bottleneck", "many-subflows", "python-scheduler", "kernel-scheduler", "time-varying",
        "random-loss", "plain-tcp", "deterministic"})

    def __init__(self, *, sample_interval_ns: int = 10_000_000, rcv_buf_autotuning: bool = False) -> None:
        self.sample_interval_ns = sample_interval_ns
        self.rcv_buf_autotuning = rcv_buf_autotuning

    def check(self, experiment: Experiment) -> None:
        super().check(experiment)
        joins = {s.join_after_ns for s in experiment.subflows[1:]}
        if len(joins) > 1:
            raise UnsupportedExperiment(self.name, "subflows joining at different times")

    def run(self, experiment: Experiment, *, record: bool = True, workdir: Path | None = None) -> Run:
        from workbench.replay import run_network
        self.check(experiment)
        e = experiment
        (transfer,) = e.transfers
        joins = [s.join_after_ns for s in e.subflows[1:]]
        cfg = engine_connection(e.stack, join_after_ns=joins[0] if joins else 0,
                                sample_interval_ns=self.sample_interval_ns, plain_tcp=e.protocol == "tcp",
                                rcv_buf_autotuning=self.rcv_buf_autotuning)
        r = run_network(e.links, engine_routes(e), engine_scheduler(e), workload=engine_workload(transfer.workload),
                        conn=cfg, seed=e.seed, duration_ns=e.duration_ns, record=record,
                        direction=transfer.direction)
        counters = {k: v for k, v in r.summary.items() if k != "wall_s"}
        # "scheduler_code": "compiled" (a built-in's Rust port) or "bridge" (Python, called per decision)
        prov = {"backend": self.name, "scheduler": r.scheduler, "scheduler_code": r.engine_stats["scheduler"],
                "wall_s": r.summary["wall_s"]}
        return Run(backend=self.name, experiment=e, counters=counters, provenance=prov,
                   events_fn=(lambda: r.events) if record else None,
                   samples_fn=(lambda: r.samples) if record else None, detail=r, observations=r.observations)
