"""Public entry of the engine: plan one run (links, routes, connection set-up, scheduler, workload)
from `PathConfig`s, run it in the compiled engine (native/engine, `workbench.replay._core`), and
return a `ReplayResult`.

Connection set-up is modelled by timing only (SYN packets are not simulated, so they are never
lost or queued), but recorded: SYN, SYN-ACK and ACK rows appear in PacketEvents at the times the
model uses, so goodput and completion count from the client's connect in a replay as in a capture.
For a download the initial subflow is usable at the server after SYN / SYN-ACK / ACK on path 0
(1.5 RTT after the client connects), a joined subflow k after the client got the SYN-ACK on path 0
and ran MP_JOIN on path k (RTT_0 + 1.5 RTT_k), as in the lab runs, where the client opens the
second subflow. For an upload the client sends: the initial subflow is usable once it has the
SYN-ACK (1 RTT), a joined one once the server has acknowledged its third ACK (RFC 8684 §3.2: RTT_0 +
2 RTT_k). Each handshake gives the subflow its first RTT sample, as Linux measures the SYN-ACK RTT.

The network is links plus routes (`workbench.replay.network`): subflows may share a bottleneck, and
an upload routes the client's data over the up links; the tables label directions as on the wire.

Random loss on each link draws from its own stream, derived from (seed, link name), so a change in
what one link carries does not change the losses another link applies (tuning candidates face the
same losses per link).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.replay._core import ColumnRecorder, run_compiled, scheduler_arg
from workbench.replay.config import ConnectionConfig
from workbench.replay.network import Route, route_owd_ns
from workbench.replay.paths import PathConfig, path_specs
from workbench.replay.recorder import HandshakeRow
from workbench.replay.workload import Workload, workload_spec
from workbench.schedulers.base import Scheduler

if TYPE_CHECKING:
    import polars as pl

    from workbench.experiment._model import LinkSpec

__all__ = ["ReplayResult", "Route", "run_network", "run_replay", "run_single_path_baselines"]

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
    recorder: ColumnRecorder | None = field(repr=False, default=None)
    direction: str = "down"
    subflow_paths: list[str] = field(default_factory=list)  # the path of each subflow, by index
    # how the run was computed, not what it modelled: {"engine": "compiled", "scheduler": "compiled" |
    # "bridge" (a Python scheduler called from the compiled engine), and the bytes its recorder
    # buffers and segment tables held at the end}
    engine_stats: dict[str, Any] = field(default_factory=dict, repr=False)
    _events: Any = field(default=None, repr=False)
    _samples: Any = field(default=None, repr=False)

    @property
    def path_names(self) -> list[str]:
        """The path of each subflow, by subflow index."""
        return self.subflow_paths or [p.name for p in self.paths]

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
    def observations(self) -> list[tuple[int, str, int, Any]]:
        """What the scheduler reported through `Scheduler.observe`: (t_ns, kind, subflow, value)."""
        return list(self.recorder.observations) if self.recorder is not None else []

    @property
    def delivery_rate_bps(self) -> float:
        """In-order bytes over the time to the last in-order delivery (finished transfers) or the run's
        end: the engine's counter. For goodput as reported, use `workbench.metrics.summarize`."""
        return float(self.summary["delivery_rate_bps"])


def handshake_times(paths: list[PathConfig], join_delay_ns: int = 0, *, direction: str = "down",
                    join_when_established: bool = False) -> list[tuple[int, int]]:
    """(time the data sender may send on subflow k, handshake RTT sample) per path."""
    owd = [(p.owd_up_ns.at, p.owd_down_ns.at) for p in paths]
    return [(t_use, rtt) for t_use, rtt, _ in _handshakes(owd, join_delay_ns, direction, join_when_established)]


OwdAt = Callable[[int], float]


