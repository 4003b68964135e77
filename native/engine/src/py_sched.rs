//! The plug-in bridge: any Python `workbench.schedulers.base.Scheduler` (a user's own class, a
//! built-in without a compiled port, a `Layer` over one, the conformance suite's `_Probe`, or with
//! `engine="bridge"` a ported built-in's own Python class) runs inside the compiled engine as a Rust
//! `Scheduler` (`PyScheduler`), called back with the GIL for every `select`, `on_start`, `on_ack`,
//! `on_loss`, `on_timer` and `on_applied`, exactly where the engine calls a compiled scheduler and
//! with the same arguments. So a built-in's Python class run through the bridge gives its compiled
//! port's run, event for event (tests/test_core_plugin_bridge.py and tests/test_core_sched_*.py hold
//! every port to its class that way), and any bridged run is the same every time.
//!
//! What the scheduler is shown: one `ConnView` and one `SubflowView` per subflow (pyclasses), with
//! every attribute and method of the protocols in `workbench/schedulers/base.py`, each value of the
//! protocol's type (int, float, bool; `reinject_queue` a tuple). The `subflows` list is one Python
//! list, built once and passed to every call (`on_loss` gets that list's item for its subflow).
//!
//! Live view, not a snapshot. The views read the engine through a raw pointer that is set for the
//! duration of each call into Python and cleared after it (`Bridge::ptr`); reading a view outside a
//! call raises RuntimeError instead of reading freed or moving state. Why live:
//!   * exactness: `penalize`, `drop_reinject` and `wake_at` act on the engine at once and what the
//!     scheduler reads next sees it (minRTT reads cwnd after penalizing), `nth_unsent` prunes the
//!     sent head as it searches; a snapshot would have to be refreshed after every action to stay
//!     right;
//!   * cost: a decision reads a handful of the ~25 subflow fields (minRTT: 6 per subflow) and a few
//!     of the connection's. A snapshot copies all of them for every subflow at every call (about as
//!     many Python objects as fields), a live view converts only what is read. The view objects
//!     themselves are made once per run and reused (identity is stable: a scheduler may key a dict
//!     by them).
//!
//! Batching decisions (several per GIL acquisition) would change when the scheduler sees the state
//! (each decision is applied before the next `select`), so every decision is one call.
//!
//! Safety of the pointer: the engine is borrowed mutably by the `Scheduler` call that holds the GIL;
//! Rust does not touch the engine while Python runs, every access from Python holds the GIL (so
//! never two at once), and the pointer is null outside the call. The engine runs with the GIL
//! released (`py.allow_threads`) and each call takes it back (`Python::with_gil`).
//!
//! Errors: an exception raised by the plug-in (or by a malformed decision: the TypeError or
//! IndexError that reading it raises, see `decode`) is kept, the scheduler is not called again and
//! the run stops at the end of the current event; `run_model` then raises that same exception object.
//!
//! Writes. A scheduler must treat the views as read-only (the conformance suite, workbench/testing.py,
//! reports a write and lets the run go on), but a write to a protocol attribute that is a plain
//! field (the connection's `wnd_end`, `send_buf_bytes`, `send_buffer_full`, `recovery`; a subflow's
//! flags, RTT, window, counters, `last_ack_ns` and `rate_bps`) writes the engine's field, after a type
//! check (int, bool, float), and the run goes on from there. Not written (AttributeError): the
//! computed properties (`now_ns`, `rto_ns`, ...), the fields that hold the segment tables together
//! (`head`, `n_segs`, `snd_una`, `write_seq`, `reinject_head`, the `mss`es) and a subflow's identity
//! (`index`, `name`): a write there would leave the engine inconsistent, and it could only panic.
//!
//! Limits, all for schedulers that step outside the protocol: the views have only the protocol's
//! attributes (AttributeError for any other name, such as `m_dsn` or `una`, read or written; no
//! `__getattr__` to word it better: that slot would cost every attribute read ~10 ns, measured 17% of
//! the bridge's cost); `ca_state` holds 0..=255; integer arguments and fields hold what fits an i64
//! (OverflowError beyond); the flavour attributes (`reinject_on_subflow_rto`, `meta_rto_factor`,
//! `meta_retrans`) are read once at the start of the run.
//!
//! Cost (benchmarks/bench_plugin.py, the bench scenario, 347k scheduler calls, CPU time): Python
//! minRTT through the bridge takes 1.48 µs per call, 1.37 µs above the compiled minRTT (0.11 µs). Of
//! the 1.37 µs, 0.33 µs is the crossing itself (taking the GIL, the call, reading the decision back:
//! a scheduler that replays minRTT's decisions without reading anything) and about 1 µs is minRTT's
//! own code, mostly its ~25 view reads of ~40 ns each (a pyo3 getter: trampoline, type check, the
//! read).

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyAttributeError, PyIndexError, PyOverflowError, PyRuntimeError, PyTypeError,
                        PyZeroDivisionError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

