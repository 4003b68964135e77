"""Objectives: what a trial is scored on, how per-input scores are combined, and the trial function.

A trial builds the scheduler with its candidate parameters, replays every input (× ``repeats``
replay seeds) and scores each replay with the metrics module (the same definitions as reports:
`workbench.metrics`). Per-input scores are combined by ``mean`` or ``worst`` (the worst input decides:
robust parameters rather than good-on-average ones).

Pruning (single objective only; optuna cannot prune multi-objective trials): after each replay the
running aggregate is reported as intermediate value ``step = replay index``, so a MedianPruner stops a
candidate that is already worse than the median of earlier trials after a few inputs. Inputs are
always replayed in the same order, so step k means the same thing in every trial.

Replays use fixed seeds (``replay_seed + repeat``), identical across trials: candidates are compared
on the same random losses (common random numbers), and a trial's value is reproducible.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from workbench.errors import InputError
from workbench.tune.inputs import TuneInput
from workbench.tune.space import Dim, suggest

__all__ = [
    "CONSTRAINT_METRICS",
    "OBJECTIVES",
    "Aggregate",
    "Constraint",
    "MetricMissing",
    "Objective",
    "TrialObjective",
    "aggregate",
    "better",
    "measure",
    "parse_constraint",
    "resolve_objectives",
    "run_input",
]

Aggregate = Literal["mean", "worst"]
Direction = Literal["maximize", "minimize"]


@dataclass(frozen=True)
class Objective:
    name: str            # what the user types: --objective NAME
    metric: str          # key of `workbench.metrics.summarize`
    direction: Direction
    label: str           # for tables and plots, with the unit


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("goodput", "goodput_mbps", "maximize", "goodput (Mbit/s)"),
    Objective("ooo_p95", "ooo_p95_ms", "minimize", "OOO delay p95 (ms)"),
    Objective("ooo_mean", "ooo_mean_ms", "minimize", "OOO delay mean (ms)"),
    Objective("ooo_p99", "ooo_p99_ms", "minimize", "OOO delay p99 (ms)"),
    Objective("completion", "completion_s", "minimize", "completion time (s)"),
    Objective("app_delay", "app_delay_mean_ms", "minimize", "application delay mean (ms)"),
    Objective("app_delay_p95", "app_delay_p95_ms", "minimize", "application delay p95 (ms)"),
)}
_ALIASES = {"completion_time": "completion", "completion_s": "completion", "ooo": "ooo_p95",
            "application_delay": "app_delay", "goodput_mbps": "goodput", "ooo_p95_ms": "ooo_p95",
            "ooo_mean_ms": "ooo_mean", "app_delay_mean_ms": "app_delay"}

# Metrics computed for every replay, objectives or not, so the results table can show the trade-off.
_CONTEXT_METRICS = ("goodput_mbps", "ooo_p95_ms", "ooo_mean_ms")


class MetricMissing(Exception):
    """A replay produced no value for an objective's metric (e.g. nothing delivered in order)."""


# What a constraint may bound: metrics every trial records (`_CONTEXT_METRICS`), with their units.
CONSTRAINT_METRICS: dict[str, tuple[str, str]] = {"goodput": ("goodput_mbps", "Mbit/s"),
                                                  "ooo_p95": ("ooo_p95_ms", "ms"), "ooo_mean": ("ooo_mean_ms", "ms")}


@dataclass(frozen=True)
class Constraint:
    """A bound a tuned value must keep, e.g. goodput >= 0.95 x the scheduler's defaults (``relative``)
    or >= 40 Mbit/s. Checked on each trial's aggregate over the inputs; a trial that breaks it cannot
    be the best, however good its objective."""

    name: str            # goodput | ooo_p95 | ooo_mean
    bound: Literal["min", "max"]
    value: float
    relative: bool       # value x the defaults' aggregate, else in the metric's unit

    @property
    def metric(self) -> str:
        return CONSTRAINT_METRICS[self.name][0]

    def threshold(self, baseline: Mapping[str, float | None] | None) -> float | None:
        """The bound in the metric's unit (None: relative and the defaults have no value)."""
        if not self.relative:
            return self.value
        base = (baseline or {}).get(self.metric)
        return None if base is None else self.value * base

    def ok(self, aggregate: Mapping[str, float | None] | None, baseline: Mapping[str, float | None] | None
           ) -> bool:
        """Whether a trial's aggregate keeps the bound (unknown values do not)."""
        v, t = (aggregate or {}).get(self.metric), self.threshold(baseline)
        if v is None or t is None:
            return False
        return v >= t if self.bound == "min" else v <= t

    def describe(self, baseline: Mapping[str, float | None] | None = None) -> str:
        unit = CONSTRAINT_METRICS[self.name][1]
        op = ">=" if self.bound == "min" else "<="
        if not self.relative:
            return f"{self.name} {op} {self.value:g} {unit}"
        t = self.threshold(baseline)
        at = f" = {t:.4g} {unit}" if t is not None else ""
        return f"{self.name} {op} {self.value:g} x defaults{at}"


