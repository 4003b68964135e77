"""Search spaces: which scheduler parameters a study varies, over which ranges.

The default space is what the scheduler declares (`ParamSpec`: default, low/high, log, choices):
every parameter with a numeric range or a list of choices is tuned (except ``variant``, which picks
kernel vs. paper behaviour rather than a value). The user narrows or reshapes it:

* ``--tune NAME`` (repeatable): tune only these parameters, the others stay at their defaults;
* ``--space NAME=LOW:HIGH[:log]`` or ``--space NAME=a|b|c``: another range or choice list (also for a
  parameter the scheduler declares without a range);
* ``--param NAME=VALUE``: fix a parameter (it is not tuned; every replay uses VALUE).

Values are validated by the scheduler's own `ParamSpec.check` when a replay builds the scheduler, so
a range wider than the declared one fails loudly at the first trial, not silently.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from workbench.errors import InputError

__all__ = [
    "Dim",
    "default_params",
    "param_line",
    "parse_fixed",
    "parse_space_override",
    "search_space",
    "space_key",
    "suggest",
    "to_distributions",
]

Kind = Literal["float", "int", "categorical"]

# Declared choices that select *which model* runs (kernel code vs. paper, docs/MODEL.md Part B), not
# a knob of it: tuned only when named with --tune.
NOT_TUNED_BY_DEFAULT = frozenset({"variant"})


@dataclass(frozen=True)
class Dim:
    """One tuned parameter: a float/int range (``log``: sample the logarithm uniformly) or choices."""

    name: str
    kind: Kind
    default: Any
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None

    def describe(self) -> str:
        if self.kind == "categorical":
            return f"{self.name} in {list(self.choices or ())}"
        return f"{self.name} in [{self.low}, {self.high}]" + (" (log)" if self.log else "")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "default": self.default, "low": self.low,
                "high": self.high, "log": self.log, "choices": list(self.choices) if self.choices else None}


def _scalar(text: str) -> Any:
    """A command-line value as YAML would read it (``true`` -> True, ``0.5`` -> 0.5, ``x`` -> "x")."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_space_override(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME=LOW:HIGH[:log]`` or ``NAME=a|b|c`` -> (name, {low, high, log} or {choices})."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name or not spec.strip():
        raise InputError(None, f"--space wants NAME=LOW:HIGH[:log] or NAME=a|b|c, got {text!r}")
    if "|" in spec:
        choices = tuple(_scalar(c.strip()) for c in spec.split("|") if c.strip())
        if len(choices) < 2:
            raise InputError(None, f"--space {text!r}: give at least two choices")
        return name, {"choices": choices}
    parts = [p.strip() for p in spec.split(":")]
    log = False
    if len(parts) == 3 and parts[2].lower() in ("log", "lin", "linear"):
        log = parts[2].lower() == "log"
        parts = parts[:2]
    if len(parts) != 2:
        raise InputError(None, f"--space wants NAME=LOW:HIGH[:log], got {text!r}")
    try:
        low, high = (_scalar(p) for p in parts)
        if isinstance(low, bool) or isinstance(high, bool) or not isinstance(low, int | float) \
                or not isinstance(high, int | float):
            raise ValueError
    except ValueError:
        raise InputError(None, f"--space {text!r}: LOW and HIGH must be numbers") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise InputError(None, f"--space {text!r}: need finite LOW < HIGH")
    if log and low <= 0:
        raise InputError(None, f"--space {text!r}: a log range needs LOW > 0")
    return name, {"low": low, "high": high, "log": log}


def parse_fixed(items: Sequence[str]) -> dict[str, Any]:
    """``--param NAME=VALUE`` items -> {name: value}."""
    out: dict[str, Any] = {}
    for text in items:
        name, sep, raw = text.partition("=")
        if not sep or not name.strip():
            raise InputError(None, f"--param wants NAME=VALUE, got {text!r}")
        out[name.strip()] = _scalar(raw.strip())
    return out


def _declared(scheduler: str) -> dict[str, Any]:
    from workbench.schedulers import info

    return {p.name: p for p in info(scheduler).params}


def default_params(scheduler: str) -> dict[str, Any]:
    """Every declared parameter at its default."""
    return {n: p.default for n, p in _declared(scheduler).items()}


