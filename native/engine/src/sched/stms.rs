//! STMS, the Slide Together Multipath Scheduler (Shi et al., "STMS: Improving MPTCP Throughput Under
//! Heterogeneous Networks", USENIX ATC 2018): STMS-C (`stms_c`) and STMS-A (`stms_a`), ported from
//! `workbench.schedulers._stms` (its docstring is the specification; no public code of the paper
//! exists).
//!
//! Algorithm 1: the fastest usable subflow (lowest srtt) takes the lowest unsent segments while it has
//! cwnd room; otherwise a slower one with room takes the `gap`-th unsent segment, leaving `gap`
//! segments for the faster ones, or skips the round when there is not that much unsent data (or the
//! MPTCP window does not reach that far). STMS-C computes the gap from eq. (2) every time; STMS-A starts
//! from that value and then moves it on burst DATA_ACKs (Algorithm 2), adjusting once per interval by
//! an EWMA. Every gap that is set is reported as an observation `("gap", subflow, gap_segments)` with
//! a float value, as Python reports it.

use std::collections::HashMap;

use super::{get_available_subflow, is_available, param_f64, param_i64, param_str, Decision, ParamValue, Scheduler,
            SfView};
use crate::engine::Engine;
use crate::record::ObsValue;

/// Eq. (2): Gap = B_f × (OWD_s − OWD_f), in segments of `mss_bytes` (payload); Python's operation
/// order (left to right, the ints converted to float where Python converts them).
fn true_gap_segments(bw_fast_bps: f64, owd_fast_ns: i64, owd_slow_ns: i64, mss_bytes: i64) -> f64 {
    bw_fast_bps / 8.0 * (owd_slow_ns - owd_fast_ns) as f64 / 1e9 / mss_bytes as f64
}

/// STMS-C's estimate of eq. (2): B_f = cwnd_f·MSS/srtt_f and OWD = srtt/2, in segments.
fn stms_gap_segments(cwnd_fast: i64, srtt_fast_ns: i64, srtt_slow_ns: i64) -> f64 {
    if srtt_fast_ns <= 0 || srtt_slow_ns <= srtt_fast_ns {
        return 0.0;
    }
    // Python: the int product first (exact), then the true division by a float
    (cwnd_fast * (srtt_slow_ns - srtt_fast_ns)) as f64 / (2.0 * srtt_fast_ns as f64)
}

/// Established, not potentially failed, and with an RTT sample.
fn usable(sf: &SfView) -> bool {
    sf.established() && !sf.pf() && sf.srtt_ns() > 0
}

/// STMS-A's adjustment state (Algorithm 2).
struct Adjust {
    adjust_interval_ms: f64,
    ewma_weight: f64,
    min_burst_segments: i64,
    /// Slow subflow -> gap (segments), in the order the gaps were first set (Python dict order: the
    /// observations of an adjustment come in that order).
    gap: Vec<(usize, f64)>,
    /// Σ delta_gap of the current interval per slow subflow (0.0 = no entry, as `dict.get(j, 0.0)`).
    acc: Vec<f64>,
    /// DATA_ACK seen at the previous ACK (bytes).
    una: i64,
    /// `seg_at_dsn(una)`, taken when `una` was current: the compiled connection forgets DATA_ACKed
    /// segments, so the old left edge cannot be looked up later. Segments are never re-cut and new
    /// ones are appended above, so the index found then is the one Python finds now.
    una_seg: i64,
    next_adjust_ns: i64,
}

pub struct Stms {
    /// "delivery_rate": the fast path's bandwidth for eq. (2) is its measured delivery rate.
    delivery_rate: bool,
    /// Some for STMS-A.
    adjust: Option<Adjust>,
    /// Segment -> slow subflow that took it out of order (§4 "mark the packets sent from the slow
    /// path"); read by STMS-A only, so only STMS-A keeps it.
    slow_sent: HashMap<i64, usize>,
    /// The keys of `slow_sent`, ascending (Python's `_slow_keys`, duplicates and all).
    slow_keys: Vec<i64>,
    last_target: i64,
    /// The subflows on_start was given (STMS-A's interval rule reads their srtts).
    subflows: Vec<usize>,
    /// Candidate buffer of `select` (reused: no allocation per call).
    cand: Vec<usize>,
}

