"""The timeline figure: three rows (capacity, delay, loss) on one time axis, values as in the tables."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _paths import SHARED_TRACES

from workbench.timeline import PathTimeline, Timelines, read_mahimahi, read_ping, timeline_figure

TL = SHARED_TRACES / "timelines"


def test_figure_rows_and_values() -> None:
    mm = read_mahimahi(TL / "mahimahi" / "Verizon-LTE-short.down", TL / "mahimahi" / "Verizon-LTE-short.up")
    ping = read_ping(sorted((TL / "nuwins-ping" / "atnt").glob("*.out"))[0], name="atnt")
    tls = Timelines([mm, ping])
    fig = timeline_figure(tls)
    names = [t.name for t in fig.data]
    # mahimahi: capacity down + up; ping: owd down + up, loss down + up.
    assert names.count(f"{mm.name} down") == 1 and names.count(f"{mm.name} up") == 1  # legend once each
    by_axis: dict[str, list] = {}
    for t in fig.data:
        by_axis.setdefault(t.yaxis, []).append(t)
    assert sorted(by_axis) == ["y", "y2", "y3"]
    assert len(by_axis["y"]) == 2 and len(by_axis["y2"]) == 2 and len(by_axis["y3"]) == 2
    # Shared x: every row's x axis matches the bottom one.
    assert fig.layout.xaxis.matches == fig.layout.xaxis2.matches == "x3"
    cap = by_axis["y"][0]
    assert cap.line.shape == "hv"
    assert list(cap.y[:-1]) == pytest.approx([v / 1e6 for v in mm.steps["capacity_down_bps"].to_list()])
    assert cap.x[-1] == mm.end_ns / 1e9  # the last step drawn to the end
    owd = by_axis["y2"][0]
    want = [None if v is None else v / 1e6 for v in ping.steps["owd_down_ns"].to_list()]
    assert [v is None for v in owd.y[:-1]] == [v is None for v in want]
    assert [v for v in owd.y[:-1] if v is not None] == pytest.approx([v for v in want if v is not None])
    assert set(owd.customdata) <= {"estimated", None}


def test_figure_of_one_path_and_throughput_label() -> None:
    tl = PathTimeline.constant("x", capacity_down_bps=1e6, kind="throughput")
    fig = timeline_figure(tl)
    assert "throughput" in fig.layout.annotations[0].text
    assert fig.data[0].name == "x (throughput) down"


def test_plotly_only_imported_by_the_figure() -> None:
    # Importing the timeline package loads neither plotly nor the replay engine (imported on use).
    code = "import sys, workbench.timeline; print('plotly' in sys.modules, 'workbench.replay' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_figure_does_not_take_the_process_default_template() -> None:
    # Streamlit (the page) replaces plotly's default template with a theme of placeholder colours;
    # a figure written to a report file must not pick that up.
    import plotly.io as pio

    from workbench.timeline import read_rate_csv

    before = pio.templates.default
    try:
        pio.templates.default = "ggplot2"
        fig = timeline_figure(Timelines([read_rate_csv(SHARED_TRACES / "lab" / "v01" / "rate1.csv", kind="capacity")]))
    finally:
        pio.templates.default = before
    assert fig.layout.template.layout.plot_bgcolor == pio.templates["plotly"].layout.plot_bgcolor != \
        pio.templates["ggplot2"].layout.plot_bgcolor
