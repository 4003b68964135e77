//! The recorder's hand-over to Python: each column of a finished run (`record::Recorder`, a list of
//! fixed-size chunks per field) becomes an Arrow array per chunk, exported through the Arrow C data
//! interface by a small object (`ArrowColumn`) that speaks the Arrow PyCapsule protocol's stream form
//! (`__arrow_c_stream__`), so that `polars.Series(column)` adopts the chunks as they are (a chunked
//! Series, one polars chunk per recorder chunk).
//!
//! Zero copy: an integer chunk's `Vec` is moved, allocation and all, into an Arrow buffer, kept alive
//! by the buffer's owner, which goes when the last array holding it is released (the column object's,
//! a polars Series', an unconsumed capsule's). A bool chunk is the one exception: Arrow booleans are
//! bit-packed, so the export packs each one-byte-per-value `Vec<bool>` into a bitmap — a copy of 1/8
//! of the chunk's size, after which the byte chunk is freed.
//!
//! Why the stream and not `__arrow_c_array__`: one Arrow array must be contiguous, and the recorder's
//! columns are chunked (so that they never double and copy while they grow), so a single array would
//! mean concatenating, i.e. copying. And offering both does not help: polars 2.1 asks for
//! `__arrow_c_array__` first whenever an object has it. Consumers: `pl.Series(col)` and
//! `pl.DataFrame([pl.Series(c) for c in cols.values()])` keep the chunks; `pl.DataFrame({name: col})`
//! imports them too but then rechunks (a copy) — build frames from Series.
//!
//! Why arrow-rs's low layers (`arrow-buffer`, `arrow-data` and `arrow-schema` with `ffi`) and not a
//! fully hand-written export or `pyo3-arrow`: the per-array release callbacks, private data and buffer
//! ownership are where the C interface is easy to get subtly wrong (a double free, a leak when a
//! consumer moves the struct out of its capsule), and arrow-rs's `FFI_ArrowArray` / `FFI_ArrowSchema`
//! are the maintained reference implementation of exactly that. They cost ~8 s of clean release build
//! on a quiet 2-core machine (12.4 s → 20.2 s for the crate as it was; 12 more crates, all small);
//! `arrow-array` on top would cost ~18 s and `pyo3-arrow` 0.7 (the last on PyO3 0.23) pulls the whole
//! `arrow` crate with chrono-tz: ~2 min. arrow-rs exports streams only of record batches (struct
//! arrays) and only from `arrow-array`, so the stream struct below — five fields around a list of
//! arrays — is written here.
//!
//! `exported_column_bytes` counts the bytes of the buffers handed over and not yet freed, so a test
//! (and a memory budget) can see that dropping the polars frames really gives the run's memory back.

use std::ffi::{c_char, c_int, c_void, CString};
use std::mem::size_of;
use std::panic::RefUnwindSafe;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow_buffer::{ArrowNativeType, Buffer};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_data::ArrayData;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType, Field};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyList, PyTuple};

use crate::record::{AckCols, Col, DropCols, ObsValue, RcvCols, Recorder, SampleCols, SndCols};