use crate::engine::{Engine, LossKind};
use crate::record::{ObsValue, PyObs};
use crate::sched::{Decision, Flavour, Scheduler};

const STALE: &str = "is only valid during the scheduler call it was passed to (the compiled engine shows \
                     its live state through it): read what you need inside the call and keep plain values";

/// What a run shares between the bridged scheduler, its views and `run_model`: the engine while a
/// call into Python is under way (null otherwise) and the first exception the plug-in raised.
pub struct Bridge {
    ptr: AtomicPtr<Engine>,
    error: Mutex<Option<PyErr>>,
}

impl Bridge {
    /// The engine, or RuntimeError when no call is under way.
    #[inline]
    fn engine(&self, what: &str) -> PyResult<*mut Engine> {
        let p = self.ptr.load(Ordering::Relaxed);
        if p.is_null() {
            Err(PyRuntimeError::new_err(format!("this {what} {STALE}")))
        } else {
            Ok(p)
        }
    }

    /// Raise what the plug-in raised, if it did.
    pub fn check(&self) -> PyResult<()> {
        match self.error.lock().expect("bridge error lock").take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Read the engine from a view (the pointer is valid: see the module comment). The reference lives
/// for one getter, during which no Python code runs (arguments are parsed before it is taken).
macro_rules! eng {
    ($self:ident, $what:literal) => {
        // SAFETY: non-null only during a call into Python, with the GIL held (module comment)
        unsafe { &*$self.bridge.engine($what)? }
    };
    ($p:ident) => {
        // SAFETY: as above, `$p` from `Bridge::engine` in this same method
        unsafe { &*$p }
    };
}

macro_rules! eng_mut {
    ($p:ident) => {
        // SAFETY: as `eng!`; the engine is not otherwise borrowed while Python runs
        unsafe { &mut *$p }
    };
}

/// An integer argument as Python's list indexing and comparisons see it.
enum IntArg {
    Small(i64),
    /// Beyond i64 (a Python int is unbounded), with its sign.
    Big(bool),
}

/// `o` as an integer (via `__index__`), None if it is not one.
fn int_arg(o: &Bound<'_, PyAny>) -> PyResult<Option<IntArg>> {
    match o.extract::<i64>() {
        Ok(v) => Ok(Some(IntArg::Small(v))),
        Err(e) if e.is_instance_of::<PyOverflowError>(o.py()) => {
            let i = o.py().get_type::<PyInt>().call1((o,))?;
            Ok(Some(IntArg::Big(i.gt(0)?)))
        }
        Err(e) if e.is_instance_of::<PyTypeError>(o.py()) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `o` as an index into a Python list (`list[o]`'s TypeError for anything but an integer). Arguments
/// are parsed before the engine is read: `__index__` may run Python code, which may use the views.
fn index_arg(o: &Bound<'_, PyAny>) -> PyResult<IntArg> {
    int_arg(o)?.ok_or_else(|| PyTypeError::new_err(format!("list indices must be integers or slices, not {}",
                                                           type_name(o))))
}

/// An index into a list of `n` items: negative counts from the end; IndexError as `list[i]` raises it.
fn resolve(a: IntArg, n: i64) -> PyResult<i64> {
    match a {
        IntArg::Small(mut i) => {
            if i < 0 {
                i += n;
            }
            if (0..n).contains(&i) {
                Ok(i)
            } else {
                Err(PyIndexError::new_err("list index out of range"))
            }
        }
        IntArg::Big(_) => Err(PyIndexError::new_err("cannot fit 'int' into an index-sized integer")),
    }
}

/// An integer argument of a typed method (`t_ns: int`): TypeError for anything else.
fn int_required(o: &Bound<'_, PyAny>, what: &str) -> PyResult<IntArg> {
    int_arg(o)?.ok_or_else(|| PyTypeError::new_err(format!("{what} must be an int, not {}", type_name(o))))
}

/// The connection view's computed properties: never written (AttributeError, as for a property
/// without a setter).
const CONN_READ_ONLY: &[&str] = &["now_ns", "unsent_bytes", "oldest_unacked", "reinject_queue", "rcv_ooo_bytes"];
/// Fields of the connection's and a subflow's structure: a write would corrupt the segment tables
/// (the engine could only panic somewhere later), so they are not written.
const STRUCTURE: &[&str] = &["head", "n_segs", "snd_una", "write_seq", "reinject_head", "mss", "index", "name"];
const SF_READ_ONLY: &[&str] = &["in_slow_start", "rttvar_ns", "min_rtt_ns", "rto_ns", "unacked_bytes",
                                 "pacing_rate_bps", "sndbuf_segments"];

fn not_writable(class: &str, name: &str, properties: &[&str]) -> PyErr {
    if properties.contains(&name) {
        PyAttributeError::new_err(format!("attribute '{name}' of '{class}' objects is not writable"))
    } else if STRUCTURE.contains(&name) {
        PyAttributeError::new_err(format!("'{class}' object attribute '{name}' is the engine's structure: not \
                                           written through the compiled engine's view"))
    } else {
        PyAttributeError::new_err(format!("'{class}' object attribute '{name}' cannot be set through the compiled \
                                           engine's view"))
    }
}

fn type_name(o: &Bound<'_, PyAny>) -> String {
    o.get_type().name().map(|n| n.to_string()).unwrap_or_default()
}

/// A value written to a view's field, type-checked as a typed attribute is (`set_int`, `set_bool`,
/// `set_float`).
enum Field {
    Int(i64),
    Bool(bool),
    Float(f64),
}

/// A value for an `int` attribute (a bool is one, a float is not).
fn set_int(o: &Bound<'_, PyAny>) -> PyResult<i64> {
    if !o.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!("int object expected; got {}", type_name(o))));
    }
    o.extract()
}

fn set_bool(o: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !o.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!("bool object expected; got {}", type_name(o))));
    }
    o.extract()
}

