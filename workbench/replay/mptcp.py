"""The MPTCP connection: meta-level sender (server) and receiver (client) of a download.

Sender (out-of-tree ``mptcp_write_xmit`` structure, docs/MODEL.md §0):

* The application writes into a send buffer of ``send_buf_bytes`` (bytes written and not yet
  DATA_ACKed). Writes are cut into meta segments of at most one MSS (an unsent short tail is topped
  up by the next write, like TCP coalescing); each has a 64-bit DSN (relative, first byte = 0), a
  length, a path mask (which subflows carried it) and a sent flag. Segments can be sent out of order
  (STMS), so "unsent" is a flag, and ``head`` is the lowest unsent segment.
* ``push`` asks the scheduler for decisions until it returns None and hands segments to subflows
  (entail), which send them as their cwnd allows. New data must pass the MPTCP-level window test
  (first MSS ends before ``wnd_end``); copies (reinjections, opportunistic retransmissions) do not.
* DATA_ACK: every ACK on any subflow carries the receiver's in-order point and its window; snd_una
  and the right window edge ``wnd_end = max(wnd_end, data_ack + rwnd)`` only move forward.
* Reinjection queue (sorted, de-duplicated): filled by a subflow RTO (out-of-tree: every not yet
  DATA_ACKed segment of that subflow's queue, and the subflow becomes ``pf``) and by the meta RTO
  (oldest unacked segment; meta RTO = factor × max subflow RTO, exponential back-off).

Receiver: one meta receive buffer shared by all subflows; the application reads in-order data at
once, so occupancy is the connection-level out-of-order queue, and the window advertised on every
subflow ACK is what the buffer allows less ``ooo_bytes``, relative to the DATA_ACK (§0.6 / §13): the
whole ``rcv_buf_bytes``, or with receive-buffer autotuning what it has grown to (`ConnReceiver`).
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.replay.events import EventLoop, Timer
from workbench.replay.tcp import CA_LOSS, CA_OPEN, F_REINJ, SubflowSender, rcvbuf_grow_window

# upstream MPTCP retransmission (net/mptcp/protocol.c, pm.c), for schedulers with meta_retrans "upstream"
_TCP_RTO_MIN_NS = 200_000_000   # TCP_RTO_MIN: the MPTCP retransmit timer when no subflow timer applies
_STALE_LOSS_CNT = 4             # net.mptcp.stale_loss_cnt
_DFRAG_BYTES = 32_768 - 40      # one data fragment: a 32 KB page frag less its mptcp_data_frag header

if TYPE_CHECKING:
    from workbench.replay.recorder import Recorder
    from workbench.replay.workload import Workload
    from workbench.schedulers.base import Scheduler, SubflowView

__all__ = ["ConnReceiver", "Connection", "ConnectionConfig", "lia_terms", "lowest_rtt_available", "olia_terms"]


@dataclass(frozen=True, kw_only=True)
class ConnectionConfig:
    """Connection settings of a replay. Sizes in payload bytes, times in ns.

    ``mss_bytes`` 1424 and ``header_bytes`` 90 are what the lab captures show for Linux MPTCP over a
    1500-byte MTU (Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12 + DSS 24); the single-path baseline
    uses 1448 / 66. ``rcv_buf_bytes`` is the receive window the client can advertise at most (what
    tcp_rmem[2] allows). ``rcv_buf_init_bytes``: None = that window from the start; a size = receive-
    buffer autotuning (tcp_moderate_rcvbuf, `ConnReceiver`): the window the first buffer (tcp_rmem[1])
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