/// Bytes of column buffers exported to Arrow and still alive (held by an `ArrowColumn`, a stream not
/// yet consumed, or a consumer such as a polars Series).
static EXPORTED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The owner of an exported buffer's memory: the recorder's own `Vec`, moved here untouched (its heap
/// allocation does not move with it, so the pointer taken before the move stays valid). Arrow's
/// `Buffer` holds it in an `Arc`; the last clone to go frees the Vec.
struct Held<T> {
    _vec: Vec<T>,
    bytes: usize,
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        EXPORTED_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// An Arrow buffer over `vec`'s own allocation (no copy). Spare capacity stays allocated (and counted)
/// until the owner goes: the run shrinks its last chunks before the hand-over (`Recorder::shrink`).
fn buffer_from_vec<T: ArrowNativeType + RefUnwindSafe>(vec: Vec<T>) -> Buffer {
    let len = vec.len() * size_of::<T>();
    let bytes = vec.capacity() * size_of::<T>();
    // A Vec's pointer is never null (dangling but aligned when nothing is allocated), and it is
    // aligned for T, which is what Arrow's validation and the consumers' imports check.
    let ptr = NonNull::new(vec.as_ptr() as *mut u8).expect("a Vec's pointer is never null");
    EXPORTED_BYTES.fetch_add(bytes, Ordering::Relaxed);
    let owner = Arc::new(Held { _vec: vec, bytes });
    // SAFETY: `ptr` points to `len` initialised bytes of the Vec now owned by `owner`, which the
    // Buffer keeps alive for as long as the pointer is used; nobody mutates the Vec again.
    unsafe { Buffer::from_custom_allocation(ptr, len, owner) }
}

/// Arrow's boolean layout: one bit per value, least significant bit first. This is the one copy of
/// the export (1/8 of the byte-per-value chunk); the `Vec<bool>` is freed on return.
fn pack_bools(values: Vec<bool>) -> Buffer {
    let mut bits = vec![0u8; values.len().div_ceil(8)];
    for (byte, chunk) in bits.iter_mut().zip(values.chunks(8)) {
        *byte = chunk.iter().enumerate().fold(0u8, |acc, (j, &b)| acc | (u8::from(b) << j));
    }
    buffer_from_vec(bits)
}

/// The integer types of the recorder's columns and their Arrow types.
trait Prim: ArrowNativeType + RefUnwindSafe {
    const DATA_TYPE: DataType;
}

impl Prim for i64 {
    const DATA_TYPE: DataType = DataType::Int64;
}
impl Prim for u32 {
    const DATA_TYPE: DataType = DataType::UInt32;
}
impl Prim for u16 {
    const DATA_TYPE: DataType = DataType::UInt16;
}
impl Prim for u8 {
    const DATA_TYPE: DataType = DataType::UInt8;
}

/// One recorder column of any value type, before it is turned into Arrow or into a Python list.
enum AnyCol {
    I64(Col<i64>),
    U32(Col<u32>),
    U16(Col<u16>),
    U8(Col<u8>),
    Bool(Col<bool>),
}

impl From<Col<i64>> for AnyCol {
    fn from(c: Col<i64>) -> Self {
        Self::I64(c)
    }
}
impl From<Col<u32>> for AnyCol {
    fn from(c: Col<u32>) -> Self {
        Self::U32(c)
    }
}
impl From<Col<u16>> for AnyCol {
    fn from(c: Col<u16>) -> Self {
        Self::U16(c)
    }
}
impl From<Col<u8>> for AnyCol {
    fn from(c: Col<u8>) -> Self {
        Self::U8(c)
    }
}
impl From<Col<bool>> for AnyCol {
    fn from(c: Col<bool>) -> Self {
        Self::Bool(c)
    }
}

type Fields = Vec<(&'static str, AnyCol)>;
type Observation = (i64, &'static str, u32, ObsValue);

/// `[("name", AnyCol::from(name)), ...]` for fields bound by a destructuring `let`.
macro_rules! fields {
    ($($f:ident),* $(,)?) => { vec![$((stringify!($f), AnyCol::from($f))),*] };
}

fn snd_fields(c: SndCols) -> Fields {
    // Exhaustive destructuring: a field added to the recorder and forgotten here fails to compile.
    let SndCols { t_ns, subflow, seq, payload_bytes, dsn, is_retrans, is_reinject } = c;
    fields![t_ns, subflow, seq, payload_bytes, dsn, is_retrans, is_reinject]
}

/// The recorder taken apart into named columns per row kind (the names and order of
/// `workbench.replay.recorder`'s rows; `rcv` is the sent row's fields then `owd_ns`), and its
/// observations.
fn split(rec: Recorder) -> (Vec<(&'static str, Fields)>, Vec<Observation>) {
    let Recorder { snd, rcv, drop, ack, samples, observations } = rec;
    let RcvCols { snd: rcv_snd, owd_ns } = rcv;
    let mut rcv = snd_fields(rcv_snd);
    rcv.extend(fields![owd_ns]);
    let DropCols { t_ns, subflow, is_data, seq_or_ack, payload_bytes, dsn, is_retrans, is_reinject, reason } = drop;
    let drop = fields![t_ns, subflow, is_data, seq_or_ack, payload_bytes, dsn, is_retrans, is_reinject, reason];
    let AckCols { t_ns, subflow, ack_seq, data_ack, rwnd_bytes, has_sack, owd_ns } = ack;
    let ack = fields![t_ns, subflow, ack_seq, data_ack, rwnd_bytes, has_sack, owd_ns];
    let SampleCols { t_ns, is_periodic, subflow, cwnd, inflight, srtt_ns, queued_bytes, snd_buf_bytes, rcv_ooo_bytes } =
        samples;
    let samples =
        fields![t_ns, is_periodic, subflow, cwnd, inflight, srtt_ns, queued_bytes, snd_buf_bytes, rcv_ooo_bytes];
    let kinds = vec![("snd", snd_fields(snd)), ("rcv", rcv), ("drop", drop), ("ack", ack), ("samples", samples)];
    (kinds, observations)
}

/// A null-free array of `len` values over `buffer` (validated: lengths and alignment, O(1)).
fn array(data_type: DataType, len: usize, buffer: Buffer) -> PyResult<ArrayData> {
    ArrayData::builder(data_type)
        .len(len)
        .add_buffer(buffer)
        .build()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// One array per chunk, each over the chunk's own Vec, and the chunks' addresses as recorded.
fn prim_arrays<T: Prim>(col: Col<T>) -> PyResult<(DataType, Vec<ArrayData>, Vec<usize>)> {
    let addresses = col.chunks().map(|c| c.as_ptr() as usize).collect();
    let arrays = col
        .into_chunks()
        .into_iter()
        .map(|c| array(T::DATA_TYPE, c.len(), buffer_from_vec(c)))
        .collect::<PyResult<_>>()?;
    Ok((T::DATA_TYPE, arrays, addresses))
}

/// The C stream interface's struct (`struct ArrowArrayStream` of the Arrow C stream interface).
#[repr(C)]
struct ArrowArrayStream {
    get_schema: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut FFI_ArrowSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut FFI_ArrowArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut ArrowArrayStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut ArrowArrayStream)>,
    private_data: *mut c_void,
}

// SAFETY: the private data (`StreamState`) is owned by the struct and holds only Send + Sync values;
// the C interface lets a consumer call the callbacks from any thread, one at a time.
unsafe impl Send for ArrowArrayStream {}

/// What a stream owns: its field and the arrays still to hand out (sharing the column's buffers).
struct StreamState {
    field: Field,
    arrays: std::vec::IntoIter<ArrayData>,
    last_error: Option<CString>,
}

/// errno's EINVAL (22 on Linux and macOS), the error code the C stream interface expects.
const EINVAL: c_int = 22;

unsafe extern "C" fn stream_get_schema(stream: *mut ArrowArrayStream, out: *mut FFI_ArrowSchema) -> c_int {
    // SAFETY (whole body): the consumer passes the stream it got from us, not yet released, and a
    // writable, uninitialised `out`, which is overwritten without dropping what it held.
    let state = unsafe { &mut *((*stream).private_data as *mut StreamState) };
    match FFI_ArrowSchema::try_from(&state.field) {
        Ok(schema) => {
            unsafe { std::ptr::write(out, schema) };
            0
        }
        Err(e) => {
            state.last_error = CString::new(e.to_string()).ok();
            EINVAL
        }
    }
}

unsafe extern "C" fn stream_get_next(stream: *mut ArrowArrayStream, out: *mut FFI_ArrowArray) -> c_int {
    // SAFETY: as in `stream_get_schema`. The end of the stream is a released array (null release).
    let state = unsafe { &mut *((*stream).private_data as *mut StreamState) };
    let array = state.arrays.next().map_or_else(FFI_ArrowArray::empty, |a| FFI_ArrowArray::new(&a));
    unsafe { std::ptr::write(out, array) };
    0
}

unsafe extern "C" fn stream_get_last_error(stream: *mut ArrowArrayStream) -> *const c_char {
    // SAFETY: as in `stream_get_schema`; the message lives until the next call or the release.
    let state = unsafe { &*((*stream).private_data as *const StreamState) };
    state.last_error.as_ref().map_or(std::ptr::null(), |e| e.as_ptr())
}

unsafe extern "C" fn stream_release(stream: *mut ArrowArrayStream) {
    // SAFETY: called once by whoever holds the stream (a consumer, or our Drop); the private data
    // is the Box made in `ArrowColumn::stream`. Releasing drops the arrays not handed out.
    let s = unsafe { &mut *stream };
    if !s.private_data.is_null() {
        drop(unsafe { Box::from_raw(s.private_data as *mut StreamState) });
    }
    s.private_data = std::ptr::null_mut();
    s.release = None;
}

impl Drop for ArrowArrayStream {
    /// A capsule whose stream no consumer moved out releases it here (a moved-out stream is left
    /// behind released: null `release`).
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: the stream is ours and not released yet.
            unsafe { release(self) }
        }
    }
}

/// One exported recorder column: immutable, null-free Arrow arrays (one per recorder chunk) over the
/// recorder's buffers. `__arrow_c_stream__` may be called any number of times; every stream shares
/// the same buffers.
#[pyclass(name = "ArrowColumn", module = "workbench_core", frozen)]
pub(crate) struct ArrowColumn {
    name: &'static str,
    data_type: DataType,
    chunks: Vec<ArrayData>,
    vec_addresses: Vec<usize>,
}

impl ArrowColumn {
    fn new(name: &'static str, col: AnyCol) -> PyResult<Self> {
        let (data_type, chunks, vec_addresses) = match col {
            AnyCol::I64(c) => prim_arrays(c)?,
            AnyCol::U32(c) => prim_arrays(c)?,
            AnyCol::U16(c) => prim_arrays(c)?,
            AnyCol::U8(c) => prim_arrays(c)?,
            AnyCol::Bool(c) => {
                let addresses = c.chunks().map(|v| v.as_ptr() as usize).collect();
                let arrays = c
                    .into_chunks()
                    .into_iter()
                    .map(|v| {
                        let len = v.len();
                        array(DataType::Boolean, len, pack_bools(v))
                    })
                    .collect::<PyResult<_>>()?;
                (DataType::Boolean, arrays, addresses)
            }
        };
        Ok(Self { name, data_type, chunks, vec_addresses })
    }

    fn stream(&self) -> ArrowArrayStream {
        let state = StreamState {
            field: Field::new(self.name, self.data_type.clone(), false),
            arrays: self.chunks.clone().into_iter(), // Arc clones of the buffers, not copies
            last_error: None,
        };
        ArrowArrayStream {
            get_schema: Some(stream_get_schema),
            get_next: Some(stream_get_next),
            get_last_error: Some(stream_get_last_error),
            release: Some(stream_release),
            private_data: Box::into_raw(Box::new(state)) as *mut c_void,
        }
    }
}

#[pymethods]
impl ArrowColumn {
    /// The Arrow PyCapsule protocol: a capsule "arrow_array_stream" holding a stream of this column's
    /// chunks under the field (name, type, non-nullable). `requested_schema` is ignored, as the
    /// protocol allows: each column has one natural type, and casting is the consumer's business.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let name = CString::new("arrow_array_stream").expect("no NUL");
        PyCapsule::new(py, self.stream(), Some(name))
    }

    fn __len__(&self) -> usize {
        self.chunks.iter().map(ArrayData::len).sum()
    }

    fn __repr__(&self) -> String {
        format!("ArrowColumn({:?}, {}, len={}, chunks={})", self.name, self.data_type, self.__len__(),
                self.chunks.len())
    }

    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    #[getter]
    fn n_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Address of each chunk's values buffer (for bool columns the packed bitmap): what a zero-copy
    /// consumer's buffers must point to.
    #[getter]
    fn chunk_addresses(&self) -> Vec<usize> {
        self.chunks.iter().map(|a| a.buffers()[0].as_ptr() as usize).collect()
    }

    /// Address of each recorder Vec the chunks were made from, taken before the hand-over: equal to
    /// `chunk_addresses` for an integer column (the Vecs are the buffers); a bool column's are freed.
    #[getter]
    fn vec_addresses(&self) -> Vec<usize> {
        self.vec_addresses.clone()
    }

    /// Bytes of the values buffers.
    #[getter]
    fn nbytes(&self) -> usize {
        self.chunks.iter().map(|a| a.buffers()[0].len()).sum()
    }
}

fn observation<'py>(py: Python<'py>, (t_ns, kind, subflow, value): Observation) -> PyResult<Bound<'py, PyTuple>> {
    let value = match value {
        ObsValue::Int(i) => i.into_pyobject(py)?.into_any(),
        ObsValue::Float(f) => f.into_pyobject(py)?.into_any(),
        ObsValue::Label(s) => s.into_pyobject(py)?.into_any(),
        // a plug-in's whole row, as it reported it (py_sched)
        ObsValue::PyRow(row) => return Ok(row.0.into_bound(py).downcast_into::<PyTuple>()?),
    };
    (t_ns, kind, subflow, value).into_pyobject(py)
}

