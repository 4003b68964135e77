"""The end hosts' TCP/MPTCP stack, named after the kernel's own settings so that a scenario can be
copied from a real machine's sysctls (``sysctl net.ipv4.tcp_rmem``, ``ip route ... initcwnd``).

Two named profiles:

* ``linux-upstream``: the kernels users run today (net/mptcp, 5.6+): send-buffer autotuning up to
  ``tcp_wmem[2]``, no quick-ACK when data goes to the MPTCP out-of-order queue, the upstream
  scheduler's reinjection behaviour.
* ``mptcp.org-v0.95``: the out-of-tree kernel the seed papers used: fixed send buffer of
  ``tcp_wmem[2]``, quick-ACK on MPTCP-level reordering, minRTT's opportunistic retransmission, half
  the receive buffer advertised (``tcp_adv_win_scale = 1``).

Both advertise ``scaling_ratio`` x ``tcp_rmem[2]`` as the receive window at most (less the bytes held
out of order), as the kernel does; a scenario's ``rcv_buf_bytes`` is the receive buffer, not the window.

``stack_profile(name, **overrides)`` gives a profile with some settings replaced; unknown names are
refused with the list of known ones.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["PROFILES", "StackProfile", "parse_stack", "stack_profile"]


@dataclass(frozen=True)
class StackProfile:
    """Settings of both end hosts (the same on client and server unless a backend says otherwise)."""

    name: str = "linux-upstream"
    tcp_rmem: tuple[int, int, int] = (4096, 131072, 6291456)   # net.ipv4.tcp_rmem (min default max), bytes
    tcp_wmem: tuple[int, int, int] = (4096, 16384, 4194304)    # net.ipv4.tcp_wmem
    tcp_moderate_rcvbuf: bool = True       # net.ipv4.tcp_moderate_rcvbuf: receive-buffer autotuning
    # The share of the receive buffer the receiver advertises as window: Linux >= 6.6 measures it per
    # socket as payload / skb truesize (tp->scaling_ratio / 256, tcp_win_from_space); 0.614 is what the
    # kernel backend's veth captures show (322 kB advertised at most with tcp_rmem[2] = 512 kB). Older
    # kernels used net.ipv4.tcp_adv_win_scale = 1, i.e. 0.5. A NIC with other buffer sizes gives another
    # value; it is not a sysctl, so the kernel backend cannot set it.
    scaling_ratio: float = 0.614
    sndbuf_locked: bool = False            # SO_SNDBUF set by the application (no send autotuning)
    congestion_control: str = "cubic"      # net.ipv4.tcp_congestion_control / TCP_CONGESTION
    hystart: bool = True                   # tcp_cubic module parameter hystart
    initcwnd: int = 10                     # ip route ... initcwnd
    rto_min_ms: float = 200.0              # ip route ... rto_min (TCP_RTO_MIN)
    quickack: bool = False                 # ip route ... quickack 1: no delayed ACKs
    delack_min_ms: float = 40.0            # TCP_DELACK_MIN
    advmss: int = 1424                     # payload per segment (MTU 1500 less IP/TCP/timestamps/DSS)
    frame_overhead_bytes: int | None = None  # bytes on the wire beyond the payload (None: IPv4 + TCP
                                             # timestamps + DSS = 90, as Linux MPTCP over Ethernet)
    mptcp_ooo_quickack: bool = False       # out-of-tree: quick-ACK when data went to the MPTCP OOO queue
    # tcp_grow_window: the receiver announces what tcp_rmem[1] allows in its SYN (half of it, at most
    # 64 kB unscaled, in whole MSS) and grows the window per segment received, ACKing each one while it
    # grows (the kernel backend's captures: one ACK per segment for the first ~1-2 s of a bulk run).
    rcv_wnd_growth: bool = True
    reinject_on_subflow_rto: bool | None = None  # None: as the scheduler's kernel family does
    # The client's path manager opens the MP_JOINs once the connection is fully established at the
    # client: with the server's first packet after the handshake, one initial-path RTT after the SYN-ACK
    # (the kernel backend's captures, Linux 6.18, downloads and uploads). Off for the out-of-tree
    # profile, not measured here (its lab captures give their join time: join_after_ns).
    join_when_established: bool = True

    def __post_init__(self) -> None:
        for key in ("tcp_rmem", "tcp_wmem"):
            v = getattr(self, key)
            if len(v) != 3 or not all(isinstance(x, int) and x > 0 for x in v) or not v[0] <= v[1] <= v[2]:
                raise ValueError(f"{key} must be three sizes min <= default <= max, got {v!r}")
        if self.initcwnd <= 0 or self.advmss <= 0:
            raise ValueError("initcwnd and advmss must be > 0")
        if not 0 < self.scaling_ratio <= 1:
            raise ValueError(f"scaling_ratio must be in (0, 1], got {self.scaling_ratio!r}")
        if self.rto_min_ms <= 0 or self.delack_min_ms < 0:
            raise ValueError("rto_min_ms must be > 0 and delack_min_ms >= 0")

    def with_overrides(self, **overrides: Any) -> StackProfile:
        known = {f.name for f in fields(StackProfile)} - {"name"}
        bad = set(overrides) - known
        if bad:
            raise ValueError(f"unknown stack setting(s) {sorted(bad)}; known: {sorted(known)}")
        kw: dict[str, Any] = {k: tuple(int(x) for x in v) if k in ("tcp_rmem", "tcp_wmem") else v
                              for k, v in overrides.items()}
        return replace(self, **kw)


PROFILES: dict[str, StackProfile] = {
    "linux-upstream": StackProfile(),
    "mptcp.org-v0.95": StackProfile(name="mptcp.org-v0.95", tcp_moderate_rcvbuf=False, sndbuf_locked=True,
                                    mptcp_ooo_quickack=True, scaling_ratio=0.5, join_when_established=False),
}

# Older scenario files and callers use the engine's names; they map onto kernel settings here, the one
# place that knows both (value converters take the old unit).
_ALIASES: dict[str, tuple[str, Any]] = {
    "cc": ("congestion_control", str),
    "init_cwnd": ("initcwnd", int),
    "mss_bytes": ("advmss", int),
    "quickack_on_meta_ooo": ("mptcp_ooo_quickack", bool),
    "rto_min_ns": ("rto_min_ms", lambda v: float(v) / 1e6),
    "delack_ns": ("delack_min_ms", lambda v: float(v) / 1e6),
    "delayed_ack": ("quickack", lambda v: not bool(v)),
}


def stack_profile(name: str = "linux-upstream", **overrides: Any) -> StackProfile:
    """A named profile with some settings replaced."""
    if name not in PROFILES:
        raise ValueError(f"unknown stack profile {name!r}; known: {sorted(PROFILES)}")
    return PROFILES[name].with_overrides(**overrides)


def parse_stack(d: Any, *, default_profile: str = "linux-upstream") -> StackProfile:
    """The stack from a scenario mapping: ``{profile: linux-upstream, tcp_rmem: [4096, 131072, 6291456],
    congestion_control: cubic, ...}``. The engine-era names (``cc``, ``rcv_buf_bytes``,
    ``send_buf_bytes``, ``mss_bytes``, ``init_cwnd``, ...) are accepted and mapped. Raises ValueError."""
    if d is None:
        return stack_profile(default_profile)
    if not isinstance(d, dict):
        raise ValueError("expected a mapping")
    kw = dict(d)
    name = str(kw.pop("profile", default_profile))
    over: dict[str, Any] = {}
    base = PROFILES.get(name)
    if base is None:
        raise ValueError(f"unknown stack profile {name!r}; known: {sorted(PROFILES)}")
    for key, value in kw.items():
        if key in _ALIASES:
            new, conv = _ALIASES[key]
            over[new] = conv(value)
        elif key == "rcv_buf_bytes":
            over["tcp_rmem"] = _with_max(base.tcp_rmem, int(value))
        elif key == "send_buf_bytes":
            if value is None:
                over["sndbuf_locked"] = False
            else:
                over["tcp_wmem"] = _with_max(base.tcp_wmem, int(value))
                over["sndbuf_locked"] = True
        elif key in ("tcp_rmem", "tcp_wmem"):
            if not isinstance(value, list | tuple) or len(value) != 3:
                raise ValueError(f"{key}: expected [min, default, max] in bytes")
            over[key] = tuple(int(x) for x in value)
        else:
            over[key] = value
    return base.with_overrides(**over)


def _with_max(v: tuple[int, int, int], mx: int) -> tuple[int, int, int]:
    if mx <= 0:
        raise ValueError("buffer sizes must be > 0")
    return (min(v[0], mx), min(v[1], mx), mx)