/// A value for a `float` attribute (an int is converted).
fn set_float(o: &Bound<'_, PyAny>) -> PyResult<f64> {
    if !o.is_instance_of::<PyFloat>() && !o.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!("float object expected; got {}", type_name(o))));
    }
    o.extract()
}

// ------------------------------------------------------------------------------------------ views

/// The connection as a scheduler sees it (`workbench.schedulers.base.ConnView`), live.
#[pyclass(frozen, module = "workbench_core", name = "ConnView")]
pub struct ConnView {
    bridge: Arc<Bridge>,
}

#[pymethods]
impl ConnView {
    #[getter]
    fn now_ns(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").ev.now)
    }
    #[getter]
    fn mss(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.mss)
    }
    #[getter]
    fn snd_una(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.snd_una)
    }
    #[getter]
    fn write_seq(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.write_seq)
    }
    #[getter]
    fn wnd_end(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.wnd_end)
    }
    #[getter]
    fn send_buf_bytes(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.send_buf_bytes)
    }
    #[getter]
    fn send_buffer_full(&self) -> PyResult<bool> {
        Ok(eng!(self, "ConnView").conn.send_buffer_full)
    }
    #[getter]
    fn unsent_bytes(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.unsent_bytes())
    }
    #[getter]
    fn head(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.head)
    }
    #[getter]
    fn n_segs(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.n_segs())
    }
    #[getter]
    fn oldest_unacked(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.oldest_unacked())
    }
    #[getter]
    fn reinject_head(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").conn.reinject_head)
    }
    #[getter]
    fn recovery(&self) -> PyResult<bool> {
        Ok(eng!(self, "ConnView").conn.recovery)
    }
    #[getter]
    fn reinject_queue<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &eng!(self, "ConnView").conn.reinject)
    }
    #[getter]
    fn rcv_ooo_bytes(&self) -> PyResult<i64> {
        Ok(eng!(self, "ConnView").rx.meta.ooo_bytes)
    }

    fn seg_dsn(&self, seg: &Bound<'_, PyAny>) -> PyResult<i64> {
        let (p, a) = (self.bridge.engine("ConnView")?, index_arg(seg)?);
        let c = &eng!(p).conn;
        Ok(c.seg_dsn(resolve(a, c.n_segs())?))
    }
    fn seg_len(&self, seg: &Bound<'_, PyAny>) -> PyResult<i64> {
        let (p, a) = (self.bridge.engine("ConnView")?, index_arg(seg)?);
        let c = &eng!(p).conn;
        Ok(c.seg_len(resolve(a, c.n_segs())?))
    }
    fn seg_path_mask(&self, seg: &Bound<'_, PyAny>) -> PyResult<u64> {
        let (p, a) = (self.bridge.engine("ConnView")?, index_arg(seg)?);
        let c = &eng!(p).conn;
        Ok(c.seg_path_mask(resolve(a, c.n_segs())?))
    }
    fn seg_sent(&self, seg: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (p, a) = (self.bridge.engine("ConnView")?, index_arg(seg)?);
        let c = &eng!(p).conn;
        Ok(c.seg_sent(resolve(a, c.n_segs())?))
    }
    fn window_allows(&self, seg: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (p, a) = (self.bridge.engine("ConnView")?, index_arg(seg)?);
        let c = &eng!(p).conn;
        Ok(c.window_allows(resolve(a, c.n_segs())?))
    }
    /// `Conn::nth_unsent` (a binary search that prunes the sent head first), for any int `n` (beyond
    /// ±2^40 its answer is known: the end for a large n, head + n for a very negative one).
    fn nth_unsent(&self, py: Python<'_>, n: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        const FAR: i64 = 1 << 40;
        let (p, a) = (self.bridge.engine("ConnView")?, int_required(n, "n")?);
        let c = &mut eng_mut!(p).conn;
        let out = match a {
            IntArg::Small(v) if (-FAR..=FAR).contains(&v) => c.nth_unsent(v),
            IntArg::Small(v) if v > 0 => c.n_segs(),
            IntArg::Big(true) => c.n_segs(),
            _ => {
                c.nth_unsent(0); // prunes the sent head, as every search does
                let head = c.head;
                return Ok(head.into_pyobject(py)?.add(n)?.unbind()); // unbounded, as a Python int
            }
        };
        Ok(out.into_pyobject(py)?.into_any().unbind())
    }
    fn seg_at_dsn(&self, dsn: &Bound<'_, PyAny>) -> PyResult<i64> {
        let (p, a) = (self.bridge.engine("ConnView")?, int_required(dsn, "dsn")?);
        let c = &eng!(p).conn;
        Ok(match a {
            IntArg::Small(v) => c.seg_at_dsn(v),
            IntArg::Big(pos) => if pos { c.n_segs() } else { 0 },
        })
    }
    fn penalize(&self, subflow: &Bound<'_, PyAny>) -> PyResult<()> {
        let (p, a) = (self.bridge.engine("ConnView")?, index_arg(subflow)?);
        let e = eng_mut!(p);
        let k = resolve(a, e.sfs.len() as i64)?;
        e.penalize(k as usize);
        Ok(())
    }
    fn drop_reinject(&self, seg: &Bound<'_, PyAny>) -> PyResult<i64> {
        let (p, a) = (self.bridge.engine("ConnView")?, int_required(seg, "seg")?);
        let c = &mut eng_mut!(p).conn;
        Ok(match a {
            IntArg::Small(v) => c.drop_reinject(v),
            IntArg::Big(_) => 0,
        })
    }
    fn wake_at(&self, t_ns: &Bound<'_, PyAny>) -> PyResult<()> {
        let (p, a) = (self.bridge.engine("ConnView")?, int_required(t_ns, "t_ns")?);
        let e = eng_mut!(p);
        match a {
            IntArg::Small(t) => e.wake_at(t),
            IntArg::Big(true) => e.wake_at(i64::MAX), // never within a run
            IntArg::Big(false) => e.wake_at(i64::MIN), // at once
        }
        Ok(())
    }

    /// Assigning an attribute breaks the protocol (a scheduler acts through `penalize`,
    /// `drop_reinject`, `wake_at`; the conformance suite reports it), but a plain field takes it: the
    /// engine's field is written (after the type check of `Field`) and the run goes on from there
    /// (module comment, "Writes").
    fn __setattr__(&self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.bridge.engine("ConnView")?;
        let v = match name {
            "wnd_end" | "send_buf_bytes" => Field::Int(set_int(value)?),
            "send_buffer_full" | "recovery" => Field::Bool(set_bool(value)?),
            _ => return Err(not_writable("ConnView", name, CONN_READ_ONLY)),
        };
        let c = &mut eng_mut!(p).conn;
        match (name, v) {
            ("wnd_end", Field::Int(x)) => c.wnd_end = x,
            ("send_buf_bytes", Field::Int(x)) => c.send_buf_bytes = x,
            ("send_buffer_full", Field::Bool(x)) => c.send_buffer_full = x,
            ("recovery", Field::Bool(x)) => c.recovery = x,
            _ => unreachable!("typed above"),
        }
        Ok(())
    }

    fn __repr__(&self) -> String {
        match self.bridge.engine("ConnView") {
            // SAFETY: as `eng!`
            Ok(p) => {
                let e = unsafe { &*p };
                format!("ConnView(now_ns={}, snd_una={}, head={}, n_segs={})", e.ev.now, e.conn.snd_una, e.conn.head,
                        e.conn.n_segs())
            }
            Err(_) => "ConnView(<outside a scheduler call>)".to_string(),
        }
    }
}

