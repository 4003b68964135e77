"""The compiled core's recorder hand-over (native/engine/src/py_arrow.rs): a run's typed column buffers
reach polars through the Arrow C data interface (the PyCapsule protocol) without being copied.

Held here, on the deterministic test recorder `workbench_core.demo_recorder(n_rows, seed)` against the
same data as plain lists (`demo_recorder_rows`): every column of every row kind arrives exactly, with
its dtype and the field names of `workbench.replay.recorder`'s rows, empty columns included; an integer
column's polars buffer is the Rust buffer itself (same address), and a bool column's is the bitmap packed
once at export; the memory goes back when the last holder (column object, polars Series or DataFrame,
unconsumed capsule) goes, as the core's count of exported bytes shows.
"""

from __future__ import annotations

import gc

import polars as pl
import pyarrow as pa
import pytest
import workbench_core
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.replay.recorder import AckRow, DropRow, RcvRow, SampleRow, SndRow

I64, U32, U8, BOOL = pl.Int64, pl.UInt32, pl.UInt8, pl.Boolean
_SND = {"t_ns": I64, "subflow": U32, "seq": I64, "payload_bytes": U32, "dsn": I64, "is_retrans": BOOL,
        "is_reinject": BOOL}
# Each row kind's columns, in the order of the Python engine's row, with the dtype the recorder stores.
SCHEMA: dict[str, dict[str, pl.DataType]] = {
    "snd": _SND,
    "rcv": {**_SND, "owd_ns": I64},
    "drop": {"t_ns": I64, "subflow": U32, "is_data": BOOL, "seq_or_ack": I64, "payload_bytes": U32, "dsn": I64,
             "is_retrans": BOOL, "is_reinject": BOOL, "reason": U8},
    "ack": {"t_ns": I64, "subflow": U32, "ack_seq": I64, "data_ack": I64, "rwnd_bytes": I64, "has_sack": BOOL,
            "owd_ns": I64},
    "samples": {"t_ns": I64, "is_periodic": BOOL, "subflow": U32, "cwnd": I64, "inflight": I64, "srtt_ns": I64,
                "queued_bytes": I64, "snd_buf_bytes": I64, "rcv_ooo_bytes": I64},
}
ROWS = {"snd": SndRow, "rcv": RcvRow, "drop": DropRow, "ack": AckRow, "samples": SampleRow}
ITEMSIZE = {I64: 8, U32: 4, U8: 1}


def _exported_bytes() -> int:
    gc.collect()
    return workbench_core.exported_column_bytes()


def test_schema_is_the_python_rows() -> None:
    d = workbench_core.demo_recorder(3, 1)
    assert list(d) == [*SCHEMA, "observations"]
    for kind, row in ROWS.items():
        assert list(SCHEMA[kind]) == list(row._fields)
        assert list(d[kind]) == list(row._fields)
        assert [c.name for c in d[kind].values()] == list(row._fields)


@settings(max_examples=60, deadline=None)
@given(n_rows=st.integers(0, 9) | st.integers(10, 400), seed=st.integers(0, 2**64 - 1))
def test_every_column_round_trips_exactly(n_rows: int, seed: int) -> None:
    d = workbench_core.demo_recorder(n_rows, seed)
    rows = workbench_core.demo_recorder_rows(n_rows, seed)
    for kind, fields in SCHEMA.items():
        df = pl.DataFrame(d[kind])
        assert df.schema == pl.Schema(fields)
        assert df.to_dict(as_series=False) == rows[kind]
        for name, dtype in fields.items():
            col = d[kind][name]
            s = pl.Series(col)  # the same column object exported a second time: still the same data
            assert (s.name, s.dtype, len(col)) == (name, dtype, len(rows[kind][name]))
            assert s.to_list() == rows[kind][name]
    assert d["observations"] == rows["observations"]
    assert all(isinstance(o, tuple) and len(o) == 4 for o in d["observations"])
    assert {type(o[3]) for o in d["observations"]} <= {int, float, str}


