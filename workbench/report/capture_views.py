"""The capture the way Wireshark users look at it, one column per path, on one time axis:

* sequence over time (tcptrace / Wireshark "Stevens" graph): the data sequence number (DSN, MB) of
  every data segment, new data as dots, subflow retransmissions and MPTCP reinjections marked;
* delay over time: the RTT samples of the path and, with the peer capture, every segment's one-way
  delay, with the estimated timeline's one-way delay drawn over them;
* throughput over time: bytes of the path per 100 ms bin, with the estimated capacity drawn over it;
* MPTCP-level out-of-order delay of each segment over its arrival time (how long it waited for the
  lower DSNs of the other paths);
* optionally a ground-truth rate or delay file (what a lab applied) drawn over the matching row.

Two layers, as the report's other figures: `capture_view_data` (plain lists, computed where the
capture is, thinned for display) and `capture_view_figure` (plotly). Every series comes from the
metrics package (`ooo_segments`, `best_rtt_samples`) or straight off PacketEvents columns; nothing
is estimated here. Times are seconds since the connection's first packet; path colours are the
timelines figure's (`path_colors`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go
    import polars as pl

__all__ = ["BIN_NS", "capture_view_data", "capture_view_figure", "lab_truth", "read_truth"]

BIN_NS = 100_000_000
_ROWS = ["data sequence number (MB from the first seen)", "RTT / one-way delay (ms)", "throughput (Mbit/s)",
         "OOO delay (ms)"]


def _stride(n: int, max_points: int) -> int:
    return max(1, -(-n // max_points))


def _thin_rows(df: pl.DataFrame, max_points: int) -> pl.DataFrame:
    """Every k-th row (k so that at most ``max_points`` remain): display thinning, order kept."""
    k = _stride(df.height, max_points)
    return df if k == 1 else df.gather_every(k)


def read_truth(path: str | Path, *, path_name: str) -> dict[str, Any]:
    """A ground-truth file for the overlay: two columns, time in seconds and either a rate in Mbit/s
    (``t_s,rate_mbps``, as the lab's rate*.csv) or a one-way delay in ms (``t_s,owd_ms``)."""
    import polars as pl

    from workbench.errors import InputError

    p = Path(path)
    try:
        df = pl.read_csv(p)
    except (OSError, pl.exceptions.PolarsError) as e:
        raise InputError(p, f"not a readable CSV ({' '.join(str(e).split())[:120]})") from None
    cols = [c.strip().lower() for c in df.columns]
    if len(cols) < 2 or cols[0] not in ("t_s", "t", "time_s"):
        raise InputError(p, "a ground-truth file needs columns t_s and rate_mbps or owd_ms")
    kind = "rate" if "rate" in cols[1] else "delay" if ("owd" in cols[1] or "delay" in cols[1]) else None
    if kind is None:
        raise InputError(p, f"second column {df.columns[1]!r} is neither rate_mbps nor owd_ms")
    t = df[df.columns[0]].cast(pl.Float64).to_list()
    v = df[df.columns[1]].cast(pl.Float64).to_list()
    return {"path": path_name, "kind": kind, "t_s": t, "value": v, "label": p.name}


def lab_truth(folder: str | Path, paths: Sequence[str]) -> list[dict[str, Any]]:
    """The ground truth a lab run keeps beside its captures (``traces/lab/*/``): ``rate<N>.csv`` /
    ``delay<N>.csv`` / ``owd<N>.csv`` for path N (1 = the primary path), matched to ``paths`` in
    order; unreadable files are left out (the overlay is optional)."""
    import re

    from workbench.errors import InputError

    out = []
    for f in sorted(Path(folder).glob("*.csv")):
        m = re.fullmatch(r"(rate|delay|owd)(\d+)\.csv", f.name)
        if not m or not 1 <= int(m.group(2)) <= len(paths):
            continue
        try:
            out.append(read_truth(f, path_name=paths[int(m.group(2)) - 1]))
        except InputError:
            continue
    return out


def _timeline_overlay(tl: Any, origin_ns: int, data_dir: str = "s2c") -> dict[str, list[float | None]]:
    """Capacity and one-way delay of the data direction of an estimated timeline as step points
    (seconds since ``origin_ns``): "down" for a download, "up" for an upload (``data_dir`` c2s)."""
    d = "up" if data_dir == "c2s" else "down"
    steps = tl.steps
    t0 = int(tl.t0_epoch_ns or origin_ns)
    ts: list[float | None] = [(t0 + int(t) - origin_ns) / 1e9 for t in steps["t_ns"].to_list()]
    end = [(t0 + int(tl.end_ns) - origin_ns) / 1e9] if tl.end_ns is not None else []

    def col(name: str, scale: float) -> list[float | None]:
        vals = [None if v is None else float(v) * scale for v in steps[name].to_list()]
        return vals + (vals[-1:] if end else [])

    return {"t_s": ts + end, "capacity_mbps": col(f"capacity_{d}_bps", 1e-6), "owd_ms": col(f"owd_{d}_ns", 1e-6)}


def capture_view_data(events: pl.DataFrame, conn: int, *, timelines: Any = None,
                      truth: Sequence[Mapping[str, Any]] = (), max_points: int = 1500) -> dict[str, Any]:
    """Per path the series of the four rows (see the module docstring), plain lists."""
    import polars as pl

    from workbench.metrics.ooo import ooo_segments
    from workbench.metrics.rtt import best_rtt_samples

    ev = events.filter(pl.col("conn") == conn)
    data_rows = ev.filter(pl.col("payload_bytes") > 0)
    if data_rows.is_empty():
        return {"paths": [], "per_path": {}, "truth": list(truth), "point": None}
    up = int(data_rows.filter(pl.col("dir") == "c2s")["payload_bytes"].sum() or 0)
    down = int(data_rows.filter(pl.col("dir") == "s2c")["payload_bytes"].sum() or 0)
    data_dir = "c2s" if up > down else "s2c"
    data = data_rows.filter(pl.col("dir") == data_dir)
    # The sender's view shows what was sent (and re-sent); without it, what arrived.
    point = "snd" if (data["point"] == "snd").any() else "rcv"
    at = data.filter(pl.col("point") == point)
    origin = int(ev["t_ns"].min())  # type: ignore[arg-type]
    # DSNs from the first one seen (an export may start after the handshake: its DSNs would start
    # at hundreds of MB), the same origin for every path so they stay comparable.
    dsn0 = int(at["dsn"].min() or 0)  # type: ignore[arg-type]
    secs = ((pl.col("t_ns") - origin) / 1e9).alias("t_s")
    # Every path of the connection, data or not (a subflow that carried nothing is shown empty).
    order = list(timelines) if timelines is not None else []
    present = set(ev["path"].drop_nulls().unique().to_list())
    paths = [*[p for p in order if p in present], *sorted(present - set(order))]
    try:
        seg = ooo_segments(ev, conn)
    except Exception:  # no receiver rows: no OOO delay (said in the figure)
        seg = pl.DataFrame()
    rtt = best_rtt_samples(ev, conn)
    per: dict[str, Any] = {}
    for p in paths:
        a = at.filter(pl.col("path") == p).sort("t_ns")
        a = a.with_columns(secs, ((pl.col("dsn").cast(pl.Float64) - dsn0) / 1e6).alias("dsn_mb"),
                           pl.col("is_retrans").fill_null(False), pl.col("is_reinject").fill_null(False))
        new = _thin_rows(a.filter(~pl.col("is_retrans") & ~pl.col("is_reinject")), max_points)
        rtx = a.filter(pl.col("is_retrans"))
        rinj = a.filter(pl.col("is_reinject") & ~pl.col("is_retrans"))
        tput = (a.with_columns(((pl.col("t_ns") - origin) // BIN_NS).alias("bin"))
                .group_by("bin").agg(pl.col("payload_bytes").sum().alias("b")).sort("bin"))
        r = rtt.filter(pl.col("path") == p).sort("t_ns").with_columns(secs, (pl.col("rtt_ns") / 1e6).alias("ms"))
        r = _thin_rows(r, max_points)
        owd = (data.filter((pl.col("path") == p) & (pl.col("point") == "rcv") & pl.col("owd_ns").is_not_null())
               .sort("t_ns").with_columns(secs, (pl.col("owd_ns") / 1e6).alias("ms")))
        owd = _thin_rows(owd, max_points)
        entry: dict[str, Any] = {
            "seq": {"t_s": new["t_s"].to_list(), "dsn_mb": new["dsn_mb"].to_list()},
            "retrans": {"t_s": rtx["t_s"].to_list(), "dsn_mb": rtx["dsn_mb"].to_list()},
            "reinject": {"t_s": rinj["t_s"].to_list(), "dsn_mb": rinj["dsn_mb"].to_list()},
            "throughput": {"t_s": [b * BIN_NS / 1e9 for b in tput["bin"].to_list()],
                           "mbps": [b * 8 / (BIN_NS / 1e9) / 1e6 for b in tput["b"].to_list()]},
            "rtt": {"t_s": r["t_s"].to_list(), "ms": r["ms"].to_list()},
            "owd": {"t_s": owd["t_s"].to_list(), "ms": owd["ms"].to_list()},
            "ooo": {"t_s": [], "ms": []},
            "timeline": None,
        }
        if seg.height:
            o = _thin_rows(seg.filter(pl.col("path") == p).sort("t_arrival_ns").with_columns(
                ((pl.col("t_arrival_ns") - origin) / 1e9).alias("t_s"), (pl.col("ooo_delay_ns") / 1e6).alias("ms")
            ).drop_nulls("ms"), max_points)
            entry["ooo"] = {"t_s": o["t_s"].to_list(), "ms": o["ms"].to_list()}
        if timelines is not None and p in timelines:
            entry["timeline"] = _timeline_overlay(timelines[p], origin, data_dir)
        per[p] = entry
    return {"paths": paths, "per_path": per, "truth": [dict(t) for t in truth], "point": point,
            "data_dir": data_dir}


def capture_view_figure(data: Mapping[str, Any], *, title: str = "The capture, per path") -> go.Figure:
    """Four rows (sequence, delay, throughput, OOO delay) x one column per path, shared time axis.
    Built from plain dicts (`workbench._plot_grid.subplot_layout`), as ``make_subplots`` would
    lay it out, without plotly's per-property validation (most of the cost of thousands of points)."""
    import plotly.io as pio

    from workbench._plot_grid import grid_figure, subplot_layout
    from workbench.report.figures import path_colors

    paths = list(data["paths"])
    n = max(1, len(paths))
    layout, refs = subplot_layout(4, n, vertical_spacing=0.05, horizontal_spacing=0.06,
                                  subplot_titles=[f"{p}: {r}" for r in _ROWS for p in (paths or ["(no data)"])])
    color = path_colors(paths)
    traces: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    legend_once: set[str] = set()

    def add(trace: dict[str, Any], row: int, col: int, group: str) -> None:
        x, y = refs[row - 1][col - 1]
        traces.append({**trace, "legendgroup": group, "showlegend": group not in legend_once, "xaxis": x, "yaxis": y})
        legend_once.add(group)

    def markers(xs: list[float], ys: list[float], name: str, **marker: Any) -> dict[str, Any]:
        return {"type": "scattergl", "x": xs, "y": ys, "mode": "markers", "name": name, "marker": marker}

    def steps(xs: list[Any], ys: list[Any], name: str, **line: Any) -> dict[str, Any]:
        return {"type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": name, "line": {**line, "shape": "hv"}}

    def note(text: str, row: int, col: int) -> None:
        x, y = refs[row - 1][col - 1]
        notes.append({"font": {"color": "#777"}, "showarrow": False, "text": text, "x": 0.5,
                      "xref": f"{x} domain", "y": 0.5, "yref": f"{y} domain"})

    for j, p in enumerate(paths, start=1):
        d = data["per_path"][p]
        c = color[p]
        add(markers(d["seq"]["t_s"], d["seq"]["dsn_mb"], "data segment", color=c, size=3), 1, j, "data segment")
        add(markers(d["retrans"]["t_s"], d["retrans"]["dsn_mb"], "retransmission", color="#d62728", size=7,
                    symbol="x"), 1, j, "retransmission")
        add(markers(d["reinject"]["t_s"], d["reinject"]["dsn_mb"], "MPTCP reinjection", color="#ff7f0e", size=7,
                    symbol="diamond"), 1, j, "MPTCP reinjection")
        add(markers(d["rtt"]["t_s"], d["rtt"]["ms"], "RTT sample", color=c, opacity=0.6, size=3), 2, j, "RTT sample")
        add(markers(d["owd"]["t_s"], d["owd"]["ms"], "one-way delay (pair)", color="#2ca02c", opacity=0.6, size=3),
            2, j, "one-way delay (pair)")
        add(steps(d["throughput"]["t_s"], d["throughput"]["mbps"], "throughput", color=c), 3, j, "throughput")
        add(markers(d["ooo"]["t_s"], d["ooo"]["ms"], "OOO delay", color=c, size=3), 4, j, "OOO delay")
        tl = d.get("timeline")
        if tl:
            add(steps(tl["t_s"], tl["owd_ms"], "estimated timeline", color="#333", dash="dash"), 2, j,
                "estimated timeline")
            add(steps(tl["t_s"], tl["capacity_mbps"], "estimated timeline", color="#333", dash="dash"), 3, j,
                "estimated timeline")
        for t in data.get("truth") or []:
            if t["path"] != p:
                continue
            add(steps(t["t_s"], t["value"], f"ground truth ({t['label']})", color="#9467bd", dash="dot", width=2),
                3 if t["kind"] == "rate" else 2, j, f"ground truth ({t['label']})")
        if not d["seq"]["t_s"] and not d["retrans"]["t_s"] and not d["reinject"]["t_s"]:
            note("no data segments on this path", 1, j)
        if not d["ooo"]["t_s"]:
            note("no receiver-side rows: no OOO delay", 4, j)
        if not d["rtt"]["t_s"] and not d["owd"]["t_s"]:
            note("no delay samples", 2, j)
    layout["annotations"] += notes
    for r, row in enumerate(refs, start=1):
        for x, y in row:
            layout["xaxis" + x[1:]]["rangemode"] = "tozero"
            if r > 1:   # delays, rates: never below 0; the sequence row keeps its own range
                layout["yaxis" + y[1:]]["rangemode"] = "tozero"
            if r == len(refs):
                layout["xaxis" + x[1:]]["title"] = {"text": "time since the first packet (s)"}
    layout.update(title={"text": title}, template=pio.templates["plotly_white"], height=1000,
                  margin={"l": 60, "r": 20, "t": 70, "b": 50}, legend={"orientation": "h", "y": -0.08})
    return grid_figure(traces, layout, refs)