/// One subflow as a scheduler sees it (`workbench.schedulers.base.SubflowView`), live.
#[pyclass(frozen, module = "workbench_core", name = "SubflowView")]
pub struct SubflowView {
    bridge: Arc<Bridge>,
    /// Position in the connection's subflow list (use it in a Decision).
    #[pyo3(get)]
    index: usize,
    name: Py<PyString>,
}

macro_rules! sf {
    ($self:ident) => {
        eng!($self, "SubflowView").sf($self.index)
    };
}

#[pymethods]
impl SubflowView {
    /// The path name.
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        self.name.clone_ref(py)
    }
    #[getter]
    fn established(&self) -> PyResult<bool> {
        Ok(sf!(self).established())
    }
    #[getter]
    fn pf(&self) -> PyResult<bool> {
        Ok(sf!(self).pf())
    }
    #[getter]
    fn backup(&self) -> PyResult<bool> {
        Ok(sf!(self).backup())
    }
    #[getter]
    fn stale(&self) -> PyResult<bool> {
        Ok(sf!(self).stale())
    }
    #[getter]
    fn srtt_ns(&self) -> PyResult<i64> {
        Ok(sf!(self).srtt_ns())
    }
    #[getter]
    fn srtt_us8(&self) -> PyResult<i64> {
        Ok(sf!(self).srtt_us8())
    }
    #[getter]
    fn rttvar_ns(&self) -> PyResult<i64> {
        Ok(sf!(self).rttvar_ns())
    }
    #[getter]
    fn min_rtt_ns(&self) -> PyResult<i64> {
        Ok(sf!(self).min_rtt_ns())
    }
    #[getter]
    fn rto_ns(&self) -> PyResult<i64> {
        Ok(sf!(self).rto_ns())
    }
    #[getter]
    fn cwnd(&self) -> PyResult<i64> {
        Ok(sf!(self).cwnd())
    }
    #[getter]
    fn ssthresh(&self) -> PyResult<i64> {
        Ok(sf!(self).ssthresh())
    }
    #[getter]
    fn in_slow_start(&self) -> PyResult<bool> {
        Ok(sf!(self).in_slow_start())
    }
    #[getter]
    fn ca_state(&self) -> PyResult<u8> {
        Ok(sf!(self).ca_state())
    }
    #[getter]
    fn packets_out(&self) -> PyResult<i64> {
        Ok(sf!(self).packets_out())
    }
    #[getter]
    fn in_flight(&self) -> PyResult<i64> {
        Ok(sf!(self).in_flight())
    }
    #[getter]
    fn queued(&self) -> PyResult<i64> {
        Ok(sf!(self).queued())
    }
    #[getter]
    fn queued_bytes(&self) -> PyResult<i64> {
        Ok(sf!(self).queued_bytes())
    }
    #[getter]
    fn unacked_bytes(&self) -> PyResult<i64> {
        Ok(sf!(self).unacked_bytes())
    }
    #[getter]
    fn mss(&self) -> PyResult<i64> {
        Ok(sf!(self).mss())
    }
    #[getter]
    fn rate_bps(&self) -> PyResult<f64> {
        Ok(sf!(self).rate_bps())
    }
    /// The pacing rate, which divides by srtt in whole µs: ZeroDivisionError below 1 µs (a float
    /// division by zero, as a Python scheduler computing it would get).
    #[getter]
    fn pacing_rate_bps(&self) -> PyResult<f64> {
        let s = sf!(self);
        if s.srtt_us8() != 0 && s.srtt_us8() >> 3 == 0 {
            return Err(PyZeroDivisionError::new_err("float division by zero"));
        }
        Ok(s.pacing_rate_bps())
    }
    #[getter]
    fn sndbuf_segments(&self) -> PyResult<i64> {
        Ok(sf!(self).sndbuf_segments())
    }
    #[getter]
    fn last_ack_ns(&self) -> PyResult<i64> {
        Ok(sf!(self).last_ack_ns())
    }
    /// Did this subflow already carry meta segment `seg`?
    fn carried(&self, seg: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (p, a) = (self.bridge.engine("SubflowView")?, index_arg(seg)?);
        let c = &eng!(p).conn;
        Ok(c.seg_path_mask(resolve(a, c.n_segs())?) >> self.index & 1 != 0)
    }

    /// As `ConnView.__setattr__`: a plain field takes the write, so the engine's field is written
    /// (`index` and `name`, the subflow's identity, are not).
    fn __setattr__(&self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.bridge.engine("SubflowView")?;
        let v = match name {
            "established" | "pf" | "backup" | "stale" => Field::Bool(set_bool(value)?),
            "srtt_ns" | "srtt_us8" | "cwnd" | "ssthresh" | "ca_state" | "packets_out" | "in_flight" | "queued"
            | "queued_bytes" | "last_ack_ns" => Field::Int(set_int(value)?),
            "rate_bps" => Field::Float(set_float(value)?),
            _ => return Err(not_writable("SubflowView", name, SF_READ_ONLY)),
        };
        let e = eng_mut!(p);
        e.conn.sched_epoch += 2; // a scheduler's remembered scan no longer holds (`Conn::sched_epoch`)
        let (s, c) = (&mut e.sfs[self.index], &mut e.ccs[self.index]);
        match (name, v) {
            ("established", Field::Bool(x)) => c.established = x,
            ("pf", Field::Bool(x)) => s.pf = x,
            ("backup", Field::Bool(x)) => s.backup = x,
            ("stale", Field::Bool(x)) => s.stale = x,
            ("srtt_ns", Field::Int(x)) => s.srtt_ns = x,
            ("srtt_us8", Field::Int(x)) => c.srtt_us8 = x,
            ("cwnd", Field::Int(x)) => c.cwnd = x,
            ("ssthresh", Field::Int(x)) => c.ssthresh = x,
            ("ca_state", Field::Int(x)) => {
                s.ca_state = u8::try_from(x).map_err(|_| PyOverflowError::new_err("ca_state: 0..=255 here"))?;
            }
            ("packets_out", Field::Int(x)) => s.packets_out = x,
            ("in_flight", Field::Int(x)) => s.in_flight = x,
            ("queued", Field::Int(x)) => s.queued = x,
            ("queued_bytes", Field::Int(x)) => s.queued_bytes = x,
            ("last_ack_ns", Field::Int(x)) => s.last_ack_ns = x,
            ("rate_bps", Field::Float(x)) => s.rate_bps = x,
            _ => unreachable!("typed above"),
        }
        Ok(())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let name = self.name.bind(py).repr().map(|r| r.to_string()).unwrap_or_default();
        match self.bridge.engine("SubflowView") {
            Ok(p) => {
                // SAFETY: as `eng!`
                let s = unsafe { &*p }.sf(self.index);
                format!("Subflow({}, {name}, cwnd={}, in_flight={}, queued={}, srtt_us={}, state={})", self.index,
                        s.cwnd(), s.in_flight(), s.queued(), s.srtt_us8() >> 3, s.ca_state())
            }
            Err(_) => format!("SubflowView({}, {name}, <outside a scheduler call>)", self.index),
        }
    }
}

