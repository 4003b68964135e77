//! The binding that runs a whole replay in the compiled engine: `workbench_core.run_model(...)`,
//! called by `workbench.replay.run` with everything resolved at the edge (link timelines and random
//! streams, routes, the connection settings, the handshake plan, a built-in scheduler by name and
//! parameters or a Python scheduler object run through the plug-in bridge (`py_sched`), the
//! workload). It returns the run's counters and, with `record=True`, the recorder's
//! columns (`py_arrow`).

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::cc::{self, CongestionControl};
use crate::engine::{Config, Engine, Ev, Hop, NetLink};
use crate::events::EventList;
use crate::link::Link;
use crate::mptcp::Conn;
use crate::mt::Mt19937;
use crate::receiver::{ConnReceiver, Receiver, SubflowReceiver};
use crate::py_sched::{self, SchedArg};
use crate::sched;
use crate::series::StepSeries;
use crate::tcp::Sender;
use crate::workload::Workload;

fn series(t_ns: Vec<i64>, values: Vec<f64>, what: &str) -> PyResult<StepSeries> {
    StepSeries::new(t_ns, values).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    d.get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("conn: missing {key}")))?
        .extract()
        .map_err(|e| PyValueError::new_err(format!("conn.{key}: {e}")))
}

/// One link: (name, rate_t_ns, rate_bps, owd_t_ns, owd_ns, loss_t_ns, loss, buffer_bytes, rng_state).
type LinkSpec = (String, Vec<i64>, Vec<f64>, Vec<i64>, Vec<f64>, Vec<i64>, Vec<f64>, i64, Vec<u32>);
/// One subflow's route: (path name, data link names, ACK link names, backup).
type RouteSpec = (String, Vec<String>, Vec<String>, bool);
fn build_links(links: Vec<LinkSpec>, routes: &[RouteSpec]) -> PyResult<(Vec<NetLink>, Vec<u32>, Vec<u32>)> {
    let index: HashMap<String, u32> = links.iter().enumerate().map(|(i, l)| (l.0.clone(), i as u32)).collect();
    let n_sf = routes.len();
    let mut net = Vec::with_capacity(links.len());
    for (name, rt, rv, ot, ov, lt, lv, buffer_bytes, state) in links {
        if state.len() != 625 {
            return Err(PyValueError::new_err(format!("link {name}: rng_state needs Random.getstate()[1]")));
        }
        let rng = Mt19937::from_state(&state[..624], state[624] as usize).map_err(PyValueError::new_err)?;
        let link = Link::new(series(rt, rv, &format!("{name} rate"))?, series(ot, ov, &format!("{name} owd"))?,
                             series(lt, lv, &format!("{name} loss"))?, buffer_bytes, rng);
        net.push(NetLink { name, link, hops: vec![Hop::Nowhere; n_sf], carries_data: false });
    }
    let (mut first_data, mut first_ack) = (Vec::new(), Vec::new());
    let mut roles: Vec<(bool, bool)> = vec![(false, false); net.len()];
    for (k, (path, data, ack, _)) in routes.iter().enumerate() {
        for (is_data, hops) in [(true, data), (false, ack)] {
            if hops.is_empty() {
                return Err(PyValueError::new_err(format!("route of subflow {k} ({path}) crosses no link")));
            }
            let ids = hops.iter()
                .map(|h| index.get(h).copied().ok_or_else(|| PyValueError::new_err(format!("no link {h}"))))
                .collect::<PyResult<Vec<u32>>>()?;
            for (i, &l) in ids.iter().enumerate() {
                let r = &mut roles[l as usize];
                if is_data { r.0 = true } else { r.1 = true }
                if r.0 && r.1 {
                    return Err(PyValueError::new_err(format!(
                        "link {} would carry data and ACKs: give each direction its own link", net[l as usize].name)));
                }
                if net[l as usize].hops[k] != Hop::Nowhere {
                    return Err(PyValueError::new_err(format!("route of subflow {k} crosses link {} twice",
                                                             net[l as usize].name)));
                }
                net[l as usize].hops[k] = if i + 1 < ids.len() { Hop::Next(ids[i + 1]) } else { Hop::End };
                net[l as usize].carries_data = is_data;
            }
            if is_data { first_data.push(ids[0]) } else { first_ack.push(ids[0]) }
        }
    }
    Ok((net, first_data, first_ack))
}

/// A workload: (kind, stop_ns, size or segments, idle_ns, n_bursts, writes).
type WorkloadSpec = (String, Option<i64>, i64, i64, i64, Vec<(i64, i64)>);

fn workload(spec: WorkloadSpec) -> PyResult<Workload> {
    let (kind, a, b, c, d, writes) = spec;
    Ok(match kind.as_str() {
        "bulk" => Workload::Bulk { stop_ns: a, finished: false },
        "finite" => Workload::Finite { size_bytes: b, written: 0, finished: false },
        "bursts" => Workload::Bursts { segments: b, idle_ns: c, n_bursts: d, done_bursts: 0, pending: 0,
                                       finished: false },
        "apptrace" => Workload::AppTrace { writes, pending: 0, n_done: 0, finished: false },
        _ => return Err(PyValueError::new_err(format!("unknown workload {kind}"))),
    })
}

