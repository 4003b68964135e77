//! Congestion control of replayed subflows (docs/MODEL.md A6): Reno, CUBIC (with HyStart), coupled
//! LIA (RFC 6356) and OLIA, with their group sums (`lia_terms`, `olia_terms`). This is the only
//! implementation; Python drives it call by call through `workbench_core.CcGroup` (`py_cc`).
//!
//! The subflow calls `cong_avoid` for ACKs that arrive in the Open state while it is cwnd-limited
//! (the engine checks that, not the CC), `ssthresh` on entering Recovery or Loss, `on_rtt` with each
//! RTT sample taken in slow start and `on_state` on entering Recovery (3) or Loss (4). cwnd is an
//! integer number of segments grown through a fractional counter as Linux's `tcp_slow_start` /
//! `tcp_cong_avoid_ai` do.
//!
//! The floating-point steps and their order are part of the model (first written in Python, with
//! Python's number semantics, and pinned bit for bit by the golden runs): an int operand is converted
//! to a double before a mixed operation (exact below 2^53, which cwnd, counters and byte offsets stay
//! far below), `float ** y` is C `pow` (`py_pow`; not `x * x`: glibc's `pow(x, 2)` differs from the
//! product in about one case in a thousand; `py_square` returns `pow`'s square without the call when
//! the exact square shows which double `pow` rounds to), `//` on floats is CPython's fmod-based floor
//! division (`py_floor_div`), `max` keeps its first operand unless the second is larger (`py_max`) and
//! `int()` truncates. The model's integers are unbounded; here they are `i64`, which holds any value
//! a replay reaches (times in ns up to 2^62, sequence and byte offsets, windows); `min_rtt_us` may be
//! the engine's "none yet" value 2^62.

use std::hint::black_box;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI64, AtomicU64};

/// CUBIC's multiplicative decrease, beta = 717/1024 (exact in binary).
const BETA: f64 = 717.0 / 1024.0;
/// CUBIC's scaling constant C = 410/1024 (exact in binary).
const C: f64 = 410.0 / 1024.0;
/// Linux `beta_scale`: Reno's ACKs per segment of growth, times 8, for TCP friendliness (= 15).
const BETA_SCALE: i64 = 8 * (1024 + 717) / 3 / (1024 - 717);
/// `HZ / 32`: CUBIC recomputes its `cnt` at most this often while cwnd stays the same.
const CNT_REUSE_NS: i64 = 31_250_000;
/// An RTT at or above this is no RTT ("none yet"; also HyStart's round minimum before a sample).
const NO_RTT_US: i64 = 1 << 60;
const HYSTART_LOW_WINDOW: i64 = 16;
const HYSTART_MIN_SAMPLES: i64 = 8;
const HYSTART_DELAY_MIN_US: i64 = 4000;
const HYSTART_DELAY_MAX_US: i64 = 16000;
/// ACKs closer than this continue an ACK train.
const HYSTART_ACK_DELTA_US: i64 = 2000;
/// `hystart_ack_delay()`: min(1 ms, 4 x GSO size / pacing rate), 1 ms here.
const HYSTART_ACK_DELAY_US: i64 = 1000;
/// Linux TCP_CA_Loss: the state whose entry resets CUBIC.
const CA_LOSS: i64 = 4;

/// The fields of a subflow a congestion control reads or writes (the rest of the sender is
/// `tcp::Sender`).
///
/// Laid out (`repr(C)`, cache-line aligned) so that what the scans over all subflows read on every
/// decision or ACK (a scheduler's: cwnd, srtt, established; LIA's: also the RTT memo) is one cache
/// line per subflow, and OLIA's loss record the start of the next.
#[derive(Clone, Debug, PartialEq)]
#[repr(C, align(64))]
pub struct Subflow {
    /// Congestion window, segments.
    pub cwnd: i64,
    /// Smoothed RTT, µs x 8 (0 before the first sample).
    pub srtt_us8: i64,
    /// `srtt_s(sf) ** 2` for the `srtt_us8` it was computed from (`srtt_s_sq`).
    pub srtt_sq_memo: SrttSqMemo,
    /// Whether the subflow counts in the coupled sums.
    pub established: bool,
    /// Slow-start threshold, segments.
    pub ssthresh: i64,
    /// First unacknowledged byte (relative sequence number).
    pub una_bytes: i64,
    /// Minimum RTT seen, µs (2^62 before the first sample).
    pub min_rtt_us: i64,
    /// The CC's own per-subflow state.
    pub cc_state: CcState,
    /// Fractional growth counter (`snd_cwnd_cnt`; OLIA: a fraction of a segment, may be negative).
    pub cwnd_cnt: f64,
    /// First unacknowledged segment (segment number).
    pub una: i64,
    /// Next segment to send (segment number).
    pub nxt: i64,
    /// How often HyStart ended slow start.
    pub hystart_exits: i64,
}

/// A memo of one subflow's `srtt_s ** 2` (seconds²), keyed by the `srtt_us8` it came from. The coupled
/// controls (LIA, OLIA) need every subflow's squared RTT on every ACK, and `py_pow` (libm `pow`,
/// which Python's `**` calls) is most of their cost: only the ACKed subflow's RTT moves, so all the
/// others come from the memo. The value is the same `py_pow` result, so the runs are unchanged
/// bit for bit. Not state: it compares equal whatever it holds. Relaxed atomics rather than a `Cell`
/// only so that the group stays `Sync` for its Python wrapper (`py_cc`); one thread uses it, and on
/// x86-64 a relaxed load or store is a plain move.
#[derive(Debug)]
pub struct SrttSqMemo {
    key_us8: AtomicI64,
    sq_bits: AtomicU64,
}