def lowest_rtt_available(subflows: list[Any]) -> tuple[SubflowSender | None, bool, int] | None:
    """minRTT's scan for new data (workbench.schedulers._minrtt): among active (non-backup)
    established subflows that are not potentially failed, the one with the lowest srtt that is not
    temporarily unavailable (Loss state, cwnd full, or queued bytes filling the free cwnd). Returns
    (that subflow or None, whether an active subflow was temporarily unavailable, number of backup
    subflows), or None when the list holds anything but engine subflows (test doubles: the caller
    scans them itself). Compiled, this reads the subflows' fields directly: a scheduler in Python
    would pay an attribute lookup per field per subflow on every decision."""
    best: SubflowSender | None = None
    best_rtt = 1 << 62
    busy = False
    n_backup = 0
    for x in subflows:
        if not isinstance(x, SubflowSender):
            return None
        if x.backup:
            n_backup += 1
            continue
        if not x.established or x.pf:
            continue
        inflight = x.in_flight
        cwnd = x.cwnd
        if x.ca_state == CA_LOSS or inflight >= cwnd or x.queued_bytes >= (cwnd - inflight) * x.mss:
            busy = True
            continue
        r = x.srtt_us8
        if r < best_rtt:
            best = x
            best_rtt = r
    return best, busy, n_backup


def lia_terms(group: list[Any]) -> tuple[int, int, float, float] | None:
    """The sums of LIA's alpha (workbench.replay.cc.LIA) over the established subflows of ``group``:
    (count, total cwnd, max cwnd/rtt^2, sum cwnd/rtt), rtt in s from srtt (at least 1 µs); None
    when ``group`` holds anything but engine subflows (test doubles: the caller sums them itself).
    Here, compiled, because it runs on every ACK in congestion avoidance over every subflow; ints are
    converted and powers taken as Python does (float(), C pow), so the results are bit-identical."""
    n = 0
    tot = 0
    best = 0.0
    first = True
    denom = 0.0
    for s in group:
        if not isinstance(s, SubflowSender):
            return None
        if not s.established:
            continue
        n += 1
        r8 = s.srtt_us8
        r = float(r8 if r8 > 8 else 8) / 8e6
        c = s.cwnd
        tot += c
        x = float(c) / math.pow(r, 2.0)  # = c / r ** 2 (Python's float ** is C pow too), unboxed
        if first or x > best:
            best = x
            first = False
        denom += float(c) / r
    return n, tot, best, denom


def olia_terms(group: list[Any], sf: Any) -> tuple[int, int, float, float, int, float, int] | None:
    """The terms of OLIA's increase (workbench.replay.cc.OLIA) for ``sf`` over the established
    subflows of ``group`` (giving each its loss record ``cc_state`` if it has none): (count, max cwnd,
    best score, rate sum, number of max-cwnd paths, sf's score, number of best paths without the max
    cwnd); count <= 1 stops after the first pass. None when ``group`` holds anything but engine
    subflows. Compiled for the same reason as `lia_terms`."""
    if not isinstance(sf, SubflowSender):
        return None
    subs: list[SubflowSender] = group  # typed: the loops below read the fields directly
    n = 0
    max_cwnd = 0
    for x in group:
        if not isinstance(x, SubflowSender):
            return None  # (a record given to the subflows before this one is what the caller gives too)
    for s in subs:
        if s.established:
            n += 1
            if s.cc_state is None:
                s.cc_state = [s.una_bytes] * 3
            c = s.cwnd
            if c > max_cwnd:
                max_cwnd = c
    if n <= 1:
        return n, max_cwnd, 0.0, 0.0, 0, 0.0, 0
    r8 = sf.srtt_us8
    rtt = float(r8 if r8 > 8 else 8) / 8e6
    scores: list[float] = []
    best = 0.0
    rate = 0.0
    n_m = 0
    sf_score = 0.0
    for s in subs:
        if not s.established:
            continue
        r8 = s.srtt_us8
        rs = float(r8 if r8 > 8 else 8) / 8e6
        st: list[int] = s.cc_state  # OLIA's loss record: snd_una (bytes) at the last three losses
        l1 = st[1]
        d1 = st[2] - l1
        d0 = l1 - st[0]
        sc = float(d1 if d1 >= d0 else d0) / math.pow(rs, 2.0)
        scores.append(sc)
        if len(scores) == 1 or sc > best:
            best = sc
        c = s.cwnd
        if c == max_cwnd:
            n_m += 1
        if s is sf:
            sf_score = sc
        rate += float(c) * rtt / rs
    b_not_m = 0
    k = 0
    for s in subs:
        if s.established:
            if s.cwnd != max_cwnd and scores[k] == best:
                b_not_m += 1
            k += 1
    return n, max_cwnd, best, rate, n_m, sf_score, b_not_m