/// {kind: {field: column_as(...)}, ..., "observations": [(t_ns, kind, subflow, value), ...]}, the
/// kinds limited to `only` if given.
fn to_dict<'py>(
    py: Python<'py>,
    rec: Recorder,
    only: Option<&[String]>,
    mut column_as: impl FnMut(&'static str, AnyCol) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (kinds, observations) = split(rec);
    let out = PyDict::new(py);
    for (kind, cols) in kinds {
        if only.is_some_and(|o| !o.iter().any(|k| k == kind)) {
            continue;
        }
        let d = PyDict::new(py);
        for (name, col) in cols {
            d.set_item(name, column_as(name, col)?)?;
        }
        out.set_item(kind, d)?;
    }
    let obs = observations.into_iter().map(|o| observation(py, o)).collect::<PyResult<Vec<_>>>()?;
    out.set_item("observations", PyList::new(py, obs)?)?;
    Ok(out)
}

/// The recorder as {"snd": {field: ArrowColumn}, "rcv": ..., "drop": ..., "ack": ..., "samples": ...,
/// "observations": [(t_ns, kind, subflow, value), ...]}; `pl.Series(col)` adopts a column's buffers.
pub(crate) fn recorder_to_python<'py>(py: Python<'py>, rec: Recorder) -> PyResult<Bound<'py, PyDict>> {
    to_dict(py, rec, None, |name, col| Ok(Bound::new(py, ArrowColumn::new(name, col)?)?.into_any()))
}