impl SrttSqMemo {
    fn get(&self) -> (i64, f64) {
        (self.key_us8.load(Relaxed), f64::from_bits(self.sq_bits.load(Relaxed)))
    }

    fn set(&self, key_us8: i64, sq: f64) {
        self.key_us8.store(key_us8, Relaxed);
        self.sq_bits.store(sq.to_bits(), Relaxed);
    }
}

impl Default for SrttSqMemo {
    fn default() -> Self {
        Self { key_us8: AtomicI64::new(-1), sq_bits: AtomicU64::new(0) } // srtt_us8 is never negative
    }
}

impl Clone for SrttSqMemo {
    fn clone(&self) -> Self {
        let (key_us8, sq) = self.get();
        Self { key_us8: AtomicI64::new(key_us8), sq_bits: AtomicU64::new(sq.to_bits()) }
    }
}

impl PartialEq for SrttSqMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Subflow {
    /// A subflow as a new sender starts it, for the CC (before its handshake ends).
    pub fn new(init_cwnd: i64) -> Self {
        Self {
            cwnd: init_cwnd,
            ssthresh: 1 << 30,
            cwnd_cnt: 0.0,
            cc_state: CcState::Unset,
            min_rtt_us: 1 << 62,
            srtt_us8: 0,
            una: 0,
            nxt: 0,
            una_bytes: 1,
            established: false,
            hystart_exits: 0,
            srtt_sq_memo: SrttSqMemo::default(),
        }
    }
}

/// `sf.cc_state`: None until the CC first needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum CcState {
    #[default]
    Unset,
    /// Boxed: `with_cubic` moves the state out and back on every ACK, a pointer rather than its
    /// 128 bytes, and a subflow takes two cache lines rather than four (minRTT scans its fields).
    Cubic(Box<CubicState>),
    /// OLIA's loss record: snd_una (bytes) at the last three losses, oldest first; the last one is
    /// kept current on every ACK.
    OliaLosses([i64; 3]),
}

/// CUBIC's per-subflow state with HyStart's (Linux `struct bictcp`).
#[derive(Clone, Debug, PartialEq)]
pub struct CubicState {
    pub ack_cnt: i64,
    pub cnt: f64,
    pub epoch_start: i64,
    pub k: f64,
    pub last_cwnd: i64,
    pub last_max_cwnd: f64,
    pub last_time: i64,
    pub origin: f64,
    pub tcp_cwnd: i64,
    pub delay_min_us: i64,
    pub round_start_us: i64,
    pub last_ack_us: i64,
    pub round_end_idx: i64,
    pub curr_rtt_us: i64,
    pub sample_cnt: i64,
    pub found: bool,
}

impl Default for CubicState {
    fn default() -> Self {
        Self {
            ack_cnt: 0,
            cnt: 20.0,
            epoch_start: 0,
            k: 0.0,
            last_cwnd: 0,
            last_max_cwnd: 0.0,
            last_time: 0,
            origin: 0.0,
            tcp_cwnd: 0,
            delay_min_us: 0,
            round_start_us: 0,
            last_ack_us: 0,
            round_end_idx: -1,
            curr_rtt_us: NO_RTT_US,
            sample_cnt: 0,
            found: false,
        }
    }
}

/// A congestion control, chosen by name (`from_name`). One serves every subflow of a
/// connection; the coupled ones read the whole group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionControl {
    Reno,
    Cubic { hystart: bool },
    Lia,
    Olia,
}

impl CongestionControl {
    /// By name: `reno`, `cubic`, `lia` (or `coupled`), `olia`, any case.
    pub fn from_name(name: &str, hystart: bool) -> Result<Self, String> {
        match name.to_lowercase().as_str() {
            "reno" => Ok(Self::Reno),
            "cubic" => Ok(Self::Cubic { hystart }),
            "lia" | "coupled" => Ok(Self::Lia),
            "olia" => Ok(Self::Olia),
            _ => Err(format!("unknown congestion control '{name}' (reno, cubic, lia, olia)")),
        }
    }

    /// `acked` segments newly acknowledged on `group[idx]` at `now_ns`, in the Open state.
    pub fn cong_avoid(&self, group: &mut [Subflow], idx: usize, acked: i64, now_ns: i64) {
        match self {
            Self::Reno => reno_cong_avoid(&mut group[idx], acked),
            Self::Cubic { .. } => cubic_cong_avoid(&mut group[idx], acked, now_ns),
            Self::Lia => lia_cong_avoid(group, idx, acked),
            Self::Olia => olia_cong_avoid(group, idx, acked),
        }
    }

    /// The slow-start threshold for `group[idx]` entering Recovery or Loss.
    pub fn ssthresh(&self, group: &mut [Subflow], idx: usize) -> i64 {
        let sf = &mut group[idx];
        match self {
            Self::Cubic { .. } => with_cubic(sf, cubic_ssthresh),
            Self::Reno | Self::Lia | Self::Olia => (sf.cwnd >> 1).max(2),
        }
    }

    /// An RTT sample of `group[idx]` (only HyStart uses it).
    pub fn on_rtt(&self, group: &mut [Subflow], idx: usize, rtt_us: i64, now_ns: i64) {
        if let Self::Cubic { hystart: true } = self {
            with_cubic(&mut group[idx], |sf, st| hystart_update(sf, st, rtt_us, now_ns));
        }
    }

