//! DRePaS, Dynamic Relative Path Scoring (Ferlin, Dreibholz, Alay, GLOBECOM 2014, Algorithm 2 and
//! §V), the path-manager layer of `workbench.schedulers._drepas` (its docstring is the
//! specification), wrapped around any compiled scheduler.
//!
//! Every `score_period_ms` each subflow's throughput `sinflight / srtt` (in-flight bytes averaged
//! over `inflight_window_s`, sampled every 10 ms) is scored 1 if it is at least `mincontribution` of
//! the best subflow's, else 0. An active subflow whose scores over the last `interval_s` are all 0
//! goes to probing: the inner scheduler no longer sees it (`Layer.usable`), and every `interval_s` it
//! carries `probe_segments` copies of sent, not yet DATA_ACKed segments it has not carried. A probing
//! subflow scored 1 is active again. Transitions are reported as `("path_state", k, label)`
//! observations. Sampling and scoring run lazily, on every `select` and `on_ack`, as in Python.
//!
//! Everything else is `Layer`'s delegation: the inner scheduler's flavour, `on_start` (after the
//! layer's own set-up), `on_loss`, `on_timer`, `on_applied` (with every decision the engine applied,
//! probes included, as Python's `Layer.on_applied` passes them).

use std::collections::VecDeque;

use super::{build_spec, param_f64, param_i64, Decision, Flavour, Scheduler, Spec};
use crate::engine::{Engine, LossKind};
use crate::record::ObsValue;

/// In-flight sampling period for sinflight (`_SAMPLE_NS`).
const SAMPLE_NS: i64 = 10_000_000;

const ACTIVE: &str = "active";
const PROBING: &str = "probing";

/// A bounded history, as Python's `deque(maxlen=n)`, with the running sum of what it holds (the
/// values are integers, so the sum is exact and equals Python's `sum(q)`).
struct Window {
    q: VecDeque<i64>,
    maxlen: usize,
    sum: i64,
}

impl Window {
    fn new(maxlen: usize) -> Self {
        Self { q: VecDeque::with_capacity(maxlen), maxlen, sum: 0 }
    }

    fn push(&mut self, x: i64) {
        if self.q.len() == self.maxlen {
            self.sum -= self.q.pop_front().unwrap_or(0);
        }
        self.q.push_back(x);
        self.sum += x;
    }

    fn clear(&mut self) {
        self.q.clear();
        self.sum = 0;
    }
}

/// One subflow's DRePaS state (Python's per-index dicts).
struct Path {
    probing: bool,
    /// In-flight bytes samples, newest last.
    inflight_bytes: Window,
    /// Scores (0 or 1) over one interval.
    scores: Window,
    next_probe_ns: i64,
    probe_left: i64,
}

pub struct DRePaS {
    inner: Box<dyn Scheduler>,
    pub mincontribution: f64,
    pub interval_s: f64,
    pub score_period_ms: f64,
    pub inflight_window_s: f64,
    pub probe_segments: i64,
    /// The subflows `on_start` listed, in its order (scoring and sampling walk them).
    subflows: Vec<usize>,
    /// Indexed by subflow index; an index `on_start` did not list stays active and is never scored.
    paths: Vec<Path>,
    next_sample_ns: i64,
    next_score_ns: i64,
    /// Probe copies handed out (Python's `n_probes`).
    pub n_probes: i64,
    /// Reused for the subset the inner scheduler sees (no allocation per decision).
    usable: Vec<usize>,
}

/// `get("drepas", inner=..., ...)` from its spec: the inner scheduler is `spec.inner[0]`.
pub fn build(spec: &Spec) -> Result<Box<dyn Scheduler>, String> {
    let p = &spec.params;
    let inner = match spec.inner.as_slice() {
        [inner] => build_spec(inner)?,
        _ => return Err(format!("layer {:?} needs exactly one inner scheduler", spec.name)),
    };
    Ok(Box::new(DRePaS::new(
        inner,
        param_f64(p, "mincontribution", 0.1)?,
        param_f64(p, "interval_s", 3.0)?,
        param_f64(p, "score_period_ms", 100.0)?,
        param_f64(p, "inflight_window_s", 0.5)?,
        param_i64(p, "probe_segments", 10)?,
    )))
}

