//! What the application writes (docs/MODEL.md A7; the settings come from `workbench.replay.workload`):
//! an always-full buffer (`Bulk`), one transfer (`Finite`), bursts written after the previous one was
//! DATA_ACKed (`Bursts`) or writes at given times (`AppTrace`). A workload writes through
//! `Engine::app_write` and schedules its own timers as `Ev::Workload` events; `on_acked` runs when a
//! DATA_ACK frees send-buffer space.

use crate::engine::{Engine, Ev};

const BIG: i64 = 1 << 62;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    Bulk { stop_ns: Option<i64>, finished: bool },
    Finite { size_bytes: i64, written: i64, finished: bool },
    Bursts { segments: i64, idle_ns: i64, n_bursts: i64, done_bursts: i64, pending: i64, finished: bool },
    AppTrace { writes: Vec<(i64, i64)>, pending: i64, n_done: i64, finished: bool },
}

impl Workload {
    pub fn finished(&self) -> bool {
        match self {
            Self::Bulk { finished, .. }
            | Self::Finite { finished, .. }
            | Self::Bursts { finished, .. }
            | Self::AppTrace { finished, .. } => *finished,
        }
    }
}

impl Engine {
    pub(crate) fn wl_finished(&self) -> bool {
        self.wl.finished()
    }

    /// Finite: write what is left of the transfer.
    fn finite_write(&mut self, now: i64) {
        let Workload::Finite { size_bytes, written, .. } = self.wl else { return };
        let left = size_bytes - written;
        let mut w = written;
        if left > 0 {
            w += self.app_write(left, now);
        }
        let done = w >= size_bytes;
        if let Workload::Finite { written, finished, .. } = &mut self.wl {
            *written = w;
            if done {
                *finished = true;
            }
        }
        if done {
            self.conn.send_buffer_full = false;
        }
    }

    /// Bursts: the next burst.
    fn burst(&mut self, now: i64) {
        let mss = self.conn.mss;
        let Workload::Bursts { segments, n_bursts, done_bursts, pending, .. } = &mut self.wl else { return };
        *pending += *segments * mss;
        *done_bursts += 1;
        let fin = *done_bursts >= *n_bursts;
        let want = *pending;
        if fin {
            if let Workload::Bursts { finished, .. } = &mut self.wl {
                *finished = true;
            }
        }
        let took = self.app_write(want, now);
        if let Workload::Bursts { pending, .. } = &mut self.wl {
            *pending -= took;
        }
        self.push(now);
    }

    /// Workload.start, at time 0 of the connection.
    pub fn wl_start(&mut self, now: i64) {
        match &mut self.wl {
            Workload::Bulk { stop_ns, .. } => {
                let stop = *stop_ns;
                self.app_write(BIG, now);
                if let Some(t) = stop {
                    self.ev.at(t, Ev::Workload { arg: 0 });
                }
                self.push(now);
            }
            Workload::Finite { .. } => {
                self.finite_write(now);
                self.push(now);
            }
            Workload::Bursts { .. } => self.burst(now),
            Workload::AppTrace { writes, finished, .. } => {
                if writes.is_empty() {
                    *finished = true;
                    self.finish(now);
                    return;
                }
                let at: Vec<(i64, i64)> = writes.clone();
                for (t, b) in at {
                    self.ev.at(t, Ev::Workload { arg: b });
                }
            }
        }
    }

    /// A DATA_ACK freed send-buffer space (the caller pushes).
    pub(crate) fn wl_on_acked(&mut self, now: i64) {
        match &mut self.wl {
            Workload::Bulk { finished, .. } => {
                if !*finished {
                    self.app_write(BIG, now);
                }
            }
            Workload::Finite { finished, .. } => {
                if !*finished {
                    self.finite_write(now);
                }
            }
            Workload::Bursts { pending, finished, idle_ns, .. } => {
                if *pending != 0 {
                    let want = *pending;
                    let took = self.app_write(want, now);
                    if let Workload::Bursts { pending, .. } = &mut self.wl {
                        *pending -= took;
                    }
                } else if self.conn.snd_una >= self.conn.write_seq && !*finished {
                    let t = now + *idle_ns;
                    self.ev.at(t, Ev::Workload { arg: 0 });
                }
            }
            Workload::AppTrace { pending, .. } => {
                if *pending != 0 {
                    let want = *pending;
                    let took = self.app_write(want, now);
                    if let Workload::AppTrace { writes, pending, n_done, finished } = &mut self.wl {
                        *pending -= took;
                        if *n_done >= writes.len() as i64 && *pending == 0 {
                            *finished = true;
                        }
                    }
                }
            }
        }
    }

    /// The workload's own timer.
    pub(crate) fn wl_event(&mut self, arg: i64, now: i64) {
        match &mut self.wl {
            Workload::Bulk { finished, .. } => {
                *finished = true;
                self.conn.send_buffer_full = false;
                if self.conn.snd_una >= self.conn.write_seq {
                    self.finish(now);
                }
            }
            Workload::Finite { .. } => {}
            Workload::Bursts { .. } => self.burst(now),
            Workload::AppTrace { n_done, pending, .. } => {
                *n_done += 1;
                *pending += arg;
                let want = *pending;
                let took = self.app_write(want, now);
                if let Workload::AppTrace { writes, pending, n_done, finished } = &mut self.wl {
                    *pending -= took;
                    if *n_done >= writes.len() as i64 && *pending == 0 {
                        *finished = true;
                    }
                }
                self.push(now);
            }
        }
    }
}
