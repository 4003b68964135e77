//! The receive side's out-of-order queues (DSN -> end for the MPTCP socket, segment number ->
//! (DSN, length) for a subflow) as a map laid out for how they are used:
//! the keys present are a window of nearly consecutive values (segment numbers, or DSNs about an MSS
//! apart) that slides up, and the in-order path looks up the key at its low end. A hash map scatters
//! those keys over its whole table: at 8 subflows (about 800 segments out of order) the MPTCP
//! socket's lookups were 6 % of a run, most of it cache misses.
//!
//! `WindowMap` is a direct-mapped table: key `k` lives in slot `(k >> shift) mod capacity`, so
//! neighbouring keys sit in neighbouring slots and a window of keys in a run of slots. It is a plain
//! map for any keys: a key whose slot holds another one (two short segments in one unit, or a window
//! wider than the table) goes to a small hash map beside it, and every lookup that misses the slot
//! looks there too. The table doubles when the window outgrows it.

use rustc_hash::FxHashMap;

/// A slot's key when the slot is empty (a key with this value always goes to the overflow map).
const EMPTY: i64 = i64::MIN;
const MIN_SLOTS: usize = 64;
/// The table grows no further (16 B a slot: 1 MB); past it, keys that collide go to the overflow map.
const MAX_SLOTS: usize = 1 << 16;

pub struct WindowMap<V> {
    shift: u32,
    slots: Vec<(i64, V)>,
    overflow: FxHashMap<i64, V>,
    len: usize,
}

impl<V: Copy + Default> WindowMap<V> {
    /// A map whose keys are usually about `spacing` apart (the MSS for DSNs, 1 for segment numbers):
    /// a slot covers the largest power of two not above it, so two keys share one only when they are
    /// closer than `spacing`.
    pub fn new(spacing: i64) -> Self {
        let shift = if spacing > 1 { 63 - spacing.leading_zeros() } else { 0 };
        Self { shift, slots: Vec::new(), overflow: FxHashMap::default(), len: 0 }
    }

    #[inline]
    fn slot_of(&self, key: i64) -> usize {
        (key >> self.shift) as usize & (self.slots.len() - 1)
    }

    #[inline]
    pub fn remove(&mut self, key: i64) -> Option<V> {
        if self.len == 0 {
            return None;
        }
        let i = self.slot_of(key);
        let s = &mut self.slots[i];
        if s.0 == key && key != EMPTY {
            s.0 = EMPTY;
            self.len -= 1;
            return Some(s.1);
        }
        if self.overflow.is_empty() {
            return None;
        }
        let v = self.overflow.remove(&key);
        if v.is_some() {
            self.len -= 1;
        }
        v
    }

    /// Insert `key` unless it is present (a present key keeps its value); true when inserted.
    #[inline]
    pub fn insert_new(&mut self, key: i64, v: V) -> bool {
        if self.slots.is_empty() {
            self.slots = vec![(EMPTY, V::default()); MIN_SLOTS];
        }
        let i = self.slot_of(key);
        let held = self.slots[i].0;
        if held == key && key != EMPTY {
            return false;
        }
        if !self.overflow.is_empty() && self.overflow.contains_key(&key) {
            return false;
        }
        self.len += 1;
        if held == EMPTY && key != EMPTY {
            self.slots[i] = (key, v);
        } else {
            self.place_colliding(key, v);
        }
        true
    }

    /// `key` (new) found its slot taken: double the table if the window outgrew it (the two keys are
    /// in different units), else keep `key` in the overflow map.
    #[cold]
    #[inline(never)]
    fn place_colliding(&mut self, key: i64, v: V) {
        let held = self.slots[self.slot_of(key)].0;
        if key != EMPTY && held >> self.shift != key >> self.shift && self.slots.len() < MAX_SLOTS {
            let n = 2 * self.slots.len();
            let old = std::mem::replace(&mut self.slots, vec![(EMPTY, V::default()); n]);
            let spilled = std::mem::take(&mut self.overflow);
            for (k, x) in old.into_iter().filter(|s| s.0 != EMPTY).chain(spilled).chain([(key, v)]) {
                let i = self.slot_of(k);
                if self.slots[i].0 == EMPTY && k != EMPTY {
                    self.slots[i] = (k, x);
                } else {
                    self.overflow.insert(k, x);
                }
            }
            return;
        }
        self.overflow.insert(key, v);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, V)> + '_ {
        self.slots.iter().filter(|s| s.0 != EMPTY).copied().chain(self.overflow.iter().map(|(&k, &v)| (k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A small deterministic generator (xorshift), so the test needs no crate.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    #[test]
    fn behaves_as_a_hash_map() {
        // random inserts and removals around a sliding low end, near it and far from it, against HashMap
        for seed in 1..200u64 {
            let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let spacing = [1, 536, 1000, 1424][r.below(4) as usize];
            let mut w: WindowMap<i64> = WindowMap::new(spacing);
            let mut h: HashMap<i64, i64> = HashMap::new();
            let mut low = 0i64;
            for step in 0..3000 {
                let key = match r.below(10) {
                    0 => low - r.below(5 * spacing as u64) as i64, // below the low end
                    1 => low + r.below(1 << 24) as i64 * spacing,  // far above it
                    2 => i64::MIN + r.below(3) as i64,             // the empty slots' key
                    _ => low + r.below(300 * spacing as u64) as i64,
                };
                match r.below(5) {
                    0 | 1 => assert_eq!(w.insert_new(key, step), !h.contains_key(&key) && h.insert(key, step).is_none()),
                    2 | 3 => assert_eq!(w.remove(key), h.remove(&key)),
                    _ => low += r.below(3 * spacing as u64) as i64,
                }
                assert_eq!(w.len(), h.len());
            }
            let mut a: Vec<_> = w.iter().collect();
            let mut b: Vec<_> = h.into_iter().collect();
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
    }
}
