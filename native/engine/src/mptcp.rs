//! The MPTCP connection's sender (server) side (docs/MODEL.md §0 is the specification): the send
//! buffer cut into meta segments, the scheduler call loop
//! (`mptcp_write_xmit`), DATA_ACK and window, the reinjection queue, the meta RTO (out-of-tree) or
//! the upstream MPTCP retransmit timer with stale subflows, and subflow establishment.
//!
//! The meta segment table forgets what is DATA_ACKed: it holds the segments from `una_idx` up, so
//! the connection's memory is its unacknowledged data, not the whole transfer. Reading a segment below
//! `una_idx` (which no built-in scheduler does) is a bug and panics loudly. A Python plug-in
//! (`py_sched`) may read any segment (the `ConnView` protocol indexes every segment from 0 to
//! `n_segs`): for it the table keeps them (`keep_acked`).

use std::collections::VecDeque;

use crate::engine::{Engine, Ev, LossKind};
use crate::events::Timer;
use crate::sched::{Decision, Scheduler};
use crate::tcp::{CA_OPEN, F_REINJ};

// upstream MPTCP retransmission (net/mptcp/protocol.c, pm.c)
const TCP_RTO_MIN_NS: i64 = 200_000_000; // the MPTCP retransmit timer when no subflow timer applies
const STALE_LOSS_CNT: i64 = 4; // net.mptcp.stale_loss_cnt
const DFRAG_BYTES: i64 = 32_768 - 40; // one data fragment: a 32 KB page frag less its header

/// One connection-level segment.
#[derive(Clone, Copy, Debug, Default)]
pub struct MetaSeg {
    pub dsn: i64,
    pub len: i64,
    /// Bit `1 << k` per subflow `k` that carried it.
    pub mask: u64,
    pub sent: bool,
}

/// The connection-level sender state (the receiver is the engine's `rx`).
pub struct Conn {
    pub mss: i64,
    pub send_buf_auto: bool,
    pub sndbuf_stale: bool,
    pub send_buf_bytes: i64,
    pub reinject_head: i64,
    /// Segments `off..off + segs.len()`.
    off: i64,
    segs: VecDeque<MetaSeg>,
    pub head: i64,
    pub max_sent_idx: i64,
    pub write_seq: i64,
    pub snd_una: i64,
    pub una_idx: i64,
    pub wnd_end: i64,
    /// The reinjection queue, sorted and de-duplicated.
    pub reinject: Vec<i64>,
    pub send_buffer_full: bool,
    in_push: bool,
    push_again: bool,
    dirty: Vec<usize>,
    pub meta_backoff: u32,
    pub meta_rto_timer: Timer,
    pub wake_timer: Timer,
    pub reinject_on_rto: bool,
    pub meta_rto_factor: f64,
    pub upstream_rtx: bool,
    pub done: bool,
    pub done_ns: Option<i64>,
    /// Segments above `head` sent out of order (ascending; pruned lazily).
    sent_ahead: Vec<i64>,
    meta_rto_cache: (i64, i64),
    pub recovery: bool,
    pub recovery_dsn: i64,
    pub n_reinjected: i64,
    pub n_opportunistic: i64,
    pub n_penalized: i64,
    pub n_meta_rto: i64,
    pub n_decisions: i64,
    /// Counts what may have changed a subflow since a scheduler last scanned them (`MinRtt` keeps its
    /// last scan for the decision right after it): +1 when `push` applied a decision, which changed
    /// only subflow `applied_sf`; +2 for anything else a scheduler can meet: a new `push` (events
    /// ran since), a penalization, a scheduler's own `on_applied`, a plug-in's write to a subflow.
    pub sched_epoch: u64,
    pub applied_sf: usize,
    /// Keep DATA_ACKed segments (a Python plug-in may read any segment through its `ConnView`).
    pub keep_acked: bool,
}

