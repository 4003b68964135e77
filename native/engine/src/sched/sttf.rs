//! STTF, Shortest Transfer Time First (Hurtig et al., IEEE/ACM ToN 2019; seed paper 002 §IV-B,
//! Algorithms 2 and 3), as the Karlstad kernel module `vkirany/mptcp-kau net/mptcp/mptcp_sttf.c`
//! (`compute_tt`, `get_subflow_from_selectors`, `pre_scheduler`) does it; a port of
//! `workbench.schedulers._sttf` (its docstring is the specification, docs/MODEL.md §10).
//!
//! The transfer time of one more segment on a subflow counts the srtt rounds it waits behind what is
//! queued there, the window growing per round as slow start (x2, capped at ssthresh) or congestion
//! avoidance (+1) would grow it. `reschedule = true` (paper Algorithm 2) keeps the plan in the
//! scheduler and commits only what a subflow can send now (its free cwnd), possibly a later segment
//! out of order; `false` (kau `get_subflow` alone) queues each segment for good on its argmin
//! subflow. `optim`: opportunistic retransmission without penalization when the window is full.
//! Candidates: established, not potentially failed, not in Loss, with an RTT sample; ties go to the
//! subflow listed first. The kau code's `rtt_last` is srtt here (the views have no last sample).

use std::collections::HashMap;

use super::daps::lowest_srtt_with_room;
use super::otias::batch_len;
use super::{is_available, param_bool, param_i64, rbuf_opti_worth_it, Decision, ParamValue, SfView, Scheduler};
use crate::engine::Engine;
use crate::tcp::CA_LOSS;

/// A bound on the rounds counted (a subflow whose window would never drain the queue).
const MAX_ROUNDS: i64 = 10_000;

/// Window of the next round: x2 in slow start (capped at ssthresh), +1 in congestion avoidance.
fn next_cwnd(cwnd: i64, ssthresh: i64) -> i64 {
    if cwnd < ssthresh {
        return (2 * cwnd).min(ssthresh.max(cwnd + 1));
    }
    cwnd + 1
}

/// compute_tt (`sttf_transfer_time_ns`): time (ns) until one more segment handed to `sf` arrives,
/// with `extra` more segments pretended queued on it. Whole rounds are counted in integer ns and
/// converted once, as Python's `tt + 0.5 * rtt` (int plus float) does.
pub fn sttf_transfer_time_ns(sf: &SfView, extra: i64) -> f64 {
    let rtt = sf.srtt_ns();
    let mut q = 1 + sf.queued() + extra;
    let free = (sf.cwnd() - sf.in_flight()).max(0);
    if q <= free {
        return 0.5 * rtt as f64;
    }
    q -= free;
    let mut tt = rtt;
    let ssthresh = sf.ssthresh();
    let mut cwnd = next_cwnd(sf.cwnd().max(1), ssthresh);
    let mut rounds = 0;
    while q > cwnd && rounds < MAX_ROUNDS {
        q -= cwnd;
        tt += rtt;
        cwnd = next_cwnd(cwnd, ssthresh);
        rounds += 1;
    }
    tt as f64 + 0.5 * rtt as f64
}

/// `_count_within`: how many more segments `sf` would be planned with a transfer time < `t_ns`
/// (<= if `inclusive`), at most `limit`.
fn count_within(sf: &SfView, t_ns: f64, inclusive: bool, limit: i64) -> i64 {
    let rtt = sf.srtt_ns();
    let ok = |tt: f64| if inclusive { tt <= t_ns } else { tt < t_ns };
    if !ok(0.5 * rtt as f64) {
        return 0;
    }
    let free = (sf.cwnd() - sf.in_flight()).max(0);
    let queued = sf.queued();
    let ssthresh = sf.ssthresh();
    let mut cap = free; // segments (counting those already queued) delivered with tt = rtt/2
    let mut cwnd = sf.cwnd().max(1);
    let mut k: i64 = 1;
    // Python: k * rtt + 0.5 * rtt, the int product converted to a float
    while cap - queued < limit && k < MAX_ROUNDS && ok((k * rtt) as f64 + 0.5 * rtt as f64) {
        cwnd = next_cwnd(cwnd, ssthresh);
        cap += cwnd;
        k += 1;
    }
    (cap - queued).max(0).min(limit)
}

