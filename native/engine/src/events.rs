//! The discrete-event core, as `workbench.replay.events`: one heap per run, integer nanoseconds, a
//! `(time, seq)` tie-break so events at the same time run in the order they were scheduled and a run
//! is deterministic. Events are values of the engine's own type `E` (an enum), not callbacks.
//!
//! `Timer` is the lazy timer of the Python engine: re-arming to a later deadline does not touch the
//! heap; when the stale entry fires the timer sees the deadline moved and asks to be re-scheduled.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Bits of a heap key's second word that hold the event's slot; the scheduling counter sits above
/// them, so comparing `(t_ns, seq << SLOT_BITS | slot)` orders by time, then by scheduling order.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// A slot with this bit set names a lane (below it: the rest of the slot number), not a slab entry.
const LANE_BIT: u64 = 1 << (SLOT_BITS - 1);

/// A heap of `(t_ns, seq)` keys over a slab of events; `pop_until` advances `now` to the event's
/// time. The heap moves 16-byte keys only (the events, up to ~80 bytes with a packet, stay put in
/// their slots): measured, this made the bench scenario's event loop 1.5x faster than a heap of
/// whole entries.
///
/// Lanes: events a caller schedules in non-decreasing `(t_ns, seq)` order (a FIFO link's arrivals)
/// can wait in their own queue (`at_lane`), with only the earliest of each lane in the heap. Every
/// event keeps the `(t_ns, seq)` key it was scheduled with, so the order events run in is exactly
/// that of one heap holding them all; the heap stays as small as the number of lanes and timers
/// (instead of every packet in flight).
pub struct EventList<E> {
    heap: BinaryHeap<Reverse<(i64, u64)>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    lanes: Vec<VecDeque<(i64, u64, E)>>,
    seq: u64,
    pub now: i64,
    pub n_events: u64,
}

impl<E> Default for EventList<E> {
    fn default() -> Self {
        Self { heap: BinaryHeap::new(), slots: Vec::new(), free: Vec::new(), lanes: Vec::new(), seq: 0, now: 0,
               n_events: 0 }
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
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(ev);
                i
            }
            None => {
                assert!((self.slots.len() as u64) < SLOT_MASK, "more than 2^24 events pending");
                self.slots.push(Some(ev));
                (self.slots.len() - 1) as u32
            }
        };
        // 2^40 schedulings before the counter would reach the slot bits: days of simulated 10 Gbit/s
        self.heap.push(Reverse((t, self.seq << SLOT_BITS | slot as u64)));
    }

    /// Open `n` lanes (numbered from 0).
    pub fn add_lanes(&mut self, n: usize) {
        assert!(n as u64 <= LANE_BIT, "too many lanes");
        self.lanes.resize_with(n, VecDeque::new);
    }

    /// Schedule `ev` at `t_ns` (never earlier than now) on `lane`: not before the lane's last event.
    #[inline]
    pub fn at_lane(&mut self, lane: usize, t_ns: i64, ev: E) {
        self.seq += 1;
        let t = if t_ns > self.now { t_ns } else { self.now };
        let key = self.seq << SLOT_BITS | LANE_BIT | lane as u64;
        let q = &mut self.lanes[lane];
        debug_assert!(q.back().is_none_or(|b| b.0 <= t), "lane {lane} scheduled out of order");
        if q.is_empty() {
            self.heap.push(Reverse((t, key)));
        }
        q.push_back((t, key, ev));
    }

    /// The next event at or before `until_ns`, with `now` set to its time; None when there is none
    /// (the heap keeps later events).
    #[inline]
    pub fn pop_until(&mut self, until_ns: i64) -> Option<E> {
        match self.heap.peek() {
            Some(Reverse((t, _))) if *t <= until_ns => {}
            _ => return None,
        }
        let Reverse((t, key)) = self.heap.pop()?;
        self.now = t;
        self.n_events += 1;
        let slot = key & SLOT_MASK;
        if slot & LANE_BIT != 0 {
            let q = &mut self.lanes[(slot & !LANE_BIT) as usize];
            let (_, _, ev) = q.pop_front().expect("a lane's head is in the heap");
            if let Some(&(t2, k2, _)) = q.front() {
                self.heap.push(Reverse((t2, k2)));
            }
            return Some(ev);
        }
        self.free.push(slot as u32);
        self.slots[slot as usize].take()
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len() - self.lanes.iter().filter(|q| !q.is_empty()).count()
            + self.lanes.iter().map(VecDeque::len).sum::<usize>()
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
    fn lanes_keep_the_order_of_one_heap() {
        // the same schedule with and without lanes pops the same sequence
        let sched = [(5, 0), (3, 1), (5, 1), (5, 2), (9, 0), (7, 2), (7, 1), (8, 1), (20, 0), (10, 2)];
        let mut plain = EventList::new();
        let mut laned = EventList::new();
        laned.add_lanes(3);
        for (i, &(t, lane)) in sched.iter().enumerate() {
            plain.at(t, i);
            if lane == 0 { laned.at(t, i) } else { laned.at_lane(lane, t, i) }
        }
        let a: Vec<_> = std::iter::from_fn(|| plain.pop_until(i64::MAX)).collect();
        let b: Vec<_> = std::iter::from_fn(|| laned.pop_until(i64::MAX)).collect();
        assert_eq!(a, b);
        assert_eq!(a, vec![1, 0, 2, 3, 5, 6, 7, 4, 9, 8]);
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
