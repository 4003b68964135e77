"""The compiled core's recorder hand-over (native/engine/src/py_arrow.rs): a run's column buffers reach
polars through the Arrow C data interface (the PyCapsule protocol's stream form, one Arrow array per
recorder chunk) without being copied.

Held here, on the deterministic test recorder `workbench_core.demo_recorder(n_rows, seed)` against the
same data as plain lists (`demo_recorder_rows`): every column of every row kind arrives exactly, with
the types of `workbench.replay.tables.RECORD_SCHEMAS` and the field names of `workbench.replay.recorder`'s
rows, empty and multi-chunk columns included; every integer chunk polars holds is the Rust Vec itself
(same address), and every bool chunk the bitmap packed once at export; the memory goes back when the
last holder (column object, polars Series or frame, unconsumed capsule) goes, as the core's count of
exported bytes shows.
"""

from __future__ import annotations

import gc
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
import workbench_core
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.replay.recorder import AckRow, DropRow, RcvRow, SampleRow, SndRow
from workbench.replay.tables import RECORD_SCHEMAS

ROWS = {"snd": SndRow, "rcv": RcvRow, "drop": DropRow, "ack": AckRow, "samples": SampleRow}
ITEMSIZE = {pl.Int64: 8, pl.UInt32: 4, pl.UInt16: 2, pl.UInt8: 1}
# More rows than one recorder chunk holds (CHUNK_ROWS in native/engine/src/record.rs: 2**18).
MULTI_CHUNK_ROWS = 300_000


def _exported_bytes() -> int:
    gc.collect()
    return workbench_core.exported_column_bytes()


def _frame(cols: dict[str, Any]) -> pl.DataFrame:
    # from Series: pl.DataFrame({name: column}) would import the chunks too, but then rechunk (copy)
    return pl.DataFrame([pl.Series(c) for c in cols.values()])


def _chunk_addresses(s: pl.Series) -> list[int]:
    """Where polars holds each chunk's values: to_numpy raises rather than copy, so the array is a view."""
    if s.dtype == pl.Boolean:
        return [c.to_arrow().buffers()[1].address for c in s.get_chunks()]
    return [c.to_numpy(allow_copy=False).ctypes.data for c in s.get_chunks()]


def test_fields_and_types_are_the_engines() -> None:
    d = workbench_core.demo_recorder(3, 1)
    assert list(d) == [*RECORD_SCHEMAS, "observations"]
    for kind, row in ROWS.items():
        assert list(RECORD_SCHEMAS[kind]) == list(row._fields)
        assert list(d[kind]) == list(row._fields)
        assert [c.name for c in d[kind].values()] == list(row._fields)
        assert _frame(d[kind]).schema == pl.Schema(RECORD_SCHEMAS[kind])


@settings(max_examples=60, deadline=None)
@given(n_rows=st.integers(0, 9) | st.integers(10, 400), seed=st.integers(0, 2**64 - 1))
def test_every_column_round_trips_exactly(n_rows: int, seed: int) -> None:
    d = workbench_core.demo_recorder(n_rows, seed)
    rows = workbench_core.demo_recorder_rows(n_rows, seed)
    for kind, schema in RECORD_SCHEMAS.items():
        df = _frame(d[kind])
        assert df.schema == pl.Schema(schema)
        assert df.to_dict(as_series=False) == rows[kind]
        for name, dtype in schema.items():
            col = d[kind][name]
            s = pl.Series(col)  # the same column exported a second time: still the same data
            assert (s.name, s.dtype, len(col)) == (name, dtype, len(rows[kind][name]))
            assert s.to_list() == rows[kind][name]
    assert d["observations"] == rows["observations"]
    assert all(isinstance(o, tuple) and len(o) == 4 for o in d["observations"])


def test_demo_recorder_spans_the_ranges() -> None:
    """The round trip above is only as sharp as its data: extremes, both signs and both bools occur."""
    rows = workbench_core.demo_recorder_rows(2000, 3)
    assert {-(2**63), 2**63 - 1} <= set(rows["snd"]["t_ns"])
    assert max(rows["drop"]["reason"]) > 127 and max(rows["ack"]["subflow"]) > 127
    assert max(rows["snd"]["payload_bytes"]) > 2**15 and max(rows["samples"]["cwnd"]) > 2**31
    assert set(rows["samples"]["is_periodic"]) == {False, True}
    assert {type(o[3]) for o in rows["observations"]} == {int, float, str}


