//! The sender half of a TCP subflow as Linux runs it (docs/MODEL.md A4 is the specification):
//! segment store, RTT estimator and RTO, SACK scoreboard with
//! FACK loss marking, PRR in Recovery, RTO and Loss with F-RTO / timestamp undo, tail loss probes and
//! RACK for lost retransmissions, and the cwnd-usage record that gates growth.
//!
//! The congestion-control fields (cwnd, ssthresh, una, nxt, ...) live in the engine's `ccs[k]`
//! (`cc::Subflow`), where the congestion controls read the whole group; everything else of subflow
//! `k` is `sfs[k]`. The methods are the engine's (`impl Engine`): a subflow sends on its link, reports
//! to the connection and to the recorder, and arms timers on the event list, all of which the engine
//! owns. Integer division floors (`div_euclid`, towards minus infinity) wherever an operand may be
//! negative, as the model specifies; the golden runs pin every step, event for event.
//!
//! Segment state is trimmed as data is acknowledged: `Segs` keeps the segments from `una` up, so a
//! subflow's memory is what it has in flight and queued, not everything it ever sent.

use std::collections::VecDeque;

use crate::engine::{DataPkt, Engine, Ev, LossKind};
use crate::events::Timer;
use crate::receiver::{Ack, SACK_DSACK, SACK_NONE};

// Linux TCP_CA_* states
pub const CA_OPEN: u8 = 0;
pub const CA_RECOVERY: u8 = 3;
pub const CA_LOSS: u8 = 4;

// per-segment flags at the sender
pub const F_SACKED: u8 = 1;
pub const F_LOST: u8 = 2;
pub const F_RETRANS: u8 = 4; // a retransmission is in flight (counted in retrans_out)
pub const F_EVER_RETRANS: u8 = 8; // was retransmitted at least once (Karn: no RTT sample)
pub const F_REINJ: u8 = 16; // this subflow copy is an MPTCP reinjection / opportunistic retransmission

const DUPTHRESH: i64 = 3;
pub const RTO_MAX_US: i64 = 120_000_000;

/// One segment queued on or sent by a subflow.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seg {
    /// The connection-level segment it carries.
    pub meta: i64,
    /// Relative sequence number of its first byte.
    pub seq: i64,
    /// Its data sequence number (kept here: the connection forgets DATA_ACKed segments).
    pub dsn: i64,
    /// When it was last transmitted, ns.
    pub tx_ns: i64,
    pub len: u32,
    pub flags: u8,
}

/// A subflow's segments from `off` (its `una`) to its end, by segment number.
#[derive(Default)]
pub struct Segs {
    off: i64,
    v: VecDeque<Seg>,
}

impl Segs {
    #[inline]
    pub fn at(&self, i: i64) -> &Seg {
        &self.v[(i - self.off) as usize]
    }

    #[inline]
    pub fn at_mut(&mut self, i: i64) -> &mut Seg {
        &mut self.v[(i - self.off) as usize]
    }

    #[inline]
    pub fn push(&mut self, s: Seg) {
        self.v.push_back(s);
    }

    /// Forget the segments below `i` (acknowledged: nothing reads them again).
    #[inline]
    pub fn forget_below(&mut self, i: i64) {
        while self.off < i {
            self.v.pop_front();
            self.off += 1;
        }
    }

    /// Segments held (for the memory benchmark).
    pub fn held(&self) -> usize {
        self.v.len()
    }
}

