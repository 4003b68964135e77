//! One replay run of the engine: the event list, the network of links, the subflow senders and
//! receivers, the MPTCP connection, its scheduler, the workload and the recorder, built by
//! `py_engine::run_model` from what `workbench.replay.run.run_network` planned in Python.
//!
//! htsim's shape: a tiny event list of plain values (`Ev`), packets that carry what their route needs
//! (the subflow index picks the next hop on a shared link), integer nanoseconds, a recorder that is
//! off (None) unless asked for. The order in which the set-up plan and each handler schedule events
//! is part of the model: it breaks ties between events at the same nanosecond (the (time, seq)
//! heap), so it is kept exactly, and the golden runs pin it, event for event.

use crate::cc::{self, CongestionControl};
use crate::events::{EventList, Fired};
use crate::link::{Fate, Link};
use crate::mptcp::Conn;
use crate::receiver::{Ack, Data, Out, Receiver, SACK_NONE};
use crate::record::{ObsValue, Recorder};
use crate::sched::Scheduler;
use crate::tcp::Sender;
use crate::workload::Workload;

/// A data segment on the wire.
#[derive(Clone, Copy, Debug)]
pub struct DataPkt {
    pub sf: u32,
    pub retrans: bool,
    pub reinj: bool,
    pub plen: u32,
    pub idx: i64,
    pub seq: i64,
    pub dsn: i64,
    pub t_snd_ns: i64,
    pub ts_ecr_ns: i64,
}

/// Why a subflow told the connection about a loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossKind {
    Fast,
    Rto,
}

/// What an event does when its time comes.
#[derive(Debug)]
pub enum Ev {
    /// A data segment reaches the far end of `link`.
    Data { link: u32, p: DataPkt },
    /// An ACK reaches the far end of `link`.
    Ack { link: u32, p: Ack },
    Rto { k: u32, gen: u64 },
    Tlp { k: u32, gen: u64 },
    Delack { k: u32, gen: u64 },
    MetaRto { gen: u64 },
    Wake { gen: u64 },
    /// Subflow `k`'s handshake completes at the server.
    Establish { k: u32, rtt_ns: i64 },
    /// Subflow `k`'s receiver sets up its buffer (the client's end of its handshake).
    InitBuffer { k: u32 },
    /// The recorder's sampling clock.
    Sample,
    /// The workload's own timer (its meaning is the workload's).
    Workload { arg: i64 },
}

/// Where a packet goes at the far end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// On to this link.
    Next(u32),
    /// The route's end: the subflow's receiver (data) or sender (ACKs).
    End,
    /// No subflow of this index crosses the link.
    Nowhere,
}

/// One link direction and, per subflow crossing it, where its packets go next.
pub struct NetLink {
    pub name: String,
    pub link: Link,
    pub hops: Vec<Hop>,
    pub carries_data: bool,
}

/// Connection settings the engine needs at run time (`ConnectionConfig`'s).
#[derive(Clone, Debug)]
pub struct Config {
    pub mss_bytes: i64,
    pub header_bytes: i64,
    pub ack_bytes: i64,
    pub sample_interval_ns: i64,
}

pub struct Engine {
    pub ev: EventList<Ev>,
    pub stopped: bool,
    pub cfg: Config,
    pub links: Vec<NetLink>,
    /// First hop of each subflow's ACKs.
    pub ack_links: Vec<u32>,
    pub sfs: Vec<Sender>,
    pub ccs: Vec<cc::Subflow>,
    pub cc: CongestionControl,
    pub conn: Conn,
    pub rx: Receiver,
    pub rec: Option<Box<Recorder>>,
    /// Taken out while it runs (`push`), so that it can be handed the engine.
    pub sched: Option<Box<dyn Scheduler>>,
    pub sched_on_ack: bool,
    pub sched_on_applied: bool,
    /// The subflow indices schedulers are shown (all of them).
    pub views: Vec<usize>,
    pub wl: Workload,
}

impl Engine {
    // ---------------------------------------------------------------- the network
    /// Hand a data segment to `link` now.
    #[inline]
    pub(crate) fn send_data(&mut self, link: u32, p: DataPkt) {
        let now = self.ev.now;
        let size = p.plen as i64 + self.cfg.header_bytes;
        match self.links[link as usize].link.send(now, size) {
            // a link's arrivals are FIFO in time: its own lane of the event list
            Fate::Arrives { t_ns } => self.ev.at_lane(link as usize, t_ns, Ev::Data { link, p }),
            Fate::QueueDrop => self.record_data_drop(&p, now, 0),
            Fate::Lost { t_ns } => self.record_data_drop(&p, t_ns, 1),
        }
    }

    /// Hand an ACK to `link` now (a SACK block, or a DSACK, adds 12 bytes on every hop).
    #[inline]
    fn send_ack_on(&mut self, link: u32, p: Ack) {
        let now = self.ev.now;
        let size = self.cfg.ack_bytes + if p.sack != SACK_NONE { 12 } else { 0 };
        match self.links[link as usize].link.send(now, size) {
            Fate::Arrives { t_ns } => self.ev.at_lane(link as usize, t_ns, Ev::Ack { link, p }),
            Fate::QueueDrop => self.record_ack_drop(&p, now, 0),
            Fate::Lost { t_ns } => self.record_ack_drop(&p, t_ns, 1),
        }
    }

    fn record_data_drop(&mut self, p: &DataPkt, t_ns: i64, reason: u8) {
        if let Some(rec) = self.rec.as_deref_mut() {
            rec.drop.push(t_ns, p.sf, true, p.seq, p.plen, p.dsn, p.retrans, p.reinj, reason);
        }
    }

