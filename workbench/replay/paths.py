"""What the replay engine needs to know about one network path: piecewise-constant capacity, one-way
delay and random loss in each direction over time, plus the bottleneck buffer size.

Plain Python on purpose (no polars): the engine never imports table libraries. `workbench.timeline`
converts its `PathTimeline` tables into these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.experiment._model import LinkSpec, PathSpec
from workbench.experiment._series import StepSeries  # the one series type, shared with experiments

__all__ = ["PathConfig", "StepSeries", "path_specs"]


@dataclass(frozen=True)
class PathConfig:
    """One path between client and server. "down" = server -> client (the usual data direction),
    "up" = client -> server. Rates in bit/s, delays in ns (propagation part, without queueing),
    loss as a probability per packet, buffers in bytes (drop-tail at the bottleneck)."""

    name: str
    rate_down_bps: StepSeries
    rate_up_bps: StepSeries
    owd_down_ns: StepSeries
    owd_up_ns: StepSeries
    loss_down: StepSeries = field(default_factory=lambda: StepSeries.constant(0.0))
    loss_up: StepSeries = field(default_factory=lambda: StepSeries.constant(0.0))
    buffer_down_bytes: int = 150_000
    buffer_up_bytes: int = 150_000

    @classmethod
    def constant(cls, name: str, *, rate_bps: float, owd_ns: int, buffer_bytes: int = 150_000,
                 loss: float = 0.0, rate_up_bps: float | None = None, owd_up_ns: int | None = None,
                 ) -> PathConfig:
        """A path with constant, by default symmetric, rate and delay."""
        return cls(
            name=name,
            rate_down_bps=StepSeries.constant(rate_bps),
            rate_up_bps=StepSeries.constant(rate_up_bps if rate_up_bps is not None else rate_bps),
            owd_down_ns=StepSeries.constant(owd_ns),
            owd_up_ns=StepSeries.constant(owd_up_ns if owd_up_ns is not None else owd_ns),
            loss_down=StepSeries.constant(loss),
            loss_up=StepSeries.constant(0.0),
            buffer_down_bytes=buffer_bytes,
            buffer_up_bytes=buffer_bytes,
        )


def path_specs(p: PathConfig) -> tuple[tuple[LinkSpec, LinkSpec], PathSpec]:
    """The experiment's view of an engine path: its own bottleneck each way (``NAME/down``, ``NAME/up``)."""
    down = LinkSpec(f"{p.name}/down", rate_bps=p.rate_down_bps, owd_ns=p.owd_down_ns, loss=p.loss_down,
                    buffer_bytes=p.buffer_down_bytes)
    up = LinkSpec(f"{p.name}/up", rate_bps=p.rate_up_bps, owd_ns=p.owd_up_ns, loss=p.loss_up,
                  buffer_bytes=p.buffer_up_bytes)
    return (down, up), PathSpec(p.name, down=(down.name,), up=(up.name,))