/// Python's `max(1, round(x))` (round half to even) as a deque length.
fn maxlen(x: f64) -> usize {
    let r = x.round_ties_even();
    if r >= 1.0 { r as usize } else { 1 }
}

impl DRePaS {
    pub fn new(inner: Box<dyn Scheduler>, mincontribution: f64, interval_s: f64, score_period_ms: f64,
               inflight_window_s: f64, probe_segments: i64) -> Self {
        Self {
            inner,
            mincontribution,
            interval_s,
            score_period_ms,
            inflight_window_s,
            probe_segments,
            subflows: Vec::new(),
            paths: Vec::new(),
            next_sample_ns: 0,
            next_score_ns: 0,
            n_probes: 0,
            usable: Vec::new(),
        }
    }

    fn probing(&self, k: usize) -> bool {
        self.paths.get(k).is_some_and(|p| p.probing)
    }

    /// Catch up on the periodic sampling and scoring (`_tick`).
    fn tick(&mut self, e: &mut Engine, now_ns: i64) {
        if now_ns < self.next_sample_ns {
            return;
        }
        let period_ns = (self.score_period_ms * 1e6) as i64; // int(): toward zero
        while self.next_sample_ns <= now_ns {
            // one in-flight sample per 10 ms (the current value also stands for missed ticks)
            for &k in &self.subflows {
                let sf = e.sf(k);
                let b = if sf.established() { sf.in_flight() * sf.mss() } else { 0 };
                self.paths[k].inflight_bytes.push(b);
            }
            let t = self.next_sample_ns;
            self.next_sample_ns += SAMPLE_NS;
            if t >= self.next_score_ns {
                self.score(e, t);
                self.next_score_ns = t + period_ns;
            }
        }
    }

    /// Algorithm 2's scoring at `now_ns` (`_score`).
    fn score(&mut self, e: &mut Engine, now_ns: i64) {
        let mut thr = Vec::with_capacity(self.subflows.len());
        for &k in &self.subflows {
            let q = &self.paths[k].inflight_bytes;
            // sum / len as Python's int / int: both exact in f64, one correctly rounded division
            let sinflight = if q.q.is_empty() { 0.0 } else { q.sum as f64 / q.q.len() as f64 };
            let sf = e.sf(k);
            let srtt_ns = sf.srtt_ns();
            thr.push(if srtt_ns > 0 && sf.established() { sinflight / (srtt_ns as f64 / 1e9) } else { 0.0 });
        }
        // max(thr, default=0.0); no NaN can occur (srtt > 0)
        let best = thr.iter().copied().fold(0.0_f64, |m, x| if x > m { x } else { m });
        if best <= 0.0 {
            return; // idle: nothing to compare
        }
        let subflows = std::mem::take(&mut self.subflows);
        for (&k, &t) in subflows.iter().zip(&thr) {
            if !e.sf(k).established() {
                continue;
            }
            let sc = i64::from(t / best >= self.mincontribution);
            let p = &mut self.paths[k];
            p.scores.push(sc);
            if !p.probing {
                if p.scores.q.len() == p.scores.maxlen && p.scores.sum == 0 {
                    self.set(e, k, true, now_ns);
                }
            } else if sc == 1 {
                self.set(e, k, false, now_ns);
            }
        }
        self.subflows = subflows;
    }

    /// A path-state transition (`_set`), reported on the observer channel.
    fn set(&mut self, e: &mut Engine, k: usize, probing: bool, now_ns: i64) {
        let p = &mut self.paths[k];
        p.probing = probing;
        if probing {
            p.next_probe_ns = now_ns; // first probe right away, then every interval
            p.probe_left = 0;
        } else {
            p.scores.clear(); // a fresh interval before it can be suspended again
        }
        e.observe(now_ns, "path_state", k, ObsValue::Label(if probing { PROBING } else { ACTIVE }));
    }