def parse_constraint(name: str, bound: Literal["min", "max"], text: str) -> Constraint:
    """``0.95`` (a bare number: relative to the scheduler's defaults) or ``40Mbps`` / ``50ms`` (absolute,
    in the metric's unit) -> a `Constraint` on ``name``."""
    if name not in CONSTRAINT_METRICS:
        raise InputError(None, f"no constraint on {name!r}; known: {', '.join(CONSTRAINT_METRICS)}")
    unit = CONSTRAINT_METRICS[name][1]
    t = str(text).strip().lower().replace(" ", "")
    suffixes = ("mbit/s", "mbps", "mbit") if unit == "Mbit/s" else ("ms",)
    relative = True
    for suf in suffixes:
        if t.endswith(suf):
            t, relative = t[: -len(suf)], False
            break
    if t.endswith("x"):
        t = t[:-1]
    flag = f"--{bound}-{name.replace('_', '-')}"
    try:
        value = float(t)
    except ValueError:
        raise InputError(None, f"{flag} takes a factor of the defaults (0.95) or a value with its unit "
                               f"(e.g. 40{'Mbps' if unit == 'Mbit/s' else 'ms'}), not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(None, f"{flag} must be a finite number >= 0, not {text!r}")
    return Constraint(name, bound, value, relative)


def resolve_objectives(names: Sequence[str]) -> list[Objective]:
    if not names:
        names = ["ooo_p95"]
    out = []
    for n in names:
        key = _ALIASES.get(n.strip().lower(), n.strip().lower())
        if key not in OBJECTIVES:
            raise InputError(None, f"unknown objective {n!r}; known: {', '.join(OBJECTIVES)}")
        if OBJECTIVES[key] in out:
            raise InputError(None, f"objective {key} given twice")
        out.append(OBJECTIVES[key])
    return out


def better(a: float, b: float, direction: Direction) -> bool:
    """Whether ``a`` is strictly better than ``b``."""
    return a > b if direction == "maximize" else a < b


def aggregate(values: Sequence[float], how: Aggregate, direction: Direction) -> float:
    """Mean, or the worst value for this direction (min when maximizing, max when minimizing)."""
    if not values:
        raise ValueError("nothing to aggregate")
    if how == "mean":
        return math.fsum(values) / len(values)
    if how == "worst":
        return min(values) if direction == "maximize" else max(values)
    raise InputError(None, f"--aggregate must be mean or worst, not {how!r}")


def _finite(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


# The PacketEvents columns the metrics `measure` computes read (`ooo_segments` checks for the first ten,
# `goodput_from_segments` reads data_fin). The others (seq, ack, timestamps, OWDs, ...) are dropped
# first, so no filter or join of a trial copies them: about half the table's width.
_MEASURED_COLUMNS = ("t_ns", "conn", "subflow", "path", "dir", "point", "payload_bytes", "dsn", "data_ack", "flags",
                     "data_fin")


def measure(events: Any, metrics: Sequence[str]) -> dict[str, float | None]:
    """The named `summarize` metrics of the main connection, computing only the groups needed
    (`summarize` computes everything: RTTs, bursts, ... — 3x the time of a tuning replay's needs).

    Starts, as `summarize` does, from `prepare`: the connection tagged with its data direction once,
    and the receiver's segments and time origin derived once for goodput, the OOO summary and the
    application delay alike."""
    import polars as pl

    from workbench.metrics import prepare
    from workbench.metrics.ooo import summarize_segments
    from workbench.metrics.throughput import app_delay_from_segments, app_delay_stats, goodput_from_segments

    want = set(metrics)
    out: dict[str, float | None] = {}
    narrow = events.select([c for c in _MEASURED_COLUMNS if c in events.columns])
    prep = prepare(narrow)
    if want & {"goodput_mbps", "completion_s"}:
        g = goodput_from_segments(prep.events, prep.firsts, prep.start)
        row = g.row(0, named=True) if g.height else {}
        bps = _finite(row.get("goodput_bps"))
        out["goodput_mbps"] = bps / 1e6 if bps is not None else None
        out["completion_s"] = _finite(row.get("completion_s"))
    if want & {"ooo_mean_ms", "ooo_p95_ms", "ooo_p99_ms"}:
        o = summarize_segments(prep.segments)
        row = o.row(0, named=True) if o.height else {}
        for stat in ("mean", "p95", "p99"):
            out[f"ooo_{stat}_ms"] = _finite(row.get(f"ooo_delay_{stat}_ms"))
    if want & {"app_delay_mean_ms", "app_delay_p95_ms"}:
        # `app_delay`'s segments: first copies that became deliverable
        delivered = prep.firsts.filter(pl.col("t_deliverable_ns").is_not_null())
        a = app_delay_stats(app_delay_from_segments(prep.events, delivered))
        row = a.row(0, named=True) if a.height else {}
        out["app_delay_mean_ms"] = _finite(row.get("app_delay_mean_ms"))
        out["app_delay_p95_ms"] = _finite(row.get("app_delay_p95_ms"))
    return {m: out.get(m) for m in metrics}


def run_input(inp: TuneInput, scheduler: str, params: Mapping[str, Any], metrics: Sequence[str], *,
              seed: int = 0) -> dict[str, float | None]:
    """Replay one input with ``scheduler(**params)`` and return the metrics (plus ``wall_s``)."""
    from workbench.backends import get_backend
    from workbench.schedulers import get

    try:
        sched = get(scheduler, **params)
    except TypeError as e:
        raise InputError(None, f"scheduler {scheduler}: {e}") from None
    t0 = time.perf_counter()
    r = get_backend("model").run(inp.for_trial(sched, seed=seed))
    out = measure(r.events, metrics)
    out["wall_s"] = time.perf_counter() - t0
    return out


def metrics_needed(objectives: Sequence[Objective]) -> list[str]:
    return list(dict.fromkeys([*(o.metric for o in objectives), *_CONTEXT_METRICS]))


@dataclass
class TrialObjective:
    """The optuna objective: ``study.optimize(TrialObjective(...))``.

    Trial user attributes written: ``per_input`` ({label: {metric: value}}, also for pruned trials,
    as far as they got), ``aggregate`` ({metric: aggregated value}), ``wall_s``.
    """

    inputs: Sequence[TuneInput]
    scheduler: str
    dims: Sequence[Dim]
    objectives: Sequence[Objective]
    how: Aggregate = "mean"
    fixed: Mapping[str, Any] | None = None
    replay_seed: int = 0
    repeats: int = 1
    prune: bool = True
    on_replay: Callable[[int, int], None] | None = None   # (replays done, replays per trial)

    def steps(self) -> list[tuple[TuneInput, int]]:
        return [(inp, self.replay_seed + r) for inp in self.inputs for r in range(self.repeats)]

    def __call__(self, trial: Any) -> float | tuple[float, ...]:
        import optuna

        params = suggest(trial, self.dims)
        full = dict(self.fixed or {}) | params
        metrics = metrics_needed(self.objectives)
        per_input: dict[str, dict[str, float | None]] = {}
        scores: list[list[float]] = [[] for _ in self.objectives]
        steps = self.steps()
        t0 = time.perf_counter()
        single = len(self.objectives) == 1
        for k, (inp, seed) in enumerate(steps):
            m = run_input(inp, self.scheduler, full, metrics, seed=seed)
            key = inp.label if self.repeats == 1 else f"{inp.label}@seed{seed}"
            per_input[key] = m
            trial.set_user_attr("per_input", per_input)
            for j, o in enumerate(self.objectives):
                v = m.get(o.metric)
                if v is None:
                    trial.set_user_attr("missing", f"{o.metric} undefined on {key}")
                    raise MetricMissing(f"{o.metric} undefined on {key}")
                scores[j].append(v)
            if self.on_replay is not None:
                self.on_replay(k + 1, len(steps))
            if single and self.prune and k + 1 < len(steps):
                # Running aggregate as the intermediate value: monotone for "worst", a running
                # mean for "mean"; both compare like with like because the input order is fixed.
                trial.report(aggregate(scores[0], self.how, self.objectives[0].direction), k)
                if trial.should_prune():
                    trial.set_user_attr("wall_s", time.perf_counter() - t0)
                    raise optuna.TrialPruned(f"pruned after {k + 1} of {len(steps)} replays")
        agg: dict[str, float | None] = {}
        for metric in metrics:
            vals = [m[metric] for m in per_input.values() if m.get(metric) is not None]
            direction = next((o.direction for o in self.objectives if o.metric == metric),
                             "maximize" if metric == "goodput_mbps" else "minimize")
            agg[metric] = aggregate(vals, self.how, direction) if vals else None  # type: ignore[arg-type]
        trial.set_user_attr("aggregate", agg)
        trial.set_user_attr("wall_s", time.perf_counter() - t0)
        values = tuple(aggregate(s, self.how, o.direction) for s, o in zip(scores, self.objectives, strict=True))
        return values[0] if single else values