fn usable(sf: &SfView) -> bool {
    sf.established() && !sf.pf() && sf.ca_state() != CA_LOSS && sf.srtt_ns() > 0
}

pub struct Sttf {
    pub reschedule: bool,
    pub optim: bool,
    /// reschedule = false: segments per decision while one subflow stays the shortest.
    pub max_batch: i64,
    /// Candidates of the current call (kept to avoid an allocation per call).
    cands: Vec<usize>,
}

impl Sttf {
    pub fn new(reschedule: bool, optim: bool, max_batch: i64) -> Self {
        Self { reschedule, optim, max_batch, cands: Vec::new() }
    }

    /// From `STTF.param_values()` (values outside the ParamSpecs refused, as `ParamSpec.check` does).
    pub fn from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        let max_batch = param_i64(p, "max_batch", 64)?;
        if !(1..=4096).contains(&max_batch) {
            return Err(format!("sttf: max_batch={max_batch} outside [1, 4096]"));
        }
        Ok(Self::new(param_bool(p, "reschedule", true)?, param_bool(p, "optim", true)?, max_batch))
    }

    /// kau `get_subflow` alone: the argmin, with as many segments as it stays the shortest.
    fn greedy(&self, e: &Engine) -> Decision {
        // sorted by (time, index): the first two are the minimum and the runner-up
        let mut best: Option<(f64, usize)> = None;
        let mut second: Option<(f64, usize)> = None;
        for &k in &self.cands {
            let x = (sttf_transfer_time_ns(&e.sf(k), 0), e.sf(k).index());
            if best.is_none_or(|b| lt(x, b)) {
                second = best;
                best = Some(x);
            } else if second.is_none_or(|s| lt(x, s)) {
                second = Some(x);
            }
        }
        let (_, best_i) = best.expect("a candidate");
        let (second_t, second_i) = second.unwrap_or((f64::INFINITY, 1 << 30));
        let b = e.sf(best_i);
        let cap = self.max_batch.min(e.conn.n_segs() - e.conn.head);
        Decision::head(best_i, batch_len(cap, best_i, second_t, second_i, |extra| sttf_transfer_time_ns(&b, extra)))
    }

    /// Paper Algorithm 2 with the plan kept in the scheduler: of the subflows with free cwnd, the one
    /// whose first free slot takes the earliest unsent segment gets that segment now (all its free
    /// slots when that is the head); the rest of the plan is recomputed on the next call.
    fn plan(&self, e: &mut Engine) -> Option<Decision> {
        let mut best: Option<(i64, usize, i64)> = None; // (position, subflow, slots)
        for &a in &self.cands {
            let av = e.sf(a);
            let slots = av.cwnd() - av.in_flight() - av.queued();
            if slots <= 0 {
                continue;
            }
            let t_a = 0.5 * av.srtt_ns() as f64;
            let mut pos = 0;
            for &b in &self.cands {
                if b == a {
                    continue;
                }
                let bv = e.sf(b);
                // ties go to the subflow listed first
                pos += count_within(&bv, t_a, bv.index() < av.index(), 1 << 40);
            }
            if best.is_none_or(|(p, _, _)| pos < p) {
                best = Some((pos, a, slots));
            }
        }
        // None: every subflow's cwnd is full, the plan waits at the MPTCP level
        let (pos, k, slots) = best?;
        if pos == 0 {
            return Some(Decision::head(k, slots));
        }
        // the pos-th unsent segment (0-based) goes out of order on k now; n_segs if the plan puts all
        // unsent data on faster subflows (then wait for them)
        let seg = e.conn.nth_unsent(pos);
        if seg < e.conn.n_segs() && e.conn.window_allows(seg) {
            Some(Decision::seg(k, seg))
        } else {
            None
        }
    }

    /// mptcp_rcv_buf_optimization with optim = 1 and no penalization.
    fn optim(e: &Engine, subflows: &[usize]) -> Option<Decision> {
        let old = e.conn.oldest_unacked();
        if old < 0 {
            return None;
        }
        let k = lowest_srtt_with_room(e, subflows)?;
        let sf = e.sf(k);
        if sf.carried(old) {
            return None;
        }
        if rbuf_opti_worth_it(e, subflows, k, |x| e.sf(x).carried(old)) { Some(Decision::seg(k, old)) } else { None }
    }
}

