//! The discrete-event core, as `workbench.replay.events`: one heap per run, integer nanoseconds, a
//! `(time, seq)` tie-break so events at the same time run in the order they were scheduled and a run
//! is deterministic. Events are values of the engine's own type `E` (an enum), not callbacks.
//!
//! `Timer` is the lazy timer of the Python engine: re-arming to a later deadline does not touch the
//! heap; when the stale entry fires the timer sees the deadline moved and asks to be re-scheduled.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    t_ns: i64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.t_ns == o.t_ns && self.seq == o.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    // BinaryHeap is a max-heap: the earliest (t, seq) must compare greatest.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t_ns, o.seq).cmp(&(self.t_ns, self.seq))
    }
}

/// A heap of `(t_ns, seq, event)`; `pop` advances `now` to the event's time.
pub struct EventList<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    pub now: i64,
    pub n_events: u64,
}

impl<E> Default for EventList<E> {
    fn default() -> Self {
        Self { heap: BinaryHeap::new(), seq: 0, now: 0, n_events: 0 }
    }
}

impl<E> EventList<E> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedule `ev` at `t_ns`, never earlier than now.
    #[inline]
    pub fn at(&mut self, t_ns: i64, ev: E) {
        self.seq += 1;
        let t = if t_ns > self.now { t_ns } else { self.now };
        self.heap.push(Entry { t_ns: t, seq: self.seq, ev });
    }

    /// The next event at or before `until_ns`, with `now` set to its time; None when there is none
    /// (the heap keeps later events).
    #[inline]
    pub fn pop_until(&mut self, until_ns: i64) -> Option<E> {
        match self.heap.peek() {
            Some(e) if e.t_ns <= until_ns => {}
            _ => return None,
        }
        let e = self.heap.pop()?;
        self.now = e.t_ns;
        self.n_events += 1;
        Some(e.ev)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// What a timer's heap entry means when it fires.
#[derive(Debug, PartialEq, Eq)]
pub enum Fired {
    /// Superseded by a re-arm to an earlier time, or cancelled: do nothing.
    Stale,
    /// The deadline moved later: schedule the timer's event again at `t_ns` with generation `gen`.
    Again { t_ns: i64, gen: u64 },
    /// The deadline is due: run the timer's action.
    Due,
}

/// A cancellable, re-armable one-shot timer (the heap entries carry its generation).
#[derive(Clone, Debug, Default)]
pub struct Timer {
    pub deadline: Option<i64>,
    pending_t: Option<i64>,
    gen: u64,
}

impl Timer {
    pub fn armed(&self) -> bool {
        self.deadline.is_some()
    }

    /// Fire at `t_ns`. Returns the `(t_ns, gen)` of a heap entry to schedule, or None when the live
    /// entry fires first and will re-schedule itself.
    #[inline]
    pub fn arm(&mut self, t_ns: i64) -> Option<(i64, u64)> {
        self.deadline = Some(t_ns);
        if let Some(pt) = self.pending_t {
            if pt <= t_ns {
                return None;
            }
        }
        self.gen += 1;
        self.pending_t = Some(t_ns);
        Some((t_ns, self.gen))
    }

    pub fn cancel(&mut self) {
        self.deadline = None;
    }

    /// The heap entry of generation `gen` fired at `now`.
    #[inline]
    pub fn fire(&mut self, gen: u64, now: i64) -> Fired {
        if gen != self.gen {
            return Fired::Stale;
        }
        self.pending_t = None;
        let Some(d) = self.deadline else { return Fired::Stale };
        if d > now {
            self.gen += 1;
            self.pending_t = Some(d);
            return Fired::Again { t_ns: d, gen: self.gen };
        }
        self.deadline = None;
        Fired::Due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_then_insertion_order() {
        let mut l = EventList::new();
        l.at(20, 'c');
        l.at(10, 'a');
        l.at(10, 'b');
        l.at(30, 'd');
        let mut got = vec![];
        while let Some(e) = l.pop_until(25) {
            got.push((l.now, e));
        }
        assert_eq!(got, vec![(10, 'a'), (10, 'b'), (20, 'c')]);
        assert_eq!(l.len(), 1);
        l.at(5, 'e'); // never earlier than now
        assert_eq!(l.pop_until(i64::MAX), Some('e'));
        assert_eq!(l.now, 20);
    }

    #[test]
    fn lazy_timer_rearm_and_cancel() {
        let mut t = Timer::default();
        let (at, g1) = t.arm(100).unwrap();
        assert_eq!(at, 100);
        assert_eq!(t.arm(150), None); // later: the live entry re-schedules
        assert_eq!(t.fire(g1, 100), Fired::Again { t_ns: 150, gen: g1 + 1 });
        let (_, g3) = t.arm(120).unwrap(); // earlier than the pending 150: a new entry
        assert_eq!(t.fire(g1 + 1, 150), Fired::Stale);
        assert_eq!(t.fire(g3, 120), Fired::Due);
        assert!(!t.armed());
        let (_, g4) = t.arm(200).unwrap();
        t.cancel();
        assert_eq!(t.fire(g4, 200), Fired::Stale);
    }
}