/// Subflow `k`'s sender state other than what the congestion control shares (`cc::Subflow`).
///
/// Laid out (`repr(C)`, cache-line aligned) so that the fields a scheduler's scan over all subflows
/// reads on every decision (`lowest_rtt_available`, `select_class`) share one cache line; left to
/// the compiler, the flags went to the end of the struct, a second line per subflow and decision.
#[repr(C, align(64))]
pub struct Sender {
    // kept current for schedulers (plain fields, read directly); the first cache line
    pub in_flight: i64,
    pub queued_bytes: i64,
    pub mss: i64,
    pub srtt_ns: i64,
    pub packets_out: i64,
    pub queued: i64,
    pub index: usize,
    pub backup: bool,
    pub pf: bool,
    pub stale: bool,
    pub ca_state: u8,
    pub dirty: bool,
    // the rest
    pub name: String,
    pub data_link: u32,
    pub hdr_bytes: i64,
    pub segs: Segs,
    pub end: i64,
    pub write_bytes: i64,
    // scoreboard
    pub sacked_out: i64,
    pub lost_out: i64,
    pub retrans_out: i64,
    pub fack: i64,
    pub lost_hint: i64,
    pub retrans_hint: i64,
    pub rack_xmit_ns: i64,
    pub rack_rtt_ns: i64,
    pub n_lost_retrans: i64,
    // congestion state
    pub cwnd_max_seen: i64,
    pub high_seq: i64,
    pub prior_cwnd: i64,
    pub prior_ssthresh: i64,
    pub undo_marker: bool,
    pub frto: bool,
    pub retrans_stamp_ns: i64,
    pub prr_delivered: i64,
    pub prr_out: i64,
    pub max_po: i64,
    pub cwnd_usage_idx: i64,
    pub is_cwnd_limited: bool,
    // RTT / RTO
    pub rto_min_us: i64,
    pub mdev_us: i64,
    pub mdev_max_us: i64,
    pub rttvar_us: i64,
    pub rtt_seq: i64,
    pub rto_us: i64,
    pub backoff: u32,
    pub rto_timer: Timer,
    pub tlp_timer: Timer,
    pub tlp_high_seq: i64,
    pub tlp_retrans: bool,
    pub n_tlp: i64,
    // availability and bookkeeping
    pub start_ns: i64,
    pub last_ack_ns: i64,
    pub ts_ack_ns: i64,
    pub stale_count: i64,
    pub stale_ts: i64,
    pub delivered_bytes: i64,
    pub rate_bps: f64,
    pub rate_t0_ns: i64,
    pub rate_una_bytes: i64,
    pub n_sent: i64,
    pub n_retrans: i64,
    pub n_rto: i64,
    pub n_rto_undone: i64,
    pub n_fast_recoveries: i64,
}

impl Sender {
    #[allow(clippy::too_many_arguments)]
    pub fn new(index: usize, name: String, data_link: u32, mss: i64, hdr_bytes: i64, init_cwnd: i64,
               rto_min_ns: i64, backup: bool) -> Self {
        Self {
            index,
            name,
            data_link,
            mss,
            hdr_bytes,
            backup,
            dirty: false,
            segs: Segs::default(),
            end: 0,
            packets_out: 0,
            in_flight: 0,
            queued: 0,
            queued_bytes: 0,
            srtt_ns: 0,
            write_bytes: 1,
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            fack: 0,
            lost_hint: 0,
            retrans_hint: 0,
            rack_xmit_ns: -1,
            rack_rtt_ns: 0,
            n_lost_retrans: 0,
            cwnd_max_seen: init_cwnd,
            ca_state: CA_OPEN,
            high_seq: 0,
            prior_cwnd: init_cwnd,
            prior_ssthresh: 0,
            undo_marker: false,
            frto: false,
            retrans_stamp_ns: 0,
            prr_delivered: 0,
            prr_out: 0,
            max_po: 0,
            cwnd_usage_idx: 0,
            is_cwnd_limited: false,
            rto_min_us: rto_min_ns / 1000,
            mdev_us: 0,
            mdev_max_us: 0,
            rttvar_us: 0,
            rtt_seq: 0,
            rto_us: 1_000_000,
            backoff: 0,
            rto_timer: Timer::default(),
            tlp_timer: Timer::default(),
            tlp_high_seq: -1,
            tlp_retrans: false,
            n_tlp: 0,
            start_ns: 0,
            pf: false,
            last_ack_ns: 0,
            ts_ack_ns: 0,
            stale: false,
            stale_count: 0,
            stale_ts: -1,
            delivered_bytes: 0,
            rate_bps: 0.0,
            rate_t0_ns: 0,
            rate_una_bytes: 1,
            n_sent: 0,
            n_retrans: 0,
            n_rto: 0,
            n_rto_undone: 0,
            n_fast_recoveries: 0,
        }
    }

    /// The relative sequence number of segment `i`'s first byte, or of the next byte written.
    #[inline]
    pub fn seq_of(&self, i: i64) -> i64 {
        if i < self.end {
            self.segs.at(i).seq
        } else {
            self.write_bytes
        }
    }

    pub fn rttvar_ns(&self) -> i64 {
        self.rttvar_us * 1000
    }

    pub fn rto_ns(&self) -> i64 {
        self.rto_us * 1000
    }
}

/// `min(rto << backoff, RTO_MAX)` in µs, the shift taken as unbounded (no overflow) before the min.
#[inline]
fn backed_off_us(rto_us: i64, backoff: u32) -> i64 {
    // rto_us >= 1 and RTO_MAX_US < 2^30: a back-off of 30 or more is always the maximum
    if backoff >= 30 || rto_us << backoff >= RTO_MAX_US {
        RTO_MAX_US
    } else {
        rto_us << backoff
    }
}

