"""Convenience builders for the common shape: one dedicated bottleneck per path and direction, one
subflow per path, one transfer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.experiment._model import (
    Direction,
    Experiment,
    LinkSpec,
    PathSpec,
    SchedulerSpec,
    SubflowSpec,
    TransferSpec,
)
from workbench.experiment._series import StepSeries
from workbench.experiment._stack import StackProfile, stack_profile
from workbench.experiment._workload import WorkloadSpec

__all__ = ["experiment_from_paths", "two_way_path"]


def _series(v: float | StepSeries) -> StepSeries:
    return v if isinstance(v, StepSeries) else StepSeries.constant(float(v))


def two_way_path(name: str, *, rate_bps: float | StepSeries, owd_ns: float | StepSeries,
                 buffer_bytes: int | None = None, buffer_packets: int | None = None,
                 loss: float | StepSeries = 0.0, rate_up_bps: float | StepSeries | None = None,
                 owd_up_ns: float | StepSeries | None = None, loss_up: float | StepSeries = 0.0,
                 buffer_up_bytes: int | None = None, buffer_up_packets: int | None = None,
                 ) -> tuple[tuple[LinkSpec, LinkSpec], PathSpec]:
    """A path with its own bottleneck each way (``NAME/down``, ``NAME/up``); the uplink copies the
    downlink's rate, delay and buffer unless given."""
    if buffer_up_bytes is None and buffer_up_packets is None:
        buffer_up_bytes, buffer_up_packets = buffer_bytes, buffer_packets
    down = LinkSpec(f"{name}/down", rate_bps=_series(rate_bps), owd_ns=_series(owd_ns), loss=_series(loss),
                    buffer_bytes=buffer_bytes, buffer_packets=buffer_packets)
    up = LinkSpec(f"{name}/up", rate_bps=_series(rate_up_bps if rate_up_bps is not None else rate_bps),
                  owd_ns=_series(owd_up_ns if owd_up_ns is not None else owd_ns), loss=_series(loss_up),
                  buffer_bytes=buffer_up_bytes, buffer_packets=buffer_up_packets)
    return (down, up), PathSpec(name, down=(down.name,), up=(up.name,))


def _scheduler(s: Any) -> SchedulerSpec:
    if isinstance(s, SchedulerSpec):
        return s
    if isinstance(s, str):
        return SchedulerSpec.of(s)
    return SchedulerSpec.instance(s)


def experiment_from_paths(paths: Sequence[tuple[tuple[LinkSpec, ...], PathSpec]], *, workload: WorkloadSpec,
                          scheduler: Any = "upstream", direction: Direction = "down",
                          stack: StackProfile | None = None, seed: int = 0, duration_ns: int | None = None,
                          join_after_ns: int = 0, backup: Sequence[str] = ()) -> Experiment:
    """One subflow per path (the first path carries the initial subflow), one transfer."""
    links = tuple(lk for lks, _ in paths for lk in lks)
    specs = tuple(p for _, p in paths)
    subflows = tuple(SubflowSpec(p.name, join_after_ns=join_after_ns if i else 0, backup=p.name in backup)
                     for i, p in enumerate(specs))
    return Experiment(links=links, paths=specs, subflows=subflows,
                      transfers=(TransferSpec(direction, workload),),
                      stack=stack if stack is not None else stack_profile("linux-upstream"),
                      scheduler=_scheduler(scheduler), seed=seed, duration_ns=duration_ns)
