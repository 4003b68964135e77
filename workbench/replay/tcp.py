"""A TCP subflow as Linux runs it: sender (server side) and receiver (client side) halves.

Sender, per subflow:

* Segments are whole MSS-or-smaller chunks handed down by the MPTCP connection (its scheduler); the
  subflow keeps them in parallel lists indexed by segment number (``una <= nxt <= end``): segments
  ``[una, nxt)`` are in flight, ``[nxt, end)`` are queued on the subflow but not yet sent (the
  "write_seq - snd_nxt" bytes that §0.2 of docs/MODEL.md tests).
* RTT estimator = Linux ``tcp_rtt_estimator`` in integer µs (srtt ×8, mdev ×4, ``mdev_max`` reset to
  ``rto_min`` every RTT, hence ``rttvar >= ~200 ms``); RTO = srtt + rttvar, exponential back-off,
  re-armed on every ACK that acks new data. RTT samples as ``tcp_clean_rtx_queue``: oldest newly
  acked segment that was neither retransmitted nor SACKed (Karn).
* Loss recovery: SACK scoreboard reduced to what the receiver model can report cheaply. Every ACK
  sent because of subflow-level reordering carries the segment that caused it (one SACK block;
  such ACKs are immediate, so nothing is lost unless ACKs are dropped). Loss marking is FACK-style
  (a segment is lost when ``dupthresh = 3`` segments above it are SACKed); Recovery uses PRR
  (``tcp_cwnd_reduction``) and ends at ``high_seq``; RTO enters Loss (cwnd 1, every un-SACKed
  segment marked lost, retransmitted as cwnd allows). Tail loss probe as Linux (TLP, RFC 8985): in
  Open state with data out, a probe timer of 2 x srtt (+ rto_min for a single segment out, else
  + 2 ms, never past the RTO) sends one queued segment regardless of cwnd, else retransmits the last
  one; a retransmitted probe acknowledged without a DSACK repaired a loss and reduces cwnd as CWR
  does. RACK (RFC 8985) in Recovery and Loss finds retransmissions lost again: a retransmission
  sent before the latest-sent segment known delivered and out longer than that one's RTT is marked
  lost and sent again (without it only an RTO repairs a lost retransmission). A spurious RTO is
  undone as Linux does (tcp_try_undo_loss): F-RTO (tcp_frto = 2, for an RTO out of Open state or
  after the first of a series) when an ACK acknowledges or SACKs a segment sent before the RTO and
  never retransmitted, and with timestamps when an ACK that advances snd_una echoes a timestamp older
  than the first retransmission (tcp_packet_delayed); cwnd and ssthresh are restored (an outage whose
  frames were held, a delay spike). No RACK reordering window outside recovery (FACK's three segments,
  the same thing without reordering), no F-RTO new-data probing, no undo in Recovery (DSACK).
* ``packets_in_flight = packets_out - (sacked_out + lost_out) + retrans_out`` as Linux.

Receiver, per subflow: cumulative ACK by segment number, out-of-order segments held until the hole
is filled (then handed to the connection in subflow order, like Linux's mapping completion), delayed
ACK every 2 segments or 40 ms, quick-ACK for the first 16 segments and after an idle period longer
than the RTO, immediate ACK on subflow reordering and when a hole is filled, and — out-of-tree
kernel behaviour, switchable — quick-ACK mode when data went to the connection-level OOO queue.
With receive-window growth on (upstream Linux), the window starts at what the SYN announced and
grows per segment received (tcp_grow_window), each such segment ACKed at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

from workbench.replay.events import EventLoop, Timer
from workbench.replay.recorder import AckRow, RcvRow, SampleRow, SndRow

if TYPE_CHECKING:
    from workbench.replay.cc import CongestionControl
    from workbench.replay.link import Link
    from workbench.replay.mptcp import Connection, ConnReceiver
    from workbench.replay.recorder import Recorder

__all__ = ["AckPkt", "DataPkt", "SubflowReceiver", "SubflowSender", "rcvbuf_grow_window"]

# Linux TCP_CA_* states
CA_OPEN = 0
CA_RECOVERY = 3
CA_LOSS = 4
CA_STATE_NAMES = {0: "open", 1: "disorder", 2: "cwr", 3: "recovery", 4: "loss"}

# per-segment flags at the sender
F_SACKED = 1
F_LOST = 2
F_RETRANS = 4       # a retransmission is in flight (counted in retrans_out)
F_EVER_RETRANS = 8  # was retransmitted at least once (Karn: no RTT sample)
F_REINJ = 16        # this subflow copy is an MPTCP reinjection / opportunistic retransmission

_DUPTHRESH = 3
_DSACK = -2  # the "sack" field of an ACK answering a duplicate segment (a DSACK)
_RTO_MAX_US = 120_000_000
_TCP_MAX_QUICKACKS = 16


# Recorder rows are NamedTuples built with tuple.__new__ (a C call; the NamedTuple's own __new__ is a
# Python function: a frame per row), looked up once.
_new_row = tuple.__new__

# Packets on the wire are small typed records. Compiled (mypyc), a @final class with __slots__ is a C
# struct: as cheap to build as a tuple and faster to read than unpacking one. A link carries data or
# ACKs, never both, so each end has its own handler (SubflowReceiver.on_data, SubflowSender.on_ack)
# and the recorder's drop taps are per link kind (workbench.replay.network.wire); `sf` (the subflow
# index) is what a shared link routes by.
@final
class DataPkt:
    """A data segment of subflow ``sf``: subflow segment number ``idx``, relative sequence number
    ``seq``, ``plen`` payload bytes at connection-level ``dsn``, sent at ``t_snd_ns``; ``ts_ecr_ns`` is
    the timestamp it echoes (TSecr: when the last ACK the sender had heard was sent, 0 before any)."""

    __slots__ = ("dsn", "idx", "plen", "reinj", "retrans", "seq", "sf", "t_snd_ns", "ts_ecr_ns")

    def __init__(self, sf: int, idx: int, seq: int, plen: int, dsn: int, t_snd_ns: int, retrans: bool,
                 reinj: bool, ts_ecr_ns: int = 0) -> None:
        self.sf = sf
        self.idx = idx
        self.seq = seq
        self.plen = plen
        self.dsn = dsn
        self.t_snd_ns = t_snd_ns
        self.retrans = retrans
        self.reinj = reinj
        self.ts_ecr_ns = ts_ecr_ns

    def __repr__(self) -> str:
        return (f"DataPkt(sf={self.sf}, idx={self.idx}, seq={self.seq}, plen={self.plen}, dsn={self.dsn}, "
                f"t_snd_ns={self.t_snd_ns}, retrans={self.retrans}, reinj={self.reinj})")


@final
class AckPkt:
    """An ACK of subflow ``sf``: ``ack`` = next expected segment number, ``sack`` = one SACKed segment,
    -1 for none or -2 for a DSACK; the DATA_ACK ``data_ack`` and window ``rwnd`` of the connection;
    sent at ``t_snd_ns``; ``ts_ecr_ns`` is the timestamp it echoes (TSecr: when the data segment the
    receiver holds as TS.Recent was sent)."""

    __slots__ = ("ack", "data_ack", "rwnd", "sack", "sf", "t_snd_ns", "ts_ecr_ns")

    def __init__(self, sf: int, ack: int, sack: int, data_ack: int, rwnd: int, t_snd_ns: int,
                 ts_ecr_ns: int = 0) -> None:
        self.sf = sf
        self.ack = ack
        self.sack = sack
        self.data_ack = data_ack
        self.rwnd = rwnd
        self.t_snd_ns = t_snd_ns
        self.ts_ecr_ns = ts_ecr_ns

    def __repr__(self) -> str:
        return (f"AckPkt(sf={self.sf}, ack={self.ack}, sack={self.sack}, data_ack={self.data_ack}, "
                f"rwnd={self.rwnd}, t_snd_ns={self.t_snd_ns})")


class SubflowSender:
    """Sender half of one TCP subflow (see module docstring)."""

    __slots__ = (
        "backoff",
        "backup",
        "ca_state",
        "cc",
        "cc_state",
        "conn",
        "cwnd",
        "cwnd_cnt",
        "cwnd_max_seen",
        "cwnd_usage_idx",
        "delivered_bytes",
        "dirty",
        "end",
        "established",
        "fack",
        "frto",
        "hdr_bytes",
        "high_seq",
        "hystart_exits",
        "in_flight",
        "index",
        "is_cwnd_limited",
        "last_ack_ns",
        "link",
        "loop",
        "lost_hint",
        "lost_out",
        "max_po",
        "mdev_max_us",
        "mdev_us",
        "min_rtt_us",
        "mss",
        "n_fast_recoveries",
        "n_lost_retrans",
        "n_retrans",
        "n_rto",
        "n_rto_undone",
        "n_sent",
        "n_tlp",
        "name",
        "nxt",
        "packets_out",
        "pf",
        "prior_cwnd",
        "prior_ssthresh",
        "prr_delivered",
        "prr_out",
        "queued",
        "queued_bytes",
        "rack_rtt_ns",
        "rack_xmit_ns",
        "rate_bps",
        "rate_t0_ns",
        "rate_una_bytes",
        "rec",
        "retrans_hint",
        "retrans_out",
        "retrans_stamp_ns",
        "rto_min_us",
        "rto_timer",
        "rto_us",
        "rtt_seq",
        "rttvar_us",
        "sacked_out",
        "sflags",
        "slen",
        "smeta",
        "srtt_ns",
        "srtt_us8",
        "sseq",
        "ssthresh",
        "stale",
        "stale_count",
        "stale_ts",
        "start_ns",
        "stx",
        "tlp_high_seq",
        "tlp_retrans",
        "tlp_timer",
        "ts_ack_ns",
        "una",
        "una_bytes",
        "undo_marker",
        "write_bytes",
    )

    def __init__(self, loop: EventLoop, *, index: int, name: str, conn: Connection, link: Link,
                 mss: int, hdr_bytes: int, init_cwnd: int, rto_min_ns: int, rec: Recorder | None,
                 backup: bool = False) -> None:
        self.loop = loop
        self.index = index
        self.name = name
        self.conn = conn
        self.link = link
        self.rec = rec
        self.mss = mss
        self.hdr_bytes = hdr_bytes
        self.backup = backup
        self.cc: CongestionControl = None  # type: ignore[assignment]  # set by the connection
        self.cc_state: Any = None
        self.dirty = False  # got segments during the current push, transmits at its end
        # segment store
        self.smeta: list[int] = []
        self.slen: list[int] = []
        self.sseq: list[int] = []
        self.sflags: list[int] = []
        self.stx: list[int] = []
        self.una = 0
        self.nxt = 0
        self.end = 0
        self.packets_out = 0
        self.in_flight = 0
        self.queued = 0
        self.queued_bytes = 0
        self.srtt_ns = 0
        self.write_bytes = 1  # relative seq of the next byte queued (SYN = 0, first data byte = 1)
        self.una_bytes = 1
        # scoreboard
        self.sacked_out = 0
        self.lost_out = 0
        self.retrans_out = 0
        self.fack = 0
        self.lost_hint = 0
        self.retrans_hint = 0
        # RACK (tcp_rack_advance): send time of the latest-sent segment known delivered, and the RTT
        # of the last one that advanced it
        self.rack_xmit_ns = -1
        self.rack_rtt_ns = 0
        self.n_lost_retrans = 0
        # congestion state
        self.cwnd = init_cwnd
        self.ssthresh = 1 << 30
        self.cwnd_cnt = 0.0
        self.cwnd_max_seen = init_cwnd
        self.ca_state = CA_OPEN
        self.high_seq = 0
        self.prior_cwnd = init_cwnd
        self.prior_ssthresh = 0      # ssthresh before the RTO, restored if it proves spurious
        self.undo_marker = False     # tp->undo_marker: an RTO's reduction may still be undone
        self.frto = False            # tp->frto: F-RTO (net.ipv4.tcp_frto = 2) judges this RTO
        self.retrans_stamp_ns = 0    # tp->retrans_stamp: when the first retransmission left (0 = none)
        self.prr_delivered = 0
        self.prr_out = 0
        self.max_po = 0              # tp->max_packets_out over the current window
        self.cwnd_usage_idx = 0      # tp->cwnd_usage_seq, as a segment number
        self.is_cwnd_limited = False  # tp->is_cwnd_limited
        self.hystart_exits = 0
        # RTT / RTO
        self.rto_min_us = rto_min_ns // 1000
        self.srtt_us8 = 0
        self.mdev_us = 0
        self.mdev_max_us = 0
        self.rttvar_us = 0
        self.rtt_seq = 0
        self.min_rtt_us = 1 << 62
        self.rto_us = 1_000_000  # RFC 6298 initial 1 s
        self.backoff = 0
        self.rto_timer = Timer(loop, self._on_rto)
        # tail loss probe (tcp_schedule_loss_probe / tcp_send_loss_probe): one probe in flight at most
        self.tlp_timer = Timer(loop, self._on_tlp)
        self.tlp_high_seq = -1   # nxt when the probe went out; -1: none outstanding
        self.tlp_retrans = False  # the probe was a retransmission (not new data)
        self.n_tlp = 0
        # availability and bookkeeping
        self.established = False
        self.start_ns = 0
        self.pf = False
        self.last_ack_ns = 0
        self.ts_ack_ns = 0  # TS.Recent of this end: when the last ACK it heard was sent (data echo it)
        # upstream MPTCP stale detection (mptcp_pm_subflow_chk_stale): timer periods without an ACK
        self.stale = False
        self.stale_count = 0
        self.stale_ts = -1
        self.delivered_bytes = 0
        self.rate_bps = 0.0
        self.rate_t0_ns = 0
        self.rate_una_bytes = 1
        self.n_sent = 0
        self.n_retrans = 0
        self.n_rto = 0
        self.n_rto_undone = 0
        self.n_fast_recoveries = 0

    # ----------------------------------------------------------------------------------- queries
    # packets_out, in_flight, queued, queued_bytes, srtt_ns, ... are plain attributes kept current
    # by the engine (schedulers read them on every decision; properties would cost a call each).
    def _sync(self) -> None:
        nxt = self.nxt
        end = self.end
        self.packets_out = po = nxt - self.una
        self.in_flight = po - self.sacked_out - self.lost_out + self.retrans_out
        self.queued = end - nxt
        self.queued_bytes = self.write_bytes - self.sseq[nxt] if nxt < end else 0

    @property
    def unacked_bytes(self) -> int:
        """write_seq - snd_una: bytes sent-unacked plus queued."""
        return self.write_bytes - self.una_bytes

    @property
    def in_slow_start(self) -> bool:
        return self.cwnd < self.ssthresh

    @property
    def rttvar_ns(self) -> int:
        return self.rttvar_us * 1000

    @property
    def min_rtt_ns(self) -> int:
        m = self.min_rtt_us
        return m * 1000 if m < (1 << 60) else 0

    @property
    def rto_ns(self) -> int:
        return self.rto_us * 1000

    @property
    def pacing_rate_bps(self) -> float:
        """tcp_update_pacing_rate: mss * max(cwnd, packets_out) / srtt, x2 in slow start (cwnd <
        ssthresh/2), x1.2 otherwise; 0 before the first RTT sample."""
        if not self.srtt_us8:
            return 0.0
        w = max(self.cwnd, self.packets_out)
        ratio = 2.0 if self.cwnd < self.ssthresh // 2 else 1.2
        return self.mss * 8 * w / ((self.srtt_us8 >> 3) / 1e6) * ratio

    @property
    def sndbuf_segments(self) -> int:
        """Linux tcp_sndbuf_expand: sndbuf = 2 * max(10, cwnd) * per-MSS truesize (~2.3 KB for a
        1.4 KB MSS) while queued skbs are coalesced (~1.05 x payload): about 3 x the largest cwnd
        reached, in segments (it grows with cwnd and is not shrunk after a loss)."""
        return 3 * max(10, self.cwnd_max_seen)

    def carried(self, seg: int) -> bool:
        return bool(self.conn.m_mask[seg] >> self.index & 1)

    def __repr__(self) -> str:
        return (f"Subflow({self.index}, {self.name!r}, cwnd={self.cwnd}, in_flight={self.in_flight}, "
                f"queued={self.queued}, srtt_us={self.srtt_us8 >> 3}, state={self.ca_state})")

    # ----------------------------------------------------------------------------------- sending
    def append(self, meta_idx: int, plen: int, *, reinj: bool) -> None:
        """Queue one connection-level segment on this subflow (mptcp_skb_entail)."""
        self.smeta.append(meta_idx)
        self.slen.append(plen)
        self.sseq.append(self.write_bytes)
        self.sflags.append(F_REINJ if reinj else 0)
        self.stx.append(0)
        self.write_bytes += plen
        self.end += 1
        self.queued += 1
        self.queued_bytes += plen

    def _xmit(self, i: int, now: int, retrans: bool) -> None:
        conn = self.conn
        mi = self.smeta[i]
        plen = self.slen[i]
        dsn = conn.m_dsn[mi]
        reinj = bool(self.sflags[i] & F_REINJ)
        self.stx[i] = now
        seq = self.sseq[i]
        rec = self.rec
        if rec is not None:
            rec.snd.append(_new_row(SndRow, (now, self.index, seq, plen, dsn, retrans, reinj)))
        self.n_sent += 1
        if retrans and not self.retrans_stamp_ns:
            self.retrans_stamp_ns = now  # tcp_retransmit_skb: the first retransmission's timestamp
        self.link.send(DataPkt(self.index, i, seq, plen, dsn, now, retrans, reinj, self.ts_ack_ns),
                       plen + self.hdr_bytes)

    def try_send(self, now: int) -> None:
        """Send retransmissions of lost segments first, then queued segments, while cwnd allows."""
        sent = False
        sflags = self.sflags
        while True:
            inflight = self.nxt - self.una - self.sacked_out - self.lost_out + self.retrans_out
            if inflight >= self.cwnd:
                break
            if self.lost_out > self.retrans_out:
                i = self.retrans_hint
                if i < self.una:
                    i = self.una
                nxt = self.nxt
                while i < nxt and (sflags[i] & (F_LOST | F_RETRANS | F_SACKED)) != F_LOST:
                    i += 1
                if i < nxt:
                    sflags[i] |= F_RETRANS | F_EVER_RETRANS
                    self.retrans_out += 1
                    self.retrans_hint = i + 1
                    self.n_retrans += 1
                    if self.ca_state == CA_RECOVERY:
                        self.prr_out += 1
                    self._xmit(i, now, True)
                    sent = True
                    continue
                self.retrans_hint = nxt
            if self.nxt < self.end:
                # new data: the common case, _xmit inlined and looped without re-checking losses
                end = self.end
                i = self.nxt
                cwnd = self.cwnd
                smeta = self.smeta
                slen = self.slen
                sseq = self.sseq
                stx = self.stx
                m_dsn = self.conn.m_dsn
                rec = self.rec
                snd = rec.snd if rec is not None else None
                send = self.link.send
                hdr = self.hdr_bytes
                idx = self.index
                ts_ack = self.ts_ack_ns
                k = 0
                while i < end and inflight < cwnd:
                    plen = slen[i]
                    dsn = m_dsn[smeta[i]]
                    seq = sseq[i]
                    reinj = sflags[i] & F_REINJ != 0
                    stx[i] = now
                    if snd is not None:
                        snd.append(_new_row(SndRow, (now, idx, seq, plen, dsn, False, reinj)))
                    send(DataPkt(idx, i, seq, plen, dsn, now, False, reinj, ts_ack), plen + hdr)
                    i += 1
                    k += 1
                    inflight += 1
                self.nxt = i
                self.n_sent += k
                if self.ca_state == CA_RECOVERY:
                    self.prr_out += k
                sent = True
                continue
            break
        # tcp_cwnd_validate (tcp_output.c), after tcp_write_xmit: remember, per window of data, whether
        # the cwnd was fully used, or else the most packets that were out (growth test in on_ack).
        cwnd_limited = inflight >= self.cwnd
        if sent or cwnd_limited:
            po = self.nxt - self.una
            if (self.una >= self.cwnd_usage_idx or cwnd_limited
                    or (not self.is_cwnd_limited and po > self.max_po)):
                self.is_cwnd_limited = cwnd_limited
                self.max_po = po
                self.cwnd_usage_idx = self.nxt
        if sent:
            self._sync()
            if self.rto_timer.deadline is None:
                self.rto_timer.arm(now + (min(self.rto_us << self.backoff, _RTO_MAX_US)) * 1000)
            self._schedule_tlp(now)

    # ------------------------------------------------------------------------------------ RTT
    def rtt_sample(self, m: int) -> None:
        """Linux tcp_rtt_estimator + tcp_set_rto, µs."""
        if m <= 0:
            m = 1
        if m < self.min_rtt_us:
            self.min_rtt_us = m
        srtt = self.srtt_us8
        if srtt != 0:
            m -= srtt >> 3
            srtt += m
            if m < 0:
                m = -m
                m -= self.mdev_us >> 2
                if m > 0:
                    m >>= 3
            else:
                m -= self.mdev_us >> 2
            self.mdev_us += m
            if self.mdev_us > self.mdev_max_us:
                self.mdev_max_us = self.mdev_us
                if self.mdev_max_us > self.rttvar_us:
                    self.rttvar_us = self.mdev_max_us
            if self.una > self.rtt_seq:
                if self.mdev_max_us < self.rttvar_us:
                    self.rttvar_us -= (self.rttvar_us - self.mdev_max_us) >> 2
                self.rtt_seq = self.nxt
                self.mdev_max_us = self.rto_min_us
        else:
            srtt = m << 3
            self.mdev_us = m << 1
            self.rttvar_us = self.mdev_max_us = max(self.mdev_us, self.rto_min_us)
            self.rtt_seq = self.nxt
        self.srtt_us8 = srtt = max(srtt, 1)
        self.srtt_ns = (srtt >> 3) * 1000
        rto = (self.srtt_us8 >> 3) + self.rttvar_us
        self.rto_us = rto if rto < _RTO_MAX_US else _RTO_MAX_US

    # ------------------------------------------------------------------------------------ ACKs
    def on_ack(self, pkt: AckPkt) -> None:
        now = self.loop.now
        conn = self.conn
        self.last_ack_ns = now
        # tcp_replace_ts_recent: pure ACKs carry no sequence space, so each one's TSval is kept
        self.ts_ack_ns = pkt.t_snd_ns
        ack = pkt.ack
        s = pkt.sack
        data_ack = pkt.data_ack
        rwnd = pkt.rwnd
        rec = self.rec
        if rec is not None:
            rec.ack.append(_new_row(AckRow, (now, self.index, self.sseq[ack] if ack < self.end
                                                  else self.write_bytes, data_ack, rwnd, s != -1,
                                                  now - pkt.t_snd_ns)))
        self.pf = False
        self.stale = False  # mptcp_subflow_active: an ACK makes a stale subflow usable again
        if self.tlp_high_seq >= 0 and (s == _DSACK or ack >= self.tlp_high_seq):
            # tcp_process_tlp_ack: a retransmitted probe acknowledged without a DSACK repaired a loss
            if self.tlp_retrans and s != _DSACK and self.ca_state == CA_OPEN:
                self.ssthresh = self.cc.ssthresh(self)
                if self.ssthresh < self.cwnd:
                    self.cwnd = self.ssthresh
            self.tlp_high_seq = -1
        if data_ack > conn.snd_una or data_ack + rwnd > conn.wnd_end:
            conn.on_data_ack(data_ack, rwnd, now)
        sflags = self.sflags
        una = self.una
        newly = 0
        orig_acked = False
        if s >= una and s < self.nxt:
            f = sflags[s]
            if not f & F_SACKED:
                if f & F_LOST:
                    self.lost_out -= 1
                if f & F_RETRANS:
                    self.retrans_out -= 1
                sflags[s] = (f | F_SACKED) & ~(F_LOST | F_RETRANS)
                self.sacked_out += 1
                newly = 1
                if not f & F_EVER_RETRANS and s < self.high_seq:
                    orig_acked = True  # FLAG_ORIG_SACK_ACKED: an original sent before the RTO arrived
                if s + 1 > self.fack:
                    self.fack = s + 1
                self._rack_advance(s, f, now)
        acked = ack - una if ack > una and ack <= self.nxt else 0
        if acked:
            first_tx = -1
            retrans_acked = False
            if not (self.sacked_out or self.lost_out or self.retrans_out):
                # clean scoreboard (the common case): no per-segment bookkeeping to undo
                if sflags[una] & F_EVER_RETRANS:
                    retrans_acked = True
                else:
                    first_tx = self.stx[una]
                    orig_acked = una < self.high_seq
                ack_range = range(0)
            else:
                ack_range = range(una, ack)
            for i in ack_range:
                f = sflags[i]
                if f & 15:
                    if f & F_SACKED:
                        self.sacked_out -= 1
                    else:
                        self._rack_advance(i, f, now)
                    if f & F_LOST:
                        self.lost_out -= 1
                    if f & F_RETRANS:
                        self.retrans_out -= 1
                    if f & F_EVER_RETRANS:
                        retrans_acked = True
                    elif not f & F_SACKED and i < self.high_seq:
                        orig_acked = True  # tcp_clean_rtx_queue: an original, not SACKed before
                elif first_tx < 0:
                    first_tx = self.stx[i]
            if ack_range:
                self._rack_advance(ack - 1, sflags[ack - 1], now)
            self.una = ack
            nb = self.sseq[ack] if ack < self.end else self.write_bytes
            self.delivered_bytes += nb - self.una_bytes
            self.una_bytes = nb
            if ack > self.fack:
                self.fack = ack
            if first_tx >= 0 and not retrans_acked:
                rtt_us = (now - first_tx) // 1000
                self.rtt_sample(rtt_us)
                if self.cwnd < self.ssthresh:
                    self.cc.on_rtt(self, rtt_us, now)
            self.backoff = 0
            # delivery-rate estimate over roughly one srtt (for schedulers)
            dt = now - self.rate_t0_ns
            if dt >= self.srtt_ns and dt > 0:
                self.rate_bps = (nb - self.rate_una_bytes) * 8e9 / dt
                self.rate_t0_ns = now
                self.rate_una_bytes = nb
        state = self.ca_state
        if state == CA_LOSS and self.undo_marker and (
                (self.frto and orig_acked) or (acked and 0 < pkt.ts_ecr_ns < self.retrans_stamp_ns)):
            # tcp_process_loss -> tcp_try_undo_loss: F-RTO saw an original sent before the RTO arrive
            # (acked or SACKed, never retransmitted), or the ACK echoes a timestamp older than the first
            # retransmission (tcp_packet_delayed): the RTO was spurious (a delay spike, an outage whose
            # frames were held, not lost). Undo its reduction.
            self._undo_loss()
            state = CA_OPEN
        if state:
            if state == CA_RECOVERY:
                if self.una >= self.high_seq:
                    self.ca_state = state = CA_OPEN
                    self.undo_marker = False
                    if self.ssthresh < self.cwnd:
                        self.cwnd = self.ssthresh
                else:
                    self._mark_lost()
            elif state == CA_LOSS and self.una >= self.high_seq:
                self.ca_state = state = CA_OPEN
                self.undo_marker = False
            if state and self.retrans_out and (newly or acked):
                self._rack_lost_retrans(now)
        if state == CA_OPEN and self.sacked_out and self.fack - self.una > _DUPTHRESH:
            self._enter_recovery(now)
            state = CA_RECOVERY
        if state == CA_RECOVERY:
            self._prr(acked + newly)
        # tcp_is_cwnd_limited: the window was fully used, or (slow start) grow up to 2x what was used.
        # The usage is the one tcp_cwnd_validate recorded at send time: resetting it on this ACK
        # (as an earlier version did) froze cwnd at 1 after an RTO whose ACK covered everything.
        elif acked and (self.is_cwnd_limited or (self.cwnd < self.ssthresh and self.cwnd < 2 * self.max_po)):
            self.cc.cong_avoid(self, acked, now)
            if self.cwnd > self.cwnd_max_seen:
                self.cwnd_max_seen = self.cwnd
                conn.sndbuf_stale = True  # the autotuned send buffer grows with it
        if acked:
            if not self.retrans_out and state == CA_OPEN:
                self.retrans_stamp_ns = 0  # no retransmission outstanding any more
            if self.una == self.nxt:
                self.rto_timer.deadline = None
                self.tlp_timer.deadline = None
            else:
                self.rto_timer.arm(now + self.rto_us * 1000)
                self._schedule_tlp(now)
        nxt = self.nxt  # _sync(), inlined: the scheduler reads these right away
        end = self.end
        self.packets_out = po = nxt - self.una
        self.in_flight = po - self.sacked_out - self.lost_out + self.retrans_out
        self.queued = end - nxt
        self.queued_bytes = self.write_bytes - self.sseq[nxt] if nxt < end else 0
        if conn._sched_on_ack:
            conn.sched.on_ack(conn, self, now)
        conn.push(now)
        if self.nxt < self.end or self.lost_out > self.retrans_out:
            self.try_send(now)
        if rec is not None:
            rec.samples.append(_new_row(SampleRow, (now, False, self.index, self.cwnd, self.in_flight,
                                                         self.srtt_ns, self.queued_bytes,
                                                         conn.write_seq - conn.snd_una, conn.rx.ooo_bytes)))

    def _current_ssthresh(self) -> int:
        """tcp_current_ssthresh: the reduced ssthresh during a window reduction (Recovery), else at
        least 3/4 of cwnd."""
        if self.ca_state == CA_RECOVERY:
            return self.ssthresh
        return max(self.ssthresh, (self.cwnd >> 1) + (self.cwnd >> 2))

    def _undo_loss(self) -> None:
        """tcp_undo_cwnd_reduction(unmark_loss=True): cwnd back to what it was before the RTO (cubic's
        undo_cwnd = tcp_reno_undo_cwnd: max(cwnd, prior_cwnd)), ssthresh to the one kept then, segments
        no longer marked lost, Open state."""
        sflags = self.sflags
        for i in range(self.una, self.nxt):
            if sflags[i] & F_LOST:
                sflags[i] &= ~F_LOST
        self.lost_out = 0
        self.lost_hint = self.retrans_hint = self.una  # tcp_clear_all_retrans_hints: FACK looks again
        if self.prior_cwnd > self.cwnd:
            self.cwnd = self.prior_cwnd
        if self.prior_ssthresh > self.ssthresh:
            self.ssthresh = self.prior_ssthresh
        self.undo_marker = False
        self.frto = False
        self.backoff = 0  # icsk_retransmits = 0
        self.ca_state = CA_OPEN
        self.n_rto_undone += 1

    def _mark_lost(self) -> None:
        """FACK: every un-SACKed segment at least dupthresh below the highest SACKed one is lost."""
        lim = self.fack - _DUPTHRESH
        i = self.lost_hint
        if i < self.una:
            i = self.una
        if i >= lim:
            return
        sflags = self.sflags
        newly = 0
        while i < lim:
            f = sflags[i]
            if not f & (F_SACKED | F_LOST):
                sflags[i] = f | F_LOST
                newly += 1
            i += 1
        self.lost_hint = lim
        if newly:
            self.lost_out += newly
            if self.retrans_hint > self.una:
                self.retrans_hint = self.una

    def _rack_advance(self, i: int, f: int, now: int) -> None:
        """tcp_rack_advance for segment ``i`` (flags ``f`` before this ACK) newly delivered: a
        retransmitted one counts only if its RTT is at least the minimum (else the original may be
        what arrived)."""
        xt = self.stx[i]
        if f & F_EVER_RETRANS and (now - xt) // 1000 < self.min_rtt_us:
            return
        self.rack_rtt_ns = now - xt
        if xt > self.rack_xmit_ns:
            self.rack_xmit_ns = xt

    def _rack_lost_retrans(self, now: int) -> None:
        """tcp_rack_detect_loss in Recovery and Loss (reordering window 0, RFC 8985 7.2), for the
        retransmissions in flight: one sent before the latest-sent segment known delivered, and out
        longer than that segment's RTT, is lost again (tcp_mark_skb_lost) and goes back to the
        retransmission queue. First losses are FACK-marked as before (no reordering in this model:
        the same segments)."""
        sflags = self.sflags
        stx = self.stx
        rx = self.rack_xmit_ns
        rtt = self.rack_rtt_ns
        left = self.retrans_out
        i = self.una
        nxt = self.nxt
        while i < nxt and left:
            f = sflags[i]
            if f & F_RETRANS:
                left -= 1
                t = stx[i]
                if t < rx and now - t > rtt and not f & F_SACKED:
                    if f & F_LOST:
                        sflags[i] = f & ~F_RETRANS
                        self.retrans_out -= 1
                    else:  # a probe's retransmission: now lost, retransmitted once more when marked again
                        sflags[i] = f | F_LOST
                        self.lost_out += 1
                    self.n_lost_retrans += 1
                    if i < self.retrans_hint:
                        self.retrans_hint = i
            i += 1

    def _enter_recovery(self, now: int) -> None:
        self.n_fast_recoveries += 1
        # tcp_enter_recovery: tcp_init_undo and tcp_current_ssthresh kept (for an RTO inside it undone)
        self.undo_marker = True
        self.prior_ssthresh = self._current_ssthresh()
        self.prior_cwnd = self.cwnd
        self.ssthresh = self.cc.ssthresh(self)
        self.high_seq = self.nxt
        self.ca_state = CA_RECOVERY
        self.prr_delivered = 0
        self.prr_out = 0
        self.cc.on_state(self, CA_RECOVERY, now)
        self._mark_lost()
        self.conn.on_subflow_loss(self, "fast", now)

    def _prr(self, newly_delivered: int) -> None:
        """Proportional rate reduction (Linux tcp_cwnd_reduction)."""
        self.prr_delivered += newly_delivered
        inflight = self.nxt - self.una - self.sacked_out - self.lost_out + self.retrans_out
        delta = self.ssthresh - inflight
        if delta < 0:
            sndcnt = -(-(self.prr_delivered * self.ssthresh) // max(self.prior_cwnd, 1)) - self.prr_out
        else:
            sndcnt = min(delta, max(self.prr_delivered - self.prr_out, newly_delivered) + 1)
        if sndcnt < (0 if self.prr_out else 1):
            sndcnt = 0 if self.prr_out else 1
        self.cwnd = max(inflight + sndcnt, 1)

    def _schedule_tlp(self, now: int) -> None:
        """tcp_schedule_loss_probe. Linux has one retransmission timer: in Open state with data out
        and no probe outstanding it is a probe timer of 2 x srtt (+ rto_min when a single segment is
        out, else + 2 ms), brought forward to the RTO's time if that comes first; else the RTO."""
        po = self.nxt - self.una
        if self.ca_state != CA_OPEN or not po or not self.srtt_us8 or self.tlp_high_seq >= 0:
            self.tlp_timer.deadline = None
            return
        t = now + ((self.srtt_us8 >> 2) + (self.rto_min_us if po == 1 else 2000)) * 1000
        rto = self.rto_timer.deadline
        if rto is not None and rto < t:
            t = rto
        self.rto_timer.deadline = None  # the probe timer replaces it; _on_tlp re-arms the RTO
        self.tlp_timer.arm(t)

    def _on_tlp(self, now: int) -> None:
        """tcp_send_loss_probe: one queued segment if there is one (cwnd not checked), else the
        last one sent again; then the RTO restarts from now (tcp_rearm_rto)."""
        rearm = now + min(self.rto_us << self.backoff, _RTO_MAX_US) * 1000
        if self.nxt == self.una:
            return
        if self.ca_state != CA_OPEN or self.tlp_high_seq >= 0:
            self.rto_timer.arm(rearm)
            return
        if self.nxt < self.end:
            i = self.nxt
            self._xmit(i, now, False)
            self.nxt = i + 1
            self.tlp_retrans = False
        else:
            i = self.nxt - 1
            f = self.sflags[i]
            if f & F_SACKED:
                self.rto_timer.arm(rearm)
                return
            if not f & F_RETRANS:
                self.retrans_out += 1
            self.sflags[i] = f | F_RETRANS | F_EVER_RETRANS
            self.n_retrans += 1
            self._xmit(i, now, True)
            self.tlp_retrans = True
        self.n_tlp += 1
        self.tlp_high_seq = self.nxt
        self._sync()
        self.rto_timer.arm(rearm)

    def _on_rto(self, now: int) -> None:
        if self.una == self.nxt:
            return
        self.n_rto += 1
        state = self.ca_state
        if state == CA_OPEN or self.una >= self.high_seq or (state == CA_LOSS and self.backoff == 0):
            # tcp_enter_loss reduces ssthresh unless that was done inside this window (an RTO in an
            # unfinished Recovery keeps the Recovery's ssthresh, prior values and undo marker);
            # tcp_current_ssthresh (the reduced one in Recovery, else at least 3/4 cwnd) is kept for
            # the undo, and tcp_init_undo
            self.prior_ssthresh = self._current_ssthresh()
            self.prior_cwnd = self.cwnd
            self.undo_marker = True
            self.ssthresh = self.cc.ssthresh(self)
        # F-RTO for an RTO out of Open state, or any RTO after the first of a series
        self.frto = state == CA_OPEN or self.backoff > 0
        self.cwnd = 1
        self.cwnd_cnt = 0.0
        self.ca_state = CA_LOSS
        self.high_seq = self.nxt
        sflags = self.sflags
        lost = 0
        for i in range(self.una, self.nxt):
            f = sflags[i]
            if f & F_SACKED:
                continue
            if f & F_RETRANS:
                self.retrans_out -= 1
            if not f & F_LOST:
                lost += 1
            sflags[i] = (f | F_LOST) & ~F_RETRANS
        self.lost_out += lost
        self.retrans_hint = self.una
        self.lost_hint = self.nxt
        self._sync()
        self.cc.on_state(self, CA_LOSS, now)
        self.backoff += 1
        self.rto_timer.arm(now + min(self.rto_us << self.backoff, _RTO_MAX_US) * 1000)
        self.conn.on_subflow_loss(self, "rto", now)
        self.try_send(now)
        self.conn.push(now)


