"""A report's numbers do not depend on whether the caches (parsed captures, and the analysis of a
capture: `workbench.capture._analysis_cache`) were cold or warm.

The analysis cache must give back the tables as polars held them, not only their values: a column
polars holds as one repeated value, gathered by `metrics._common.take`, keeps a group's float mean
summed in another order, and the RTT mean of tests_mptcp-v1 differed in its last bit when the cached
table had it row by row.

The parsed tables were always equal; what differed was `estimate_timelines`' choice of a path's data
direction when both directions carried the same payload (the echo transfers of tests_mptcp-fclose and
tests_mptcp-v1): it was the first row of a ``group_by`` sorted by bytes, and polars' group order comes
from a randomly seeded hash, so it changed from one call to the next (in one process as well as
between a cold and a warm run). Each comparison of two runs could miss it (one chance in two), so
every capture is run cold once and warm a few times, and the cheaper estimate many times.
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted((ROOT / "traces" / "fixtures").glob("*.pcap"))
# The lab runs are client + server pairs of several MB; c07 (0.6 MB each) keeps the test short.
LAB = [ROOT / "traces" / "lab" / "c07"]
WARM_RUNS = 3
ESTIMATE_RUNS = 16


def _report(inp: Path, out: Path) -> pl.DataFrame:
    from workbench.report import resolve_settings, run_report

    run_report([str(inp)], str(out), resolve_settings("upstream"), jobs=1, show_progress=False)
    return pl.read_parquet(out / "metrics.parquet")


@pytest.mark.parametrize("inp", FIXTURES + LAB, ids=lambda p: p.name)
def test_report_metrics_cold_equal_warm(inp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not inp.exists():
        pytest.skip(f"{inp} not bundled")
    cache = tmp_path / "cache"
    monkeypatch.setenv("WORKBENCH_CACHE", str(cache))
    cold = _report(inp, tmp_path / "cold")
    assert any(cache.glob("*.parquet")), "the cold run left no cache entry: the warm runs would not be warm"
    assert any((cache / "analysis").glob("*.events.parquet")), "the cold run left no analysis cache entry"
    assert cold.height > 0
    for i in range(WARM_RUNS):
        warm = _report(inp, tmp_path / f"warm{i}")
        assert warm.equals(cold, null_equal=True), f"{inp.name}: warm run {i} differs:\n{_diff(cold, warm)}"


def _diff(cold: pl.DataFrame, warm: pl.DataFrame) -> pl.DataFrame:
    keys = ["source", "path", "metric"]
    return (cold.select(*keys, "value").join(warm.select(*keys, "value"), on=keys, how="full", suffix="_warm",
                                             coalesce=True, nulls_equal=True)
            .filter(pl.col("value").ne_missing(pl.col("value_warm"))))


def _steps_bytes(timelines: object) -> list[tuple[str, bytes, tuple[str, ...]]]:
    out = []
    for name, tl in timelines.items():  # type: ignore[attr-defined]
        buf = io.BytesIO()
        tl.steps.write_ipc(buf)
        out.append((name, buf.getvalue(), tuple(tl.notes)))
    return out


@pytest.mark.parametrize("inp", [p for p in FIXTURES if p.stem in ("tests_mptcp-fclose", "tests_mptcp-v1")],
                         ids=lambda p: p.name)
def test_estimate_timelines_repeatable_on_echo_transfers(inp: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The table that diverged: the estimate of a path whose two directions carry equal payload is
    the same on every call, read cold or warm, and estimated in the direction the report replays
    (ties are downloads, "s2c", as in `workbench.metrics.data_directions`)."""
    from workbench.capture import load
    from workbench.metrics import data_direction
    from workbench.timeline import estimate_timelines

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    cap_cold = load(str(inp))
    cap_warm = load(str(inp))
    ev_cold = cap_cold.connection(cap_cold.main_connection)
    ev_warm = cap_warm.connection(cap_warm.main_connection)
    assert ev_cold.equals(ev_warm, null_equal=True)
    first = _steps_bytes(estimate_timelines(ev_cold))
    for i in range(ESTIMATE_RUNS):
        ev = ev_warm if i % 2 else ev_cold
        assert _steps_bytes(estimate_timelines(ev)) == first, f"{inp.name}: estimate {i} differs"
    assert data_direction(ev_cold, cap_cold.main_connection) == "s2c"
    assert all("data s2c" in notes[0] for _, _, notes in first), [notes[0] for _, _, notes in first]
