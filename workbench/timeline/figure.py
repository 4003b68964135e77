"""A plotly figure of path timelines: capacity, one-way delay and loss over time, one colour per path.

Three rows sharing the time axis (seconds from the timelines' origin). Steps are drawn as steps
(``line_shape="hv"``); the hover says how each value was obtained (measured / estimated / assumed).
Downlink solid, uplink dotted. Throughput timelines (not capacity) are labelled as such.
plotly is imported only here.

The figure is built from plain dicts on a `workbench._plot_grid` grid, not through
``make_subplots`` / ``add_trace``: plotly's per-property validation of every trace and layout edit
was most of its cost.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
import polars as pl
from plotly.colors import qualitative

from workbench._plot_grid import grid_figure, subplot_layout
from workbench.timeline.model import PathTimeline, Timelines

__all__ = ["timeline_figure"]

_ROWS = [
    ("capacity_{d}_bps", 1e-6, "Mbit/s"),
    ("owd_{d}_ns", 1e-6, "ms"),
    ("loss_{d}", 100.0, "%"),
]


def _xy(tl: PathTimeline, col: str, scale: float) -> tuple[list[float], list[float | None], list[str | None]]:
    s = tl.steps.select("t_ns", col, f"{col}_src")
    x = [t / 1e9 for t in s["t_ns"].to_list()]
    y = [None if v is None else v * scale for v in s[col].to_list()]
    src = s[f"{col}_src"].cast(pl.String).to_list()
    if tl.end_ns is not None and x:
        # Repeat the last value at the end so the last step is drawn with its width.
        x.append(tl.end_ns / 1e9)
        y.append(y[-1])
        src.append(src[-1])
    return x, y, src


def timeline_figure(timelines: Timelines | PathTimeline, *, title: str | None = None) -> go.Figure:
    """Capacity (Mbit/s), one-way delay (ms) and loss (%) of each path over time, shared x axis."""
    tls = Timelines([timelines]) if isinstance(timelines, PathTimeline) else timelines
    any_tput = any(tl.kind == "throughput" for tl in tls.values())
    rate_label = "capacity / throughput" if any_tput else "capacity"
    layout, refs = subplot_layout(3, 1, vertical_spacing=0.06, subplot_titles=(
        f"{rate_label} (Mbit/s)", "one-way delay (ms)", "random loss (%)"))
    palette = qualitative.Plotly
    traces: list[dict[str, Any]] = []
    shown: set[str] = set()  # one legend entry per path and direction
    for i, (name, tl) in enumerate(tls.items()):
        color = palette[i % len(palette)]
        label = name + (" (throughput)" if tl.kind == "throughput" else "")
        for row, (pattern, scale, unit) in enumerate(_ROWS):
            xaxis, yaxis = refs[row][0]
            for d, dash in (("down", "solid"), ("up", "dot")):
                col = pattern.format(d=d)
                x, y, src = _xy(tl, col, scale)
                if all(v is None for v in y):
                    continue
                key = f"{label} {d}"
                traces.append({
                    "type": "scatter", "x": x, "y": y, "customdata": src, "mode": "lines",
                    "line": {"color": color, "dash": dash, "shape": "hv"}, "name": key, "legendgroup": name,
                    "showlegend": key not in shown, "xaxis": xaxis, "yaxis": yaxis,
                    "hovertemplate": f"{name} {d}<br>t=%{{x:.3f}} s<br>%{{y:.4g}} {unit}<br>%{{customdata}}<extra></extra>",
                })
                shown.add(key)
    layout["xaxis3"]["title"] = {"text": "time (s)"}
    # An explicit template: the process default can be another library's (Streamlit installs a
    # theme template whose placeholder colours only its own front end resolves).
    layout.update({"title": {"text": title or "Path timelines"}, "hovermode": "x unified", "height": 750,
                   "legend": {"groupclick": "togglegroup"}, "template": pio.templates["plotly"]})
    return grid_figure(traces, layout, refs)
