//! OTIAS, Out-of-order Transmission for In-order Arrival Scheduling (Yang & Amer; seed paper 001
//! §II-C eqs. 1-3, Fig. 3), as the Karlstad kernel module `vkirany/mptcp-kau
//! net/mptcp/mptcp_otias.c` (`mptcp_otias_calc_metric`, `get_otias_available_subflow`) does it; a
//! port of `workbench.schedulers._otias` (its docstring is the specification, docs/MODEL.md §9).
//!
//! Each meta segment goes to the subflow where it is expected to arrive first, counting the whole
//! RTTs it waits behind data already queued there; subflows without free cwnd are candidates too,
//! so data queues on subflows beyond cwnd. `variant = "kernel"` is the kau metric (ceil, one RTT more
//! than the paper once free cwnd is used; retransmissions need free cwnd), `"paper"` the seed's eq. 3
//! (floor clamped at 0). No opportunistic retransmission (`optim = 0`): a full MPTCP window waits.
//! Ties go to the subflow listed first (the kernel's strict `<`).

use std::collections::HashMap;

use super::{param_i64, param_str, Decision, ParamValue, SfView, Scheduler};
use crate::engine::Engine;
use crate::tcp::CA_LOSS;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtiasVariant {
    /// kau `mptcp_otias_calc_metric`.
    Kernel,
    /// Seed paper eq. 3.
    Paper,
}

/// `otias_metric_ns`: expected time (ns) until one more segment handed to `sf` now arrives, with
/// `extra_queued` more segments pretended queued on it. The float maths is Python's: the int count
/// plus 0.5, times the srtt converted to a float.
pub fn otias_metric_ns(sf: &SfView, extra_queued: i64, variant: OtiasVariant) -> f64 {
    let cwnd = sf.cwnd().max(1);
    let srtt_ns = sf.srtt_ns() as f64;
    let sendable = (cwnd - sf.in_flight()).max(0);
    let queued = sf.queued() + extra_queued;
    let rtts_wait = match variant {
        OtiasVariant::Kernel => {
            if queued < sendable {
                return 0.5 * srtt_ns;
            }
            -(-(queued - sendable + 1)).div_euclid(cwnd) // ceil, as Python's -(-x // y)
        }
        // floor (Python floors negatives), clamped at 0
        OtiasVariant::Paper => (queued - sendable).div_euclid(cwnd).max(0),
    };
    (rtts_wait as f64 + 0.5) * srtt_ns
}

/// The state checks of get_otias_available_subflow (no cwnd test: OTIAS queues beyond cwnd).
fn usable(sf: &SfView) -> bool {
    sf.established() && !sf.pf() && sf.ca_state() != CA_LOSS && sf.srtt_ns() > 0
}

/// Free cwnd not already taken by queued data.
fn has_space(sf: &SfView) -> bool {
    let free = sf.cwnd() - sf.in_flight();
    free > 0 && sf.queued() < free
}

/// How many consecutive segments stay on the earliest subflow (index `best_idx`): while its estimate
/// `t_of(n)` for the next one with `n` more queued does not exceed the runner-up's `second_t` (a tie
/// goes to the subflow listed first, as in the kernel loop), at most `cap`. OTIAS and STTF
/// (reschedule=False) size their batches this way; the per-segment choice is unchanged.
pub(super) fn batch_len(cap: i64, best_idx: usize, second_t: f64, second_idx: usize,
                        mut t_of: impl FnMut(i64) -> f64) -> i64 {
    let mut n = 1;
    while n < cap {
        let t = t_of(n);
        if t > second_t || (t == second_t && second_idx < best_idx) {
            break;
        }
        n += 1;
    }
    n
}

pub struct Otias {
    pub variant: OtiasVariant,
    /// Segments handed to one subflow per decision while it stays the earliest (a speed knob).
    pub max_batch: i64,
}

impl Otias {
    pub fn new(variant: OtiasVariant, max_batch: i64) -> Self {
        Self { variant, max_batch }
    }