    fn record_ack_drop(&mut self, p: &Ack, t_ns: i64, reason: u8) {
        if let Some(rec) = self.rec.as_deref_mut() {
            let ack = self.sfs[p.sf].seq_of(p.ack);
            rec.drop.push(t_ns, p.sf as u32, false, ack, 0, -1, false, false, reason);
        }
    }

    /// What the receive side asked for: an ACK to send, a delayed-ACK timer entry.
    #[inline]
    fn receiver_out(&mut self, k: usize, out: Out) {
        if let Some(a) = out.ack {
            let link = self.ack_links[k];
            self.send_ack_on(link, a);
        }
        if let Some((t, gen)) = out.delack_at {
            self.ev.at(t, Ev::Delack { k: k as u32, gen });
        }
    }

    fn on_data(&mut self, p: DataPkt) {
        let now = self.ev.now;
        if let Some(rec) = self.rec.as_deref_mut() {
            let r = &mut rec.rcv;
            r.snd.push(now, p.sf, p.seq, p.plen, p.dsn, p.retrans, p.reinj);
            r.owd_ns.push(now - p.t_snd_ns);
        }
        let d = Data { sf: p.sf as usize, idx: p.idx, dsn: p.dsn, plen: p.plen as i64, t_snd_ns: p.t_snd_ns,
                       ts_ecr_ns: p.ts_ecr_ns };
        let out = self.rx.on_data(&d, now);
        self.receiver_out(p.sf as usize, out);
    }

    // ---------------------------------------------------------------- the loop
    /// One event. Always inlined into `run`, its one caller: out of line, the event (64 bytes) is
    /// copied once more per event, and the inliner's choice flipped with unrelated edits (a 12 %
    /// swing of the bench scenario's cost).
    #[inline(always)]
    fn dispatch(&mut self, e: Ev) {
        let now = self.ev.now;
        match e {
            Ev::Data { link, p } => match self.links[link as usize].hops[p.sf as usize] {
                Hop::Next(l) => self.send_data(l, p),
                Hop::End => self.on_data(p),
                Hop::Nowhere => unreachable!("a data segment of subflow {} on link {link}", p.sf),
            },
            Ev::Ack { link, p } => match self.links[link as usize].hops[p.sf] {
                Hop::Next(l) => self.send_ack_on(l, p),
                Hop::End => self.on_ack(&p),
                Hop::Nowhere => unreachable!("an ACK of subflow {} on link {link}", p.sf),
            },
            Ev::Rto { k, gen } => match self.sfs[k as usize].rto_timer.fire(gen, now) {
                Fired::Stale => {}
                Fired::Again { t_ns, gen } => self.ev.at(t_ns, Ev::Rto { k, gen }),
                Fired::Due => self.on_rto(k as usize, now),
            },
            Ev::Tlp { k, gen } => match self.sfs[k as usize].tlp_timer.fire(gen, now) {
                Fired::Stale => {}
                Fired::Again { t_ns, gen } => self.ev.at(t_ns, Ev::Tlp { k, gen }),
                Fired::Due => self.on_tlp(k as usize, now),
            },
            Ev::Delack { k, gen } => {
                let out = self.rx.on_delack(k as usize, gen, now);
                self.receiver_out(k as usize, out);
            }
            Ev::MetaRto { gen } => match self.conn.meta_rto_timer.fire(gen, now) {
                Fired::Stale => {}
                Fired::Again { t_ns, gen } => self.ev.at(t_ns, Ev::MetaRto { gen }),
                Fired::Due => self.on_meta_rto(now),
            },
            Ev::Wake { gen } => match self.conn.wake_timer.fire(gen, now) {
                Fired::Stale => {}
                Fired::Again { t_ns, gen } => self.ev.at(t_ns, Ev::Wake { gen }),
                Fired::Due => self.on_wake(now),
            },
            Ev::Establish { k, rtt_ns } => self.establish(k as usize, now, rtt_ns),
            Ev::InitBuffer { k } => self.rx.subflows[k as usize].init_buffer_space(),
            Ev::Sample => {
                if self.conn.done {
                    return;
                }
                self.sample_all(now);
                let t = now + self.cfg.sample_interval_ns;
                self.ev.at(t, Ev::Sample);
            }
            Ev::Workload { arg } => self.wl_event(arg, now),
        }
    }

    /// Process events in time order up to and including `until_ns`.
    pub fn run(&mut self, until_ns: i64) {
        self.stopped = false;
        while let Some(e) = self.ev.pop_until(until_ns) {
            self.dispatch(e);
            if self.stopped {
                break;
            }
        }
        if !self.stopped && self.ev.now < until_ns {
            self.ev.now = until_ns;
        }
    }

    fn sample_all(&mut self, now: i64) {
        let wq = self.conn.write_seq - self.conn.snd_una;
        let ooo = self.rx.meta.ooo_bytes;
        if let Some(rec) = self.rec.as_deref_mut() {
            for (s, c) in self.sfs.iter().zip(&self.ccs) {
                rec.samples.push(now, true, s.index as u32, c.cwnd, s.in_flight, s.srtt_ns, s.queued_bytes, wq, ooo);
            }
        }
    }

    /// What a scheduler reports about its own reasoning (no cost without a recorder).
    pub fn observe(&mut self, t_ns: i64, kind: &'static str, subflow: usize, value: ObsValue) {
        if let Some(rec) = self.rec.as_deref_mut() {
            rec.observations.push((t_ns, kind, subflow as u32, value));
        }
    }

    /// Bytes of segment state held now (subflow and connection tables; the memory benchmark).
    pub fn segment_state_bytes(&self) -> usize {
        let sub: usize = self.sfs.iter().map(|s| s.segs.held()).sum();
        sub * std::mem::size_of::<crate::tcp::Seg>() + self.conn.held() * std::mem::size_of::<crate::mptcp::MetaSeg>()
    }
}
