"""HTML of a report: one page per input and the index, as plain string templates (no template
engine needed). Pages are self-contained apart from plotly.js, which is shipped once beside them in
``assets/plotly.min.js`` and referenced relatively, so a report folder works offline and can be
moved or zipped as a whole. Output is deterministic for the same data (fixed figure div ids)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from workbench.report.made_with import DEFAULT_SCHEDULER

__all__ = ["KERNEL_SCHEDULER", "MADE_WITH", "PLOTLY_ASSET", "fmt", "index_page", "input_page", "with_page"]

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


# The comparison table in groups, sources as rows: each group fits the page's width (a table with one
# column per source needed sideways scrolling with every scheduler replayed).
_GROUPS: list[tuple[str, list[str]]] = [
    ("Throughput", ["goodput_mbps", "completion_s", "aggregation_benefit", "retrans", "reinjections",
                    "redundant_fraction"]),
    ("Reordering (MPTCP-level out-of-order delay)", ["ooo_mean_ms", "ooo_p50_ms", "ooo_p95_ms", "ooo_p99_ms",
                                                     "ooo_max_ms", "ooo_fraction", "ooo_queue_max_bytes"]),
    ("Application delay, burstiness and buffers", ["app_delay_mean_ms", "app_delay_p95_ms", "free_cwnd_mean_segments",
                                                   "free_cwnd_peak_segments", "burst_segments_mean",
                                                   "burst_segments_max", "snd_buf_max_bytes", "rcv_buf_max_bytes"]),
]


def _metrics_table(data: dict[str, Any]) -> str:
    cols = data["columns"]
    by_key = {m["key"]: m for m in data["table"]}
    grouped = {k for _, keys in _GROUPS for k in keys}
    groups = [*_GROUPS, ("Other", [k for k in by_key if k not in grouped])]
    out = []
    for title, keys in groups:
        ms = [by_key[k] for k in keys if k in by_key]
        if not ms:
            continue
        head = "".join(f"<th>{_e(m['label'])}<br><span class=\"muted\">{_e(m['unit'])} "
                       f"{'↑' if m['better'] == 'higher' else '↓'}</span></th>" for m in ms)
        out.append(f"<h3>{_e(title)}</h3><table><tr><th>source</th>{head}</tr>")
        for c in cols:
            cells = []
            for m in ms:
                cls = ["num"]
                best = c["source"] in m["best"]
                if best:
                    cls.append("best")
                if c["kind"] == "baseline":
                    cls.append("base")
                cells.append(f'<td class="{" ".join(cls)}">{fmt(m["values"].get(c["source"]))}{" ★" if best else ""}</td>')
            name = f"<b>{_e(c['source'])}</b>" if c["kind"] == "observed" else _e(c["source"])
            out.append(f"<tr><td>{name}</td>{''.join(cells)}</tr>")
        out.append("</table>")
    params = [(c["source"], c.get("params")) for c in cols if c.get("params")]
    if params:
        items = "".join(f"<li><b>{_e(s)}</b>: <code>{_e(p)}</code></li>" for s, p in params)
        out.append(f"<details><summary>scheduler parameters of these replays</summary><ul>{items}</ul></details>")
    return "".join(out)


# The scheduler an input is taken to be made with when it does not say (`workbench.report.made_with`
# reads a lab run's results.json and a scenario's scheduler): Linux's default.
MADE_WITH = DEFAULT_SCHEDULER
# The scheduler the real kernel runs beside the model (`pipeline._kernel_rows`): upstream's default.
KERNEL_SCHEDULER = "upstream"
_TRUST_KEYS = ["goodput_mbps", "completion_s", "ooo_p50_ms", "ooo_p95_ms", "ooo_mean_ms"]


def _trust_table(data: dict[str, Any], made_with: str = MADE_WITH, source: str | None = None) -> str:
    """How far to trust the replayed rows: the model's replay of the scheduler the capture was made
    with (``made_with``; ``source`` says where the input says so, None = assumed) against the observed
    run, and the model's upstream replay against the real kernel (which ran upstream on the same
    experiment), per headline metric. Empty without a reference to compare with; one line when the
    capture's own scheduler was not replayed."""
    kinds = {c["source"]: c["kind"] for c in data["columns"]}
    replayed = {s for s, k in kinds.items() if k == "scheduler"}
    observed = kinds.get("observed") == "observed"
    has_obs = observed and made_with in replayed
    has_kernel = kinds.get("kernel") == "kernel" and KERNEL_SCHEDULER in replayed
    said = (f"the scheduler the capture was made with, from {_e(source)}" if source is not None else
            "Linux's default scheduler, assumed to have made the capture: the input does not say which did")
    if not (has_obs or has_kernel):
        if observed and replayed:
            return (f'<p class="cap">How far to trust these rows: the capture\'s own scheduler, <b>{_e(made_with)}'
                    f"</b> ({said}), was not replayed; add it to the schedulers to compare it with what was "
                    "observed.</p>")
        return ""

    def err(a: Any, b: Any) -> tuple[str, str]:
        if not (isinstance(a, int | float) and isinstance(b, int | float)):
            return "–", "–"
        e = a - b
        return fmt(e), (f"{e / abs(b) * 100:+.1f} %" if b else "–")

    # One model column per reference scheduler: the capture's own against the observed run, upstream
    # against the kernel (the same column when they are one scheduler).
    models = list(dict.fromkeys([*([made_with] if has_obs else []), *([KERNEL_SCHEDULER] if has_kernel else [])]))
    label = {m: "model" if len(models) == 1 else f"model ({m})" for m in models}
    head = (["metric", "unit"] + (["observed"] if has_obs else []) + [label[m] for m in models]
            + (["kernel"] if has_kernel else []))
    if has_obs:
        head += [f"{label[made_with]} − observed", "%"]
    if has_kernel:
        head += [f"{label[KERNEL_SCHEDULER]} − kernel", "%"]
        if has_obs and made_with == KERNEL_SCHEDULER:
            head += ["kernel − observed", "%"]
    rows = []
    for m in data["table"]:
        if m["key"] not in _TRUST_KEYS:
            continue
        v = m["values"]
        o, k = v.get("observed"), v.get("kernel")
        cells = ([_e(m["label"]), _e(m["unit"])] + ([fmt(o)] if has_obs else []) + [fmt(v.get(x)) for x in models]
                 + ([fmt(k)] if has_kernel else []))
        if has_obs:
            cells += list(err(v.get(made_with), o))
        if has_kernel:
            cells += list(err(v.get(KERNEL_SCHEDULER), k))
            if has_obs and made_with == KERNEL_SCHEDULER:
                cells += list(err(k, o))
        num = ' class="num"'
        rows.append("<tr>" + "".join(f"<td{num if i >= 2 else ''}>{c}</td>" for i, c in enumerate(cells)) + "</tr>")
    if not rows:
        return ""
    parts = []
    if has_obs:
        parts.append(f"The model's replay of <b>{_e(made_with)}</b> ({said}) against what was observed.")
    if has_kernel:
        parts.append(f"The model's replay of <b>{KERNEL_SCHEDULER}</b> against the real Linux kernel running it on "
                     "the same experiment (network namespaces, workbench lab).")
    return ("<h3>How far to trust these rows</h3><p class=\"cap\">" + " ".join(parts) + " The other rows share "
            "these timelines and settings: expect errors of this size in them too.</p>"
            "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>")


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
    parts.append('<p class="cap">★ = best among the replayed schedulers that delivered data (same path timelines, '
                 "same workload, same seed); the arrow says whether lower or higher is better; completion time "
                 "is compared only for finite transfers. The observed row is the real run, baseline rows are "
                 "single-path TCP on each path alone (grey).</p>")
    made = result.get("made_with") or {}
    parts.append(_trust_table(data, made.get("scheduler") or MADE_WITH, made.get("source")))
    parts.append(_metrics_table(data))
    for fig_id, caption, fig in figures:
        div = pio.to_html(_plotly_dict(fig), validate=False, full_html=False, include_plotlyjs=False,
                          div_id=f"fig-{fig_id}", config={"displaylogo": False, "responsive": True})
        parts.append(f'<div class="fig" id="sec-{fig_id}">{div}<p class="cap">{_e(caption)}</p></div>')
    parts.append("</body></html>\n")
    return "\n".join(parts)