impl Engine {
    #[inline]
    fn arm_rto(&mut self, k: usize, t_ns: i64) {
        if let Some((t, gen)) = self.sfs[k].rto_timer.arm(t_ns) {
            self.ev.at(t, Ev::Rto { k: k as u32, gen });
        }
    }

    #[inline]
    fn arm_tlp(&mut self, k: usize, t_ns: i64) {
        if let Some((t, gen)) = self.sfs[k].tlp_timer.arm(t_ns) {
            self.ev.at(t, Ev::Tlp { k: k as u32, gen });
        }
    }

    /// packets_out, in_flight, queued, queued_bytes: what schedulers read, kept current.
    #[inline]
    pub(crate) fn sf_sync(&mut self, k: usize) {
        let c = &self.ccs[k];
        let s = &mut self.sfs[k];
        let (nxt, end) = (c.nxt, s.end);
        s.packets_out = nxt - c.una;
        s.in_flight = s.packets_out - s.sacked_out - s.lost_out + s.retrans_out;
        s.queued = end - nxt;
        s.queued_bytes = if nxt < end { s.write_bytes - s.segs.at(nxt).seq } else { 0 };
    }

    /// Queue one connection-level segment on subflow `k` (mptcp_skb_entail).
    #[inline]
    pub(crate) fn sf_append(&mut self, k: usize, meta_idx: i64, dsn: i64, plen: i64, reinj: bool) {
        let s = &mut self.sfs[k];
        s.segs.push(Seg { meta: meta_idx, seq: s.write_bytes, dsn, tx_ns: 0, len: plen as u32,
                          flags: if reinj { F_REINJ } else { 0 } });
        s.write_bytes += plen;
        s.end += 1;
        s.queued += 1;
        s.queued_bytes += plen;
    }

    /// Transmit segment `i` of subflow `k` now.
    #[inline]
    fn sf_xmit(&mut self, k: usize, i: i64, now: i64, retrans: bool) {
        let s = &mut self.sfs[k];
        let seg = s.segs.at_mut(i);
        seg.tx_ns = now;
        let p = DataPkt {
            sf: k as u32,
            retrans,
            reinj: seg.flags & F_REINJ != 0,
            plen: seg.len,
            idx: i,
            seq: seg.seq,
            dsn: seg.dsn,
            t_snd_ns: now,
            ts_ecr_ns: s.ts_ack_ns,
        };
        s.n_sent += 1;
        if retrans && s.retrans_stamp_ns == 0 {
            s.retrans_stamp_ns = now; // tcp_retransmit_skb: the first retransmission's timestamp
        }
        let link = s.data_link;
        if let Some(rec) = self.rec.as_deref_mut() {
            rec.snd.push(now, p.sf, p.seq, p.plen, p.dsn, retrans, p.reinj);
        }
        self.send_data(link, p);
    }

    /// Send retransmissions of lost segments first, then queued segments, while cwnd allows.
    pub(crate) fn try_send(&mut self, k: usize, now: i64) {
        let mut sent = false;
        let mut inflight;
        loop {
            let (una, nxt, cwnd) = (self.ccs[k].una, self.ccs[k].nxt, self.ccs[k].cwnd);
            let s = &mut self.sfs[k];
            inflight = nxt - una - s.sacked_out - s.lost_out + s.retrans_out;
            if inflight >= cwnd {
                break;
            }
            if s.lost_out > s.retrans_out {
                let mut i = s.retrans_hint.max(una);
                while i < nxt && s.segs.at(i).flags & (F_LOST | F_RETRANS | F_SACKED) != F_LOST {
                    i += 1;
                }
                if i < nxt {
                    s.segs.at_mut(i).flags |= F_RETRANS | F_EVER_RETRANS;
                    s.retrans_out += 1;
                    s.retrans_hint = i + 1;
                    s.n_retrans += 1;
                    if s.ca_state == CA_RECOVERY {
                        s.prr_out += 1;
                    }
                    self.sf_xmit(k, i, now, true);
                    sent = true;
                    continue;
                }
                s.retrans_hint = nxt;
            }
            if nxt < s.end {
                // new data: the common case, looped without re-checking losses
                let end = s.end;
                let mut i = nxt;
                let mut n = 0;
                while i < end && inflight < cwnd {
                    self.sf_xmit(k, i, now, false);
                    i += 1;
                    n += 1;
                    inflight += 1;
                }
                // sf_xmit counted each one in n_sent already
                self.ccs[k].nxt = i;
                let s = &mut self.sfs[k];
                if s.ca_state == CA_RECOVERY {
                    s.prr_out += n;
                }
                sent = true;
                continue;
            }
            break;
        }
        // tcp_cwnd_validate after tcp_write_xmit: per window of data, whether the cwnd was fully used,
        // or else the most packets that were out (the growth test in on_ack)
        let c = &self.ccs[k];
        let s = &mut self.sfs[k];
        let cwnd_limited = inflight >= c.cwnd;
        if sent || cwnd_limited {
            let po = c.nxt - c.una;
            if c.una >= s.cwnd_usage_idx || cwnd_limited || (!s.is_cwnd_limited && po > s.max_po) {
                s.is_cwnd_limited = cwnd_limited;
                s.max_po = po;
                s.cwnd_usage_idx = c.nxt;
            }
        }
        if sent {
            self.sf_sync(k);
            let s = &self.sfs[k];
            if s.rto_timer.deadline.is_none() {
                let t = now + backed_off_us(s.rto_us, s.backoff) * 1000;
                self.arm_rto(k, t);
            }
            self.schedule_tlp(k, now);
        }
    }

