//! DAPS, Delay-Aware Packet Scheduling (Kuhn et al., ICC 2014; seed paper 002 §III-A), as the
//! Karlstad kernel module `vkirany/mptcp-kau net/mptcp/mptcp_daps.c` (`mptcp_begin_schedule`,
//! `algo1`, `mptcp_next_segment`, `mptcp_update_scwnd`) does it; a port of
//! `workbench.schedulers._daps` (its docstring is the specification, docs/MODEL.md §8).
//!
//! A schedule is planned over one period `T_end = lcm(D_1..D_n)` of the subflows' one-way delays
//! `D_i = srtt_i / 2` (subflows sorted by srtt): at every multiple of `D_i` in virtual time subflow
//! `i` gets its next `C_i` (planned cwnd) in-order segments, handed over without a cwnd test (they
//! queue on the subflow). When the schedule yields nothing a new period is planned, and then the
//! default min-srtt subflow is used. `allow_optim`: with the MPTCP window full, the oldest unacked
//! segment is resent on the lowest-srtt subflow with cwnd room, without penalization.
//!
//! `variant = "kernel"` keeps the code's µs delays and its 32-bit `lcm` (a wrapped period <= 0 means
//! no schedule: the min-srtt fallback); `"paper"` uses ms delays and the exact lcm.

use std::collections::HashMap;

use super::{get_available_subflow, is_available, param_bool, param_i64, param_str, Decision, ParamValue, Scheduler};
use crate::engine::Engine;

/// A period too long to represent: the paper variant's exact lcm (Python's unbounded int) beyond
/// i64. The virtual clock only ever advances one turn per decision, so it never gets near this
/// value; saturating here is observably the same as Python's big integer. It leaves room for
/// `t_end + 1` and for `t + D_i` without overflow.
const PERIOD_SATURATED: i64 = i64::MAX / 4;

/// `workbench.schedulers.base.lowest_rtt_available`: the subflow with cwnd room (`is_available`,
/// strict queue test) and an RTT sample with the lowest srtt_us8; the first one listed wins a tie.
/// Backups are not excluded (unlike minRTT's own scan, `super::lowest_rtt_available`).
pub fn lowest_srtt_with_room(e: &Engine, subflows: &[usize]) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    for &k in subflows {
        let sf = e.sf(k);
        let r = sf.srtt_us8();
        if is_available(&sf, true, true) && r != 0 && best.is_none_or(|(_, b)| r < b) {
            best = Some((k, r));
        }
    }
    best.map(|(k, _)| k)
}

/// Python's `math.gcd` (non-negative; gcd(0, 0) = 0).
fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

/// The kau module's `lcm(a, b) = a*b/gcd(a, b)` in 32-bit C `int` (`_daps.lcm_c_int32`): the
/// product wraps like two's complement, the division truncates toward zero. The product modulo 2^32
/// is the same whether computed exactly or wrapping in 64 bits.
pub fn lcm_c_int32(a: i64, b: i64) -> i64 {
    let g = match gcd(a, b) {
        0 => 1,
        g => g,
    };
    let p = a.wrapping_mul(b) as i32 as i64;
    let q = p.abs() / g;
    if p >= 0 { q } else { -q }
}