def _handshakes(owd: Sequence[tuple[OwdAt, OwdAt]], join_delay_ns: int, direction: str,
                join_when_established: bool = False) -> list[tuple[int, int, list[tuple[int, int, str, int]]]]:
    """Per subflow, from its (client -> server, server -> client) one-way delays at a time: (usable
    at the data sender, RTT sample, packets) where each packet is (t_sent_ns, t_arrived_ns, dir
    "c2s"/"s2c", TCP flags). ``join_when_established``: the MP_JOINs wait for the connection to be
    fully established at the client (the server's first packet after the third ACK: the first data
    of a download, the ACK of the first data of an upload), one more round trip on the initial path."""
    syn, ack = 0x002, 0x010
    out = []
    t_client = 0  # the client connects at 0; it sends MP_JOINs once it has the initial SYN-ACK
    for k, (c2s, s2c) in enumerate(owd):
        t0 = 0 if k == 0 else t_client
        up = int(c2s(t0))
        down = int(s2c(t0 + up))
        pkts = [(t0, t0 + up, "c2s", syn), (t0 + up, t0 + up + down, "s2c", syn | ack),
                (t0 + up + down, t0 + 2 * up + down, "c2s", ack)]
        if direction == "down":
            t_use = t0 + 2 * up + down
        elif k == 0:
            t_use = t0 + up + down
        else:  # the joining client waits for the server's ACK of its third ACK
            pkts.append((t0 + 2 * up + down, t0 + 2 * up + 2 * down, "s2c", ack))
            t_use = t0 + 2 * up + 2 * down
        out.append((t_use, up + down, pkts))
        if k == 0:
            wait = join_delay_ns
            if join_when_established:
                t_sa = up + down
                up1 = int(c2s(t_sa))
                rtt1 = up1 + int(s2c(t_sa + up1))
                wait = max(wait, rtt1)
            t_client = up + down + wait
    return out


def run_replay(paths: list[PathConfig], scheduler: Scheduler, *, workload: Workload,
               conn: ConnectionConfig | None = None, seed: int = 0, duration_ns: int | None = None,
               record: bool = True, direction: str = "down", engine: str = "auto") -> ReplayResult:
    """Replay one MPTCP transfer over ``paths`` (one subflow per path, each over its own bottleneck
    each way: links ``NAME/down`` and ``NAME/up``) with ``scheduler``: a download (server -> client,
    ``direction="down"``) or an upload (``"up"``).

    ``duration_ns`` caps simulated time (required for an endless `Bulk`); the run also ends when a
    finite workload has been completely DATA_ACKed. Same inputs and seed give identical results.
    """
    if not paths:
        raise ValueError("run_replay needs at least one path")
    if len({p.name for p in paths}) != len(paths):
        raise ValueError("path names must be unique")
    cfg = conn if conn is not None else ConnectionConfig()
    specs, routes = [], []
    for p in paths:
        (down, up), _ = path_specs(p)
        specs += [down, up]
        data, ack = ((down.name,), (up.name,)) if direction == "down" else ((up.name,), (down.name,))
        routes.append(Route(p.name, data=data, ack=ack, backup=p.name in cfg.backup))
    r = run_network(specs, routes, scheduler, workload=workload, conn=cfg, seed=seed, duration_ns=duration_ns,
                    record=record, direction=direction, engine=engine)
    r.paths = list(paths)
    return r