    /// Linux tcp_rtt_estimator + tcp_set_rto, µs.
    pub(crate) fn rtt_sample(&mut self, k: usize, m_us: i64) {
        let c = &mut self.ccs[k];
        let s = &mut self.sfs[k];
        let mut m = if m_us <= 0 { 1 } else { m_us };
        if m < c.min_rtt_us {
            c.min_rtt_us = m;
        }
        let mut srtt = c.srtt_us8;
        if srtt != 0 {
            m -= srtt >> 3;
            srtt += m;
            if m < 0 {
                m = -m;
                m -= s.mdev_us >> 2;
                if m > 0 {
                    m >>= 3;
                }
            } else {
                m -= s.mdev_us >> 2;
            }
            s.mdev_us += m;
            if s.mdev_us > s.mdev_max_us {
                s.mdev_max_us = s.mdev_us;
                if s.mdev_max_us > s.rttvar_us {
                    s.rttvar_us = s.mdev_max_us;
                }
            }
            if c.una > s.rtt_seq {
                if s.mdev_max_us < s.rttvar_us {
                    s.rttvar_us -= (s.rttvar_us - s.mdev_max_us) >> 2;
                }
                s.rtt_seq = c.nxt;
                s.mdev_max_us = s.rto_min_us;
            }
        } else {
            srtt = m << 3;
            s.mdev_us = m << 1;
            s.mdev_max_us = s.mdev_us.max(s.rto_min_us);
            s.rttvar_us = s.mdev_max_us;
            s.rtt_seq = c.nxt;
        }
        c.srtt_us8 = srtt.max(1);
        s.srtt_ns = (c.srtt_us8 >> 3) * 1000;
        let rto = (c.srtt_us8 >> 3) + s.rttvar_us;
        s.rto_us = rto.min(RTO_MAX_US);
    }

