//! The receiving end (client side; docs/MODEL.md A5 and §0.6), `ConnReceiver` and
//! `SubflowReceiver`: the MPTCP socket's in-order point, out-of-order queue and
//! shared window (with the optional receive-buffer autotuning of Linux 6.18, mptcp_rcv_space_adjust),
//! and each subflow's reordering, delayed / quick ACKs, timestamps and tcp_grow_window.
//!
//! The receivers do not send: `on_data` and `on_delack` return the ACK to put on the subflow's ACK
//! link, and a delayed-ACK timer to schedule, for the caller (the engine's event loop) to act on.
//! Integer division floors (towards minus infinity, `floor_div`), as the model specifies; Rust's `/`
//! truncates, which differs for negative operands.

use crate::events::{Fired, Timer};
use crate::winmap::WindowMap;

const TCP_MAX_QUICKACKS: i64 = 16;
/// The `sack` field of an ACK: none, or a DSACK (answering a duplicate segment).
pub const SACK_NONE: i64 = -1;
pub const SACK_DSACK: i64 = -2;

#[inline]
fn floor_div(a: i64, b: i64) -> i64 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) { q - 1 } else { q }
}

/// Linux 6.18 tcp_rcvbuf_grow / mptcp_rcvbuf_grow: twice what was read in the last measurement plus
/// twice that times its growth over the one before.
pub fn rcvbuf_grow_window(new_space: i64, old_space: i64) -> i64 {
    let win = new_space << 1;
    win + (floor_div(win * (new_space - old_space), old_space) << 1)
}

/// A data segment as the receiver sees it.
#[derive(Clone, Copy, Debug)]
pub struct Data {
    pub sf: usize,
    pub idx: i64,
    pub dsn: i64,
    pub plen: i64,
    pub t_snd_ns: i64,
    pub ts_ecr_ns: i64,
}

/// An ACK to send: subflow, next expected segment, SACKed segment (or SACK_NONE / SACK_DSACK),
/// DATA_ACK, window in bytes, send time, echoed timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    pub sf: usize,
    pub ack: i64,
    pub sack: i64,
    pub data_ack: i64,
    pub rwnd: i64,
    pub t_snd_ns: i64,
    pub ts_ecr_ns: i64,
}

/// The MPTCP socket's receive side (ConnReceiver).
pub struct ConnReceiver {
    pub rcv_buf_bytes: i64,
    pub wnd_init: i64,
    pub rcv_nxt: i64,
    ooo: WindowMap<i64>, // dsn -> end
    pub ooo_bytes: i64,
    pub max_ooo_bytes: i64,
    pub delivered_t_ns: i64,
    pub mss: i64,
    pub wnd_cap: i64,
    pub drs_space: i64,
    drs_seq: i64,
    pub drs_t_ns: i64,
    drs_rtt_us: i64,
    pub wnd_sent_end: i64,
}

impl ConnReceiver {
    /// `buf_init_bytes` and `rcv_space_init_bytes` > 0 switch the autotuning on.
    pub fn new(rcv_buf_bytes: i64, wnd_init_bytes: Option<i64>, buf_init_bytes: Option<i64>,
               rcv_space_init_bytes: i64, mss_bytes: i64) -> Self {
        let wnd_init = wnd_init_bytes.map_or(rcv_buf_bytes, |w| w.min(rcv_buf_bytes));
        let autotuned = buf_init_bytes.is_some() && rcv_space_init_bytes > 0;
        let wnd_cap = match buf_init_bytes {
            Some(b) if autotuned && b != 0 => b.min(rcv_buf_bytes),
            _ => rcv_buf_bytes,
        };
        Self {
            rcv_buf_bytes,
            wnd_init,
            rcv_nxt: 0,
            ooo: WindowMap::new(mss_bytes),
            ooo_bytes: 0,
            max_ooo_bytes: 0,
            delivered_t_ns: 0,
            mss: mss_bytes,
            wnd_cap,
            drs_space: if autotuned { rcv_space_init_bytes } else { 0 },
            drs_seq: 0,
            drs_t_ns: 0,
            drs_rtt_us: 0,
            wnd_sent_end: wnd_init,
        }
    }

