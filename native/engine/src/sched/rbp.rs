//! RBP, Receive Buffer Pre-division based flow control (Han, Xue, Yue, Hong, Yu, Li: "Receive
//! Buffer Pre-division Based Flow Control for MPTCP", §3, Algorithm 1), the flow-control layer of
//! `workbench.schedulers._rbp` (its docstring is the specification), wrapped around any compiled
//! scheduler.
//!
//! The receiver's buffer and window are split among the subflows: acwnd_i is an EWMA of cwnd_i
//! (eq. 1), Buf_i the predicted receive-buffer occupancy (eq. 2), B_i the buffer share (eq. 3),
//! rwnd_i the window share left after the subflow's data waiting in the receiver's out-of-order
//! queue (eq. 4), and `Send_data_i = min(cwnd_i, rwnd_i) - Outstanding_i` (eqs. 5, 6).
//!
//! As in Python, RBP does NOT narrow the connection's window (`ConnOverride` can only narrow it for
//! all subflows at once): it gates. The inner scheduler sees only the subflows with
//! `Send_data_i > 0` (all of them if none has room), and a decision for new data is cut to the
//! chosen subflow's share; copies of sent segments pass unchanged. So the inner scheduler reads the
//! engine's real window, and no engine change is needed.
//!
//! unordered_i is tracked from the decisions the engine applied, checked lazily on the next
//! `select` / `on_ack` through the segments' path masks (`_settle`). Float sums run left to right,
//! as CPython 3.11's `sum` does (3.12's `sum` of floats is compensated and would differ).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{build_spec, param_f64, Decision, Flavour, Scheduler, SfView, Spec};
use crate::engine::{Engine, LossKind};

pub struct Rbp {
    inner: Box<dyn Scheduler>,
    /// EWMA weight of the newest cwnd in acwnd, eq. (1).
    pub beta: f64,
    /// recvBuffer: the largest window announced so far, bytes.
    pub recv_buffer_bytes: i64,
    /// Per subflow index (`on_start`'s): acwnd_i in segments and the cwnd it last saw.
    acwnd: Vec<f64>,
    last_cwnd: Vec<Option<i64>>,
    /// Per subflow: min-heap of (dsn_end, bytes) of the segments it carried above snd_una, and their
    /// sum in bytes.
    carried: Vec<BinaryHeap<Reverse<(i64, i64)>>>,
    unordered_bytes: Vec<i64>,
    /// The last decision, settled on the next call: (subflow, its segments, whether the subflow had
    /// already carried the first one). Python's `before` mask only ever has bit 0 set.
    pending: Option<(usize, bool)>,
    pending_segs: Vec<i64>,
    /// Scratch: Send_data_i per subflow index this call (None: not divided), and the usable subset.
    room: Vec<Option<f64>>,
    usable: Vec<usize>,
}

/// `get("rbp", inner=..., beta=...)` from its spec: the inner scheduler is `spec.inner[0]`.
pub fn build(spec: &Spec) -> Result<Box<dyn Scheduler>, String> {
    let inner = match spec.inner.as_slice() {
        [inner] => build_spec(inner)?,
        _ => return Err(format!("layer {:?} needs exactly one inner scheduler", spec.name)),
    };
    Ok(Box::new(Rbp::new(inner, param_f64(&spec.params, "beta", 1.0 / 16.0)?)))
}

/// Python's `sum` of floats on 3.11: left to right from the integer 0.
fn py_sum(xs: impl Iterator<Item = f64>) -> f64 {
    xs.fold(0.0, |s, x| s + x)
}

/// Eq. (2), `rbp_buffer_occupancy`: Buf_i = acwnd_i · (⌈max_{j≠i} RTT_j / (2·RTT_i) + 1/2⌉ + 1/2).
pub fn buffer_occupancy(acwnd: &[f64], rtt: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(acwnd.len());
    for (i, (&a, &r)) in acwnd.iter().zip(rtt).enumerate() {
        // max(others): only its value matters (srtt samples, never NaN)
        let others = rtt.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &x)| x);
        let max_other = others.reduce(f64::max);
        match max_other {
            Some(m) if r > 0.0 => out.push(a * ((m / (2.0 * r) + 0.5).ceil() + 0.5)),
            _ => out.push(a),
        }
    }
    out
}

/// Eqs. (3) and (4), `rbp_receive_windows`: the per-subflow receive windows rwnd_i (the shares B_i
/// are only an intermediate here).
pub fn receive_windows(buf: &[f64], unordered: &[f64], recv_buffer: f64, rwnd: f64) -> Vec<f64> {
    let total = py_sum(buf.iter().copied());
    let room: Vec<f64> = buf
        .iter()
        .zip(unordered)
        .map(|(&x, &u)| {
            let b = if total > 0.0 { recv_buffer * x / total } else { recv_buffer / buf.len() as f64 };
            b - u
        })
        .collect();
    let pos = py_sum(room.iter().copied().filter(|&r| r > 0.0));
    room.iter().map(|&r| if r > 0.0 && pos > 0.0 { rwnd * r / pos } else { 0.0 }).collect()
}

