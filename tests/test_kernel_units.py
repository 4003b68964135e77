"""The kernel backend's pure parts, no root needed: schedule merging and coarsening, the accuracy
estimators on synthetic arrivals with a known rate and delay, the experiment -> run plan conversion
and the refusals (unsupported experiments, a machine without root)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from workbench.backends import UnsupportedExperiment, get_backend
from workbench.backends._kernel import LabUnavailable, check_environment
from workbench.backends._kernel._convert import coarsen, plan_from_experiment
from workbench.backends._kernel.accuracy import InForce, delay_bins, rate_bins, summarize_accuracy
from workbench.backends._kernel.shaping import htb_rate, merged_schedule, outages
from workbench.experiment import BulkWorkload, FiniteWorkload, StepSeries, experiment_from_paths, two_way_path

MS = 1_000_000


def test_merged_schedule_has_every_change_of_delay_and_loss() -> None:
    owd = ((0, 1000 * MS, 2000 * MS), (10e6, 30e6, 30e6))
    loss = ((0, 1500 * MS), (0.0, 0.01))
    assert merged_schedule(owd, loss) == [(0, 10_000_000, 0.0, 0), (1000 * MS, 30_000_000, 0.0, 0),
                                          (1500 * MS, 30_000_000, 0.01, 0)]


def test_zero_capacity_becomes_delay_line_outages_and_htb_keeps_the_last_rate() -> None:
    rate = ((0, 100 * MS, 300 * MS, 400 * MS, 700 * MS), (0.0, 20e6, 0.0, 5e6, 0.0))
    assert outages(rate) == [(0, 100 * MS), (300 * MS, 400 * MS), (700 * MS, None)]
    # the class never goes below a real rate: it starts at the first positive one and keeps the last
    assert htb_rate(rate) == ((0, 400 * MS), (20e6, 5e6))
    owd = ((0,), (10e6,))
    loss = ((0,), (0.0,))
    assert merged_schedule(owd, loss, rate) == [(0, 10_000_000, 0.0, 1), (100 * MS, 10_000_000, 0.0, 0),
                                                (300 * MS, 10_000_000, 0.0, 1), (400 * MS, 10_000_000, 0.0, 0),
                                                (700 * MS, 10_000_000, 0.0, 1)]
    # a capacity that is never zero changes nothing
    steady = ((0, 500 * MS), (10e6, 30e6))
    assert outages(steady) == [] and htb_rate(steady) == steady
    assert [h for *_, h in merged_schedule(owd, loss, steady)] == [0]


def test_coarsen_keeps_the_mean_rate_of_fine_traces() -> None:
    rng = np.random.default_rng(3)
    t = tuple(range(0, 2000 * MS, 10 * MS))
    v = tuple(float(x) for x in rng.uniform(1e6, 30e6, len(t)))
    c = coarsen((t, v), step_ns=100 * MS, end_ns=2000 * MS)
    assert min(b - a for a, b in zip(c[0], c[0][1:], strict=False)) >= 100 * MS
    # every 100 ms step is the mean of its ten 10 ms steps
    for k, t0 in enumerate(c[0]):
        i = t.index(t0)
        assert c[1][k] == pytest.approx(np.mean(v[i:i + 10]))
    coarse = ((0, 500 * MS), (5e6, 7e6))
    assert coarsen(coarse, step_ns=100 * MS, end_ns=None) == coarse


def _arrivals(rate_bps: float, frame_bytes: int, t_start_ns: int, t_end_ns: int) -> np.ndarray:
    gap = frame_bytes * 8 / rate_bps * 1e9
    return np.arange(t_start_ns, t_end_ns, gap).astype(np.int64)


def test_rate_bins_recover_a_known_rate_and_a_late_step() -> None:
    # the link switched from 20 to 8 Mbit/s at 1.03 s, planned for 1.00 s
    t = pl.Series(np.concatenate([_arrivals(20e6, 1442, 0, 1030 * MS), _arrivals(8e6, 1442, 1030 * MS, 2000 * MS)]))
    sizes = pl.Series([1442] * t.len())
    rate = ((0, 1000 * MS), (20e6, 8e6))
    as_applied = rate_bins(t, sizes, InForce.of(rate, applied=[(1000 * MS, 1030 * MS)]), bin_ns=100 * MS,
                           end_ns=2000 * MS)
    assert as_applied["bin"].to_list() == list(range(1, 20))  # the first bin is never judged
    assert as_applied["rel_err"].abs().max() < 5e-3  # (frame spacing across the switch)
    as_planned = rate_bins(t, sizes, InForce.of(rate), bin_ns=100 * MS, end_ns=2000 * MS)
    worst = as_planned.filter(pl.col("rel_err").abs() > 5e-3)["bin"].to_list()
    assert worst == [10]  # 30 ms at the old rate: that bin is off against the plan, and only that one


def test_rate_bins_drop_bins_where_the_queue_ran_empty() -> None:
    t = pl.Series(_arrivals(10e6, 1442, 0, 1000 * MS))
    sizes = pl.Series([1442] * t.len())
    rate, owd = InForce.of(((0,), (10e6,))), InForce.of(((0,), (20e6,)))
    owd_ns = pl.Series([20 * MS] * t.len())  # = the delay in force: nothing queued, the link may have idled
    assert rate_bins(t, sizes, rate, bin_ns=100 * MS, end_ns=1000 * MS, owd_ns=owd_ns, owd=owd).height == 0
    assert rate_bins(t, sizes, rate, bin_ns=100 * MS, end_ns=1000 * MS, owd_ns=owd_ns + 5 * MS, owd=owd).height == 9


def test_in_force_follows_steps_and_ramps() -> None:
    owd = InForce.of(((0, 1000 * MS), (50e6, 5e6)), ramps=[(1000 * MS, 1090 * MS, 50e6, 5e6)])
    got = owd.at(np.array([999 * MS, 1000 * MS, 1045 * MS, 1090 * MS, 2000 * MS]))
    assert got.tolist() == [50e6, 50e6, 27.5e6, 5e6, 5e6]
    r = InForce.of(((0, 100 * MS), (10e6, 20e6)))
    assert r.mean(np.array([50 * MS]), np.array([150 * MS])).tolist() == [15e6]


def test_delay_bins_take_the_least_queued_packet() -> None:
    t = pl.Series(np.arange(0, 1000 * MS, 5 * MS))
    owd = pl.Series(np.where(np.arange(t.len()) % 4 == 0, 30 * MS + 40_000, 35 * MS))
    d = delay_bins(t, owd, InForce.of(((0,), (30e6,))), bin_ns=100 * MS, end_ns=1000 * MS)
    assert d.height == 9 and set(d["err_ns"].to_list()) == {40_000.0}
    s = summarize_accuracy(None, d)
    assert s["delay_err_p50_ms"] == pytest.approx(0.04)


def _exp(**kw):
    wifi = two_way_path("wifi", rate_bps=StepSeries((0, 10**9), (20e6, 8e6)), owd_ns=10 * MS, buffer_packets=50)
    lte = two_way_path("lte", rate_bps=10e6, owd_ns=40 * MS, buffer_bytes=300_000)
    args = {"workload": BulkWorkload(stop_ns=3 * 10**9), "scheduler": "upstream", "duration_ns": 5 * 10**9} | kw
    return experiment_from_paths([wifi, lte], **args)


def test_plan_from_experiment_keeps_paths_buffers_schedules_and_direction() -> None:
    plan, notes = plan_from_experiment(_exp(direction="up", workload=FiniteWorkload(2_000_000)))
    assert [p.name for p in plan.paths] == ["wifi", "lte"]
    wifi, lte = plan.paths
    assert wifi.down.rate_bps == ((0, 10**9), (20e6, 8e6)) and wifi.down.buffer_packets == 50
    assert lte.up.buffer_bytes == 300_000 and lte.down.owd_ns == ((0,), (40e6,))
    assert plan.transfer.direction == "up" and plan.transfer.size_bytes == 2_000_000
    assert [s.path for s in plan.subflows] == [0, 1] and plan.subflows[1].join_ns is None
    assert notes == []


def test_kernel_backend_refuses_the_models_schedulers_and_app_traces() -> None:
    kb = get_backend("kernel")
    kb.check(_exp())  # upstream default, bulk: fine
    with pytest.raises(UnsupportedExperiment, match="minrtt"):
        kb.check(_exp(scheduler="minrtt"))
    from workbench.experiment import BurstsWorkload
    with pytest.raises(UnsupportedExperiment, match="BurstsWorkload"):
        kb.check(_exp(workload=BurstsWorkload(segments=10)))


def test_without_root_one_line_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(LabUnavailable, match="needs root") as e:
        check_environment()
    assert "\n" not in str(e.value)


def test_without_mptcp_one_line_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path
    real = Path.exists
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr(Path, "exists", lambda self: False if str(self) == "/proc/sys/net/mptcp/enabled" else real(self))
    with pytest.raises(LabUnavailable, match="MPTCP"):
        check_environment()


def test_late_connect_is_the_clients_first_syn_after_time_zero() -> None:
    from workbench.backends._kernel.labrun import late_connect_ns

    ev = pl.DataFrame({"t_ns": [25_000_000, 25_100_000, 30_000_000, 31_000_000],
                       "flags": [0x002, 0x012, 0x002, 0x010], "dir": ["c2s", "s2c", "c2s", "c2s"],
                       "point": ["snd", "snd", "snd", "snd"]})
    assert late_connect_ns(ev) == 25_000_000  # the first SYN the client sent (its MP_JOIN later)
    assert late_connect_ns(ev.filter(pl.col("flags") == 0x010)) is None