    /// Data handed up in subflow order; true when it went to the out-of-order queue.
    pub fn deliver(&mut self, dsn: i64, plen: i64, now: i64) -> bool {
        let nxt = self.rcv_nxt;
        if dsn == nxt {
            let mut nxt = dsn + plen;
            while let Some(e) = self.ooo.remove(nxt) {
                self.ooo_bytes -= e - nxt;
                nxt = e;
            }
            self.rcv_nxt = nxt;
            self.delivered_t_ns = now;
            return false;
        }
        if dsn > nxt {
            if self.ooo.insert_new(dsn, dsn + plen) {
                self.ooo_bytes += plen;
                if self.ooo_bytes > self.max_ooo_bytes {
                    self.max_ooo_bytes = self.ooo_bytes;
                }
            }
            return true;
        }
        if dsn + plen > nxt {
            // partial overlap (not produced by the engine: segments are never re-cut)
            self.rcv_nxt = dsn + plen;
            self.delivered_t_ns = now;
        }
        false
    }

    pub fn has_ooo(&self) -> bool {
        !self.ooo.is_empty()
    }
}

/// One subflow's receive side (SubflowReceiver).
pub struct SubflowReceiver {
    pub index: usize,
    delayed_ack: bool,
    delack_ns: i64,
    quickack_on_meta_ooo: bool,
    pub rcv_nxt: i64,
    ooo: WindowMap<(i64, i64)>, // segment -> (dsn, plen)
    unacked: i64,
    quick: i64,
    last_data_ns: i64,
    rto_guess_ns: i64,
    pub delack: Timer,
    pub rcv_ssthresh: i64,
    wnd_incr: i64,
    pub wnd_cap: i64,
    rcv_space_init: i64,
    pub rcv_space: i64,
    pub rcv_rtt_us8: i64,
    rcv_rtt_ecr_ms: i64,
    rcv_wup: i64,
    pub ts_recent_ns: i64,
}

/// What the receive side asks of the event loop after a segment or a timer.
#[derive(Debug, Default)]
pub struct Out {
    pub ack: Option<Ack>,
    /// Schedule the subflow's delayed-ACK timer entry `(t_ns, generation)`.
    pub delack_at: Option<(i64, u64)>,
}

impl SubflowReceiver {
    #[allow(clippy::too_many_arguments)]
    pub fn new(index: usize, meta: &ConnReceiver, delayed_ack: bool, delack_ns: i64, quickack_on_meta_ooo: bool,
               wnd_incr_bytes: i64, init_later: bool) -> Self {
        Self {
            index,
            delayed_ack,
            delack_ns,
            quickack_on_meta_ooo,
            rcv_nxt: 0,
            ooo: WindowMap::new(1),
            unacked: 0,
            quick: TCP_MAX_QUICKACKS,
            last_data_ns: -1,
            rto_guess_ns: 200_000_000,
            delack: Timer::default(),
            rcv_ssthresh: meta.wnd_init,
            wnd_incr: wnd_incr_bytes,
            wnd_cap: meta.wnd_cap,
            rcv_space_init: meta.drs_space,
            rcv_space: if init_later { 0 } else { meta.drs_space },
            rcv_rtt_us8: 0,
            rcv_rtt_ecr_ms: -1,
            rcv_wup: 0,
            ts_recent_ns: 0,
        }
    }

    /// tcp_init_buffer_space at this end's handshake.
    pub fn init_buffer_space(&mut self) {
        self.rcv_space = self.rcv_space_init;
    }

    /// tcp_rcvbuf_grow when the MPTCP socket's buffer grew.
    fn rcvbuf_grow(&mut self, copied: i64, mss: i64, rcv_buf_bytes: i64) {
        let old = self.rcv_space;
        if old == 0 {
            return;
        }
        self.rcv_space = copied;
        let mut win = rcvbuf_grow_window(copied, old);
        if let Some(top) = self.ooo.iter().map(|(i, _)| i).max() {
            win += (top + 1 - self.rcv_nxt) * mss;
        }
        if win > self.wnd_cap {
            self.wnd_cap = win.min(rcv_buf_bytes);
        }
    }

    /// The ACK this subflow sends now (its window as __tcp_select_window and mptcp_set_rwin make it).
    fn ack(&mut self, meta: &mut ConnReceiver, now: i64, sack: i64) -> Ack {
        self.unacked = 0;
        self.delack.deadline = None;
        self.rcv_wup = self.rcv_nxt;
        let mut w = meta.wnd_cap - meta.ooo_bytes;
        if w > self.rcv_ssthresh {
            w = self.rcv_ssthresh;
        }
        if w < 0 {
            w = 0;
        }
        let end = meta.rcv_nxt + w;
        if end > meta.wnd_sent_end {
            meta.wnd_sent_end = end;
        } else {
            w = meta.wnd_sent_end - meta.rcv_nxt;
        }
        Ack { sf: self.index, ack: self.rcv_nxt, sack, data_ack: meta.rcv_nxt, rwnd: w, t_snd_ns: now,
              ts_ecr_ns: self.ts_recent_ns }
    }

