"""The backend conformance suite: what every `Backend` must do with an `Experiment`, checked on the
`Run` it returns alone (PacketEvents in the shared schema), so the same checks hold the replay
engine and the real kernel to one contract — the way Optuna ships one test suite for all its storages.

>>> from workbench.testing import backend_conformance_cases
>>> @pytest.mark.parametrize("case", backend_conformance_cases(["model", "kernel"]), ids=str)
... def test_backend(case): case.check()

Checks (`BACKEND_CHECKS`), each a short two-path experiment with the upstream default scheduler (the
one every backend can run):

``schema``       the events follow the PacketEvents schema; points are snd / rcv / drop; time sorted.
``download``     a finite download: the receiver's data cover [0, size) exactly, data flow server ->
                 client on both paths, path names are the experiment's.
``upload``       the same transfer the other way (backends with the ``upload`` capability).
``handshake``    the client's SYN is the first packet of the connection; every subflow has a SYN.
``capacity``     a bulk transfer's goodput is below the sum of the bottleneck rates and above half
                 of it (ample buffers, no loss).
``deterministic`` same experiment, same seed: identical events (backends declaring ``deterministic``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import polars as pl

from workbench.backends import Backend, get_backend
from workbench.experiment import (
    BulkWorkload,
    Experiment,
    FiniteWorkload,
    TransferSpec,
    experiment_from_paths,
    stack_profile,
    two_way_path,
)

__all__ = ["BACKEND_CHECKS", "BackendCase", "backend_conformance_cases", "check_backend"]

BACKEND_CHECKS: tuple[str, ...] = ("schema", "download", "upload", "handshake", "capacity", "deterministic")

_MS = 1_000_000
_S = 1_000_000_000
_RATES_BPS = (12e6, 6e6)
_SIZE_BYTES = 1_500_000


def _experiment(*, workload: Any, duration_ns: int, seed: int = 1) -> Experiment:
    paths = [two_way_path("a", rate_bps=_RATES_BPS[0], owd_ns=10 * _MS, buffer_packets=100),
             two_way_path("b", rate_bps=_RATES_BPS[1], owd_ns=30 * _MS, buffer_packets=100)]
    return experiment_from_paths(paths, workload=workload, scheduler="upstream",
                                 stack=stack_profile("linux-upstream"), seed=seed, duration_ns=duration_ns)


def _data(ev: pl.DataFrame, point: str) -> pl.DataFrame:
    return ev.filter((pl.col("point") == point) & (pl.col("payload_bytes") > 0))


def _coverage(ev: pl.DataFrame, size: int, data_dir: str) -> list[str]:
    rcv = _data(ev, "rcv")
    out = []
    if set(rcv["dir"].unique().to_list()) != {data_dir}:
        out.append(f"data received in directions {sorted(rcv['dir'].unique().to_list())}, expected {data_dir}")
    ranges = rcv.select("dsn", "payload_bytes").unique().sort("dsn")
    pos = 0
    for dsn, n in ranges.iter_rows():
        if dsn > pos:
            out.append(f"DSN bytes [{pos}, {dsn}) never received")
            break
        pos = max(pos, dsn + n)
    if pos != size:
        out.append(f"received DSN ranges end at {pos}, the transfer has {size} bytes")
    paths = set(rcv["path"].unique().to_list())
    if paths != {"a", "b"}:
        out.append(f"data arrived on paths {sorted(paths)}, expected both a and b")
    return out


def _check(backend: Backend, check: str) -> list[str]:
    finite = _experiment(workload=FiniteWorkload(_SIZE_BYTES), duration_ns=20 * _S)
    if check == "schema":
        from workbench.capture.schema import PACKET_EVENTS
        ev = backend.run(finite).events
        out = []
        if dict(ev.schema) != PACKET_EVENTS:
            out.append(f"schema differs from PacketEvents: {sorted(set(ev.schema.items()) ^ set(PACKET_EVENTS.items()))}")
        if not set(ev["point"].unique().to_list()) <= {"snd", "rcv", "drop"}:
            out.append(f"points {sorted(ev['point'].unique().to_list())}")
        if not ev["t_ns"].is_sorted():
            out.append("events are not in time order")
        return out
    if check == "download":
        return _coverage(backend.run(finite).events, _SIZE_BYTES, "s2c")
    if check == "upload":
        if "upload" not in backend.capabilities:
            return []
        up = replace(finite, transfers=(TransferSpec("up", FiniteWorkload(_SIZE_BYTES)),))
        return _coverage(backend.run(up).events, _SIZE_BYTES, "c2s")
    if check == "handshake":
        ev = backend.run(finite).events
        syn = ev.filter(((pl.col("flags") & 0x12) == 0x02) & (pl.col("dir") == "c2s"))
        out = []
        if syn.height == 0 or int(syn["t_ns"].min()) != int(ev["t_ns"].min()):  # type: ignore[arg-type]
            out.append("the client's SYN is not the first packet")
        if set(syn["subflow"].unique().to_list()) != {0, 1}:
            out.append(f"SYNs seen on subflows {sorted(syn['subflow'].unique().to_list())}, expected 0 and 1")
        return out
    if check == "capacity":
        from workbench.metrics import summarize
        bulk = _experiment(workload=BulkWorkload(), duration_ns=5 * _S)
        g = float(summarize(backend.run(bulk).events)["goodput_mbps"] or 0.0)
        total = sum(_RATES_BPS) / 1e6
        return [] if 0.5 * total <= g <= total else [f"goodput {g:.2f} Mbit/s outside [{0.5 * total}, {total}]"]
    if check == "deterministic":
        if "deterministic" not in backend.capabilities:
            return []
        a, b = backend.run(finite).events, backend.run(finite).events
        return [] if a.equals(b) else ["two runs of the same experiment and seed differ"]
    raise ValueError(f"unknown check {check!r}; known: {', '.join(BACKEND_CHECKS)}")


def check_backend(backend: str | Backend, *, checks: Iterable[str] = BACKEND_CHECKS) -> list[str]:
    """Problems found (``[]`` = conforms)."""
    b = get_backend(backend)
    return [f"{c}: {p}" for c in checks for p in _check(b, c)]


@dataclass(frozen=True)
class BackendCase:
    """One (backend, check) pair, for a parametrized test."""

    backend: str
    check_name: str
    make: Callable[[], Backend]

    def __str__(self) -> str:
        return f"{self.backend}-{self.check_name}"

    def check(self) -> None:
        problems = _check(self.make(), self.check_name)
        assert not problems, f"{self}: " + "; ".join(problems)


def backend_conformance_cases(backends: Iterable[str]) -> list[BackendCase]:
    return [BackendCase(b, c, partial(get_backend, b)) for b in backends for c in BACKEND_CHECKS]
