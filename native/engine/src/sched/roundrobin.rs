//! The out-of-tree round-robin scheduler (multipath-tcp/mptcp `net/mptcp/mptcp_rr.c`), ported from
//! `workbench.schedulers._roundrobin` (docs/MODEL.md §2): `num_segments` segments per subflow per
//! round among the subflows with cwnd space (`cwnd_limited`); a subflow part-way through its quota
//! goes on, else the last zero-quota subflow in list order starts; when every available subflow has
//! used its quota a new round starts. No backup handling, no opportunistic retransmission.

use std::collections::HashMap;

use super::{is_available, param_bool, param_i64, Decision, ParamValue, Scheduler};
use crate::engine::Engine;

pub struct RoundRobin {
    num_segments: i64,
    cwnd_limited: bool,
    /// Per subflow index: segments given in this round.
    quota: Vec<i64>,
}

impl RoundRobin {
    pub fn new(num_segments: i64, cwnd_limited: bool) -> Self {
        Self { num_segments, cwnd_limited, quota: Vec::new() }
    }

    /// From the registered parameters (`RoundRobin.params`): num_segments, cwnd_limited.
    pub fn from_params(p: &HashMap<String, ParamValue>) -> Result<Self, String> {
        Ok(Self::new(param_i64(p, "num_segments", 1)?, param_bool(p, "cwnd_limited", true)?))
    }

    fn quota_of(&self, k: usize) -> i64 {
        self.quota.get(k).copied().unwrap_or(0)
    }

    fn set_quota(&mut self, k: usize, q: i64) {
        if self.quota.len() <= k {
            self.quota.resize(k + 1, 0);
        }
        self.quota[k] = q;
    }
}

impl Scheduler for RoundRobin {
    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        let rh = e.conn.reinject_head;
        if rh >= 0 {
            // the last available subflow that has not carried it, else the last available one
            let mask = e.conn.seg_path_mask(rh);
            let mut chosen = None;
            for &k in subflows {
                if is_available(&e.sf(k), true, false) && (mask >> k) & 1 == 0 {
                    chosen = Some(k);
                }
            }
            if chosen.is_none() {
                for &k in subflows {
                    if is_available(&e.sf(k), true, false) {
                        chosen = Some(k);
                    }
                }
            }
            return chosen.map(|k| Decision::seg(k, rh));
        }
        let head = e.conn.head;
        if head >= e.conn.n_segs() || !e.conn.window_allows(head) {
            return None;
        }
        let num = self.num_segments;
        let cwnd_test = self.cwnd_limited;
        let mut choose = None;
        let mut split = num;
        for _retry in 0..2 {
            let (mut it, mut full) = (0, 0);
            choose = None;
            split = num;
            for &k in subflows {
                if !is_available(&e.sf(k), cwnd_test, false) {
                    continue;
                }
                it += 1;
                let q = self.quota_of(k);
                if 0 < q && q < num {
                    choose = Some(k);
                    split = num - q;
                    break;
                }
                if q == 0 {
                    choose = Some(k);
                    split = num;
                }
                if q >= num {
                    full += 1;
                }
            }
            if it != 0 && it == full {
                // every available subflow used its quota: a new round
                for &k in subflows {
                    if is_available(&e.sf(k), cwnd_test, false) {
                        self.set_quota(k, 0);
                    }
                }
                continue;
            }
            break;
        }
        let k = choose?;
        if !is_available(&e.sf(k), true, false) {
            return None;
        }
        self.set_quota(k, self.quota_of(k) + split);
        Some(Decision::head(k, split))
    }
}
