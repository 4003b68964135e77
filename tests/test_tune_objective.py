"""Objectives, aggregation over inputs, per-input intermediate values and pruning, missing metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import polars as pl
import pytest

from workbench.errors import InputError
from workbench.tune import objective as obj_mod
from workbench.tune.inputs import load_inputs, parse_workload
from workbench.tune.objective import (
    OBJECTIVES,
    MetricMissing,
    TrialObjective,
    aggregate,
    measure,
    resolve_objectives,
)
from workbench.tune.space import Dim

ROOT = Path(__file__).resolve().parents[1]


def _scenario(path: Path, slow_owd_ms: float, duration_s: float = 0.6) -> str:
    path.write_text(json.dumps({
        "duration_s": duration_s, "workload": "bulk",
        "paths": [{"name": "wifi", "rate_mbps": 20, "owd_ms": 10, "buffer_packets": 50},
                  {"name": "lte", "rate_mbps": 10, "owd_ms": slow_owd_ms, "buffer_packets": 200}]}))
    return str(path)


def test_aggregate_mean_and_worst() -> None:
    assert aggregate([1.0, 3.0], "mean", "minimize") == 2.0
    assert aggregate([1.0, 3.0], "worst", "minimize") == 3.0
    assert aggregate([1.0, 3.0], "worst", "maximize") == 1.0
    with pytest.raises(InputError):
        aggregate([1.0], "median", "minimize")  # type: ignore[arg-type]


def test_resolve_objectives() -> None:
    assert [o.name for o in resolve_objectives([])] == ["ooo_p95"]
    got = resolve_objectives(["goodput", "ooo_p95", "completion_time", "app_delay", "ooo_mean"])
    assert [(o.metric, o.direction) for o in got] == [
        ("goodput_mbps", "maximize"), ("ooo_p95_ms", "minimize"), ("completion_s", "minimize"),
        ("app_delay_mean_ms", "minimize"), ("ooo_mean_ms", "minimize")]
    with pytest.raises(InputError, match="unknown objective"):
        resolve_objectives(["latency"])
    with pytest.raises(InputError, match="twice"):
        resolve_objectives(["goodput", "goodput_mbps"])


def test_parse_workload() -> None:
    assert parse_workload("finite:4MB").size_bytes == 4_000_000
    assert parse_workload("finite:2MiB").size_bytes == 2 * 1024**2
    assert parse_workload("bulk").stop_ns is None
    for bad in ("finite", "finite:x", "burst"):
        with pytest.raises(InputError):
            parse_workload(bad)


_KEYS = [o.metric for o in OBJECTIVES.values()]


# redundant: every segment on both paths, so half the receiver's rows are duplicates (which goodput
# leaves out and the OOO summary counts); measure derives the segments once for both
@pytest.mark.parametrize("scheduler", ["stms_a", "redundant"])
def test_measure_matches_summarize(tmp_path: Path, scheduler: str) -> None:
    from workbench.backends import get_backend
    from workbench.metrics import summarize

    inp = load_inputs([_scenario(tmp_path / "a.json", 60)])[0]
    r = get_backend("model").run(inp.for_trial(scheduler, seed=0))
    if scheduler == "redundant":
        assert r.events.filter(pl.col("point") == "rcv")["dsn"].drop_nulls().is_duplicated().any()
    full = summarize(r.events)
    assert measure(r.events, _KEYS) == {k: full[k] for k in _KEYS}
    # each metric alone: measure derives only what the metric needs (the segments, the start time, the
    # sender's first transmissions), and the same values come out of every subset
    for k in _KEYS:
        assert measure(r.events, [k]) == {k: full[k]}
    assert measure(r.events, ["app_delay_p95_ms", "ooo_p99_ms"]) == {k: full[k] for k in ("app_delay_p95_ms",
                                                                                            "ooo_p99_ms")}


def test_measure_picks_the_main_connection_as_summarize_does(tmp_path: Path) -> None:
    """Several connections in one table (captures can have them; replays have one): measure scores the
    one carrying the most data, with the same values as that connection's table alone."""
    from workbench.backends import get_backend
    from workbench.metrics import summarize

    inp = load_inputs([_scenario(tmp_path / "a.json", 60)])[0]
    big = get_backend("model").run(inp.for_trial("stms_a", seed=0)).events
    small = get_backend("model").run(inp.for_trial("redundant", seed=0)).events
    small = small.filter(pl.col("t_ns") < small["t_ns"].max() // 3)  # type: ignore[operator]
    alone = measure(big, _KEYS)
    assert alone["goodput_mbps"] and alone["app_delay_p95_ms"]
    # the main connection neither the first in the table nor the lowest number
    both = pl.concat([small.with_columns(pl.lit(0, pl.UInt32).alias("conn")),
                      big.with_columns(pl.lit(5, pl.UInt32).alias("conn"))])
    full = summarize(both)
    assert full["conn"] == 5
    assert measure(both, _KEYS) == {k: full[k] for k in _KEYS} == alone


def test_measure_matches_summarize_on_a_capture_pair() -> None:
    """A real capture pair: both observation points, losses, retransmissions and reinjections that a
    replay of a constant path rarely has."""
    from workbench.capture import load
    from workbench.metrics import summarize

    lab = ROOT / "traces" / "lab" / "c01"  # bundled: always there
    events = load(lab / "server.pcap", peer=lab / "client.pcap").events
    full = summarize(events)
    got = measure(events, _KEYS)
    assert got == {k: full[k] for k in _KEYS}
    assert all(v is not None for v in got.values()), got


def test_trial_records_every_input_and_aggregates(tmp_path: Path) -> None:
    inputs = load_inputs([_scenario(tmp_path / "a.json", 40), _scenario(tmp_path / "b.json", 90)])
    dims = [Dim("adjust_interval_ms", "float", 0.0, 5.0, 500.0, True)]
    for how in ("mean", "worst"):
        study = optuna.create_study()
        f = TrialObjective(inputs, "stms_a", dims, resolve_objectives(["ooo_p95"]), how)  # type: ignore[arg-type]
        study.enqueue_trial({"adjust_interval_ms": 50.0})
        study.optimize(f, n_trials=1)
        t = study.trials[0]
        per = t.user_attrs["per_input"]
        assert list(per) == [i.label for i in inputs]
        vals = [per[i.label]["ooo_p95_ms"] for i in inputs]
        assert t.value == pytest.approx(aggregate(vals, how, "minimize"))   # type: ignore[arg-type]
        # intermediate value after the first input = aggregate over the first input alone
        assert t.intermediate_values == {0: pytest.approx(vals[0])}
        assert t.user_attrs["aggregate"]["ooo_p95_ms"] == pytest.approx(t.value)
        assert t.user_attrs["aggregate"]["goodput_mbps"] > 0   # context metric, not an objective


class _Fake:
    """run_input stand-in: the metric is the parameter value plus an input-dependent offset."""

    def __init__(self, missing: bool = False) -> None:
        self.calls = 0
        self.missing = missing

    def __call__(self, inp: Any, scheduler: str, params: dict[str, Any], metrics: Any, *, seed: int = 0
                 ) -> dict[str, float | None]:
        self.calls += 1
        v = None if self.missing else params["x"] + float(inp.label[-1])
        return {m: v for m in metrics} | {"wall_s": 0.0}


class _Inp:
    def __init__(self, label: str) -> None:
        self.label = label


def test_pruning_stops_a_bad_trial_after_some_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Fake()
    monkeypatch.setattr(obj_mod, "run_input", fake)
    inputs = [_Inp(f"i{k}") for k in range(4)]
    dims = [Dim("x", "float", 1.0, 0.0, 100.0)]
    study = optuna.create_study(pruner=optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1))
    for x in (10.0, 11.0, 9.0, 10.0, 12.0, 90.0):
        study.enqueue_trial({"x": x})
    f = TrialObjective(inputs, "stms_a", dims, resolve_objectives(["ooo_p95"]), "mean")  # type: ignore[arg-type]
    study.optimize(f, n_trials=6)
    states = [t.state for t in study.trials]
    assert states[:5] == [optuna.trial.TrialState.COMPLETE] * 5
    assert states[5] == optuna.trial.TrialState.PRUNED
    bad = study.trials[5]
    # warm-up step 0 is never pruned; pruned at step 1 = after 2 of 4 inputs
    assert len(bad.user_attrs["per_input"]) == 2 and max(bad.intermediate_values) == 1
    assert fake.calls == 5 * 4 + 2
    # multi-objective trials are never pruned (optuna cannot), and nothing is reported
    study2 = optuna.create_study(directions=["minimize", "maximize"])
    f2 = TrialObjective(inputs, "stms_a", dims, resolve_objectives(["ooo_p95", "goodput"]), "worst")  # type: ignore[arg-type]
    study2.optimize(f2, n_trials=2)
    assert all(t.state == optuna.trial.TrialState.COMPLETE and not t.intermediate_values for t in study2.trials)
    assert study2.trials[0].values[0] == study2.trials[0].params["x"] + 3   # worst of minimize = max


def test_missing_metric_fails_the_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(obj_mod, "run_input", _Fake(missing=True))
    study = optuna.create_study()
    f = TrialObjective([_Inp("i0")], "stms_a", [Dim("x", "float", 1.0, 0.0, 100.0)],  # type: ignore[list-item]
                       resolve_objectives(["completion"]))
    study.optimize(f, n_trials=1, catch=(MetricMissing,))
    t = study.trials[0]
    assert t.state == optuna.trial.TrialState.FAIL
    assert "completion_s undefined" in t.user_attrs["missing"]