/// Run one replay. `setup` is the handshake plan (`workbench.replay.run._setup_plan`), scheduled in
/// its order, which breaks ties at one instant:
/// `(kind, t_ns, subflow, value)`, kind "init" (the receiver's buffer set-up) or "establish" (value:
/// the handshake RTT, ns). `scheduler`: `(name, params, [inner])` of a built-in, or a Python
/// `Scheduler` object (bridged; an exception it raises stops the run and is raised here). Returns a
/// dict of counters and, with `record`, "recorder".
#[pyfunction]
#[pyo3(signature = (*, links, routes, conn, cc_name, hystart, scheduler, workload_spec, setup, ts_ack_ns, drs_t_ns,
                    until_ns, record))]
#[allow(clippy::too_many_arguments)]
fn run_model<'py>(py: Python<'py>, links: Vec<LinkSpec>, routes: Vec<RouteSpec>, conn: &Bound<'py, PyDict>,
                  cc_name: &str, hystart: bool, scheduler: SchedArg,
                  workload_spec: WorkloadSpec,
                  setup: Vec<(String, i64, usize, i64)>, ts_ack_ns: Vec<Option<i64>>, drs_t_ns: i64, until_ns: i64,
                  record: bool) -> PyResult<Bound<'py, PyDict>> {
    let n_sf = routes.len();
    if n_sf == 0 || n_sf > 64 {
        return Err(PyValueError::new_err("a replay needs 1 to 64 subflows"));
    }
    let (net, first_data, first_ack) = build_links(links, &routes)?;
    let cfg = Config {
        mss_bytes: get(conn, "mss_bytes")?,
        header_bytes: get(conn, "header_bytes")?,
        ack_bytes: get(conn, "ack_bytes")?,
        sample_interval_ns: get(conn, "sample_interval_ns")?,
    };
    // the recorder keeps payloads in 2 bytes and windows and buffer occupancies in 4
    let rcv_buf: i64 = get(conn, "rcv_buf_bytes")?;
    let snd_buf: Option<i64> = get(conn, "send_buf_bytes")?;
    if cfg.mss_bytes >= 1 << 16 || rcv_buf >= 1 << 32 || snd_buf.is_some_and(|b| b >= 1 << 30) {
        return Err(PyValueError::new_err(
            "the compiled engine takes an MSS below 64 KiB, a receive buffer below 4 GiB and a send buffer below 1 GiB"));
    }
    let (sched, bridge) = match scheduler {
        SchedArg::Spec(spec) => (sched::build_spec(&spec).map_err(PyValueError::new_err)?, None),
        SchedArg::Py(obj) => {
            let (s, b) = py_sched::bridge(py, obj, record)?;
            (s, Some(b))
        }
    };
    let fl = sched.flavour();
    let reinject_on_rto: Option<bool> = get(conn, "reinject_on_subflow_rto")?;
    let rcv_buf_bytes: i64 = get(conn, "rcv_buf_bytes")?;
    let meta = ConnReceiver::new(rcv_buf_bytes, get(conn, "rcv_wnd_init_bytes")?, get(conn, "rcv_buf_init_bytes")?,
                                 get(conn, "rcv_space_init_bytes")?, cfg.mss_bytes);
    let wnd_init = meta.wnd_init;
    let handshake: bool = get(conn, "handshake")?;
    let wnd_incr: i64 = match get::<Option<i64>>(conn, "rcv_wnd_init_bytes")? {
        None => 0,
        Some(_) => 2 * get::<i64>(conn, "tcp_mss_bytes")?,
    };
    let (delayed_ack, delack_ns, quick): (bool, i64, bool) =
        (get(conn, "delayed_ack")?, get(conn, "delack_ns")?, get(conn, "quickack_on_meta_ooo")?);
    let subflows = (0..n_sf)
        .map(|k| SubflowReceiver::new(k, &meta, delayed_ack, delack_ns, quick, wnd_incr, handshake && k > 0))
        .collect();
    let mut rx = Receiver { meta, subflows };
    rx.meta.drs_t_ns = drs_t_ns;
    let (init_cwnd, rto_min_ns): (i64, i64) = (get(conn, "init_cwnd")?, get(conn, "rto_min_ns")?);
    let mut sfs = Vec::with_capacity(n_sf);
    for (k, r) in routes.iter().enumerate() {
        let mut s = Sender::new(k, r.0.clone(), first_data[k], cfg.mss_bytes, cfg.header_bytes, init_cwnd,
                                rto_min_ns, r.3);
        if let Some(t) = ts_ack_ns.get(k).copied().flatten() {
            s.ts_ack_ns = t;
        }
        sfs.push(s);
    }
    let cc = CongestionControl::from_name(cc_name, hystart).map_err(PyValueError::new_err)?;
    let sched_on_ack = sched.wants_on_ack();
    let sched_on_applied = sched.wants_on_applied();
    let mut ev = EventList::new();
    ev.add_lanes(net.len());
    let mut e = Engine {
        ev,
        stopped: false,
        links: net,
        ack_links: first_ack,
        ccs: (0..n_sf).map(|_| cc::Subflow::new(init_cwnd)).collect(),
        sfs,
        cc,
        conn: Conn::new(cfg.mss_bytes, get(conn, "send_buf_bytes")?, wnd_init,
                        reinject_on_rto.unwrap_or(fl.reinject_on_subflow_rto), fl.meta_rto_factor, fl.upstream_retrans),
        rx,
        rec: if record { Some(Box::default()) } else { None },
        sched: Some(sched),
        sched_on_ack,
        sched_on_applied,
        views: (0..n_sf).collect(),
        wl: workload(workload_spec)?,
        cfg,
    };
    // run_network's order: the scheduler's start, the workload's start, the handshake plan, the sampler
    e.conn.keep_acked = bridge.is_some();
    let mut s = e.sched.take().expect("scheduler");
    let views = e.views.clone();
    s.on_start(&mut e, &views);
    e.sched = Some(s);
    if let Some(b) = &bridge {
        b.check()?; // on_start raised
    }
    e.wl_start(0);
    for (kind, t, k, v) in setup {
        if k >= n_sf {
            return Err(PyValueError::new_err(format!("setup: subflow {k} out of range")));
        }
        match kind.as_str() {
            "init" => e.ev.at(t, Ev::InitBuffer { k: k as u32 }),
            "establish" => e.ev.at(t, Ev::Establish { k: k as u32, rtt_ns: v }),
            _ => return Err(PyValueError::new_err(format!("setup: unknown kind {kind}"))),
        }
    }
    if record && e.cfg.sample_interval_ns > 0 {
        e.ev.at(0, Ev::Sample);
    }
    let wall0 = std::time::Instant::now();
    py.allow_threads(|| e.run(until_ns));
    if let Some(b) = &bridge {
        b.check()?; // the plug-in raised: that exception, the run discarded
    }
    let wall_s = wall0.elapsed().as_secs_f64();
    result(py, e, wall_s)
}

