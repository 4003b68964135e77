"""What a report page shows, in two layers:

* figure data (pure, plain Python lists): per source (observed, each scheduler) the series the
  metrics package computes — OOO-delay CDF (`ooo_cdf`), goodput over time (`goodput_series`),
  receive OOO-queue occupancy (`ooo_queue_series`), free cwnd of the fast subflow at each ACK
  (`free_cwnd_series`, STMS burstiness), send/receive buffer occupancy (`buffer_series`) — plus the
  per-path shares from the summary rows. Built in the worker; thinned for display only (a page with
  5 sources x 30 000 points per series would not load). Times are seconds from the connection start.
* plotly figures built from that data in the parent (`build_figures`), and the comparison table
  (`METRICS`: which metrics, their unit and whether lower or higher is better; `winners`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import plotly.graph_objects as go
    import polars as pl

    from workbench.metrics import Prepared

__all__ = ["METRICS", "OBSERVED_COLOR", "SourceData", "applies", "build_figures", "delivered", "page_figure_data",
           "path_colors", "scheduler_color", "source_data", "thin", "tidy_panels", "winners"]

SourceData = dict[str, Any]
Better = Literal["lower", "higher"]

# (summary key, label, unit, which direction is better). Order = order in the page table.
METRICS: list[tuple[str, str, str, Better]] = [
    ("goodput_mbps", "Goodput", "Mbit/s", "higher"),
    ("completion_s", "Completion time", "s", "lower"),
    ("aggregation_benefit", "Aggregation benefit vs best single path (Kaspar's B)", "[-1, 1]", "higher"),
    ("ooo_mean_ms", "OOO delay, mean", "ms", "lower"),
    ("ooo_p50_ms", "OOO delay, p50", "ms", "lower"),
    ("ooo_p95_ms", "OOO delay, p95", "ms", "lower"),
    ("ooo_p99_ms", "OOO delay, p99", "ms", "lower"),
    ("ooo_max_ms", "OOO delay, max", "ms", "lower"),
    ("ooo_fraction", "Segments that waited in the OOO queue", "fraction", "lower"),
    ("ooo_queue_max_bytes", "Receive OOO queue, max", "bytes", "lower"),
    ("app_delay_mean_ms", "Application delay (write → read), mean", "ms", "lower"),
    ("app_delay_p95_ms", "Application delay, p95", "ms", "lower"),
    ("free_cwnd_mean_segments", "Free cwnd of the fast subflow at ACKs, mean", "segments", "lower"),
    ("free_cwnd_peak_segments", "Free cwnd of the fast subflow, peak", "segments", "lower"),
    ("burst_segments_mean", "Back-to-back send burst, mean", "segments", "lower"),
    ("burst_segments_max", "Back-to-back send burst, max", "segments", "lower"),
    ("retrans", "Subflow retransmissions", "segments", "lower"),
    ("reinjections", "MPTCP reinjections", "segments", "lower"),
    ("redundant_fraction", "Redundant bytes", "fraction", "lower"),
    ("snd_buf_max_bytes", "Send buffer, max", "bytes", "lower"),
    ("rcv_buf_max_bytes", "Receive buffer, max", "bytes", "lower"),
]
# The metrics the index's cross-input summary counts wins on.
SUMMARY_METRICS = ["goodput_mbps", "completion_s", "ooo_p95_ms", "ooo_mean_ms", "app_delay_p95_ms",
                   "free_cwnd_mean_segments", "aggregation_benefit"]


def thin(t: Sequence[float], v: Sequence[float], max_points: int, how: Literal["max", "mean"] = "max"
         ) -> tuple[list[float], list[float]]:
    """At most ~``max_points`` points of a time series for display: per equal time bucket the first
    time and the max (keeps peaks, for queue occupancy) or the mean of the values."""
    import numpy as np

    if len(t) <= max_points:
        return [float(x) for x in t], [float(x) for x in v]
    ta, va = np.asarray(t, dtype=float), np.asarray(v, dtype=float)
    edges = np.linspace(ta[0], ta[-1], max_points + 1)
    starts = np.unique(np.searchsorted(ta, edges[:-1], side="left"))
    starts = starts[starts < len(ta)]
    if how == "max":
        vals = np.maximum.reduceat(va, starts)
    else:
        sums = np.add.reduceat(va, starts)
        counts = np.diff(np.append(starts, len(va)))
        vals = sums / counts
    return ta[starts].tolist(), vals.tolist()


def _s(t_ns: pl.Series, origin_ns: int) -> list[float]:
    return ((t_ns - origin_ns).cast(float) / 1e9).to_list()


def source_data(source: str, kind: str, prep: Prepared, samples: pl.DataFrame | None,
                max_points: int) -> SourceData:
    """The figure series of one source (observed capture or one replay), as plain lists, drawn from
    the same `Prepared` connection its summary row came from."""
    from workbench.metrics import buffer_series, free_cwnd_series
    from workbench.metrics.ooo import cdf_from_segments
    from workbench.metrics.throughput import DEFAULT_BIN_NS, series_from_segments

    conn = prep.conn
    seg = prep.firsts
    # Captures carry epoch times: show seconds since the connection's first SYN. Replays start at 0.
    origin = 0
    if kind == "observed":
        st = prep.start
        origin = (int(st["start_ns"][0]) if st.height and st["start_ns"][0] is not None
                  else int(prep.events["t_ns"].min()))  # type: ignore[arg-type]
    out: SourceData = {"source": source, "kind": kind}
    cdf = cdf_from_segments(seg, max_points=max_points)
    out["ooo_cdf"] = {"delay_ms": cdf["delay_ms"].to_list(), "cdf": cdf["cdf"].to_list()}
    gp = series_from_segments(seg, prep.start, DEFAULT_BIN_NS)
    out["goodput"] = {"t_s": _s(gp["t_ns"], origin), "mbps": (gp["rate_bps"] / 1e6).to_list()}
    q = prep.ooo_queue
    t, v = thin(_s(q["t_ns"], origin), q["ooo_bytes"].cast(float).to_list(), max_points, "max")
    out["ooo_queue"] = {"t_s": t, "bytes": v}
    if samples is not None and samples.height:
        fc = free_cwnd_series(samples, conn)
        t, v = thin(_s(fc["t_ns"], 0), fc["free_cwnd_segments"].to_list(), max_points, "mean")
        out["free_cwnd"] = {"t_s": t, "segments": v, "path": fc["path"][0] if fc.height else None}
        bs = buffer_series(samples, conn)
        ts = _s(bs["t_ns"], 0)
        t1, snd = thin(ts, bs["snd_buf_bytes"].cast(float).to_list(), max_points, "max")
        t2, rcv = thin(ts, bs["rcv_buf_bytes"].cast(float).to_list(), max_points, "max")
        out["buffers"] = {"t_snd_s": t1, "snd_bytes": snd, "t_rcv_s": t2, "rcv_bytes": rcv}
    return out


def delivered(row: dict[str, Any]) -> bool:
    """Whether a row delivered any data in order (a row that delivered nothing wins nothing: its
    OOO delay is empty, not small)."""
    v = row.get("delivered_bytes")
    if v is not None:
        return float(v) > 0
    g = row.get("goodput_mbps")
    return g is not None and float(g) > 0


def applies(metric: str, finite: bool | None) -> bool:
    """Whether ``metric`` means something for the workload: completion time only for a finite
    transfer (a bulk replay is cut at the duration cap, so its "completion" is the cap)."""
    return not (metric == "completion_s" and finite is False)


def winners(rows: Sequence[dict[str, Any]], metric: str, better: Better, *, finite: bool | None = None) -> list[str]:
    """Sources of the scheduler rows with the best value of ``metric`` (ties: all of them), among the
    rows that delivered data, and none when the metric does not apply to the workload (`applies`)."""
    if not applies(metric, finite):
        return []
    vals: list[tuple[Any, Any]] = [(r["source"], r.get(metric)) for r in rows
                                   if r.get("kind") == "scheduler" and delivered(r)]
    vals = [(s, float(v)) for s, v in vals if v is not None and v == v]
    if not vals:
        return []
    best = max(v for _, v in vals) if better == "higher" else min(v for _, v in vals)
    return [s for s, v in vals if v == best]


def page_figure_data(sources: Sequence[SourceData], rows: Sequence[dict[str, Any]],
                     timeline_json: str | None, *, finite: bool | None = None,
                     paths: Sequence[str] | None = None) -> dict[str, Any]:
    """Everything a page needs besides the metrics table: the per-source series, per-path shares
    per row, the timelines figure (plotly JSON) and the comparison table with winners marked
    (``finite``: whether the workload was a finite transfer, see `winners`). ``paths`` is the paths'
    order (primary first, as in the timelines figure), which fixes their colours."""
    shares: dict[str, dict[str, float]] = {}
    for r in rows:
        shares[r["source"]] = {k[len("share_"):]: float(v) for k, v in r.items()
                               if k.startswith("share_") and v is not None}
    table = []
    for key, label, unit, better in METRICS:
        if not any(r.get(key) is not None for r in rows) or not applies(key, finite):
            continue
        table.append({"key": key, "label": label, "unit": unit, "better": better,
                      "values": {r["source"]: r.get(key) for r in rows},
                      "best": winners(rows, key, better, finite=finite)})
    order = list(paths or [])
    order += sorted({p for sh in shares.values() for p in sh} - set(order))
    return {"sources": list(sources), "shares": shares, "timelines": timeline_json, "table": table,
            "columns": [{"source": r["source"], "kind": r["kind"], "params": r.get("params") or ""} for r in rows],
            "paths": order, "finite": finite}


# Distinct colours for up to 24 schedulers (plotly's Dark24 without its near-black first entry, which
# is the observed run's colour).
_PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
            "#bcbd22", "#7f7f7f", "#FB0D0D", "#0D2A63", "#AF0038", "#6C4516", "#1616A7", "#DA60CA",
            "#6C7C32", "#778AAE", "#862A16", "#A777F1", "#620042", "#DA16FF", "#222A2A", "#B68100"]
OBSERVED_COLOR = "#000000"


def scheduler_color(name: str) -> str:
    """One colour per scheduler, the same on every page and figure: built-in schedulers by their
    place in the registry (distinct), others (plug-ins, baselines) by a stable hash of the name."""
    import zlib

    try:
        from workbench.schedulers import available

        names = sorted(available())
    except Exception:  # the palette must not depend on the registry importing
        names = []
    if name in names:
        return _PALETTE[names.index(name) % len(_PALETTE)]
    return _PALETTE[zlib.crc32(name.encode()) % len(_PALETTE)]


def path_colors(paths: Sequence[str]) -> dict[str, str]:
    """Colours of the paths in their order (primary first): the ones the timelines figure uses
    (`workbench.timeline.timeline_figure`: plotly's qualitative palette by path order), so a path
    keeps its colour across every figure of a page."""
    from plotly.colors import qualitative

    pal = qualitative.Plotly
    return {p: pal[i % len(pal)] for i, p in enumerate(paths)}


def _colors(sources: Sequence[SourceData]) -> dict[str, str]:
    return {s["source"]: OBSERVED_COLOR if s["kind"] == "observed" else scheduler_color(s["source"])
            for s in sources}


def _layout_dict(title: str, x: str, y: str) -> dict[str, Any]:
    import plotly.io as pio

    # Every quantity drawn here is >= 0 (times, delays, rates, bytes): all zeros must not span -1..1.
    return {"title": {"text": title}, "template": pio.templates["plotly_white"], "height": 380,
            "margin": {"l": 60, "r": 20, "t": 50, "b": 50}, "legend": {"orientation": "h", "y": -0.2},
            "xaxis": {"title": {"text": x}, **({"rangemode": "tozero"} if x != "source" else {})},
            "yaxis": {"title": {"text": y}, "rangemode": "tozero"}}


def _figure(traces: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """A figure from plain trace and layout dicts, not validated property by property: plotly's
    validation (a deep copy of the template per figure, a check per point) was most of the cost of
    a report page. The dicts use only plotly's documented properties, and the tests validate every
    figure a page shows (`go.Figure(fig.to_dict())`)."""
    import plotly.graph_objects as go

    return go.Figure(data=traces, layout=layout, _validate=False)


def _figure_from_json(text: str) -> go.Figure:
    """A figure from plotly JSON this package wrote (`timeline_figure(...).to_json()`), as
    `pio.from_json` reads it but without validating every property again (see `_figure`)."""
    import json

    import plotly.graph_objects as go

    return go.Figure(json.loads(text), _validate=False)


def tidy_panels(fig: go.Figure) -> go.Figure:
    """A multi-panel figure without misleading axes: quantities that cannot be negative (rates,
    delays, loss) start at 0 (a constant 0 would otherwise be drawn on -1..1), and a panel with no
    data says so instead of standing empty."""
    axes = [k for k in fig.layout.to_plotly_json() if k.startswith("yaxis")]
    used: dict[str, bool] = {}
    for tr in fig.data:
        ref = "yaxis" + (str(tr.yaxis)[1:] if tr.yaxis and tr.yaxis != "y" else "")
        ys = [v for v in (tr.y or []) if v is not None]
        used[ref] = used.get(ref, False) or bool(ys)
    for ax in axes:
        fig.layout[ax].rangemode = "tozero"
        if not used.get(ax):
            dom = fig.layout[ax].domain or (0, 1)
            xref = "x" + ax[len("yaxis"):] + " domain" if ax != "yaxis" else "x domain"
            fig.add_annotation(text="not known for this input", xref=xref, yref="paper", x=0.5,
                               y=(dom[0] + dom[1]) / 2, showarrow=False, font={"color": "#777"})
            fig.layout[ax].showticklabels = False
    return fig


def build_figures(data: dict[str, Any]) -> list[tuple[str, str, go.Figure]]:
    """(figure id, caption, plotly figure) for each figure the page shows; figures without data are
    left out (a replay-less input has no burstiness or buffer figures)."""
    sources = data["sources"]
    color = _colors(sources)
    figs: list[tuple[str, str, go.Figure]] = []

    def width(s: SourceData) -> float:
        return 3.0 if s["kind"] == "observed" else 1.6

    if data.get("timelines"):
        # The timelines figure's JSON (`timeline_figure`, made where the timelines are): read back as
        # it was written, without validating it again (`pio.from_json` would, trace by trace).
        figs.append(("timelines", "Path timelines used for the replays: capacity, one-way delay and loss per "
                     "path (measured / estimated / assumed, see the hover text).",
                     tidy_panels(_figure_from_json(data["timelines"]))))

    cv = data.get("capture_view")
    if cv and cv.get("paths"):
        from workbench.report.capture_views import capture_view_figure

        figs.append(("capture", "The capture per path, as Wireshark's graphs show it: data sequence number over "
                     "time (retransmissions ×, reinjections ◆), RTT and one-way delay, throughput per 100 ms and "
                     "each segment's MPTCP-level out-of-order delay; the estimated timeline (dashed) and a lab "
                     "run's ground truth (dotted) drawn over them.", capture_view_figure(cv)))

    def lines(key: str, x: str, y: str, *, steps: bool = True) -> list[dict[str, Any]]:
        """One line per source that has series ``key`` (x values ``x``, y values ``y``)."""
        out = []
        for s in sources:
            d = s.get(key)
            if d and d[x]:
                name = f"{s['source']} ({d['path']})" if key == "free_cwnd" else s["source"]
                out.append({"type": "scatter", "x": d[x], "y": d[y], "name": name, "mode": "lines",
                            "line": {"color": color[s["source"]], "width": width(s),
                                     **({"shape": "hv"} if steps else {})}})
        return out

    traces = lines("ooo_cdf", "delay_ms", "cdf")
    if traces:
        figs.append(("ooo_cdf", "MPTCP-level out-of-order delay per segment (arrival → all lower DSNs "
                     "arrived), CDF; observed in black.",
                     _figure(traces, _layout_dict("OOO delay CDF", "OOO delay (ms)", "fraction of segments"))))

    traces = lines("goodput", "t_s", "mbps")
    if traces:
        figs.append(("goodput", "In-order bytes delivered to the application per 100 ms bin.",
                     _figure(traces, _layout_dict("Goodput over time", "time since connect (s)", "Mbit/s"))))

    traces = lines("free_cwnd", "t_s", "segments", steps=False)
    if traces:
        figs.append(("burstiness", "Burstiness (STMS §5.1.2): free cwnd (cwnd − in flight) of the fast subflow "
                     "at each ACK it receives; mean per display bucket. Replays only (a capture has no cwnd).",
                     _figure(traces, _layout_dict("Free cwnd of the fast subflow", "time since connect (s)",
                                                  "segments"))))

    shares = data.get("shares") or {}
    path_names = list(data.get("paths") or sorted({p for sh in shares.values() for p in sh}))
    pcolor = path_colors(path_names)
    if path_names:
        srcs = [c["source"] for c in data["columns"] if c["source"] in shares and shares[c["source"]]]
        bars = [{"type": "bar", "x": srcs, "y": [shares[s].get(p, 0.0) for s in srcs], "name": p,
                 "marker": {"color": pcolor[p]}} for p in path_names]
        figs.append(("share", "Share of the data-direction bytes each path carried (at the sender when it "
                     "was observed).", _figure(bars, {**_layout_dict("Per-path share", "source", "share of bytes"),
                                                      "barmode": "stack"})))

    traces = lines("ooo_queue", "t_s", "bytes")
    if traces:
        figs.append(("ooo_queue", "Receive-side MPTCP out-of-order queue (OTIAS Fig. 5): bytes arrived but "
                     "not yet deliverable in order; max per display bucket.",
                     _figure(traces, _layout_dict("Receive OOO-queue occupancy", "time since connect (s)",
                                                  "bytes"))))

    with_buf = [s for s in sources if s.get("buffers") and s["buffers"]["t_snd_s"]]
    if with_buf:
        from workbench._plot_grid import grid_figure, subplot_layout

        layout, refs = subplot_layout(2, 1, vertical_spacing=0.08, subplot_titles=(
            "send buffer (unacked + unsent)", "receive buffer (unread + out of order)"))
        (snd_x, snd_y), (rcv_x, rcv_y) = refs[0][0], refs[1][0]
        traces = []
        for s in with_buf:
            b = s["buffers"]
            line = {"color": color[s["source"]]}
            traces.append({"type": "scatter", "x": b["t_snd_s"], "y": b["snd_bytes"], "name": s["source"],
                           "mode": "lines", "legendgroup": s["source"], "line": line, "xaxis": snd_x, "yaxis": snd_y})
            traces.append({"type": "scatter", "x": b["t_rcv_s"], "y": b["rcv_bytes"], "name": s["source"],
                           "mode": "lines", "legendgroup": s["source"], "showlegend": False, "line": dict(line),
                           "xaxis": rcv_x, "yaxis": rcv_y})
        base = _layout_dict("Send / receive buffer occupancy", "", "bytes")
        # every axis starts at 0; the time axis is titled under the bottom panel only
        layout["xaxis"].update(title={"text": ""}, rangemode="tozero")
        layout["yaxis"].update(title={"text": "bytes"}, rangemode="tozero")
        layout["xaxis2"].update(rangemode="tozero", title={"text": "time since connect (s)"})
        layout["yaxis2"].update(rangemode="tozero")
        layout.update({k: v for k, v in base.items() if k not in ("xaxis", "yaxis")}, height=520)
        figs.append(("buffers", "Connection-level buffer occupancy sampled every 10 ms in the replays; max per "
                     "display bucket.", grid_figure(traces, layout, refs)))
    return figs