    /// `group[idx]` enters `state` (Linux TCP_CA_*: 3 Recovery, 4 Loss).
    pub fn on_state(&self, group: &mut [Subflow], idx: usize, state: i64, _now_ns: i64) {
        let sf = &mut group[idx];
        match self {
            Self::Cubic { .. } if state == CA_LOSS => cubic_reset(sf),
            Self::Olia => olia_note_loss(sf),
            _ => {}
        }
    }
}

/// CPython's `x ** y` for the finite operands used here: a negative base (only with CUBIC's integral
/// exponent 3) is raised as |x| and the sign put back, as `float_pow` does; the rest is libm `pow`.
/// `black_box` keeps the call: LLVM would otherwise turn `pow(x, 2.0)` into `x * x`, which differs.
fn py_pow(x: f64, y: f64) -> f64 {
    let y = black_box(y);
    if x < 0.0 {
        let p = (-x).powf(y);
        return if y % 2.0 == 1.0 { -p } else { p };
    }
    x.powf(y)
}

/// Veltkamp's split of `x` into two halves of 26 bits each, `x == hi + lo` exactly (for normal
/// operands well inside the range): products of halves are exact, Dekker's error-free product.
#[inline]
fn split(x: f64) -> (f64, f64) {
    let c = 134_217_729.0 * x; // 2^27 + 1
    let hi = c - (c - x);
    (hi, x - hi)
}

/// x * x as `p + e` exactly (Dekker's product), with the halves `hi + lo` of x it was made from.
#[inline]
fn exact_square(x: f64) -> (f64, f64, f64, f64) {
    let p = x * x;
    let (hi, lo) = split(x);
    (p, ((hi * hi - p) + 2.0 * hi * lo) + lo * lo, hi, lo)
}

/// Whether `pow` returns `p` when the exact power is `p + e` (`e` known to far better than an ULP).
/// glibc's `pow` is within 0.54 ULP of the exact value (the bound its source states: 0.5 for
/// rounding, 0.04 for its log/exp); when the exact value is within 0.375 ULP of `p` and `p` is not a
/// power of two (whose lower neighbour is half an ULP away), every other double is more than 0.6 ULP
/// away, so `pow` returns `p`. About three cases in four.
#[inline]
fn pow_returns(p: f64, e: f64) -> bool {
    let bits = p.to_bits();
    let ulp = f64::from_bits(bits & 0x7ff0_0000_0000_0000) * f64::EPSILON; // 2^(exponent - 52)
    bits & 0x000f_ffff_ffff_ffff != 0 && e.abs() <= 0.375 * ulp
}

/// `py_pow(x, 2.0)`, the same value without calling `pow` when it can tell what `pow` returns (LIA
/// and OLIA square an RTT or a sum on every ACK: libm `pow` was a tenth of an LIA run and more so at 8
/// subflows). x^2 is exactly `p + e`, `p` the rounded product and `e` its error (Dekker's product);
/// `pow_returns` says when that is `pow`'s answer, else (about one case in four) `pow` it is. The
/// unit test `square_is_pow` checks this against `pow` itself.
#[inline]
fn py_square(x: f64) -> f64 {
    // normal operands and products well inside the range, so that the split and products are exact
    if x > 1e-100 && x < 1e100 {
        let (p, e, _, _) = exact_square(x);
        if pow_returns(p, e) {
            return p;
        }
    }
    square_by_pow(x)
}

/// `py_square`'s other cases, out of line so that its fast path stays small enough to inline into
/// the coupled controls' loops (`olia_score`).
#[cold]
#[inline(never)]
fn square_by_pow(x: f64) -> f64 {
    py_pow(x, 2.0)
}

/// `py_pow(x, 3.0)`, as `py_square` (CUBIC raises the time since the epoch on every recomputation of
/// its target, which each subflow does as its own cwnd grows: libm `pow` took 3.5 times as much time
/// per packet at 8 subflows as at 2, measured by perf). x^2 = p2 + e2 and p2 * x = p3 + e3 exactly
/// (Dekker's products), so x^3 = p3 + e3 + e2 * x; the last product and the sum are rounded, off by
/// about 2^-51 of an ULP of p3, far inside `pow_returns`' margin. A negative base is cubed as |x|
/// with the sign put back, as `py_pow` does. The unit test `cube_is_pow` checks it against `pow`.
#[inline]
fn py_cube(x: f64) -> f64 {
    let a = x.abs();
    if a > 1e-60 && a < 1e60 {
        let (p2, e2, hi, lo) = exact_square(a);
        let p3 = p2 * a;
        let (hi2, lo2) = split(p2);
        let e3 = ((hi2 * hi - p3) + hi2 * lo + lo2 * hi) + lo2 * lo;
        if pow_returns(p3, e3 + e2 * a) {
            return if x < 0.0 { -p3 } else { p3 };
        }
    }
    cube_by_pow(x)
}

#[cold]
#[inline(never)]
fn cube_by_pow(x: f64) -> f64 {
    py_pow(x, 3.0)
}

