"""Golden runs: every built-in scheduler and layer on small scenarios (tests/_golden.py) must give
exactly the PacketEvents stored under tests/golden/. A change here is a change of the model: rewrite
with ``python tests/_golden.py --rewrite`` and say why in the commit message."""

from __future__ import annotations

import polars as pl
import pytest
from _golden import SCENARIOS, golden_path, run_golden, schedulers


@pytest.mark.parametrize("scheduler", schedulers())
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_run_is_unchanged(scenario: str, scheduler: str) -> None:
    path = golden_path(scenario, scheduler)
    assert path.is_file(), f"golden file {path.name} missing: run python tests/_golden.py --rewrite"
    want = pl.read_parquet(path)
    got = run_golden(scenario, scheduler)
    assert got.columns == want.columns
    assert got.height == want.height, f"{got.height} events, golden has {want.height}"
    for col in want.columns:
        diff = got[col].ne_missing(want[col])
        assert not diff.any(), (f"{col} differs first at row {int(diff.arg_max())}: "
                                f"{got[col][int(diff.arg_max())]} vs golden {want[col][int(diff.arg_max())]}")


def test_goldens_exercise_losses_and_drops() -> None:
    """The golden set is only worth what it exercises: drops of both kinds appear somewhere."""
    ev = pl.concat([pl.read_parquet(golden_path(sc, "minrtt")) for sc in SCENARIOS], how="vertical_relaxed")
    assert ev.filter(pl.col("point") == "drop").height > 0
    assert ev.filter(pl.col("point") == "rcv").height > 1000
