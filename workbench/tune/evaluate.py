"""Tuned vs default: replay both on the tuning inputs and on held-out inputs, and say whether the
tuned parameters generalise.

A tuned value that wins on the inputs it was tuned on but not on held-out inputs has learnt those
traces, not the network: it is flagged. With several tuned parameters each one is also tried alone
(the others at their defaults), so the flag can name the parameter that only wins on the tuning set.

"Wins" for one objective = strictly better aggregate than the defaults (by more than ``tol_rel``
relative, so replay noise at the last digit is not a win); for several objectives = Pareto-dominates
(no objective worse, at least one better).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.tune.inputs import TuneInput
from workbench.tune.objective import Aggregate, Objective, aggregate, metrics_needed, run_input

__all__ = ["Candidate", "Evaluation", "compare", "evaluate"]

TOL_REL = 1e-3


@dataclass(frozen=True)
class Candidate:
    name: str                 # "default", "tuned", "pareto#12", "only:adjust_interval_ms"
    params: dict[str, Any]    # the tuned parameters (fixed ones are added by `evaluate`)


@dataclass
class Evaluation:
    rows: list[dict[str, Any]]                       # one per (set, input, candidate)
    aggregates: dict[str, dict[str, dict[str, float | None]]]  # set -> candidate -> metric -> value
    verdicts: dict[str, dict[str, str]]              # set -> candidate -> wins | loses | ties | mixed
    flags: list[str] = field(default_factory=list)   # human-readable warnings

    def as_dict(self) -> dict[str, Any]:
        return {"aggregates": self.aggregates, "verdicts": self.verdicts, "flags": self.flags}


def compare(tuned: Mapping[str, float | None], default: Mapping[str, float | None],
            objectives: Sequence[Objective], tol_rel: float = TOL_REL) -> str:
    """wins / loses / ties / mixed of ``tuned`` against ``default`` over the objectives."""
    better = worse = 0
    for o in objectives:
        a, b = tuned.get(o.metric), default.get(o.metric)
        if a is None or b is None:
            return "n/a"
        margin = tol_rel * max(abs(a), abs(b), 1e-12)
        diff = (a - b) if o.direction == "maximize" else (b - a)
        if diff > margin:
            better += 1
        elif diff < -margin:
            worse += 1
    if better and not worse:
        return "wins"
    if worse and not better:
        return "loses"
    return "mixed" if better and worse else "ties"


def evaluate(tuning: Sequence[TuneInput], holdout: Sequence[TuneInput], scheduler: str, *,
             defaults: Mapping[str, Any], candidates: Sequence[Candidate], objectives: Sequence[Objective],
             how: Aggregate, fixed: Mapping[str, Any] | None = None, replay_seed: int = 0, repeats: int = 1,
             ablate: bool = True, on_replay: Callable[[int, int], None] | None = None) -> Evaluation:
    """Replay defaults and every candidate on both input sets; aggregates, verdicts and flags."""
    fixed = dict(fixed or {})
    cands = [Candidate("default", dict(defaults)), *candidates]
    if ablate and len(objectives) == 1:
        tuned = next((c for c in candidates if c.name == "tuned"), None)
        changed = [k for k, v in (tuned.params.items() if tuned else ()) if defaults.get(k) != v]
        if len(changed) >= 2:
            cands += [Candidate(f"only:{k}", dict(defaults) | {k: tuned.params[k]}) for k in changed]  # type: ignore[union-attr]
    metrics = metrics_needed(objectives)
    sets = [("tuning", tuning), ("holdout", holdout)]
    total = sum(len(s) for _, s in sets) * repeats * len(cands)
    rows: list[dict[str, Any]] = []
    done = 0
    for set_name, inputs in sets:
        for inp in inputs:
            for r in range(repeats):
                seed = replay_seed + r
                for c in cands:
                    m = run_input(inp, scheduler, fixed | c.params, metrics, seed=seed)
                    rows.append({"set": set_name, "input": inp.label, "seed": seed, "candidate": c.name,
                                 **{f"param_{k}": v for k, v in c.params.items()}, **m})
                    done += 1
                    if on_replay is not None:
                        on_replay(done, total)
    aggs: dict[str, dict[str, dict[str, float | None]]] = {}
    verdicts: dict[str, dict[str, str]] = {}
    for set_name, inputs in sets:
        if not inputs:
            continue
        aggs[set_name] = {}
        for c in cands:
            mine = [row for row in rows if row["set"] == set_name and row["candidate"] == c.name]
            agg: dict[str, float | None] = {}
            for metric in metrics:
                vals = [row[metric] for row in mine if row.get(metric) is not None]
                direction = next((o.direction for o in objectives if o.metric == metric),
                                 "maximize" if metric == "goodput_mbps" else "minimize")
                agg[metric] = aggregate(vals, how, direction) if vals else None
            aggs[set_name][c.name] = agg
        verdicts[set_name] = {c.name: compare(aggs[set_name][c.name], aggs[set_name]["default"], objectives)
                              for c in cands if c.name != "default"}
    flags: list[str] = []
    if "holdout" in verdicts:
        for c in cands:
            if c.name == "default":
                continue
            on_tune, on_hold = verdicts["tuning"][c.name], verdicts["holdout"][c.name]
            if on_tune == "wins" and on_hold != "wins":
                what = (f"parameter {c.name.removeprefix('only:')} alone" if c.name.startswith("only:")
                        else f"{c.name} parameters {c.params}")
                flags.append(f"{what} only win on the tuning set: {on_tune} there, {on_hold} on the "
                             "held-out inputs (tuned to these traces, not the network?)")
    else:
        flags.append("no held-out inputs (--holdout): tuned parameters were not checked on traces they "
                     "were not tuned on")
    return Evaluation(rows, aggs, verdicts, flags)
