//! The Python bindings (`workbench_core`) of the engine's layers one by one (`Link`, `run_link`,
//! `ReceiverConfig`, `run_receiver`; `CcGroup` is in `py_cc`, the whole run in `py_engine`), so that
//! `tests/test_core_*.py` can check each against worked examples and invariants, and
//! `benchmarks/bench_core.py` can measure them.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::events::EventList;
use crate::link::{Fate, Link};
use crate::mt::Mt19937;
use crate::receiver::{Ack, ConnReceiver, Data, Out, Receiver, SubflowReceiver};
use crate::series::StepSeries;

fn series(t_ns: Vec<i64>, values: Vec<f64>, what: &str) -> PyResult<StepSeries> {
    StepSeries::new(t_ns, values).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// `Random.getstate()[1]`: 624 words, then the position.
fn mt_from_state(state: &[u32]) -> PyResult<Mt19937> {
    if state.len() != 625 {
        return Err(PyValueError::new_err("rng_state: Random.getstate()[1] (625 integers) expected"));
    }
    Mt19937::from_state(&state[..624], state[624] as usize).map_err(PyValueError::new_err)
}

fn fate_tuple(now_ns: i64, f: Fate) -> (u8, i64) {
    match f {
        Fate::QueueDrop => (0, now_ns),
        Fate::Lost { t_ns } => (1, t_ns),
        Fate::Arrives { t_ns } => (2, t_ns),
    }
}

/// One link direction (`crate::link::Link`): each packet's fate, without the event list.
#[pyclass(name = "Link", module = "workbench_core")]
struct PyLink {
    inner: Link,
}

#[pymethods]
impl PyLink {
    #[new]
    #[pyo3(signature = (*, rate_t_ns, rate_bps, owd_t_ns, owd_ns, loss_t_ns, loss, buffer_bytes, rng_state))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        rate_t_ns: Vec<i64>,
        rate_bps: Vec<f64>,
        owd_t_ns: Vec<i64>,
        owd_ns: Vec<f64>,
        loss_t_ns: Vec<i64>,
        loss: Vec<f64>,
        buffer_bytes: i64,
        rng_state: Vec<u32>,
    ) -> PyResult<Self> {
        Ok(Self {
            inner: Link::new(
                series(rate_t_ns, rate_bps, "rate")?,
                series(owd_t_ns, owd_ns, "owd")?,
                series(loss_t_ns, loss, "loss")?,
                buffer_bytes,
                mt_from_state(&rng_state)?,
            ),
        })
    }

    /// Hand over a packet at `now_ns`: (0, now) dropped at the buffer, (1, t) lost at t, (2, t) arrives at t.
    fn send(&mut self, now_ns: i64, size_bytes: i64) -> (u8, i64) {
        fate_tuple(now_ns, self.inner.send(now_ns, size_bytes))
    }

    fn queued_bytes(&mut self, now_ns: i64) -> i64 {
        self.inner.queued_bytes(now_ns)
    }

    /// The generator's state as `Random.getstate()[1]` holds it.
    fn rng_state(&self) -> Vec<u32> {
        let (mut w, pos) = self.inner.rng().state();
        w.push(pos as u32);
        w
    }

    #[getter]
    fn n_sent(&self) -> u64 {
        self.inner.n_sent
    }
    #[getter]
    fn n_drop_queue(&self) -> u64 {
        self.inner.n_drop_queue
    }
    #[getter]
    fn n_drop_loss(&self) -> u64 {
        self.inner.n_drop_loss
    }
    #[getter]
    fn max_qbytes(&self) -> i64 {
        self.inner.max_qbytes
    }
}

enum Ev {
    Send(usize),
    Arrive(usize),
}

/// Run a send schedule through a link on the event list: each `(t_ns, size_bytes)` is an event at
/// its time; a packet that survives is an arrival event. Returns the arrivals as `(t_ns, index)` in
/// the order the events ran, and the drops as `(t_ns, index, reason)` (0 queue, 1 loss).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn run_link(link: &mut PyLink, sends: Vec<(i64, i64)>) -> (Vec<(i64, usize)>, Vec<(i64, usize, u8)>) {
    let mut ev: EventList<Ev> = EventList::new();
    for (i, &(t, _)) in sends.iter().enumerate() {
        ev.at(t, Ev::Send(i));
    }
    let (mut arrivals, mut drops) = (Vec::new(), Vec::new());
    // Up to 2^62 ns, the engine's "never": a packet held by capacity zero forever does not arrive.
    while let Some(e) = ev.pop_until(1 << 62) {
        match e {
            Ev::Send(i) => match link.inner.send(ev.now, sends[i].1) {
                Fate::QueueDrop => drops.push((ev.now, i, 0)),
                Fate::Lost { t_ns } => drops.push((t_ns, i, 1)),
                Fate::Arrives { t_ns } => ev.at(t_ns, Ev::Arrive(i)),
            },
            Ev::Arrive(i) => arrivals.push((ev.now, i)),
        }
    }
    (arrivals, drops)
}

/// The receive side's configuration (ConnReceiver's and every SubflowReceiver's arguments).
#[pyclass(name = "ReceiverConfig", module = "workbench_core", frozen)]
#[derive(Clone)]
struct PyReceiverConfig {
    rcv_buf_bytes: i64,
    wnd_init_bytes: Option<i64>,
    buf_init_bytes: Option<i64>,
    rcv_space_init_bytes: i64,
    mss_bytes: i64,
    delayed_ack: bool,
    delack_ns: i64,
    quickack_on_meta_ooo: bool,
    wnd_incr_bytes: i64,
    init_later: Vec<bool>,
}