/// A deterministic recorder for the tests (a 64-bit LCG, Knuth's MMIX constants), shrunk as a run's
/// is before the hand-over: `n_rows` rows of snd, rcv and ack, half as many drops, one and a half times
/// as many samples, up to 8 observations. Values span the whole range of what `push` takes (extremes
/// included; the recorder narrows some to its column types), so that a truncation or sign slip shows.
fn demo(n_rows: usize, seed: u64) -> Recorder {
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            self.0
        }
        fn i64(&mut self) -> i64 {
            match self.next() >> 60 {
                0 => i64::MIN,
                1 => i64::MAX,
                _ => self.next() as i64,
            }
        }
        fn u32(&mut self) -> u32 {
            (self.next() >> 32) as u32
        }
        fn u8(&mut self) -> u8 {
            (self.next() >> 56) as u8
        }
        fn bool(&mut self) -> bool {
            self.next() >> 63 == 1
        }
    }
    const LABELS: [&str; 3] = ["minrtt", "redundant", "blest"];
    let mut g = Lcg(seed);
    let mut rec = Recorder::default();
    for _ in 0..n_rows {
        rec.snd.push(g.i64(), g.u32(), g.i64(), g.u32(), g.i64(), g.bool(), g.bool());
        rec.rcv.snd.push(g.i64(), g.u32(), g.i64(), g.u32(), g.i64(), g.bool(), g.bool());
        rec.rcv.owd_ns.push(g.i64());
        rec.ack.push(g.i64(), g.u32(), g.i64(), g.i64(), g.i64(), g.bool(), g.i64());
    }
    for _ in 0..n_rows / 2 {
        rec.drop.push(g.i64(), g.u32(), g.bool(), g.i64(), g.u32(), g.i64(), g.bool(), g.bool(), g.u8());
    }
    for _ in 0..n_rows + n_rows / 2 {
        rec.samples.push(g.i64(), g.bool(), g.u32(), g.i64(), g.i64(), g.i64(), g.i64(), g.i64(), g.i64());
    }
    for k in 0..n_rows.min(8) {
        let value = match k % 3 {
            0 => ObsValue::Int(g.i64()),
            1 => ObsValue::Float(g.i64() as f64 / 3.0),
            _ => ObsValue::Label(LABELS[(g.next() % 3) as usize]),
        };
        rec.observations.push((g.i64(), LABELS[k % 3], g.u32(), value));
    }
    rec.shrink();
    rec
}