class ConnReceiver:
    """Client-side meta socket: in-order point, OOO queue, shared receive window. ``wnd_init`` is
    the window the handshake announced (each subflow's first rcv_ssthresh); the buffer itself when the
    window does not grow. Each subflow announces its own window (`SubflowReceiver.send_ack`) or up to
    ``wnd_sent_end``, the furthest right edge any subflow announced, if that lies further.

    ``wnd_cap`` is the window the MPTCP socket's receive buffer allows (win_from_space of sk_rcvbuf),
    less the out-of-order data it holds. Without autotuning it is ``rcv_buf_bytes`` throughout. With
    it (``drs_space`` > 0: tcp_moderate_rcvbuf) it starts at what tcp_rmem[1] allows and grows as
    mptcp_rcv_space_adjust grows the buffer (Linux 6.18): a measurement lasts the largest receiver RTT
    estimate of the subflows (``SubflowReceiver.rcv_rtt_us8``; none until a subflow has one, and
    re-read only when the cached one has run out), and when the application read more in it than in
    any measurement before (``drs_space``, rcvq_space.space), the window becomes
    `rcvbuf_grow_window` of the two (plus the out-of-order span held), at most ``rcv_buf_bytes``, and
    every subflow's own buffer follows (`SubflowReceiver.rcvbuf_grow`). Measured against the kernel
    (benchmarks/kernel_sockets.py, buf-1bdp): rcv_space 14480 -> 28480 -> 52432 by 0.11 s, the window
    then held at 281 kB until a hole on the slow subflow fills inside one of its 60-70 ms measurements
    and one step takes the buffer to tcp_rmem[2] (0.38 s)."""

    __slots__ = ("delivered_t_ns", "drs_rtt_us", "drs_seq", "drs_space", "drs_t_ns", "max_ooo_bytes", "mss",
                 "ooo", "ooo_bytes", "rcv_buf_bytes", "rcv_nxt", "receivers", "wnd_cap", "wnd_init",
                 "wnd_sent_end")

    def __init__(self, rcv_buf_bytes: int, wnd_init_bytes: int | None = None, *,
                 buf_init_bytes: int | None = None, rcv_space_init_bytes: int = 0, mss_bytes: int = 1424) -> None:
        self.rcv_buf_bytes = rcv_buf_bytes
        self.wnd_init = rcv_buf_bytes if wnd_init_bytes is None else min(wnd_init_bytes, rcv_buf_bytes)
        self.rcv_nxt = 0
        self.ooo: dict[int, int] = {}
        self.ooo_bytes = 0
        self.max_ooo_bytes = 0
        self.delivered_t_ns = 0  # when rcv_nxt last advanced
        self.mss = mss_bytes
        # receive-buffer autotuning (mptcp_rcv_space_adjust): rcvq_space.space (0 = no autotuning),
        # where (rcv_nxt) and when the measurement began (the first at the receiver's end of the
        # handshake, set by the run: mptcp_rcv_space_init), and its cached RTT
        autotuned = buf_init_bytes is not None and rcv_space_init_bytes > 0
        self.wnd_cap = min(buf_init_bytes, rcv_buf_bytes) if autotuned and buf_init_bytes else rcv_buf_bytes
        self.drs_space = rcv_space_init_bytes if autotuned else 0
        self.drs_seq = 0
        self.drs_t_ns = 0
        self.drs_rtt_us = 0
        self.receivers: list[Any] = []  # the subflow receivers (SubflowReceiver), for autotuning
        # msk->rcv_wnd_sent: the furthest right edge (DSN) any subflow announced; a subflow whose own
        # window ends short of it announces up to it instead (mptcp_set_rwin)
        self.wnd_sent_end = self.wnd_init

    def autotune(self, now: int) -> None:
        """mptcp_rcv_space_adjust when the application reads (it reads in-order data at once)."""
        t = (now - self.drs_t_ns) // 1000
        rtt = self.drs_rtt_us
        if rtt and t < rtt:
            return
        rtt8 = 0
        for r in self.receivers:
            if r.rcv_rtt_us8 > rtt8:
                rtt8 = r.rcv_rtt_us8
        rtt = self.drs_rtt_us = rtt8 >> 3
        if not rtt or t < rtt:
            return
        copied = self.rcv_nxt - self.drs_seq
        old = self.drs_space
        if copied > old:
            self.drs_space = copied
            win = rcvbuf_grow_window(copied, old)
            if self.ooo:
                win += max(self.ooo.values()) - self.rcv_nxt
            cap = self.rcv_buf_bytes
            if win > self.wnd_cap and self.wnd_cap < cap:
                self.wnd_cap = win if win < cap else cap
                for r in self.receivers:  # "make subflows follow along"
                    r.rcvbuf_grow(copied)
        self.drs_seq = self.rcv_nxt
        self.drs_t_ns = now

    def deliver(self, dsn: int, plen: int, now: int) -> bool:
        """Data handed up in subflow order; returns True when it went to the OOO queue."""
        nxt = self.rcv_nxt
        if dsn == nxt:
            nxt = dsn + plen
            ooo = self.ooo
            if ooo:
                while nxt in ooo:
                    e = ooo.pop(nxt)
                    self.ooo_bytes -= e - nxt
                    nxt = e
            self.rcv_nxt = nxt
            self.delivered_t_ns = now
            return False
        if dsn > nxt:
            if dsn not in self.ooo:
                self.ooo[dsn] = dsn + plen
                self.ooo_bytes += plen
                if self.ooo_bytes > self.max_ooo_bytes:
                    self.max_ooo_bytes = self.ooo_bytes
            return True
        if dsn + plen > nxt:  # partial overlap (not produced by this engine: segments never re-cut)
            self.rcv_nxt = dsn + plen
            self.delivered_t_ns = now
        return False


