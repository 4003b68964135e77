"""Batch reports: per input an offline HTML page (path timelines, OOO-delay CDF, goodput, burstiness,
per-path share, OOO queue, buffers, observed-vs-scheduler table), an index, metrics tables (CSV and
parquet) and a manifest that pins inputs, versions and settings.

- jobs: input discovery, one `JobSpec` per input (pure data);
- pipeline: `run_job`, the work of one input (load, metrics, timelines, replays) returning plain data;
- figures: figure data (pure) and plotly figures, the metric table with better-direction per metric;
- html: page templates; batch: `run_report` (parallel execution, atomic writes, manifest);
- cli: the ``workbench report`` command (``report_command``).

Names are imported on first use, so ``from workbench.report.cli import report_command`` (what the
top-level CLI does) does not load polars and keeps ``workbench --help`` fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.report.batch import BatchOutcome, resolve_settings, run_report
    from workbench.report.figures import METRICS
    from workbench.report.jobs import JobSpec, Skipped, discover
    from workbench.report.pipeline import ReportSettings, run_job

__all__ = [
    "METRICS",
    "BatchOutcome",
    "JobSpec",
    "ReportSettings",
    "Skipped",
    "discover",
    "resolve_settings",
    "run_job",
    "run_report",
]

_WHERE = {
    "BatchOutcome": "batch", "resolve_settings": "batch", "run_report": "batch", "METRICS": "figures",
    "JobSpec": "jobs", "Skipped": "jobs", "discover": "jobs", "ReportSettings": "pipeline", "run_job": "pipeline",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"workbench.report.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'workbench.report' has no attribute {name!r}")
