"""Automated parameter tuning of schedulers with optuna (the only package that imports optuna).

>>> from workbench.tune import TuneSettings, run_tuning
>>> outcome = run_tuning(TuneSettings(inputs=["traces/lab/c01"], scheduler="stms_a", out_dir=Path("out"),
...                                   objectives=["ooo_p95"], tune=["adjust_interval_ms"], n_trials=30))
>>> outcome.summary["best"]["param_line"]

Modules, one job each: `space` (search space from declared parameters + overrides), `inputs` (what
each INPUT becomes), `objective` (objectives, aggregation over inputs, the trial function with
per-input pruning), `study` (storage, samplers, seeds, the resumable multi-worker loop), `evaluate`
(tuned vs default on tuning and held-out inputs), `output` (JSON, tables, HTML with optuna's
figures), `run` (all of it in order), `cli` (the ``workbench tune`` command). See docs/TUNING.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Callbacks", "TuneOutcome", "TuneSettings", "run_tuning"]


def __getattr__(name: str) -> Any:
    # Lazy: `import workbench.tune` stays cheap (optuna + sqlalchemy take ~1 s to import).
    if name in __all__:
        from workbench.tune import run

        return getattr(run, name)
    raise AttributeError(name)
