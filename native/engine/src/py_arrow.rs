//! PLACEHOLDER until the Arrow export lands: the recorder's columns as Python lists (a copy).
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::record::{ObsValue, Recorder};

pub(crate) fn recorder_to_python<'py>(py: Python<'py>, rec: Recorder) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let s = PyDict::new(py);
    let c = &rec.snd;
    s.set_item("t_ns", &c.t_ns)?;
    s.set_item("subflow", &c.subflow)?;
    s.set_item("seq", &c.seq)?;
    s.set_item("payload_bytes", &c.payload_bytes)?;
    s.set_item("dsn", &c.dsn)?;
    s.set_item("is_retrans", &c.is_retrans)?;
    s.set_item("is_reinject", &c.is_reinject)?;
    d.set_item("snd", s)?;
    let s = PyDict::new(py);
    let c = &rec.rcv.snd;
    s.set_item("t_ns", &c.t_ns)?;
    s.set_item("subflow", &c.subflow)?;
    s.set_item("seq", &c.seq)?;
    s.set_item("payload_bytes", &c.payload_bytes)?;
    s.set_item("dsn", &c.dsn)?;
    s.set_item("is_retrans", &c.is_retrans)?;
    s.set_item("is_reinject", &c.is_reinject)?;
    s.set_item("owd_ns", &rec.rcv.owd_ns)?;
    d.set_item("rcv", s)?;
    let s = PyDict::new(py);
    let c = &rec.drop;
    s.set_item("t_ns", &c.t_ns)?;
    s.set_item("subflow", &c.subflow)?;
    s.set_item("is_data", &c.is_data)?;
    s.set_item("seq_or_ack", &c.seq_or_ack)?;
    s.set_item("payload_bytes", &c.payload_bytes)?;
    s.set_item("dsn", &c.dsn)?;
    s.set_item("is_retrans", &c.is_retrans)?;
    s.set_item("is_reinject", &c.is_reinject)?;
    s.set_item("reason", &c.reason)?;
    d.set_item("drop", s)?;
    let s = PyDict::new(py);
    let c = &rec.ack;
    s.set_item("t_ns", &c.t_ns)?;
    s.set_item("subflow", &c.subflow)?;
    s.set_item("ack_seq", &c.ack_seq)?;
    s.set_item("data_ack", &c.data_ack)?;
    s.set_item("rwnd_bytes", &c.rwnd_bytes)?;
    s.set_item("has_sack", &c.has_sack)?;
    s.set_item("owd_ns", &c.owd_ns)?;
    d.set_item("ack", s)?;
    let s = PyDict::new(py);
    let c = &rec.samples;
    s.set_item("t_ns", &c.t_ns)?;
    s.set_item("is_periodic", &c.is_periodic)?;
    s.set_item("subflow", &c.subflow)?;
    s.set_item("cwnd", &c.cwnd)?;
    s.set_item("inflight", &c.inflight)?;
    s.set_item("srtt_ns", &c.srtt_ns)?;
    s.set_item("queued_bytes", &c.queued_bytes)?;
    s.set_item("snd_buf_bytes", &c.snd_buf_bytes)?;
    s.set_item("rcv_ooo_bytes", &c.rcv_ooo_bytes)?;
    d.set_item("samples", s)?;
    let obs: Vec<PyObject> = rec.observations.iter().map(|(t, k, sf, v)| {
        let v: PyObject = match v {
            ObsValue::Int(x) => x.into_pyobject(py).unwrap().into_any().unbind(),
            ObsValue::Float(x) => x.into_pyobject(py).unwrap().into_any().unbind(),
            ObsValue::Label(x) => x.into_pyobject(py).unwrap().into_any().unbind(),
        };
        (*t, *k, *sf, v).into_pyobject(py).unwrap().into_any().unbind()
    }).collect();
    d.set_item("observations", obs)?;
    Ok(d)
}