def with_page(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (`run_job`'s) with its page (``page_html``; None for an input without one) and
    figure count, and without the figure data the page was drawn from. Called where the input ran
    (a worker process, the report's input thread): each runs its own inputs' pages, and the report
    process, which only writes them, is left free."""
    from workbench.report.figures import build_figures

    result["page_html"] = None
    if result["status"] != "error" and result.get("figures") is not None:
        figs = build_figures(result["figures"])
        result["n_figures"] = len(figs)
        result["page_html"] = input_page(result, figs)
    result["figures"] = None  # not needed once the page is made
    return result


def _plotly_dict(fig: Any) -> dict[str, Any]:
    """What ``fig.to_dict()`` gives (the figure's own trace and layout dicts, numpy arrays as plotly's
    base64 typed arrays), without its deep copy of every list (most of a page's cost): dicts are
    copied, lists of plain values (the long ones) shared, and the figure is left as it was. Reads
    the figure's ``_data`` / ``_layout`` (plotly's own storage behind `to_dict`);
    `tests/test_report_figures.py` holds the page's divs to ``pio.to_html(fig)`` byte for byte."""
    from _plotly_utils.utils import is_homogeneous_array, is_skipped_key, to_typed_array_spec

    def typed(obj: Any) -> Any:
        """plotly's ``convert_to_base64`` as a copy: a dict's numpy-array values (not under a skipped
        key) become typed-array specs; lists and tuples are walked for dicts."""
        if isinstance(obj, dict):
            return {k: v if is_skipped_key(k) else to_typed_array_spec(v) if is_homogeneous_array(v) else typed(v)
                    for k, v in obj.items()}
        if isinstance(obj, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in obj):
            return type(obj)(typed(v) for v in obj)
        return obj

    return {"data": typed(fig._data), "layout": typed(fig._layout)}


def index_page(rows: Sequence[dict[str, Any]], summary: dict[str, dict[str, int]], metric_labels: dict[str, str],
               skipped: Sequence[dict[str, str]], header: dict[str, Any]) -> str:
    """The index: one row per input (key figures, link or one-line error), the cross-input wins
    table, skipped files and links to the machine-readable tables."""
    parts = [_head("workbench report", with_plotly=False), "<body>", "<h1>MPTCP trace-replay report</h1>",
             f"<p class=\"muted\">{_e(header.get('n_ok', 0))} of {_e(len(rows))} inputs replayed · schedulers: "
             f"{_e(', '.join(header.get('schedulers', [])))} · seed {_e(header.get('seed'))} · "
             '<a href="metrics.csv">metrics.csv</a> (tidy: input × source × path × metric, with units) · '
             '<a href="metrics_wide.csv">metrics_wide.csv</a> · <a href="metrics.parquet">metrics.parquet</a> · '
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
        metrics = list(summary)
        parts.append("<h2>Which scheduler wins how often</h2>")
        parts.append('<p class="cap">Number of inputs on which each scheduler had the best value of the metric '
                     "among the replayed schedulers that delivered data (ties count for each tied scheduler); "
                     "completion time counts only finite transfers.</p>")
        best = {m: max(summary[m].values()) if summary[m] else 0 for m in metrics}
        head = "".join(f"<th>{_e(metric_labels.get(m, m))}</th>" for m in metrics)
        parts.append(f"<table><tr><th>scheduler</th>{head}</tr>")
        for sched in scheds:
            cells = "".join(
                f'<td class="num{" best" if summary[m].get(sched, 0) == best[m] and best[m] > 0 else ""}">'
                f"{summary[m].get(sched, 0)}</td>" for m in metrics)
            parts.append(f"<tr><td>{_e(sched)}</td>{cells}</tr>")
        parts.append("</table>")
    if skipped:
        items = "".join(f"<li><code>{_e(s['path'])}</code>: {_e(s['reason'])}</li>" for s in skipped)
        parts.append(f"<details><summary>{len(skipped)} files skipped in folders</summary><ul>{items}</ul></details>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