    /// An ACK of subflow `k` reaches its sender.
    pub(crate) fn on_ack(&mut self, p: &Ack) {
        let k = p.sf;
        let now = self.ev.now;
        let (ack, sk, data_ack, rwnd) = (p.ack, p.sack, p.data_ack, p.rwnd);
        {
            let s = &mut self.sfs[k];
            s.last_ack_ns = now;
            s.ts_ack_ns = p.t_snd_ns; // tcp_replace_ts_recent: each pure ACK's TSval is kept
            if let Some(rec) = self.rec.as_deref_mut() {
                rec.ack.push(now, k as u32, s.seq_of(ack), data_ack, rwnd, sk != SACK_NONE, now - p.t_snd_ns);
            }
            s.pf = false;
            s.stale = false; // mptcp_subflow_active: an ACK makes a stale subflow usable again
        }
        if self.sfs[k].tlp_high_seq >= 0 && (sk == SACK_DSACK || ack >= self.sfs[k].tlp_high_seq) {
            // tcp_process_tlp_ack: a retransmitted probe acknowledged without a DSACK repaired a loss
            if self.sfs[k].tlp_retrans && sk != SACK_DSACK && self.sfs[k].ca_state == CA_OPEN {
                let cc = self.cc;
                let st = cc.ssthresh(&mut self.ccs, k);
                let c = &mut self.ccs[k];
                c.ssthresh = st;
                if c.ssthresh < c.cwnd {
                    c.cwnd = c.ssthresh;
                }
            }
            self.sfs[k].tlp_high_seq = -1;
        }
        if data_ack > self.conn.snd_una || data_ack + rwnd > self.conn.wnd_end {
            self.on_data_ack(data_ack, rwnd, now);
        }
        let una = self.ccs[k].una;
        let nxt = self.ccs[k].nxt;
        let mut newly = 0;
        let mut orig_acked = false;
        if sk >= una && sk < nxt {
            let s = &mut self.sfs[k];
            let f = s.segs.at(sk).flags;
            if f & F_SACKED == 0 {
                if f & F_LOST != 0 {
                    s.lost_out -= 1;
                }
                if f & F_RETRANS != 0 {
                    s.retrans_out -= 1;
                }
                s.segs.at_mut(sk).flags = (f | F_SACKED) & !(F_LOST | F_RETRANS);
                s.sacked_out += 1;
                newly = 1;
                if f & F_EVER_RETRANS == 0 && sk < s.high_seq {
                    orig_acked = true; // FLAG_ORIG_SACK_ACKED: an original sent before the RTO arrived
                }
                if sk + 1 > s.fack {
                    s.fack = sk + 1;
                }
                self.rack_advance(k, sk, f, now);
            }
        }
        let acked = if ack > una && ack <= nxt { ack - una } else { 0 };
        if acked != 0 {
            let mut first_tx = -1;
            let mut retrans_acked = false;
            let s = &self.sfs[k];
            let clean = s.sacked_out == 0 && s.lost_out == 0 && s.retrans_out == 0;
            if clean {
                // clean scoreboard (the common case): no per-segment bookkeeping to undo
                let seg = s.segs.at(una);
                if seg.flags & F_EVER_RETRANS != 0 {
                    retrans_acked = true;
                } else {
                    first_tx = seg.tx_ns;
                    orig_acked = una < s.high_seq;
                }
            } else {
                for i in una..ack {
                    let s = &mut self.sfs[k];
                    let f = s.segs.at(i).flags;
                    if f & 15 != 0 {
                        if f & F_SACKED != 0 {
                            s.sacked_out -= 1;
                        } else {
                            self.rack_advance(k, i, f, now);
                        }
                        let s = &mut self.sfs[k];
                        if f & F_LOST != 0 {
                            s.lost_out -= 1;
                        }
                        if f & F_RETRANS != 0 {
                            s.retrans_out -= 1;
                        }
                        if f & F_EVER_RETRANS != 0 {
                            retrans_acked = true;
                        } else if f & F_SACKED == 0 && i < s.high_seq {
                            orig_acked = true; // tcp_clean_rtx_queue: an original, not SACKed before
                        }
                    } else if first_tx < 0 {
                        first_tx = s.segs.at(i).tx_ns;
                    }
                }
                let f = self.sfs[k].segs.at(ack - 1).flags;
                self.rack_advance(k, ack - 1, f, now);
            }
            self.ccs[k].una = ack;
            let s = &mut self.sfs[k];
            let nb = s.seq_of(ack);
            let c = &mut self.ccs[k];
            s.delivered_bytes += nb - c.una_bytes;
            c.una_bytes = nb;
            s.segs.forget_below(ack);
            if ack > s.fack {
                s.fack = ack;
            }
            if first_tx >= 0 && !retrans_acked {
                let rtt_us = (now - first_tx).div_euclid(1000);
                self.rtt_sample(k, rtt_us);
                if self.ccs[k].cwnd < self.ccs[k].ssthresh {
                    let cc = self.cc;
                    cc.on_rtt(&mut self.ccs, k, rtt_us, now);
                }
            }
            let s = &mut self.sfs[k];
            s.backoff = 0;
            // delivery-rate estimate over roughly one srtt (for schedulers)
            let dt = now - s.rate_t0_ns;
            if dt >= s.srtt_ns && dt > 0 {
                s.rate_bps = (nb - s.rate_una_bytes) as f64 * 8e9 / dt as f64;
                s.rate_t0_ns = now;
                s.rate_una_bytes = nb;
            }
        }
        let mut state = self.sfs[k].ca_state;
        {
            let s = &self.sfs[k];
            if state == CA_LOSS && s.undo_marker
                && ((s.frto && orig_acked) || (acked != 0 && 0 < p.ts_ecr_ns && p.ts_ecr_ns < s.retrans_stamp_ns))
            {
                // tcp_process_loss -> tcp_try_undo_loss: the RTO was spurious; undo its reduction
                self.undo_loss(k);
                state = CA_OPEN;
            }
        }
        if state != CA_OPEN {
            if state == CA_RECOVERY {
                if self.ccs[k].una >= self.sfs[k].high_seq {
                    self.sfs[k].ca_state = CA_OPEN;
                    state = CA_OPEN;
                    self.sfs[k].undo_marker = false;
                    let c = &mut self.ccs[k];
                    if c.ssthresh < c.cwnd {
                        c.cwnd = c.ssthresh;
                    }
                } else {
                    self.mark_lost(k);
                }
            } else if state == CA_LOSS && self.ccs[k].una >= self.sfs[k].high_seq {
                self.sfs[k].ca_state = CA_OPEN;
                state = CA_OPEN;
                self.sfs[k].undo_marker = false;
            }
            if state != CA_OPEN && self.sfs[k].retrans_out != 0 && (newly != 0 || acked != 0) {
                self.rack_lost_retrans(k, now);
            }
        }
        if state == CA_OPEN && self.sfs[k].sacked_out != 0 && self.sfs[k].fack - self.ccs[k].una > DUPTHRESH {
            self.enter_recovery(k, now);
            state = CA_RECOVERY;
        }
        if state == CA_RECOVERY {
            self.prr(k, acked + newly);
        } else if acked != 0 {
            // tcp_is_cwnd_limited: the window was fully used, or (slow start) grow up to 2x what was used
            let s = &self.sfs[k];
            let c = &self.ccs[k];
            if s.is_cwnd_limited || (c.cwnd < c.ssthresh && c.cwnd < 2 * s.max_po) {
                let cc = self.cc;
                cc.cong_avoid(&mut self.ccs, k, acked, now);
                let cwnd = self.ccs[k].cwnd;
                if cwnd > self.sfs[k].cwnd_max_seen {
                    self.sfs[k].cwnd_max_seen = cwnd;
                    self.conn.sndbuf_stale = true; // the autotuned send buffer grows with it
                }
            }
        }
        if acked != 0 {
            let s = &mut self.sfs[k];
            if s.retrans_out == 0 && state == CA_OPEN {
                s.retrans_stamp_ns = 0; // no retransmission outstanding any more
            }
            if self.ccs[k].una == self.ccs[k].nxt {
                s.rto_timer.cancel();
                s.tlp_timer.cancel();
            } else {
                let t = now + s.rto_us * 1000;
                self.arm_rto(k, t);
                self.schedule_tlp(k, now);
            }
        }
        self.sf_sync(k);
        if self.sched_on_ack {
            self.notify_sched_ack(k, now);
        }
        self.push(now);
        let s = &self.sfs[k];
        if self.ccs[k].nxt < s.end || s.lost_out > s.retrans_out {
            self.try_send(k, now);
        }
        if self.rec.is_some() {
            let wq = self.conn.write_seq - self.conn.snd_una;
            let ooo = self.rx.meta.ooo_bytes;
            let s = &self.sfs[k];
            let cwnd = self.ccs[k].cwnd;
            if let Some(rec) = self.rec.as_deref_mut() {
                rec.samples.push(now, false, k as u32, cwnd, s.in_flight, s.srtt_ns, s.queued_bytes, wq, ooo);
            }
        }
    }