def run_network(links: Sequence[LinkSpec], routes: Sequence[Route], scheduler: Scheduler, *, workload: Workload,
                conn: ConnectionConfig | None = None, seed: int = 0, duration_ns: int | None = None,
                record: bool = True, direction: str = "down", engine: str = "auto") -> ReplayResult:
    """Replay one MPTCP transfer with one subflow per `Route` over ``links`` (which subflows may
    share: a common bottleneck). Subflow k is ``routes[k]``; the first is the initial subflow.

    ``engine``: "auto" (or "compiled") runs a scheduler with a compiled port as compiled code and any
    other (a user's own class, a subclass) in Python through the plug-in bridge
    (`workbench.replay._core`); "bridge" runs even a ported built-in's Python class through the bridge
    (tests, benchmarks). Both give the same results. Only the built-in workloads run (`TypeError`
    for another `Workload`)."""
    if isinstance(scheduler, str):
        raise TypeError("run_replay takes a Scheduler instance; resolve names with "
                        "workbench.schedulers.get(name, **params)")
    if not routes:
        raise ValueError("a replay needs at least one subflow")
    if direction not in ("down", "up"):
        raise ValueError(f"direction must be 'down' or 'up', got {direction!r}")
    cfg = conn if conn is not None else ConnectionConfig()
    wl_spec = workload_spec(workload)
    if duration_ns is None and getattr(workload, "stop_ns", 1) is None:
        raise ValueError("an endless Bulk workload needs duration_ns (or Bulk(stop_ns=...))")
    if engine not in ("auto", "compiled", "bridge"):
        raise ValueError(f"engine must be 'auto', 'compiled' or 'bridge', got {engine!r}")
    sched = scheduler.fresh()
    spec_by_name = {s.name: s for s in links}
    setup, ts_ack_ns, drs_t_ns, hs_rows = _setup_plan(routes, spec_by_name, cfg, direction)
    end_cap = duration_ns if duration_ns is not None else _SAFETY_CAP_NS
    spec = scheduler_arg(sched, bridge=engine == "bridge")
    out = run_compiled(links, routes, spec, wl_spec, cfg=cfg, seed=seed, until_ns=end_cap, record=record,
                       setup=setup, ts_ack_ns=ts_ack_ns, drs_t_ns=drs_t_ns)
    return _compiled_result(out, routes, sched, cfg, seed, direction, end_cap, hs_rows, bridged=spec is sched)


def _unique_path_name(names: list[str], k: int) -> str:
    """Subflow ``k``'s path name, or ``path#k`` when an earlier subflow runs on the same path."""
    return names[k] if names.index(names[k]) == k else f"{names[k]}#{k}"


def _setup_plan(routes: Sequence[Route], spec_by_name: dict[str, LinkSpec], cfg: ConnectionConfig, direction: str
                ) -> tuple[list[tuple[str, int, int, int]], list[int | None], int, list[HandshakeRow]]:
    """The connection set-up the engine schedules, in this order: per subflow, its receiver's buffer
    set-up ("init", joined subflows) and its establishment at the data sender ("establish", with the
    handshake RTT); each subflow's first echoed timestamp (None: none); where the receiver's first
    buffer measurement starts; the handshake rows for the recorder."""
    n = len(routes)
    if not cfg.handshake:
        return [("establish", 0, k, 0) for k in range(n)], [None] * n, 0, []

    def owd_fns(r: Route) -> tuple[OwdAt, OwdAt]:
        c2s, s2c = (r.ack, r.data) if direction == "down" else (r.data, r.ack)
        return ((lambda t, x=c2s: route_owd_ns(spec_by_name, x, t)),
                (lambda t, x=s2c: route_owd_ns(spec_by_name, x, t)))
    hs = _handshakes([owd_fns(r) for r in routes], cfg.join_delay_ns, direction, cfg.join_when_established)
    # the receiver's end of the initial handshake (the client's SYN-ACK, or for an upload the
    # server's third ACK): where its first receive-buffer measurement starts
    rcv_end = 1 if direction == "down" else 2
    setup: list[tuple[str, int, int, int]] = []
    ts_ack: list[int | None] = []
    rows: list[HandshakeRow] = []
    for k, (t, rtt, pkts) in enumerate(hs):
        if k > 0:  # a joined subflow's buffer is set up at the receiver's end of its handshake
            setup.append(("init", pkts[rcv_end][1], k, 0))
        # The first data echo the receiver's last handshake segment (TS.Recent), except on a subflow
        # the server accepted by MP_JOIN: measured in the kernel backend (buf-1bdp, rmem-6M: `ss`
        # in the client), that subflow's first flight gives the client no receiver-RTT sample, as
        # data echoing no timestamp (TSecr 0) would not; its second flight does.
        ts_ack.append(max(t_snd for t_snd, _, d, _ in pkts if d == ("c2s" if direction == "down" else "s2c"))
                      if k == 0 or direction == "up" else None)
        setup.append(("establish", t, k, rtt))
        rows.extend(HandshakeRow(t_snd, t_rcv, k, d, flags) for t_snd, t_rcv, d, flags in pkts)
    return setup, ts_ack, hs[0][2][rcv_end][1], rows