/// The observer bound with `Scheduler.bind_observer` when the run records: each call lands in the
/// compiled recorder as the Python row `(t_ns, kind, subflow, value)` (`ObsValue::PyRow`).
#[pyclass(frozen, module = "workbench_core", name = "Observer")]
pub struct Observer {
    bridge: Arc<Bridge>,
}

#[pymethods]
impl Observer {
    fn __call__(&self, py: Python<'_>, t_ns: Bound<'_, PyAny>, kind: Bound<'_, PyAny>, subflow: Bound<'_, PyAny>,
                value: Bound<'_, PyAny>) -> PyResult<()> {
        let p = self.bridge.engine("observer")?;
        // the Rust-side fields, for Rust readers only: the export returns the Python row
        let t = t_ns.extract::<i64>().unwrap_or(0);
        let k = subflow.extract::<u32>().unwrap_or(u32::MAX);
        let row = PyTuple::new(py, [t_ns, kind, subflow, value])?;
        eng_mut!(p).observe(t, "python", k as usize, ObsValue::PyRow(PyObs(row.into_any().unbind())));
        Ok(())
    }

    /// A channel, not state: `Scheduler.fresh()` (a deep copy) of a bound scheduler keeps it.
    fn __copy__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __deepcopy__<'py>(slf: Bound<'py, Self>, _memo: &Bound<'py, PyAny>) -> Bound<'py, Self> {
        slf
    }
}

