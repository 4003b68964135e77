//! One direction of one path (docs/MODEL.md A2): a rate-limited drop-tail FIFO
//! followed by a delay pipe, mahimahi-style. Nothing ticks: a packet's whole fate is computed when it
//! is handed over.
//!
//! * Rate queue: serialisation starts when the link is free and ends when the integral of the
//!   piecewise-constant capacity reaches its size; zero-capacity steps contribute nothing.
//! * Drop-tail buffer in bytes: a packet is in the buffer from enqueue until its serialisation
//!   starts; one that would push the buffered bytes above `buffer_bytes` is dropped.
//! * Random loss, drawn from the link's own MT19937 stream when serialisation ends.
//! * Delay pipe: arrival = finish + owd(finish), never before the previous arrival.
//!
//! The floating-point steps, their order and where an int becomes a double are part of the model
//! (the golden runs pin the fates bit for bit), so they are kept exactly as they are.

use std::collections::VecDeque;

use crate::mt::Mt19937;
use crate::series::{Cursor, StepSeries};

const INF: i64 = 1 << 62;

/// What became of a packet handed to the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Dropped at the buffer now (queue overflow).
    QueueDrop,
    /// Serialised, then lost at `t_ns` (random loss).
    Lost { t_ns: i64 },
    /// Arrives at the far end at `t_ns`.
    Arrives { t_ns: i64 },
}

pub struct Link {
    pub buffer_bytes: i64,
    rate: StepSeries,
    ns_per_byte: f64,
    owd: StepSeries,
    owd_const: i64,
    owd_cur: Cursor,
    loss: StepSeries,
    loss_const: f64,
    loss_cur: Cursor,
    /// Boxed: its 2.5 KB would otherwise sit between the fields `send` reads on every packet.
    rng: Box<Mt19937>,
    busy_until: i64,
    last_arrival: i64,
    q: VecDeque<(i64, i64)>, // (start_ns, size_bytes) of packets still buffered
    qbytes: i64,
    pub max_qbytes: i64,
    pub n_sent: u64,
    pub n_drop_queue: u64,
    pub n_drop_loss: u64,
}

impl Link {
    pub fn new(rate_bps: StepSeries, owd_ns: StepSeries, loss: StepSeries, buffer_bytes: i64, rng: Mt19937) -> Self {
        // Constant series get a fast path (the common case).
        let ns_per_byte =
            if rate_bps.is_constant() && rate_bps.values[0] > 0.0 { 8e9 / rate_bps.values[0] } else { 0.0 };
        let owd_const = if owd_ns.is_constant() { owd_ns.values[0] as i64 } else { -1 };
        let loss_const = if loss.is_constant() { loss.values[0] } else { -1.0 };
        Self {
            buffer_bytes,
            rate: rate_bps,
            ns_per_byte,
            owd: owd_ns,
            owd_const,
            owd_cur: Cursor::default(),
            loss,
            loss_const,
            loss_cur: Cursor::default(),
            rng: Box::new(rng),
            busy_until: 0,
            last_arrival: 0,
            q: VecDeque::new(),
            qbytes: 0,
            max_qbytes: 0,
            n_sent: 0,
            n_drop_queue: 0,
            n_drop_loss: 0,
        }
    }

    pub fn rng(&self) -> &Mt19937 {
        &self.rng
    }

    /// Bytes in the buffer at `now_ns` (not counting the packet being serialised).
    pub fn queued_bytes(&mut self, now_ns: i64) -> i64 {
        self.drain(now_ns);
        self.qbytes
    }

    #[inline]
    fn drain(&mut self, now_ns: i64) {
        while let Some(&(start, size)) = self.q.front() {
            if start > now_ns {
                break;
            }
            self.qbytes -= size;
            self.q.pop_front();
        }
    }