    /// The next probe copy on a probing subflow, if one is due (`_probe`).
    fn probe(&mut self, e: &Engine, subflows: &[usize]) -> Option<Decision> {
        let now_ns = e.now_ns();
        let interval_ns = (self.interval_s * 1e9) as i64;
        for &i in subflows {
            if !self.probing(i) || !e.sf(i).established() {
                continue;
            }
            let p = &mut self.paths[i];
            if now_ns >= p.next_probe_ns {
                p.probe_left = self.probe_segments;
                p.next_probe_ns = now_ns + interval_ns;
            }
            if p.probe_left <= 0 {
                continue;
            }
            let mut seg = e.conn.oldest_unacked();
            if seg < 0 {
                continue;
            }
            // the oldest sent, not yet DATA_ACKed segments this subflow has not carried
            let end = e.conn.n_segs().min(seg + 4 * self.probe_segments + 64);
            while seg < end && (!e.conn.seg_sent(seg) || (e.conn.seg_path_mask(seg) >> i) & 1 != 0) {
                seg += 1;
            }
            if seg >= end {
                continue;
            }
            p.probe_left -= 1;
            self.n_probes += 1;
            return Some(Decision::seg(i, seg));
        }
        None
    }
}

impl Scheduler for DRePaS {
    fn flavour(&self) -> Flavour {
        self.inner.flavour()
    }

    /// Python's `Layer` overrides `on_ack`, so the engine always calls it (DRePaS samples there).
    fn wants_on_ack(&self) -> bool {
        true
    }

    /// `Layer.on_applied` only delegates: calling a no-op changes nothing, so ask the inner one.
    fn wants_on_applied(&self) -> bool {
        self.inner.wants_on_applied()
    }

    fn on_start(&mut self, e: &mut Engine, subflows: &[usize]) {
        let n_samples = maxlen(self.inflight_window_s * 1e9 / SAMPLE_NS as f64);
        let n_scores = maxlen(self.interval_s * 1e3 / self.score_period_ms);
        let n = subflows.iter().map(|&k| k + 1).max().unwrap_or(0);
        self.subflows = subflows.to_vec();
        self.paths = (0..n)
            .map(|_| Path {
                probing: false,
                inflight_bytes: Window::new(n_samples),
                scores: Window::new(n_scores),
                next_probe_ns: 0,
                probe_left: 0,
            })
            .collect();
        self.inner.on_start(e, subflows);
    }

    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let now_ns = e.now_ns();
        self.tick(e, now_ns);
        if let Some(d) = self.probe(e, subflows) {
            return Some(d);
        }
        // usable(): the active subflows, or all of them when none is active
        let mut usable = std::mem::take(&mut self.usable);
        usable.clear();
        usable.extend(subflows.iter().copied().filter(|&k| !self.probing(k)));
        let d = if usable.is_empty() { self.inner.select(e, subflows) } else { self.inner.select(e, &usable) };
        self.usable = usable;
        d
    }

    fn on_ack(&mut self, e: &mut Engine, k: usize, now: i64) {
        self.tick(e, now);
        self.inner.on_ack(e, k, now);
    }

    delegate_to_inner!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_lengths_round_half_to_even_at_least_one() {
        assert_eq!(maxlen(0.3), 1);
        assert_eq!(maxlen(0.5), 1);
        assert_eq!(maxlen(2.5), 2);
        assert_eq!(maxlen(3.5), 4);
        assert_eq!(maxlen(50.0), 50);
    }

    #[test]
    fn window_keeps_the_newest_and_their_sum() {
        let mut w = Window::new(3);
        for x in [5, 1, 0, 0] {
            w.push(x);
        }
        assert_eq!((w.q.len(), w.sum), (3, 1));
        w.push(0);
        assert_eq!(w.sum, 0);
        w.clear();
        assert_eq!((w.q.len(), w.sum), (0, 0));
    }
}