    /// From `OTIAS.param_values()` (values outside the ParamSpecs refused, as `ParamSpec.check` does).
    pub fn from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        let variant = match param_str(p, "variant", "kernel")?.as_str() {
            "kernel" => OtiasVariant::Kernel,
            "paper" => OtiasVariant::Paper,
            v => return Err(format!("otias: variant {v:?} not one of kernel, paper")),
        };
        let max_batch = param_i64(p, "max_batch", 64)?;
        if !(1..=4096).contains(&max_batch) {
            return Err(format!("otias: max_batch={max_batch} outside [1, 4096]"));
        }
        Ok(Self::new(variant, max_batch))
    }

    /// get_otias_available_subflow for a segment in the reinjection queue: never on a carrier unless
    /// no other subflow can take it; the kernel variant requires free cwnd.
    fn retransmit(&self, e: &Engine, subflows: &[usize], seg: i64) -> Option<Decision> {
        let need_space = self.variant == OtiasVariant::Kernel;
        let mut best: Option<usize> = None;
        let mut best_t = f64::INFINITY;
        let mut backup: Option<usize> = None;
        let mut backup_t = f64::INFINITY;
        for &k in subflows {
            let sf = e.sf(k);
            if !usable(&sf) {
                continue;
            }
            let t = otias_metric_ns(&sf, 0, self.variant);
            let space = has_space(&sf);
            if sf.carried(seg) {
                if space && t < backup_t {
                    backup = Some(k);
                    backup_t = t;
                }
            } else if (space || !need_space) && t < best_t {
                best = Some(k);
                best_t = t;
            }
        }
        best.or(backup).map(|k| Decision::seg(k, seg))
    }
}

impl Scheduler for Otias {
    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let e: &Engine = e;
        let rh = e.conn.reinject_head;
        if rh >= 0 {
            return self.retransmit(e, subflows, rh);
        }
        let head = e.conn.head;
        let n_segs = e.conn.n_segs();
        if head >= n_segs || !e.conn.window_allows(head) {
            return None; // optim = 0: a full MPTCP window stops sending (no OR, no penalization)
        }
        let variant = self.variant;
        let mut best: Option<usize> = None;
        let mut best_t = f64::INFINITY;
        let mut second_t = f64::INFINITY;
        let mut second_idx: usize = 1 << 30;
        for &k in subflows {
            let sf = e.sf(k);
            if !usable(&sf) {
                continue;
            }
            let t = otias_metric_ns(&sf, 0, variant);
            if t < best_t {
                if let Some(b) = best {
                    second_t = best_t;
                    second_idx = e.sf(b).index();
                }
                best = Some(k);
                best_t = t;
            } else if t < second_t {
                second_t = t;
                second_idx = sf.index();
            }
        }
        let k = best?;
        let b = e.sf(k);
        let cap = self.max_batch.min(n_segs - head);
        let n = batch_len(cap, b.index(), second_t, second_idx, |extra| otias_metric_ns(&b, extra, variant));
        Some(Decision::head(k, n))
    }
}

#[cfg(test)]
mod tests {
    use super::batch_len;

    #[test]
    fn a_batch_stops_where_the_runner_up_is_earlier_or_ties_and_is_listed_first() {
        // the best subflow's estimate grows 10 per queued segment from 5; the runner-up's is 35
        let t = |n: i64| 5.0 + 10.0 * n as f64;
        assert_eq!(batch_len(64, 0, 35.0, 1, t), 4); // 15, 25, 35 (tie, best listed first), 45 > 35
        assert_eq!(batch_len(64, 1, 35.0, 0, t), 3); // the tie at 35 goes to the runner-up, listed first
        assert_eq!(batch_len(2, 0, 35.0, 1, t), 2); // capped
        assert_eq!(batch_len(1, 0, 35.0, 1, t), 1);
        assert_eq!(batch_len(64, 1, f64::INFINITY, 1 << 30, t), 64); // no runner-up: up to the cap
        assert_eq!(batch_len(64, 0, 10.0, 1, t), 1); // the first segment goes anyway
    }
}