// ------------------------------------------------------------------------------------- the scheduler

/// A Python scheduler object run by the compiled engine.
pub struct PyScheduler {
    obj: PyObject,
    bridge: Arc<Bridge>,
    conn: Py<ConnView>,
    /// One view per subflow (made at the first call, when the engine's subflows exist).
    views: Vec<Py<SubflowView>>,
    /// The `subflows` list every call gets, and the subflow indices it holds.
    list: Option<(Py<PyList>, Vec<usize>)>,
    /// `workbench.schedulers.base.Decision`: read as a tuple without a `__getitem__` call.
    decision_type: Py<PyType>,
    /// The decision last returned by `select`, handed to `on_applied` as the same object.
    last: Option<PyObject>,
    kinds: (Py<PyString>, Py<PyString>),
    flavour: Flavour,
    on_ack: bool,
    on_applied: bool,
    /// The plug-in raised: it is not called again.
    dead: bool,
}

/// Bridge `obj` (a `Scheduler` instance). With `record`, its observations go to the recorder.
pub fn bridge(py: Python<'_>, obj: PyObject, record: bool) -> PyResult<(Box<dyn Scheduler>, Arc<Bridge>)> {
    let bridge = Arc::new(Bridge { ptr: AtomicPtr::new(ptr::null_mut()), error: Mutex::new(None) });
    let base = py.import("workbench.schedulers.base")?;
    let scheduler_cls = base.getattr("Scheduler")?;
    let o = obj.bind(py);
    // read once per run: the flavour attributes, and which hooks the class overrides (the engine calls
    // `on_ack` / `on_applied` only then)
    let reinject_on_subflow_rto = o.getattr("reinject_on_subflow_rto")?.is_truthy()?;
    let overrides = |name: &str| -> PyResult<bool> {
        let mine = o.get_type().getattr(name).ok();
        Ok(match mine {
            None => true,
            Some(m) => !m.is(&scheduler_cls.getattr(name)?),
        })
    };
    let (on_ack, on_applied) = (overrides("on_ack")?, overrides("on_applied")?);
    let upstream_retrans = match o.getattr("meta_retrans") {
        Ok(v) => v.eq("upstream")?,
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => false,
        Err(e) => return Err(e),
    };
    let meta_rto_factor: f64 = o.getattr("meta_rto_factor")?.extract()?;
    if record {
        o.call_method1("bind_observer", (Observer { bridge: bridge.clone() },))?;
    }
    let s = PyScheduler {
        conn: Py::new(py, ConnView { bridge: bridge.clone() })?,
        bridge: bridge.clone(),
        views: Vec::new(),
        list: None,
        decision_type: base.getattr("Decision")?.downcast_into::<PyType>()?.unbind(),
        last: None,
        kinds: (intern!(py, "fast").clone().unbind(), intern!(py, "rto").clone().unbind()),
        flavour: Flavour { reinject_on_subflow_rto, meta_rto_factor, upstream_retrans },
        on_ack,
        on_applied,
        dead: false,
        obj,
    };
    Ok((Box::new(s), bridge))
}

