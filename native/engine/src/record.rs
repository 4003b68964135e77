//! The recorder of a compiled run: one typed column buffer per field of each row kind of
//! `workbench.replay.recorder` (SndRow, RcvRow, DropRow, AckRow, SampleRow), appended on the hot path
//! and handed to polars after the run (`py_arrow`), column by column, without copying.
//!
//! A row costs what its fields cost (no per-row object): 29 B for a sent segment, 37 B for a received
//! one, 38 B for an ACK and 38 B for a state sample, against ~200 B for a Python NamedTuple row: a
//! subflow index is a byte (at most 64 subflows), a payload 2 bytes, windows, counts and buffer
//! occupancies 4. Booleans are one byte each here; the export packs them into Arrow's bitmaps.
//!
//! Each column is a list of fixed-size chunks (`Col`), never one growing vector: a vector that
//! doubles holds up to twice what it needs while it grows (a one-hour run's gigabytes), and copies
//! everything each time. A chunk is allocated whole and never moves; the last one is shrunk to what it
//! holds when the run ends, so the buffers hold what the rows need (plus the chunk lists).

/// Rows per chunk.
const CHUNK_ROWS: usize = 1 << 18;

/// One column: fixed-size chunks of values. The chunk being filled (`cur`) is held in the column
/// itself, not at the end of the list of full ones: a push reads its length and capacity from the
/// recorder's own memory, beside the other columns', rather than from each column's own heap list (a
/// dependent load per value; 20-odd columns are pushed per data packet).
pub struct Col<T> {
    full: Vec<Vec<T>>,
    cur: Vec<T>,
}

impl<T> Default for Col<T> {
    fn default() -> Self {
        Self { full: Vec::new(), cur: Vec::new() }
    }
}

impl<T> Col<T> {
    #[inline]
    pub fn push(&mut self, v: T) {
        if self.cur.len() == self.cur.capacity() {
            self.next_chunk();
        }
        self.cur.push(v);
    }

    /// The chunk being filled is full (or there is none yet): start the next.
    #[cold]
    #[inline(never)]
    fn next_chunk(&mut self) {
        let done = std::mem::replace(&mut self.cur, Vec::with_capacity(CHUNK_ROWS));
        if !done.is_empty() {
            self.full.push(done);
        }
    }

    /// The chunks in order (none empty).
    pub fn chunks(&self) -> impl Iterator<Item = &Vec<T>> {
        self.full.iter().chain((!self.cur.is_empty()).then_some(&self.cur))
    }

    /// The chunks in order (none empty), taken out of the column.
    pub fn into_chunks(self) -> Vec<Vec<T>> {
        let mut chunks = self.full;
        if !self.cur.is_empty() {
            chunks.push(self.cur);
        }
        chunks
    }

    pub fn len(&self) -> usize {
        self.full.iter().map(Vec::len).sum::<usize>() + self.cur.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cur.is_empty() && self.full.is_empty()
    }

    /// Bytes allocated for the values.
    pub fn allocated_bytes(&self) -> usize {
        self.full.iter().chain([&self.cur]).map(|c| c.capacity() * std::mem::size_of::<T>()).sum()
    }

    /// Give back the unused end of the last chunk (at the end of the run).
    pub fn shrink(&mut self) {
        self.cur.shrink_to_fit();
    }

    /// All values in order (tests, small exports).
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks().flatten()
    }
}

/// A data segment leaving its subflow sender (`SndRow`).
#[derive(Default)]
pub struct SndCols {
    pub t_ns: Col<i64>,
    pub subflow: Col<u8>,
    pub seq: Col<i64>,
    pub payload_bytes: Col<u16>,
    pub dsn: Col<i64>,
    pub is_retrans: Col<bool>,
    pub is_reinject: Col<bool>,
}

impl SndCols {
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn push(&mut self, t_ns: i64, subflow: u32, seq: i64, payload_bytes: u32, dsn: i64, is_retrans: bool,
                is_reinject: bool) {
        self.t_ns.push(t_ns);
        self.subflow.push(subflow as u8);
        self.seq.push(seq);
        self.payload_bytes.push(payload_bytes as u16);
        self.dsn.push(dsn);
        self.is_retrans.push(is_retrans);
        self.is_reinject.push(is_reinject);
    }

    pub fn len(&self) -> usize {
        self.t_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t_ns.is_empty()
    }
}

/// A data segment reaching the client subflow (`RcvRow`): the sent row's fields and the one-way delay.
#[derive(Default)]
pub struct RcvCols {
    pub snd: SndCols,
    pub owd_ns: Col<i64>,
}

/// A packet lost in the network (`DropRow`; `dsn` is meaningless on ACK rows, where `is_data` is false).
#[derive(Default)]
pub struct DropCols {
    pub t_ns: Col<i64>,
    pub subflow: Col<u8>,
    pub is_data: Col<bool>,
    pub seq_or_ack: Col<i64>,
    pub payload_bytes: Col<u16>,
    pub dsn: Col<i64>,
    pub is_retrans: Col<bool>,
    pub is_reinject: Col<bool>,
    pub reason: Col<u8>,
}

