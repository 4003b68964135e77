"""Figure data and the comparison table of report pages (pure functions, no files)."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.report.figures import METRICS, build_figures, page_figure_data, thin, winners


def test_thin_keeps_peaks_and_bounds_points() -> None:
    t = [i * 0.001 for i in range(10_000)]
    v = [0.0] * 10_000
    v[5_000] = 99.0
    tt, vv = thin(t, v, 100, "max")
    assert len(tt) <= 101 and max(vv) == 99.0 and tt[0] == 0.0
    tm, vm = thin(t, [1.0] * 10_000, 50, "mean")
    assert len(tm) <= 51 and all(x == 1.0 for x in vm)
    assert thin([0.0, 1.0], [3.0, 4.0], 10) == ([0.0, 1.0], [3.0, 4.0])


def test_winners_among_schedulers_only_with_ties() -> None:
    rows = [{"source": "observed", "kind": "observed", "goodput_mbps": 99.0, "ooo_p95_ms": 0.0},
            {"source": "a", "kind": "scheduler", "goodput_mbps": 10.0, "ooo_p95_ms": 5.0},
            {"source": "b", "kind": "scheduler", "goodput_mbps": 12.0, "ooo_p95_ms": 5.0},
            {"source": "c", "kind": "scheduler", "goodput_mbps": None, "ooo_p95_ms": 7.0},
            {"source": "baseline:x", "kind": "baseline", "goodput_mbps": 50.0, "ooo_p95_ms": 0.0}]
    assert winners(rows, "goodput_mbps", "higher") == ["b"]
    assert winners(rows, "ooo_p95_ms", "lower") == ["a", "b"]
    assert winners(rows, "missing", "lower") == []


def test_every_metric_says_which_direction_is_better() -> None:
    assert all(b in ("lower", "higher") for *_, b in METRICS)
    better = {k: b for k, _, _, b in METRICS}
    assert better["goodput_mbps"] == "higher" and better["ooo_p95_ms"] == "lower"
    assert better["aggregation_benefit"] == "higher"


def _source(name: str, kind: str) -> dict:
    s = {"source": name, "kind": kind, "ooo_cdf": {"delay_ms": [0.0, 5.0], "cdf": [0.5, 1.0]},
         "goodput": {"t_s": [0.0, 0.1], "mbps": [1.0, 2.0]}, "ooo_queue": {"t_s": [0.0, 0.1], "bytes": [0.0, 10.0]}}
    if kind == "scheduler":
        s["free_cwnd"] = {"t_s": [0.0, 0.1], "segments": [1.0, 2.0], "path": "wifi"}
        s["buffers"] = {"t_snd_s": [0.0], "snd_bytes": [1.0], "t_rcv_s": [0.0], "rcv_bytes": [2.0]}
    return s


def test_page_data_and_figures() -> None:
    rows = [{"source": "observed", "kind": "observed", "goodput_mbps": 3.0, "share_wifi": 0.7, "share_lte": 0.3},
            {"source": "minrtt", "kind": "scheduler", "goodput_mbps": 4.0, "share_wifi": 0.6, "share_lte": 0.4}]
    data = page_figure_data([_source("observed", "observed"), _source("minrtt", "scheduler")], rows, None)
    assert data["shares"]["observed"] == {"wifi": 0.7, "lte": 0.3}
    gp = next(m for m in data["table"] if m["key"] == "goodput_mbps")
    assert gp["best"] == ["minrtt"] and gp["values"]["observed"] == 3.0
    assert not any(m["key"] == "ooo_p95_ms" for m in data["table"])  # no values: no row
    ids = [fid for fid, _, _ in build_figures(data)]
    assert ids == ["ooo_cdf", "goodput", "burstiness", "share", "ooo_queue", "buffers"]
    # Observed only (no replay): no burstiness / buffer figures.
    only = page_figure_data([_source("observed", "observed")], rows[:1], None)
    assert [fid for fid, _, _ in build_figures(only)] == ["ooo_cdf", "goodput", "share", "ooo_queue"]


def _capture_view(paths: list[str]) -> dict:
    """`capture_view_data`'s shape: the last path carried nothing (its panels say so)."""
    full = {"seq": {"t_s": [0.0, 0.1], "dsn_mb": [0.0, 0.1]}, "retrans": {"t_s": [0.05], "dsn_mb": [0.0]},
            "reinject": {"t_s": [0.07], "dsn_mb": [0.05]}, "throughput": {"t_s": [0.0, 0.1], "mbps": [8.0, 9.0]},
            "rtt": {"t_s": [0.0], "ms": [20.0]}, "owd": {"t_s": [0.01], "ms": [10.0]},
            "ooo": {"t_s": [0.1], "ms": [1.5]},
            "timeline": {"t_s": [0.0, 0.2], "capacity_mbps": [10.0, 10.0], "owd_ms": [None, None]}}
    empty = {k: ({kk: [] for kk in v} if isinstance(v, dict) else None) for k, v in full.items()}
    truth = [{"path": paths[0], "kind": "rate", "t_s": [0.0, 1.0], "value": [9.0, 9.0], "label": "rate1.csv"},
             {"path": paths[0], "kind": "delay", "t_s": [0.0, 1.0], "value": [10.0, 10.0], "label": "owd1.csv"}]
    return {"paths": paths, "per_path": {p: full if i < len(paths) - 1 else empty for i, p in enumerate(paths)},
            "truth": truth, "point": "snd", "data_dir": "s2c"}