/// Python's `math.lcm` of two positive periods, saturated at `PERIOD_SATURATED`.
fn lcm_exact(a: i64, b: i64) -> i64 {
    if a >= PERIOD_SATURATED || b >= PERIOD_SATURATED {
        return PERIOD_SATURATED;
    }
    let g = gcd(a, b);
    if g == 0 {
        return 0;
    }
    match (a / g).checked_mul(b) {
        Some(x) if x.abs() < PERIOD_SATURATED => x.abs(),
        _ => PERIOD_SATURATED,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DapsVariant {
    /// µs delays rounded to `round_delay`, 32-bit lcm (the code).
    Kernel,
    /// ms delays rounded to `round_delay_ms`, exact lcm (the paper).
    Paper,
}

pub struct Daps {
    pub variant: DapsVariant,
    pub round_delay_us: i64,
    pub round_delay_ms: i64,
    pub use_planned_cwnd: bool,
    pub allow_optim: bool,
    pub max_flows: usize,
    /// Subflow indices in the schedule, sorted by srtt.
    flows: Vec<usize>,
    /// D_i in the variant's unit (µs or ms).
    d: Vec<i64>,
    /// Planned segments per turn.
    c: Vec<i64>,
    /// segments_left_i (-1 = turn not started).
    left: Vec<i64>,
    /// Virtual clock, in the variant's unit.
    t: i64,
    /// Position in the schedule at time `t`.
    i: usize,
    /// The period (may be <= 0 after the kernel variant's overflow).
    t_end: i64,
    /// Per subflow index: the smoothed cwnd and when it was last updated (ns); None before the first.
    scwnd: Vec<Option<(f64, i64)>>,
    pub periods_planned: i64,
}

impl Daps {
    pub fn new(variant: DapsVariant, round_delay_us: i64, round_delay_ms: i64, use_planned_cwnd: bool,
               allow_optim: bool, max_flows: usize) -> Self {
        Self {
            variant,
            round_delay_us,
            round_delay_ms,
            use_planned_cwnd,
            allow_optim,
            max_flows,
            flows: Vec::new(),
            d: Vec::new(),
            c: Vec::new(),
            left: Vec::new(),
            t: 1,
            i: 0,
            t_end: 0,
            scwnd: Vec::new(),
            periods_planned: 0,
        }
    }

    /// From `DAPS.param_values()` (defaults as the ParamSpecs; values outside their range refused, as
    /// `ParamSpec.check` refuses them).
    pub fn from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        let variant = match param_str(p, "variant", "kernel")?.as_str() {
            "kernel" => DapsVariant::Kernel,
            "paper" => DapsVariant::Paper,
            v => return Err(format!("daps: variant {v:?} not one of kernel, paper")),
        };
        let in_range = |name: &str, default: i64, low: i64, high: i64| -> Result<i64, String> {
            let v = param_i64(p, name, default)?;
            if (low..=high).contains(&v) { Ok(v) } else { Err(format!("daps: {name}={v} outside [{low}, {high}]")) }
        };
        Ok(Self::new(variant, in_range("round_delay", 4, 1, 1000)?, in_range("round_delay_ms", 1, 1, 50)?,
                     param_bool(p, "use_planned_cwnd", true)?, param_bool(p, "allow_optim", true)?,
                     in_range("max_flows", 8, 1, 32)? as usize))
    }

    fn reset(&mut self) {
        *self = Self::new(self.variant, self.round_delay_us, self.round_delay_ms, self.use_planned_cwnd,
                          self.allow_optim, self.max_flows);
    }

    /// T_end of the current schedule (µs for the kernel variant, ms for the paper one).
    pub fn period(&self) -> i64 {
        self.t_end
    }

    /// mptcp_update_scwnd: smoothed cwnd, EWMA 7/8, at most once per srtt.
    fn update_scwnd(&mut self, e: &Engine, subflows: &[usize]) {
        let now_ns = e.now_ns();
        for &k in subflows {
            let sf = e.sf(k);
            let i = sf.index();
            if self.scwnd.len() <= i {
                self.scwnd.resize(i + 1, None);
            }
            match &mut self.scwnd[i] {
                slot @ None => *slot = Some((sf.cwnd() as f64, now_ns)),
                Some((s, t_ns)) => {
                    if now_ns - *t_ns >= sf.srtt_ns() {
                        // Python: (7 * float + int) / 8, the int converted first
                        *s = (7.0 * *s + sf.cwnd() as f64) / 8.0;
                        *t_ns = now_ns;
                    }
                }
            }
        }
    }

    /// D_i of subflow `k`, rounded to a multiple of the variant's unit (at least 1).
    fn delay(&self, e: &Engine, k: usize) -> i64 {
        let sf = e.sf(k);
        let (rd, owd) = match self.variant {
            // the code's srtt_us >> 3 is µs although its comments say ms
            DapsVariant::Kernel => (self.round_delay_us, (sf.srtt_us8() >> 3).div_euclid(2)),
            DapsVariant::Paper => (self.round_delay_ms, sf.srtt_ns().div_euclid(2_000_000)),
        };
        let d = (owd + rd.div_euclid(2)).div_euclid(rd) * rd;
        d.max(1)
    }

    /// mptcp_begin_schedule: sort usable subflows by srtt, fix D_i, C_i and T_end.
    fn begin_schedule(&mut self, e: &Engine, subflows: &[usize]) {
        let mut flows: Vec<usize> = subflows.iter().copied()
            .filter(|&k| e.sf(k).established() && e.sf(k).srtt_us8() > 0)
            .collect();
        // sorted by (srtt_us8, index): a total order, so stability does not matter
        flows.sort_by_key(|&k| (e.sf(k).srtt_us8(), e.sf(k).index()));
        flows.truncate(self.max_flows);
        self.d = flows.iter().map(|&k| self.delay(e, k)).collect();
        self.c = flows.iter().map(|&k| {
            let sf = e.sf(k);
            if self.use_planned_cwnd {
                // int(self._scwnd.get(index, cwnd)): a float truncated toward zero
                let planned = match self.scwnd.get(sf.index()).copied().flatten() {
                    Some((s, _)) => s as i64,
                    None => sf.cwnd(),
                };
                planned.max(1)
            } else {
                sf.cwnd().max(1)
            }
        }).collect();
        self.left = vec![-1; flows.len()];
        self.flows = flows;
        let mut t_end = self.d.first().copied().unwrap_or(0);
        for &d in self.d.iter().skip(1) {
            t_end = match self.variant {
                DapsVariant::Kernel => lcm_c_int32(t_end, d),
                DapsVariant::Paper => lcm_exact(t_end, d),
            };
        }
        self.t_end = t_end;
        self.t = 1;
        self.i = 0;
        self.periods_planned += 1;
    }

    /// Whether the subflow at schedule position `pos` can take its turn (in the call's list,
    /// established, not potentially failed).
    fn turn_usable(e: &Engine, subflows: &[usize], k: usize) -> bool {
        subflows.contains(&k) && e.sf(k).established() && !e.sf(k).pf()
    }

    /// algo1: position (in the schedule) of the subflow that gets the next in-order segment.
    fn algo1(&mut self, e: &Engine, subflows: &[usize]) -> Option<usize> {
        let n = self.d.len();
        if !self.flows.iter().any(|&f| Self::turn_usable(e, subflows, f)) {
            // every turn would be skipped: the kernel walks the whole period to its end (µs steps)
            self.t = self.t_end + 1;
            return None;
        }
        while self.t <= self.t_end {
            let t = self.t;
            while self.i < n {
                let i = self.i;
                if t % self.d[i] == 0 {
                    if !Self::turn_usable(e, subflows, self.flows[i]) {
                        self.left[i] = -1;
                        self.i += 1;
                        continue;
                    }
                    if self.left[i] == -1 {
                        self.left[i] = self.c[i];
                    }
                    if self.left[i] == 0 {
                        self.left[i] = -1;
                        self.i += 1;
                        continue;
                    }
                    return Some(i);
                }
                self.i += 1;
            }
            // the code steps t by one unit; jump to the next multiple of any D_i (same turns, same order)
            self.i = 0;
            self.t = self.d.iter().map(|&x| (t.div_euclid(x) + 1) * x).min().expect("a usable flow");
        }
        None
    }

    /// allow_optim: the oldest unacked segment on the lowest-srtt subflow with cwnd room, no penalty.
    fn optim(e: &Engine, subflows: &[usize]) -> Option<Decision> {
        let old = e.conn.oldest_unacked();
        if old < 0 {
            return None;
        }
        let best = lowest_srtt_with_room(e, subflows)?;
        if e.sf(best).carried(old) {
            return None;
        }
        Some(Decision::seg(best, old))
    }
}

impl Scheduler for Daps {
    fn on_start(&mut self, _e: &mut Engine, _subflows: &[usize]) {
        self.reset();
    }

    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let e: &Engine = e;
        self.update_scwnd(e, subflows);
        let rh = e.conn.reinject_head;
        let head = e.conn.head;
        let n_segs = e.conn.n_segs();
        if rh < 0 && (head >= n_segs || !e.conn.window_allows(head)) {
            if head < n_segs && self.allow_optim {
                return Self::optim(e, subflows);
            }
            return None;
        }
        let pos = match self.algo1(e, subflows) {
            Some(p) => Some(p),
            None => {
                self.begin_schedule(e, subflows);
                self.algo1(e, subflows)
            }
        };
        let Some(pos) = pos else {
            // get_daps_available_subflow: the default min-srtt choice
            let mask = if rh >= 0 { e.conn.seg_path_mask(rh) } else { 0 };
            let k = get_available_subflow(e, subflows, mask, true)?;
            if rh >= 0 {
                return Some(Decision::seg(k, rh));
            }
            let sf = e.sf(k);
            let n = sf.cwnd() - sf.in_flight() - sf.queued();
            return Some(Decision::head(k, if n > 1 { n } else { 1 }));
        };
        let k = self.flows[pos];
        if rh >= 0 {
            if e.sf(k).carried(rh) {
                let alt = get_available_subflow(e, subflows, e.conn.seg_path_mask(rh), true)?;
                return Some(Decision::seg(alt, rh));
            }
            self.left[pos] -= 1;
            return Some(Decision::seg(k, rh));
        }
        // hand the rest of this turn in one go (kernel: limit = segments_left * mss), within the window
        let want = self.left[pos];
        let mut n = 0;
        let mut i = head;
        while n < want && i < n_segs && e.conn.window_allows(i) {
            n += 1;
            i += 1;
            while i < n_segs && e.conn.seg_sent(i) {
                i += 1;
            }
        }
        if n == 0 {
            return None;
        }
        self.left[pos] -= n;
        Some(Decision::head(k, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcm_wraps_like_c_int() {
        // one-way delays 20 ms and 110 ms in µs: 20000 * 110000 = 2.2e9 wraps past 2^31
        let p = 20_000i64 * 110_000;
        let wrapped = p as i32 as i64;
        assert!(wrapped < 0);
        assert_eq!(lcm_c_int32(20_000, 110_000), -((-wrapped) / 10_000));
        assert_eq!(lcm_c_int32(4, 6), 12);
        assert_eq!(lcm_c_int32(0, 5), 0);
        assert_eq!(lcm_c_int32(0, 0), 0);
        assert_eq!(lcm_c_int32(-8, 12), -24);
    }

    #[test]
    fn exact_lcm_saturates() {
        assert_eq!(lcm_exact(4, 6), 12);
        assert_eq!(lcm_exact(1 << 40, (1 << 40) - 1), PERIOD_SATURATED);
        assert_eq!(lcm_exact(PERIOD_SATURATED, 3), PERIOD_SATURATED);
    }
}