impl DropCols {
    #[allow(clippy::too_many_arguments)]
    pub fn push(&mut self, t_ns: i64, subflow: u32, is_data: bool, seq_or_ack: i64, payload_bytes: u32, dsn: i64,
                is_retrans: bool, is_reinject: bool, reason: u8) {
        self.t_ns.push(t_ns);
        self.subflow.push(subflow as u8);
        self.is_data.push(is_data);
        self.seq_or_ack.push(seq_or_ack);
        self.payload_bytes.push(payload_bytes as u16);
        self.dsn.push(dsn);
        self.is_retrans.push(is_retrans);
        self.is_reinject.push(is_reinject);
        self.reason.push(reason);
    }
}

/// An ACK reaching the subflow sender (`AckRow`).
#[derive(Default)]
pub struct AckCols {
    pub t_ns: Col<i64>,
    pub subflow: Col<u8>,
    pub ack_seq: Col<i64>,
    pub data_ack: Col<i64>,
    pub rwnd_bytes: Col<u32>,
    pub has_sack: Col<bool>,
    pub owd_ns: Col<i64>,
}

impl AckCols {
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn push(&mut self, t_ns: i64, subflow: u32, ack_seq: i64, data_ack: i64, rwnd_bytes: i64, has_sack: bool,
                owd_ns: i64) {
        self.t_ns.push(t_ns);
        self.subflow.push(subflow as u8);
        self.ack_seq.push(ack_seq);
        self.data_ack.push(data_ack);
        self.rwnd_bytes.push(rwnd_bytes as u32);
        self.has_sack.push(has_sack);
        self.owd_ns.push(owd_ns);
    }
}

/// Subflow and connection state at an ACK or on the sampling clock (`SampleRow`).
#[derive(Default)]
pub struct SampleCols {
    pub t_ns: Col<i64>,
    pub is_periodic: Col<bool>,
    pub subflow: Col<u8>,
    pub cwnd: Col<u32>,
    pub inflight: Col<u32>,
    pub srtt_ns: Col<i64>,
    pub queued_bytes: Col<u32>,
    pub snd_buf_bytes: Col<u32>,
    pub rcv_ooo_bytes: Col<u32>,
}

impl SampleCols {
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn push(&mut self, t_ns: i64, is_periodic: bool, subflow: u32, cwnd: i64, inflight: i64, srtt_ns: i64,
                queued_bytes: i64, snd_buf_bytes: i64, rcv_ooo_bytes: i64) {
        self.t_ns.push(t_ns);
        self.is_periodic.push(is_periodic);
        self.subflow.push(subflow as u8);
        self.cwnd.push(cwnd as u32);
        self.inflight.push(inflight as u32);
        self.srtt_ns.push(srtt_ns);
        self.queued_bytes.push(queued_bytes as u32);
        self.snd_buf_bytes.push(snd_buf_bytes as u32);
        self.rcv_ooo_bytes.push(rcv_ooo_bytes as u32);
    }
}