def _timelines():  # type: ignore[no-untyped-def]
    from workbench.timeline import PathTimeline, Timelines

    return Timelines([PathTimeline.constant("wifi", capacity_down_bps=2e7, owd_down_ns=10_000_000, loss_down=0.0),
                      PathTimeline.constant("lte", capacity_down_bps=1e7, capacity_up_bps=5e6, kind="throughput")])


def _misspelt(fig_dict: dict) -> list[dict]:
    """Copies of the figure, each with one property misspelt: in a trace (if any) or in the layout."""
    import copy

    out = []
    if fig_dict["data"]:
        bad = copy.deepcopy(fig_dict)
        tr = bad["data"][0]
        tr["line" if "line" in tr else "marker"]["colour"] = "red"
        out.append(bad)
    bad = copy.deepcopy(fig_dict)
    bad["layout"]["xaxis"]["rangemod"] = "tozero"
    out.append(bad)
    return out


def _every_figure() -> list[tuple[str, Any]]:
    """Every figure a report page shows (one of each), and the timeline and capture-view figures
    the app shows on their own."""
    from workbench.report.capture_views import capture_view_figure
    from workbench.timeline import timeline_figure

    rows = [{"source": "observed", "kind": "observed", "share_wifi": 0.7, "share_lte": 0.3},
            {"source": "minrtt", "kind": "scheduler", "share_wifi": 0.6, "share_lte": 0.4}]
    data = page_figure_data([_source("observed", "observed"), _source("minrtt", "scheduler")], rows,
                            timeline_figure(_timelines()).to_json(), paths=["wifi", "lte"])
    data["capture_view"] = _capture_view(["wifi", "lte"])
    figs = build_figures(data)
    assert [fid for fid, _, _ in figs] == ["timelines", "capture", "ooo_cdf", "goodput", "burstiness", "share",
                                           "ooo_queue", "buffers"]
    others = [("timeline_figure", timeline_figure(_timelines(), title="t")),
              ("capture_view_figure, 3 paths", capture_view_figure(_capture_view(["a", "b", "c"]), title="")),
              ("capture_view_figure, no path", capture_view_figure(_capture_view(["a"]) | {"paths": []}))]
    return [(fid, fig) for fid, _, fig in figs] + others