impl Conn {
    pub fn new(mss: i64, send_buf_bytes: Option<i64>, wnd_init: i64, reinject_on_rto: bool, meta_rto_factor: f64,
               upstream_rtx: bool) -> Self {
        Self {
            mss,
            send_buf_auto: send_buf_bytes.is_none(),
            sndbuf_stale: true,
            send_buf_bytes: send_buf_bytes.unwrap_or(4 * 1024 * 1024),
            reinject_head: -1,
            off: 0,
            segs: VecDeque::new(),
            head: 0,
            max_sent_idx: 0,
            write_seq: 0,
            snd_una: 0,
            una_idx: 0,
            wnd_end: wnd_init,
            reinject: Vec::new(),
            send_buffer_full: false,
            in_push: false,
            push_again: false,
            dirty: Vec::new(),
            meta_backoff: 0,
            meta_rto_timer: Timer::default(),
            wake_timer: Timer::default(),
            reinject_on_rto,
            meta_rto_factor,
            upstream_rtx,
            done: false,
            done_ns: None,
            sent_ahead: Vec::new(),
            meta_rto_cache: (-1, 0),
            recovery: false,
            recovery_dsn: 0,
            n_reinjected: 0,
            n_opportunistic: 0,
            n_penalized: 0,
            n_meta_rto: 0,
            n_decisions: 0,
            sched_epoch: 0,
            applied_sf: 0,
            keep_acked: false,
        }
    }

    /// Meta segments created so far (unsent ones included).
    #[inline]
    pub fn n_segs(&self) -> i64 {
        self.off + self.segs.len() as i64
    }

    #[inline]
    pub fn seg(&self, i: i64) -> &MetaSeg {
        assert!(i >= self.off, "meta segment {i} was DATA_ACKed and forgotten (held from {})", self.off);
        &self.segs[(i - self.off) as usize]
    }

    #[inline]
    fn seg_mut(&mut self, i: i64) -> &mut MetaSeg {
        &mut self.segs[(i - self.off) as usize]
    }

    /// Segments held (for the memory benchmark).
    pub fn held(&self) -> usize {
        self.segs.len()
    }

    // ---------------------------------------------------------------- ConnView (for schedulers)
    pub fn unsent_bytes(&self) -> i64 {
        if self.head < self.n_segs() { self.write_seq - self.seg(self.head).dsn } else { 0 }
    }

    pub fn oldest_unacked(&self) -> i64 {
        let i = self.una_idx;
        if i < self.n_segs() && self.seg(i).sent { i } else { -1 }
    }

    pub fn seg_dsn(&self, seg: i64) -> i64 {
        self.seg(seg).dsn
    }

    pub fn seg_len(&self, seg: i64) -> i64 {
        self.seg(seg).len
    }

    pub fn seg_path_mask(&self, seg: i64) -> u64 {
        self.seg(seg).mask
    }

    pub fn seg_sent(&self, seg: i64) -> bool {
        self.seg(seg).sent
    }

    /// meta_snd_wnd_test: the segment's first MSS ends inside the peer's window.
    #[inline]
    pub fn window_allows(&self, seg: i64) -> bool {
        self.window_allows_until(seg, self.wnd_end)
    }

    /// `window_allows` against a right edge of the caller's (a flow-control layer's narrower one).
    #[inline]
    pub fn window_allows_until(&self, seg: i64, wnd_end: i64) -> bool {
        let m = self.seg(seg);
        m.dsn + m.len.min(self.mss) <= wnd_end
    }