    /// The delayed-ACK timer's heap entry `gen` fired at `now`.
    pub fn on_delack(&mut self, meta: &mut ConnReceiver, gen: u64, now: i64) -> Out {
        match self.delack.fire(gen, now) {
            Fired::Stale => Out::default(),
            Fired::Again { t_ns, gen } => Out { ack: None, delack_at: Some((t_ns, gen)) },
            Fired::Due => {
                let ack = if self.unacked != 0 { Some(self.ack(meta, now, SACK_NONE)) } else { None };
                Out { ack, delack_at: None }
            }
        }
    }
}

/// The receive side of one connection: the MPTCP socket and its subflows.
pub struct Receiver {
    pub meta: ConnReceiver,
    pub subflows: Vec<SubflowReceiver>,
}

impl Receiver {
    /// mptcp_rcv_space_adjust when the application reads (it reads in-order data at once).
    fn autotune(&mut self, now: i64) {
        let m = &mut self.meta;
        let t = floor_div(now - m.drs_t_ns, 1000);
        if m.drs_rtt_us != 0 && t < m.drs_rtt_us {
            return;
        }
        let rtt8 = self.subflows.iter().map(|r| r.rcv_rtt_us8).fold(0, i64::max);
        m.drs_rtt_us = rtt8 >> 3;
        if m.drs_rtt_us == 0 || t < m.drs_rtt_us {
            return;
        }
        let copied = m.rcv_nxt - m.drs_seq;
        let old = m.drs_space;
        if copied > old {
            m.drs_space = copied;
            let mut win = rcvbuf_grow_window(copied, old);
            if let Some(top) = m.ooo.iter().map(|(_, end)| end).max() {
                win += top - m.rcv_nxt;
            }
            let cap = m.rcv_buf_bytes;
            if win > m.wnd_cap && m.wnd_cap < cap {
                m.wnd_cap = win.min(cap);
                let (mss, buf) = (m.mss, m.rcv_buf_bytes);
                for r in &mut self.subflows {
                    r.rcvbuf_grow(copied, mss, buf); // "make subflows follow along"
                }
            }
        }
        let m = &mut self.meta;
        m.drs_seq = m.rcv_nxt;
        m.drs_t_ns = now;
    }