/// Python's tuple order on (time, index) (times are never NaN).
fn lt(a: (f64, usize), b: (f64, usize)) -> bool {
    a.0 < b.0 || (a.0 == b.0 && a.1 < b.1)
}

impl Scheduler for Sttf {
    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        self.cands.clear();
        self.cands.extend(subflows.iter().copied().filter(|&k| usable(&e.sf(k))));
        if self.cands.is_empty() {
            return None;
        }
        let rh = e.conn.reinject_head;
        // A reinjection goes out now or not at all: only to a subflow with room in its cwnd (the
        // out-of-tree reinjection path calls the availability test with the cwnd check on).
        if rh >= 0 {
            self.cands.retain(|&k| is_available(&e.sf(k), true, true));
            if self.cands.is_empty() {
                return None; // reinjections first: wait for cwnd room rather than send new data
            }
            let mut best: Option<usize> = None;
            let mut best_t = f64::INFINITY;
            for &k in &self.cands {
                let sf = e.sf(k);
                if sf.carried(rh) {
                    continue;
                }
                let t = sttf_transfer_time_ns(&sf, 0);
                if t < best_t {
                    best = Some(k);
                    best_t = t;
                }
            }
            // path mask cleared: the overall shortest (Python's min: the first of equal ones)
            let k = best.unwrap_or_else(|| {
                let mut m = self.cands[0];
                let mut m_t = sttf_transfer_time_ns(&e.sf(m), 0);
                for &k in &self.cands[1..] {
                    let t = sttf_transfer_time_ns(&e.sf(k), 0);
                    if t < m_t {
                        m = k;
                        m_t = t;
                    }
                }
                m
            });
            return Some(Decision::seg(k, rh));
        }
        let head = e.conn.head;
        if head >= e.conn.n_segs() {
            return None;
        }
        if !e.conn.window_allows(head) {
            return if self.optim { Self::optim(e, subflows) } else { None };
        }
        if self.reschedule {
            return self.plan(e);
        }
        Some(self.greedy(e))
    }
}

#[cfg(test)]
mod tests {
    use super::{lt, next_cwnd};

    #[test]
    fn the_window_doubles_up_to_ssthresh_then_grows_by_one() {
        assert_eq!(next_cwnd(10, 1 << 30), 20);
        assert_eq!(next_cwnd(10, 15), 15); // the round that crosses ssthresh is capped there
        assert_eq!(next_cwnd(14, 15), 15);
        assert_eq!(next_cwnd(15, 15), 16); // congestion avoidance
        assert_eq!(next_cwnd(1, 2), 2);
        assert_eq!(next_cwnd(20, 2), 21);
    }

    #[test]
    fn ties_in_time_go_to_the_subflow_listed_first() {
        assert!(lt((1.0, 1), (2.0, 0)));
        assert!(lt((2.0, 0), (2.0, 1)));
        assert!(!lt((2.0, 1), (2.0, 0)));
        assert!(!lt((2.0, 0), (2.0, 0)));
    }
}
