"""What a tuning run leaves in its output folder.

* ``best_params.json``: best parameters (or the Pareto front), their values, a ``--param`` line ready
  to paste, the defaults, the tuned-vs-default evaluation and the study's coordinates (storage, name);
* ``trials.csv`` / ``trials.parquet``: one row per trial (state, objective values, parameters,
  aggregated metrics, per-input objective values, wall time);
* ``evaluation.csv`` / ``evaluation.parquet``: every evaluation replay (set, input, candidate, metrics);
* ``tune.html``: one self-contained page (plotly.js inlined, works offline): summary, evaluation
  table, flags, and optuna's plotly figures — optimization history, parameter importances, slice and
  contour plots, Pareto front.

Every file is written atomically (`write_atomic`): a reader never sees half of one, and a crashed run
leaves the previous files intact.
"""

from __future__ import annotations

import html
import io
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
import polars as pl

from workbench._files import write_atomic
from workbench.tune.evaluate import Evaluation
from workbench.tune.objective import _CONTEXT_METRICS, Constraint, Objective
from workbench.tune.space import Dim, param_line
from workbench.tune.study import HEARTBEAT_ATTR

__all__ = ["best_result", "change_lines", "changes", "figures", "trials_frame", "write_outputs"]


def _num(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def trials_frame(study: optuna.Study, objectives: Sequence[Objective]) -> pl.DataFrame:
    """One row per trial; columns: number, state, one per objective, param_*, agg_*, in:<input>:<metric>,
    duration_s, worker wall_s."""
    rows: list[dict[str, Any]] = []
    for t in study.get_trials(deepcopy=False):
        row: dict[str, Any] = {"number": t.number, "state": t.state.name}
        vals = t.values if t.values is not None else [None] * len(objectives)
        for o, v in zip(objectives, vals, strict=False):
            row[o.name] = _num(v)
        for k, v in t.params.items():
            row[f"param_{k}"] = v
        for k, v in (t.user_attrs.get("aggregate") or {}).items():
            row[f"agg_{k}"] = _num(v)
        for label, m in (t.user_attrs.get("per_input") or {}).items():
            for o in objectives:
                row[f"in:{label}:{o.metric}"] = _num(m.get(o.metric))
        row["baseline"] = t.user_attrs.get("baseline")
        row["duration_s"] = t.duration.total_seconds() if t.duration is not None else None
        rows.append(row)
    if not rows:
        return pl.DataFrame({"number": [], "state": []})
    # Parameters of categorical type may mix bool/str across trials: let polars widen to a supertype.
    return pl.from_dicts(rows, infer_schema_length=None, strict=False)


def _complete(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def _dominates(a: Sequence[float], b: Sequence[float], objectives: Sequence[Objective]) -> bool:
    better = False
    for x, y, o in zip(a, b, objectives, strict=True):
        if (x < y) if o.direction == "maximize" else (x > y):
            return False
        better = better or x != y
    return better


def changes(agg: Mapping[str, float | None] | None, baseline: Mapping[str, float | None] | None,
            metrics: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """For each metric: the defaults' value, this trial's, and the relative change (None when unknown)."""
    out: dict[str, dict[str, float | None]] = {}
    for m in metrics:
        new, old = (agg or {}).get(m), (baseline or {}).get(m)
        rel = (new - old) / abs(old) if new is not None and old not in (None, 0) else None
        out[m] = {"default": old, "tuned": new, "change": rel}
    return out


def best_result(study: optuna.Study, objectives: Sequence[Objective], scheduler: str,
                fixed: Mapping[str, Any], constraints: Sequence[Constraint] = ()) -> dict[str, Any]:
    """{"best": {...}} for one objective, {"pareto": [...]} for several; each entry with trial number,
    values by objective, params (tuned + fixed), the paste line and ``changes``: every objective's and
    context metric's value at the defaults (the enqueued baseline trial), here, and the relative change.

    With ``constraints`` only trials that keep every one can be best or on the front (a value that
    buys OOO delay with goodput is not a win); ``constraints`` in the result says what was required
    and how many complete trials kept it."""
    done = _complete(study)
    baseline_trial = next((t for t in done if t.user_attrs.get("baseline") == "defaults"), None)
    baseline = baseline_trial.user_attrs.get("aggregate") if baseline_trial is not None else None
    metrics = list(dict.fromkeys([*(o.metric for o in objectives), *_CONTEXT_METRICS,
                                  *(c.metric for c in constraints)]))

    def entry(t: optuna.trial.FrozenTrial) -> dict[str, Any]:
        params = dict(fixed) | dict(t.params)
        agg = t.user_attrs.get("aggregate")
        return {"trial": t.number, "values": {o.name: v for o, v in zip(objectives, t.values, strict=True)},
                "params": params, "param_line": param_line(scheduler, params),
                "aggregate": agg, "per_input": t.user_attrs.get("per_input"),
                "changes": changes(agg, baseline, metrics)}

    feasible = [t for t in done if all(c.ok(t.user_attrs.get("aggregate"), baseline) for c in constraints)]
    out: dict[str, Any] = {"baseline": {"trial": baseline_trial.number if baseline_trial else None,
                                        "aggregate": baseline}}
    if constraints:
        out["constraints"] = {"required": [c.describe(baseline) for c in constraints],
                              "kept_by": len(feasible), "complete": len(done)}
    if not done or not feasible:
        return out | {"best": None, "pareto": []}
    if len(objectives) == 1:
        o = objectives[0]
        sign = -1.0 if o.direction == "maximize" else 1.0
        best = min(feasible, key=lambda t: (sign * t.values[0], t.number))
        return out | {"best": entry(best)}
    front = [t for t in feasible if not any(_dominates(u.values, t.values, objectives) for u in feasible)]
    front.sort(key=lambda t: (t.values[0], t.number))
    return out | {"pareto": [entry(t) for t in front]}


def change_lines(entry: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> list[str]:
    """One line per metric of an entry's ``changes``: ``goodput (Mbit/s): 79.1 -> 49.0 (-38.1 %)``."""
    lines = []
    for m, c in (entry.get("changes") or {}).items():
        old, new, rel = c.get("default"), c.get("tuned"), c.get("change")
        f = lambda v: "–" if v is None else f"{v:.4g}"  # noqa: E731
        pct = f" ({rel * 100:+.1f} %)" if rel is not None else ""
        lines.append(f"{(labels or {}).get(m, m)}: {f(old)} -> {f(new)}{pct}")
    return lines


def figures(study: optuna.Study, objectives: Sequence[Objective], dims: Sequence[Dim]) -> list[tuple[str, Any]]:
    """(title, plotly figure or a one-line note why it is missing), via optuna.visualization."""
    import optuna.visualization as vis

    out: list[tuple[str, Any]] = []
    n_done = len(_complete(study))
    names = [o.label for o in objectives]
    single = len(objectives) == 1
    tuned = [d.name for d in dims]

    def add(title: str, make: Any) -> None:
        try:
            with warnings.catch_warnings():
                # optuna's experimental/quantile notes are about its internals, not the user's study
                warnings.simplefilter("ignore")
                out.append((title, make()))
        except Exception as e:  # a figure optuna cannot draw for this study is a note, not a crash
            out.append((title, f"not available: {str(e).splitlines()[0] if str(e) else type(e).__name__}"))

    if n_done == 0:
        return [("figures", "no complete trial yet")]
    if not single:
        if len(objectives) in (2, 3):
            add("Pareto front", lambda: vis.plot_pareto_front(study, target_names=names))
        for i, o in enumerate(objectives):
            add(f"Optimization history: {o.label}",
                lambda i=i, o=o: vis.plot_optimization_history(study, target=lambda t: t.values[i],
                                                               target_name=o.label))
    else:
        add("Optimization history", lambda: vis.plot_optimization_history(study, target_name=names[0]))
        if any(t.intermediate_values for t in study.get_trials(deepcopy=False)):
            add("Intermediate values (running aggregate per input, for pruning)",
                lambda: vis.plot_intermediate_values(study))
    for i, o in enumerate(objectives):
        tgt = None if single else (lambda t, i=i: t.values[i])
        if len(tuned) >= 2 and n_done >= 2:
            # optuna's default evaluator (PED-ANOVA) ranks parameters by how they reach *low* values:
            # a maximized objective is negated for it.
            sign = -1.0 if o.direction == "maximize" else 1.0

            def imp_tgt(t: optuna.trial.FrozenTrial, i: int = i, sign: float = sign) -> float:
                return sign * t.values[i]

            add(f"Parameter importances: {o.label}",
                lambda imp_tgt=imp_tgt, o=o: vis.plot_param_importances(study, target=imp_tgt,
                                                                          target_name=o.label))
        add(f"Slice: {o.label}", lambda tgt=tgt, o=o: vis.plot_slice(study, params=tuned, target=tgt,
                                                                         target_name=o.label))
        if len(tuned) >= 2:
            add(f"Contour: {o.label}", lambda tgt=tgt, o=o: vis.plot_contour(study, params=tuned[:4], target=tgt,
                                                                               target_name=o.label))
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
th{background:#f3f3f3}code{background:#f3f3f3;padding:.1em .3em}.flag{color:#a40}.note{color:#777}"""


def page(summary: Mapping[str, Any], evaluation: Evaluation | None, figs: Sequence[tuple[str, Any]],
         objectives: Sequence[Objective]) -> str:
    """The self-contained HTML page."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>tune {html.escape(summary['study'])}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>Tuning {html.escape(summary['scheduler'])} — study {html.escape(summary['study'])}</h1>",
             f"<p>objectives: {', '.join(html.escape(o.label + ' → ' + o.direction) for o in objectives)}; "
             f"aggregate over inputs: {html.escape(summary['aggregate'])}; trials: "
             f"{summary['trials']['finished']} finished ({summary['trials']['complete']} complete, "
             f"{summary['trials']['pruned']} pruned, {summary['trials']['failed']} failed); storage "
             f"<code>{html.escape(summary['storage'])}</code></p>"]
    if summary.get("constraints"):
        c = summary["constraints"]
        parts.append(f"<p>constraints: {html.escape('; '.join(c['required']))} — kept by {c['kept_by']} of "
                     f"{c['complete']} complete trials</p>")
        if not summary.get("best") and not summary.get("pareto"):
            parts.append("<p class='flag'>⚠ no trial keeps the constraints: no tuned value is better than "
                         "the defaults</p>")
    if summary.get("best"):
        b = summary["best"]
        parts.append(f"<h2>Best (trial {b['trial']})</h2><p><code>{html.escape(b['param_line'])}</code></p>")
        parts.append(_table(["parameter", "tuned", "default"],
                            [[k, v, summary["defaults"].get(k)] for k, v in b["params"].items()]))
        parts.append("<h3>Change of every objective against the defaults</h3>")
        parts.append(_table(["metric", "defaults", "tuned", "change"],
                            [[m, c.get("default"), c.get("tuned"),
                              f"{c['change'] * 100:+.1f} %" if c.get("change") is not None else None]
                             for m, c in (b.get("changes") or {}).items()]))
    if summary.get("pareto"):
        parts.append(f"<h2>Pareto front ({len(summary['pareto'])} trials)</h2>")
        keys = sorted({k for e in summary["pareto"] for k in e["params"]})
        parts.append(_table(["trial", *(o.name for o in objectives), *keys],
                            [[e["trial"], *(e["values"][o.name] for o in objectives), *(e["params"].get(k) for k in keys)]
                             for e in summary["pareto"]]))
    if evaluation is not None:
        parts.append("<h2>Tuned vs default</h2>")
        for f in evaluation.flags:
            parts.append(f"<p class='flag'>⚠ {html.escape(f)}</p>")
        metrics = list(dict.fromkeys([*(o.metric for o in objectives), "goodput_mbps", "ooo_p95_ms", "ooo_mean_ms"]))
        rows = []
        for set_name, by_cand in evaluation.aggregates.items():
            for cand, agg in by_cand.items():
                rows.append([set_name, cand, *(agg.get(m) for m in metrics),
                             evaluation.verdicts.get(set_name, {}).get(cand, "")])
        parts.append(_table(["set", "candidate", *metrics, "vs default"], rows))
        per = [[r["set"], r["input"], r["seed"], r["candidate"], *(r.get(m) for m in metrics)] for r in evaluation.rows]
        parts.append("<details><summary>per input</summary>"
                     + _table(["set", "input", "seed", "candidate", *metrics], per) + "</details>")
    first = True
    for title, fig in figs:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if isinstance(fig, str):
            parts.append(f"<p class='note'>{html.escape(fig)}</p>")
            continue
        # An explicit template: the process default may be Streamlit's theme (placeholder colours
        # only its front end resolves) when the page runs the tuning.
        fig.update_layout(template="plotly")
        # plotly.js inlined once (offline, self-contained); later figures reuse it.
        parts.append(fig.to_html(full_html=False, include_plotlyjs=first))
        first = False
    parts.append("</body></html>")
    return "\n".join(parts)


def _frame_bytes(df: pl.DataFrame, kind: str) -> bytes:
    buf = io.BytesIO()
    if kind == "csv":
        # CSV cannot hold nested values: lists/structs become JSON text.
        flat = df.with_columns([pl.col(c).map_elements(json.dumps, return_dtype=pl.Utf8)
                                for c, t in df.schema.items() if t.is_nested()])
        flat.write_csv(buf)
    else:
        df.write_parquet(buf)
    return buf.getvalue()


def write_outputs(out_dir: Path, *, study: optuna.Study, summary: dict[str, Any], objectives: Sequence[Objective],
                  dims: Sequence[Dim], evaluation: Evaluation | None, html_page: bool = True) -> dict[str, Path]:
    """Write every output file; returns {kind: path}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    doc = dict(summary)
    if evaluation is not None:
        doc["evaluation"] = evaluation.as_dict()
    paths["json"] = write_atomic(out_dir / "best_params.json", json.dumps(doc, indent=2, default=str) + "\n")
    tf = trials_frame(study, objectives)
    tf = tf.drop([c for c in tf.columns if c.endswith(HEARTBEAT_ATTR)])
    paths["trials_csv"] = write_atomic(out_dir / "trials.csv", _frame_bytes(tf, "csv"))
    paths["trials_parquet"] = write_atomic(out_dir / "trials.parquet", _frame_bytes(tf, "parquet"))
    if evaluation is not None and evaluation.rows:
        ef = pl.from_dicts(evaluation.rows, infer_schema_length=None, strict=False)
        paths["evaluation_csv"] = write_atomic(out_dir / "evaluation.csv", _frame_bytes(ef, "csv"))
        paths["evaluation_parquet"] = write_atomic(out_dir / "evaluation.parquet", _frame_bytes(ef, "parquet"))
    if html_page:
        paths["html"] = write_atomic(out_dir / "tune.html", page(summary, evaluation, figures(study, objectives, dims),
                                                                 objectives))
    return paths