    /// A data segment arrives on its subflow at `now`.
    pub fn on_data(&mut self, p: &Data, now: i64) -> Out {
        let k = p.sf;
        let (i, dsn, plen) = (p.idx, p.dsn, p.plen);
        {
            let meta = &self.meta;
            let r = &mut self.subflows[k];
            if now - r.last_data_ns > r.rto_guess_ns && r.last_data_ns >= 0 {
                r.quick = TCP_MAX_QUICKACKS; // tcp_event_data_recv: idle longer than RTO
            }
            r.last_data_ns = now;
            // tcp_store_ts_recent, as a select: whether this segment is the first since the last ACK
            // follows the ACK parity, which is random when two subflows share a link (at 8 subflows),
            // and a branch on it was mispredicted about half the time
            let newer = (i <= r.rcv_wup) & (p.t_snd_ns > r.ts_recent_ns);
            r.ts_recent_ns = std::hint::select_unpredictable(newer, p.t_snd_ns, r.ts_recent_ns);
            if meta.drs_space != 0 {
                let ecr_ms = floor_div(p.ts_ecr_ns, 1_000_000);
                if ecr_ms != r.rcv_rtt_ecr_ms {
                    // tcp_rcv_rtt_measure_ts / tcp_rcv_rtt_update: a new echo on a full-sized segment
                    r.rcv_rtt_ecr_ms = ecr_ms;
                    if plen >= meta.mss && ecr_ms > 0 {
                        let sample_us = (floor_div(now, 1_000_000) - ecr_ms) * 1000;
                        if sample_us > 0 {
                            let old = r.rcv_rtt_us8;
                            r.rcv_rtt_us8 = if old != 0 { old - (old >> 3) + sample_us } else { sample_us << 3 };
                        }
                    }
                }
            }
            if r.rcv_ssthresh < r.wnd_cap && r.wnd_incr != 0 && i >= r.rcv_nxt {
                // tcp_grow_window: += max(2 x MSS, 2 x len) up to what this subflow's buffer allows
                let room = r.wnd_cap - r.rcv_ssthresh;
                let incr = if 2 * plen > r.wnd_incr { 2 * plen } else { r.wnd_incr };
                r.rcv_ssthresh += incr.min(room);
                if r.quick == 0 {
                    r.quick = 1;
                }
            }
        }
        let rcv_nxt = self.subflows[k].rcv_nxt;
        if i == rcv_nxt {
            let read_from = self.meta.rcv_nxt;
            let mut meta_ooo = self.meta.deliver(dsn, plen, now);
            let r = &mut self.subflows[k];
            r.rcv_nxt = i + 1;
            let mut now_ack = false;
            if !r.ooo.is_empty() {
                while let Some((d, ln)) = r.ooo.remove(r.rcv_nxt) {
                    r.rcv_nxt += 1;
                    if self.meta.deliver(d, ln, now) {
                        meta_ooo = true;
                    }
                }
                now_ack = true; // RFC 5681 4.2: ACK at once when a gap is filled
            }
            if meta_ooo && r.quickack_on_meta_ooo {
                r.quick = TCP_MAX_QUICKACKS;
            }
            if self.meta.drs_space != 0 && self.meta.rcv_nxt != read_from {
                self.autotune(now);
            }
            let r = &mut self.subflows[k];
            r.unacked += 1;
            let send = if now_ack || !r.delayed_ack {
                true
            } else if r.quick > 0 {
                r.quick -= 1;
                true
            } else {
                r.unacked >= 2
            };
            if send {
                return Out { ack: Some(r.ack(&mut self.meta, now, SACK_NONE)), delack_at: None };
            }
            if r.delack.deadline.is_none() {
                let t = now + r.delack_ns;
                return Out { ack: None, delack_at: r.delack.arm(t) };
            }
            Out::default()
        } else if i > rcv_nxt {
            let r = &mut self.subflows[k];
            r.ooo.insert_new(i, (dsn, plen));
            Out { ack: Some(r.ack(&mut self.meta, now, i)), delack_at: None }
        } else {
            let r = &mut self.subflows[k];
            Out { ack: Some(r.ack(&mut self.meta, now, SACK_DSACK)), delack_at: None } // duplicate
        }
    }

    pub fn on_delack(&mut self, k: usize, gen: u64, now: i64) -> Out {
        self.subflows[k].on_delack(&mut self.meta, gen, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(delayed_ack: bool) -> Receiver {
        let meta = ConnReceiver::new(100_000, None, None, 0, 1424);
        let sf = SubflowReceiver::new(0, &meta, delayed_ack, 40_000_000, true, 0, false);
        Receiver { meta, subflows: vec![sf] }
    }

    fn data(idx: i64, dsn: i64) -> Data {
        Data { sf: 0, idx, dsn, plen: 1000, t_snd_ns: 0, ts_ecr_ns: 0 }
    }

    #[test]
    fn in_order_then_hole_then_fill() {
        let mut r = one(false);
        let a = r.on_data(&data(0, 0), 10).ack.unwrap();
        assert_eq!((a.ack, a.sack, a.data_ack, a.rwnd), (1, SACK_NONE, 1000, 100_000));
        let a = r.on_data(&data(2, 2000), 20).ack.unwrap(); // segment 1 missing
        assert_eq!((a.ack, a.sack, a.data_ack), (1, 2, 1000));
        let a = r.on_data(&data(1, 1000), 30).ack.unwrap();
        assert_eq!((a.ack, a.data_ack), (3, 3000));
        let a = r.on_data(&data(1, 1000), 40).ack.unwrap();
        assert_eq!(a.sack, SACK_DSACK);
    }

    #[test]
    fn delayed_ack_after_the_quick_acks() {
        let mut r = one(true);
        for i in 0..16 {
            assert!(r.on_data(&data(i, i * 1000), i).ack.is_some()); // 16 quick ACKs
        }
        let o = r.on_data(&data(16, 16_000), 100);
        assert!(o.ack.is_none());
        let (t, gen) = o.delack_at.unwrap();
        assert_eq!(t, 40_000_100);
        assert_eq!(r.on_delack(0, gen, t).ack.unwrap().ack, 17);
    }

    #[test]
    fn grow_window_matches_the_kernel_formula() {
        assert_eq!(rcvbuf_grow_window(20_000, 10_000), 40_000 + 80_000);
        assert_eq!(floor_div(-7, 2), -4);
    }
}
