"""Multi-panel plotly figures from plain dicts: the layout ``make_subplots(shared_xaxes=True)`` makes
(`subplot_layout`) and a figure on it that is not validated property by property (`grid_figure`).
plotly's per-property validation of every trace and layout edit was most of the cost of the report's
and the timeline's multi-panel figures; the tests pass every such figure through plotly's full
validation and hold the grid to ``make_subplots``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

__all__ = ["grid_figure", "subplot_layout"]


def subplot_layout(rows: int, cols: int, *, vertical_spacing: float, horizontal_spacing: float | None = None,
                   subplot_titles: Sequence[str] = ()) -> tuple[dict[str, Any], list[list[tuple[str, str]]]]:
    """The layout ``make_subplots(rows, cols, shared_xaxes=True, vertical_spacing=...,
    horizontal_spacing=..., subplot_titles=...)`` makes, as a plain dict: one x and y axis per cell
    (numbered row by row from the top left) with its domain and anchor, the x axes of a column
    matching the bottom one (tick labels only there) and the subplot titles as annotations. The same
    arithmetic as plotly's (`plotly._subplots`), so the numbers are the same to the last bit.
    Also the (x, y) axis ids of each cell (``[row][col]``, from 0), the traces' ``xaxis``/``yaxis``."""
    if horizontal_spacing is None:
        horizontal_spacing = 0.2 / cols
    widths = [(1.0 - horizontal_spacing * (cols - 1)) / cols] * cols
    heights = [(1.0 - vertical_spacing * (rows - 1)) / rows] * rows
    # make_subplots' start cell is the top left: its grid rows run from the top, positions from the bottom
    grid = [[(sum(widths[:c]) + c * horizontal_spacing, sum(heights[:r]) + r * vertical_spacing)
             for c in range(cols)] for r in range(rows)[::-1]]
    layout: dict[str, Any] = {}
    refs: list[list[tuple[str, str]]] = []
    title_domains: list[tuple[list[float], list[float]]] = []
    n = 0
    for r in range(rows):
        refs.append([])
        for c in range(cols):
            x_s = grid[r][c][0]
            x_e = grid[r][c][0] + widths[c]
            y_s = _near_unit(grid[r][c][1])
            y_e = _near_unit(grid[r][c][1] + heights[r])
            title_domains.append(([x_s, x_e], [y_s, y_e]))
            n += 1
            x, y = f"x{n if n > 1 else ''}", f"y{n if n > 1 else ''}"
            layout[f"xaxis{n if n > 1 else ''}"] = {"anchor": y, "domain": [max(0.0, x_s), min(1.0, x_e)]}
            layout[f"yaxis{n if n > 1 else ''}"] = {"anchor": x, "domain": [max(0.0, y_s), min(1.0, y_e)]}
            refs[r].append((x, y))
    for c in range(cols):   # shared x: every x axis of a column matches the bottom one
        bottom = refs[rows - 1][c][0]
        for r in range(rows - 1):
            axis = layout["xaxis" + refs[r][c][0][1:]]
            axis["matches"] = bottom
            axis["showticklabels"] = False
    layout["annotations"] = [
        {"font": {"size": 16}, "showarrow": False, "text": text, "x": sum(xd) / 2.0, "xanchor": "center",
         "xref": "paper", "y": yd[1], "yanchor": "bottom", "yref": "paper"}
        for text, (xd, yd) in zip(subplot_titles, title_domains, strict=False) if text]
    return layout, refs


def _near_unit(v: float) -> float:
    """make_subplots' rounding of a domain end a float error outside [0, 1]."""
    if -0.01 < v < 0.0:
        return 0.0
    if 1.0 < v < 1.01:
        return 1.0
    return v


def grid_figure(traces: list[dict[str, Any]], layout: dict[str, Any], refs: list[list[tuple[str, str]]]
                ) -> go.Figure:
    """A figure of plain trace and layout dicts (a `subplot_layout` grid), not validated property by
    property, that still knows its grid as a ``make_subplots`` figure does (``add_trace(row=,
    col=)``, ``update_xaxes(row=)``, ``print_grid`` keep working)."""
    from plotly._subplots import SubplotRef, _build_grid_str

    fig = go.Figure(data=traces, layout=layout, _validate=False)
    grid_ref = [[(SubplotRef(subplot_type="xy", layout_keys=("xaxis" + x[1:], "yaxis" + y[1:]),
                             trace_kwargs={"xaxis": x, "yaxis": y}),) for x, y in row] for row in refs]
    specs = [[{"type": "xy", "secondary_y": False, "colspan": 1, "rowspan": 1, "l": 0.0, "r": 0.0, "b": 0.0,
               "t": 0.0} for _ in row] for row in refs]
    fig.__dict__["_grid_ref"] = grid_ref
    fig.__dict__["_grid_str"] = _build_grid_str(specs, grid_ref, None, None, range(len(refs))[::-1])
    return fig