def _compiled_result(out: dict[str, Any], routes: Sequence[Route], sched: Scheduler, cfg: ConnectionConfig,
                     seed: int, direction: str, end_cap: int, hs_rows: list[HandshakeRow], *,
                     bridged: bool = False) -> ReplayResult:
    """A `ReplayResult` from what `workbench_core.run_model` returned."""
    done = bool(out["done"])
    t_end = out["done_ns"] if out["done_ns"] is not None else min(out["now_ns"], end_cap)
    delivered = out["rcv_nxt"]
    links = {name: (nq, nl, mq, buf) for name, nq, nl, mq, buf in out["links"]}
    sfs = [out["subflows"][k] for k in range(len(routes))]
    names = [s["name"] for s in sfs]
    summary: dict[str, Any] = {
        "sim_ns": t_end,
        "completed": done,
        "all_acked_ns": out["done_ns"],
        "delivered_bytes": delivered,
        "delivery_rate_bps": (delivered * 8e9 / (out["delivered_t_ns"] if done and out["delivered_t_ns"] else t_end)
                              if t_end > 0 else 0.0),
        "last_delivery_ns": out["delivered_t_ns"],
        "wall_s": out["wall_s"],
        "events": out["events"],
        "data_packets_sent": sum(s["n_sent"] for s in sfs),
        "retransmissions": sum(s["n_retrans"] for s in sfs),
        "rto": sum(s["n_rto"] for s in sfs),
        "fast_recoveries": sum(s["n_fast_recoveries"] for s in sfs),
        "reinjections": out["reinjections"],
        "opportunistic_retransmissions": out["opportunistic_retransmissions"],
        "penalizations": out["penalizations"],
        "meta_rto": out["meta_rto"],
        "queue_drops": sum(v[0] for v in links.values()),
        "random_losses": sum(v[1] for v in links.values()),
        "max_rcv_ooo_bytes": out["max_ooo_bytes"],
        "per_path": {
            _unique_path_name(names, k): {
                "sent_packets": s["n_sent"],
                "sent_bytes": s["sent_bytes"],
                "acked_bytes": s["acked_bytes"],
                "retransmissions": s["n_retrans"],
                "rto": s["n_rto"],
                "rto_undone": s["n_rto_undone"],
                "queue_drops": links[s["data_link"]][0],
                "random_losses": links[s["data_link"]][1],
                "max_queue_bytes": links[s["data_link"]][2],
                "buffer_bytes": links[s["data_link"]][3],
                "final_cwnd": s["cwnd"],
                "srtt_ns": (s["srtt_us8"] >> 3) * 1000,
                "hystart_exits": s["hystart_exits"],
                "lost_retransmissions": s["n_lost_retrans"],
            }
            for k, s in enumerate(sfs)
        },
    }
    rec = ColumnRecorder(out["recorder"], hs_rows) if "recorder" in out else None
    stats = {"engine": "compiled", "scheduler": "bridge" if bridged else "compiled",
             "segment_state_bytes": out["segment_state_bytes"],
             "recorder_bytes": out.get("recorder_bytes", 0), "recorder_rows": out.get("recorder_rows", 0)}
    return ReplayResult(paths=[], scheduler=repr(sched), config=cfg, seed=seed, summary=summary,
                        recorder=rec, direction=direction, subflow_paths=[r.path for r in routes],
                        engine_stats=stats)


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
