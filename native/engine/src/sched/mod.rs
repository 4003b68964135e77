//! The scheduler seam of the compiled engine, as `workbench.schedulers.base`: a scheduler is called
//! by the connection's send loop (`Engine::push`) and returns one `Decision` at a time, or None to
//! wait. Built-in schedulers are Rust types implementing `Scheduler`, one private module each
//! (Optuna's plug-in layout); they read the engine through `Engine::sf` (a subflow as `SubflowView`
//! shows it) and `Engine::conn` (the `ConnView`), and act only through the calls a kernel scheduler
//! makes: `Engine::penalize`, `Conn::drop_reinject`, `Engine::wake_at`, `Engine::observe`.
//!
//! `subflows` is the list of subflow indices the scheduler may use now: all of them, or what a
//! path-manager layer lets through.

use crate::cc;
use crate::engine::{Engine, LossKind};
use crate::mptcp::Conn;
use crate::tcp::{Sender, CA_LOSS};

/// The callbacks a layer (DRePaS, RBP) passes to its `inner` scheduler unchanged, for its
/// `impl Scheduler` block (Rust has no delegation through a field). Needs `Engine`, `LossKind` and
/// `Decision` in scope.
macro_rules! delegate_to_inner {
    () => {
        fn on_loss(&mut self, e: &mut Engine, k: usize, kind: LossKind, now: i64) {
            self.inner.on_loss(e, k, kind, now);
        }

        fn on_timer(&mut self, e: &mut Engine, now: i64) {
            self.inner.on_timer(e, now);
        }

        fn on_applied(&mut self, e: &mut Engine, d: Decision, n: i64) {
            self.inner.on_applied(e, d, n);
        }
    };
}

mod blest;
mod daps;
mod drepas;
mod ecf;
mod minrtt;
mod otias;
mod rbp;
mod redundant;
mod roundrobin;
mod stms;
mod sttf;
mod upstream;

pub use blest::Blest;
pub use daps::Daps;
pub use ecf::Ecf;
pub use minrtt::MinRtt;
pub use otias::Otias;
pub use redundant::Redundant;
pub use roundrobin::RoundRobin;
pub use stms::Stms;
pub use sttf::Sttf;
pub use upstream::Upstream;

/// A scheduler parameter's value as `ParamSpec.check` left it.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "python", derive(pyo3::FromPyObject))]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// The built-in schedulers the compiled engine runs (`workbench.schedulers` names).
pub const NAMES: &[&str] =
    &["minrtt", "minrtt_noor", "ecf", "blest", "redundant", "roundrobin", "drepas", "rbp", "daps", "otias", "sttf",
      "stms_a", "stms_c", "upstream"];

/// A parameter of a scheduler: its value, or the default when not given.
pub fn param_bool(params: &std::collections::HashMap<String, ParamValue>, name: &str, default: bool)
    -> Result<bool, String> {
    match params.get(name) {
        None => Ok(default),
        Some(ParamValue::Bool(b)) => Ok(*b),
        Some(v) => Err(format!("parameter {name}={v:?} is not a bool")),
    }
}

/// A parameter that is a number (an int is taken as a float).
pub fn param_f64(params: &std::collections::HashMap<String, ParamValue>, name: &str, default: f64)
    -> Result<f64, String> {
    match params.get(name) {
        None => Ok(default),
        Some(ParamValue::Float(x)) => Ok(*x),
        Some(ParamValue::Int(x)) => Ok(*x as f64),
        Some(v) => Err(format!("parameter {name}={v:?} is not a number")),
    }
}

/// A parameter that is an integer.
pub fn param_i64(params: &std::collections::HashMap<String, ParamValue>, name: &str, default: i64)
    -> Result<i64, String> {
    match params.get(name) {
        None => Ok(default),
        Some(ParamValue::Int(x)) => Ok(*x),
        Some(v) => Err(format!("parameter {name}={v:?} is not an integer")),
    }
}

/// A parameter that is a string (a choice).
pub fn param_str(params: &std::collections::HashMap<String, ParamValue>, name: &str, default: &str)
    -> Result<String, String> {
    match params.get(name) {
        None => Ok(default.to_string()),
        Some(ParamValue::Str(x)) => Ok(x.clone()),
        Some(v) => Err(format!("parameter {name}={v:?} is not a string")),
    }
}