    /// tcp_current_ssthresh: the reduced ssthresh in Recovery, else at least 3/4 of cwnd.
    fn current_ssthresh(&self, k: usize) -> i64 {
        let c = &self.ccs[k];
        if self.sfs[k].ca_state == CA_RECOVERY {
            return c.ssthresh;
        }
        c.ssthresh.max((c.cwnd >> 1) + (c.cwnd >> 2))
    }

    /// tcp_undo_cwnd_reduction(unmark_loss=True).
    fn undo_loss(&mut self, k: usize) {
        let c = &mut self.ccs[k];
        let s = &mut self.sfs[k];
        for i in c.una..c.nxt {
            s.segs.at_mut(i).flags &= !F_LOST;
        }
        s.lost_out = 0;
        s.lost_hint = c.una; // tcp_clear_all_retrans_hints: FACK looks again
        s.retrans_hint = c.una;
        if s.prior_cwnd > c.cwnd {
            c.cwnd = s.prior_cwnd;
        }
        if s.prior_ssthresh > c.ssthresh {
            c.ssthresh = s.prior_ssthresh;
        }
        s.undo_marker = false;
        s.frto = false;
        s.backoff = 0; // icsk_retransmits = 0
        s.ca_state = CA_OPEN;
        s.n_rto_undone += 1;
    }

