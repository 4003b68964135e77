"""The Tune tab's work: a tuning study (`workbench.tune.run_tuning`) on exactly what the Replay tab
replays: the same `ReplaySetup` (paths with what-if edits, workload, connection settings read off the
capture, duration cap and seed, built by `workbench.ui.work.replay_setup`), handed to the tuner as a
ready-made `TuneInput`. So the defaults' trial of a study reports the numbers the Replay tab shows for
that scheduler (tested); there is no second way of building a replay here.

The study lives in a SQLite file in the session's private folder, named by the settings, so running
the same study again resumes it (the finished trials count) instead of starting over. A goodput
constraint (default: keep 95 % of the defaults' goodput) stops a value that buys OOO delay with
goodput from being called the best.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workbench.errors import InputError

__all__ = ["OBJECTIVE_CHOICES", "best_params", "change_text", "changes_table", "history_figure", "pareto_figure", "run_study"]

# name -> label, as `workbench.tune.objective.OBJECTIVES` (read from there when it is importable).
OBJECTIVE_CHOICES: dict[str, str] = {"ooo_p95": "OOO delay p95 (ms)", "goodput": "goodput (Mbit/s)",
                                     "ooo_mean": "OOO delay mean (ms)", "completion": "completion time (s)"}
METRIC_LABELS: dict[str, str] = {}
try:
    from workbench.tune.objective import OBJECTIVES as _OBJ

    OBJECTIVE_CHOICES = {k: o.label for k, o in _OBJ.items()}
    METRIC_LABELS = {o.metric: o.label for o in _OBJ.values()}
except Exception:  # the tuning package is optional for the rest of the page
    pass


def run_study(folder: Path, setup: Any, setup_key: str, label: str, scheduler: str, objectives: Sequence[str],
              n_trials: int, *, min_goodput: float | None = 0.95,
              on_trials: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) a study on ``setup``; returns {summary, trials (polars), objectives, scheduler}."""
    from workbench.tune import Callbacks, TuneSettings, run_tuning
    from workbench.tune.inputs import TuneInput
    from workbench.tune.objective import parse_constraint

    if not objectives:
        raise InputError(None, "pick at least one objective")
    if n_trials < 1:
        raise InputError(None, "the number of trials must be >= 1")
    constraints = [parse_constraint("goodput", "min", str(min_goodput))] if min_goodput else []
    doc = [setup_key, scheduler, list(objectives), min_goodput]
    study_key = hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:16]
    out_dir = folder / f"tune-{study_key}"
    inp = TuneInput(label=label, source=label, experiment=setup.experiment, meta={"kind": "page"})
    outcome = run_tuning(TuneSettings(inputs=[inp], scheduler=scheduler, out_dir=out_dir,
                                      objectives=list(objectives), n_trials=int(n_trials), seed=0,
                                      replay_seed=int(setup.seed), evaluate=False, html=False,
                                      study=f"ui-{study_key}", constraints=constraints),
                         Callbacks(on_trials=on_trials))
    trials_file = outcome.files.get("trials_parquet")
    trials = pl.read_parquet(trials_file) if trials_file and Path(trials_file).is_file() else pl.DataFrame()
    return {"summary": outcome.summary, "trials": trials, "objectives": list(objectives), "scheduler": scheduler}


def change_text(entry: dict[str, Any]) -> list[str]:
    """The same as `changes_table`, one line per metric (``OOO delay p95 (ms): 58.2 -> 40.1 (-31.1 %)``)."""
    from workbench.tune.output import change_lines

    return change_lines(entry, METRIC_LABELS)


def changes_table(entry: dict[str, Any]) -> pl.DataFrame:
    """Every objective's and context metric's value at the defaults and at ``entry``, with the change."""
    rows = [{"metric": METRIC_LABELS.get(m, m), "defaults": c.get("default"), "tuned": c.get("tuned"),
             "change %": c["change"] * 100 if c.get("change") is not None else None}
            for m, c in (entry.get("changes") or {}).items()]
    return pl.DataFrame(rows, schema={"metric": pl.String, "defaults": pl.Float64, "tuned": pl.Float64,
                                      "change %": pl.Float64}).with_columns(pl.col(pl.Float64).round(3))


def best_params(result: dict[str, Any]) -> dict[str, Any] | None:
    """Parameters of the best trial (one objective) or of the first Pareto-front member."""
    s = result["summary"]
    if s.get("best"):
        return dict(s["best"]["params"])
    front = s.get("pareto") or []
    return dict(front[0]["params"]) if front else None


def history_figure(result: dict[str, Any]) -> Any:
    """Objective value per completed trial, with the best so far (first objective)."""
    import plotly.graph_objects as go

    obj = result["objectives"][0]
    t = result["trials"]
    fig = go.Figure()
    if t.height and obj in t.columns:
        done = t.filter(pl.col("state") == "COMPLETE").drop_nulls(obj).sort("number")
        fig.add_trace(go.Scatter(x=done["number"].to_list(), y=done[obj].to_list(), mode="markers", name=obj))
        direction = (result["summary"].get("objectives") or [{}])[0].get("direction", "minimize")
        best = done[obj].cum_max() if direction == "maximize" else done[obj].cum_min()
        fig.add_trace(go.Scatter(x=done["number"].to_list(), y=best.to_list(), mode="lines", name="best so far",
                                 line={"shape": "hv"}))
    fig.update_layout(title=f"Optimization history: {OBJECTIVE_CHOICES.get(obj, obj)}", xaxis_title="trial",
                      yaxis_title=OBJECTIVE_CHOICES.get(obj, obj), template="plotly_white", height=380)
    return fig


def pareto_figure(result: dict[str, Any]) -> Any | None:
    """The first two objectives of every completed trial, the Pareto front marked (None with one
    objective)."""
    import plotly.graph_objects as go

    objs = result["objectives"]
    if len(objs) < 2:
        return None
    a, b = objs[0], objs[1]
    t = result["trials"]
    fig = go.Figure()
    if t.height and a in t.columns and b in t.columns:
        done = t.filter(pl.col("state") == "COMPLETE").drop_nulls([a, b])
        front = {e["trial"] for e in result["summary"].get("pareto") or []}
        on = done.filter(pl.col("number").is_in(list(front)))
        off = done.filter(~pl.col("number").is_in(list(front)))
        fig.add_trace(go.Scatter(x=off[a].to_list(), y=off[b].to_list(), mode="markers", name="trials",
                                 text=[f"#{n}" for n in off["number"]], marker={"color": "#aaa"}))
        fig.add_trace(go.Scatter(x=on[a].to_list(), y=on[b].to_list(), mode="markers", name="Pareto front",
                                 text=[f"#{n}" for n in on["number"]], marker={"color": "#d62728", "size": 10}))
    fig.update_layout(title="Pareto front", xaxis_title=OBJECTIVE_CHOICES.get(a, a),
                      yaxis_title=OBJECTIVE_CHOICES.get(b, b), template="plotly_white", height=420)
    return fig
