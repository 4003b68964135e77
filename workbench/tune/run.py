"""One tuning run, start to end: settings -> inputs -> study -> trials -> evaluation -> output files.

`run_tuning` is what ``workbench tune`` calls (and what a notebook or the Streamlit page can call);
progress is reported through plain callbacks so the library never draws anything itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import optuna

from workbench.errors import InputError
from workbench.tune.evaluate import Candidate, Evaluation, evaluate
from workbench.tune.inputs import TuneInput, inputs_key, load_inputs
from workbench.tune.objective import Aggregate, MetricMissing, Objective, TrialObjective, resolve_objectives
from workbench.tune.output import best_result, write_outputs
from workbench.tune.space import Dim, default_in_space, default_params, search_space, space_key
from workbench.tune.study import RunStats, make_sampler, open_study, resolve_storage, run_until

__all__ = ["TuneOutcome", "TuneSettings", "run_tuning"]

# At most this many Pareto-front members are replayed in the evaluation (each costs a replay per input).
MAX_PARETO_EVAL = 8


@dataclass
class TuneSettings:
    inputs: Sequence[str]
    scheduler: str
    out_dir: Path
    objectives: Sequence[str] = ("ooo_p95",)
    aggregate: Aggregate = "mean"
    n_trials: int = 50
    holdout: Sequence[str] = ()
    storage: str | None = None          # None: sqlite in out_dir
    study: str | None = None            # None: derived from scheduler, objectives, inputs
    tune: Sequence[str] = ()            # only these parameters (default: all with a range)
    space: Sequence[str] = ()           # NAME=LOW:HIGH[:log] | NAME=a|b|c
    fixed: Sequence[str] = ()           # NAME=VALUE
    seed: int = 0                       # sampler seed
    replay_seed: int = 0
    repeats: int = 1
    duration_ns: int | None = None
    workload: str = "bulk"
    prune: bool = True
    timeout_s: float | None = None
    heartbeat_s: float = 10.0
    evaluate: bool = True
    html: bool = True
    constraints: Sequence[Any] = ()     # `Constraint`s the best value must keep (goodput >= 0.95 x defaults)


@dataclass
class TuneOutcome:
    study_name: str
    storage: str
    summary: dict[str, Any]
    evaluation: Evaluation | None
    stats: RunStats
    files: dict[str, Path] = field(default_factory=dict)


@dataclass
class Callbacks:
    on_start: Callable[[str, str, int], None] | None = None                 # study, storage, n_trials
    on_trials: Callable[[int, int, str], None] | None = None                # finished, wanted, best text
    on_replay: Callable[[int, int], None] | None = None                     # within a trial
    on_eval: Callable[[int, int], None] | None = None                       # evaluation replays


def _best_text(objectives: Sequence[Objective], trials: Sequence[optuna.trial.FrozenTrial]) -> str:
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.values]
    if not done:
        return "best: –"
    if len(objectives) == 1:
        o = objectives[0]
        pick = max if o.direction == "maximize" else min
        t = pick(done, key=lambda t: t.values[0])
        ps = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in t.params.items())
        return f"best {o.name} {t.values[0]:.4g} (#{t.number}: {ps})"
    return f"{len(done)} complete"


def _counts(study: optuna.Study) -> dict[str, int]:
    S = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    c = {s.name.lower(): sum(t.state == s for t in trials) for s in (S.COMPLETE, S.PRUNED, S.FAIL, S.RUNNING)}
    c["finished"] = c["complete"] + c["pruned"]
    c["failed"] = c.pop("fail")
    c["total"] = len(trials)
    return c


def _dims_text(dims: Sequence[Dim]) -> list[str]:
    return [d.describe() for d in dims]


def run_tuning(s: TuneSettings, cb: Callbacks | None = None) -> TuneOutcome:
    """Tune, evaluate, write the output folder. Raises `InputError` for anything the user can fix."""
    cb = cb or Callbacks()
    if s.n_trials < 0:
        raise InputError(None, "--trials must be >= 0")
    if s.repeats < 1:
        raise InputError(None, "--repeats must be >= 1")
    if s.heartbeat_s <= 0:
        raise InputError(None, "--heartbeat must be > 0")
    if s.aggregate not in ("mean", "worst"):
        raise InputError(None, f"--aggregate must be mean or worst, not {s.aggregate!r}")
    from workbench.schedulers import available
    from workbench.tune.space import parse_fixed

    if s.scheduler.lower() not in available():
        raise InputError(None, f"unknown scheduler {s.scheduler!r}; available: {', '.join(available())}")
    objectives = resolve_objectives(list(s.objectives))
    fixed = parse_fixed(list(s.fixed))
    dims = search_space(s.scheduler, tune=list(s.tune), overrides=list(s.space), fixed=fixed)
    defaults_all = default_params(s.scheduler) | fixed
    tuned_defaults = {d.name: d.default for d in dims}

    # Ready-made `TuneInput`s (the page's one replay setup) are tuned as they are.
    inputs = (cast("list[TuneInput]", list(s.inputs))
              if s.inputs and all(isinstance(i, TuneInput) for i in s.inputs)
              else load_inputs(list(s.inputs), workload=s.workload, duration_ns=s.duration_ns))
    holdout = load_inputs(list(s.holdout), workload=s.workload, duration_ns=s.duration_ns) if s.holdout else []
    if any(o.name == "completion" for o in objectives):
        endless = [i.label for i in [*inputs, *holdout] if not i.finite]
        if endless:
            raise InputError(None, f"completion time needs a finite workload (--workload finite:BYTES or a "
                                   f"scenario with one); bulk inputs: {', '.join(endless)}")

    storage, storage_text = resolve_storage(s.storage, s.out_dir)
    name = s.study or "-".join([s.scheduler, "+".join(o.name for o in objectives), s.aggregate,
                                inputs_key(list(s.inputs))])
    study_settings = {
        "scheduler": s.scheduler, "objectives": [o.name for o in objectives], "aggregate": s.aggregate,
        "space": space_key(dims, fixed), "inputs": [i.label for i in inputs], "repeats": s.repeats,
        "replay_seed": s.replay_seed, "duration_ns": [i.duration_ns for i in inputs], "workload": s.workload,
    }
    single = len(objectives) == 1
    n_steps = len(inputs) * s.repeats
    pruner: optuna.pruners.BasePruner | None = None
    if single and s.prune and n_steps > 1:
        # Prune only against enough finished trials, and never on the first replay: one input
        # alone says little about the aggregate.
        pruner = optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)
    else:
        pruner = optuna.pruners.NopPruner()
    study = open_study(storage, name, [o.direction for o in objectives], settings=study_settings,
                       sampler=make_sampler(len(objectives), s.seed, n_trials=s.n_trials), pruner=pruner,
                       enqueue=default_in_space(dims))
    if cb.on_start is not None:
        cb.on_start(name, storage_text, s.n_trials)

    objective = TrialObjective(inputs, s.scheduler, dims, objectives, s.aggregate, fixed=fixed,
                               replay_seed=s.replay_seed, repeats=s.repeats, prune=s.prune,
                               on_replay=cb.on_replay)

    def progress(done: int, trials: Sequence[optuna.trial.FrozenTrial]) -> None:
        if cb.on_trials is not None:
            cb.on_trials(done, s.n_trials, _best_text(objectives, trials))

    stats = run_until(study, objective, s.n_trials, timeout_s=s.timeout_s, heartbeat_s=s.heartbeat_s,
                      catch=(MetricMissing,), on_progress=progress)

    best = best_result(study, objectives, s.scheduler, fixed, list(s.constraints))
    summary: dict[str, Any] = {
        "scheduler": s.scheduler, "study": name, "storage": storage_text,
        "objectives": [{"name": o.name, "metric": o.metric, "direction": o.direction} for o in objectives],
        "aggregate": s.aggregate, "space": _dims_text(dims), "fixed": fixed, "defaults": defaults_all,
        "inputs": [i.source for i in inputs], "holdout": [i.source for i in holdout],
        "seed": s.seed, "replay_seed": s.replay_seed, "repeats": s.repeats,
        "trials": _counts(study), "trials_wanted": s.n_trials, **best,
        "worker": {"finished_here": stats.finished_here, "failed_here": stats.failed_here,
                   "stale_failed": stats.stale_failed, "wall_s": round(stats.wall_s, 3),
                   "stopped_by": stats.stopped_by},
    }
    evaluation = None
    if s.evaluate and (best.get("best") or best.get("pareto")):
        if single:
            cands = [Candidate("tuned", {k: v for k, v in best["best"]["params"].items() if k in tuned_defaults})]
        else:
            front = best["pareto"]
            step = max(1, -(-len(front) // MAX_PARETO_EVAL))
            cands = [Candidate(f"pareto#{e['trial']}", {k: v for k, v in e["params"].items() if k in tuned_defaults})
                     for e in front[::step]]
        t0 = time.perf_counter()
        evaluation = evaluate(inputs, holdout, s.scheduler, defaults=tuned_defaults, candidates=cands,
                              objectives=objectives, how=s.aggregate, fixed=fixed, replay_seed=s.replay_seed,
                              repeats=s.repeats, on_replay=cb.on_eval)
        summary["evaluation_wall_s"] = round(time.perf_counter() - t0, 3)
    files = write_outputs(s.out_dir, study=study, summary=summary, objectives=objectives, dims=dims,
                          evaluation=evaluation, html_page=s.html)
    return TuneOutcome(name, storage_text, summary, evaluation, stats, files)

