//! The discrete-event core (docs/MODEL.md A1): one heap per run, integer nanoseconds, a
//! `(time, seq)` tie-break so events at the same time run in the order they were scheduled and a run
//! is deterministic. Events are values of the engine's own type `E` (an enum), not callbacks.
//!
//! `Timer` is the model's lazy timer (A1): re-arming to a later deadline does not touch the heap;
//! when the stale entry fires the timer sees the deadline moved and asks to be re-scheduled.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Bits of a key's second word that hold the event's slot (0 for a lane's events); the scheduling
/// counter sits above them, so comparing `(t_ns, seq << SLOT_BITS | slot)` orders by time, then by
/// scheduling order.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// A heap key: `(t_ns, seq << SLOT_BITS | slot)` as one integer (times are never negative), so that
/// comparing two keys is one 128-bit comparison rather than a branch per field.
#[inline]
fn key(t_ns: i64, k: u64) -> u128 {
    debug_assert!(t_ns >= 0);
    (t_ns as u128) << 64 | k as u128
}

/// A heap of `(t_ns, seq)` keys over a slab of events, and lanes; `pop_until` advances `now` to the
/// event's time. The heap moves 16-byte keys only (the events, up to ~80 bytes with a packet, stay
/// put in their slots): measured, this made the bench scenario's event loop 1.5x faster than a heap
/// of whole entries.
///
/// Lanes: events a caller schedules in non-decreasing `(t_ns, seq)` order (a FIFO link's arrivals)
/// wait in their own queue (`at_lane`), each with its key; `lane_heads` holds each lane's earliest
/// key (`u128::MAX` when it is empty). Everything else (`at`: timers, with their stale and re-armed
/// entries) goes to the heap. Lane heads are most of the pops (a packet's hops and ACKs; timers are
/// ~5 % of events) and there are few of them (one per link direction), so `pop_until` finds the
/// earliest by a scan, cheaper at 4-8 lanes than a heap's sift-down; and the heap of timers stays
/// shallow as subflows (and their timers) are added. Before, one heap held both: at 8 subflows ~33
/// keys against 8 lane heads, and its pop was 15 % of the run.
///
/// Every event keeps the `(t_ns, seq)` key it was scheduled with, seq is unique, and `pop_until`
/// takes the smaller of the lanes' and the heap's earliest: events run in exactly the order of one
/// heap holding them all.
pub struct EventList<E> {
    heap: BinaryHeap<Reverse<u128>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    lane_heads: Vec<u128>,
    lanes: Vec<VecDeque<(u128, E)>>,
    seq: u64,
    pub now: i64,
    pub n_events: u64,
}

impl<E> Default for EventList<E> {
    fn default() -> Self {
        Self { heap: BinaryHeap::new(), slots: Vec::new(), free: Vec::new(), lane_heads: Vec::new(),
               lanes: Vec::new(), seq: 0, now: 0, n_events: 0 }
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
        self.heap.push(Reverse(key(t, self.seq << SLOT_BITS | slot as u64)));
    }

    /// Open `n` lanes (numbered from 0).
    pub fn add_lanes(&mut self, n: usize) {
        self.lanes.resize_with(n, VecDeque::new);
        self.lane_heads.resize(n, u128::MAX);
    }

    /// Schedule `ev` at `t_ns` (never earlier than now) on `lane`: not before the lane's last event.
    #[inline]
    pub fn at_lane(&mut self, lane: usize, t_ns: i64, ev: E) {
        self.seq += 1;
        let t = if t_ns > self.now { t_ns } else { self.now };
        let k = key(t, self.seq << SLOT_BITS);
        let q = &mut self.lanes[lane];
        debug_assert!(q.back().is_none_or(|b| b.0 <= k), "lane {lane} scheduled out of order");
        if q.is_empty() {
            self.lane_heads[lane] = k;
        }
        q.push_back((k, ev));
    }

    /// The next event at or before `until_ns`, with `now` set to its time; None when there is none
    /// (later events stay).
    #[inline]
    pub fn pop_until(&mut self, until_ns: i64) -> Option<E> {
        let timer = self.heap.peek().map_or(u128::MAX, |r| r.0);
        // the earliest lane head: a scan, as lanes are few
        let (mut lane, mut li) = (u128::MAX, 0);
        for (i, &h) in self.lane_heads.iter().enumerate() {
            let earlier = h < lane;
            lane = if earlier { h } else { lane };
            li = if earlier { i } else { li };
        }
        let k = timer.min(lane);
        let t = (k >> 64) as i64;
        // (u128::MAX: nothing pending; its time half reads as -1)
        if k == u128::MAX || t > until_ns {
            return None;
        }
        self.now = t;
        self.n_events += 1;
        if lane < timer {
            let q = &mut self.lanes[li];
            let (_, ev) = q.pop_front().expect("a lane's head is its front");
            self.lane_heads[li] = q.front().map_or(u128::MAX, |e| e.0);
            return Some(ev);
        }
        self.heap.pop();
        let slot = (k as u64 & SLOT_MASK) as u32;
        self.free.push(slot);
        self.slots[slot as usize].take()
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len() + self.lanes.iter().map(VecDeque::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.lanes.iter().all(VecDeque::is_empty)
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
    fn lanes_keep_the_order_of_one_heap_when_interleaved() {
        // random schedules (lanes in order, anything at all off them) and pops in between
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut plain = EventList::new();
        let mut laned = EventList::new();
        laned.add_lanes(5);
        let mut last = [0i64; 5];
        for i in 0..20_000u32 {
            if rnd(3) == 0 {
                let until = plain.now + rnd(50) as i64;
                assert_eq!(plain.pop_until(until), laned.pop_until(until));
                assert_eq!(plain.now, laned.now);
                continue;
            }
            let lane = rnd(7) as usize;
            if lane < 5 {
                let t = last[lane].max(laned.now) + rnd(30) as i64;
                last[lane] = t;
                plain.at(t, i);
                laned.at_lane(lane, t, i);
            } else {
                let t = laned.now + rnd(100) as i64 - 10;
                plain.at(t, i);
                laned.at(t, i);
            }
        }
        let a: Vec<_> = std::iter::from_fn(|| plain.pop_until(i64::MAX)).collect();
        let b: Vec<_> = std::iter::from_fn(|| laned.pop_until(i64::MAX)).collect();
        assert_eq!(a, b);
        assert!(laned.is_empty() && plain.is_empty());
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