/// A scheduler by name with its parameters and, for a layer, the scheduler it wraps (Python passes
/// `(name, params, [inner])`, `[]` when it is not a layer).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "python", derive(pyo3::FromPyObject))]
pub struct Spec {
    #[cfg_attr(feature = "python", pyo3(item(0)))]
    pub name: String,
    #[cfg_attr(feature = "python", pyo3(item(1)))]
    pub params: std::collections::HashMap<String, ParamValue>,
    #[cfg_attr(feature = "python", pyo3(item(2)))]
    pub inner: Vec<Spec>,
}

/// Build a built-in scheduler (strings resolved here, at the edge).
pub fn build_spec(spec: &Spec) -> Result<Box<dyn Scheduler>, String> {
    let p = &spec.params;
    Ok(match spec.name.as_str() {
        "minrtt" => Box::new(MinRtt::new(param_bool(p, "opportunistic", true)?, param_bool(p, "penalize_all", true)?)),
        "minrtt_noor" => Box::new(MinRtt::new(param_bool(p, "opportunistic", false)?,
                                              param_bool(p, "penalize_all", true)?)),
        "ecf" => Box::new(Ecf::from_params(p)?),
        "blest" => Box::new(Blest::from_params(p)?),
        "redundant" => Box::new(Redundant::from_params(p)?),
        "roundrobin" => Box::new(RoundRobin::from_params(p)?),
        "drepas" => drepas::build(spec)?,
        "rbp" => rbp::build(spec)?,
        "daps" => Box::new(Daps::from_params(p)?),
        "otias" => Box::new(Otias::from_params(p)?),
        "sttf" => Box::new(Sttf::from_params(p)?),
        "stms_c" => Box::new(Stms::calc_from_params(p)?),
        "stms_a" => Box::new(Stms::adjust_from_params(p)?),
        "upstream" => Box::new(Upstream::from_params(p)?),
        other => return Err(format!("scheduler {other:?} has no compiled port")),
    })
}

/// Give subflow `sf` the meta segment `seg`, or with `seg = -1` up to `count` segments from the
/// unsent head in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub sf: usize,
    pub seg: i64,
    pub count: i64,
}

impl Decision {
    pub fn head(sf: usize, count: i64) -> Self {
        Self { sf, seg: -1, count }
    }

    pub fn seg(sf: usize, seg: i64) -> Self {
        Self { sf, seg, count: 1 }
    }
}

/// How the connection retransmits at its own level (the scheduler's kernel family).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flavour {
    /// Out-of-tree: a subflow RTO puts its queue up for reinjection.
    pub reinject_on_subflow_rto: bool,
    /// Out-of-tree meta RTO = factor x max subflow RTO.
    pub meta_rto_factor: f64,
    /// net/mptcp's retransmit timer and stale subflows instead of the out-of-tree meta RTO.
    pub upstream_retrans: bool,
}

impl Default for Flavour {
    fn default() -> Self {
        Self { reinject_on_subflow_rto: true, meta_rto_factor: 2.0, upstream_retrans: false }
    }
}

pub trait Scheduler: Send {
    fn flavour(&self) -> Flavour {
        Flavour::default()
    }
    /// Whether `on_ack` / `on_applied` do anything (the engine skips the calls otherwise).
    fn wants_on_ack(&self) -> bool {
        false
    }
    fn wants_on_applied(&self) -> bool {
        false
    }
    fn on_start(&mut self, _e: &mut Engine, _subflows: &[usize]) {}
    /// This scheduler as the built-in minRTT, which the engine calls without the trait object (in
    /// `push`); None for every other one.
    fn as_min_rtt(&mut self) -> Option<&mut MinRtt> {
        None
    }
    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision>;
    /// An ACK arrived on subflow `k` (after the subflow processed it).
    fn on_ack(&mut self, _e: &mut Engine, _k: usize, _now: i64) {}
    fn on_loss(&mut self, _e: &mut Engine, _k: usize, _kind: LossKind, _now: i64) {}
    fn on_timer(&mut self, _e: &mut Engine, _now: i64) {}
    /// The engine applied `d` to `n` segments (0: refused).
    fn on_applied(&mut self, _e: &mut Engine, _d: Decision, _n: i64) {}
}

/// One subflow as a scheduler sees it (`SubflowView`).
#[derive(Clone, Copy)]
pub struct SfView<'a> {
    pub s: &'a Sender,
    pub c: &'a cc::Subflow,
    conn: &'a Conn,
}