def test_demo_recorder_spans_the_ranges() -> None:
    """The round trip above is only as sharp as its data: extremes, both signs and both bools occur."""
    rows = workbench_core.demo_recorder_rows(2000, 3)
    assert {-(2**63), 2**63 - 1} <= set(rows["snd"]["t_ns"])
    assert max(rows["ack"]["subflow"]) > 2**31 and max(rows["drop"]["reason"]) > 127
    assert set(rows["samples"]["is_periodic"]) == {False, True}
    assert {type(o[3]) for o in rows["observations"]} == {int, float, str}


def test_empty_recorder() -> None:
    d = workbench_core.demo_recorder(0, 5)
    assert d["observations"] == []
    for kind, fields in SCHEMA.items():
        df = pl.DataFrame(d[kind])
        assert df.schema == pl.Schema(fields) and df.height == 0
        for name, dtype in fields.items():
            s = pl.Series(d[kind][name])
            assert (s.dtype, s.len(), d[kind][name].nbytes) == (dtype, 0, 0)


@pytest.mark.parametrize("n_rows", [2, 14, 16, 18, 1000])  # drop: 1, 7, 8, 9, 500 rows
def test_buffers_are_the_recorders_not_copies(n_rows: int) -> None:
    d = workbench_core.demo_recorder(n_rows, 11)
    for kind, fields in SCHEMA.items():
        frame = pl.DataFrame(d[kind])
        for name, dtype in fields.items():
            col = d[kind][name]
            assert len(col) > 0  # an empty buffer has no address worth comparing (polars uses its own)
            s = pl.Series(col)
            values = s.to_arrow().buffers()[1]  # polars exports its own buffer to pyarrow as it is
            assert values is not None
            if dtype == BOOL:
                # bit-packed once at export; polars then shares that bitmap
                assert col.nbytes == (len(col) + 7) // 8
                assert values.address == col.data_address
                continue
            assert col.nbytes == len(col) * ITEMSIZE[dtype]
            # the Vec the recorder filled is the Arrow buffer, and polars holds that very buffer
            assert values.address == col.data_address == col.vec_address
            # to_numpy refuses (raises) if it would have to copy; the array views the Rust Vec
            assert s.to_numpy(allow_copy=False).ctypes.data == col.data_address
            assert frame[name].to_numpy(allow_copy=False).ctypes.data == col.data_address


def test_pyarrow_adopts_the_buffer_too() -> None:
    col = workbench_core.demo_recorder(100, 2)["rcv"]["owd_ns"]
    arr = pa.array(col)
    assert arr.type == pa.int64() and arr.buffers()[1].address == col.vec_address
    assert arr.to_pylist() == workbench_core.demo_recorder_rows(100, 2)["rcv"]["owd_ns"]


def test_memory_goes_back_with_the_last_holder() -> None:
    base = _exported_bytes()
    d = workbench_core.demo_recorder(20_000, 9)
    everything = _exported_bytes() - base
    # the Vecs' capacity is counted: at least the columns' lengths
    assert everything >= sum(c.nbytes for kind in SCHEMA for c in d[kind].values()) > 20_000 * 60
    t_ns = pl.Series(d["snd"]["t_ns"])
    acks = pl.DataFrame(d["ack"])
    t_ns_bytes, ack_bytes = d["snd"]["t_ns"].nbytes, sum(c.nbytes for c in d["ack"].values())
    del d
    held = _exported_bytes() - base
    assert t_ns_bytes + ack_bytes <= held < everything  # the rest was freed with the column objects
    # still readable, and right, with the column objects gone
    assert t_ns.to_list() == workbench_core.demo_recorder_rows(20_000, 9)["snd"]["t_ns"]
    del t_ns
    held_without_t_ns = _exported_bytes() - base
    assert ack_bytes <= held_without_t_ns <= held - t_ns_bytes
    del acks
    assert _exported_bytes() == base


def test_unconsumed_capsules_release_the_buffer() -> None:
    base = _exported_bytes()
    col = workbench_core.demo_recorder(1000, 4)["ack"]["data_ack"]
    assert _exported_bytes() - base >= 8000  # only this column is still held
    capsules = [col.__arrow_c_array__() for _ in range(3)]
    del col
    assert _exported_bytes() - base >= 8000  # the capsules' arrays hold it now
    del capsules
    assert _exported_bytes() == base
