"""From an `Experiment` to a kernel `RunPlan`, with what had to be adapted said in notes: the kernel
does some things the model does not and the other way round (`unsupported` lists what it refuses)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.backends._kernel.emulation import LinkPlan, PathPlan
from workbench.backends._kernel.labrun import RunPlan, StackPlan, SubflowPlan, TransferPlan
from workbench.backends._kernel.shaping import Series

if TYPE_CHECKING:
    from workbench.experiment import Experiment, StackProfile

__all__ = ["KERNEL_SCHEDULERS", "MIN_RATE_STEP_NS", "available_congestion_controls", "coarsen", "plan_from_experiment",
           "unsupported"]

# What the upstream kernel schedules with; every other name is one of the model's.
KERNEL_SCHEDULERS = ("upstream", "default")
# A rate step is one `tc class change` (a few ms, more on a loaded machine): finer traces are averaged
# to this step.
MIN_RATE_STEP_NS = 100_000_000


def available_congestion_controls() -> list[str]:
    """What this kernel can set per socket now (empty when it cannot be read)."""
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return []


def coarsen(s: Series, *, step_ns: int, end_ns: int | None) -> Series:
    """A step series with no step shorter than ``step_ns``: time-weighted means over a ``step_ns``
    grid (unchanged when it is already coarse enough)."""
    t, v = s
    if len(t) < 2 or min(b - a for a, b in itertools.pairwise(t)) >= step_ns:
        return s
    end = end_ns if end_ns is not None else t[-1] + step_ns
    grid = list(range(0, end, step_ns))
    out_v = []
    for g in grid:
        acc, lo, hi = 0.0, g, g + step_ns
        for i in range(len(t)):
            a = max(lo, t[i] if i else lo)
            b = min(hi, t[i + 1] if i + 1 < len(t) else hi)
            if b > a:
                acc += v[i] * (b - a)
        out_v.append(acc / step_ns)
    keep_t, keep_v = [grid[0]], [out_v[0]]
    for g, x in zip(grid[1:], out_v[1:], strict=True):
        if x != keep_v[-1]:
            keep_t.append(g)
            keep_v.append(x)
    return tuple(keep_t), tuple(keep_v)


def _series(s: Any) -> Series:
    return tuple(int(x) for x in s.t_ns), tuple(float(x) for x in s.values)


def unsupported(e: Experiment) -> list[str]:
    """What in ``e`` the kernel backend cannot run, beyond the capability check (one phrase each)."""
    from workbench.experiment import BulkWorkload, FiniteWorkload

    out = []
    if len(e.transfers) != 1:
        out.append("more than one transfer")
    for t in e.transfers:
        if not isinstance(t.workload, BulkWorkload | FiniteWorkload):
            out.append(f"a {type(t.workload).__name__} (bulk and finite transfers only)")
    if e.scheduler.name not in KERNEL_SCHEDULERS:
        out.append(f"scheduler {e.scheduler.name!r} (the kernel runs its own: upstream default)")
    have = available_congestion_controls()
    if have and e.stack.congestion_control not in have:
        out.append(f"congestion control {e.stack.congestion_control!r} (this kernel has {', '.join(have)})")
    return out


def _stack(st: StackProfile, notes: list[str]) -> StackPlan:
    default = type(st)()
    if st.name != "linux-upstream":
        notes.append(f"stack profile {st.name!r}: this kernel is upstream Linux; only its sysctl/socket "
                     "settings are applied")
    for key, what in (("mptcp_ooo_quickack", "no quick-ACK on MPTCP reordering, that is out-of-tree"),
                      ("hystart", "CUBIC hystart is a global module parameter, left as is"),
                      ("delack_min_ms", "its own delayed-ACK minimum"), ("advmss", "its own segment size from the MTU"),
                      ("frame_overhead_bytes", "real headers on the wire"),
                      ("scaling_ratio", "it measures payload / truesize itself")):
        if getattr(st, key) != getattr(default, key):
            notes.append(f"stack {key}={getattr(st, key)!r}: not applied here (kernel: {what})")
    sysctls = [("net.ipv4.tcp_moderate_rcvbuf", "1" if st.tcp_moderate_rcvbuf else "0")]
    route: dict[str, str] = {}
    if st.initcwnd != default.initcwnd:
        route["initcwnd"] = str(st.initcwnd)
    if st.rto_min_ms != default.rto_min_ms:
        route["rto_min"] = f"{st.rto_min_ms:g}ms"
    if st.quickack:
        route["quickack"] = "1"
    return StackPlan(congestion_control=st.congestion_control, tcp_rmem=tuple(st.tcp_rmem),  # type: ignore[arg-type]
                     tcp_wmem=tuple(st.tcp_wmem),  # type: ignore[arg-type]
                     sndbuf_bytes=st.tcp_wmem[2] if st.sndbuf_locked else None, sysctls=tuple(sysctls),
                     route_options=tuple(route.items()))


def plan_from_experiment(e: Experiment, *, bin_ns: int = 100_000_000) -> tuple[RunPlan, list[str]]:
    """The kernel's plan for ``e`` (already checked): paths in subflow order, the first one carrying
    the initial subflow. Returns the plan and notes on what was adapted."""
    from workbench.experiment import BulkWorkload

    notes: list[str] = []
    order = []
    for s in e.subflows:
        if s.path not in order:
            order.append(s.path)
    order += [p.name for p in e.paths if p.name not in order]
    plans = []
    for name in order:
        p = e.path(name)
        links = []
        for d, lname in (("down", p.down[0]), ("up", p.up[0])):
            lk = e.link(lname)
            rate = _series(lk.rate_bps)
            fine = coarsen(rate, step_ns=MIN_RATE_STEP_NS, end_ns=e.duration_ns)
            if fine != rate:
                notes.append(f"{name} {d}: rate steps shorter than {MIN_RATE_STEP_NS // 1_000_000} ms averaged "
                             f"to {MIN_RATE_STEP_NS // 1_000_000} ms steps (one tc change each)")
            links.append(LinkPlan(lk.name, fine, _series(lk.owd_ns), _series(lk.loss), lk.buffer_bytes,
                                  lk.buffer_packets))
        plans.append(PathPlan(name, links[0], links[1]))
    index = {n: i for i, n in enumerate(order)}
    first = plans[0]
    handshake_ns = int(first.down.owd_ns[1][0] + first.up.owd_ns[1][0])
    subflows = []
    for i, s in enumerate(e.subflows):
        join = None
        if i > 0 and s.join_after_ns > 0:
            # the model counts from the initial SYN-ACK; the kernel's clock starts at connect()
            join = handshake_ns + s.join_after_ns
        subflows.append(SubflowPlan(index[s.path], join, s.backup))
    if any(s.join_ns is not None for s in subflows):
        notes.append("late joins: the client's path-manager endpoint is added at join time (SYN-ACK + join_after_ns, "
                     "the SYN-ACK taken as one programmed RTT after time zero)")
    (t,) = e.transfers
    w = t.workload
    transfer = (TransferPlan(t.direction, stop_ns=w.stop_ns) if isinstance(w, BulkWorkload)
                else TransferPlan(t.direction, size_bytes=w.size_bytes))  # type: ignore[union-attr]
    return RunPlan(tuple(plans), tuple(subflows), transfer, _stack(e.stack, notes), seed=e.seed,
                   duration_ns=e.duration_ns, bin_ns=bin_ns), notes
