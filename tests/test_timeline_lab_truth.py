"""The rate a lab run's shaper had in force over each bin (`workbench.timeline._lab_truth`), on
hand-made schedules whose time-weighted means are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.timeline._lab_truth import applied_rate_bps

S = 1_000_000_000
MS = 1_000_000
T0_S = 1_700_000_000  # t0_epoch, a whole second so the bin edges below are exact


def _results(events: list[dict]) -> dict:
    return {"configured": {"path1": {"rate_down_mbps": 99.0}},
            "schedule": {"t0_epoch": float(T0_S), "events": events,
                         "initial": {"path1": {"rate_mbps": 10.0}, "path2": {"rate_mbps": 5.0}}}}


def _rate(path: int, at_ms: int, mbps: float, *, applied: bool = True, kind: str = "rate") -> dict:
    return {"path": path, "kind": kind, "value": mbps, "applied": applied, "t_applied_epoch": T0_S + at_ms / 1e3}


def test_a_change_inside_a_bin_is_weighted_by_the_time_it_held() -> None:
    res = _results([_rate(1, 40, 20.0), _rate(1, 250, 30.0)])
    starts = T0_S * S + np.array([0, 100, 200]) * MS
    got = applied_rate_bps(res, 1, starts, 100 * MS)
    # [0, 100) ms: 10 Mbit/s for 40 ms then 20 for 60 ms; [100, 200): 20; [200, 300): 20 for 50, 30 for 50
    assert got == pytest.approx([(10 * 40 + 20 * 60) / 100 * 1e6, 20e6, (20 * 50 + 30 * 50) / 100 * 1e6])


def test_only_applied_rate_changes_of_that_path_count() -> None:
    res = _results([_rate(2, 10, 50.0), _rate(1, 10, 70.0, applied=False), _rate(1, 10, 0.5, kind="delay"),
                    _rate(1, 60, 40.0)])
    starts = T0_S * S + np.array([0, 100]) * MS
    assert applied_rate_bps(res, 1, starts, 100 * MS) == pytest.approx([(10 * 60 + 40 * 40) / 100 * 1e6, 40e6])
    assert applied_rate_bps(res, 2, starts, 100 * MS) == pytest.approx([(5 * 10 + 50 * 90) / 100 * 1e6, 50e6])


def test_before_t0_the_initial_rate_holds() -> None:
    res = _results([_rate(1, 50, 30.0)])
    got = applied_rate_bps(res, 1, [T0_S * S - 300 * MS, T0_S * S - 50 * MS], 200 * MS)
    # [-300, -100) ms: the initial 10 Mbit/s; [-50, 150): 10 for 100 ms, then 30 for 100 ms
    assert got == pytest.approx([10e6, (10 * 100 + 30 * 100) / 200 * 1e6])


def test_a_run_without_a_schedule_keeps_its_configured_rate() -> None:
    res = {"configured": {"path1": {"rate_down_mbps": 30.0}, "path2": {"rate_down_mbps": 8.0}}}
    assert applied_rate_bps(res, 2, np.arange(3) * S, S).tolist() == [8e6, 8e6, 8e6]


def test_bins_must_have_a_length() -> None:
    with pytest.raises(ValueError, match="bin_ns"):
        applied_rate_bps(_results([]), 1, [0], 0)