/// Eqs. (5), (6), `_send_data`: min(cwnd_i, rwnd_i) - Outstanding_i, bytes. Python's `min(int,
/// float)` keeps the int unless the float is smaller, and int - int stays exact; both are exact in
/// f64 at these sizes.
fn send_data(sf: &SfView, rwnd_i: f64) -> f64 {
    let cwnd_bytes = sf.cwnd() * sf.mss();
    if rwnd_i < cwnd_bytes as f64 {
        rwnd_i - sf.unacked_bytes() as f64
    } else {
        (cwnd_bytes - sf.unacked_bytes()) as f64
    }
}

impl Rbp {
    pub fn new(inner: Box<dyn Scheduler>, beta: f64) -> Self {
        Self {
            inner,
            beta,
            recv_buffer_bytes: 0,
            acwnd: Vec::new(),
            last_cwnd: Vec::new(),
            carried: Vec::new(),
            unordered_bytes: Vec::new(),
            pending: None,
            pending_segs: Vec::new(),
            room: Vec::new(),
            usable: Vec::new(),
        }
    }

    /// Eq. (1) on a cwnd change (`_update_acwnd`).
    fn update_acwnd(&mut self, e: &Engine, k: usize) {
        let c = e.sf(k).cwnd();
        if self.last_cwnd[k] != Some(c) {
            self.last_cwnd[k] = Some(c);
            let a = self.acwnd[k];
            self.acwnd[k] = (1.0 - self.beta) * a + self.beta * c as f64;
        }
    }

    /// Count the segments of the last decision the engine applied; drop DATA_ACKed ones (`_settle`).
    fn settle(&mut self, e: &Engine) {
        let c = &e.conn;
        if let Some((sub, before_first)) = self.pending.take() {
            let bit = 1u64 << sub;
            for (i, &seg) in self.pending_segs.iter().enumerate() {
                // A segment below una_idx is DATA_ACKed and forgotten by the engine; Python would
                // push its (end <= snd_una, len) and pop it again just below: no net effect.
                if seg < c.una_idx {
                    continue;
                }
                if c.seg_path_mask(seg) & bit != 0 && !(i == 0 && before_first) {
                    let (dsn, len) = (c.seg_dsn(seg), c.seg_len(seg));
                    self.carried[sub].push(Reverse((dsn + len, len)));
                    self.unordered_bytes[sub] += len;
                }
            }
        }
        let una = c.snd_una;
        for (heap, u) in self.carried.iter_mut().zip(self.unordered_bytes.iter_mut()) {
            while let Some(&Reverse((end, len))) = heap.peek() {
                if end > una {
                    break;
                }
                heap.pop();
                *u -= len;
            }
        }
    }

    /// unordered_i: bytes subflow `k` carried above snd_una less its subflow-level outstanding bytes.
    fn unordered(&self, sf: &SfView) -> i64 {
        let u = self.unordered_bytes.get(sf.index()).copied().unwrap_or(0) - sf.unacked_bytes();
        if u > 0 { u } else { 0 }
    }

    /// rwnd_i of every established subflow with an RTT sample (`windows`), into `self.room` as
    /// Send_data_i (eqs. 5, 6).
    fn compute_room(&mut self, e: &Engine, subflows: &[usize]) {
        let n = self.room.len().max(subflows.iter().map(|&k| k + 1).max().unwrap_or(0));
        self.room.clear();
        self.room.resize(n, None);
        let subs: Vec<usize> =
            subflows.iter().copied().filter(|&k| e.sf(k).established() && e.sf(k).srtt_ns() > 0).collect();
        if subs.is_empty() {
            return;
        }
        let rwnd_bytes = e.conn.wnd_end - e.conn.snd_una;
        if rwnd_bytes > self.recv_buffer_bytes {
            self.recv_buffer_bytes = rwnd_bytes;
        }
        let mss = e.conn.mss as f64;
        let acwnd: Vec<f64> = subs.iter().map(|&k| self.acwnd[k] * mss).collect();
        let rtt: Vec<f64> = subs.iter().map(|&k| e.sf(k).srtt_ns() as f64).collect();
        let buf = buffer_occupancy(&acwnd, &rtt);
        let unordered: Vec<f64> = subs.iter().map(|&k| self.unordered(&e.sf(k)) as f64).collect();
        let w = receive_windows(&buf, &unordered, self.recv_buffer_bytes as f64, rwnd_bytes as f64);
        for (&k, &wk) in subs.iter().zip(&w) {
            self.room[k] = Some(send_data(&e.sf(k), wk));
        }
    }