    /// Integrate the capacity from `start` until `size_bytes` have been serialised.
    fn finish_time(&self, start: i64, size_bytes: i64) -> i64 {
        let (ts, vs) = (&self.rate.t_ns, &self.rate.values);
        let n = ts.len();
        let mut i = self.rate.index_at(start);
        let mut bits = size_bytes as f64 * 8.0;
        let mut t = start;
        loop {
            let end = if i + 1 < n { ts[i + 1] } else { INF };
            let r = vs[i];
            if r > 0.0 {
                let dt = bits * 1e9 / r;
                // the float t + dt against the int end, compared exactly: both are below 2^53
                // except end = 2^62, which f64 holds exactly.
                if t as f64 + dt <= end as f64 {
                    return t + (dt + 0.5) as i64;
                }
                bits -= r * ((end - t) as f64) / 1e9;
            }
            if end >= INF {
                return INF; // capacity zero forever: the packet never leaves
            }
            t = end;
            i += 1;
        }
    }

    /// Hand a packet of `size_bytes` to the link at `now_ns`.
    pub fn send(&mut self, now_ns: i64, size_bytes: i64) -> Fate {
        let mut start = self.busy_until;
        if start > now_ns {
            self.drain(now_ns);
            let qb = self.qbytes + size_bytes;
            if qb > self.buffer_bytes {
                self.n_drop_queue += 1;
                return Fate::QueueDrop;
            }
            self.q.push_back((start, size_bytes));
            self.qbytes = qb;
            if qb > self.max_qbytes {
                self.max_qbytes = qb;
            }
        } else {
            if self.qbytes != 0 {
                self.q.clear();
                self.qbytes = 0;
            }
            start = now_ns;
        }
        let npb = self.ns_per_byte;
        let finish = if npb != 0.0 {
            start + (size_bytes as f64 * npb + 0.5) as i64
        } else {
            self.finish_time(start, size_bytes)
        };
        self.busy_until = finish;
        self.n_sent += 1;
        let mut p = self.loss_const;
        if p < 0.0 {
            p = self.loss_cur.at(&self.loss, finish);
        }
        // a packet that capacity zero holds forever never leaves: it cannot be lost either (no draw)
        if p > 0.0 && finish < INF && self.rng.random() < p {
            self.n_drop_loss += 1;
            return Fate::Lost { t_ns: finish };
        }
        let owd = if self.owd_const >= 0 { self.owd_const } else { self.owd_cur.at(&self.owd, finish) as i64 };
        let mut arrival = finish + owd;
        if arrival < self.last_arrival {
            arrival = self.last_arrival;
        }
        self.last_arrival = arrival;
        Fate::Arrives { t_ns: arrival }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(rate: StepSeries, buffer: i64) -> Link {
        Link::new(rate, StepSeries::constant(1_000_000.0), StepSeries::constant(0.0), buffer, Mt19937::from_seed_u32(1))
    }

    #[test]
    fn constant_rate_serialises_back_to_back() {
        let mut l = link(StepSeries::constant(8e6), 10_000); // 1 byte per microsecond
        assert_eq!(l.send(0, 1000), Fate::Arrives { t_ns: 1_000_000 + 1_000_000 });
        assert_eq!(l.send(0, 1000), Fate::Arrives { t_ns: 2_000_000 + 1_000_000 });
        assert_eq!(l.queued_bytes(0), 1000);
        assert_eq!(l.queued_bytes(1_000_000), 0);
    }

    #[test]
    fn buffer_overflow_drops_and_outage_holds() {
        let mut l = link(StepSeries::constant(8e6), 1500);
        l.send(0, 1000);
        assert_eq!(l.send(0, 1000), Fate::Arrives { t_ns: 3_000_000 });
        assert_eq!(l.send(0, 1000), Fate::QueueDrop);
        // 1 ms of outage: a 1000-byte packet sent at 0 needs 1 ms of capacity after it.
        let mut o = link(StepSeries::new(vec![0, 1_000_000], vec![0.0, 8e6]).unwrap(), 1500);
        assert_eq!(o.send(0, 1000), Fate::Arrives { t_ns: 2_000_000 + 1_000_000 });
        let mut dead = link(StepSeries::new(vec![0, 10], vec![8e6, 0.0]).unwrap(), 1500);
        assert_eq!(dead.send(0, 1000), Fate::Arrives { t_ns: INF + 1_000_000 });
    }
}
