"""Several objectives: NSGA-II, and the front reported is non-dominated (checked pairwise here) and
covers every complete trial (each is on the front or dominated by a member of it)."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from workbench.tune import TuneSettings, run_tuning


def _dominates(a: list[float], b: list[float], signs: list[float]) -> bool:
    """a dominates b: no worse in every objective, better in one (signs: +1 maximize, -1 minimize)."""
    ge = all(s * x >= s * y for x, y, s in zip(a, b, signs, strict=True))
    gt = any(s * x > s * y for x, y, s in zip(a, b, signs, strict=True))
    return ge and gt


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_multi_objective_front_is_non_dominated(tmp_path: Path) -> None:
    inp = tmp_path / "two-path.json"
    inp.write_text(json.dumps({
        "duration_s": 0.6, "workload": "bulk",
        "paths": [{"name": "wifi", "rate_mbps": 20, "owd_ms": 10, "buffer_packets": 50},
                  {"name": "lte", "rate_mbps": 10, "owd_ms": 60, "buffer_packets": 300}]}))
    out = tmp_path / "out"
    outcome = run_tuning(TuneSettings(
        inputs=[str(inp)], scheduler="stms_a", out_dir=out, objectives=["goodput", "ooo_p95"],
        tune=["adjust_interval_ms", "ewma_weight"], space=["adjust_interval_ms=5:500:log"], n_trials=10,
        evaluate=True, html=True))
    front = outcome.summary["pareto"]
    assert front and "best" not in outcome.summary
    signs = [1.0, -1.0]
    vals = [[e["values"]["goodput"], e["values"]["ooo_p95"]] for e in front]
    for i, a in enumerate(vals):
        for j, b in enumerate(vals):
            if i != j:
                assert not _dominates(a, b, signs), (front[i]["trial"], front[j]["trial"])
    study = optuna.load_study(study_name=outcome.study_name, storage=f"sqlite:///{out / 'study.db'}")
    on_front = {e["trial"] for e in front}
    for t in study.trials:
        if t.state == optuna.trial.TrialState.COMPLETE and t.number not in on_front:
            assert any(_dominates(v, list(t.values), signs) or v == list(t.values) for v in vals), t.number
    assert isinstance(study.directions[0], optuna.study.StudyDirection) and len(study.directions) == 2
    # every front member has its paste line; the evaluation compares front members with the defaults
    assert all(e["param_line"].startswith("--scheduler stms_a --param ") for e in front)
    assert {c for c in outcome.evaluation.aggregates["tuning"]} >= {"default"}  # type: ignore[union-attr]
    assert any(c.startswith("pareto#") for c in outcome.evaluation.aggregates["tuning"])  # type: ignore[union-attr]
    assert "Pareto front" in (out / "tune.html").read_text()
