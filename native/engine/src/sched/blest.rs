//! BLEST, BLocking ESTimation (Ferlin et al., IFIP Networking 2016; out-of-tree Linux
//! `net/mptcp/mptcp_blest.c`: `blest_get_available_subflow`, `blestsched_estimate_linger_time`,
//! `blestsched_estimate_bytes`, `blestsched_update_lambda`, `mptcp_blest_rcv_buf_optimization`),
//! ported from `workbench.schedulers._blest` (its docstring is the specification, docs/MODEL.md §3):
//! minRTT's choice, but when minRTT picks a subflow `S` other than the fastest `F`, estimate the bytes
//! `F` would send while the segment occupies the MPTCP window on `S`; if they (times λ) would not fit
//! in the window left, wait for `F`. λ (per-mille ints as the kernel) moves once per RTT: up after a
//! window / send-buffer stall (the opportunistic-retransmission path was entered), down otherwise.
//!
//! `variant="kernel"`: interpolated slow-path RTT from historic min/max srtt, average fast-path RTT,
//! slow-start branch, queued slow-path bytes counted. `variant="paper"`: Algorithm 1 (srtt ratio,
//! congestion avoidance only).

use std::cmp::Ordering;
use std::collections::HashMap;

use super::ecf::int_cmp_float;
use super::{get_available_subflow, param_bool, param_f64, param_str, Decision, MinRtt, ParamValue, Scheduler};
use crate::engine::Engine;

/// Linux TCP_INFINITE_SSTHRESH is 0x7fffffff; the engine starts ssthresh at 2^30.
const SSTHRESH_INFINITE: i64 = 1 << 29;