    /// FACK: every un-SACKed segment at least dupthresh below the highest SACKed one is lost.
    fn mark_lost(&mut self, k: usize) {
        let una = self.ccs[k].una;
        let s = &mut self.sfs[k];
        let lim = s.fack - DUPTHRESH;
        let mut i = s.lost_hint.max(una);
        if i >= lim {
            return;
        }
        let mut newly = 0;
        while i < lim {
            let seg = s.segs.at_mut(i);
            if seg.flags & (F_SACKED | F_LOST) == 0 {
                seg.flags |= F_LOST;
                newly += 1;
            }
            i += 1;
        }
        s.lost_hint = lim;
        if newly != 0 {
            s.lost_out += newly;
            if s.retrans_hint > una {
                s.retrans_hint = una;
            }
        }
    }

    /// tcp_rack_advance for segment `i` (flags `f` before this ACK) newly delivered.
    #[inline]
    fn rack_advance(&mut self, k: usize, i: i64, f: u8, now: i64) {
        let min_rtt = self.ccs[k].min_rtt_us;
        let s = &mut self.sfs[k];
        let xt = s.segs.at(i).tx_ns;
        if f & F_EVER_RETRANS != 0 && (now - xt).div_euclid(1000) < min_rtt {
            return;
        }
        s.rack_rtt_ns = now - xt;
        if xt > s.rack_xmit_ns {
            s.rack_xmit_ns = xt;
        }
    }

    /// tcp_rack_detect_loss in Recovery and Loss for the retransmissions in flight.
    fn rack_lost_retrans(&mut self, k: usize, now: i64) {
        let (una, nxt) = (self.ccs[k].una, self.ccs[k].nxt);
        let s = &mut self.sfs[k];
        let rx = s.rack_xmit_ns;
        let rtt = s.rack_rtt_ns;
        let mut left = s.retrans_out;
        let mut i = una;
        while i < nxt && left != 0 {
            let f = s.segs.at(i).flags;
            if f & F_RETRANS != 0 {
                left -= 1;
                let t = s.segs.at(i).tx_ns;
                if t < rx && now - t > rtt && f & F_SACKED == 0 {
                    if f & F_LOST != 0 {
                        s.segs.at_mut(i).flags = f & !F_RETRANS;
                        s.retrans_out -= 1;
                    } else {
                        // a probe's retransmission: now lost, retransmitted once more when marked again
                        s.segs.at_mut(i).flags = f | F_LOST;
                        s.lost_out += 1;
                    }
                    s.n_lost_retrans += 1;
                    if i < s.retrans_hint {
                        s.retrans_hint = i;
                    }
                }
            }
            i += 1;
        }
    }

    fn enter_recovery(&mut self, k: usize, now: i64) {
        self.sfs[k].n_fast_recoveries += 1;
        // tcp_enter_recovery: tcp_init_undo and tcp_current_ssthresh kept
        self.sfs[k].undo_marker = true;
        self.sfs[k].prior_ssthresh = self.current_ssthresh(k);
        self.sfs[k].prior_cwnd = self.ccs[k].cwnd;
        let cc = self.cc;
        self.ccs[k].ssthresh = cc.ssthresh(&mut self.ccs, k);
        let s = &mut self.sfs[k];
        s.high_seq = self.ccs[k].nxt;
        s.ca_state = CA_RECOVERY;
        s.prr_delivered = 0;
        s.prr_out = 0;
        cc.on_state(&mut self.ccs, k, CA_RECOVERY as i64, now);
        self.mark_lost(k);
        self.on_subflow_loss(k, LossKind::Fast, now);
    }

    /// Proportional rate reduction (Linux tcp_cwnd_reduction).
    fn prr(&mut self, k: usize, newly_delivered: i64) {
        let c = &mut self.ccs[k];
        let s = &mut self.sfs[k];
        s.prr_delivered += newly_delivered;
        let inflight = c.nxt - c.una - s.sacked_out - s.lost_out + s.retrans_out;
        let delta = c.ssthresh - inflight;
        let mut sndcnt = if delta < 0 {
            -((-(s.prr_delivered * c.ssthresh)).div_euclid(s.prior_cwnd.max(1))) - s.prr_out
        } else {
            delta.min((s.prr_delivered - s.prr_out).max(newly_delivered) + 1)
        };
        let floor = if s.prr_out != 0 { 0 } else { 1 };
        if sndcnt < floor {
            sndcnt = floor;
        }
        c.cwnd = (inflight + sndcnt).max(1);
    }

