"""HTML of a report: one page per input and the index, as plain string templates (no template
engine needed). Pages are self-contained apart from plotly.js, which is shipped once beside them in
``assets/plotly.min.js`` and referenced relatively, so a report folder works offline and can be
moved or zipped as a whole. Output is deterministic for the same data (fixed figure div ids)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

__all__ = ["PLOTLY_ASSET", "fmt", "index_page", "input_page"]

PLOTLY_ASSET = "assets/plotly.min.js"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1200px;
 padding:0 1rem;color:#222}
h1{font-size:1.4rem;margin-bottom:.2rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0} th,td{border:1px solid #ddd;padding:.25rem .5rem}
th{background:#f4f4f4;text-align:left} td.num{text-align:right;font-variant-numeric:tabular-nums}
td.best{background:#dff3df;font-weight:600} td.base{color:#777} .err{color:#b00020} .note{color:#8a5a00}
.muted{color:#777;font-size:.85rem} .fig{margin:1rem 0 2rem} .cap{font-size:.85rem;color:#555;margin:.2rem 0}
code{font-size:.8rem} details{margin:.5rem 0} .scroll{overflow-x:auto}
"""


def fmt(v: Any, digits: int = 3) -> str:
    """A number for a table: None as an en dash, floats with ``digits`` significant-ish decimals."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:
            return "–"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}" if abs(v) < 1 else f"{v:.{digits}f}".rstrip("0").rstrip(".")
    if isinstance(v, int):
        return f"{v:,}"
    return html.escape(str(v))


def _e(s: Any) -> str:
    return html.escape(str(s))


def _head(title: str, with_plotly: bool) -> str:
    script = f'<script src="{PLOTLY_ASSET}" charset="utf-8"></script>' if with_plotly else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f"<title>{_e(title)}</title><style>{_CSS}</style>{script}</head>\n")


def _metrics_table(data: dict[str, Any]) -> str:
    cols = data["columns"]
    head = "".join(f"<th>{_e(c['source'])}</th>" for c in cols)
    out = [f'<div class="scroll"><table><tr><th>metric</th><th>unit</th><th>better</th>{head}</tr>']
    for m in data["table"]:
        cells = []
        for c in cols:
            cls = ["num"]
            if c["source"] in m["best"]:
                cls.append("best")
            if c["kind"] == "baseline":
                cls.append("base")
            v = m["values"].get(c["source"])
            mark = " ★" if c["source"] in m["best"] else ""
            cells.append(f'<td class="{" ".join(cls)}">{fmt(v)}{mark}</td>')
        arrow = "↑ higher" if m["better"] == "higher" else "↓ lower"
        out.append(f"<tr><td>{_e(m['label'])}</td><td>{_e(m['unit'])}</td><td>{arrow}</td>{''.join(cells)}</tr>")
    out.append("</table></div>")
    return "".join(out)


def input_page(result: dict[str, Any], figures: Sequence[tuple[str, str, Any]]) -> str:
    """The page of one input: what it is, notes, every figure, and the comparison table."""
    import plotly.io as pio

    data = result["figures"]
    parts = [_head(f"{result['label']} — workbench report", with_plotly=True),
             f'<body data-figures="{len(figures)}">',
             '<p class="muted"><a href="index.html">← all inputs</a></p>',
             f"<h1>{_e(result['label'])}</h1>",
             f"<p>kind: {_e(result['kind'])} · status: <b>{_e(result['status'])}</b>"
             + (f" · workload: {_e(result['workload'])}" if result.get("workload") else "")
             + (f" · replay duration cap: {result['duration_ns'] / 1e9:.3f} s" if result.get("duration_ns") else "")
             + "</p>"]
    if result.get("note"):
        parts.append(f'<p class="note">{_e(result["note"])}</p>')
    files = "".join(f"<li><code>{_e(f['path'])}</code> ({_e(f['role'])}) sha256 <code>{_e(f['sha256'])}</code></li>"
                    for f in result["files"])
    parts.append(f"<details><summary>input files</summary><ul>{files}</ul></details>")
    if result.get("connection"):
        conn = ", ".join(f"{_e(k)}={_e(v)}" for k, v in result["connection"].items())
        parts.append(f"<details><summary>replay connection settings</summary><p><code>{conn}</code></p></details>")
    notes = [*result.get("notes", []), *result.get("warnings", [])]
    if notes:
        items = "".join(f"<li>{_e(n)}</li>" for n in notes)
        parts.append(f"<details><summary>notes and warnings ({len(notes)})</summary><ul>{items}</ul></details>")
    parts.append("<h2>Observed vs. replayed schedulers</h2>")
    parts.append('<p class="cap">★ = best among the replayed schedulers (same path timelines, same workload, '
                 "same seed); the arrow says whether lower or higher is better. The observed column is the "
                 "real run, baseline columns are single-path TCP on each path alone (grey).</p>")
    parts.append(_metrics_table(data))
    for fig_id, caption, fig in figures:
        div = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=f"fig-{fig_id}",
                          config={"displaylogo": False, "responsive": True})
        parts.append(f'<div class="fig" id="sec-{fig_id}">{div}<p class="cap">{_e(caption)}</p></div>')
    parts.append("</body></html>\n")
    return "\n".join(parts)


def index_page(rows: Sequence[dict[str, Any]], summary: dict[str, dict[str, int]], metric_labels: dict[str, str],
               skipped: Sequence[dict[str, str]], header: dict[str, Any]) -> str:
    """The index: one row per input (key figures, link or one-line error), the cross-input wins
    table, skipped files and links to the machine-readable tables."""
    parts = [_head("workbench report", with_plotly=False), "<body>", "<h1>MPTCP trace-replay report</h1>",
             f"<p class=\"muted\">{_e(header.get('n_ok', 0))} of {_e(len(rows))} inputs replayed · schedulers: "
             f"{_e(', '.join(header.get('schedulers', [])))} · seed {_e(header.get('seed'))} · "
             '<a href="metrics.csv">metrics.csv</a> · <a href="metrics.parquet">metrics.parquet</a> · '
             '<a href="manifest.json">manifest.json</a></p>',
             "<h2>Inputs</h2>",
             "<table><tr><th>input</th><th>kind</th><th>status</th><th>observed goodput Mbit/s</th>"
             "<th>observed OOO p95 ms</th><th>best scheduler (goodput)</th><th>its goodput Mbit/s</th>"
             "<th>its OOO p95 ms</th><th>lowest OOO p95</th></tr>"]
    for r in rows:
        if r["status"] == "error":
            parts.append(f"<tr><td>{_e(r['label'])}</td><td>{_e(r['kind'])}</td><td class=\"err\">error</td>"
                         f"<td colspan=\"6\" class=\"err\">{_e(r['error'])}</td></tr>")
            continue
        link = f'<a href="{_e(r["page"])}">{_e(r["label"])}</a>'
        status = _e(r["status"]) + (f'<br><span class="note">{_e(r["note"])}</span>' if r.get("note") else "")
        parts.append(
            f"<tr><td>{link}</td><td>{_e(r['kind'])}</td><td>{status}</td>"
            f"<td class=\"num\">{fmt(r.get('observed_goodput_mbps'))}</td>"
            f"<td class=\"num\">{fmt(r.get('observed_ooo_p95_ms'))}</td>"
            f"<td>{_e(r.get('best_scheduler') or '–')}</td>"
            f"<td class=\"num\">{fmt(r.get('best_goodput_mbps'))}</td>"
            f"<td class=\"num\">{fmt(r.get('best_ooo_p95_ms'))}</td>"
            f"<td>{_e(r.get('best_ooo_scheduler') or '–')}</td></tr>")
    parts.append("</table>")
    if summary:
        scheds = sorted({s for counts in summary.values() for s in counts})
        parts.append("<h2>Which scheduler wins how often</h2>")
        parts.append('<p class="cap">Number of inputs on which each scheduler had the best value of the metric '
                     "among the replayed schedulers (ties count for each tied scheduler).</p>")
        head = "".join(f"<th>{_e(s)}</th>" for s in scheds)
        parts.append(f"<table><tr><th>metric</th>{head}</tr>")
        for metric, counts in summary.items():
            best = max(counts.values()) if counts else 0
            cells = "".join(
                f'<td class="num{" best" if counts.get(s, 0) == best and best > 0 else ""}">{counts.get(s, 0)}</td>'
                for s in scheds)
            parts.append(f"<tr><td>{_e(metric_labels.get(metric, metric))}</td>{cells}</tr>")
        parts.append("</table>")
    if skipped:
        items = "".join(f"<li><code>{_e(s['path'])}</code>: {_e(s['reason'])}</li>" for s in skipped)
        parts.append(f"<details><summary>{len(skipped)} files skipped in folders</summary><ul>{items}</ul></details>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