/// Python's `round(x)` of a float (ties to even) as an int.
fn py_round(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// The parameters and run state of BLEST apart from minRTT's, so that the wait test can borrow it
/// while minRTT's steps run.
struct BlestState {
    lambda_init: f64,
    lambda_min: f64,
    lambda_max: f64,
    lambda_bad: f64,
    lambda_good: f64,
    paper: bool,
    /// λ x 1000 (kernel lambda_1000), so that 1.2 - 0.01·k is exact.
    lambda_1000: i64,
    /// A window / send-buffer stall since the last λ update.
    retrans_flag: bool,
    last_lambda_update_ns: Option<i64>,
    /// Per subflow index: the historic (never decaying) min and max srtt, µs x8.
    min_srtt_us8: Vec<Option<i64>>,
    max_srtt_us8: Vec<Option<i64>>,
}

impl BlestState {
    fn reset(&mut self) {
        self.lambda_1000 = py_round(self.lambda_init * 1000.0);
        self.retrans_flag = false;
        self.last_lambda_update_ns = None;
        self.min_srtt_us8.clear();
        self.max_srtt_us8.clear();
    }

    fn min_us8(&self, i: usize, default: i64) -> i64 {
        self.min_srtt_us8.get(i).copied().flatten().unwrap_or(default)
    }

    fn max_us8(&self, i: usize, default: i64) -> i64 {
        self.max_srtt_us8.get(i).copied().flatten().unwrap_or(default)
    }

    /// blest_get_available_subflow's test: true = return NULL (wait for the fast subflow rather than
    /// put segment `seg` on `best`).
    fn should_wait(&mut self, e: &Engine, subflows: &[usize], best: usize, seg: i64) -> bool {
        let seg_len = e.conn.seg_len(seg);
        // minsk over the subflows that can send (no pf / cwnd / backup check); min/max srtt kept
        let mut minsk: Option<usize> = None;
        for &x in subflows {
            let v = e.sf(x);
            let s8 = v.srtt_us8();
            if !v.established() || s8 == 0 {
                continue;
            }
            let i = v.index();
            if self.min_srtt_us8.len() <= i {
                self.min_srtt_us8.resize(i + 1, None);
                self.max_srtt_us8.resize(i + 1, None);
            }
            if s8 < self.min_srtt_us8[i].unwrap_or(1 << 62) {
                self.min_srtt_us8[i] = Some(s8);
            }
            if s8 > self.max_srtt_us8[i].unwrap_or(0) {
                self.max_srtt_us8[i] = Some(s8);
            }
            if minsk.is_none_or(|m| s8 < e.sf(m).srtt_us8()) {
                minsk = Some(x);
            }
        }
        let Some(f) = minsk else { return false };
        if f == best {
            return false;
        }
        let now = e.now_ns();
        let (fv, sv) = (e.sf(f), e.sf(best));
        let wnd_bytes = e.conn.wnd_end - e.conn.snd_una;
        if !self.paper {
            self.update_lambda(now, self.min_us8(best, sv.srtt_us8()) >> 3);
            let linger_us8 = self.linger_time_us8(e, best);
            let fast_bytes = self.estimate_bytes(e, f, linger_us8);
            let slow_bytes = seg_len + sv.unacked_bytes();
            let avail = wnd_bytes - slow_bytes;
            // float > int compares exactly in Python
            return int_cmp_float(avail.max(0) as i128, fast_bytes) == Some(Ordering::Less);
        }
        self.update_lambda(now, fv.srtt_ns().div_euclid(1000));
        // int / int is a float division (both far below 2^53, so correctly rounded as Python's)
        let rtts = sv.srtt_ns() as f64 / fv.srtt_ns() as f64;
        let x_bytes = fv.mss() as f64 * (fv.cwnd() as f64 + (rtts - 1.0) / 2.0) * rtts;
        let room = wnd_bytes - sv.mss() * (sv.in_flight() + 1);
        int_cmp_float(room as i128, x_bytes * self.lambda_1000 as f64 / 1000.0) == Some(Ordering::Less)
    }

    /// blestsched_update_lambda: at most once per `period_us`.
    fn update_lambda(&mut self, now_ns: i64, period_us: i64) {
        let Some(last) = self.last_lambda_update_ns else {
            // kernel: last_lambda_update starts at connection init; the first call inside the first
            // period does nothing
            self.last_lambda_update_ns = Some(now_ns);
            return;
        };
        if (now_ns - last) < period_us * 1000 {
            return;
        }
        let mut lam = self.lambda_1000;
        if self.retrans_flag {
            lam += py_round(self.lambda_bad * 1000.0);
        } else {
            lam -= py_round(self.lambda_good * 1000.0);
        }
        // min(max(lam, lo), hi) as Python (not clamp: lo may exceed hi)
        self.lambda_1000 = lam.max(py_round(self.lambda_min * 1000.0)).min(py_round(self.lambda_max * 1000.0));
        self.retrans_flag = false;
        self.last_lambda_update_ns = Some(now_ns);
    }

    /// blestsched_estimate_linger_time (srtt_us units, x8): how long `s` holds a segment.
    fn linger_time_us8(&self, e: &Engine, s: usize) -> i64 {
        let v = e.sf(s);
        let mn = self.min_us8(s, v.srtt_us8());
        let mx = self.max_us8(s, v.srtt_us8());
        let inflight = v.in_flight() + 1;
        let cwnd = v.cwnd().max(1);
        let est = if inflight >= cwnd {
            mx
        } else {
            mn + ((mx - mn) as i128 * inflight as i128).div_euclid(cwnd as i128) as i64
        };
        v.srtt_us8().max(est)
    }

    /// blestsched_estimate_bytes: the bytes `f` sends in `time_us8`, times λ.
    fn estimate_bytes(&self, e: &Engine, f: usize, time_us8: i64) -> f64 {
        let v = e.sf(f);
        let avg = (self.min_us8(f, v.srtt_us8()) + self.max_us8(f, v.srtt_us8())).div_euclid(2);
        let mut rtts = time_us8.div_euclid(avg.max(1)) + 1;
        // Python's ints are unbounded: i128 (the congestion-avoidance product can pass 2^63)
        let pkts: i128 = if v.ssthresh() >= SSTHRESH_INFINITE {
            rtts = rtts.min(16);
            v.cwnd() as i128 * ((1i128 << rtts) - 1)
        } else {
            let c = v.cwnd().max(v.ssthresh() + 1) as i128;
            (c + (rtts as i128 - 1).div_euclid(2)) * rtts as i128
        };
        // int / int: exact as Python's below 2^53; above, both are far beyond any window, which is
        // all this is compared with
        (pkts * v.mss() as i128 * self.lambda_1000 as i128) as f64 / 1000.0
    }

    /// MinRTT._segments_for, but on the slow path each segment gets its own BLEST test (kernel: per
    /// skb).
    fn segments_for(e: &Engine, subflows: &[usize], k: usize) -> i64 {
        let n = MinRtt::segments_for(e, k);
        if n > 1 && Some(k) != fastest(e, subflows) { 1 } else { n }
    }
}

/// The established subflow with the lowest (nonzero) srtt, the first of equals.
fn fastest(e: &Engine, subflows: &[usize]) -> Option<usize> {
    let mut best = None;
    let mut best_rtt = 1i64 << 62;
    for &x in subflows {
        let v = e.sf(x);
        if v.established() && v.srtt_us8() != 0 && v.srtt_us8() < best_rtt {
            best = Some(x);
            best_rtt = v.srtt_us8();
        }
    }
    best
}

pub struct Blest {
    base: MinRtt,
    st: BlestState,
}

impl Blest {
    #[allow(clippy::too_many_arguments)]
    pub fn new(lambda_init: f64, lambda_min: f64, lambda_max: f64, lambda_bad: f64, lambda_good: f64, paper: bool,
               opportunistic: bool, penalize_all: bool) -> Self {
        let mut st = BlestState {
            lambda_init, lambda_min, lambda_max, lambda_bad, lambda_good, paper,
            lambda_1000: 0, retrans_flag: false, last_lambda_update_ns: None,
            min_srtt_us8: Vec::new(), max_srtt_us8: Vec::new(),
        };
        st.reset();
        Self { base: MinRtt::new(opportunistic, penalize_all), st }
    }

    /// From the registered parameters (`BLEST.params`).
    pub fn from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        let paper = match param_str(p, "variant", "kernel")?.as_str() {
            "kernel" => false,
            "paper" => true,
            v => return Err(format!("blest: variant={v:?} not one of ['kernel', 'paper']")),
        };
        Ok(Self::new(param_f64(p, "lambda_init", 1.2)?, param_f64(p, "lambda_min", 1.0)?,
                     param_f64(p, "lambda_max", 1.3)?, param_f64(p, "lambda_bad", 0.04)?,
                     param_f64(p, "lambda_good", 0.01)?, paper, param_bool(p, "opportunistic", true)?,
                     param_bool(p, "penalize_all", true)?))
    }
}