/// CPython's `vx // wx` on floats (`_float_div_mod`): fmod-based, then snapped to an integer. Not
/// `(vx / wx).floor()`, which rounds the quotient first (`1.0 // 0.1` is 9.0, `floor(1.0 / 0.1)` 10.0).
fn py_floor_div(vx: f64, wx: f64) -> f64 {
    let m = vx % wx; // fmod: exact
    let mut div = (vx - m) / wx;
    if m != 0.0 && ((wx < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div == 0.0 {
        return (0.0f64).copysign(vx / wx);
    }
    let floor = div.floor();
    if div - floor > 0.5 {
        floor + 1.0
    } else {
        floor
    }
}

/// Python's `max(a, b)` on floats: `b` only if `b > a`, so a NaN `a` survives (unlike `f64::max`).
fn py_max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// The smoothed RTT in seconds, at least 1 µs.
fn srtt_s(sf: &Subflow) -> f64 {
    sf.srtt_us8.max(8) as f64 / 8e6
}

/// `py_pow(srtt_s(sf), 2.0)`, from the memo when the RTT has not moved since (`SrttSqMemo`).
#[inline]
fn srtt_s_sq(sf: &Subflow) -> f64 {
    let (key_us8, sq) = sf.srtt_sq_memo.get();
    if key_us8 == sf.srtt_us8 {
        return sq;
    }
    let sq = py_square(srtt_s(sf));
    sf.srtt_sq_memo.set(sf.srtt_us8, sq);
    sq
}

/// `tcp_slow_start`: grow by `acked` up to ssthresh; returns the acks left over for CA.
fn slow_start(sf: &mut Subflow, acked: i64) -> i64 {
    let mut cwnd = sf.cwnd + acked;
    if cwnd > sf.ssthresh {
        cwnd = sf.ssthresh.max(sf.cwnd);
    }
    let left = acked - (cwnd - sf.cwnd);
    sf.cwnd = cwnd;
    left
}

/// `tcp_cong_avoid_ai`: one segment per `w` segments acked. `w` may be fractional; an integral one
/// (Reno's cwnd) is exact as a double, so comparing and multiplying in doubles is the integer
/// arithmetic, with at most one rounding per result.
fn cong_avoid_ai(sf: &mut Subflow, w: f64, acked: i64) {
    if sf.cwnd_cnt >= w {
        // credits accumulated at a larger w: apply them gently now
        sf.cwnd_cnt = 0.0;
        sf.cwnd += 1;
    }
    sf.cwnd_cnt += acked as f64;
    if sf.cwnd_cnt >= w {
        let delta = py_floor_div(sf.cwnd_cnt, w);
        sf.cwnd_cnt -= delta * w;
        sf.cwnd += delta as i64;
    }
}

fn reno_cong_avoid(sf: &mut Subflow, mut acked: i64) {
    if sf.cwnd < sf.ssthresh {
        acked = slow_start(sf, acked);
        if acked == 0 {
            return;
        }
    }
    let w = sf.cwnd as f64;
    cong_avoid_ai(sf, w, acked);
}

// ------------------------------------------------------------------------------------------ CUBIC

/// Run `f` on the subflow and its CUBIC state (created on first use). The state is
/// moved out for the call so that `f` can write both.
fn with_cubic<R>(sf: &mut Subflow, f: impl FnOnce(&mut Subflow, &mut CubicState) -> R) -> R {
    let mut st = match std::mem::take(&mut sf.cc_state) {
        CcState::Cubic(st) => st,
        _ => Box::default(),
    };
    let r = f(sf, &mut st);
    sf.cc_state = CcState::Cubic(st);
    r
}

fn cubic_cong_avoid(sf: &mut Subflow, acked: i64, now_ns: i64) {
    with_cubic(sf, |sf, st| {
        let mut acked = acked;
        if sf.cwnd < sf.ssthresh {
            acked = slow_start(sf, acked);
            if acked == 0 {
                return;
            }
        }
        let cnt = cubic_update(sf, st, acked, now_ns);
        cong_avoid_ai(sf, cnt, acked);
    });
}

/// `bictcp_update`: segments acked per segment of growth.
fn cubic_update(sf: &Subflow, st: &mut CubicState, acked: i64, now_ns: i64) -> f64 {
    let cwnd = sf.cwnd;
    st.ack_cnt += acked;
    if st.last_cwnd == cwnd && now_ns - st.last_time <= CNT_REUSE_NS {
        return st.cnt;
    }
    // At most one recomputation per instant within an epoch (Linux: per jiffy).
    if !(st.epoch_start != 0 && now_ns == st.last_time) {
        st.last_cwnd = cwnd;
        st.last_time = now_ns;
        if st.epoch_start == 0 {
            cubic_start_epoch(st, cwnd, acked, now_ns);
        }
        st.cnt = cubic_cnt(st, cwnd, sf.min_rtt_us, now_ns);
    }
    cubic_tcp_friendliness(st, cwnd);
    if st.cnt < 2.0 {
        st.cnt = 2.0; // at most 1 segment per 2 acked: 1.5x per RTT
    }
    st.cnt
}

/// A new epoch (after a reduction): the cubic's plateau `origin` and the time `k` to reach it.
fn cubic_start_epoch(st: &mut CubicState, cwnd: i64, acked: i64, now_ns: i64) {
    st.epoch_start = now_ns;
    st.ack_cnt = acked;
    st.tcp_cwnd = cwnd;
    if st.last_max_cwnd <= cwnd as f64 {
        st.k = 0.0;
        st.origin = cwnd as f64;
    } else {
        st.k = py_pow((st.last_max_cwnd - cwnd as f64) / C, 1.0 / 3.0);
        st.origin = st.last_max_cwnd;
    }
}

/// `cnt` from the cubic's target one minimum RTT ahead.
fn cubic_cnt(st: &CubicState, cwnd: i64, min_rtt_us: i64, now_ns: i64) -> f64 {
    let delay_min_s = (if min_rtt_us < NO_RTT_US { min_rtt_us } else { 0 }) as f64 / 1e6;
    let t = (now_ns - st.epoch_start) as f64 / 1e9 + delay_min_s;
    let target = st.origin + C * py_cube(t - st.k);
    let cwnd_f = cwnd as f64;
    let cnt = if target > cwnd_f { cwnd_f / (target - cwnd_f) } else { 100.0 * cwnd_f };
    if st.last_max_cwnd == 0.0 && cnt > 20.0 {
        return 20.0; // no W_max known yet: grow at least 5 % per RTT
    }
    cnt
}

/// TCP friendliness: estimate what Reno would have by now and never be slower.
fn cubic_tcp_friendliness(st: &mut CubicState, cwnd: i64) {
    let delta = (cwnd * BETA_SCALE) >> 3;
    if delta > 0 && st.ack_cnt > delta {
        // bictcp_update's `while (ack_cnt > delta) { ack_cnt -= delta; tcp_cwnd++; }`, in one division:
        // it stops at the first ack_cnt in 1..=delta.
        let steps = (st.ack_cnt - 1) / delta;
        st.ack_cnt -= steps * delta;
        st.tcp_cwnd += steps;
    }
    if st.tcp_cwnd > cwnd {
        // int / int as a true division: both exact as doubles, so one correctly rounded division
        let max_cnt = cwnd as f64 / (st.tcp_cwnd - cwnd) as f64;
        if st.cnt > max_cnt {
            st.cnt = max_cnt;
        }
    }
}

/// `bictcp_recalc_ssthresh`: W_max with fast convergence, cwnd x 717/1024.
fn cubic_ssthresh(sf: &mut Subflow, st: &mut CubicState) -> i64 {
    st.epoch_start = 0;
    if (sf.cwnd as f64) < st.last_max_cwnd {
        // fast convergence: a true division of exact operands, one rounding
        st.last_max_cwnd = (sf.cwnd * (1024 + 717)) as f64 / 2048.0;
    } else {
        st.last_max_cwnd = sf.cwnd as f64;
    }
    ((sf.cwnd as f64 * BETA) as i64).max(2)
}

/// Loss: `bictcp_reset` (W_max too) + `bictcp_hystart_reset`'s round end. delay_min stays the
/// sender's minimum RTT (it is read from the subflow).
fn cubic_reset(sf: &mut Subflow) {
    let fresh = CubicState { round_end_idx: sf.nxt, ..CubicState::default() };
    match &mut sf.cc_state {
        CcState::Cubic(st) => **st = fresh,
        other => *other = CcState::Cubic(Box::new(fresh)),
    }
}

/// `hystart_update`: in slow start and until HyStart has found its exit, an ACK train longer than
/// half the minimum RTT or a round whose minimum RTT exceeds the minimum by delay_min / 8 (clamped
/// to 4-16 ms) ends slow start at the current window.
fn hystart_update(sf: &mut Subflow, st: &mut CubicState, rtt_us: i64, now_ns: i64) {
    st.delay_min_us = sf.min_rtt_us;
    if st.found || sf.cwnd >= sf.ssthresh {
        return;
    }
    let now_us = now_ns.div_euclid(1000); // floor division (towards minus infinity)
    if sf.una > st.round_end_idx {
        // a new round: bictcp_hystart_reset
        st.round_start_us = now_us;
        st.last_ack_us = now_us;
        st.round_end_idx = sf.nxt;
        st.curr_rtt_us = NO_RTT_US;
        st.sample_cnt = 0;
    }
    if sf.cwnd < HYSTART_LOW_WINDOW {
        return;
    }
    if now_us - st.last_ack_us <= HYSTART_ACK_DELTA_US {
        st.last_ack_us = now_us;
        let threshold_us = (st.delay_min_us + HYSTART_ACK_DELAY_US) >> 1;
        if now_us - st.round_start_us > threshold_us {
            st.found = true;
        }
    }
    if rtt_us < st.curr_rtt_us {
        st.curr_rtt_us = rtt_us;
    }
    if st.sample_cnt < HYSTART_MIN_SAMPLES {
        st.sample_cnt += 1;
    } else {
        let margin_us = (st.delay_min_us >> 3).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
        if st.curr_rtt_us > st.delay_min_us + margin_us {
            st.found = true;
        }
    }
    if st.found {
        sf.ssthresh = sf.cwnd;
        sf.hystart_exits += 1;
    }
}

// -------------------------------------------------------------------------------------------- LIA

/// `lia_terms`: over the established subflows, their count, total cwnd, max cwnd/rtt^2 and
/// sum cwnd/rtt (rtt in s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiaTerms {
    pub n: i64,
    pub tot: i64,
    pub best: f64,
    pub denom: f64,
}

pub fn lia_terms(group: &[Subflow]) -> LiaTerms {
    let mut t = LiaTerms { n: 0, tot: 0, best: 0.0, denom: 0.0 };
    for s in group.iter().filter(|s| s.established) {
        t.n += 1;
        let r = srtt_s(s);
        t.tot += s.cwnd;
        let x = s.cwnd as f64 / srtt_s_sq(s);
        if t.n == 1 || x > t.best {
            t.best = x;
        }
        t.denom += s.cwnd as f64 / r;
    }
    t
}

/// RFC 6356 linked increases: alpha = cwnd_tot * max(w_i/rtt_i^2) / (sum w_i/rtt_i)^2; the
/// increase per acked segment min(alpha / cwnd_tot, 1 / cwnd_i) is one segment per `w` acked.
fn lia_cong_avoid(group: &mut [Subflow], idx: usize, mut acked: i64) {
    let sf = &mut group[idx];
    if sf.cwnd < sf.ssthresh {
        acked = slow_start(sf, acked);
        if acked == 0 {
            return;
        }
    }
    let t = lia_terms(group);
    let sf = &mut group[idx];
    let cwnd = sf.cwnd as f64;
    if t.n <= 1 {
        cong_avoid_ai(sf, cwnd, acked);
        return;
    }
    let alpha = t.tot as f64 * t.best / py_square(t.denom);
    let w = py_max(t.tot as f64 / alpha, cwnd);
    cong_avoid_ai(sf, w, acked);
}

// ------------------------------------------------------------------------------------------- OLIA

/// `olia_terms`: count of established subflows, their max cwnd, the best score (inter-loss distance
/// / rtt^2), the rate sum (sum cwnd_s * rtt / rtt_s), the number of max-cwnd paths, `idx`'s score
/// and the number of best paths without the max cwnd. Gives every established subflow a loss
/// record if it has none; a count <= 1 stops after that.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OliaTerms {
    pub n: i64,
    pub max_cwnd: i64,
    pub best: f64,
    pub rate: f64,
    pub n_m: i64,
    pub sf_score: f64,
    pub b_not_m: i64,
}

