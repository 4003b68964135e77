//! ECF, Earliest Completion First (Lim et al., CoNEXT 2017; out-of-tree Linux
//! `net/mptcp/mptcp_ecf.c`, `ecf_get_available_subflow`), ported from `workbench.schedulers._ecf`
//! (its docstring is the specification, docs/MODEL.md §4): minRTT's subflow and segment choice, plus
//! one test whenever minRTT would use a subflow other than the fastest one: would waiting for the
//! fast subflow finish earlier than sending on the slower one? Then wait (with β hysteresis).
//!
//! `variant="kernel"`: δ = max(rttvar)/2 from Linux's rto_min-floored rttvar, backlog floored at one
//! cwnd, integer µs maths as the C code. `variant="paper"`: δ = the larger RTT mean deviation σ
//! recovered from the srtt updates (`RttDeviation`, fed on every ACK and at each test), backlog as is.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::{param_bool, param_f64, param_str, Decision, MinRtt, ParamValue, Scheduler, SfView};
use crate::engine::Engine;

/// Python's exact comparison of an int with a float (CPython never rounds the int): `n` vs `x`,
/// None when `x` is NaN.
pub(super) fn int_cmp_float(n: i128, x: f64) -> Option<Ordering> {
    if x.is_nan() {
        return None;
    }
    const TWO_127: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if x >= TWO_127 {
        return Some(Ordering::Less);
    }
    if x < -TWO_127 {
        return Some(Ordering::Greater);
    }
    let f = x.floor();
    // |f| < 2^127 and integral: the conversion is exact
    Some(match n.cmp(&(f as i128)) {
        Ordering::Equal if x > f => Ordering::Less,
        o => o,
    })
}

/// Per-subflow RTT mean deviation (ns) recovered from Linux srtt updates, without the rto_min floor
/// (`RttDeviation`): Linux `srtt8 += m - (srtt8 >> 3)` is invertible, so each change of srtt gives
/// back the sample; Jacobson's mean deviation (EWMA 1/4) of those samples stands in for σ.
#[derive(Default)]
pub struct RttDeviation {
    /// Per subflow index: the srtt (µs x8) last seen.
    last_us8: Vec<Option<i64>>,
    /// Per subflow index: the mean deviation, ns.
    mdev_ns: Vec<Option<f64>>,
}

impl RttDeviation {
    pub fn update(&mut self, sf: &SfView) {
        let s8 = sf.srtt_us8();
        if s8 == 0 {
            return;
        }
        let i = sf.index();
        if self.last_us8.len() <= i {
            self.last_us8.resize(i + 1, None);
            self.mdev_ns.resize(i + 1, None);
        }
        let old = self.last_us8[i].replace(s8);
        let Some(old) = old else {
            // first sample (handshake): Linux starts mdev at m/2 (mdev_us = 2m with x4 scale)
            self.mdev_ns[i] = Some((s8 >> 3) as f64 * 500.0);
            return;
        };
        if old == s8 {
            return; // a sample equal to srtt leaves srtt unchanged and is missed
        }
        // m = s8 - old + (old >> 3), and |m - srtt| = |s8 - old|
        let err_ns = (s8 - old).abs() as f64 * 1000.0;
        let d = self.mdev_ns[i].unwrap_or(err_ns);
        self.mdev_ns[i] = Some(d + (err_ns - d) / 4.0);
    }

    pub fn get(&self, i: usize) -> f64 {
        self.mdev_ns.get(i).copied().flatten().unwrap_or(0.0)
    }
}

/// ECF's own state (apart from minRTT's), so that the wait test can borrow it while minRTT runs.
struct EcfState {
    beta: f64,
    paper: bool,
    /// The hysteresis flag (0 or 1): the last test decided to wait.
    waiting: i64,
    rtt_dev: RttDeviation,
}

