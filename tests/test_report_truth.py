"""What the report says is true (issue 15): wins only on metrics that apply to the workload and only
among rows that delivered data; one colour per scheduler everywhere and per path across figures; no
axis from -1 to 1 for a quantity that cannot be negative, no silently empty panel; tidy metrics with
units and paths split off; full page names."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from workbench.report.figures import (
    _colors,
    page_figure_data,
    path_colors,
    scheduler_color,
    tidy_panels,
    winners,
)
from workbench.report.tidy import split_path, tidy_metrics, unit_of, wide_metrics

ROOT = Path(__file__).resolve().parents[1]
C07 = ROOT / "traces" / "lab" / "c07"


def _row(source: str, **kw: float | None) -> dict[str, object]:
    return {"source": source, "kind": "scheduler", **kw}


def test_a_row_that_delivered_nothing_wins_nothing() -> None:
    rows = [_row("stalled", delivered_bytes=0, goodput_mbps=0.0, ooo_p95_ms=0.0),
            _row("a", delivered_bytes=10, goodput_mbps=5.0, ooo_p95_ms=30.0),
            _row("b", delivered_bytes=10, goodput_mbps=6.0, ooo_p95_ms=20.0)]
    assert winners(rows, "ooo_p95_ms", "lower") == ["b"]
    assert winners(rows, "goodput_mbps", "higher") == ["b"]
    assert winners([rows[0]], "ooo_p95_ms", "lower") == []


def test_completion_wins_only_for_finite_transfers() -> None:
    rows = [_row("a", delivered_bytes=10, completion_s=8.0), _row("b", delivered_bytes=10, completion_s=9.0),
            {"source": "observed", "kind": "observed", "delivered_bytes": 10, "completion_s": 8.5}]
    assert winners(rows, "completion_s", "lower", finite=False) == []
    assert winners(rows, "completion_s", "lower", finite=True) == ["a"]
    bulk = page_figure_data([], rows, None, finite=False)
    assert "completion_s" not in {m["key"] for m in bulk["table"]}
    fin = page_figure_data([], rows, None, finite=True)
    assert next(m for m in fin["table"] if m["key"] == "completion_s")["best"] == ["a"]


def test_one_colour_per_scheduler_on_every_page() -> None:
    from workbench.schedulers import available

    names = available()
    colours = [scheduler_color(n) for n in names]
    assert len(set(colours)) == len(names), "two schedulers share a colour"
    srcs = [{"source": n, "kind": "scheduler"} for n in names]
    one, other = _colors(srcs[:3]), _colors(list(reversed(srcs)))
    assert all(one[n] == other[n] for n in one), "a scheduler's colour depends on the page"
    assert _colors([{"source": "observed", "kind": "observed"}])["observed"] not in colours


def test_path_colours_match_the_timelines_figure() -> None:
    from workbench.capture import load
    from workbench.timeline import estimate_timelines, timeline_figure

    cap = load(C07 / "client.pcap", peer=C07 / "server.pcap", path_names={"10.0.1.1": "wifi", "10.0.2.1": "lte"})
    tls = estimate_timelines(cap.connection(cap.main_connection))
    fig = timeline_figure(tls)
    seen = {tr.name.split(" ")[0]: tr.line.color for tr in fig.data}
    assert path_colors(list(tls)) == {p: seen[p] for p in tls}
    # the share figure of a page takes the same colours, in the timelines' order (not sorted by name)
    from workbench.report.figures import build_figures

    data = page_figure_data([], [{"source": "observed", "kind": "observed", "share_wifi": 0.8, "share_lte": 0.2}],
                            None, paths=list(tls))
    share = next(f for i, _, f in build_figures(data) if i == "share")
    assert {tr.name: tr.marker.color for tr in share.data} == path_colors(list(tls))


def test_zero_loss_axis_starts_at_zero_and_empty_panels_say_so() -> None:
    fig = make_subplots(rows=3, cols=1)
    fig.add_trace(go.Scatter(x=[0, 1], y=[5, 6]), row=1, col=1)
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 0]), row=2, col=1)   # loss: all zero
    tidy_panels(fig)                                                # row 3: nothing at all
    assert fig.layout.yaxis2.rangemode == "tozero"
    texts = [a.text for a in fig.layout.annotations]
    assert texts.count("not known for this input") == 1


def test_tidy_metrics_split_paths_and_carry_units() -> None:
    paths = ["wifi", "lte", "wifi2"]
    assert split_path("share_wifi2", paths) == ("share", "wifi2")
    assert split_path("owd_p50_ms_lte_s2c", paths) == ("owd_p50_ms_s2c", "lte")
    assert split_path("goodput_mbps", paths) == ("goodput_mbps", "")
    assert [unit_of(m) for m in ("goodput_mbps", "ooo_p95_ms", "completion_s", "rcv_buf_max_bytes", "share",
                                 "retrans", "free_cwnd_mean_segments", "owd_p50_ms_s2c")] == [
        "Mbit/s", "ms", "s", "bytes", "fraction", "count", "segments", "ms"]
    rows = [{"input": "x", "input_id": "x", "source": "minrtt", "kind": "scheduler", "params": "p=1", "seed": 0,
             "goodput_mbps": 9.5, "share_wifi": 0.75, "share_lte": 0.25, "ooo_p95_ms": None, "rtt_method": "seq"}]
    t = tidy_metrics([(rows, ["wifi", "lte"])])
    got = {(r["metric"], r["path"]): (r["value"], r["unit"]) for r in t.iter_rows(named=True)}
    assert got == {("goodput_mbps", ""): (9.5, "Mbit/s"), ("share", "wifi"): (0.75, "fraction"),
                   ("share", "lte"): (0.25, "fraction"), ("ooo_p95_ms", ""): (None, "ms")}
    w = wide_metrics([(rows, ["wifi", "lte"])])
    assert w.row(0, named=True)["share_path1"] == 0.75 and w["path2_name"][0] == "lte"


def test_page_names_are_whole(tmp_path: Path) -> None:
    from workbench.report.jobs import discover

    long = tmp_path / ("elephant_" * 8 + "capture.pcap")
    long.write_bytes((C07 / "client.pcap").read_bytes()[:4096])
    jobs, _ = discover([long])
    assert jobs[0].id.endswith("capture.pcap") and "elephant_elephant" in jobs[0].id
    assert jobs[0].id.split("elephant")[0].rstrip("_").endswith(tmp_path.name)


@pytest.mark.parametrize("n", [3, 14])
def test_wins_table_has_a_row_per_scheduler(n: int) -> None:
    from workbench.report.html import index_page

    scheds = [f"s{i}" for i in range(n)]
    html = index_page([], {"goodput_mbps": dict.fromkeys(scheds, 1)}, {"goodput_mbps": "Goodput"}, [], {})
    table = html[html.index("Which scheduler"):]
    assert table.count("<tr>") == n + 1 and table.split("</tr>")[0].count("<th>") == 2


def test_page_shows_the_error_of_the_captures_own_scheduler() -> None:
    from workbench.report.html import _trust_table

    rows = [{"source": "observed", "kind": "observed", "delivered_bytes": 10, "goodput_mbps": 40.0, "ooo_p95_ms": 96.0},
            {"source": "upstream", "kind": "scheduler", "delivered_bytes": 10, "goodput_mbps": 38.0, "ooo_p95_ms": 22.0},
            {"source": "minrtt", "kind": "scheduler", "delivered_bytes": 10, "goodput_mbps": 39.0, "ooo_p95_ms": 20.0}]
    html = _trust_table(page_figure_data([], rows, None, finite=False))
    assert "How far to trust" in html and "<b>upstream</b>" in html
    assert "<td class=\"num\">-74</td><td class=\"num\">-77.1 %</td>" in html   # 22 - 96 ms
    assert "<td class=\"num\">-2</td><td class=\"num\">-5.0 %</td>" in html     # 38 - 40 Mbit/s
    assert _trust_table(page_figure_data([], rows[1:], None)) == ""             # nothing observed: no claim
