//! The upstream Linux MPTCP default scheduler (net/mptcp/protocol.c `mptcp_subflow_get_send`,
//! `__mptcp_retrans`, 6.x; docs/MODEL.md §6), ported from `workbench.schedulers._upstream` (its
//! docstring is the specification).
//!
//! No cwnd test: the subflow whose queued memory (`sk_wmem_queued`, payload plus each skb's overhead)
//! drains soonest at its smoothed pacing rate (the "linger time") gets the next burst of up to
//! `burst_bytes` (MPTCP_SEND_BURST_SIZE), clamped by the MPTCP window, while its autotuned send buffer
//! has room. Retransmission is net/mptcp's: the engine's MPTCP retransmit timer and stale subflows
//! (`Flavour::upstream_retrans`) fill the reinjection queue; the head fragment goes to one subflow
//! with empty TCP queues or is dropped for this round, and in `msk->recovery` the queue is served
//! like new data, by linger time. No reinjection on subflow RTO.

use std::collections::HashMap;

use super::{param_i64, Decision, Flavour, ParamValue, Scheduler, SfView};
use crate::engine::Engine;

/// MPTCP_SEND_BURST_SIZE.
const MPTCP_SEND_BURST_SIZE: i64 = 65428;
/// What an skb costs in sk_wmem_queued above its payload (measured on a 6.18 kernel: see the Python
/// module).
const SKB_OVERHEAD_BYTES: i64 = 870;
/// sk_gso_max_size.
const GSO_MAX_BYTES: i64 = 65536;

/// Python's `-(-a // b)` for b > 0 (a ceiling that is right for any sign of `a`).
#[inline]
fn ceil_div(a: i64, b: i64) -> i64 {
    -(-a).div_euclid(b)
}

/// The subflow's `sk_wmem_queued`: what its skbs hold, payload plus each skb's own overhead; sent
/// data sits in skbs of tcp_tso_autosize's size, unsent data in skbs of up to 64 KB.
pub fn wmem_queued_bytes(sf: &SfView) -> i64 {
    let queued = sf.queued_bytes();
    let in_flight = sf.unacked_bytes() - queued;
    let mss = sf.mss();
    // tcp_tso_autosize: the bytes the pacing rate sends in 2^-10 s (sk_pacing_shift), plus a boost
    // for very short RTTs (sysctl_tcp_tso_rtt_log = 9: min_rtt in units of 512 us); int() truncates
    let mut tso_bytes = ((sf.pacing_rate_bps() / 8.0) as i64) >> 10;
    let min_rtt_us = sf.min_rtt_ns().div_euclid(1000);
    if min_rtt_us != 0 && (min_rtt_us >> 9) < 32 {
        tso_bytes += GSO_MAX_BYTES >> (min_rtt_us >> 9);
    }
    let skb_bytes = (tso_bytes.min(GSO_MAX_BYTES).div_euclid(mss)).max(2) * mss; // tcp_min_tso_segs = 2
    let n_skbs = ceil_div(in_flight, skb_bytes) + ceil_div(queued, GSO_MAX_BYTES);
    queued + in_flight + SKB_OVERHEAD_BYTES * n_skbs
}

pub struct Upstream {
    burst_bytes: i64,
    /// Per subflow: the smoothed pacing rate (0.0 = none yet, as Python's missing dict entry; a
    /// stored rate is never 0).
    avg_pacing_bps: Vec<f64>,
    /// The subflow taking the current reinjection (-1: none).
    rtx_index: i64,
    /// wmem_queued_bytes of the subflow `pick` returned last.
    picked_wmem: i64,
}

impl Upstream {
    pub fn new(burst_bytes: i64) -> Self {
        Self { burst_bytes, avg_pacing_bps: Vec::new(), rtx_index: -1, picked_wmem: 0 }
    }