impl Stms {
    /// STMS-C.
    pub fn calc(bandwidth: &str) -> Result<Self, String> {
        Ok(Self {
            delivery_rate: Self::bandwidth(bandwidth)?,
            adjust: None,
            slow_sent: HashMap::new(),
            slow_keys: Vec::new(),
            last_target: -1,
            subflows: Vec::new(),
            cand: Vec::new(),
        })
    }

    /// STMS-A.
    pub fn adjust(adjust_interval_ms: f64, ewma_weight: f64, min_burst_segments: i64, bandwidth: &str)
        -> Result<Self, String> {
        let mut s = Self::calc(bandwidth)?;
        s.adjust = Some(Adjust {
            adjust_interval_ms,
            ewma_weight,
            min_burst_segments,
            gap: Vec::new(),
            acc: Vec::new(),
            una: 0,
            una_seg: 0, // seg_at_dsn(0)
            next_adjust_ns: -1,
        });
        Ok(s)
    }

    /// STMS-C from `build_spec`'s parameters.
    pub fn calc_from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        Self::calc(&param_str(p, "bandwidth", "cwnd_srtt")?)
    }

    /// STMS-A from `build_spec`'s parameters.
    pub fn adjust_from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        Self::adjust(param_f64(p, "adjust_interval_ms", 0.0)?, param_f64(p, "ewma_weight", 0.0625)?,
                     param_i64(p, "min_burst_segments", 2)?, &param_str(p, "bandwidth", "cwnd_srtt")?)
    }

    fn bandwidth(name: &str) -> Result<bool, String> {
        match name {
            "cwnd_srtt" => Ok(false),
            "delivery_rate" => Ok(true),
            other => Err(format!("parameter bandwidth={other:?} not one of ['cwnd_srtt', 'delivery_rate']")),
        }
    }

    /// STMS-C: Σ over the subflows faster than `slow` of B_k·(srtt_slow − srtt_k)/2, in segments.
    fn calc_gap(&self, e: &Engine, slow: usize, subflows: &[usize]) -> f64 {
        let s = e.sf(slow);
        let mut g = 0.0;
        for &k in subflows {
            let x = e.sf(k);
            if x.index() == s.index() || !usable(&x) || x.backup() != s.backup() || x.srtt_ns() >= s.srtt_ns() {
                continue;
            }
            if self.delivery_rate && x.rate_bps() > 0.0 {
                // srtt_ns > 0 here: // 2 is a plain division
                g += true_gap_segments(x.rate_bps(), x.srtt_ns() / 2, s.srtt_ns() / 2, x.mss());
            } else {
                g += stms_gap_segments(x.cwnd(), x.srtt_ns(), s.srtt_ns());
            }
        }
        g
    }

    /// Segments to leave for the faster subflows before `slow`'s next segment (Python's `round`:
    /// half to even).
    fn gap(&mut self, e: &mut Engine, slow: usize, subflows: &[usize]) -> i64 {
        let now = e.now_ns();
        let g = match self.adjust.as_ref().map(|a| a.gap.iter().find(|(j, _)| *j == slow).map(|&(_, g)| g)) {
            Some(Some(g)) => g, // STMS-A: the adjusted gap
            known => {
                let g = self.calc_gap(e, slow, subflows);
                if known.is_some() {
                    // STMS-A's first gap for this subflow
                    self.adjust.as_mut().expect("STMS-A").gap.push((slow, g));
                }
                e.observe(now, "gap", slow, ObsValue::Float(g));
                g
            }
        };
        g.round_ties_even() as i64
    }

    /// Algorithm 1 over the candidates `cand` (usable, sorted by (srtt_us8, index)).
    fn select_from(&mut self, e: &mut Engine, subflows: &[usize], cand: &[usize]) -> Option<Decision> {
        let head = e.conn.head;
        let fast = cand[0];
        let f = e.sf(fast);
        if is_available(&f, true, true) {
            // Algorithm 1 line 3: the fast subflow always takes the lowest unsent segments
            if !e.conn.window_allows(head) {
                return None;
            }
            let n = f.cwnd() - f.in_flight() - f.queued();
            return Some(Decision::head(fast, if n > 1 { n } else { 1 }));
        }
        for &slow in &cand[1..] {
            if !is_available(&e.sf(slow), true, true) {
                continue;
            }
            // Algorithm 1 line 5: the gap-th unsent segment (the engine knows which are sent ahead)
            let gap = self.gap(e, slow, subflows);
            let target = e.conn.nth_unsent(gap);
            if target >= e.conn.n_segs() || !e.conn.window_allows(target) {
                continue; // not enough unsent data beyond the gap: skip this round (§4)
            }
            if self.adjust.is_some() {
                if !self.slow_sent.contains_key(&target) {
                    // bisect.insort (right of equal keys)
                    let at = self.slow_keys.partition_point(|&x| x <= target);
                    self.slow_keys.insert(at, target);
                }
                self.slow_sent.insert(target, slow);
            }
            self.last_target = target;
            return Some(Decision::seg(slow, target));
        }
        None
    }

    fn add(acc: &mut Vec<f64>, j: usize, delta: f64) {
        if acc.len() <= j {
            acc.resize(j + 1, 0.0);
        }
        acc[j] += delta;
    }

    /// STMS-A's interval: the parameter, or (srtt_s + srtt_f)/2 of the active usable subflows.
    fn interval_ns(&self, e: &Engine, adjust_interval_ms: f64) -> i64 {
        if adjust_interval_ms > 0.0 {
            return (adjust_interval_ms * 1e6) as i64; // int(): truncation
        }
        let (mut lo, mut hi, mut n) = (i64::MAX, i64::MIN, 0);
        for &k in &self.subflows {
            let s = e.sf(k);
            if usable(&s) && !s.backup() {
                lo = lo.min(s.srtt_ns());
                hi = hi.max(s.srtt_ns());
                n += 1;
            }
        }
        if n < 2 {
            return 100_000_000;
        }
        ((lo + hi) / 2).max(1_000_000) // srtts > 0: // is a plain division
    }

    /// End of an adjust_interval: the gap the interval's feedback asks for is gap + Σ delta_gap; the
    /// new gap is the EWMA of it, i.e. gap += ewma_weight · Σ delta_gap (Python's exact expression).
    fn adjust_gaps(&mut self, e: &mut Engine, now_ns: i64) {
        let a = self.adjust.as_mut().expect("STMS-A");
        let w = a.ewma_weight;
        for (j, g) in a.gap.iter_mut() {
            let acc = a.acc.get(*j).copied().unwrap_or(0.0);
            let x = (1.0 - w) * *g + w * (*g + acc);
            *g = if x > 0.0 { x } else { 0.0 }; // max(0.0, x): the first unless x is greater
            e.observe(now_ns, "gap", *j, ObsValue::Float(*g));
        }
        a.acc.iter_mut().for_each(|x| *x = 0.0);
        let ms = a.adjust_interval_ms;
        let t = now_ns + self.interval_ns(e, ms);
        self.adjust.as_mut().expect("STMS-A").next_adjust_ns = t;
    }
}