/// Test-only: `demo(n_rows, seed)` handed over as `recorder_to_python` hands over a run.
#[pyfunction]
fn demo_recorder(py: Python<'_>, n_rows: usize, seed: u64) -> PyResult<Bound<'_, PyDict>> {
    recorder_to_python(py, demo(n_rows, seed))
}

/// Test-only: the same recorder as `demo_recorder(n_rows, seed)`, every column a plain Python list
/// (only the row kinds in `kinds`, if given: a multi-chunk recorder as lists is large).
#[pyfunction]
#[pyo3(signature = (n_rows, seed, kinds=None))]
fn demo_recorder_rows(py: Python<'_>, n_rows: usize, seed: u64, kinds: Option<Vec<String>>)
                      -> PyResult<Bound<'_, PyDict>> {
    fn list<'py, T: Copy + IntoPyObject<'py>>(py: Python<'py>, c: &Col<T>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, c.iter().copied().collect::<Vec<T>>())?.into_any()) // a Vec<u8> alone would be `bytes`
    }
    to_dict(py, demo(n_rows, seed), kinds.as_deref(), |_, col| match col {
        AnyCol::I64(c) => list(py, &c),
        AnyCol::U32(c) => list(py, &c),
        AnyCol::U16(c) => list(py, &c),
        AnyCol::U8(c) => list(py, &c),
        AnyCol::Bool(c) => list(py, &c),
    })
}

/// Bytes of recorder columns handed to Arrow and not yet freed (see `EXPORTED_BYTES`).
#[pyfunction]
fn exported_column_bytes() -> usize {
    EXPORTED_BYTES.load(Ordering::Relaxed)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrowColumn>()?;
    m.add_function(wrap_pyfunction!(demo_recorder, m)?)?;
    m.add_function(wrap_pyfunction!(demo_recorder_rows, m)?)?;
    m.add_function(wrap_pyfunction!(exported_column_bytes, m)?)?;
    Ok(())
}
