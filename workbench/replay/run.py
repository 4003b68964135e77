"""Public entry of the engine: build one run (event loop, links, subflows, connection, scheduler,
workload, recorder) from `PathConfig`s, run it, and return a `ReplayResult`.

Connection set-up is modelled by timing only (no SYN packets are simulated): the initial subflow is
usable at the server after SYN / SYN-ACK / ACK on path 0 (1.5 RTT after the client connects), a
joined subflow k after the client got the SYN-ACK on path 0 and ran MP_JOIN on path k
(RTT_0 + 1.5 RTT_k) — as in the lab runs, where the client opens the second subflow. Each
handshake gives the subflow its first RTT sample, as Linux measures the SYN-ACK RTT.
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.replay.cc import make_cc
from workbench.replay.events import EventLoop
from workbench.replay.link import Link
from workbench.replay.mptcp import Connection, ConnectionConfig
from workbench.replay.paths import PathConfig
from workbench.replay.recorder import Recorder
from workbench.replay.tcp import SubflowReceiver, SubflowSender
from workbench.replay.workload import Workload
from workbench.schedulers.base import Scheduler

if TYPE_CHECKING:
    import polars as pl

__all__ = ["ReplayResult", "run_replay", "run_single_path_baselines"]

_SAFETY_CAP_NS = 3600 * 1_000_000_000


@dataclass
class ReplayResult:
    """What a run produced. ``events`` (PACKET_EVENTS) and ``samples`` (SAMPLES) are built on first
    access; ``summary`` holds plain counters."""

    paths: list[PathConfig]
    scheduler: str
    config: ConnectionConfig
    seed: int
    summary: dict[str, Any]
    recorder: Recorder | None = field(repr=False, default=None)
    _events: Any = field(default=None, repr=False)
    _samples: Any = field(default=None, repr=False)

    @property
    def path_names(self) -> list[str]:
        return [p.name for p in self.paths]

    @property
    def events(self) -> pl.DataFrame:
        if self._events is None:
            from workbench.replay.tables import packet_events
            self._events = packet_events(self)
        return self._events

    @property
    def samples(self) -> pl.DataFrame:
        if self._samples is None:
            from workbench.replay.tables import samples
            self._samples = samples(self)
        return self._samples

    @property
    def goodput_bps(self) -> float:
        return float(self.summary["goodput_bps"])


def handshake_times(paths: list[PathConfig], join_delay_ns: int = 0) -> list[tuple[int, int]]:
    """(time the server may send on subflow k, handshake RTT sample) per path."""
    p0 = paths[0]
    up0 = int(p0.owd_up_ns.at(0))
    down0 = int(p0.owd_down_ns.at(0))
    out = [(2 * up0 + down0, up0 + down0)]
    t_client = up0 + down0 + join_delay_ns  # client has the initial SYN-ACK and sends MP_JOINs
    for p in paths[1:]:
        up = int(p.owd_up_ns.at(t_client))
        down = int(p.owd_down_ns.at(t_client))
        out.append((t_client + 2 * up + down, up + down))
    return out


def run_replay(paths: list[PathConfig], scheduler: Scheduler, *, workload: Workload,
               conn: ConnectionConfig | None = None, seed: int = 0, duration_ns: int | None = None,
               record: bool = True) -> ReplayResult:
    """Replay one MPTCP download (server -> client) over ``paths`` with ``scheduler``.

    ``duration_ns`` caps simulated time (required for an endless `Bulk`); the run also ends when a
    finite workload has been completely DATA_ACKed. Same inputs and seed give identical results.
    """
    if isinstance(scheduler, str):
        raise TypeError("run_replay takes a Scheduler instance; resolve names with "
                        "workbench.schedulers.get(name, **params)")
    if not paths:
        raise ValueError("run_replay needs at least one path")
    if len({p.name for p in paths}) != len(paths):
        raise ValueError("path names must be unique")
    cfg = conn if conn is not None else ConnectionConfig()
    wl = workload.fresh()
    if duration_ns is None and getattr(wl, "stop_ns", 1) is None:
        raise ValueError("an endless Bulk workload needs duration_ns (or Bulk(stop_ns=...))")
    sched = scheduler.fresh()
    loop = EventLoop()
    rng = random.Random(seed)
    rec = Recorder() if record else None
    c = Connection(loop, cfg, sched, rng, rec)
    if rec is not None:
        rec.conn = c
    on_drop = rec.on_drop if rec is not None else None
    cc = make_cc(cfg.cc, c.subflows, hystart=cfg.hystart)
    links: list[tuple[Link, Link]] = []
    for k, p in enumerate(paths):
        down = Link(loop, name=f"{p.name}/down", rate_bps=p.rate_down_bps, owd_ns=p.owd_down_ns,
                    loss=p.loss_down, buffer_bytes=p.buffer_down_bytes, rng=rng, deliver=None,  # type: ignore[arg-type]
                    on_drop=on_drop)
        up = Link(loop, name=f"{p.name}/up", rate_bps=p.rate_up_bps, owd_ns=p.owd_up_ns,
                  loss=p.loss_up, buffer_bytes=p.buffer_up_bytes, rng=rng, deliver=None,  # type: ignore[arg-type]
                  on_drop=on_drop)
        sf = SubflowSender(loop, index=k, name=p.name, conn=c, link=down, mss=cfg.mss_bytes,
                           hdr_bytes=cfg.header_bytes, init_cwnd=cfg.init_cwnd, rto_min_ns=cfg.rto_min_ns,
                           rec=rec, backup=p.name in cfg.backup)
        sf.cc = cc
        rcv = SubflowReceiver(loop, index=k, meta=c.rx, link=up, rec=rec, ack_bytes=cfg.ack_bytes,
                              delayed_ack=cfg.delayed_ack, delack_ns=cfg.delack_ns,
                              quickack_on_meta_ooo=cfg.quickack_on_meta_ooo)
        down.deliver = rcv.on_data
        up.deliver = sf.on_ack
        c.subflows.append(sf)
        c.views.append(sf)
        links.append((down, up))
    sched.on_start(c.view, c.views)
    c.workload = wl
    wl.start(c, 0)
    if cfg.handshake:
        for sf, (t, rtt) in zip(c.subflows, handshake_times(paths, cfg.join_delay_ns), strict=True):
            loop.at(t, lambda a: c.establish(a[0], loop.now, a[1]), (sf, rtt))
    else:
        for sf in c.subflows:
            loop.at(0, lambda s: c.establish(s, loop.now, 0), sf)
    if rec is not None and cfg.sample_interval_ns > 0:
        def sample(_: Any) -> None:
            if c.done:
                return
            rec.sample_all(c, loop.now)
            loop.at(loop.now + cfg.sample_interval_ns, sample, None)
        loop.at(0, sample, None)

    wall0 = time.perf_counter()
    end_cap = duration_ns if duration_ns is not None else _SAFETY_CAP_NS
    # The recorder appends millions of small tuples: the cyclic GC would rescan them again and again
    # (they cannot form cycles). Pause it for the run.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        loop.run(until_ns=end_cap)
    finally:
        if gc_was_enabled:
            gc.enable()
    wall = time.perf_counter() - wall0
    t_end = c.done_ns if c.done_ns is not None else min(loop.now, end_cap)
    delivered = c.rx.rcv_nxt
    summary: dict[str, Any] = {
        "sim_ns": t_end,
        "completed": c.done,
        "completion_ns": c.done_ns,
        "delivered_bytes": delivered,
        # finished transfers: bytes / (connect .. last byte delivered), as the lab measures goodput
        "goodput_bps": (delivered * 8e9 / (c.rx.delivered_t_ns if c.done and c.rx.delivered_t_ns else t_end)
                        if t_end > 0 else 0.0),
        "last_delivery_ns": c.rx.delivered_t_ns,
        "wall_s": wall,
        "events": loop.n_events,
        "data_packets_sent": sum(s.n_sent for s in c.subflows),
        "retransmissions": sum(s.n_retrans for s in c.subflows),
        "rto": sum(s.n_rto for s in c.subflows),
        "fast_recoveries": sum(s.n_fast_recoveries for s in c.subflows),
        "reinjections": c.n_reinjected,
        "opportunistic_retransmissions": c.n_opportunistic,
        "penalizations": c.n_penalized,
        "meta_rto": c.n_meta_rto,
        "queue_drops": sum(d.n_drop_queue for d, _ in links),
        "random_losses": sum(d.n_drop_loss for d, _ in links),
        "max_rcv_ooo_bytes": c.rx.max_ooo_bytes,
        "per_path": {
            s.name: {
                "sent_packets": s.n_sent,
                "sent_bytes": (s.sseq[s.nxt] if s.nxt < s.end else s.write_bytes) - 1,
                "acked_bytes": s.una_bytes - 1,
                "retransmissions": s.n_retrans,
                "rto": s.n_rto,
                "queue_drops": d.n_drop_queue,
                "random_losses": d.n_drop_loss,
                "max_queue_bytes": d.max_qbytes,
                "buffer_bytes": d.buffer_bytes,
                "final_cwnd": s.cwnd,
                "srtt_ns": (s.srtt_us8 >> 3) * 1000,
                "hystart_exits": s.hystart_exits,
            }
            for s, (d, _) in zip(c.subflows, links, strict=True)
        },
    }
    return ReplayResult(paths=list(paths), scheduler=repr(sched), config=cfg, seed=seed, summary=summary,
                        recorder=rec)


def run_single_path_baselines(paths: list[PathConfig], *, workload: Workload,
                              conn: ConnectionConfig | None = None, seed: int = 0,
                              duration_ns: int | None = None, record: bool = True,
                              ) -> dict[str, ReplayResult]:
    """Plain TCP (one subflow, no MPTCP option overhead) on each path alone, same workload."""
    from workbench.schedulers import get
    base = ConnectionConfig.single_path_tcp(conn)
    return {p.name: run_replay([p], get("minrtt", opportunistic=False), workload=workload, conn=base,
                               seed=seed, duration_ns=duration_ns, record=record)
            for p in paths}