/// What a built-in scheduler reports (`ObservationRow`): an integer or a label.
#[derive(Clone, Debug, PartialEq)]
pub enum ObsValue {
    Int(i64),
    Float(f64),
    Label(&'static str),
    /// A whole row `(t_ns, kind, subflow, value)` as a Python plug-in reported it through the bridge
    /// (`py_sched`): the plug-in's own objects (any kind, any value), handed back as they are by the
    /// export. The entry's other fields are for Rust readers: kind "python", t_ns and subflow when
    /// they are integers that fit (else 0 and u32::MAX).
    #[cfg(feature = "python")]
    PyRow(PyObs),
}

/// A Python object held by the recorder (`ObsValue::PyRow`). Cloning and comparing take the GIL.
#[cfg(feature = "python")]
#[derive(Debug)]
pub struct PyObs(pub pyo3::PyObject);

#[cfg(feature = "python")]
impl Clone for PyObs {
    fn clone(&self) -> Self {
        pyo3::Python::with_gil(|py| Self(self.0.clone_ref(py)))
    }
}

#[cfg(feature = "python")]
impl PartialEq for PyObs {
    /// Python's `==` (false if it raises).
    fn eq(&self, other: &Self) -> bool {
        pyo3::Python::with_gil(|py| pyo3::types::PyAnyMethods::eq(self.0.bind(py), other.0.bind(py)).unwrap_or(false))
    }
}

/// Every tap of one run.
#[derive(Default)]
pub struct Recorder {
    pub snd: SndCols,
    pub rcv: RcvCols,
    pub drop: DropCols,
    pub ack: AckCols,
    pub samples: SampleCols,
    pub observations: Vec<(i64, &'static str, u32, ObsValue)>,
}

/// Apply `$f` to every column of the recorder (`$r`), each as a `&Col<_>` or `&mut Col<_>`.
macro_rules! each_col {
    ($r:expr, $f:expr) => {{
        let r = $r;
        let s = &r.snd;
        ($f)(&s.t_ns);
        ($f)(&s.subflow);
        ($f)(&s.seq);
        ($f)(&s.payload_bytes);
        ($f)(&s.dsn);
        ($f)(&s.is_retrans);
        ($f)(&s.is_reinject);
        let c = &r.rcv.snd;
        ($f)(&c.t_ns);
        ($f)(&c.subflow);
        ($f)(&c.seq);
        ($f)(&c.payload_bytes);
        ($f)(&c.dsn);
        ($f)(&c.is_retrans);
        ($f)(&c.is_reinject);
        ($f)(&r.rcv.owd_ns);
        let d = &r.drop;
        ($f)(&d.t_ns);
        ($f)(&d.subflow);
        ($f)(&d.is_data);
        ($f)(&d.seq_or_ack);
        ($f)(&d.payload_bytes);
        ($f)(&d.dsn);
        ($f)(&d.is_retrans);
        ($f)(&d.is_reinject);
        ($f)(&d.reason);
        let a = &r.ack;
        ($f)(&a.t_ns);
        ($f)(&a.subflow);
        ($f)(&a.ack_seq);
        ($f)(&a.data_ack);
        ($f)(&a.rwnd_bytes);
        ($f)(&a.has_sack);
        ($f)(&a.owd_ns);
        let m = &r.samples;
        ($f)(&m.t_ns);
        ($f)(&m.is_periodic);
        ($f)(&m.subflow);
        ($f)(&m.cwnd);
        ($f)(&m.inflight);
        ($f)(&m.srtt_ns);
        ($f)(&m.queued_bytes);
        ($f)(&m.snd_buf_bytes);
        ($f)(&m.rcv_ooo_bytes);
    }};
}

/// Something every column can report, whatever its value type.
trait AnyCol {
    fn bytes(&self) -> usize;
}

impl<T> AnyCol for Col<T> {
    fn bytes(&self) -> usize {
        self.allocated_bytes()
    }
}

impl Recorder {
    /// Bytes held by the column buffers (their capacity: what the run really allocated).
    pub fn allocated_bytes(&self) -> usize {
        let mut total = 0;
        each_col!(self, |c: &dyn AnyCol| total += c.bytes());
        total
    }

    /// Rows recorded, all kinds.
    pub fn rows(&self) -> usize {
        self.snd.len() + self.rcv.snd.len() + self.drop.t_ns.len() + self.ack.t_ns.len() + self.samples.t_ns.len()
    }

    /// Give back what the last chunks do not use (the run has ended).
    pub fn shrink(&mut self) {
        let s = &mut self.snd;
        s.t_ns.shrink();
        s.subflow.shrink();
        s.seq.shrink();
        s.payload_bytes.shrink();
        s.dsn.shrink();
        s.is_retrans.shrink();
        s.is_reinject.shrink();
        let c = &mut self.rcv.snd;
        c.t_ns.shrink();
        c.subflow.shrink();
        c.seq.shrink();
        c.payload_bytes.shrink();
        c.dsn.shrink();
        c.is_retrans.shrink();
        c.is_reinject.shrink();
        self.rcv.owd_ns.shrink();
        let d = &mut self.drop;
        d.t_ns.shrink();
        d.subflow.shrink();
        d.is_data.shrink();
        d.seq_or_ack.shrink();
        d.payload_bytes.shrink();
        d.dsn.shrink();
        d.is_retrans.shrink();
        d.is_reinject.shrink();
        d.reason.shrink();
        let a = &mut self.ack;
        a.t_ns.shrink();
        a.subflow.shrink();
        a.ack_seq.shrink();
        a.data_ack.shrink();
        a.rwnd_bytes.shrink();
        a.has_sack.shrink();
        a.owd_ns.shrink();
        let m = &mut self.samples;
        m.t_ns.shrink();
        m.is_periodic.shrink();
        m.subflow.shrink();
        m.cwnd.shrink();
        m.inflight.shrink();
        m.srtt_ns.shrink();
        m.queued_bytes.shrink();
        m.snd_buf_bytes.shrink();
        m.rcv_ooo_bytes.shrink();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_keeps_every_value_in_order_across_chunks_and_a_shrink() {
        let mut c: Col<u32> = Col::default();
        assert!(c.is_empty() && c.chunks().count() == 0);
        let n = 2 * CHUNK_ROWS + 5;
        (0..n as u32).for_each(|i| c.push(i));
        assert_eq!(c.len(), n);
        assert_eq!(c.chunks().map(Vec::len).collect::<Vec<_>>(), [CHUNK_ROWS, CHUNK_ROWS, 5]);
        c.shrink();
        assert_eq!(c.allocated_bytes(), n * 4);
        // a push after the shrink: the shrunk chunk stays as it is, the next one starts
        c.push(n as u32);
        assert_eq!(c.chunks().map(Vec::len).collect::<Vec<_>>(), [CHUNK_ROWS, CHUNK_ROWS, 5, 1]);
        assert!(c.iter().copied().eq(0..=n as u32));
        assert!(c.into_chunks().into_iter().flatten().eq(0..=n as u32));
    }
}
