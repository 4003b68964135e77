//! minRTT, the out-of-tree Linux MPTCP default (`workbench.schedulers._minrtt`, docs/MODEL.md §1):
//! the lowest-srtt subflow with cwnd room gets as many new segments as that room allows; the
//! reinjection queue goes first; when the MPTCP window blocks new data (or there is none and the send
//! buffer is full) the oldest unacked segment is retransmitted opportunistically on the fast subflow
//! and slower carriers are penalized (v0.95: every one in Open state, once per srtt of the fast one).
//!
//! The step-by-step pieces (`select_with_wait`, `reinject`, ...) are public for the schedulers built
//! on minRTT that may decline its subflow and wait (ECF, BLEST), as in the kernel's copies.

use super::{get_available_subflow, lowest_rtt_available, rbuf_opti_worth_it, standing, temp_unavailable, Decision,
            Scheduler, Standing};
use crate::engine::Engine;
use crate::tcp::CA_OPEN;

/// `wait(e, subflows, k, seg)`: whether to leave segment `seg` unsent rather than put it on subflow `k`.
pub type WaitTest<'a> = dyn FnMut(&mut Engine, &[usize], usize, i64) -> bool + 'a;
/// `count(e, subflows, k)`: how many new segments to give subflow `k`.
pub type CountFor<'a> = dyn FnMut(&Engine, &[usize], usize) -> i64 + 'a;

pub struct MinRtt {
    pub opportunistic: bool,
    pub penalize_all: bool,
    /// Per subflow: when it last penalized (mptcp_rcv_buf_optimization's `last_rbuf_opti`).
    last_rbuf_opti: Vec<Option<i64>>,
    /// The last full scan, when it gave new data to a subflow (see `select`).
    memo: Option<ScanMemo>,
    /// The subflow list that scan went over (kept apart so that its buffer is reused).
    memo_subflows: Vec<usize>,
}

/// What a full scan found when its decision gave subflow `k` new data: `sched_epoch` then, and the
/// best of the other available subflows.
#[derive(Clone, Copy)]
struct ScanMemo {
    epoch: u64,
    k: usize,
    runner_up: Option<usize>,
}

impl MinRtt {
    pub fn new(opportunistic: bool, penalize_all: bool) -> Self {
        Self { opportunistic, penalize_all, last_rbuf_opti: Vec::new(), memo: None, memo_subflows: Vec::new() }
    }

    /// How many new segments one decision gives subflow `k`: all its cwnd room (at least one).
    pub fn segments_for(e: &Engine, k: usize) -> i64 {
        let sf = e.sf(k);
        (sf.cwnd() - sf.in_flight() - sf.queued()).max(1)
    }

    /// `select` for schedulers with a wait test: `wait(e, subflows, k, seg)` says whether to leave
    /// segment `seg` unsent rather than put it on subflow `k` now; `count(e, subflows, k)` how many
    /// new segments to give `k`.
    pub fn select_with_wait(&mut self, e: &mut Engine, subflows: &[usize],
                            wait: &mut WaitTest,
                            count: &mut CountFor) -> Option<Decision> {
        let rh = e.conn.reinject_head;
        if rh >= 0 {
            return self.reinject(e, subflows, rh, wait);
        }
        let head = e.conn.head;
        if head >= e.conn.n_segs() {
            return self.when_all_sent(e, subflows);
        }
        let k = get_available_subflow(e, subflows, 0, true)?;
        if wait(e, subflows, k, head) {
            return None;
        }
        if !e.conn.window_allows(head) {
            return self.window_blocked(e, subflows, k);
        }
        Some(Decision::head(k, count(e, subflows, k)))
    }

    /// The reinjection queue's head goes first, to a subflow that has not carried it.
    pub fn reinject(&mut self, e: &mut Engine, subflows: &[usize], rh: i64,
                    wait: &mut WaitTest) -> Option<Decision> {
        let mask = e.conn.seg_path_mask(rh);
        let k = get_available_subflow(e, subflows, mask, true)?;
        if wait(e, subflows, k, rh) {
            return None;
        }
        Some(Decision::seg(k, rh))
    }

    /// Nothing new to send: with a full send buffer, opportunistically retransmit (§1.4).
    pub fn when_all_sent(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        if self.opportunistic && e.conn.send_buffer_full {
            if let Some(k) = get_available_subflow(e, subflows, 0, false) {
                let seg = self.rcv_buf_optimization(e, subflows, k, false);
                if seg >= 0 {
                    return Some(Decision::seg(k, seg));
                }
            }
        }
        None
    }