fn result<'py>(py: Python<'py>, mut e: Engine, wall_s: f64) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("now_ns", e.ev.now)?;
    d.set_item("wall_s", wall_s)?;
    d.set_item("events", e.ev.n_events)?;
    d.set_item("done", e.conn.done)?;
    d.set_item("done_ns", e.conn.done_ns)?;
    d.set_item("rcv_nxt", e.rx.meta.rcv_nxt)?;
    d.set_item("delivered_t_ns", e.rx.meta.delivered_t_ns)?;
    d.set_item("max_ooo_bytes", e.rx.meta.max_ooo_bytes)?;
    let c = &e.conn;
    d.set_item("reinjections", c.n_reinjected)?;
    d.set_item("opportunistic_retransmissions", c.n_opportunistic)?;
    d.set_item("penalizations", c.n_penalized)?;
    d.set_item("meta_rto", c.n_meta_rto)?;
    d.set_item("decisions", c.n_decisions)?;
    d.set_item("segment_state_bytes", e.segment_state_bytes())?;
    let links: Vec<(String, u64, u64, i64, i64)> = e.links.iter()
        .map(|l| (l.name.clone(), l.link.n_drop_queue, l.link.n_drop_loss, l.link.max_qbytes, l.link.buffer_bytes))
        .collect();
    d.set_item("links", links)?;
    let sfs = PyDict::new(py);
    for (s, cc) in e.sfs.iter().zip(&e.ccs) {
        let x = PyDict::new(py);
        x.set_item("name", &s.name)?;
        x.set_item("data_link", e.links[s.data_link as usize].name.clone())?;
        x.set_item("n_sent", s.n_sent)?;
        x.set_item("sent_bytes", s.seq_of(cc.nxt) - 1)?;
        x.set_item("acked_bytes", cc.una_bytes - 1)?;
        x.set_item("n_retrans", s.n_retrans)?;
        x.set_item("n_rto", s.n_rto)?;
        x.set_item("n_rto_undone", s.n_rto_undone)?;
        x.set_item("n_fast_recoveries", s.n_fast_recoveries)?;
        x.set_item("cwnd", cc.cwnd)?;
        x.set_item("srtt_us8", cc.srtt_us8)?;
        x.set_item("hystart_exits", cc.hystart_exits)?;
        x.set_item("n_lost_retrans", s.n_lost_retrans)?;
        x.set_item("n_tlp", s.n_tlp)?;
        sfs.set_item(s.index, x)?;
    }
    d.set_item("subflows", sfs)?;
    if let Some(mut rec) = e.rec.take() {
        rec.shrink();
        d.set_item("recorder_bytes", rec.allocated_bytes())?;
        d.set_item("recorder_rows", rec.rows())?;
        d.set_item("recorder", crate::py_arrow::recorder_to_python(py, *rec)?)?;
    }
    Ok(d)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_model, m)?)?;
    m.add_function(wrap_pyfunction!(compiled_schedulers, m)?)?;
    py_sched::register(m)?;
    Ok(())
}

/// The scheduler names the compiled engine runs natively.
#[pyfunction]
fn compiled_schedulers() -> Vec<&'static str> {
    sched::NAMES.to_vec()
}