class Connection:
    """Meta sender + the subflow objects + the receiver; owns the scheduler call loop."""

    def __init__(self, loop: EventLoop, cfg: ConnectionConfig, sched: Scheduler, rng: random.Random,
                 rec: Recorder | None) -> None:
        self.loop = loop
        self.cfg = cfg
        self.sched = sched
        self.rng = rng
        self.rec = rec
        self.mss = cfg.mss_bytes
        self.send_buf_auto = cfg.send_buf_bytes is None
        self.sndbuf_stale = True  # a subflow's cwnd_max_seen grew since send_buf_bytes was summed
        self.send_buf_bytes = cfg.send_buf_bytes if cfg.send_buf_bytes is not None else 4 * 1024 * 1024
        self.rx = ConnReceiver(cfg.rcv_buf_bytes, cfg.rcv_wnd_init_bytes, buf_init_bytes=cfg.rcv_buf_init_bytes,
                               rcv_space_init_bytes=cfg.rcv_space_init_bytes, mss_bytes=cfg.mss_bytes)
        self.subflows: list[SubflowSender] = []
        self.views: list[SubflowView] = []  # the subflows as schedulers see them (the same objects)
        self.view = self  # the connection itself implements ConnView (attribute reads are cheap)
        self.reinject_head = -1
        # meta segment table
        self.m_dsn: list[int] = []
        self.m_len: list[int] = []
        self.m_mask: list[int] = []
        self.m_sent: list[int] = []
        self.n_segs = 0
        self.head = 0
        self.max_sent_idx = 0
        self.write_seq = 0
        self.snd_una = 0
        self.una_idx = 0
        self.wnd_end = self.rx.wnd_init  # what the SYN/SYN-ACK exchange announced
        self.reinject: list[int] = []
        self.send_buffer_full = False
        self.workload: Workload | None = None
        self._in_push = False
        self._push_again = False
        self._dirty: list[SubflowSender] = []
        self.meta_backoff = 0
        self.meta_rto_timer = Timer(loop, self._on_meta_rto)
        self.wake_timer = Timer(loop, self._on_wake)
        self.reinject_on_rto = (cfg.reinject_on_subflow_rto if cfg.reinject_on_subflow_rto is not None
                                else bool(sched.reinject_on_subflow_rto))
        self.done = False
        self.done_ns: int | None = None
        from workbench.schedulers.base import Scheduler
        self._sched_on_ack = getattr(type(sched), "on_ack", None) is not Scheduler.on_ack
        self._sched_on_applied = getattr(type(sched), "on_applied", None) is not Scheduler.on_applied
        self.sent_ahead: list[int] = []  # segments above head sent out of order (ascending; pruned lazily)
        self._meta_rto_cache = (-1, 0)
        self.upstream_rtx = getattr(sched, "meta_retrans", "oldest-segment") == "upstream"
        self.recovery = False       # msk->recovery: everything unacknowledged is being re-sent
        self.recovery_dsn = 0       # msk->recovery_snd_nxt
        self.n_reinjected = 0
        self.n_opportunistic = 0
        self.n_penalized = 0
        self.n_meta_rto = 0
        self.n_decisions = 0

    # ------------------------------------------------------------------ application side
    def app_write(self, nbytes: int, now: int) -> int:
        """The application writes up to ``nbytes``; returns how many the send buffer took."""
        if self.send_buf_auto and self.sndbuf_stale and self.subflows:
            # the sum only changes when a subflow's largest cwnd grew (O(subflows) then, not per write)
            self.send_buf_bytes = sum(min(s.sndbuf_segments * s.mss, 4 << 20) for s in self.subflows)
            self.sndbuf_stale = False
        used = self.write_seq - self.snd_una
        free = self.send_buf_bytes - used
        if self.send_buffer_full and 2 * free < used:
            # A writer blocked on a full buffer wakes only once a third of it is free again
            # (sk_stream_write_space: wspace >= wmem_queued / 2), not at every acknowledged byte.
            return 0
        n = nbytes if nbytes < free else free
        if n <= 0:
            self.send_buffer_full = nbytes > 0
            return 0
        self.send_buffer_full = n < nbytes
        mss = self.mss
        left = n
        # top up an unsent short tail segment first
        if self.n_segs and not self.m_sent[self.n_segs - 1] and self.m_len[self.n_segs - 1] < mss:
            k = self.n_segs - 1
            add = min(mss - self.m_len[k], left)
            self.m_len[k] += add
            left -= add
        m_dsn = self.m_dsn
        m_len = self.m_len
        m_mask = self.m_mask
        m_sent = self.m_sent
        dsn = self.write_seq + (n - left)
        while left > 0:
            ln = mss if left > mss else left
            m_dsn.append(dsn)
            m_len.append(ln)
            m_mask.append(0)
            m_sent.append(0)
            dsn += ln
            left -= ln
        self.n_segs = len(m_dsn)
        self.write_seq += n
        return n

    # ------------------------------------------------------------------ scheduling
    def push(self, now: int) -> None:
        """mptcp_write_xmit: apply scheduler decisions until it says wait or nothing changes."""
        if self._in_push:
            self._push_again = True  # re-entered from inside a decision: loop once more
            return
        self._in_push = True
        select = self.sched.select
        views = self.views
        again = True
        apply = self._apply
        n = 0
        while again:
            self._push_again = False
            notify = self.sched.on_applied if self._sched_on_applied else None
            while n < 1_000_000:  # guard against a scheduler that never says "wait"
                d = select(self, views)
                if d is None:
                    break
                k = apply(d, now)
                if notify is not None:
                    notify(self, d, k)
                if not k:
                    break
                n += 1
            again = self._push_again
        self.n_decisions += n
        self._in_push = False
        dirty = self._dirty
        if dirty:  # subflows that got segments transmit them now (same instant as the decisions)
            for sf in dirty:
                sf.dirty = False
                sf.try_send(now)
            dirty.clear()
        if self.meta_rto_timer.deadline is None and self.una_idx < self.max_sent_idx:
            self.meta_rto_timer.arm(now + self.meta_rto_ns())

    def _apply(self, d, now: int) -> int:
        sf = self.subflows[d[0]]
        if not sf.established:
            return 0
        seg = d[1]
        m_dsn = self.m_dsn
        m_len = self.m_len
        m_mask = self.m_mask
        m_sent = self.m_sent
        bit = 1 << sf.index
        wnd_end = self.wnd_end
        mss = self.mss
        n = 0
        if seg < 0:
            cnt = d[2]
            i = self.head
            n_segs = self.n_segs
            smeta = sf.smeta
            slen = sf.slen
            sseq = sf.sseq
            sflags = sf.sflags
            stx = sf.stx
            wb = sf.write_bytes
            while n < cnt and i < n_segs:
                ln = m_len[i]
                if m_dsn[i] + (ln if ln < mss else mss) > wnd_end:
                    break
                m_sent[i] = 1
                m_mask[i] |= bit
                smeta.append(i)  # SubflowSender.append, inlined (one call per segment saved)
                slen.append(ln)
                sseq.append(wb)
                sflags.append(0)
                stx.append(0)
                wb += ln
                n += 1
                i += 1
                while i < n_segs and m_sent[i]:
                    i += 1
            if n:
                sf.queued_bytes += wb - sf.write_bytes
                sf.write_bytes = wb
                sf.end += n
                sf.queued += n
            self.head = i
            if i > self.max_sent_idx:
                self.max_sent_idx = i
        else:
            if seg >= self.n_segs:
                return 0
            if seg < self.una_idx:  # already DATA_ACKed: just forget it
                return self.drop_reinject(seg)
            if not m_sent[seg]:
                ln = m_len[seg]
                if m_dsn[seg] + (ln if ln < mss else mss) > wnd_end:
                    return 0
                m_sent[seg] = 1
                m_mask[seg] |= bit
                sf.append(seg, ln, reinj=False)
                if seg > self.head:
                    bisect.insort(self.sent_ahead, seg)
                if seg == self.head:
                    i = seg + 1
                    while i < self.n_segs and m_sent[i]:
                        i += 1
                    self.head = i
                if seg + 1 > self.max_sent_idx:
                    self.max_sent_idx = seg + 1
            else:
                in_q = self._remove_reinject(seg)
                if in_q:
                    self.n_reinjected += 1
                else:
                    self.n_opportunistic += 1
                m_mask[seg] |= bit
                sf.append(seg, m_len[seg], reinj=True)
            n = 1
        if n and not sf.dirty:
            sf.dirty = True
            self._dirty.append(sf)
        return n

    def _remove_reinject(self, seg: int) -> bool:
        r = self.reinject
        k = bisect.bisect_left(r, seg)
        if k < len(r) and r[k] == seg:
            del r[k]
            self.reinject_head = r[0] if r else -1
            return True
        return False

    def drop_reinject(self, seg: int) -> int:
        return 1 if self._remove_reinject(seg) else 0

    def add_reinject(self, seg: int) -> None:
        if seg < self.una_idx:
            return
        r = self.reinject
        k = bisect.bisect_left(r, seg)
        if k == len(r) or r[k] != seg:
            r.insert(k, seg)
            self.reinject_head = r[0]

    def penalize(self, index: int) -> None:
        """minRTT penalization (§1.4): halve cwnd, and ssthresh unless in slow start."""
        x = self.subflows[index]
        prior = x.cwnd
        x.cwnd = max(x.cwnd // 2, 1)
        if prior >= x.ssthresh:
            x.ssthresh = max(x.ssthresh // 2, 2)
        self.n_penalized += 1

    def wake_at(self, t_ns: int) -> None:
        d = self.wake_timer.deadline
        if d is None or t_ns < d:
            self.wake_timer.arm(t_ns)

    def _on_wake(self, now: int) -> None:
        self.sched.on_timer(self.view, now)
        self.push(now)

    # ------------------------------------------------------------------ ConnView (for schedulers)
    @property
    def now_ns(self) -> int:
        return self.loop.now

    @property
    def unsent_bytes(self) -> int:
        return self.write_seq - self.m_dsn[self.head] if self.head < self.n_segs else 0

    @property
    def oldest_unacked(self) -> int:
        i = self.una_idx
        return i if i < self.n_segs and self.m_sent[i] else -1

    @property
    def reinject_queue(self) -> tuple[int, ...]:
        return tuple(self.reinject)

    @property
    def rcv_ooo_bytes(self) -> int:
        return self.rx.ooo_bytes

    def seg_dsn(self, seg: int) -> int:
        return self.m_dsn[seg]

    def seg_len(self, seg: int) -> int:
        return self.m_len[seg]

    def seg_path_mask(self, seg: int) -> int:
        return self.m_mask[seg]

    def seg_sent(self, seg: int) -> bool:
        return bool(self.m_sent[seg])

    def nth_unsent(self, n: int) -> int:
        """Index of the ``n``-th (0-based) unsent segment from the head, or ``n_segs`` if none.

        Above the head only segments sent out of order (``sent_ahead``) are sent, so the number of
        unsent segments in [head, t] is (t - head + 1) - #ahead <= t: binary search for the first t
        where it reaches n + 1."""
        head = self.head
        ahead = self.sent_ahead
        if ahead and ahead[0] < head:
            del ahead[:bisect.bisect_left(ahead, head)]
        lo, hi = head + n, head + n + len(ahead)
        while lo < hi:
            mid = (lo + hi) // 2
            if mid - head + 1 - bisect.bisect_right(ahead, mid) >= n + 1:
                hi = mid
            else:
                lo = mid + 1
        return lo if lo < self.n_segs else self.n_segs

    def seg_at_dsn(self, dsn: int) -> int:
        """The segment starting at byte ``dsn`` (segments are never re-cut): the first at or above it."""
        return bisect.bisect_left(self.m_dsn, dsn)

    def window_allows(self, seg: int) -> bool:
        """meta_snd_wnd_test: the segment's first MSS ends inside the peer's window."""
        ln = self.m_len[seg]
        return self.m_dsn[seg] + (ln if ln < self.mss else self.mss) <= self.wnd_end

    # ------------------------------------------------------------------ feedback
    def on_data_ack(self, data_ack: int, rwnd: int, now: int) -> None:
        if data_ack > self.snd_una:
            self.snd_una = data_ack
            m_dsn = self.m_dsn
            m_len = self.m_len
            i = self.una_idx
            n_segs = self.n_segs
            while i < n_segs and m_dsn[i] + m_len[i] <= data_ack:
                i += 1
            self.una_idx = i
            r = self.reinject
            if r and r[0] < i:
                del r[:bisect.bisect_left(r, i)]
                self.reinject_head = r[0] if r else -1
            self.meta_backoff = 0
            if self.recovery and data_ack > self.recovery_dsn:
                self.recovery = False
            if i < self.max_sent_idx:
                self.meta_rto_timer.arm(now + self.meta_rto_ns())
            else:
                self.meta_rto_timer.cancel()
            e = data_ack + rwnd
            if e > self.wnd_end:
                self.wnd_end = e
            wl = self.workload
            if wl is not None:
                wl.on_acked(self, now)
            if data_ack >= self.write_seq and (wl is None or wl.finished):
                self._finish(now)
            return
        e = data_ack + rwnd
        if e > self.wnd_end:
            self.wnd_end = e

    def _finish(self, now: int) -> None:
        if not self.done:
            self.done = True
            self.done_ns = now
            self.loop.stop()

    def after_ack(self, sf: SubflowSender, now: int) -> None:
        if self._sched_on_ack:
            self.sched.on_ack(self, sf, now)
        self.push(now)

    def on_subflow_loss(self, sf: SubflowSender, kind: str, now: int) -> None:
        if kind == "rto" and self.reinject_on_rto:
            m_sent = self.m_sent
            una = self.una_idx
            smeta = sf.smeta
            sflags = sf.sflags
            for i in range(sf.una, sf.end):
                mi = smeta[i]
                if mi >= una and m_sent[mi] and not sflags[i] & F_REINJ:
                    self.add_reinject(mi)
            sf.pf = True
        self.sched.on_loss(self.view, self.views[sf.index], kind, now)

    def meta_rto_ns(self) -> int:
        now = self.loop.now
        if self.upstream_rtx:
            # mptcp_set_timeout: the latest pending timer of a subflow not (yet) counted stale
            tout = 0
            for s in self.subflows:
                d = s.rto_timer.deadline  # icsk_pending: the retransmission or the loss probe timer
                if d is None:
                    d = s.tlp_timer.deadline
                if d is not None and s.established and not s.stale_count and d - now > tout:
                    tout = d - now
            return tout if tout > 0 else _TCP_RTO_MIN_NS
        t, base = self._meta_rto_cache
        if now - t > 10_000_000 or t < 0:  # refreshed at most every 10 ms (the timer is lazy anyway)
            rtos = [s.rto_us for s in self.subflows if s.established]
            base = int(max(rtos, default=1_000_000) * self.sched.meta_rto_factor) * 1000
            self._meta_rto_cache = (now, base)
        return min(base << self.meta_backoff, 120_000_000_000)

    def _on_meta_rto(self, now: int) -> None:
        if self.una_idx >= self.max_sent_idx or self.done:
            return
        self.n_meta_rto += 1
        if self.upstream_rtx:
            self._upstream_retrans(now)
            return
        self.add_reinject(self.una_idx)
        self.meta_backoff += 1
        self.meta_rto_timer.arm(now + self.meta_rto_ns())
        self.push(now)

    def _upstream_retrans(self, now: int) -> None:
        """__mptcp_retrans: the stale check of every subflow with data outstanding at TCP level
        (mptcp_subflow_get_retrans), then the head data fragment up for reinjection; the timer is
        re-armed without backoff."""
        for sf in self.subflows:
            if not sf.established or sf.una >= sf.end:
                continue
            if not sf.stale_count:
                sf.stale_ts = sf.last_ack_ns
                sf.stale_count = 1
            elif sf.stale_ts == sf.last_ack_ns:
                sf.stale_count += 1
                if not sf.stale and sf.stale_count > _STALE_LOSS_CNT and any(
                        o is not sf and o.established and not o.stale and o.stale_count < _STALE_LOSS_CNT - 1
                        for o in self.subflows):
                    sf.stale = True
                    self._retransmit_pending()
            else:
                sf.stale_count = 0
        m_dsn = self.m_dsn
        m_sent = self.m_sent
        end_dsn = (self.snd_una // _DFRAG_BYTES + 1) * _DFRAG_BYTES
        i = self.una_idx
        while i < self.max_sent_idx and m_dsn[i] < end_dsn:
            if m_sent[i]:
                self.add_reinject(i)
            i += 1
        self.meta_rto_timer.arm(now + self.meta_rto_ns())
        self.push(now)

    def _retransmit_pending(self) -> None:
        """__mptcp_retransmit_pending_data: a subflow went stale; everything sent and not yet
        DATA_ACKed is re-sent on the others, like new data, until snd_una passes today's snd_nxt."""
        m_sent = self.m_sent
        for i in range(self.una_idx, self.max_sent_idx):
            if m_sent[i]:
                self.add_reinject(i)
        self.recovery = True
        self.recovery_dsn = self.m_dsn[self.max_sent_idx - 1] + self.m_len[self.max_sent_idx - 1]

    # ------------------------------------------------------------------ subflow setup
    def establish(self, sf: SubflowSender, now: int, handshake_rtt_ns: int) -> None:
        """The subflow can carry data from now on (handshake done); the SYN/SYN-ACK exchange gave
        the first RTT sample, as Linux's tcp_synack_rtt_meas does."""
        sf.established = True
        sf.start_ns = now
        sf.rate_t0_ns = now
        sf.last_ack_ns = now
        if handshake_rtt_ns > 0:
            sf.rtt_sample(handshake_rtt_ns // 1000)
        sf.ca_state = CA_OPEN
        self.push(now)
