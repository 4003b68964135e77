"""An MPTCP experiment as a value: the network (links and the paths routed over them), the subflows,
the transfers, the end hosts' stack, the scheduler, the seed and the duration.

Frozen dataclasses that import nothing from any backend: a scenario file, a capture's estimated
timelines, a what-if edit or a tuning trial all become an `Experiment`, and any backend
(`workbench.backends`) runs it. ``validate()`` checks the cross references once, here, so backends
can trust them.

Directions: ``down`` = server -> client, ``up`` = client -> server. A transfer's direction says who
writes: ``down`` is a download (the server sends), ``up`` an upload (the client sends).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from workbench.experiment._series import StepSeries
from workbench.experiment._stack import StackProfile
from workbench.experiment._workload import WorkloadSpec

__all__ = ["PACKET_BYTES", "Experiment", "LinkSpec", "PathSpec", "SchedulerSpec", "SubflowSpec", "TransferSpec"]

PACKET_BYTES = 1514  # a full Ethernet frame: what a pfifo limit in packets holds, for byte-based models

Direction = Literal["down", "up"]


@dataclass(frozen=True)
class LinkSpec:
    """One direction of one bottleneck: a rate-limited FIFO of ``buffer_bytes`` (or ``buffer_packets``:
    exactly one is set) followed by a one-way propagation delay, with random loss."""

    name: str
    rate_bps: StepSeries
    owd_ns: StepSeries
    loss: StepSeries = field(default_factory=lambda: StepSeries.constant(0.0))
    buffer_bytes: int | None = None
    buffer_packets: int | None = None
    qdisc: str = "fifo"

    def __post_init__(self) -> None:
        if (self.buffer_bytes is None) == (self.buffer_packets is None):
            raise ValueError(f"link {self.name}: give exactly one of buffer_bytes / buffer_packets")
        size = self.buffer_bytes if self.buffer_bytes is not None else self.buffer_packets
        if size is None or size <= 0:
            raise ValueError(f"link {self.name}: the buffer must be > 0")
        if any(v < 0 for v in self.rate_bps.values) or any(v < 0 for v in self.owd_ns.values):
            raise ValueError(f"link {self.name}: rates and delays must be >= 0")
        if any(not 0.0 <= v <= 1.0 for v in self.loss.values):
            raise ValueError(f"link {self.name}: loss must be a probability in [0, 1]")
        if self.qdisc != "fifo":
            raise ValueError(f"link {self.name}: queue discipline {self.qdisc!r} is not supported (fifo)")

    @property
    def buffer_size_bytes(self) -> int:
        """The buffer in bytes (a packet limit counts full frames)."""
        if self.buffer_bytes is not None:
            return self.buffer_bytes
        assert self.buffer_packets is not None
        return self.buffer_packets * PACKET_BYTES


@dataclass(frozen=True)
class PathSpec:
    """A path between client and server: the links it crosses in each direction, in order."""

    name: str
    down: tuple[str, ...]
    up: tuple[str, ...]


@dataclass(frozen=True)
class SubflowSpec:
    """One subflow over a path. The first subflow of an experiment is the initial one (the MPTCP
    handshake); the others join ``join_after_ns`` after the client has the initial SYN-ACK."""

    path: str
    join_after_ns: int = 0
    backup: bool = False


@dataclass(frozen=True)
class TransferSpec:
    direction: Direction
    workload: WorkloadSpec


@dataclass(frozen=True)
class SchedulerSpec:
    """A scheduler by name (registered, ``module:Class`` or ``file.py:Class``) and parameters, or a
    ready Python scheduler object for backends that take one (``obj``)."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()
    obj: Any = field(default=None, compare=False)

    @classmethod
    def of(cls, name: str, params: Mapping[str, Any] | None = None) -> SchedulerSpec:
        return cls(name=name, params=tuple(sorted((params or {}).items())))

    @classmethod
    def instance(cls, obj: Any) -> SchedulerSpec:
        return cls(name=getattr(obj, "name", type(obj).__name__), obj=obj)

    @property
    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)


@dataclass(frozen=True)
class Experiment:
    links: tuple[LinkSpec, ...]
    paths: tuple[PathSpec, ...]
    subflows: tuple[SubflowSpec, ...]
    transfers: tuple[TransferSpec, ...]
    stack: StackProfile
    scheduler: SchedulerSpec
    seed: int = 0
    duration_ns: int | None = None
    protocol: Literal["mptcp", "tcp"] = "mptcp"   # "tcp": plain single-path TCP (baselines)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Cross references and counts; raises ValueError saying what is wrong."""
        names = [lk.name for lk in self.links]
        if len(set(names)) != len(names):
            raise ValueError("link names must be unique")
        pnames = [p.name for p in self.paths]
        if not pnames or len(set(pnames)) != len(pnames):
            raise ValueError("an experiment needs at least one path, with unique names")
        if not 1 <= len(self.paths) <= 4:
            raise ValueError(f"1 to 4 paths are supported, got {len(self.paths)}")
        known = set(names)
        for p in self.paths:
            if not p.down or not p.up:
                raise ValueError(f"path {p.name}: needs at least one link each way")
            for ln in (*p.down, *p.up):
                if ln not in known:
                    raise ValueError(f"path {p.name}: unknown link {ln!r}")
        if not 1 <= len(self.subflows) <= 8:
            raise ValueError(f"1 to 8 subflows are supported, got {len(self.subflows)}")
        for s in self.subflows:
            if s.path not in pnames:
                raise ValueError(f"subflow on unknown path {s.path!r}")
            if s.join_after_ns < 0:
                raise ValueError("join_after_ns must be >= 0")
        if not self.transfers:
            raise ValueError("an experiment needs a transfer")
        for t in self.transfers:
            if t.direction not in ("down", "up"):
                raise ValueError(f"transfer direction must be 'down' or 'up', got {t.direction!r}")
        if self.protocol not in ("mptcp", "tcp"):
            raise ValueError(f"protocol must be 'mptcp' or 'tcp', got {self.protocol!r}")
        if self.protocol == "tcp" and len(self.subflows) != 1:
            raise ValueError("plain TCP has exactly one subflow")
        if self.duration_ns is not None and self.duration_ns <= 0:
            raise ValueError("duration_ns must be > 0")

    def link(self, name: str) -> LinkSpec:
        for lk in self.links:
            if lk.name == name:
                return lk
        raise KeyError(name)

    def path(self, name: str) -> PathSpec:
        for p in self.paths:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def path_names(self) -> list[str]:
        return [p.name for p in self.paths]

    @property
    def shares_bottleneck(self) -> bool:
        """Whether any link is crossed by more than one subflow in the same direction."""
        use: dict[str, int] = {}
        for s in self.subflows:
            p = self.path(s.path)
            for ln in (*p.down, *p.up):
                use[ln] = use.get(ln, 0) + 1
        return any(n > 1 for n in use.values())