#[pymethods]
impl PyReceiverConfig {
    #[new]
    #[pyo3(signature = (*, rcv_buf_bytes, wnd_init_bytes, buf_init_bytes, rcv_space_init_bytes, mss_bytes,
                        delayed_ack, delack_ns, quickack_on_meta_ooo, wnd_incr_bytes, init_later))]
    #[allow(clippy::too_many_arguments)]
    fn new(rcv_buf_bytes: i64, wnd_init_bytes: Option<i64>, buf_init_bytes: Option<i64>, rcv_space_init_bytes: i64,
           mss_bytes: i64, delayed_ack: bool, delack_ns: i64, quickack_on_meta_ooo: bool, wnd_incr_bytes: i64,
           init_later: Vec<bool>) -> Self {
        Self { rcv_buf_bytes, wnd_init_bytes, buf_init_bytes, rcv_space_init_bytes, mss_bytes, delayed_ack, delack_ns,
               quickack_on_meta_ooo, wnd_incr_bytes, init_later }
    }
}

enum RxEv {
    Data(usize),
    Init(usize),
    Delack(usize, u64),
}

type AckTuple = (i64, usize, i64, i64, i64, i64, i64);

fn ack_tuple(a: Ack) -> AckTuple {
    (a.t_snd_ns, a.sf, a.ack, a.sack, a.data_ack, a.rwnd, a.ts_ecr_ns)
}

/// Run arrivals through the receive side on the event list. `events` are `(t_ns, kind, sf, idx, dsn,
/// plen, t_snd_ns, ts_ecr_ns)`, kind 0 a data segment, 1 the subflow's handshake end
/// (init_buffer_space). Returns the ACKs as `(t_snd_ns, sf, ack, sack, data_ack, rwnd, ts_ecr_ns)` in
/// the order they were sent, the connection's final `(rcv_nxt, ooo_bytes, max_ooo_bytes, wnd_cap,
/// drs_space, wnd_sent_end)` and each subflow's `(rcv_nxt, rcv_ssthresh, wnd_cap, rcv_space,
/// rcv_rtt_us8, ts_recent_ns)`.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn run_receiver(cfg: &PyReceiverConfig, events: Vec<(i64, u8, usize, i64, i64, i64, i64, i64)>)
    -> PyResult<(Vec<AckTuple>, (i64, i64, i64, i64, i64, i64), Vec<(i64, i64, i64, i64, i64, i64)>)> {
    let meta = ConnReceiver::new(cfg.rcv_buf_bytes, cfg.wnd_init_bytes, cfg.buf_init_bytes, cfg.rcv_space_init_bytes,
                                 cfg.mss_bytes);
    let subflows = (0..cfg.init_later.len())
        .map(|k| SubflowReceiver::new(k, &meta, cfg.delayed_ack, cfg.delack_ns, cfg.quickack_on_meta_ooo,
                                      cfg.wnd_incr_bytes, cfg.init_later[k]))
        .collect();
    let mut rx = Receiver { meta, subflows };
    let n_sf = cfg.init_later.len();
    if let Some(e) = events.iter().find(|e| e.2 >= n_sf || e.1 > 1) {
        return Err(PyValueError::new_err(format!("event {e:?}: subflow or kind out of range")));
    }
    let mut ev: EventList<RxEv> = EventList::new();
    for (i, e) in events.iter().enumerate() {
        ev.at(e.0, if e.1 == 0 { RxEv::Data(i) } else { RxEv::Init(e.2) });
    }
    let mut acks = Vec::new();
    while let Some(e) = ev.pop_until(1 << 62) {
        let now = ev.now;
        let (out, k) = match e {
            RxEv::Data(i) => {
                let x = &events[i];
                let d = Data { sf: x.2, idx: x.3, dsn: x.4, plen: x.5, t_snd_ns: x.6, ts_ecr_ns: x.7 };
                (rx.on_data(&d, now), x.2)
            }
            RxEv::Init(k) => {
                rx.subflows[k].init_buffer_space();
                (Out::default(), k)
            }
            RxEv::Delack(k, gen) => (rx.on_delack(k, gen, now), k),
        };
        if let Some(a) = out.ack {
            acks.push(ack_tuple(a));
        }
        if let Some((t, gen)) = out.delack_at {
            ev.at(t, RxEv::Delack(k, gen));
        }
    }
    let m = &rx.meta;
    let meta_state = (m.rcv_nxt, m.ooo_bytes, m.max_ooo_bytes, m.wnd_cap, m.drs_space, m.wnd_sent_end);
    let sfs = rx.subflows.iter()
        .map(|r| (r.rcv_nxt, r.rcv_ssthresh, r.wnd_cap, r.rcv_space, r.rcv_rtt_us8, r.ts_recent_ns))
        .collect();
    Ok((acks, meta_state, sfs))
}

#[pymodule]
fn workbench_core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLink>()?;
    m.add_function(wrap_pyfunction!(run_link, m)?)?;
    m.add_class::<PyReceiverConfig>()?;
    m.add_function(wrap_pyfunction!(run_receiver, m)?)?;
    crate::py_cc::register(m)?;
    crate::py_engine::register(m)?;
    crate::py_arrow::register(m)?;
    Ok(())
}
