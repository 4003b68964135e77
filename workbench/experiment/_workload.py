"""What the application writes, as data: the workload of one transfer. One parser for every surface
(scenario files, `--workload` options, tuning, the page) turns text or mappings into these specs;
each backend turns a spec into its own writer (the model's `workbench.replay.workload`, the kernel
backend's sender program)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["BulkWorkload", "BurstsWorkload", "FiniteWorkload", "TraceWorkload", "WorkloadSpec",
           "parse_workload", "workload_text"]


@dataclass(frozen=True)
class BulkWorkload:
    """Greedy (iperf): keeps the send buffer full; stops writing at ``stop_ns`` (None = never)."""

    stop_ns: int | None = None


@dataclass(frozen=True)
class FiniteWorkload:
    """``size_bytes`` written at once; the transfer completes when all are DATA_ACKed."""

    size_bytes: int

    def __post_init__(self) -> None:
        if self.size_bytes <= 0:
            raise ValueError("a finite transfer needs size_bytes > 0")


@dataclass(frozen=True)
class BurstsWorkload:
    """``segments`` full segments, then ``idle_ns`` after the burst is acknowledged, ``n_bursts`` times."""

    segments: int
    idle_ns: int = 100_000_000
    n_bursts: int = 10

    def __post_init__(self) -> None:
        if self.segments <= 0 or self.n_bursts <= 0 or self.idle_ns < 0:
            raise ValueError("bursts need segments > 0, count > 0 and idle >= 0")


@dataclass(frozen=True)
class TraceWorkload:
    """Application writes ``(t_ns, size_bytes)``, in time order (e.g. recovered from a capture)."""

    writes: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.writes:
            raise ValueError("an application trace needs at least one write")
        if any(b[0] < a[0] for a, b in zip(self.writes, self.writes[1:], strict=False)):
            raise ValueError("application writes must be in time order")
        if any(n < 0 for _, n in self.writes):
            raise ValueError("application writes need size >= 0")


WorkloadSpec = BulkWorkload | FiniteWorkload | BurstsWorkload | TraceWorkload

_SIZE = re.compile(r"^\s*([0-9.]+(?:e[0-9]+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_MULT = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
         "ki": 1024, "kib": 1024, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30}


def _size_bytes(v: Any, what: str) -> int:
    if isinstance(v, bool):
        raise ValueError(f"{what}: expected a size, got {v!r}")
    if isinstance(v, int | float):
        n = int(v)
    else:
        m = _SIZE.match(str(v))
        if not m:
            raise ValueError(f"{what}: {v!r} is not a size (e.g. 4000000, 4MB, 512KiB)")
        n = int(float(m.group(1)) * _MULT[(m.group(2) or "").lower()])
    if n <= 0:
        raise ValueError(f"{what}: size must be > 0")
    return n


def _seconds_ns(v: Any, what: str) -> int:
    try:
        s = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {v!r} is not a number of seconds") from None
    if not s >= 0:
        raise ValueError(f"{what}: must be >= 0 s")
    return int(s * 1e9)


def parse_workload(spec: Any, *, csv_pairs: Any = None) -> WorkloadSpec:
    """The workload from a scenario mapping (``{bulk: {stop_s: 8}}``, ``{finite: {bytes: 4MB}}``,
    ``{bursts: {segments: 10, idle_ms: 500, count: 20}}``, ``{trace: [[t_s, bytes], ...]}`` or
    ``{trace: {csv: file}}``) or from option text (``bulk``, ``bulk:8``, ``finite:4MB``,
    ``bursts:10,500,20`` or ``bursts:10:500:20`` = segments, idle ms, count). ``csv_pairs(name)`` reads a trace CSV (the caller
    decides where files may come from). Raises ValueError with the offending key."""
    if spec is None:
        return BulkWorkload()
    if isinstance(spec, str):
        kind, _, arg = spec.strip().partition(":")
        kind = kind.strip().lower()
        if kind == "bulk":
            return BulkWorkload(stop_ns=_seconds_ns(arg, "bulk") if arg.strip() else None)
        if kind == "finite":
            if not arg.strip():
                raise ValueError("finite needs a size, e.g. finite:4MB")
            return FiniteWorkload(_size_bytes(arg, "finite"))
        if kind == "bursts":
            parts = [p.strip() for p in re.split(r"[,:]", arg) if p.strip()]
            if not 1 <= len(parts) <= 3:
                raise ValueError("bursts:SEGMENTS[,IDLE_MS[,COUNT]]")
            try:
                seg = int(parts[0])
                idle = int(float(parts[1]) * 1e6) if len(parts) > 1 else 100_000_000
                n = int(parts[2]) if len(parts) > 2 else 10
            except ValueError:
                raise ValueError(f"bursts: {arg!r} is not SEGMENTS[,IDLE_MS[,COUNT]]") from None
            return BurstsWorkload(segments=seg, idle_ns=idle, n_bursts=n)
        if kind in ("trace", "app"):
            raise ValueError("an application trace is given in a scenario file (workload: {trace: ...})")
        raise ValueError(f"unknown workload {kind!r} (bulk, bulk:SECONDS, finite:SIZE, bursts:SEG,IDLE_MS,COUNT)")
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError("workload: expected one of bulk / finite / bursts / trace")
    (kind, a), = spec.items()
    a = {} if a is None else a
    try:
        if kind == "bulk":
            stop = a.get("stop_s")
            return BulkWorkload(stop_ns=_seconds_ns(stop, "workload.bulk.stop_s") if stop is not None else None)
        if kind == "finite":
            return FiniteWorkload(_size_bytes(a["bytes"], "workload.finite.bytes"))
        if kind == "bursts":
            return BurstsWorkload(segments=int(a["segments"]),
                                  idle_ns=_seconds_ns(float(a.get("idle_ms", 100)) / 1e3, "workload.bursts.idle_ms"),
                                  n_bursts=int(a.get("count", 10)))
        if kind == "trace":
            if isinstance(a, dict):
                if csv_pairs is None:
                    raise ValueError("workload.trace.csv: files cannot be read here")
                pairs = csv_pairs(a["csv"])
            else:
                pairs = a
            return TraceWorkload(tuple((int(float(t) * 1e9), int(b)) for t, b in pairs))
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"workload.{kind}: bad or missing setting ({e})") from None
    raise ValueError(f"workload: unknown workload {kind!r} (bulk, finite, bursts, trace)")


def workload_text(w: WorkloadSpec) -> str:
    """A short human label (the inverse of the option syntax where there is one)."""
    if isinstance(w, BulkWorkload):
        return "bulk" if w.stop_ns is None else f"bulk:{w.stop_ns / 1e9:g}"
    if isinstance(w, FiniteWorkload):
        return f"finite:{w.size_bytes}"
    if isinstance(w, BurstsWorkload):
        return f"bursts:{w.segments},{w.idle_ns / 1e6:g},{w.n_bursts}"
    return f"trace:{len(w.writes)} writes"