    /// The MPTCP window does not allow new data: opportunistic retransmission with penalization.
    pub fn window_blocked(&mut self, e: &mut Engine, subflows: &[usize], k: usize) -> Option<Decision> {
        if !self.opportunistic {
            return None;
        }
        let seg = self.rcv_buf_optimization(e, subflows, k, true);
        if seg >= 0 { Some(Decision::seg(k, seg)) } else { None }
    }

    /// mptcp_rcv_buf_optimization: the segment to retransmit on subflow `k`, or -1.
    pub fn rcv_buf_optimization(&mut self, e: &mut Engine, subflows: &[usize], k: usize, penal: bool) -> i64 {
        let head = e.conn.oldest_unacked();
        if head < 0 {
            return -1;
        }
        let mask = e.conn.seg_path_mask(head);
        let now = e.now_ns();
        if penal || e.conn.send_buffer_full {
            if self.last_rbuf_opti.len() <= k {
                self.last_rbuf_opti.resize(k + 1, None);
            }
            let last = *self.last_rbuf_opti[k].get_or_insert(now);
            if now - last >= e.sf(k).srtt_ns() {
                for &x in subflows {
                    if x == k || (mask >> x) & 1 == 0 {
                        continue;
                    }
                    if e.sf(k).srtt_us8() < e.sf(x).srtt_us8() && e.sf(x).ca_state() == CA_OPEN {
                        e.penalize(x);
                        self.last_rbuf_opti[k] = Some(now);
                        if !self.penalize_all {
                            break;
                        }
                    }
                }
            }
        }
        if (mask >> k) & 1 != 0 {
            return -1;
        }
        let doit = rbuf_opti_worth_it(e, subflows, k, |x| (mask >> x) & 1 != 0);
        let sf = e.sf(k);
        if doit && sf.established() && !sf.pf() && !temp_unavailable(&sf, true) {
            head
        } else {
            -1
        }
    }
}

impl Scheduler for MinRtt {
    fn as_min_rtt(&mut self) -> Option<&mut MinRtt> {
        Some(self)
    }

    #[inline(always)]
    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let memo = self.memo.take();
        let rh = e.conn.reinject_head;
        if rh >= 0 {
            return self.reinject(e, subflows, rh, &mut |_, _, _, _| false);
        }
        let head = e.conn.head;
        if head >= e.conn.n_segs() {
            return self.when_all_sent(e, subflows);
        }
        // The scan over all subflows, or its shortcut for the decision right after one: push asks
        // again at once, and at 8 subflows this second scan (usually finding all of them busy) was a
        // third of the scheduler's cost. When the only change since the last full scan is the
        // decision applied to its subflow `k` (`Conn::sched_epoch`), over the same subflows, the
        // others stand as the scan found them and `k`'s srtt is unchanged: `k` is still the best if
        // still available; if not, it is busy and the runner-up is the best.
        let (found, busy, n_backup, runner_up) = match memo {
            Some(m) if e.conn.sched_epoch == m.epoch + 1 && e.conn.applied_sf == m.k
                && self.memo_subflows == subflows =>
            {
                if standing(&e.sf(m.k)) == Standing::Available {
                    (Some(m.k), false, 0, None)
                } else {
                    (m.runner_up, true, 0, None)
                }
            }
            _ => {
                let (best, runner_up, busy, n_backup) = lowest_rtt_available(e, subflows);
                (best, busy, n_backup, best.map(|_| runner_up))
            }
        };
        let k = match found {
            Some(k) => k,
            None => {
                if busy || n_backup == 0 {
                    return None; // an active subflow is only temporarily busy: wait, no backup
                }
                get_available_subflow(e, subflows, 0, true)?
            }
        };
        if !e.conn.window_allows(head) {
            return self.window_blocked(e, subflows, k);
        }
        if let Some(runner_up) = runner_up {
            self.memo = Some(ScanMemo { epoch: e.conn.sched_epoch, k, runner_up });
            self.memo_subflows.clear();
            self.memo_subflows.extend_from_slice(subflows);
        }
        Some(Decision::head(k, Self::segments_for(e, k)))
    }
}