def test_every_figure_is_valid_plotly() -> None:
    """The report's figures are built without plotly's per-property validation (for speed): plain
    line and bar figures (`_figure`), the multi-panel ones from a `subplot_layout` grid (buffers,
    capture views, path timelines) and the timelines figure read back from its JSON. Here every
    figure goes through it, so a misspelt property or a wrong value type fails."""
    import plotly.graph_objects as go
    import pytest

    for fid, fig in _every_figure():
        checked = go.Figure(fig.to_dict())  # validates every property, raises ValueError on a bad one
        assert checked.to_plotly_json() == fig.to_plotly_json(), fid
        for bad in _misspelt(fig.to_dict()):
            with pytest.raises(ValueError):
                go.Figure(bad)


def test_page_divs_are_plotly_to_html() -> None:
    """A page writes each figure's div from the figure's own dicts (`html._plotly_dict`, no deep
    copy): byte for byte what ``pio.to_html(fig)`` writes, for every figure of a page and for numpy
    arrays anywhere plotly converts them to typed arrays (a trace's columns, nested in a marker, in
    a list of annotations; not under a skipped key such as an axis range)."""
    import numpy as np
    import plotly.graph_objects as go
    import plotly.io as pio

    from workbench.report.html import _plotly_dict

    arrays = go.Figure(data=[{"type": "scatter", "x": np.arange(6, dtype=np.int64), "y": np.linspace(0, 1, 6),
                              "marker": {"color": np.array([3, 1, 2, 3, 1, 2], dtype=np.uint8)},
                              "customdata": [[1, 2], [3, 4]], "text": ("a", "b")}],
                       layout={"xaxis": {"range": np.array([0.0, 5.0])},
                               "annotations": [{"text": "n", "x": 1.0, "y": 0.5}],
                               "shapes": [{"type": "path", "path": "M 0 0 L 1 1", "line": {"width": 2}}]},
                       _validate=False)
    kw: dict[str, Any] = {"full_html": False, "include_plotlyjs": False, "div_id": "fig-x",
                          "config": {"displaylogo": False, "responsive": True}}
    for fid, fig in [*_every_figure(), ("numpy arrays", arrays)]:
        before = fig.to_json()
        assert pio.to_html(_plotly_dict(fig), validate=False, **kw) == pio.to_html(fig, **kw), fid
        assert fig.to_json() == before, fid  # the figure itself is left as it was
    assert '"bdata"' in pio.to_html(_plotly_dict(arrays), validate=False, **kw)


@pytest.mark.parametrize(("rows", "cols", "vs", "hs"), [(2, 1, 0.08, None), (3, 1, 0.06, None), (4, 1, 0.05, 0.06),
                                                        (4, 2, 0.05, 0.06), (4, 5, 0.05, 0.06), (3, 7, 0.1, 0.02)])
def test_subplot_grid_is_make_subplots(rows: int, cols: int, vs: float, hs: float | None) -> None:
    """The multi-panel figures lay out their grid as ``make_subplots(shared_xaxes=True)`` does, to
    the last bit of every domain, and keep its grid: traces added by row and column land on the
    same axes."""
    import json

    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from workbench._plot_grid import grid_figure, subplot_layout

    titles = [f"title {i}" if i != 1 else "" for i in range(rows * cols)]
    want = make_subplots(rows=rows, cols=cols, shared_xaxes=True, vertical_spacing=vs, horizontal_spacing=hs,
                         subplot_titles=titles)
    layout, refs = subplot_layout(rows, cols, vertical_spacing=vs, horizontal_spacing=hs, subplot_titles=titles)
    got = grid_figure([], {**layout, "template": want.layout.template}, refs)
    assert json.dumps(got.to_plotly_json(), sort_keys=True) == json.dumps(want.to_plotly_json(), sort_keys=True)
    assert got._grid_ref == want._grid_ref and got._grid_str == want._grid_str
    for fig in (got, want):
        fig.add_trace(go.Scatter(x=[0], y=[1]), row=rows, col=cols)
        fig.update_xaxes(title_text="t", row=rows, col=1)
    assert json.dumps(got.to_plotly_json(), sort_keys=True) == json.dumps(want.to_plotly_json(), sort_keys=True)
