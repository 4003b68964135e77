//! Python bindings of the congestion controls (`crate::cc`): `workbench_core.CcGroup`, one
//! connection's congestion control and the CC-visible fields of its subflows, so that Python can
//! drive it call by call and read every field after every call: `tests/test_core_cc.py` (worked
//! examples of the kernel's and the RFCs' formulas, invariants) and the conformance suite
//! (`workbench.testing.check_congestion_control`).

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::cc::{CcState, CongestionControl, CubicState, Subflow};

/// A congestion control (`CongestionControl::from_name(name, hystart)`) with its group of
/// `n_subflows` subflows, each as a new sender starts it (`cc::Subflow::new`) with cwnd `init_cwnd`.
#[pyclass(name = "CcGroup", module = "workbench_core")]
struct PyCcGroup {
    cc: CongestionControl,
    group: Vec<Subflow>,
}

#[pymethods]
impl PyCcGroup {
    #[new]
    #[pyo3(signature = (name, n_subflows, *, hystart = true, init_cwnd = 10))]
    fn new(name: &str, n_subflows: usize, hystart: bool, init_cwnd: i64) -> PyResult<Self> {
        let cc = CongestionControl::from_name(name, hystart).map_err(PyValueError::new_err)?;
        Ok(Self { cc, group: vec![Subflow::new(init_cwnd); n_subflows] })
    }

    fn __len__(&self) -> usize {
        self.group.len()
    }

    /// Set fields of subflow `idx` (those not given keep their values).
    #[pyo3(signature = (idx, *, cwnd = None, ssthresh = None, cwnd_cnt = None, min_rtt_us = None, srtt_us8 = None,
                        una = None, nxt = None, una_bytes = None, established = None))]
    #[allow(clippy::too_many_arguments)]
    fn set(&mut self, idx: usize, cwnd: Option<i64>, ssthresh: Option<i64>, cwnd_cnt: Option<f64>,
           min_rtt_us: Option<i64>, srtt_us8: Option<i64>, una: Option<i64>, nxt: Option<i64>,
           una_bytes: Option<i64>, established: Option<bool>) -> PyResult<()> {
        let sf = self.subflow_mut(idx)?;
        let ints = [(&mut sf.cwnd, cwnd), (&mut sf.ssthresh, ssthresh), (&mut sf.min_rtt_us, min_rtt_us),
                    (&mut sf.srtt_us8, srtt_us8), (&mut sf.una, una), (&mut sf.nxt, nxt),
                    (&mut sf.una_bytes, una_bytes)];
        for (field, value) in ints {
            if let Some(v) = value {
                *field = v;
            }
        }
        if let Some(v) = cwnd_cnt {
            sf.cwnd_cnt = v;
        }
        if let Some(v) = established {
            sf.established = v;
        }
        Ok(())
    }

    /// Every field of subflow `idx` as a dict named as on `cc::Subflow`; `cc_state` is None,
    /// OLIA's loss record as a list, or CUBIC's state as a dict named as `cc::CubicState`'s fields.
    fn subflow<'py>(&self, py: Python<'py>, idx: usize) -> PyResult<Bound<'py, PyDict>> {
        let sf = self.group.get(idx).ok_or_else(|| out_of_range(idx))?;
        let d = PyDict::new(py);
        d.set_item("cwnd", sf.cwnd)?;
        d.set_item("ssthresh", sf.ssthresh)?;
        d.set_item("cwnd_cnt", sf.cwnd_cnt)?;
        d.set_item("min_rtt_us", sf.min_rtt_us)?;
        d.set_item("srtt_us8", sf.srtt_us8)?;
        d.set_item("una", sf.una)?;
        d.set_item("nxt", sf.nxt)?;
        d.set_item("una_bytes", sf.una_bytes)?;
        d.set_item("established", sf.established)?;
        d.set_item("hystart_exits", sf.hystart_exits)?;
        let cc_state = match &sf.cc_state {
            CcState::Unset => py.None().into_bound(py),
            CcState::OliaLosses(l) => PyList::new(py, l)?.into_any(),
            CcState::Cubic(st) => cubic_dict(py, st)?.into_any(),
        };
        d.set_item("cc_state", cc_state)?;
        Ok(d)
    }

    fn cong_avoid(&mut self, idx: usize, acked: i64, now_ns: i64) -> PyResult<()> {
        self.check(idx)?;
        self.cc.cong_avoid(&mut self.group, idx, acked, now_ns);
        Ok(())
    }

    fn ssthresh(&mut self, idx: usize) -> PyResult<i64> {
        self.check(idx)?;
        Ok(self.cc.ssthresh(&mut self.group, idx))
    }

    fn on_rtt(&mut self, idx: usize, rtt_us: i64, now_ns: i64) -> PyResult<()> {
        self.check(idx)?;
        self.cc.on_rtt(&mut self.group, idx, rtt_us, now_ns);
        Ok(())
    }

    fn on_state(&mut self, idx: usize, state: i64, now_ns: i64) -> PyResult<()> {
        self.check(idx)?;
        self.cc.on_state(&mut self.group, idx, state, now_ns);
        Ok(())
    }
}

impl PyCcGroup {
    // An index past the group would panic inside the CC; Python gets an IndexError instead.
    fn check(&self, idx: usize) -> PyResult<()> {
        if idx < self.group.len() {
            Ok(())
        } else {
            Err(out_of_range(idx))
        }
    }

    fn subflow_mut(&mut self, idx: usize) -> PyResult<&mut Subflow> {
        self.group.get_mut(idx).ok_or_else(|| out_of_range(idx))
    }
}

fn out_of_range(idx: usize) -> PyErr {
    PyIndexError::new_err(format!("subflow {idx} out of range"))
}

fn cubic_dict<'py>(py: Python<'py>, st: &CubicState) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("ack_cnt", st.ack_cnt)?;
    d.set_item("cnt", st.cnt)?;
    d.set_item("epoch_start", st.epoch_start)?;
    d.set_item("k", st.k)?;
    d.set_item("last_cwnd", st.last_cwnd)?;
    d.set_item("last_max_cwnd", st.last_max_cwnd)?;
    d.set_item("last_time", st.last_time)?;
    d.set_item("origin", st.origin)?;
    d.set_item("tcp_cwnd", st.tcp_cwnd)?;
    d.set_item("delay_min_us", st.delay_min_us)?;
    d.set_item("round_start_us", st.round_start_us)?;
    d.set_item("last_ack_us", st.last_ack_us)?;
    d.set_item("round_end_idx", st.round_end_idx)?;
    d.set_item("curr_rtt_us", st.curr_rtt_us)?;
    d.set_item("sample_cnt", st.sample_cnt)?;
    d.set_item("found", st.found)?;
    Ok(d)
}

/// Add `CcGroup` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCcGroup>()
}