impl SfView<'_> {
    #[inline]
    pub fn index(&self) -> usize {
        self.s.index
    }
    #[inline]
    pub fn established(&self) -> bool {
        self.c.established
    }
    #[inline]
    pub fn pf(&self) -> bool {
        self.s.pf
    }
    #[inline]
    pub fn backup(&self) -> bool {
        self.s.backup
    }
    #[inline]
    pub fn stale(&self) -> bool {
        self.s.stale
    }
    #[inline]
    pub fn srtt_ns(&self) -> i64 {
        self.s.srtt_ns
    }
    #[inline]
    pub fn srtt_us8(&self) -> i64 {
        self.c.srtt_us8
    }
    pub fn rttvar_ns(&self) -> i64 {
        self.s.rttvar_ns()
    }
    pub fn min_rtt_ns(&self) -> i64 {
        let m = self.c.min_rtt_us;
        if m < (1 << 60) { m * 1000 } else { 0 }
    }
    pub fn rto_ns(&self) -> i64 {
        self.s.rto_ns()
    }
    #[inline]
    pub fn cwnd(&self) -> i64 {
        self.c.cwnd
    }
    #[inline]
    pub fn ssthresh(&self) -> i64 {
        self.c.ssthresh
    }
    pub fn in_slow_start(&self) -> bool {
        self.c.cwnd < self.c.ssthresh
    }
    #[inline]
    pub fn ca_state(&self) -> u8 {
        self.s.ca_state
    }
    #[inline]
    pub fn packets_out(&self) -> i64 {
        self.s.packets_out
    }
    #[inline]
    pub fn in_flight(&self) -> i64 {
        self.s.in_flight
    }
    #[inline]
    pub fn queued(&self) -> i64 {
        self.s.queued
    }
    #[inline]
    pub fn queued_bytes(&self) -> i64 {
        self.s.queued_bytes
    }
    /// write_seq - snd_una: bytes sent-unacked plus queued.
    pub fn unacked_bytes(&self) -> i64 {
        self.s.write_bytes - self.c.una_bytes
    }
    #[inline]
    pub fn mss(&self) -> i64 {
        self.s.mss
    }
    pub fn rate_bps(&self) -> f64 {
        self.s.rate_bps
    }
    /// tcp_update_pacing_rate: mss * max(cwnd, packets_out) / srtt (whole µs), x2 in slow start
    /// (cwnd < ssthresh/2), x1.2 otherwise; 0 before the first RTT sample.
    pub fn pacing_rate_bps(&self) -> f64 {
        let c = self.c;
        if c.srtt_us8 == 0 {
            return 0.0;
        }
        let w = c.cwnd.max(self.s.packets_out);
        let ratio = if c.cwnd < c.ssthresh.div_euclid(2) { 2.0 } else { 1.2 };
        (self.s.mss * 8 * w) as f64 / ((c.srtt_us8 >> 3) as f64 / 1e6) * ratio
    }
    pub fn sndbuf_segments(&self) -> i64 {
        3 * self.s.cwnd_max_seen.max(10)
    }
    pub fn last_ack_ns(&self) -> i64 {
        self.s.last_ack_ns
    }
    /// Did this subflow already carry meta segment `seg`?
    pub fn carried(&self, seg: i64) -> bool {
        self.conn.seg_path_mask(seg) >> self.s.index & 1 != 0
    }
}

impl Engine {
    /// Subflow `k` as a scheduler sees it.
    #[inline]
    pub fn sf(&self, k: usize) -> SfView<'_> {
        SfView { s: &self.sfs[k], c: &self.ccs[k], conn: &self.conn }
    }

    /// The current time, ns.
    #[inline]
    pub fn now_ns(&self) -> i64 {
        self.ev.now
    }
}

/// mptcp_is_temp_unavailable without the window tests (the engine applies those).
#[inline]
/// mptcp_rcv_buf_optimization's test of whether reinjecting the oldest unacknowledged segment on
/// subflow `k` is worth it, over the other subflows that carried it (`carried(x)`): the first of them
/// with cwnd <= 4 says yes, the first whose RTT is at most 4x `k`'s says no; yes if any was seen.
pub fn rbuf_opti_worth_it(e: &Engine, subflows: &[usize], k: usize, carried: impl Fn(usize) -> bool) -> bool {
    let srtt_us8 = e.sf(k).srtt_us8();
    let mut doit = false;
    for &x in subflows {
        if x == k || !carried(x) {
            continue;
        }
        let xv = e.sf(x);
        if xv.cwnd() <= 4 {
            return true;
        }
        if 4 * srtt_us8 >= xv.srtt_us8() {
            return false;
        }
        doit = true;
    }
    doit
}