impl Scheduler for Blest {
    fn on_start(&mut self, _e: &mut Engine, _subflows: &[usize]) {
        self.st.reset();
        self.base = MinRtt::new(self.base.opportunistic, self.base.penalize_all);
    }

    /// MinRTT._select_with_wait step by step (`MinRtt::select_with_wait` has no hook for them) with
    /// BLEST's overrides: `_window_blocked` and `_rcv_buf_optimization` mark a stall for λ.
    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let Self { base, st } = self;
        let rh = e.conn.reinject_head;
        if rh >= 0 {
            return base.reinject(e, subflows, rh, &mut |e, s, k, seg| st.should_wait(e, s, k, seg));
        }
        let head = e.conn.head;
        if head >= e.conn.n_segs() {
            // _when_all_sent enters _rcv_buf_optimization (with a full send buffer: a stall) exactly
            // when it finds a subflow
            if base.opportunistic && e.conn.send_buffer_full && get_available_subflow(e, subflows, 0, false).is_some() {
                st.retrans_flag = true;
            }
            return base.when_all_sent(e, subflows);
        }
        let k = get_available_subflow(e, subflows, 0, true)?;
        if st.should_wait(e, subflows, k, head) {
            return None;
        }
        if !e.conn.window_allows(head) {
            // the window stall itself is the blocking signal (with opportunistic retransmission,
            // _rcv_buf_optimization entered with penal=1 says the same)
            st.retrans_flag = true;
            return base.window_blocked(e, subflows, k);
        }
        Some(Decision::head(k, BlestState::segments_for(e, subflows, k)))
    }
}

#[cfg(test)]
mod tests {
    use super::py_round;

    #[test]
    fn round_is_pythons_ties_to_even() {
        assert_eq!(py_round(12.5), 12);
        assert_eq!(py_round(13.5), 14);
        assert_eq!(py_round(-0.5), 0);
        assert_eq!(py_round(1199.9999999999998), 1200);
        assert_eq!(py_round(1.2 * 1000.0), 1200);
    }
}
