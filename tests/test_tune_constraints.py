"""Tuning with constraints: a value that buys OOO delay with goodput is not the best, and the summary
shows the change of every objective against the defaults (issue 15's 79 -> 49 Mbit/s case)."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from typer.testing import CliRunner

from workbench.errors import InputError
from workbench.tune.objective import OBJECTIVES, parse_constraint
from workbench.tune.output import best_result, change_lines


def _study(rows: list[tuple[float, float, bool]]) -> optuna.Study:
    """A study with one trial per (goodput, ooo_p95, is_baseline), objective ooo_p95 (minimise)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize")
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 10.0)}
    for i, (gp, ooo, base) in enumerate(rows):
        attrs = {"aggregate": {"goodput_mbps": gp, "ooo_p95_ms": ooo, "ooo_mean_ms": ooo / 3}}
        if base:
            attrs["baseline"] = "defaults"
        study.add_trial(optuna.trial.create_trial(params={"x": float(i)}, distributions=dist, value=ooo,
                                                  user_attrs=attrs))
    return study


# baseline 79 Mbit/s / 360 ms; trial 1 halves goodput for the lowest OOO; trial 2 keeps goodput.
ROWS = [(79.0, 360.0, True), (49.0, 58.0, False), (77.0, 200.0, False), (20.0, 10.0, False)]


def test_unconstrained_best_gives_away_goodput_and_says_so() -> None:
    r = best_result(_study(ROWS), [OBJECTIVES["ooo_p95"]], "blest", {})
    assert r["best"]["trial"] == 3  # lowest OOO p95, whatever it costs
    ch = r["best"]["changes"]
    assert ch["goodput_mbps"]["default"] == 79.0 and ch["goodput_mbps"]["tuned"] == 20.0
    assert ch["goodput_mbps"]["change"] == pytest.approx((20 - 79) / 79)
    assert any(line.startswith("goodput_mbps: 79 -> 20 (-74.7 %)") for line in change_lines(r["best"]))


def test_min_goodput_relative_picks_the_best_value_that_keeps_goodput() -> None:
    c = parse_constraint("goodput", "min", "0.95")
    r = best_result(_study(ROWS), [OBJECTIVES["ooo_p95"]], "blest", {}, [c])
    # independent truth: among trials with goodput >= 0.95 * 79, the lowest OOO p95
    ok = [(ooo, i) for i, (gp, ooo, _) in enumerate(ROWS) if gp >= 0.95 * 79]
    assert r["best"]["trial"] == min(ok)[1] == 2
    assert r["constraints"]["kept_by"] == len(ok)
    assert "75.05" in r["constraints"]["required"][0]


def test_min_goodput_absolute_and_nothing_feasible() -> None:
    c = parse_constraint("goodput", "min", "100Mbps")
    assert not c.relative and c.value == 100
    r = best_result(_study(ROWS), [OBJECTIVES["ooo_p95"]], "blest", {}, [c])
    assert r["best"] is None and r["constraints"]["kept_by"] == 0


def test_max_ooo_constraint_on_a_goodput_objective() -> None:
    study = optuna.create_study(direction="maximize")
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 10.0)}
    for i, (gp, ooo, base) in enumerate(ROWS):
        attrs = {"aggregate": {"goodput_mbps": gp, "ooo_p95_ms": ooo}} | ({"baseline": "defaults"} if base else {})
        study.add_trial(optuna.trial.create_trial(params={"x": float(i)}, distributions=dist, value=gp,
                                                  user_attrs=attrs))
    r = best_result(study, [OBJECTIVES["goodput"]], "blest", {}, [parse_constraint("ooo_p95", "max", "250ms")])
    assert r["best"]["trial"] == 2


@pytest.mark.parametrize("text", ["fast", "-1", "nan", "3kbps"])
def test_bad_constraint_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError):
        parse_constraint("goodput", "min", text)


@pytest.mark.slow
def test_cli_min_goodput_keeps_goodput_of_the_chosen_trial(tmp_path: Path) -> None:
    """A real study on a two-path scenario: the chosen trial keeps >= 0.95 x the defaults' goodput as
    recorded in trials.parquet, and the printed summary shows the goodput change."""
    import polars as pl

    from tests.test_tune_cli import _app, _scenario

    inp = _scenario(tmp_path / "s.json")
    out = tmp_path / "out"
    r = CliRunner().invoke(_app(), ["tune", str(inp), "-s", "blest", "-n", "6", "--no-evaluate", "--no-html",
                                    "--no-progress", "-o", str(out), "--min-goodput", "0.95"])
    assert r.exit_code == 0, r.output
    assert "change against the defaults" in r.stdout and "goodput_mbps:" in r.stdout
    doc = json.loads((out / "best_params.json").read_text())
    t = pl.read_parquet(out / "trials.parquet").filter(pl.col("state") == "COMPLETE")
    base = t.filter(pl.col("baseline") == "defaults")["agg_goodput_mbps"][0]
    feasible = t.filter(pl.col("agg_goodput_mbps") >= 0.95 * base)
    assert doc["constraints"]["kept_by"] == feasible.height
    best = doc["best"]
    assert best["trial"] == feasible.sort("ooo_p95", "number")["number"][0]
    assert best["aggregate"]["goodput_mbps"] >= 0.95 * base