impl EcfState {
    /// ecf_get_available_subflow's test: true = return NULL (wait for the fast subflow rather than
    /// put a segment on `best`).
    fn should_wait(&mut self, e: &Engine, subflows: &[usize], best: usize) -> bool {
        // "fast" = min srtt over every subflow that can send (backups and pf included); first wins
        let mut minsk: Option<usize> = None;
        for &x in subflows {
            let v = e.sf(x);
            if v.established() && v.srtt_us8() != 0 && minsk.is_none_or(|m| v.srtt_us8() < e.sf(m).srtt_us8()) {
                minsk = Some(x);
            }
        }
        let Some(f) = minsk else { return false };
        if f == best {
            return false;
        }
        let (fv, sv) = (e.sf(f), e.sf(best));
        let mss = sv.mss() as i128;
        let k_bytes = e.conn.unsent_bytes() as i128;
        let cwnd_f = fv.cwnd() as i128;
        let cwnd_s = sv.cwnd() as i128;
        // (1 + waiting·β), as Python's int * float
        let hyst = 1.0 + self.waiting as f64 * self.beta;
        let (go_fast, slow_is_slower) = if !self.paper {
            // integer µs maths as the C code; Python's ints are unbounded, so i128 here
            let srtt_f = (fv.srtt_us8() >> 3) as i128;
            let srtt_s = (sv.srtt_us8() >> 3) as i128;
            let delta_us = ((fv.rttvar_ns() / 1000) >> 1).max((sv.rttvar_ns() / 1000) >> 1) as i128;
            let x_f = k_bytes.max(cwnd_f * mss);
            let x_s = k_bytes.max(cwnd_s * mss);
            let lhs = srtt_f * (x_f + cwnd_f * mss);
            let rhs = cwnd_f * mss * (srtt_s + delta_us);
            // int < float compares exactly in Python (the int is not rounded)
            let go_fast = int_cmp_float(lhs, hyst * rhs as f64) == Some(Ordering::Less);
            (go_fast, srtt_s * x_s >= cwnd_s * mss * (2 * srtt_f + delta_us))
        } else {
            let srtt_f = fv.srtt_ns() as f64 / 1000.0;
            let srtt_s = sv.srtt_ns() as f64 / 1000.0;
            self.rtt_dev.update(&fv);
            self.rtt_dev.update(&sv);
            let (df, ds) = (self.rtt_dev.get(f), self.rtt_dev.get(best));
            // Python max: the first of equal items (same value either way)
            let delta = (if ds > df { ds } else { df }) / 1000.0;
            let lhs = srtt_f * (k_bytes + cwnd_f * mss) as f64;
            let rhs = (cwnd_f * mss) as f64 * (srtt_s + delta);
            let go_fast = lhs < hyst * rhs;
            (go_fast, srtt_s * k_bytes as f64 >= (cwnd_s * mss) as f64 * (2.0 * srtt_f + delta))
        };
        if go_fast {
            if slow_is_slower {
                self.waiting = 1;
                return true;
            }
            return false;
        }
        self.waiting = 0;
        false
    }
}

pub struct Ecf {
    base: MinRtt,
    st: EcfState,
}

impl Ecf {
    pub fn new(beta: f64, paper: bool, opportunistic: bool, penalize_all: bool) -> Self {
        Self {
            base: MinRtt::new(opportunistic, penalize_all),
            st: EcfState { beta, paper, waiting: 0, rtt_dev: RttDeviation::default() },
        }
    }

    /// From the registered parameters (`ECF.params`): beta, variant, opportunistic, penalize_all.
    pub fn from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        let paper = match param_str(p, "variant", "kernel")?.as_str() {
            "kernel" => false,
            "paper" => true,
            v => return Err(format!("ecf: variant={v:?} not one of ['kernel', 'paper']")),
        };
        Ok(Self::new(param_f64(p, "beta", 0.25)?, paper, param_bool(p, "opportunistic", true)?,
                     param_bool(p, "penalize_all", true)?))
    }
}

impl Scheduler for Ecf {
    /// ECF.on_ack feeds the RTT deviation in the paper variant; the kernel variant's does nothing.
    fn wants_on_ack(&self) -> bool {
        self.st.paper
    }

    fn on_start(&mut self, _e: &mut Engine, _subflows: &[usize]) {
        self.st.waiting = 0;
        self.st.rtt_dev = RttDeviation::default();
        self.base = MinRtt::new(self.base.opportunistic, self.base.penalize_all);
    }

    fn on_ack(&mut self, e: &mut Engine, k: usize, _now: i64) {
        if self.st.paper {
            self.st.rtt_dev.update(&e.sf(k));
        }
    }

    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let Self { base, st } = self;
        base.select_with_wait(e, subflows, &mut |e, s, k, _seg| st.should_wait(e, s, k),
                              &mut |e, _s, k| MinRtt::segments_for(e, k))
    }
}

#[cfg(test)]
mod tests {
    use super::int_cmp_float;
    use std::cmp::Ordering::{Equal, Greater, Less};

    #[test]
    fn int_float_comparison_is_exact_as_pythons() {
        let two53 = 1i128 << 53;
        // Python: 2**53 + 1 > float(2**53), though float(2**53 + 1) == float(2**53)
        assert_eq!(int_cmp_float(two53 + 1, two53 as f64), Some(Greater));
        assert_eq!(int_cmp_float(two53, two53 as f64), Some(Equal));
        assert_eq!(int_cmp_float(3, 3.5), Some(Less));
        assert_eq!(int_cmp_float(4, 3.5), Some(Greater));
        assert_eq!(int_cmp_float(-3, -2.5), Some(Less));
        assert_eq!(int_cmp_float(-2, -2.5), Some(Greater));
        assert_eq!(int_cmp_float(i128::MAX, f64::INFINITY), Some(Less));
        assert_eq!(int_cmp_float(i128::MIN, f64::NEG_INFINITY), Some(Greater));
        assert_eq!(int_cmp_float(0, f64::NAN), None);
    }
}