pub fn temp_unavailable(sf: &SfView, strict_queue: bool) -> bool {
    if sf.ca_state() == CA_LOSS {
        return true;
    }
    let (inflight, cwnd) = (sf.in_flight(), sf.cwnd());
    if inflight >= cwnd {
        return true;
    }
    let q = sf.queued_bytes();
    let space = (cwnd - inflight) * sf.mss();
    if strict_queue { q >= space } else { q > space }
}

/// Out-of-tree `mptcp_is_available` (see `workbench.schedulers.base.is_available`).
pub fn is_available(sf: &SfView, cwnd_test: bool, strict_queue: bool) -> bool {
    if !sf.established() || sf.pf() || sf.ca_state() == CA_LOSS {
        return false;
    }
    if !cwnd_test {
        return true;
    }
    let (inflight, cwnd) = (sf.in_flight(), sf.cwnd());
    if inflight >= cwnd {
        return false;
    }
    let space = (cwnd - inflight) * sf.mss();
    let q = sf.queued_bytes();
    if strict_queue { q < space } else { q <= space }
}

const INF: i64 = 1 << 62;

/// get_subflow_from_selectors for one class (active or backup): (the subflow, force).
fn select_class(e: &Engine, subflows: &[usize], mask: u64, backup: bool) -> (Option<usize>, bool) {
    let mut best = None;
    let mut best_rtt = INF;
    let mut found_unused = false;
    let mut found_unused_una = false;
    for &k in subflows {
        let sf = e.sf(k);
        if sf.backup() != backup {
            continue;
        }
        let unused = (mask >> sf.index()) & 1 == 0;
        if !unused && found_unused {
            continue;
        }
        if !sf.established() || sf.pf() {
            continue;
        }
        if temp_unavailable(&sf, true) {
            if unused {
                found_unused_una = true;
            }
            continue;
        }
        if unused && !found_unused {
            best = None;
            best_rtt = INF;
            found_unused = true;
        }
        let r = sf.srtt_us8();
        if r < best_rtt {
            best = Some(k);
            best_rtt = r;
        }
    }
    let force = if best.is_some() { found_unused } else { found_unused_una };
    (best, force)
}

/// §1.2 get_available_subflow: active subflows first; backups only if no active one is merely
/// temporarily busy; a segment every subflow already carried gets its path mask cleared and one
/// more try.
pub fn get_available_subflow(e: &Engine, subflows: &[usize], mut mask: u64, has_skb: bool) -> Option<usize> {
    let mut looped = false;
    loop {
        let (sf, force) = select_class(e, subflows, mask, false);
        if force {
            return sf;
        }
        let (sf, force) = select_class(e, subflows, mask, true);
        if !force && has_skb && mask != 0 {
            mask = 0;
            if !looped {
                looped = true;
                continue;
            }
        }
        return sf;
    }
}

/// What minRTT's scan makes of one subflow.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Backup,
    /// Not established, or potentially failed: not considered.
    Out,
    /// Active but temporarily busy (Loss state, cwnd full, or its queue fills the cwnd room).
    Busy,
    Available,
}

/// minRTT's test of one subflow (`lowest_rtt_available` and its shortcut in `MinRtt::select`).
#[inline]
pub fn standing(x: &SfView) -> Standing {
    if x.backup() {
        return Standing::Backup;
    }
    if !x.established() || x.pf() {
        return Standing::Out;
    }
    let (inflight, cwnd) = (x.in_flight(), x.cwnd());
    if x.ca_state() == CA_LOSS || inflight >= cwnd || x.queued_bytes() >= (cwnd - inflight) * x.mss() {
        return Standing::Busy;
    }
    Standing::Available
}

/// minRTT's scan for new data: the lowest-srtt available active subflow (the first of equals), the
/// best of the other available ones (the runner-up), whether an active one was temporarily busy, how
/// many backups there are.
pub fn lowest_rtt_available(e: &Engine, subflows: &[usize]) -> (Option<usize>, Option<usize>, bool, i64) {
    let (mut best, mut runner_up) = (None, None);
    let (mut best_rtt, mut runner_up_rtt) = (INF, INF);
    let mut busy = false;
    let mut n_backup = 0;
    for &k in subflows {
        let x = e.sf(k);
        match standing(&x) {
            Standing::Backup => n_backup += 1,
            Standing::Out => {}
            Standing::Busy => busy = true,
            Standing::Available => {
                let r = x.srtt_us8();
                if r < best_rtt {
                    (runner_up, runner_up_rtt) = (best, best_rtt);
                    (best, best_rtt) = (Some(k), r);
                } else if r < runner_up_rtt {
                    (runner_up, runner_up_rtt) = (Some(k), r);
                }
            }
        }
    }
    (best, runner_up, busy, n_backup)
}
