"""Everything a job imports on its way through a capture with replays and a page's figures: imported
once in a batch report's fork server (`workbench.report._worker`), so that every worker forked from
the server starts with it (a worker makes its inputs' pages too). Plotly's modules load lazily, on
first use of a name: the names a job uses are touched here. `tests/test_report_workers.py` checks a
job imports nothing heavy beyond this."""

# ruff: noqa: F401  (imported for what importing them does)
from __future__ import annotations

import numpy.ma
import plotly.animation
import plotly.graph_objects as go
import plotly.graph_objs._deprecations
import plotly.io._json
import plotly.offline
import plotly.validator_cache
import polars._utils.parquet
from plotly.subplots import make_subplots

import workbench._plot_grid
import workbench.backends._model
import workbench.capture
import workbench.capture_experiment
import workbench.compare
import workbench.experiment
import workbench.metrics
import workbench.plugins
import workbench.replay.run
import workbench.replay.tables
import workbench.report.capture_views
import workbench.report.figures
import workbench.report.html
import workbench.report.made_with
import workbench.schedulers
import workbench.timeline
import workbench.timeline.figure

# the lazily loaded figure classes (and the validators, colour scales and narwhals they bring)
_FIGURE_CLASSES = (go.Figure, go.Scatter, go.Layout, go.layout.XAxis, go.layout.xaxis.Title, go.layout.YAxis,
                   go.layout.Template, make_subplots)

__all__: list[str] = []
