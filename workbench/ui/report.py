"""The downloads of what is on screen: an HTML report and the metrics CSV.

The report package (`workbench.report`) writes reports of input files in a folder with plotly.js
shipped beside the pages; a download must be one self-contained file of the page's current state
(what-if timelines, chosen schedulers and workload). So the page's figures are built by the report's
own figure code (`workbench.report.figures.page_figure_data` + `build_figures`, the same figures a
batch report shows) and put in one HTML file here, with plotly.js inlined once so it opens offline.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import polars as pl

__all__ = ["report_html"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1200px;
 padding:0 1rem;color:#222}
h1{font-size:1.4rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0} th,td{border:1px solid #ddd;padding:.25rem .5rem}
th{background:#f4f4f4;text-align:left} td{text-align:right;font-variant-numeric:tabular-nums}
td:first-child{text-align:left} .cap{font-size:.85rem;color:#555} .note{color:#8a5a00}
"""


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "–" if v != v else f"{v:.4g}"
    return html.escape(str(v))


def _table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in df.iter_rows())
    return f"<table><tr>{head}</tr>{body}</table>"


def report_html(*, title: str, settings: Sequence[str], tables: Sequence[tuple[str, pl.DataFrame]],
                rows: Sequence[dict[str, Any]], sources: Sequence[dict[str, Any]], timeline_json: str | None,
                notes: Sequence[str] = ()) -> str:
    """One self-contained page: settings, the given tables, the timelines figure and the report's
    comparison figures (OOO-delay CDF, goodput, burstiness, per-path share, OOO queue, buffers)."""
    import plotly.io as pio

    from workbench.report.figures import build_figures, page_figure_data

    data = page_figure_data(list(sources), list(rows), timeline_json)
    figs = build_figures(data)
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             "<ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in settings) + "</ul>"]
    if notes:
        parts.append("<details><summary>notes and warnings</summary><ul>"
                     + "".join(f'<li class="note">{html.escape(n)}</li>' for n in notes) + "</ul></details>")
    for caption, df in tables:
        parts.append(f"<h2>{html.escape(caption)}</h2>{_table(df)}")
    parts.append("<h2>Figures</h2>")
    for i, (fig_id, caption, fig) in enumerate(figs):
        # plotly.js once, inline, in the first figure: the file works offline and stays one file.
        div = pio.to_html(fig, full_html=False, include_plotlyjs=(i == 0), div_id=f"fig-{fig_id}",
                          config={"displaylogo": False, "responsive": True})
        parts.append(f'<div id="sec-{fig_id}">{div}<p class="cap">{html.escape(caption)}</p></div>')
    parts.append("</body></html>\n")
    return "\n".join(parts)