    /// tcp_schedule_loss_probe: in Open state with data out and no probe outstanding, a probe timer
    /// of 2 x srtt (+ rto_min for a single segment out, else + 2 ms), no later than the RTO.
    pub(crate) fn schedule_tlp(&mut self, k: usize, now: i64) {
        let c = &self.ccs[k];
        let s = &mut self.sfs[k];
        let po = c.nxt - c.una;
        if s.ca_state != CA_OPEN || po == 0 || c.srtt_us8 == 0 || s.tlp_high_seq >= 0 {
            s.tlp_timer.cancel();
            return;
        }
        let mut t = now + ((c.srtt_us8 >> 2) + if po == 1 { s.rto_min_us } else { 2000 }) * 1000;
        if let Some(rto) = s.rto_timer.deadline {
            if rto < t {
                t = rto;
            }
        }
        s.rto_timer.cancel(); // the probe timer replaces it; on_tlp re-arms the RTO
        self.arm_tlp(k, t);
    }

    /// tcp_send_loss_probe: one queued segment if there is one (cwnd not checked), else the last one
    /// sent again; then the RTO restarts from now.
    pub(crate) fn on_tlp(&mut self, k: usize, now: i64) {
        let (una, nxt) = (self.ccs[k].una, self.ccs[k].nxt);
        let s = &self.sfs[k];
        let rearm = now + backed_off_us(s.rto_us, s.backoff) * 1000;
        if nxt == una {
            return;
        }
        if s.ca_state != CA_OPEN || s.tlp_high_seq >= 0 {
            self.arm_rto(k, rearm);
            return;
        }
        if nxt < s.end {
            self.sf_xmit(k, nxt, now, false);
            self.ccs[k].nxt = nxt + 1;
            self.sfs[k].tlp_retrans = false;
        } else {
            let i = nxt - 1;
            let s = &mut self.sfs[k];
            let f = s.segs.at(i).flags;
            if f & F_SACKED != 0 {
                self.arm_rto(k, rearm);
                return;
            }
            if f & F_RETRANS == 0 {
                s.retrans_out += 1;
            }
            s.segs.at_mut(i).flags = f | F_RETRANS | F_EVER_RETRANS;
            s.n_retrans += 1;
            self.sf_xmit(k, i, now, true);
            self.sfs[k].tlp_retrans = true;
        }
        self.sfs[k].n_tlp += 1;
        self.sfs[k].tlp_high_seq = self.ccs[k].nxt;
        self.sf_sync(k);
        self.arm_rto(k, rearm);
    }

    pub(crate) fn on_rto(&mut self, k: usize, now: i64) {
        let (una, nxt) = (self.ccs[k].una, self.ccs[k].nxt);
        if una == nxt {
            return;
        }
        self.sfs[k].n_rto += 1;
        let state = self.sfs[k].ca_state;
        let backoff = self.sfs[k].backoff;
        if state == CA_OPEN || una >= self.sfs[k].high_seq || (state == CA_LOSS && backoff == 0) {
            // tcp_enter_loss reduces ssthresh unless that was done inside this window
            self.sfs[k].prior_ssthresh = self.current_ssthresh(k);
            self.sfs[k].prior_cwnd = self.ccs[k].cwnd;
            self.sfs[k].undo_marker = true;
            let cc = self.cc;
            self.ccs[k].ssthresh = cc.ssthresh(&mut self.ccs, k);
        }
        // F-RTO for an RTO out of Open state, or any RTO after the first of a series
        let s = &mut self.sfs[k];
        s.frto = state == CA_OPEN || backoff > 0;
        self.ccs[k].cwnd = 1;
        self.ccs[k].cwnd_cnt = 0.0;
        s.ca_state = CA_LOSS;
        s.high_seq = nxt;
        let mut lost = 0;
        for i in una..nxt {
            let seg = s.segs.at_mut(i);
            let f = seg.flags;
            if f & F_SACKED != 0 {
                continue;
            }
            if f & F_RETRANS != 0 {
                s.retrans_out -= 1;
            }
            if f & F_LOST == 0 {
                lost += 1;
            }
            s.segs.at_mut(i).flags = (f | F_LOST) & !F_RETRANS;
        }
        s.lost_out += lost;
        s.retrans_hint = una;
        s.lost_hint = nxt;
        self.sf_sync(k);
        let cc = self.cc;
        cc.on_state(&mut self.ccs, k, CA_LOSS as i64, now);
        let s = &mut self.sfs[k];
        s.backoff += 1;
        let t = now + backed_off_us(s.rto_us, s.backoff) * 1000;
        self.arm_rto(k, t);
        self.on_subflow_loss(k, LossKind::Rto, now);
        self.try_send(k, now);
        self.push(now);
    }
}