    /// Index of the `n`-th (0-based) unsent segment from the head, or `n_segs` if none.
    pub fn nth_unsent(&mut self, n: i64) -> i64 {
        let head = self.head;
        if let Some(&first) = self.sent_ahead.first() {
            if first < head {
                let cut = self.sent_ahead.partition_point(|&x| x < head);
                self.sent_ahead.drain(..cut);
            }
        }
        let ahead = &self.sent_ahead;
        let (mut lo, mut hi) = (head + n, head + n + ahead.len() as i64);
        while lo < hi {
            let mid = (lo + hi).div_euclid(2);
            if mid - head + 1 - ahead.partition_point(|&x| x <= mid) as i64 > n {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo.min(self.n_segs())
    }

    /// The segment starting at byte `dsn`: the first at or above it.
    pub fn seg_at_dsn(&self, dsn: i64) -> i64 {
        self.off + self.segs.partition_point(|m| m.dsn < dsn) as i64
    }

    fn remove_reinject(&mut self, seg: i64) -> bool {
        match self.reinject.binary_search(&seg) {
            Ok(k) => {
                self.reinject.remove(k);
                self.reinject_head = self.reinject.first().copied().unwrap_or(-1);
                true
            }
            Err(_) => false,
        }
    }

    /// 1 if `seg` was queued for reinjection (and is not any more).
    pub fn drop_reinject(&mut self, seg: i64) -> i64 {
        i64::from(self.remove_reinject(seg))
    }

    pub fn add_reinject(&mut self, seg: i64) {
        if seg < self.una_idx {
            return;
        }
        if let Err(k) = self.reinject.binary_search(&seg) {
            self.reinject.insert(k, seg);
            self.reinject_head = self.reinject[0];
        }
    }
}

impl Engine {
    // ---------------------------------------------------------------- application side
    /// The application writes up to `nbytes`; returns how many the send buffer took.
    pub(crate) fn app_write(&mut self, nbytes: i64, _now: i64) -> i64 {
        let c = &mut self.conn;
        if c.send_buf_auto && c.sndbuf_stale && !self.sfs.is_empty() {
            // the sum only changes when a subflow's largest cwnd grew
            c.send_buf_bytes = self.sfs.iter().map(|s| (3 * s.cwnd_max_seen.max(10) * s.mss).min(4 << 20)).sum();
            c.sndbuf_stale = false;
        }
        let used = c.write_seq - c.snd_una;
        let free = c.send_buf_bytes - used;
        if c.send_buffer_full && 2 * free < used {
            // a writer blocked on a full buffer wakes once a third of it is free (sk_stream_write_space)
            return 0;
        }
        let n = nbytes.min(free);
        if n <= 0 {
            c.send_buffer_full = nbytes > 0;
            return 0;
        }
        c.send_buffer_full = n < nbytes;
        let mss = c.mss;
        let mut left = n;
        // top up an unsent short tail segment first
        if let Some(last) = c.segs.back_mut() {
            if !last.sent && last.len < mss {
                let add = (mss - last.len).min(left);
                last.len += add;
                left -= add;
            }
        }
        let mut dsn = c.write_seq + (n - left);
        while left > 0 {
            let ln = left.min(mss);
            c.segs.push_back(MetaSeg { dsn, len: ln, mask: 0, sent: false });
            dsn += ln;
            left -= ln;
        }
        c.write_seq += n;
        n
    }

    // ---------------------------------------------------------------- scheduling
    /// mptcp_write_xmit: apply scheduler decisions until it says wait or nothing changes.
    pub(crate) fn push(&mut self, now: i64) {
        self.conn.sched_epoch += 2;
        if self.conn.in_push {
            self.conn.push_again = true; // re-entered from inside a decision: loop once more
            return;
        }
        self.conn.in_push = true;
        let mut sched = self.sched.take().expect("the scheduler is not re-entered");
        let views = std::mem::take(&mut self.views);
        // The built-in minRTT (the default, and most runs) gets its own copy of the loop, with
        // `select` called directly and inlined: through the trait object, its 32-byte Option<Decision>
        // came back through memory and was read back at once, a store-to-load stall (measured: the
        // 1 Gbit/s scenario went from 91x to 98x real time). Any other scheduler runs the same loop
        // through the trait object.
        let n = match sched.as_min_rtt() {
            Some(m) => self.apply_decisions(m, &views, now),
            None => self.apply_decisions(&mut *sched, &views, now),
        };
        self.sched = Some(sched);
        self.views = views;
        self.conn.n_decisions += n;
        self.conn.in_push = false;
        if !self.conn.dirty.is_empty() {
            // subflows that got segments transmit them now (same instant as the decisions)
            let dirty = std::mem::take(&mut self.conn.dirty);
            for &k in &dirty {
                self.sfs[k].dirty = false;
                self.try_send(k, now);
            }
            let mut dirty = dirty;
            dirty.clear();
            self.conn.dirty = dirty;
        }
        if self.conn.meta_rto_timer.deadline.is_none() && self.conn.una_idx < self.conn.max_sent_idx {
            let t = now + self.meta_rto_ns();
            self.arm_meta_rto(t);
        }
    }

    /// `push`'s loop: apply the scheduler's decisions until it says wait, or a push from inside a
    /// decision (`push_again`) has been answered; returns how many decisions were applied.
    #[inline(always)]
    fn apply_decisions<S: Scheduler + ?Sized>(&mut self, sched: &mut S, views: &[usize], now: i64) -> i64 {
        let mut n = 0;
        let mut again = true;
        while again {
            self.conn.push_again = false;
            while n < 1_000_000 {
                // guard against a scheduler that never says "wait"
                let Some(d) = sched.select(self, views) else { break };
                let k = self.apply(d, now);
                self.conn.sched_epoch += 1;
                self.conn.applied_sf = d.sf;
                if self.sched_on_applied {
                    sched.on_applied(self, d, k);
                    self.conn.sched_epoch += 2;
                }
                if k == 0 {
                    break;
                }
                n += 1;
            }
            again = self.conn.push_again;
        }
        n
    }

    #[inline(always)]
    fn apply(&mut self, d: Decision, _now: i64) -> i64 {
        let k = d.sf;
        if !self.ccs[k].established {
            return 0;
        }
        let seg = d.seg;
        let bit = 1u64 << k;
        let wnd_end = self.conn.wnd_end;
        let mss = self.conn.mss;
        let mut n = 0;
        if seg < 0 {
            let cnt = d.count;
            let mut i = self.conn.head;
            let n_segs = self.conn.n_segs();
            while n < cnt && i < n_segs {
                let m = *self.conn.seg(i);
                if m.dsn + m.len.min(mss) > wnd_end {
                    break;
                }
                let ms = self.conn.seg_mut(i);
                ms.sent = true;
                ms.mask |= bit;
                self.sf_append(k, i, m.dsn, m.len, false);
                n += 1;
                i += 1;
                while i < n_segs && self.conn.seg(i).sent {
                    i += 1;
                }
            }
            self.conn.head = i;
            if i > self.conn.max_sent_idx {
                self.conn.max_sent_idx = i;
            }
        } else {
            let c = &mut self.conn;
            if seg >= c.n_segs() {
                return 0;
            }
            if seg < c.una_idx {
                return c.drop_reinject(seg); // already DATA_ACKed: just forget it
            }
            let m = *c.seg(seg);
            if !m.sent {
                if m.dsn + m.len.min(mss) > wnd_end {
                    return 0;
                }
                let ms = c.seg_mut(seg);
                ms.sent = true;
                ms.mask |= bit;
                if seg > c.head {
                    let at = c.sent_ahead.partition_point(|&x| x <= seg);
                    c.sent_ahead.insert(at, seg);
                }
                if seg == c.head {
                    let mut i = seg + 1;
                    let n_segs = c.n_segs();
                    while i < n_segs && c.seg(i).sent {
                        i += 1;
                    }
                    c.head = i;
                }
                if seg + 1 > c.max_sent_idx {
                    c.max_sent_idx = seg + 1;
                }
                self.sf_append(k, seg, m.dsn, m.len, false);
            } else {
                if c.remove_reinject(seg) {
                    c.n_reinjected += 1;
                } else {
                    c.n_opportunistic += 1;
                }
                c.seg_mut(seg).mask |= bit;
                self.sf_append(k, seg, m.dsn, m.len, true);
            }
            n = 1;
        }
        if n != 0 && !self.sfs[k].dirty {
            self.sfs[k].dirty = true;
            self.conn.dirty.push(k);
        }
        n
    }

    /// minRTT penalization: halve cwnd, and ssthresh unless in slow start.
    pub fn penalize(&mut self, k: usize) {
        let x = &mut self.ccs[k];
        let prior = x.cwnd;
        x.cwnd = (x.cwnd / 2).max(1);
        if prior >= x.ssthresh {
            x.ssthresh = (x.ssthresh / 2).max(2);
        }
        self.conn.n_penalized += 1;
        self.conn.sched_epoch += 2;
    }

    pub fn wake_at(&mut self, t_ns: i64) {
        let d = self.conn.wake_timer.deadline;
        if d.is_none_or(|d| t_ns < d) {
            if let Some((t, gen)) = self.conn.wake_timer.arm(t_ns) {
                self.ev.at(t, Ev::Wake { gen });
            }
        }
    }

    pub(crate) fn on_wake(&mut self, now: i64) {
        let mut sched = self.sched.take().expect("the scheduler is not re-entered");
        sched.on_timer(self, now);
        self.sched = Some(sched);
        self.push(now);
    }

    fn arm_meta_rto(&mut self, t_ns: i64) {
        if let Some((t, gen)) = self.conn.meta_rto_timer.arm(t_ns) {
            self.ev.at(t, Ev::MetaRto { gen });
        }
    }

    // ---------------------------------------------------------------- feedback
    pub(crate) fn on_data_ack(&mut self, data_ack: i64, rwnd: i64, now: i64) {
        if data_ack > self.conn.snd_una {
            let c = &mut self.conn;
            c.snd_una = data_ack;
            let mut i = c.una_idx;
            let n_segs = c.n_segs();
            while i < n_segs {
                let m = c.seg(i);
                if m.dsn + m.len > data_ack {
                    break;
                }
                i += 1;
            }
            c.una_idx = i;
            // forget what is DATA_ACKed
            while c.off < i && !c.keep_acked {
                c.segs.pop_front();
                c.off += 1;
            }
            if c.reinject.first().is_some_and(|&r| r < i) {
                let cut = c.reinject.partition_point(|&r| r < i);
                c.reinject.drain(..cut);
                c.reinject_head = c.reinject.first().copied().unwrap_or(-1);
            }
            c.meta_backoff = 0;
            if c.recovery && data_ack > c.recovery_dsn {
                c.recovery = false;
            }
            if i < c.max_sent_idx {
                let t = now + self.meta_rto_ns();
                self.arm_meta_rto(t);
            } else {
                self.conn.meta_rto_timer.cancel();
            }
            let c = &mut self.conn;
            let e = data_ack + rwnd;
            if e > c.wnd_end {
                c.wnd_end = e;
            }
            self.wl_on_acked(now);
            if data_ack >= self.conn.write_seq && self.wl_finished() {
                self.finish(now);
            }
            return;
        }
        let e = data_ack + rwnd;
        if e > self.conn.wnd_end {
            self.conn.wnd_end = e;
        }
    }

    pub(crate) fn finish(&mut self, now: i64) {
        if !self.conn.done {
            self.conn.done = true;
            self.conn.done_ns = Some(now);
            self.stopped = true;
        }
    }

    pub(crate) fn notify_sched_ack(&mut self, k: usize, now: i64) {
        let mut sched = self.sched.take().expect("the scheduler is not re-entered");
        sched.on_ack(self, k, now);
        self.sched = Some(sched);
    }

    pub(crate) fn on_subflow_loss(&mut self, k: usize, kind: LossKind, now: i64) {
        if kind == LossKind::Rto && self.conn.reinject_on_rto {
            let una = self.conn.una_idx;
            let s = &self.sfs[k];
            let (from, end) = (self.ccs[k].una, s.end);
            for i in from..end {
                let seg = *self.sfs[k].segs.at(i);
                if seg.meta >= una && self.conn.seg(seg.meta).sent && seg.flags & F_REINJ == 0 {
                    self.conn.add_reinject(seg.meta);
                }
            }
            self.sfs[k].pf = true;
        }
        let mut sched = self.sched.take().expect("the scheduler is not re-entered");
        sched.on_loss(self, k, kind, now);
        self.sched = Some(sched);
    }

    pub(crate) fn meta_rto_ns(&mut self) -> i64 {
        let now = self.ev.now;
        if self.conn.upstream_rtx {
            // mptcp_set_timeout: the latest pending timer of a subflow not (yet) counted stale
            let mut tout = 0;
            for (s, c) in self.sfs.iter().zip(&self.ccs) {
                let d = s.rto_timer.deadline.or(s.tlp_timer.deadline);
                if let Some(d) = d {
                    if c.established && s.stale_count == 0 && d - now > tout {
                        tout = d - now;
                    }
                }
            }
            return if tout > 0 { tout } else { TCP_RTO_MIN_NS };
        }
        let (t, mut base) = self.conn.meta_rto_cache;
        if now - t > 10_000_000 || t < 0 {
            // refreshed at most every 10 ms (the timer is lazy anyway)
            let max_rto = self.sfs.iter().zip(&self.ccs).filter(|(_, c)| c.established).map(|(s, _)| s.rto_us).max()
                .unwrap_or(1_000_000);
            // int(max_rto * factor) * 1000: the float product truncated, then in ns
            base = ((max_rto as f64 * self.conn.meta_rto_factor) as i64) * 1000;
            self.conn.meta_rto_cache = (now, base);
        }
        let b = self.conn.meta_backoff;
        // min(base << backoff, 120 s), the shift taken as unbounded (no overflow) before the min
        if b >= 40 || base << b >= 120_000_000_000 { 120_000_000_000 } else { base << b }
    }

    pub(crate) fn on_meta_rto(&mut self, now: i64) {
        if self.conn.una_idx >= self.conn.max_sent_idx || self.conn.done {
            return;
        }
        self.conn.n_meta_rto += 1;
        if self.conn.upstream_rtx {
            self.upstream_retrans(now);
            return;
        }
        let una = self.conn.una_idx;
        self.conn.add_reinject(una);
        self.conn.meta_backoff += 1;
        let t = now + self.meta_rto_ns();
        self.arm_meta_rto(t);
        self.push(now);
    }

    /// __mptcp_retrans: the stale check of every subflow with data outstanding at TCP level, then the
    /// head data fragment up for reinjection; the timer is re-armed without backoff.
    fn upstream_retrans(&mut self, now: i64) {
        for k in 0..self.sfs.len() {
            if !self.ccs[k].established || self.ccs[k].una >= self.sfs[k].end {
                continue;
            }
            let s = &mut self.sfs[k];
            if s.stale_count == 0 {
                s.stale_ts = s.last_ack_ns;
                s.stale_count = 1;
            } else if s.stale_ts == s.last_ack_ns {
                s.stale_count += 1;
                if !s.stale && s.stale_count > STALE_LOSS_CNT {
                    let other_ok = (0..self.sfs.len()).any(|o| {
                        o != k && self.ccs[o].established && !self.sfs[o].stale
                            && self.sfs[o].stale_count < STALE_LOSS_CNT - 1
                    });
                    if other_ok {
                        self.sfs[k].stale = true;
                        self.retransmit_pending();
                    }
                }
            } else {
                s.stale_count = 0;
            }
        }
        let c = &mut self.conn;
        let end_dsn = (c.snd_una.div_euclid(DFRAG_BYTES) + 1) * DFRAG_BYTES;
        let mut i = c.una_idx;
        while i < c.max_sent_idx && c.seg(i).dsn < end_dsn {
            if c.seg(i).sent {
                c.add_reinject(i);
            }
            i += 1;
        }
        let t = now + self.meta_rto_ns();
        self.arm_meta_rto(t);
        self.push(now);
    }

    /// __mptcp_retransmit_pending_data: a subflow went stale; everything sent and not yet DATA_ACKed
    /// is re-sent on the others, like new data, until snd_una passes today's snd_nxt.
    fn retransmit_pending(&mut self) {
        let c = &mut self.conn;
        for i in c.una_idx..c.max_sent_idx {
            if c.seg(i).sent {
                c.add_reinject(i);
            }
        }
        c.recovery = true;
        let last = *c.seg(c.max_sent_idx - 1);
        c.recovery_dsn = last.dsn + last.len;
    }

    // ---------------------------------------------------------------- subflow setup
    /// The subflow can carry data from now on; the SYN/SYN-ACK exchange gave the first RTT sample.
    pub(crate) fn establish(&mut self, k: usize, now: i64, handshake_rtt_ns: i64) {
        self.ccs[k].established = true;
        let s = &mut self.sfs[k];
        s.start_ns = now;
        s.rate_t0_ns = now;
        s.last_ack_ns = now;
        if handshake_rtt_ns > 0 {
            self.rtt_sample(k, handshake_rtt_ns.div_euclid(1000));
        }
        self.sfs[k].ca_state = CA_OPEN;
        self.push(now);
    }
}