impl Scheduler for Stms {
    fn wants_on_ack(&self) -> bool {
        self.adjust.is_some()
    }

    /// Only STMS-A reads the marks `on_applied` maintains (STMS-C's Python hook changes nothing
    /// anybody sees).
    fn wants_on_applied(&self) -> bool {
        self.adjust.is_some()
    }

    fn on_start(&mut self, _e: &mut Engine, subflows: &[usize]) {
        self.subflows = subflows.to_vec();
    }

    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let rh = e.conn.reinject_head;
        if rh >= 0 {
            let mask = e.conn.seg_path_mask(rh);
            return get_available_subflow(e, subflows, mask, true).map(|k| Decision::seg(k, rh));
        }
        if e.conn.head >= e.conn.n_segs() {
            return None;
        }
        // active subflows; backups only when no active one is usable (§1.2's rule for dead paths)
        let mut cand = std::mem::take(&mut self.cand);
        cand.clear();
        cand.extend(subflows.iter().copied().filter(|&k| usable(&e.sf(k)) && !e.sf(k).backup()));
        if cand.is_empty() {
            cand.extend(subflows.iter().copied().filter(|&k| usable(&e.sf(k))));
        }
        let d = if cand.is_empty() {
            // no RTT sample yet anywhere: plain first-available
            subflows.iter().copied().find_map(|k| {
                let s = e.sf(k);
                (is_available(&s, true, true) && !s.backup())
                    .then(|| Decision::head(k, (s.cwnd() - s.in_flight() - s.queued()).max(1)))
            })
        } else {
            cand.sort_by_key(|&k| (e.sf(k).srtt_us8(), e.sf(k).index()));
            self.select_from(e, subflows, &cand)
        };
        self.cand = cand;
        d
    }

    /// Drop the mark of a slow decision the engine did not apply (a layer or the MPTCP window refused
    /// it). Python leaves the key in `_slow_keys`, and so does this. When a layer (RBP) refused the
    /// decision outright there was no `on_applied` for it, and this runs at the next applied decision.
    fn on_applied(&mut self, e: &mut Engine, _d: Decision, _n: i64) {
        let t = self.last_target;
        if t >= 0 {
            self.last_target = -1;
            // below una_idx: DATA_ACKed, hence sent (and forgotten by the compiled connection)
            if t >= e.conn.una_idx && !e.conn.seg_sent(t) {
                self.slow_sent.remove(&t);
            }
        }
    }

    fn on_ack(&mut self, e: &mut Engine, _k: usize, now_ns: i64) {
        let Some(a) = self.adjust.as_mut() else { return };
        let una = e.conn.snd_una;
        let old = a.una;
        if una > old {
            a.una = una;
            let first = a.una_seg; // conn.seg_at_dsn(old)
            let last = e.conn.seg_at_dsn(una);
            a.una_seg = last;
            let mss = e.conn.mss;
            let data_acked = -(-(una - old)).div_euclid(mss);
            if data_acked > a.min_burst_segments && !a.gap.is_empty() {
                if let Some(&blocker) = self.slow_sent.get(&first) {
                    // Algorithm 2 line 5: the left edge was slow data -> the gap is too small
                    Self::add(&mut a.acc, blocker, data_acked as f64);
                } else {
                    // the slow subflows that sent inside the acknowledged range (a set: the order
                    // of the additions does not matter, each goes to its own subflow's sum)
                    let mut hit: Vec<usize> = Vec::new();
                    let from = self.slow_keys.partition_point(|&x| x <= first);
                    for &s in self.slow_keys[from..].iter().take_while(|&&x| x < last) {
                        if let Some(&j) = self.slow_sent.get(&s) {
                            if !hit.contains(&j) {
                                hit.push(j);
                            }
                        }
                    }
                    if hit.is_empty() {
                        for &(j, _) in &a.gap {
                            Self::add(&mut a.acc, j, -(data_acked as f64));
                        }
                    } else {
                        for j in hit {
                            Self::add(&mut a.acc, j, -(data_acked as f64));
                        }
                    }
                }
            }
            // forget marks below the new left edge; a key below una_idx was DATA_ACKed and
            // forgotten by the connection, so its dsn is below una
            if let Some(&k0) = self.slow_keys.first() {
                if k0 < e.conn.una_idx || e.conn.seg_dsn(k0) < una {
                    let cut = self.slow_keys.partition_point(|&x| x < last);
                    for seg in self.slow_keys.drain(..cut) {
                        // a mark `on_applied` dropped (its key stayed) is missing: `pop(seg, None)`
                        self.slow_sent.remove(&seg);
                    }
                }
            }
        }
        let a = self.adjust.as_ref().expect("STMS-A");
        if a.next_adjust_ns < 0 {
            if !a.gap.is_empty() {
                // the first interval starts when a slow subflow first used the gap
                let t = now_ns + self.interval_ns(e, a.adjust_interval_ms);
                self.adjust.as_mut().expect("STMS-A").next_adjust_ns = t;
            }
        } else if now_ns >= a.next_adjust_ns {
            self.adjust_gaps(e, now_ns);
        }
    }
}