pub fn olia_terms(group: &mut [Subflow], idx: usize) -> OliaTerms {
    let mut t = OliaTerms { n: 0, max_cwnd: 0, best: 0.0, rate: 0.0, n_m: 0, sf_score: 0.0, b_not_m: 0 };
    for s in group.iter_mut().filter(|s| s.established) {
        t.n += 1;
        if s.cc_state == CcState::Unset {
            s.cc_state = CcState::OliaLosses([s.una_bytes; 3]);
        }
        t.max_cwnd = t.max_cwnd.max(s.cwnd);
    }
    if t.n <= 1 {
        return t;
    }
    let rtt = srtt_s(&group[idx]);
    let mut first = true;
    // The scores are kept for the count below, for the first KEPT subflows (past them the count
    // computes them again: the same pure arithmetic). Computing every score
    // twice (a division each) cost 8 % of an OLIA run at 8 subflows.
    const KEPT: usize = 16;
    let mut scores = [0.0; KEPT];
    for (k, s) in group.iter().enumerate().filter(|(_, s)| s.established) {
        let sc = olia_score(s);
        if k < KEPT {
            scores[k] = sc;
        }
        if first || sc > t.best {
            t.best = sc;
            first = false;
        }
        if s.cwnd == t.max_cwnd {
            t.n_m += 1;
        }
        if k == idx {
            t.sf_score = sc;
        }
        t.rate += s.cwnd as f64 * rtt / srtt_s(s);
    }
    t.b_not_m = group
        .iter()
        .enumerate()
        .filter(|&(k, s)| {
            s.established && s.cwnd != t.max_cwnd && (if k < KEPT { scores[k] } else { olia_score(s) }) == t.best
        })
        .count() as i64;
    t
}

