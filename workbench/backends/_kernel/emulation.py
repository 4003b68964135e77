"""The emulated network of one run: a `Lab` (namespaces, veths, addresses) plus, per path and
direction, a `LinkShaper` (HTB + FIFO + delay/loss), plus the `Scheduler` thread that steps rates at
their times. The endpoints (MPTCP programs, probes, captures) are started by whoever uses it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.backends._kernel._sys import netem_available
from workbench.backends._kernel.shaping import Action, LinkShaper, Scheduler, Series
from workbench.backends._kernel.topology import Lab

__all__ = ["Emulation", "LinkPlan", "PathPlan"]


@dataclass(frozen=True)
class LinkPlan:
    """One direction of one path: rate (bit/s of Ethernet frames), one-way delay (ns) and loss
    probability over time (ns after t0), drop-tail buffer in bytes or packets."""

    name: str
    rate_bps: Series
    owd_ns: Series
    loss: Series = ((0,), (0.0,))
    buffer_bytes: int | None = 150_000
    buffer_packets: int | None = None

    @classmethod
    def constant(cls, name: str, *, rate_bps: float, owd_ns: int, loss: float = 0.0, buffer_bytes: int | None = 150_000,
                 buffer_packets: int | None = None) -> LinkPlan:
        return cls(name, ((0,), (float(rate_bps),)), ((0,), (float(owd_ns),)), ((0,), (float(loss),)),
                   buffer_bytes, buffer_packets)


@dataclass(frozen=True)
class PathPlan:
    name: str
    down: LinkPlan       # server -> client
    up: LinkPlan         # client -> server


class Emulation:
    """Build with `build`, start the clocks with `start(t0_ns)`, `stop`, then `close` (or use ``with``)."""

    def __init__(self, paths: Sequence[PathPlan], *, workdir: Path, seed: int = 0, use_netem: bool | None = None) -> None:
        self.plans = list(paths)
        self.workdir = workdir
        self.seed = seed
        self.use_netem = netem_available() if use_netem is None else use_netem
        self.lab = Lab([p.name for p in self.plans])
        self.shapers: list[LinkShaper] = []
        self.scheduler: Scheduler | None = None
        self.t0_ns = 0

    def __enter__(self) -> Emulation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def delay_mode(self) -> str:
        return "netem" if self.use_netem else "delayline"

    def build(self) -> None:
        self.lab.build(bridge_routers=self.use_netem)
        for k, (plan, net) in enumerate(zip(self.plans, self.lab.paths, strict=True)):
            for j, (link, in_dev, out_dev) in enumerate(((plan.down, net.router_server_if, net.router_client_if),
                                                         (plan.up, net.router_client_if, net.router_server_if))):
                sh = LinkShaper(self.lab, link.name, net.router_ns, in_dev, out_dev, link.rate_bps, link.owd_ns,
                                link.loss, link.buffer_bytes, link.buffer_packets, self.use_netem,
                                seed=self.seed * 1000 + 2 * k + j + 1)
                sh.install()
                self.shapers.append(sh)

    def start(self, t0_ns: int, extra: Sequence[tuple[int, str, str, float, Action]] = ()) -> None:
        """Start the delay lines and the change scheduler with time zero at ``t0_ns`` (CLOCK_REALTIME)."""
        self.t0_ns = t0_ns
        for sh in self.shapers:
            sh.start_delay(t0_ns, self.workdir)
        changes = [(t, sh.name, what, v, fn) for sh in self.shapers for t, what, v, fn in sh.rate_changes()]
        self.scheduler = Scheduler(t0_ns, [*changes, *extra])
        self.scheduler.start()

    def stop(self) -> dict[str, Any]:
        """Stop the clocks; returns what was applied and counted, per link."""
        if self.scheduler is not None:
            self.scheduler.stop()
        links: dict[str, Any] = {}
        for sh in self.shapers:
            stats = sh.qdisc_stats()
            sh.stop_delay()
            links[sh.name] = {**stats, **{k: v for k, v in sh.counters.items() if k != "delayline_start"},
                              "realtime": sh.counters.get("delayline_start", {}).get("rt")}
        sched = self.scheduler
        return {"delay_mode": self.delay_mode, "t0_ns": self.t0_ns, "links": links,
                "applied": [c.as_dict() for c in sched.applied] if sched else [],
                "schedule_errors": list(sched.errors) if sched else []}

    def close(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        self.lab.close()


def wait_until(t_ns: int) -> None:
    while (left := t_ns - time.time_ns()) > 0:
        time.sleep(min(left / 1e9, 0.2))