impl PyScheduler {
    /// Run `f` with the GIL and the views pointing at `e`; an exception stops the run.
    #[inline]
    fn call<R>(&mut self, e: &mut Engine, f: impl FnOnce(&mut Self, Python<'_>, *mut Engine) -> PyResult<R>)
        -> Option<R> {
        if self.dead {
            return None;
        }
        let r = Python::with_gil(|py| {
            if self.views.len() != e.sfs.len() {
                self.make_views(py, e)?;
            }
            let p: *mut Engine = e;
            self.bridge.ptr.store(p, Ordering::Relaxed);
            let r = f(self, py, p);
            self.bridge.ptr.store(ptr::null_mut(), Ordering::Relaxed);
            r
        });
        match r {
            Ok(v) => Some(v),
            Err(err) => {
                self.dead = true;
                e.stopped = true;
                let mut slot = self.bridge.error.lock().expect("bridge error lock");
                if slot.is_none() {
                    *slot = Some(err);
                }
                None
            }
        }
    }

    fn make_views(&mut self, py: Python<'_>, e: &Engine) -> PyResult<()> {
        self.views = e.sfs.iter()
            .map(|s| Py::new(py, SubflowView { bridge: self.bridge.clone(), index: s.index,
                                               name: PyString::new(py, &s.name).unbind() }))
            .collect::<PyResult<_>>()?;
        self.list = None;
        Ok(())
    }

    /// The `subflows` list for `idx`: the same list object every time.
    fn list<'py>(&mut self, py: Python<'py>, idx: &[usize]) -> PyResult<Bound<'py, PyList>> {
        if let Some((l, have)) = &self.list {
            if have == idx {
                return Ok(l.bind(py).clone());
            }
        }
        let l = PyList::new(py, idx.iter().map(|&k| self.views[k].clone_ref(py)))?;
        if self.list.is_none() {
            self.list = Some((l.clone().unbind(), idx.to_vec()));
        }
        Ok(l)
    }

    /// How the engine reads a decision, up to where it would act: the subflow `d[0]` (indexed as a
    /// Python list is), nothing more if it is not established, the segment `d[1]` and, for the head,
    /// the count `d[2]` (compared as `n < count`). Raises what Python's list indexing and comparisons
    /// raise for such values (TypeError, IndexError).
    fn decode(&self, py: Python<'_>, e: *mut Engine, d: &Bound<'_, PyAny>) -> PyResult<Decision> {
        let fast = d.is_exact_instance_of::<PyTuple>() || d.get_type().is(self.decision_type.bind(py));
        let item = |i: usize| -> PyResult<Bound<'_, PyAny>> {
            if fast {
                // SAFETY: checked just above (an exact tuple or the Decision NamedTuple)
                unsafe { d.downcast_unchecked::<PyTuple>() }.get_item(i)
            } else {
                d.get_item(i)
            }
        };
        let n_sf = {
            // SAFETY: the pointer is live for the call (module comment)
            unsafe { &*e }.sfs.len() as i64
        };
        let k = resolve(index_arg(&item(0)?)?, n_sf)? as usize;
        let (established, n_segs) = {
            // SAFETY: as above; re-read after Python code (a `__getitem__`) may have run
            let e = unsafe { &*e };
            (e.ccs[k].established, e.conn.n_segs())
        };
        if !established {
            return Ok(Decision { sf: k, seg: -1, count: 0 }); // refused before anything else is read
        }
        let seg_o = item(1)?;
        let seg = match int_arg(&seg_o)? {
            Some(IntArg::Small(v)) => v,
            Some(IntArg::Big(pos)) => if pos { i64::MAX } else { -1 },
            None => {
                // compared like an int (a float works up to the list indexing)
                if seg_o.lt(0)? {
                    -1
                } else if seg_o.ge(n_segs)? {
                    i64::MAX
                } else {
                    return Err(PyTypeError::new_err(format!("list indices must be integers or slices, not {}",
                                                            type_name(&seg_o))));
                }
            }
        };
        if seg >= 0 {
            return Ok(Decision { sf: k, seg, count: 1 });
        }
        let cnt_o = item(2)?;
        let count = match int_arg(&cnt_o)? {
            Some(IntArg::Small(v)) => v,
            Some(IntArg::Big(pos)) => if pos { i64::MAX } else { 0 },
            None => {
                // `n < count` for n = 0, 1, ...: a real count is its ceiling
                let x: f64 = cnt_o.extract().map_err(|_| {
                    PyTypeError::new_err(format!("'<' not supported between instances of 'int' and '{}'",
                                                 type_name(&cnt_o)))
                })?;
                if x > 0.0 { if x >= 9.2e18 { i64::MAX } else { x.ceil() as i64 } } else { 0 }
            }
        };
        Ok(Decision { sf: k, seg: -1, count })
    }
}

