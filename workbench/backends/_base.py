"""The seam between an `Experiment` and whatever runs it, the way Optuna puts its storages behind one
API: a `Backend` declares what it can run (``capabilities``), refuses what it cannot with one line
(``check``), and turns an experiment into a `Run` — PacketEvents and Samples in the one schema
captures use, counters, provenance and warnings that change how far the numbers can be trusted."""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from workbench.errors import InputError

if TYPE_CHECKING:
    import polars as pl

    from workbench.experiment import Experiment

__all__ = ["CAPABILITIES", "Backend", "Run", "UnsupportedExperiment"]

# What an experiment may ask for beyond the basics (one download, one dedicated bottleneck per path
# and direction, one subflow per path, a registered scheduler by name).
CAPABILITIES = frozenset({
    "upload",              # transfers client -> server
    "shared-bottleneck",   # links crossed by several subflows, routes of several links
    "many-subflows",       # more than one subflow per path
    "python-scheduler",    # a scheduler given as a Python object or any registered model scheduler
    "kernel-scheduler",    # only the schedulers the kernel itself has (upstream default)
    "time-varying",        # capacity / delay / loss that change over time
    "random-loss",
    "plain-tcp",           # protocol="tcp" (single-path baselines)
    "deterministic",       # same experiment and seed give identical events
})


class UnsupportedExperiment(InputError):
    """The backend cannot run this experiment (one line: which backend, what it lacks)."""

    def __init__(self, backend: str, problem: str) -> None:
        super().__init__(None, f"the {backend} backend cannot run this experiment: {problem}")


@dataclass
class Run:
    """What one backend run produced. ``events`` (PacketEvents) and ``samples`` (Samples) may be built
    on first access; ``counters`` are plain numbers (drops, retransmissions, ...); ``provenance`` says
    what ran (backend, versions, settings as applied); ``warnings`` are one line each."""

    backend: str
    experiment: Experiment
    counters: dict[str, Any]
    provenance: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    events_fn: Callable[[], pl.DataFrame] | None = field(default=None, repr=False)
    samples_fn: Callable[[], pl.DataFrame | None] | None = field(default=None, repr=False)
    detail: Any = field(default=None, repr=False)  # backend-specific (the model's ReplayResult, ...)
    observations: list[tuple[int, str, int, Any]] = field(default_factory=list, repr=False)  # from schedulers
    _events: Any = field(default=None, repr=False)
    _samples: Any = field(default=None, repr=False)

    @property
    def events(self) -> pl.DataFrame:
        if self._events is None:
            if self.events_fn is None:
                raise ValueError(f"the {self.backend} run was made without recording events")
            self._events = self.events_fn()
        return self._events

    @property
    def samples(self) -> pl.DataFrame | None:
        if self._samples is None and self.samples_fn is not None:
            self._samples = self.samples_fn()
        return self._samples

    @property
    def path_names(self) -> list[str]:
        return self.experiment.path_names


class Backend(abc.ABC):
    """Runs experiments. Subclasses set ``name`` and ``capabilities`` and implement ``run``; ``check``
    refuses experiments that need a capability the backend lacks."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[str]]

    def check(self, experiment: Experiment) -> None:
        """Raise `UnsupportedExperiment` (one line) when this backend cannot run ``experiment``."""
        missing = sorted(required_capabilities(experiment) - self.capabilities)
        if missing:
            raise UnsupportedExperiment(self.name, "needs " + ", ".join(missing))

    @abc.abstractmethod
    def run(self, experiment: Experiment, *, record: bool = True, workdir: Path | None = None) -> Run:
        """Run ``experiment``; ``record=False`` may skip building the per-packet tables."""


def required_capabilities(e: Experiment) -> set[str]:
    need: set[str] = set()
    if any(t.direction == "up" for t in e.transfers):
        need.add("upload")
    if e.shares_bottleneck or any(len(p.down) > 1 or len(p.up) > 1 for p in e.paths):
        need.add("shared-bottleneck")
    if len({s.path for s in e.subflows}) != len(e.subflows):
        need.add("many-subflows")
    if e.scheduler.obj is not None:
        need.add("python-scheduler")
    if any(not (lk.rate_bps.is_constant and lk.owd_ns.is_constant and lk.loss.is_constant) for lk in e.links):
        need.add("time-varying")
    if any(v > 0 for lk in e.links for v in lk.loss.values):
        need.add("random-loss")
    if e.protocol == "tcp":
        need.add("plain-tcp")
    return need