def search_space(scheduler: str, *, tune: Sequence[str] = (), overrides: Sequence[str] = (),
                 fixed: Mapping[str, Any] | None = None) -> list[Dim]:
    """The dimensions a study of ``scheduler`` varies (see the module docstring)."""
    declared = _declared(scheduler)
    fixed = dict(fixed or {})
    over = dict(parse_space_override(o) for o in overrides)
    for name in [*over, *tune, *fixed]:
        if name not in declared:
            known = ", ".join(declared) or "none"
            raise InputError(None, f"scheduler {scheduler} has no parameter {name!r} (it has: {known})")
    both = set(fixed) & (set(over) | set(tune))
    if both:
        raise InputError(None, f"{sorted(both)} both fixed with --param and tuned")
    names = list(tune) if tune else [n for n in declared if n not in fixed and n not in NOT_TUNED_BY_DEFAULT]
    dims: list[Dim] = []
    for name in dict.fromkeys(names):
        p = declared[name]
        o = over.get(name, {})
        if "choices" in o:
            dims.append(Dim(name, "categorical", p.default, choices=o["choices"]))
        elif "low" in o:
            is_int = isinstance(p.default, int) and not isinstance(p.default, bool) \
                and isinstance(o["low"], int) and isinstance(o["high"], int)
            dims.append(Dim(name, "int" if is_int else "float", p.default, o["low"], o["high"], o["log"]))
        elif p.choices is not None:
            dims.append(Dim(name, "categorical", p.default, choices=tuple(p.choices)))
        elif p.low is not None and p.high is not None and not isinstance(p.default, bool):
            is_int = isinstance(p.default, int)
            dims.append(Dim(name, "int" if is_int else "float", p.default, p.low, p.high, bool(p.log)))
        elif tune or name in over:
            raise InputError(None, f"parameter {name!r} of {scheduler} declares no range: "
                                   f"give one with --space {name}=LOW:HIGH")
        # else: not tunable as declared (no range) -> it stays at its default
    if not dims:
        raise InputError(None, f"nothing to tune: {scheduler} declares no parameter with a range "
                               "(give one with --space NAME=LOW:HIGH)")
    return dims


def space_key(dims: Sequence[Dim], fixed: Mapping[str, Any]) -> str:
    """A canonical text of the space, stored with the study so a resume with another space is refused."""
    return json.dumps({"dims": [d.as_dict() for d in dims], "fixed": dict(sorted(fixed.items()))},
                      sort_keys=True, default=str)


def to_distributions(dims: Sequence[Dim]) -> dict[str, Any]:
    """optuna distributions of the space (for enqueueing the defaults and for checks)."""
    import optuna

    out: dict[str, Any] = {}
    for d in dims:
        if d.kind == "categorical":
            out[d.name] = optuna.distributions.CategoricalDistribution(list(d.choices or ()))
        elif d.kind == "int":
            out[d.name] = optuna.distributions.IntDistribution(int(d.low), int(d.high), log=d.log)  # type: ignore[arg-type]
        else:
            out[d.name] = optuna.distributions.FloatDistribution(float(d.low), float(d.high), log=d.log)  # type: ignore[arg-type]
    return out


def suggest(trial: Any, dims: Sequence[Dim]) -> dict[str, Any]:
    """Ask an optuna trial for one value per dimension."""
    out: dict[str, Any] = {}
    for d in dims:
        if d.kind == "categorical":
            out[d.name] = trial.suggest_categorical(d.name, list(d.choices or ()))
        elif d.kind == "int":
            out[d.name] = trial.suggest_int(d.name, int(d.low), int(d.high), log=d.log)  # type: ignore[arg-type]
        else:
            out[d.name] = trial.suggest_float(d.name, float(d.low), float(d.high), log=d.log)  # type: ignore[arg-type]
    return out


def default_in_space(dims: Sequence[Dim]) -> dict[str, Any] | None:
    """The defaults of the tuned parameters, or None when a default lies outside an overridden range
    (then it cannot be enqueued as a trial)."""
    out: dict[str, Any] = {}
    for d in dims:
        if d.kind == "categorical":
            if d.default not in (d.choices or ()):
                return None
        elif not (d.low <= d.default <= d.high):
            return None
        out[d.name] = d.default
    return out


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def param_line(scheduler: str, params: Mapping[str, Any]) -> str:
    """Options to paste into ``workbench replay`` / ``compare``: ``--scheduler S --param k=v ...``."""
    return " ".join([f"--scheduler {scheduler}", *(f"--param {k}={_fmt_value(v)}" for k, v in params.items())])
