"""A replay's connection settings (`ConnectionConfig`): sizes, timers, congestion control, handshake
and receive-buffer behaviour the compiled engine (native/engine) is run with."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConnectionConfig"]


@dataclass(frozen=True, kw_only=True)
class ConnectionConfig:
    """Connection settings of a replay. Sizes in payload bytes, times in ns.

    ``mss_bytes`` 1424 and ``header_bytes`` 90 are what the lab captures show for Linux MPTCP over a
    1500-byte MTU (Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12 + DSS 24); the single-path baseline
    uses 1448 / 66. ``rcv_buf_bytes`` is the receive window the client can advertise at most (what
    tcp_rmem[2] allows). ``rcv_buf_init_bytes``: None = that window from the start; a size = receive-
    buffer autotuning (tcp_moderate_rcvbuf, native/engine/src/receiver.rs): the window the first buffer (tcp_rmem[1])
    allows, grown once per receiver RTT with what the application read.
    ``quickack_on_meta_ooo`` is the out-of-tree receiver behaviour (upstream: False).
    ``reinject_on_subflow_rto`` None = follow the scheduler's kernel family.
    ``rcv_wnd_init_bytes``: None = the whole window from the start; a size = Linux's receive-window
    growth (tcp_grow_window): the window the SYN announces, grown on each segment a subflow receives
    by max(2 x TCP MSS, 2 x payload) up to what that subflow's buffer allows, with an immediate ACK
    each time it grows.
    ``join_delay_ns``: extra time between the client getting the initial SYN-ACK and sending its
    MP_JOINs (the upstream path manager took 21-122 ms in the lab captures).
    ``join_when_established``: the client's path manager opens its MP_JOINs only once the MPTCP
    connection is fully established at the client, i.e. with the server's first packet after the
    handshake, one round trip on the initial path after the SYN-ACK (Linux 6.18 in the kernel backend:
    the join's SYN leaves 0.1-0.2 ms after that packet arrives, downloads and uploads alike), or
    ``join_delay_ns`` after the SYN-ACK if that is later.
    ``send_buf_bytes=None`` = upstream autotuning: the MPTCP socket's send buffer is the sum of its
    subflows' autotuned send buffers (each ~3 x largest cwnd in segments, capped at 4 MiB).
    """

    mss_bytes: int = 1424
    header_bytes: int = 90
    ack_bytes: int = 78
    send_buf_bytes: int | None = 4 * 1024 * 1024
    rcv_buf_bytes: int = 6 * 1024 * 1024
    cc: str = "cubic"
    hystart: bool = True
    init_cwnd: int = 10
    rto_min_ns: int = 200_000_000
    delayed_ack: bool = True
    delack_ns: int = 40_000_000
    quickack_on_meta_ooo: bool = True
    reinject_on_subflow_rto: bool | None = None
    handshake: bool = True
    join_delay_ns: int = 0
    join_when_established: bool = False
    sample_interval_ns: int = 10_000_000
    backup: tuple[str, ...] = ()
    rcv_wnd_init_bytes: int | None = None
    rcv_buf_init_bytes: int | None = None

    def __post_init__(self) -> None:
        for k in ("mss_bytes", "rcv_buf_bytes", "init_cwnd"):
            if getattr(self, k) <= 0:
                raise ValueError(f"ConnectionConfig.{k} must be > 0")
        if self.send_buf_bytes is not None and self.send_buf_bytes < self.mss_bytes:
            raise ValueError("ConnectionConfig.send_buf_bytes must hold at least one MSS")
        if self.rcv_wnd_init_bytes is not None and self.rcv_wnd_init_bytes <= 0:
            raise ValueError("ConnectionConfig.rcv_wnd_init_bytes must be > 0 (or None)")
        if self.rcv_buf_init_bytes is not None and self.rcv_buf_init_bytes <= 0:
            raise ValueError("ConnectionConfig.rcv_buf_init_bytes must be > 0 (or None)")

    @property
    def tcp_mss_bytes(self) -> int:
        """The TCP MSS the kernel sizes windows with (tp->advmss: MTU - 40): the frame less Ethernet
        (14), IPv4 (20) and the TCP header (20); the payload plus the options (timestamps, DSS)."""
        return self.mss_bytes + self.header_bytes - 54

    @property
    def rcv_space_init_bytes(self) -> int:
        """rcvq_space.space before the first measurement (tcp_init_buffer_space, mptcp_rcv_space_init):
        TCP_INIT_CWND segments of the MSS less the timestamp option (10 x 1448 = 14480 on Ethernet)."""
        return 10 * (self.tcp_mss_bytes - 12)

    @classmethod
    def single_path_tcp(cls, base: ConnectionConfig | None = None) -> ConnectionConfig:
        """Plain TCP on one path: no DSS option (MSS 1448, headers 66, ACK 66)."""
        from dataclasses import replace
        b = base or cls()
        return replace(b, mss_bytes=b.mss_bytes + 24, header_bytes=b.header_bytes - 24,
                       ack_bytes=b.ack_bytes - 12, cc="cubic" if b.cc in ("lia", "olia") else b.cc)
