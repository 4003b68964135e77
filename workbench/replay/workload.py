"""What the server application writes into the MPTCP send buffer, and when: the four workloads the
compiled engine runs (native/engine/src/workload.rs holds their behaviour; these are their settings).

* `Bulk`: greedy, keeps the send buffer full (iperf); optionally stops writing at ``stop_ns``
  (the lab runs: "8 s" transfers), after which the connection drains and the run ends.
* `Finite`: N bytes as fast as the buffer takes them (completion time = last DATA_ACK).
* `Bursts`: N segments, then an idle period after the burst is fully acknowledged, repeated.
* `AppTrace`: ``[(t_ns, bytes)]`` application writes (e.g. recovered from a capture); bytes that do
  not fit in the send buffer wait in the application, in order. Any open-loop application is one.

Workloads are settings, not plug-ins: the engine runs only these four (`workload_spec` names what it
is given; anything else is refused with a `TypeError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AppTrace", "Bulk", "Bursts", "Finite", "Workload", "workload_spec"]

EngineWorkload = tuple[str, int | None, int, int, int, list[tuple[int, int]]]


class Workload:
    """Base of the built-in workloads."""

    @property
    def total_bytes(self) -> int | None:
        """Bytes the application writes in all (None: unbounded or not known ahead)."""
        return None


@dataclass(frozen=True)
class Bulk(Workload):
    """Always-full send buffer until ``stop_ns`` (None = for the whole run)."""

    stop_ns: int | None = None


@dataclass(frozen=True)
class Finite(Workload):
    """Transfer ``size_bytes`` once."""

    size_bytes: int

    def __post_init__(self) -> None:
        if self.size_bytes <= 0:
            raise ValueError("Finite.size_bytes must be > 0")

    @property
    def total_bytes(self) -> int | None:
        return self.size_bytes


@dataclass(frozen=True)
class Bursts(Workload):
    """``n_bursts`` bursts of ``segments`` full segments; the next burst is written ``idle_ns`` after
    the previous one was completely DATA_ACKed."""

    segments: int
    idle_ns: int
    n_bursts: int = 10


@dataclass(frozen=True)
class AppTrace(Workload):
    """Application writes ``(t_ns, bytes)``, kept in time order."""

    writes: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        writes = sorted((int(t), int(b)) for t, b in self.writes)
        if any(b < 0 for _, b in writes):
            raise ValueError("AppTrace byte counts must be >= 0")
        object.__setattr__(self, "writes", writes)

    @property
    def total_bytes(self) -> int | None:
        return sum(b for _, b in self.writes)


def workload_spec(wl: Workload) -> EngineWorkload:
    """The workload as the compiled engine takes it: ``(kind, stop_ns, size or segments, idle_ns,
    n_bursts, writes)``. Raises TypeError for anything but the four built-in classes (a subclass
    included: its overrides would be silently ignored)."""
    t = type(wl)
    if t is Bulk:
        assert isinstance(wl, Bulk)
        return ("bulk", wl.stop_ns, 0, 0, 0, [])
    if t is Finite:
        assert isinstance(wl, Finite)
        return ("finite", None, wl.size_bytes, 0, 0, [])
    if t is Bursts:
        assert isinstance(wl, Bursts)
        return ("bursts", None, wl.segments, wl.idle_ns, wl.n_bursts, [])
    if t is AppTrace:
        assert isinstance(wl, AppTrace)
        return ("apptrace", None, 0, 0, 0, list(wl.writes))
    raise TypeError(f"{t.__name__} is not a workload the engine runs: only the built-in workloads "
                    "(Bulk, Finite, Bursts, AppTrace) run; write an open-loop application as an "
                    "AppTrace of (t_ns, bytes) writes")