def test_empty_recorder() -> None:
    d = workbench_core.demo_recorder(0, 5)
    assert d["observations"] == []
    for kind, schema in RECORD_SCHEMAS.items():
        df = _frame(d[kind])
        assert df.schema == pl.Schema(schema) and df.height == 0
        for name, dtype in schema.items():
            s = pl.Series(d[kind][name])
            assert (s.dtype, s.len(), d[kind][name].nbytes, len(d[kind][name])) == (dtype, 0, 0, 0)


@pytest.mark.parametrize("n_rows", [2, 14, 16, 18, 1000])  # drop: 1, 7, 8, 9, 500 rows
def test_buffers_are_the_recorders_not_copies(n_rows: int) -> None:
    d = workbench_core.demo_recorder(n_rows, 11)
    for kind, schema in RECORD_SCHEMAS.items():
        frame = _frame(d[kind])
        for name, dtype in schema.items():
            col = d[kind][name]
            s = pl.Series(col)
            assert col.n_chunks == s.n_chunks() == 1
            if dtype == pl.Boolean:
                # bit-packed once at export; polars then shares that bitmap
                assert col.nbytes == (len(col) + 7) // 8
            else:
                # the Vec the recorder filled is the Arrow buffer
                assert col.nbytes == len(col) * ITEMSIZE[dtype]
                assert col.chunk_addresses == col.vec_addresses
            assert _chunk_addresses(s) == _chunk_addresses(frame[name]) == col.chunk_addresses


def test_multi_chunk_columns_keep_their_chunks() -> None:
    d = workbench_core.demo_recorder(MULTI_CHUNK_ROWS, 6)
    rows = workbench_core.demo_recorder_rows(MULTI_CHUNK_ROWS, 6, kinds=["snd"])
    assert list(rows) == ["snd", "observations"]
    frame = _frame(d["snd"])
    assert frame.to_dict(as_series=False) == rows["snd"]
    for name, col in d["snd"].items():
        assert col.n_chunks >= 2, "raise MULTI_CHUNK_ROWS: record.rs's chunks grew"
        s = pl.Series(col)
        assert s.n_chunks() == frame[name].n_chunks() == col.n_chunks
        assert _chunk_addresses(s) == _chunk_addresses(frame[name]) == col.chunk_addresses
        if s.dtype != pl.Boolean:
            assert col.chunk_addresses == col.vec_addresses
    samples = _frame(d["samples"])
    assert samples.height == MULTI_CHUNK_ROWS * 3 // 2 and samples["cwnd"].n_chunks() >= 2


def test_pyarrow_adopts_the_buffers_too() -> None:
    col = workbench_core.demo_recorder(MULTI_CHUNK_ROWS, 2)["rcv"]["owd_ns"]
    arr = pa.chunked_array(col)
    assert arr.type == pa.int64() and arr.num_chunks == col.n_chunks >= 2
    assert [c.buffers()[1].address for c in arr.chunks] == col.vec_addresses


def test_memory_goes_back_with_the_last_holder() -> None:
    base = _exported_bytes()
    d = workbench_core.demo_recorder(20_000, 9)
    everything = _exported_bytes() - base
    # the run's buffers, shrunk before the hand-over: about the columns' lengths
    assert everything >= sum(c.nbytes for kind in RECORD_SCHEMAS for c in d[kind].values()) > 20_000 * 60
    t_ns = pl.Series(d["snd"]["t_ns"])
    acks = _frame(d["ack"])
    t_ns_bytes, ack_bytes = d["snd"]["t_ns"].nbytes, sum(c.nbytes for c in d["ack"].values())
    del d
    held = _exported_bytes() - base
    assert t_ns_bytes + ack_bytes <= held < everything  # the rest went with the column objects
    # still readable, and right, with the column objects gone
    assert t_ns.to_list() == workbench_core.demo_recorder_rows(20_000, 9, kinds=["snd"])["snd"]["t_ns"]
    del t_ns
    held_without_t_ns = _exported_bytes() - base
    assert ack_bytes <= held_without_t_ns <= held - t_ns_bytes
    del acks
    assert _exported_bytes() == base


def test_unconsumed_capsules_release_the_buffers() -> None:
    base = _exported_bytes()
    col = workbench_core.demo_recorder(1000, 4)["ack"]["data_ack"]
    assert _exported_bytes() - base >= 8000  # only this column is still held
    capsules = [col.__arrow_c_stream__() for _ in range(3)]
    del col
    assert _exported_bytes() - base >= 8000  # the streams hold it now
    del capsules
    assert _exported_bytes() == base
