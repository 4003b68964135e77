"""benchmarks/fidelity.py's bookkeeping of run lengths: every row says how long its bulk transfer
ran, one matrix holds one length, and FIDELITY.md puts the lengths side by side (the model against
the kernel, and the kernel against itself) from the rows, not from numbers written by hand."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.fidelity import BULK_S, _frame, configs, run_bulk_s, write_doc  # noqa: E402


def _rows(bulk_s: float, *, model_goodput: float, kernel_goodputs: tuple[float, float]) -> pl.DataFrame:
    """Two configurations x two kernel seeds + the model: metrics equal everywhere except goodput."""
    rows: list[dict[str, Any]] = []
    for cfg in configs()[:2]:
        base: dict[str, Any] = {"config": cfg.name, "ooo_p50_ms": 1.0, "ooo_p95_ms": 10.0, "ooo_mean_ms": 2.0,
                                "share_p1": 0.6, "share_p2": 0.4, "rtt_p50_ms_p1": 20.0, "rtt_p50_ms_p2": 40.0,
                                "bulk_s": bulk_s, "error": None}
        for seed, g in enumerate(kernel_goodputs):
            rows.append(base | {"seed": seed, "backend": "kernel", "goodput_mbps": g, "emulation_ok": True})
        rows.append(base | {"seed": 0, "backend": "model", "goodput_mbps": model_goodput})
    return _frame(rows)


def test_rows_written_before_the_column_are_the_default_length_and_one_matrix_has_one_length() -> None:
    old = _rows(3.0, model_goodput=10.0, kernel_goodputs=(10.0, 10.0)).drop("bulk_s")
    assert run_bulk_s(old) == BULK_S
    assert run_bulk_s(_rows(10.0, model_goodput=10.0, kernel_goodputs=(10.0, 10.0))) == 10.0
    mixed = pl.concat([_rows(3.0, model_goodput=1.0, kernel_goodputs=(1.0, 1.0)),
                       _rows(10.0, model_goodput=1.0, kernel_goodputs=(1.0, 1.0))])
    with pytest.raises(ValueError, match="one matrix has one length"):
        run_bulk_s(mixed)


def test_the_doc_sets_each_length_beside_the_kernel_against_itself(tmp_path: Path) -> None:
    # 3 s: the model 8 % off, the kernel's seeds 10 % apart; 10 s: the model 2 % off, the seeds agree
    short = _rows(3.0, model_goodput=10.8, kernel_goodputs=(9.5, 10.5))
    long = _rows(10.0, model_goodput=10.2, kernel_goodputs=(10.0, 10.0))
    cfgs = configs()[:2]
    doc = tmp_path / "FIDELITY.md"
    counts = write_doc(short, cfgs, doc, command="test", data_file="fidelity.csv",
                       other_lengths=[("FIDELITY-10s.md", long)])
    assert counts["goodput"] == (0, 2)
    text = doc.read_text()
    assert "bulk transfers 3 s in 4 s runs" in text
    row = next(line for line in text.splitlines() if line.startswith("| goodput within 5 % | 0 / 2 | 0 / 2 |"))
    assert row.endswith("| 2 / 2 | 2 / 2 |"), row  # 10 s: model inside on both, the kernel agrees with itself
    assert "[10 s](FIDELITY-10s.md)" in text


def test_a_configuration_keeps_its_buffers_however_long_its_traces_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Traces cover 60 s runs, but a trace path's buffer is sized on its first 5 s as it always was:
    the kernel rows of the 3 s matrix were run with those buffers (sizing on the whole 61 s changed 13
    configurations' buffers, e.g. ping-tmobile's slow path 173500 -> 169500 bytes)."""
    import benchmarks.fidelity as fidelity

    long_traces = {c.name: [p.buffer_bytes for p in c.paths] for c in fidelity.configs()}
    assert fidelity._window.__kwdefaults__ is not None
    monkeypatch.setitem(fidelity._window.__kwdefaults__, "span_s", fidelity.DURATION_S + 1)
    monkeypatch.setattr(fidelity, "_CONFIGS", None)
    short_traces = {c.name: [p.buffer_bytes for p in c.paths] for c in fidelity.configs()}
    assert any(len(c.paths[0].rate_bps.values) > 1 for c in fidelity.configs())  # traces are there
    assert long_traces == short_traces