impl Scheduler for PyScheduler {
    fn flavour(&self) -> Flavour {
        self.flavour
    }
    fn wants_on_ack(&self) -> bool {
        self.on_ack
    }
    fn wants_on_applied(&self) -> bool {
        self.on_applied
    }

    fn on_start(&mut self, e: &mut Engine, subflows: &[usize]) {
        self.call(e, |s, py, _| {
            let l = s.list(py, subflows)?;
            s.obj.bind(py).call_method1(intern!(py, "on_start"), (s.conn.bind(py), l))?;
            Ok(())
        });
    }

    fn select(&mut self, e: &mut Engine, subflows: &[usize]) -> Option<Decision> {
        self.call(e, |s, py, p| {
            let l = s.list(py, subflows)?;
            let d = s.obj.bind(py).call_method1(intern!(py, "select"), (s.conn.bind(py), l))?;
            if d.is_none() {
                return Ok(None);
            }
            let dec = s.decode(py, p, &d)?;
            s.last = Some(d.unbind());
            Ok(Some(dec))
        }).flatten()
    }

    fn on_ack(&mut self, e: &mut Engine, k: usize, now: i64) {
        self.call(e, |s, py, _| {
            s.obj.bind(py).call_method1(intern!(py, "on_ack"), (s.conn.bind(py), s.views[k].bind(py), now))?;
            Ok(())
        });
    }

    fn on_loss(&mut self, e: &mut Engine, k: usize, kind: LossKind, now: i64) {
        self.call(e, |s, py, _| {
            // the subflow as the item of the list the scheduler is given (`subflows[k]`)
            let sf = match &s.list {
                Some((l, _)) => l.bind(py).get_item(k)?,
                None => s.views[k].bind(py).clone().into_any(),
            };
            let kind = match kind {
                LossKind::Fast => s.kinds.0.bind(py),
                LossKind::Rto => s.kinds.1.bind(py),
            };
            s.obj.bind(py).call_method1(intern!(py, "on_loss"), (s.conn.bind(py), sf, kind, now))?;
            Ok(())
        });
    }

    fn on_timer(&mut self, e: &mut Engine, now: i64) {
        self.call(e, |s, py, _| {
            s.obj.bind(py).call_method1(intern!(py, "on_timer"), (s.conn.bind(py), now))?;
            Ok(())
        });
    }

    fn on_applied(&mut self, e: &mut Engine, _d: Decision, n: i64) {
        self.call(e, |s, py, _| {
            let d = s.last.as_ref().expect("on_applied follows a select").bind(py);
            s.obj.bind(py).call_method1(intern!(py, "on_applied"), (s.conn.bind(py), d, n))?;
            Ok(())
        });
    }
}

/// `run_model`'s scheduler argument: a built-in by `(name, params, [inner])`, or a Python object to
/// bridge.
pub enum SchedArg {
    Spec(crate::sched::Spec),
    Py(PyObject),
}

impl<'py> FromPyObject<'py> for SchedArg {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        if ob.is_instance_of::<PyTuple>() {
            return Ok(Self::Spec(ob.extract()?));
        }
        if !ob.hasattr("select")? {
            return Err(PyTypeError::new_err(format!(
                "scheduler: a (name, params, [inner]) spec or a Scheduler object, not {}", ob.get_type().name()?)));
        }
        Ok(Self::Py(ob.clone().unbind()))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConnView>()?;
    m.add_class::<SubflowView>()?;
    m.add_class::<Observer>()?;
    Ok(())
}