    /// From `build_spec`'s parameters.
    pub fn from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        Ok(Self::new(param_i64(p, "burst_bytes", MPTCP_SEND_BURST_SIZE)?))
    }

    /// mptcp_subflow_get_send: the active (else backup) subflow with the least linger time.
    fn pick(&mut self, e: &Engine, subflows: &[usize]) -> Option<usize> {
        let mut best: [Option<usize>; 2] = [None, None]; // active, backup
        let mut best_linger = [f64::INFINITY, f64::INFINITY];
        let mut best_wmem = [0i64, 0];
        let mut nr_active = 0;
        for &k in subflows {
            let sf = e.sf(k);
            if !sf.established() || sf.stale() {
                continue;
            }
            if !sf.backup() {
                nr_active += 1;
            }
            let i = sf.index();
            if self.avg_pacing_bps.len() <= i {
                self.avg_pacing_bps.resize(i + 1, 0.0);
            }
            let mut pace = self.avg_pacing_bps[i];
            if pace == 0.0 {
                pace = sf.pacing_rate_bps();
                if pace == 0.0 {
                    continue;
                }
                self.avg_pacing_bps[i] = pace;
            }
            let wmem = wmem_queued_bytes(&sf);
            let linger = (wmem * 8) as f64 / pace;
            let c = usize::from(sf.backup());
            if linger < best_linger[c] {
                best_linger[c] = linger;
                best[c] = Some(k);
                best_wmem[c] = wmem;
            }
        }
        let c = if nr_active != 0 { 0 } else { 1 };
        self.picked_wmem = best_wmem[c];
        best[c]
    }
}

impl Scheduler for Upstream {
    fn flavour(&self) -> Flavour {
        Flavour { reinject_on_subflow_rto: false, meta_rto_factor: 1.0, upstream_retrans: true }
    }

    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let mut rh = e.conn.reinject_head;
        if rh >= 0 && e.conn.recovery {
            // __mptcp_retransmit_pending_data rewound the send head: re-sent like new data
            let k = self.pick(e, subflows)?;
            let s = e.sf(k);
            if s.unacked_bytes() >= s.sndbuf_segments() * s.mss() {
                return None;
            }
            while rh >= 0 && e.sf(k).carried(rh) {
                // already on its way there
                e.conn.drop_reinject(rh);
                rh = e.conn.reinject_head;
            }
            if rh >= 0 {
                return Some(Decision::seg(k, rh));
            }
        }
        if rh < 0 {
            self.rtx_index = -1;
        } else {
            // __mptcp_retrans: the whole head fragment goes to one subflow whose TCP queues were empty
            for &k in subflows {
                let s = e.sf(k);
                if s.index() as i64 == self.rtx_index && s.established() && !s.carried(rh) {
                    return Some(Decision::seg(k, rh));
                }
            }
            for want_backup in [false, true] {
                for &k in subflows {
                    let s = e.sf(k);
                    if s.backup() == want_backup && s.established() && s.packets_out() == 0 && s.queued() == 0 {
                        self.rtx_index = s.index() as i64;
                        return Some(Decision::seg(k, rh));
                    }
                }
            }
            while rh >= 0 {
                // no idle subflow: no reinjection this time
                e.conn.drop_reinject(rh);
                rh = e.conn.reinject_head;
            }
            self.rtx_index = -1;
        }
        let head = e.conn.head;
        if head >= e.conn.n_segs() {
            return None;
        }
        let k = self.pick(e, subflows)?;
        let s = e.sf(k);
        let mss = s.mss();
        let limit = s.sndbuf_segments() * mss;
        let used = s.unacked_bytes(); // payload against the payload-calibrated buffer
        if used >= limit {
            return None; // !sk_stream_memory_free(ssk)
        }
        let burst = self.burst_bytes.min(e.conn.wnd_end - e.conn.seg_dsn(head));
        if burst <= 0 {
            return None;
        }
        let pacing = s.pacing_rate_bps();
        if pacing != 0.0 {
            // the burst's weight in the smoothed pacing rate (pick stored this subflow's entry)
            let tw = self.picked_wmem;
            let avg = &mut self.avg_pacing_bps[s.index()];
            *avg = (*avg * tw as f64 + pacing * burst as f64) / (burst + tw) as f64;
        }
        // keep pushing dfrags while the burst lasts and the subflow's send buffer has room
        let n_burst = ceil_div(burst, mss);
        let n_mem = ceil_div(limit - used, mss);
        Some(Decision::head(k, n_burst.min(n_mem).max(1)))
    }
}
