//! The out-of-tree redundant scheduler (multipath-tcp/mptcp `net/mptcp/mptcp_redundant.c`, v0.95,
//! Frömmgen/Erbshäußer), ported from `workbench.schedulers._redundant` (docs/MODEL.md §5.1): every
//! subflow walks the whole meta write queue on its own pointer and sends each segment as its cwnd
//! allows (a copy of a segment another subflow already sent is a reinjection); a lagging subflow
//! skips what is already DATA_ACKed; backups carry new data only when no active subflow is usable.
//! Subflows are served round-robin, starting after the one served last.

use std::collections::HashMap;

use super::{get_available_subflow, is_available, Decision, ParamValue, Scheduler};
use crate::engine::Engine;

#[derive(Default)]
pub struct Redundant {
    /// Per subflow index: the last meta segment it was given (its pointer into the write queue).
    last_seg: Vec<Option<i64>>,
    /// The position in `subflows` to try first.
    next: usize,
}

impl Redundant {
    pub fn new() -> Self {
        Self::default()
    }

    /// Redundant has no parameters.
    pub fn from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        match p.keys().next() {
            Some(name) => Err(format!("redundant has no parameter {name:?}")),
            None => Ok(Self::new()),
        }
    }

    fn set_last(&mut self, k: usize, seg: i64) {
        if self.last_seg.len() <= k {
            self.last_seg.resize(k + 1, None);
        }
        self.last_seg[k] = Some(seg);
    }
}

impl Scheduler for Redundant {
    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let c = &e.conn;
        let rh = c.reinject_head;
        if rh >= 0 {
            let k = get_available_subflow(e, subflows, c.seg_path_mask(rh), true)?;
            return Some(Decision::seg(k, rh));
        }
        let n = subflows.len();
        let active_valid = subflows.iter().filter(|&&k| {
            let v = e.sf(k);
            !v.backup() && v.established() && !v.pf()
        }).count();
        let n_segs = c.n_segs();
        let oldest = c.oldest_unacked();
        for i in 0..n {
            let pos = (self.next + i) % n;
            let k = subflows[pos];
            let sf = e.sf(k);
            let mut last = self.last_seg.get(k).copied().flatten().unwrap_or(-1);
            // Python: seg_dsn(last) + seg_len(last) <= snd_una, i.e. DATA_ACKed: exactly the segments
            // below una_idx (which the compiled connection no longer holds)
            if last >= 0 && last < c.una_idx {
                last = -1;
            }
            let seg = if last < 0 {
                if oldest >= 0 { oldest } else { c.head }
            } else {
                last + 1
            };
            if seg >= n_segs || !is_available(&sf, true, true) {
                continue;
            }
            let carried = (c.seg_path_mask(seg) >> k) & 1 != 0;
            if c.seg_sent(seg) {
                if sf.backup() || carried {
                    if carried {
                        self.set_last(k, seg); // already carried (e.g. after a reinjection): move on
                    }
                    continue;
                }
            } else {
                if sf.backup() && active_valid > 0 {
                    continue;
                }
                if !c.window_allows(seg) {
                    continue;
                }
            }
            self.set_last(k, seg);
            self.next = (pos + 1) % n;
            return Some(Decision::seg(k, seg));
        }
        None
    }
}