/// The larger of the last two inter-loss distances (bytes) over rtt^2 (s).
#[inline]
fn olia_score(s: &Subflow) -> f64 {
    let CcState::OliaLosses(l) = s.cc_state else {
        unreachable!("olia_terms gives every established subflow a loss record first");
    };
    let (d1, d0) = (l[2] - l[1], l[1] - l[0]);
    (if d1 >= d0 { d1 } else { d0 }) as f64 / srtt_s_sq(s)
}

/// A loss: the record shifts if data was acknowledged since the last one.
fn olia_note_loss(sf: &mut Subflow) {
    if let CcState::OliaLosses(l) = &mut sf.cc_state {
        if l[2] != l[1] {
            l[0] = l[1];
            l[1] = l[2];
        }
    }
}

fn olia_cong_avoid(group: &mut [Subflow], idx: usize, acked: i64) {
    let sf = &mut group[idx];
    match &mut sf.cc_state {
        CcState::OliaLosses(l) => l[2] = sf.una_bytes,
        _ => sf.cc_state = CcState::OliaLosses([0, 0, sf.una_bytes]),
    }
    if sf.cwnd < sf.ssthresh {
        slow_start(sf, acked); // the leftover is dropped, as in mptcp_olia.c
        return;
    }
    let t = olia_terms(group, idx);
    let sf = &mut group[idx];
    if t.n <= 1 {
        let w = sf.cwnd as f64;
        cong_avoid_ai(sf, w, acked);
        return;
    }
    let eps = if t.b_not_m == 0 {
        0.0
    } else if sf.cwnd < t.max_cwnd && t.sf_score == t.best {
        1.0 / (t.n * t.b_not_m) as f64 // a best path without the largest window: take more
    } else if sf.cwnd == t.max_cwnd {
        -1.0 / (t.n * t.n_m) as f64 // a largest window while better paths exist: give some up
    } else {
        0.0
    };
    let cwnd = sf.cwnd as f64;
    let inc = acked as f64 * (cwnd / (t.rate * t.rate) + eps / cwnd); // segments per acked segment
    sf.cwnd_cnt += inc;
    if sf.cwnd_cnt >= 1.0 {
        let whole = sf.cwnd_cnt.trunc();
        sf.cwnd += whole as i64;
        sf.cwnd_cnt -= whole;
    } else if sf.cwnd_cnt <= -1.0 {
        sf.cwnd = (sf.cwnd + sf.cwnd_cnt.ceil() as i64).max(1);
        sf.cwnd_cnt = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sf(cwnd: i64, ssthresh: i64, srtt_ms: i64) -> Subflow {
        Subflow {
            ssthresh,
            srtt_us8: srtt_ms * 1000 * 8,
            min_rtt_us: srtt_ms * 1000,
            established: true,
            ..Subflow::new(cwnd)
        }
    }

    /// cwnd growth over `n` windows of single-segment ACKs.
    fn grow_windows(cc: CongestionControl, group: &mut [Subflow], n: usize) -> i64 {
        let start = group[0].cwnd;
        for _ in 0..n {
            for _ in 0..group[0].cwnd {
                cc.cong_avoid(group, 0, 1, 0);
            }
        }
        group[0].cwnd - start
    }

    #[test]
    fn slow_start_adds_one_per_ack_up_to_ssthresh() {
        let mut g = [sf(10, 100, 20)];
        CongestionControl::Reno.cong_avoid(&mut g, 0, 5, 0);
        assert_eq!(g[0].cwnd, 15);
        let mut g = [sf(10, 14, 20)];
        // 4 to reach ssthresh, the 6 left over go to CA: 6 < 14, no segment yet
        CongestionControl::Reno.cong_avoid(&mut g, 0, 10, 0);
        assert_eq!((g[0].cwnd, g[0].cwnd_cnt), (14, 6.0));
    }

    #[test]
    fn reno_grows_one_segment_per_window_and_halves() {
        let mut g = [sf(40, 40, 20)];
        assert_eq!(grow_windows(CongestionControl::Reno, &mut g, 4), 4);
        assert_eq!(CongestionControl::Reno.ssthresh(&mut g, 0), 22);
        let mut g = [sf(3, 3, 20)];
        assert_eq!(CongestionControl::Lia.ssthresh(&mut g, 0), 2);
    }

    #[test]
    fn cubic_ssthresh_is_717_1024_with_fast_convergence() {
        let cc = CongestionControl::Cubic { hystart: true };
        let mut g = [sf(100, 50, 20)];
        assert_eq!(cc.ssthresh(&mut g, 0), 70); // 100 * 717 / 1024 = 70.02
        let CcState::Cubic(st) = &g[0].cc_state else { panic!("no CUBIC state") };
        assert_eq!(st.last_max_cwnd, 100.0);
        g[0].cwnd = 80;
        assert_eq!(cc.ssthresh(&mut g, 0), 56); // 80 * 717 / 1024 = 56.02
        let CcState::Cubic(st) = &g[0].cc_state else { panic!("no CUBIC state") };
        assert_eq!(st.last_max_cwnd, 80.0 * 1741.0 / 2048.0); // 68.0078125, exact
        assert_eq!(cc.ssthresh(&mut [sf(2, 2, 20)], 0), 2);
    }

    #[test]
    fn cubic_first_epoch_caps_cnt_at_20_and_loss_resets() {
        let cc = CongestionControl::Cubic { hystart: false };
        let mut g = [sf(100, 100, 20)];
        g[0].nxt = 77;
        cc.cong_avoid(&mut g, 0, 1, 1_000_000_000);
        let CcState::Cubic(st) = &g[0].cc_state else { panic!("no CUBIC state") };
        // no W_max: cnt = 20; friendliness: delta = 100 * 15 >> 3 = 187 > ack_cnt 1, no change
        assert_eq!((st.cnt, st.epoch_start, st.origin, st.tcp_cwnd), (20.0, 1_000_000_000, 100.0, 100));
        assert_eq!(g[0].cwnd_cnt, 1.0);
        cc.on_state(&mut g, 0, 3, 0);
        assert!(matches!(&g[0].cc_state, CcState::Cubic(st) if st.epoch_start != 0));
        cc.on_state(&mut g, 0, 4, 0);
        assert_eq!(g[0].cc_state, CcState::Cubic(Box::new(CubicState { round_end_idx: 77, ..CubicState::default() })));
    }

    #[test]
    fn cubic_friendliness_counts_reno_growth() {
        let mut st = CubicState { ack_cnt: 5 * 18 + 3, tcp_cwnd: 10, cnt: 50.0, ..CubicState::default() };
        cubic_tcp_friendliness(&mut st, 10); // delta = 10 * 15 >> 3 = 18
        assert_eq!((st.ack_cnt, st.tcp_cwnd), (3, 15)); // 93 - 5 x 18: the first value <= 18
        assert_eq!(st.cnt, 2.0); // 10 / (15 - 10)
        let mut st = CubicState { ack_cnt: 36, tcp_cwnd: 10, ..CubicState::default() };
        cubic_tcp_friendliness(&mut st, 10);
        assert_eq!((st.ack_cnt, st.tcp_cwnd), (18, 11));
    }

    #[test]
    fn coupled_increase_on_two_equal_paths_is_a_quarter_segment_per_window() {
        for cc in [CongestionControl::Lia, CongestionControl::Olia] {
            let mut g = [sf(40, 10, 20), sf(40, 10, 20)];
            assert_eq!(grow_windows(cc, &mut g, 8), 2, "{cc:?}");
        }
    }

    #[test]
    fn a_lone_established_subflow_grows_as_reno() {
        for cc in [CongestionControl::Lia, CongestionControl::Olia] {
            let mut g = [sf(40, 10, 20), Subflow { established: false, ..sf(40, 10, 20) }];
            assert_eq!(grow_windows(cc, &mut g, 4), 4, "{cc:?}");
        }
    }

    #[test]
    fn olia_counts_best_paths_past_the_kept_scores() {
        // 20 subflows (more than olia_terms keeps scores for), with ties for the best score
        let mut g: Vec<Subflow> = (0..20)
            .map(|k| {
                let mut s = sf(10 + (k % 4) as i64, 5, 20 + (k % 3) as i64);
                s.cc_state = CcState::OliaLosses([0, 1000 * (k % 2) as i64, 3000]);
                s
            })
            .collect();
        g[7].established = false;
        let t = olia_terms(&mut g, 3);
        let best = g.iter().filter(|s| s.established).map(olia_score).fold(f64::MIN, f64::max);
        let b_not_m =
            g.iter().filter(|s| s.established && s.cwnd != t.max_cwnd && olia_score(s) == best).count() as i64;
        assert_eq!((t.n, t.best, t.b_not_m), (19, best, b_not_m));
        assert!(b_not_m > 2);
    }

    #[test]
    fn olia_loss_record_shifts_only_after_progress() {
        let cc = CongestionControl::Olia;
        let mut g = [sf(10, 100, 20)];
        cc.on_state(&mut g, 0, 3, 0);
        assert_eq!(g[0].cc_state, CcState::Unset);
        g[0].una_bytes = 5000;
        cc.cong_avoid(&mut g, 0, 1, 0);
        assert_eq!(g[0].cc_state, CcState::OliaLosses([0, 0, 5000]));
        cc.on_state(&mut g, 0, 3, 0);
        cc.on_state(&mut g, 0, 4, 0);
        assert_eq!(g[0].cc_state, CcState::OliaLosses([0, 5000, 5000]));
    }

    #[test]
    fn hystart_delay_detection_ends_slow_start() {
        let cc = CongestionControl::Cubic { hystart: true };
        let mut g = [sf(20, 1 << 30, 20)];
        (g[0].una, g[0].nxt) = (1, 100); // one round: until segment 100 is acked
        // 30 ms samples 10 ms apart (no ACK train); 8 fill the round's count, the 9th is compared
        // with 20 ms + 4 ms (the clamped delay_min / 8)
        for i in 0..8 {
            cc.on_rtt(&mut g, 0, 30_000, i * 10_000_000);
        }
        assert_eq!(g[0].hystart_exits, 0);
        cc.on_rtt(&mut g, 0, 30_000, 80_000_000);
        assert_eq!((g[0].ssthresh, g[0].hystart_exits), (20, 1));
        cc.on_rtt(&mut g, 0, 30_000, 90_000_000);
        assert_eq!(g[0].hystart_exits, 1); // found: once per slow start
    }

    /// `fast_pow` against `py_pow(v, y)` over 3M operands, `operand(i, r)` from the i-th xorshift draw
    /// `r`: the same bits every time, and the fast path taken (the plain product's value) over 1M times.
    fn assert_matches_pow(y: f64, fast_pow: fn(f64) -> f64, product: fn(f64) -> f64,
                          operand: fn(u64, u64) -> f64) {
        let mut r: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut fast = 0;
        for i in 0..3_000_000u64 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            let v = operand(i, r);
            let (want, got) = (py_pow(v, y), fast_pow(v));
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{v:e}: {got:e} != {want:e}");
            fast += i64::from(got == product(v));
        }
        assert!(fast > 1_000_000);
    }

    /// Doubles of 1 to 2^40 with random mantissas (sums of squares, CUBIC's targets).
    fn wide(r: u64) -> f64 {
        f64::from_bits(0x3ff0_0000_0000_0000 | (r >> 12)) * (1u64 << (r % 40)) as f64
    }

    #[test]
    fn square_is_pow() {
        // any non-negative double (the fast path's range and beyond), RTTs as srtt_s makes them, sums
        assert_matches_pow(2.0, py_square, |v| v * v, |i, r| match i % 3 {
            0 => f64::from_bits(r >> 1),
            1 => (r % (1 << 24)) as f64 / 8e6, // srtt_us8 / 8e6
            _ => wide(r),
        });
    }

    #[test]
    fn cube_is_pow() {
        // any double of either sign, CUBIC's operand (seconds since the epoch less K), wide ones
        assert_matches_pow(3.0, py_cube, |v| v * v * v, |i, r| match i % 3 {
            0 => f64::from_bits(r),
            1 => (r % (1 << 40)) as f64 / 1e9 - (r >> 40) as f64 / 1e5,
            _ => wide(r),
        });
    }

    #[test]
    fn python_float_semantics() {
        assert_eq!(py_floor_div(1.0, 0.1), 9.0);
        assert_eq!(py_floor_div(7.5, 2.0), 3.0);
        assert_eq!(py_floor_div(-7.5, 2.0), -4.0);
        assert!(py_floor_div(0.5, 2.0).is_sign_positive());
        assert_eq!(py_pow(-2.0, 3.0), -8.0);
        assert!(py_max(f64::NAN, 3.0).is_nan());
        assert_eq!(BETA_SCALE, 15);
    }
}