    fn room_of(&self, k: usize) -> Option<f64> {
        self.room.get(k).copied().flatten()
    }

    /// The first `count` unsent segments from the head (`_next_unsent`), into `pending_segs`.
    fn next_unsent(&mut self, e: &Engine, count: i64) {
        let c = &e.conn;
        let n_segs = c.n_segs();
        let mut i = c.head;
        while (self.pending_segs.len() as i64) < count && i < n_segs {
            if !c.seg_sent(i) {
                self.pending_segs.push(i);
            }
            i += 1;
        }
    }
}

impl Scheduler for Rbp {
    fn flavour(&self) -> Flavour {
        self.inner.flavour()
    }

    /// Python's `Layer` overrides `on_ack`, so the engine always calls it (RBP settles there).
    fn wants_on_ack(&self) -> bool {
        true
    }

    /// `Layer.on_applied` only delegates: calling a no-op changes nothing, so ask the inner one.
    fn wants_on_applied(&self) -> bool {
        self.inner.wants_on_applied()
    }

    fn on_start(&mut self, e: &mut Engine, subflows: &[usize]) {
        self.recv_buffer_bytes = e.conn.wnd_end - e.conn.snd_una;
        let n = subflows.iter().map(|&k| k + 1).max().unwrap_or(0);
        self.acwnd = vec![0.0; n];
        self.last_cwnd = vec![None; n];
        self.carried = (0..n).map(|_| BinaryHeap::new()).collect();
        self.unordered_bytes = vec![0; n];
        for &k in subflows {
            let c = e.sf(k).cwnd();
            self.acwnd[k] = c as f64;
            self.last_cwnd[k] = Some(c);
        }
        self.inner.on_start(e, subflows);
    }

    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        self.settle(e);
        for &k in subflows {
            self.update_acwnd(e, k);
        }
        self.compute_room(e, subflows);
        // subflows without an RTT sample yet are not divided (nothing known about them): let them be
        let mut usable = std::mem::take(&mut self.usable);
        usable.clear();
        usable.extend(subflows.iter().copied().filter(|&k| self.room_of(k).unwrap_or(1.0) > 0.0));
        let d = if usable.is_empty() { self.inner.select(e, subflows) } else { self.inner.select(e, &usable) };
        self.usable = usable;
        let Decision { sf: sub, seg, mut count } = d?;
        self.pending_segs.clear();
        if seg >= 0 {
            // DATA_ACKed (below una_idx, forgotten by the engine) counts as sent, as in Python; its
            // mask no longer matters (settle skips it)
            let una_idx = e.conn.una_idx;
            if seg < una_idx || e.conn.seg_sent(seg) {
                // a copy (reinjection / opportunistic retransmission): not new data, not divided
                let before = seg < una_idx || (e.conn.seg_path_mask(seg) >> sub) & 1 != 0;
                self.pending_segs.push(seg);
                self.pending = Some((sub, before));
                return Some(Decision { sf: sub, seg, count });
            }
        }
        if let Some(r) = self.room_of(sub) {
            if r <= 0.0 {
                return None;
            }
            if seg < 0 {
                // -(-int(r) // mss): int() truncates, // floors
                let mss = e.conn.mss;
                count = count.min(-((-(r as i64)).div_euclid(mss)));
            }
        }
        if seg >= 0 {
            self.pending_segs.push(seg);
        } else {
            self.next_unsent(e, count);
        }
        self.pending = Some((sub, false));
        Some(Decision { sf: sub, seg, count })
    }

    fn on_ack(&mut self, e: &mut Engine, k: usize, now: i64) {
        self.settle(e);
        self.update_acwnd(e, k);
        self.inner.on_ack(e, k, now);
    }

    delegate_to_inner!();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `test_rbp_buffer_division_worked_example`'s numbers (eqs. 2-4 by hand).
    #[test]
    fn paper_worked_example() {
        let buf = buffer_occupancy(&[10.0, 40.0], &[20e6, 100e6]);
        assert_eq!(buf, vec![35.0, 60.0]);
        let w = receive_windows(&buf, &[5.0, 70.0], 190.0, 100.0);
        assert_eq!(w, vec![100.0 * 65.0 / 115.0, 100.0 * 50.0 / 115.0]);
        assert_eq!(receive_windows(&buf, &[5.0, 120.0], 190.0, 100.0), vec![100.0, 0.0]);
        assert_eq!(buffer_occupancy(&[7.0], &[30e6]), vec![7.0]);
    }
}
