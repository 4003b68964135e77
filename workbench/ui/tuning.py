"""The Tune tab's work: a tuning study (`workbench.tune.run_tuning`) on exactly the path timelines the
Replay tab replays (what-if edits included), and the figures of its trials.

The tuning library takes inputs as files, so the edited timelines are saved (`save_timelines`,
parquet) in the session's private folder under a name derived from their key; the study lives in a
SQLite file beside it, named by the settings, so running the same study again resumes it (the
finished trials count) instead of starting over. Known difference to the Replay tab: a timelines
input is replayed with the engine's default connection settings (MSS 1424, no join delay), not the
ones read off the capture.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workbench.errors import InputError

__all__ = ["OBJECTIVE_CHOICES", "history_figure", "pareto_figure", "run_study", "workload_text"]

# name -> label, as `workbench.tune.objective.OBJECTIVES` (read from there when it is importable).
OBJECTIVE_CHOICES: dict[str, str] = {"ooo_p95": "OOO delay p95 (ms)", "goodput": "goodput (Mbit/s)",
                                     "ooo_mean": "OOO delay mean (ms)", "completion": "completion time (s)"}
try:
    from workbench.tune.objective import OBJECTIVES as _OBJ

    OBJECTIVE_CHOICES = {k: o.label for k, o in _OBJ.items()}
except Exception:  # the tuning package is optional for the rest of the page
    pass


def workload_text(kind: str, size_bytes: int | None) -> str:
    """The tuning library's workload syntax: ``bulk`` or ``finite:BYTES``."""
    if kind in ("captured", "finite") and size_bytes:
        return f"finite:{int(size_bytes)}"
    return "bulk"


def run_study(folder: Path, tls: Any, timelines_key: str, scheduler: str, objectives: Sequence[str],
              n_trials: int, *, workload: str, duration_ns: int | None, seed: int = 0,
              on_trials: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) a study; returns {summary, trials (polars), objectives, scheduler}."""
    from workbench.timeline import save_timelines
    from workbench.tune import Callbacks, TuneSettings, run_tuning

    if not objectives:
        raise InputError(None, "pick at least one objective")
    if n_trials < 1:
        raise InputError(None, "the number of trials must be >= 1")
    tl_file = folder / f"timelines-{timelines_key[:16]}.parquet"
    if not tl_file.is_file():
        save_timelines(tls, tl_file)
    doc = [timelines_key, scheduler, list(objectives), workload, duration_ns, seed]
    study_key = hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:16]
    out_dir = folder / f"tune-{study_key}"
    outcome = run_tuning(TuneSettings(inputs=[str(tl_file)], scheduler=scheduler, out_dir=out_dir,
                                      objectives=list(objectives), n_trials=int(n_trials), seed=seed,
                                      workload=workload, duration_ns=duration_ns, evaluate=False, html=False,
                                      study=f"ui-{study_key}"),
                         Callbacks(on_trials=on_trials))
    trials_file = outcome.files.get("trials_parquet")
    trials = pl.read_parquet(trials_file) if trials_file and Path(trials_file).is_file() else pl.DataFrame()
    return {"summary": outcome.summary, "trials": trials, "objectives": list(objectives), "scheduler": scheduler}


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
