"""Figure data and the comparison table of report pages (pure functions, no files)."""

from __future__ import annotations

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


def test_every_figure_is_valid_plotly() -> None:
    """`build_figures` builds its figures without plotly's per-property validation (for speed): here
    every figure goes through it, so a misspelt property or a wrong value type fails."""
    import plotly.graph_objects as go
    import pytest

    rows = [{"source": "observed", "kind": "observed", "share_wifi": 0.7, "share_lte": 0.3},
            {"source": "minrtt", "kind": "scheduler", "share_wifi": 0.6, "share_lte": 0.4}]
    data = page_figure_data([_source("observed", "observed"), _source("minrtt", "scheduler")], rows, None,
                            paths=["wifi", "lte"])
    figs = build_figures(data)
    assert len(figs) == 6
    for fid, _, fig in figs:
        checked = go.Figure(fig.to_dict())  # validates every property, raises ValueError on a bad one
        assert checked.to_plotly_json() == fig.to_plotly_json(), fid
    bad = build_figures(data)[0][2].to_dict()
    bad["data"][0]["line"]["colour"] = "red"
    with pytest.raises(ValueError):
        go.Figure(bad)