def rcvbuf_grow_window(new_space: int, old_space: int) -> int:
    """The window a receive-buffer autotuning step makes room for (Linux 6.18 tcp_rcvbuf_grow and
    mptcp_rcvbuf_grow, in their integer arithmetic): twice what was read in the last measurement ("DRS
    is always one RTT late"), plus twice that times its growth over the measurement before ("slow
    start: allow the sender to double its rate")."""
    win = new_space << 1
    return win + ((win * (new_space - old_space) // old_space) << 1)


class SubflowReceiver:
    """Receiver half of one subflow (client side): reordering, delayed/quick ACK, DATA_ACK, window."""

    __slots__ = (
        "ack_bytes", "delack_ns", "delack_timer", "delayed_ack", "index", "last_data_ns", "link", "loop",
        "meta", "ooo", "quick", "quickack_on_meta_ooo", "rcv_nxt", "rcv_rtt_ecr_ms", "rcv_rtt_us8", "rcv_space",
        "rcv_space_init", "rcv_ssthresh", "rcv_wup", "rec", "rto_guess_ns", "ts_recent_ns", "unacked", "wnd_cap",
        "wnd_incr",
    )

    def __init__(self, loop: EventLoop, *, index: int, meta: ConnReceiver, link: Link,
                 rec: Recorder | None, ack_bytes: int, delayed_ack: bool, delack_ns: int,
                 quickack_on_meta_ooo: bool, wnd_incr_bytes: int = 0, init_later: bool = False) -> None:
        self.loop = loop
        self.index = index
        self.meta = meta
        self.link = link
        self.rec = rec
        self.ack_bytes = ack_bytes
        self.delayed_ack = delayed_ack
        self.delack_ns = delack_ns
        self.quickack_on_meta_ooo = quickack_on_meta_ooo
        self.rcv_nxt = 0
        self.ooo: dict[int, tuple[int, int]] = {}
        self.unacked = 0
        self.quick = _TCP_MAX_QUICKACKS
        self.last_data_ns = -1
        self.rto_guess_ns = 200_000_000
        self.delack_timer = Timer(loop, self._on_delack)
        # tcp_grow_window: this subflow's rcv_ssthresh and its smallest step (2 x TCP MSS; 0 = the
        # window does not grow: it is the whole buffer from the start)
        self.rcv_ssthresh = meta.wnd_init
        self.wnd_incr = wnd_incr_bytes
        # receive-buffer autotuning (ConnReceiver.autotune): the window this subflow's own buffer allows
        # (the cap of its rcv_ssthresh: min(window_clamp, tcp_space)), its rcvq_space.space, and its
        # receiver RTT estimate from the timestamps its data echo (rcv_rtt_est.rtt_us, x8; 0 = none yet).
        # ``init_later``: the buffer is set up when this end's handshake completes (`init_buffer_space`,
        # called by the run), which for a joined subflow can be after some of the connection's steps;
        # until then rcvq_space.space is 0 and the steps pass it by (mptcp_rcv_space_adjust: "subflows
        # can be added before tcp_init_transfer()"), so it starts from tcp_rmem[1] whatever the
        # connection's buffer has grown to.
        self.wnd_cap = meta.wnd_cap
        self.rcv_space_init = meta.drs_space
        self.rcv_space = 0 if init_later else meta.drs_space
        self.rcv_rtt_us8 = 0
        self.rcv_rtt_ecr_ms = -1
        meta.receivers.append(self)
        # TCP timestamps (RFC 7323 / tcp_replace_ts_recent): TS.Recent is taken from segments at or
        # below rcv_wup (rcv_nxt when the last ACK left), never moving back (PAWS)
        self.rcv_wup = 0
        self.ts_recent_ns = 0

    def on_data(self, pkt: DataPkt) -> None:
        now = self.loop.now
        i = pkt.idx
        dsn = pkt.dsn
        plen = pkt.plen
        rec = self.rec
        if rec is not None:
            rec.rcv.append(_new_row(RcvRow, (now, pkt.sf, pkt.seq, plen, dsn, pkt.retrans, pkt.reinj,
                                                  now - pkt.t_snd_ns)))
        if now - self.last_data_ns > self.rto_guess_ns and self.last_data_ns >= 0:
            self.quick = _TCP_MAX_QUICKACKS  # tcp_event_data_recv: idle longer than RTO
        self.last_data_ns = now
        if i <= self.rcv_wup and pkt.t_snd_ns > self.ts_recent_ns:
            self.ts_recent_ns = pkt.t_snd_ns
        meta = self.meta
        if meta.drs_space:
            ecr_ms = pkt.ts_ecr_ns // 1_000_000
            if ecr_ms != self.rcv_rtt_ecr_ms:
                # tcp_rcv_rtt_measure_ts: a new echoed timestamp on a full-sized segment gives a sample
                # in the timestamp clock's milliseconds; tcp_rcv_rtt_update (win_dep 0) moves the
                # estimate (kept x8) 1/8 of the way to it, the first sample taken whole
                self.rcv_rtt_ecr_ms = ecr_ms
                if plen >= meta.mss and ecr_ms > 0:
                    sample_us = (now // 1_000_000 - ecr_ms) * 1000
                    if sample_us > 0:
                        old = self.rcv_rtt_us8
                        self.rcv_rtt_us8 = old - (old >> 3) + sample_us if old else sample_us << 3
        if self.rcv_ssthresh < self.wnd_cap and self.wnd_incr and i >= self.rcv_nxt:
            # tcp_grow_window, for new data in order and out of order alike (not duplicates):
            # rcv_ssthresh += max(2 x MSS, 2 x len) up to the window this subflow's buffer allows, and a
            # quick ACK (icsk_ack.quick |= 1) while it grows
            room = self.wnd_cap - self.rcv_ssthresh
            incr = 2 * plen if 2 * plen > self.wnd_incr else self.wnd_incr
            self.rcv_ssthresh += incr if incr < room else room
            if self.quick == 0:
                self.quick = 1
        if i == self.rcv_nxt:
            self.rcv_nxt = i + 1
            read_from = meta.rcv_nxt
            if dsn == meta.rcv_nxt and not meta.ooo:  # ConnReceiver.deliver's common case, inlined
                meta.rcv_nxt = dsn + plen
                meta.delivered_t_ns = now
                meta_ooo = False
            else:
                meta_ooo = meta.deliver(dsn, plen, now)
            now_ack = False
            ooo = self.ooo
            if ooo:
                while self.rcv_nxt in ooo:
                    d, ln = ooo.pop(self.rcv_nxt)
                    self.rcv_nxt += 1
                    if meta.deliver(d, ln, now):
                        meta_ooo = True
                now_ack = True  # RFC 5681 4.2: ACK at once when a gap is filled
            if meta_ooo and self.quickack_on_meta_ooo:
                self.quick = _TCP_MAX_QUICKACKS
            if meta.drs_space and meta.rcv_nxt != read_from:
                meta.autotune(now)  # the application reads what arrived in order
            self.unacked += 1
            if now_ack or not self.delayed_ack:
                self.send_ack(now, -1)
            elif self.quick > 0:
                self.quick -= 1
                self.send_ack(now, -1)
            elif self.unacked >= 2:
                self.send_ack(now, -1)
            elif self.delack_timer.deadline is None:
                self.delack_timer.arm(now + self.delack_ns)
        elif i > self.rcv_nxt:
            if i not in self.ooo:
                self.ooo[i] = (dsn, plen)
            self.send_ack(now, i)
        else:
            self.send_ack(now, _DSACK)  # duplicate: immediate ACK carrying a DSACK

    def init_buffer_space(self) -> None:
        """tcp_init_buffer_space at this end's handshake: from here on the connection's buffer steps
        grow this subflow's buffer too, from its first space and tcp_rmem[1]."""
        self.rcv_space = self.rcv_space_init

    def rcvbuf_grow(self, copied: int) -> None:
        """tcp_rcvbuf_grow on this subflow when the MPTCP socket's buffer grew: its own window from what
        the connection read against this subflow's last space (a subflow that joined late still holds
        its first one, so its buffer jumps further) plus its out-of-order span, at most tcp_rmem[2]."""
        old = self.rcv_space
        if not old:
            return
        self.rcv_space = copied
        win = rcvbuf_grow_window(copied, old)
        if self.ooo:
            win += (max(self.ooo) + 1 - self.rcv_nxt) * self.meta.mss
        cap = self.meta.rcv_buf_bytes
        if win > self.wnd_cap:
            self.wnd_cap = win if win < cap else cap

    def _on_delack(self, now: int) -> None:
        if self.unacked:
            self.send_ack(now, -1)

    def send_ack(self, now: int, sack: int) -> None:
        self.unacked = 0
        self.delack_timer.deadline = None
        meta = self.meta
        self.rcv_wup = self.rcv_nxt
        # __tcp_select_window on a subflow: the MPTCP socket's free space (its buffer's window less the
        # out-of-order data it holds), at most this subflow's own rcv_ssthresh; mptcp_set_rwin then
        # announces the connection's furthest right edge instead where that lies beyond (never shrinking
        # it), so a subflow with a small buffer shows its own window only right after a DATA_ACK jump.
        w = meta.wnd_cap - meta.ooo_bytes
        if w > self.rcv_ssthresh:
            w = self.rcv_ssthresh
        if w < 0:
            w = 0
        end = meta.rcv_nxt + w
        if end > meta.wnd_sent_end:
            meta.wnd_sent_end = end
        else:
            w = meta.wnd_sent_end - meta.rcv_nxt
        self.link.send(AckPkt(self.index, self.rcv_nxt, sack, meta.rcv_nxt, w, now,
                              self.ts_recent_ns), self.ack_bytes + (12 if sack != -1 else 0))
