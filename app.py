"""The workbench's Streamlit page: pick or upload a capture -> Overview -> Paths (timelines, what-if)
-> Replay (schedulers, workload, buffers; observed vs predicted) -> Tune -> Download.

Serve it with ``workbench ui`` (or ``streamlit run app.py``). This file holds the layout and the
widgets only: the work is done by library calls through `workbench.ui.work` (cached by content
hash), tables come from `workbench.ui.tables`, downloads from `workbench.ui.report`, tuning from
`workbench.ui.tuning`. Every tab runs inside `guard`, so a problem shows as one line, never a trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.io as pio
import streamlit as st

from workbench.capture import parse_path_names
from workbench.ui import tables, work
from workbench.ui.boundary import error_line, guard
from workbench.ui.uploads import UploadStore, max_upload_bytes

ROOT = Path(__file__).resolve().parent
TRACES = ROOT / "traces"
DEFAULT_TRACE = "lab/c07"
# AppTest cannot drive st.file_uploader: a test puts {"captures": [(name, bytes)], "peer": (name, bytes)
# | None} here and the page hands it to the very handler the uploader's callback uses.
TEST_UPLOAD_KEY = "wb_test_upload"
CAPTURE_TYPES = ["pcap", "pcapng", "cap", "csv"]
WORKLOADS = {"captured": "as captured (finite, the delivered bytes)", "bulk": "bulk for N seconds",
             "finite": "finite N bytes", "bursts": "bursts"}

st.set_page_config(page_title="MPTCP trace-replay workbench", layout="wide")
ss = st.session_state


# ------------------------------------------------------------------------------------------- input

def _store() -> UploadStore:
    if "wb_store" not in ss or ss.wb_store.closed:
        ss.wb_store = UploadStore(max_upload_bytes(streamlit_mb=st.get_option("server.maxUploadSize")))
    return ss.wb_store


def _accept(captures: list[tuple[str, Any]], peer: tuple[str, Any] | None) -> None:
    """What the uploader's callback (and the test hook) calls: store the files, remember the source."""
    ss.pop("wb_upload_error", None)
    try:
        up = _store().accept(captures, peer)
        ss.wb_upload = work.make_source(up.files, up.peer, up.label, names=up.names, digest=up.key)
    except Exception as e:
        ss.pop("wb_upload", None)
        ss.wb_upload_error = error_line(e)


def _on_upload() -> None:
    files = ss.get("up_capture") or []
    peer = ss.get("up_peer")
    if files:
        _accept([(f.name, f) for f in files], (peer.name, peer) if peer is not None else None)
    else:
        _store().clear()
        ss.pop("wb_upload", None)


def _input_source() -> work.Source | None:
    sb = st.sidebar
    sb.header("Input")
    # ?input=upload opens the page on the uploader (no bundled trace is read first).
    ss.setdefault("input_mode", "Upload" if st.query_params.get("input") == "upload" else "Bundled trace")
    mode = sb.radio("Source", ["Bundled trace", "Upload"], key="input_mode", horizontal=True)
    sb.text_input("Path names (ADDR=NAME, comma-separated)", key="path_names",
                  placeholder="10.0.1.1=wifi, 10.0.2.1=lte")
    names = parse_path_names([s for s in ss.get("path_names", "").replace(";", ",").split(",") if s.strip()])
    if mode == "Bundled trace":
        options = work.bundled_sources(TRACES)
        if not options:
            sb.warning(f"no bundled traces under {TRACES}")
            return None
        labels = list(options)
        default = next((i for i, label in enumerate(labels) if label.startswith(DEFAULT_TRACE)), 0)
        label = sb.selectbox("Trace", labels, index=default, key="bundled")
        files, peer = options[label]
        shown = {f: str(Path(f).relative_to(TRACES)) for f in [*files, *([peer] if peer else [])]}
        return work.make_source(files, peer, label, tuple(names.items()), names=shown)
    limit_mb = _store().max_bytes // (1024 * 1024)
    sb.file_uploader(f"Capture (pcap/pcapng) or tshark CSV exports of one connection (≤ {limit_mb} MB each)",
                     type=CAPTURE_TYPES, accept_multiple_files=True, key="up_capture", on_change=_on_upload)
    sb.file_uploader("Peer capture, the other end (optional)", type=["pcap", "pcapng", "cap"], key="up_peer",
                     on_change=_on_upload)
    injected = ss.pop(TEST_UPLOAD_KEY, None)
    if injected:
        _accept(list(injected["captures"]), injected.get("peer"))
    if ss.get("wb_upload_error"):
        st.error(ss.wb_upload_error)
        return None
    src: work.Source | None = ss.get("wb_upload")
    if src is not None and names:
        src = work.make_source(src.files, src.peer, src.label, tuple(names.items()), names=src.names,
                               digest=src.key)
    return src


# ---------------------------------------------------------------------------------------- the page

st.title("MPTCP trace-replay workbench")
source: work.Source | None = None
with guard(st.error):
    source = _input_source()
if source is None:
    if not ss.get("wb_upload_error"):
        st.info("Pick a bundled trace or upload a capture in the sidebar.")
    st.stop()

rename = source.rename
cap: Any = None
overview: dict[str, Any] = {}
with guard(st.error, rename), st.spinner("Reading the capture…"):
    cap, overview = work.load_source(source, ss.get(f"connection|{source.key[:16]}"))
if cap is None:
    st.stop()

conn_ids = [c["conn"] for c in overview["connections"]]
if len(conn_ids) > 1:
    st.sidebar.selectbox("Connection", conn_ids, index=conn_ids.index(overview["detail"]["conn"]),
                         key=f"connection|{source.key[:16]}", help="default: the busiest MPTCP connection")
conn = int(overview["detail"]["conn"])
st.caption(f"**{source.label}** · reader {overview['reader']} · connection {conn}")

t_over, t_paths, t_replay, t_tune, t_down = st.tabs(["Overview", "Paths", "Replay", "Tune", "Download"])

# ---------------------------------------------------------------------------------------- Overview
with t_over, guard(st.error, rename):
    m = overview["detail"]["metrics"]
    cols = st.columns(5)
    cols[0].metric("goodput", f"{m['goodput_mbps']:.2f} Mbit/s" if m.get("goodput_mbps") else "–")
    cols[1].metric("completion", f"{m['completion_s']:.3f} s" if m.get("completion_s") else "–")
    cols[2].metric("delivered", f"{m['delivered_bytes']:,} B" if m.get("delivered_bytes") else "–")
    cols[3].metric("OOO delay p50", f"{m['ooo_p50_ms']:.1f} ms" if m.get("ooo_p50_ms") is not None else "–")
    cols[4].metric("OOO delay p95", f"{m['ooo_p95_ms']:.1f} ms" if m.get("ooo_p95_ms") is not None else "–")
    if overview["detail"].get("ooo_note"):
        st.info(overview["detail"]["ooo_note"])
    st.subheader("Connections")
    st.dataframe(tables.connections_table(overview), hide_index=True)
    st.subheader(f"Subflows of connection {conn} (data {overview['detail']['data_dir']})")
    st.dataframe(tables.subflows_table(overview), hide_index=True)
    st.subheader("Per path")
    st.dataframe(tables.paths_table(overview), hide_index=True)
    owd = tables.owd_table(overview)
    if owd.height:
        st.subheader("One-way delay (from the pair)")
        st.dataframe(owd, hide_index=True)
    for w in overview["warnings"]:
        st.warning(rename(w))

# ------------------------------------------------------------------------------------------- Paths
tls: Any = None
tl_key = ""
edits: dict[str, work.WhatIf] = {}
with t_paths, guard(st.error, rename):
    with st.spinner("Estimating path timelines…"):
        base_tls = work.source_timelines(source, cap, conn)
    st.markdown("What-if edits change what the Replay and Tune tabs replay.")
    for p, tl in base_tls.items():
        c1, c2, c3, c4 = st.columns([2, 2, 1, 2])
        scale = c1.number_input(f"{p}: rate ×", min_value=0.0, max_value=100.0, value=1.0, step=0.1,
                                key=f"wi_scale|{p}")
        delay = c2.number_input(f"{p}: add one-way delay (ms)", min_value=-1000.0, max_value=10_000.0, value=0.0,
                                step=5.0, key=f"wi_delay|{p}")
        set_buf = c3.checkbox("set buffer", key=f"wi_bufon|{p}")
        buf = c4.number_input(f"{p}: bottleneck buffer (bytes)", min_value=0, max_value=1 << 30,
                              value=int(tl.buffer_down_bytes or 64_000), step=10_000, key=f"wi_buf|{p}",
                              disabled=not set_buf)
        edits[p] = work.WhatIf(float(scale), float(delay), int(buf) if set_buf else None)
    tls, tl_key = work.whatif_timelines(source.key, base_tls, edits)
    st.plotly_chart(pio.from_json(work.timeline_figure_json(tl_key, tls)), key="timeline_fig")
    st.dataframe(tables.timelines_table(tls), hide_index=True)
    with st.expander("How the timelines were made"):
        for p, tl in tls.items():
            st.markdown(f"**{p}** ({tl.source})")
            for n in tl.notes:
                st.text(n)

# ------------------------------------------------------------------------------------------ Replay


def _param_widget(sched: str, spec: Any) -> Any:
    key = f"p|{sched}|{spec.name}"
    label = f"{spec.name}"
    if spec.choices is not None:
        ss.setdefault(key, spec.default)
        return st.selectbox(label, list(spec.choices), key=key, help=spec.doc or None)
    if isinstance(spec.default, int) and not isinstance(spec.default, bool):
        ss.setdefault(key, int(spec.default))
        return st.number_input(label, min_value=None if spec.low is None else int(spec.low),
                               max_value=None if spec.high is None else int(spec.high), step=1, key=key,
                               help=spec.doc or None)
    if isinstance(spec.default, float):
        ss.setdefault(key, float(spec.default))
        return st.number_input(label, min_value=None if spec.low is None else float(spec.low),
                               max_value=None if spec.high is None else float(spec.high), format="%.4g", key=key,
                               help=spec.doc or None)
    ss.setdefault(key, spec.default)
    return st.text_input(label, key=key, help=spec.doc or None)


replay_specs: list[work.ReplaySpec] = []
workload_spec = work.WorkloadSpec()
conn_spec = work.ConnSpec()
with t_replay, guard(st.error, rename):
    from workbench.schedulers import available, info

    ss.setdefault("schedulers", ["minrtt", "upstream"])
    chosen = st.multiselect("Schedulers", available(), key="schedulers")
    if chosen:
        pcols = st.columns(min(len(chosen), 4))
        for i, s in enumerate(chosen):
            with pcols[i % len(pcols)].expander(f"{s} parameters", expanded=False):
                st.caption(info(s).description)
                params = {p.name: _param_widget(s, p) for p in info(s).params}
            replay_specs.append(work.ReplaySpec(s, tuple(sorted(params.items())), workload_spec, conn_spec))
    c1, c2, c3 = st.columns(3)
    with c1:
        kind = st.radio("Workload", list(WORKLOADS), format_func=WORKLOADS.__getitem__, key="wl_kind")
        seconds = st.number_input("bulk: seconds", 0.1, 600.0, 10.0, 1.0, key="wl_seconds",
                                  disabled=kind != "bulk")
        size = st.number_input("finite: bytes", 1, 10**11, 4_000_000, 1_000_000, key="wl_bytes",
                               disabled=kind != "finite")
    with c2:
        segs = st.number_input("bursts: segments per burst", 1, 100_000, 64, key="wl_segs", disabled=kind != "bursts")
        idle = st.number_input("bursts: idle ms", 0.0, 60_000.0, 200.0, 50.0, key="wl_idle", disabled=kind != "bursts")
        nb = st.number_input("bursts: count", 1, 10_000, 10, key="wl_n", disabled=kind != "bursts")
    with c3:
        auto_snd = st.checkbox("send buffer: Linux autotuning", value=True, key="snd_auto")
        snd = st.number_input("send buffer (bytes)", 1424, 1 << 30, 4 << 20, 1 << 20, key="snd_buf",
                              disabled=auto_snd)
        rcv = st.number_input("receive buffer (bytes)", 1 << 14, 1 << 31, work.RCV_BUF_DEFAULT, 1 << 20,
                              key="rcv_buf")
        cc = st.selectbox("congestion control", ["cubic", "reno", "lia", "olia"], key="cc")
        seed = st.number_input("seed", 0, 2**31 - 1, 0, key="seed")
    workload_spec = work.WorkloadSpec(kind, float(seconds), int(size), int(segs), float(idle), int(nb))
    conn_spec = work.ConnSpec(cc, None if auto_snd else int(snd), int(rcv), int(seed))
    replay_specs = [work.ReplaySpec(s.scheduler, s.params, workload_spec, conn_spec) for s in replay_specs]
    run_key = "|".join([tl_key, *(s.key(tl_key) for s in replay_specs)])

    if tls is None:
        st.info("No path timelines (see the Paths tab): nothing to replay.")
    if st.button("Run replay", type="primary", key="run_replay", disabled=not replay_specs or tls is None):
        wl, dur, wl_text = work.replay_plan(cap, conn, overview, workload_spec)
        cfg, cfg_notes = work.connection_config(cap, conn, conn_spec)
        obs = work.observed_source(source, cap, conn)
        results = [obs]
        with st.status("Replaying…", expanded=True) as status:
            for i, spec in enumerate(replay_specs, 1):
                status.update(label=f"Replaying {spec.scheduler} ({i}/{len(replay_specs)})…")
                results.append(work.replay_scheduler(tl_key, tls, spec, wl, dur, cfg))
                status.write(f"{spec.scheduler}: done")
            status.update(label=f"Replayed {len(replay_specs)} scheduler(s)", state="complete", expanded=False)
        ss.wb_results = {"source": source.key, "run_key": run_key, "rows": [r["row"] for r in results],
                         "sources": [r["figures"] for r in results], "paths": list(tls),
                         "settings": [f"workload: {wl_text}", f"replay cap: {dur / 1e9:.1f} s",
                                      f"connection: cc {conn_spec.cc}, send buffer "
                                      f"{conn_spec.send_buf_bytes or 'autotuned'}, receive buffer "
                                      f"{conn_spec.rcv_buf_bytes} B, seed {conn_spec.seed}"],
                         "notes": cfg_notes + work.fill_notes(tls)}

    res = ss.get("wb_results")
    if res and res["source"] == source.key:
        if res["run_key"] != run_key:
            st.info("The settings changed since these results: press **Run replay** to update them.")
        st.subheader("Observed vs. predicted")
        st.caption(" · ".join(res["settings"]))
        st.dataframe(tables.results_table(res["rows"], res["paths"]), hide_index=True, key="results_table")
        for n in res["notes"]:
            st.caption(n)
        from workbench.report.figures import build_figures, page_figure_data

        figs = build_figures(page_figure_data(res["sources"], res["rows"], None))
        shown = {"ooo_cdf", "goodput", "burstiness", "share"}
        fcols = st.columns(2)
        for i, (fig_id, caption, fig) in enumerate(f for f in figs if f[0] in shown):
            with fcols[i % 2]:
                st.plotly_chart(fig, key=f"res_{fig_id}")
                st.caption(caption)

# -------------------------------------------------------------------------------------------- Tune


def _apply_best(sched: str, params: dict[str, Any]) -> None:
    """Button callback (runs before the widgets): the best parameters into the Replay tab's widgets."""
    for name, value in params.items():
        ss[f"p|{sched}|{name}"] = value
    if sched not in ss.get("schedulers", []):
        ss["schedulers"] = [*ss.get("schedulers", []), sched]
    ss.wb_applied = f"applied to the Replay tab: {sched} {params}"


with t_tune, guard(st.error, rename):
    from workbench.ui import tuning

    tunable = [s for s in available() if any(p.low is not None or p.choices for p in info(s).params)]
    c1, c2, c3 = st.columns(3)
    t_sched = c1.selectbox("Scheduler", tunable, key="tune_sched")
    t_objs = c2.multiselect("Objective(s)", list(tuning.OBJECTIVE_CHOICES), default=["ooo_p95"],
                            format_func=lambda o: tuning.OBJECTIVE_CHOICES[o], key="tune_objs")
    t_trials = c3.number_input("Trials", 1, 1000, 20, key="tune_trials")
    st.caption("Tunes on the Paths tab's timelines (what-if included) with the Replay tab's workload (bulk or "
               "finite; bursts are tuned as bulk) and the engine's default connection settings.")
    if st.button("Run study", key="run_tune", disabled=tls is None):
        wl, dur, _ = work.replay_plan(cap, conn, overview, workload_spec)
        wl_text = tuning.workload_text(workload_spec.kind, getattr(wl, "size_bytes", None))
        bar = st.progress(0.0, text="starting…")

        def _progress(done: int, wanted: int, best: str) -> None:
            bar.progress(min(done / max(wanted, 1), 1.0), text=f"{done}/{wanted} trials · {best}")

        stop_ns = getattr(wl, "stop_ns", None)
        ss.wb_tune = tuning.run_study(_store().root, tls, tl_key, t_sched, t_objs, int(t_trials), workload=wl_text,
                                      duration_ns=int(stop_ns or dur), on_trials=_progress)
        ss.wb_tune["source"] = source.key
    tr = ss.get("wb_tune")
    if tr and tr.get("source") == source.key:
        best = tuning.best_params(tr)
        counts = tr["summary"].get("trials", {})
        st.write(f"**{tr['scheduler']}**: {counts.get('complete', 0)} complete, {counts.get('pruned', 0)} pruned, "
                 f"{counts.get('failed', 0)} failed trials")
        if best is not None:
            st.code(tr["summary"].get("best", {}).get("param_line") if tr["summary"].get("best")
                    else str(best), language=None)
            st.button("Apply best parameters to Replay", key="apply_best", on_click=_apply_best,
                      args=(tr["scheduler"], best))
        if ss.get("wb_applied"):
            st.success(ss.pop("wb_applied"))
        st.plotly_chart(tuning.history_figure(tr), key="tune_history")
        pf = tuning.pareto_figure(tr)
        if pf is not None:
            st.plotly_chart(pf, key="tune_pareto")

# ---------------------------------------------------------------------------------------- Download
with t_down, guard(st.error, rename):
    from workbench.ui.report import report_html

    res = ss.get("wb_results")
    if not (res and res["source"] == source.key):
        obs = work.observed_source(source, cap, conn)
        res = {"rows": [obs["row"]], "sources": [obs["figures"]], "paths": list(tls or []),
               "settings": ["no replay run yet: observed metrics only"], "notes": []}
    rows, srcs = res["rows"], res["sources"]
    title = f"{source.label}: workbench report"
    tl_json = work.timeline_figure_json(tl_key, tls) if tls is not None else None
    page_tables = [("Observed vs. predicted", tables.results_table(rows, res["paths"])),
                   ("Subflows", tables.subflows_table(overview))]
    if tls is not None:
        page_tables.append(("Path timelines (what-if applied)", tables.timelines_table(tls)))
    notes = [rename(w) for w in overview["warnings"]] + list(res["notes"])

    def _html() -> str:
        return report_html(title=title, settings=list(res["settings"]), tables=page_tables, rows=rows,
                           sources=srcs, timeline_json=tl_json, notes=notes)

    st.write("The report and metrics of what the Replay tab shows.")
    st.download_button("HTML report", data=_html, file_name="workbench-report.html", mime="text/html",
                       on_click="ignore", key="dl_html")
    st.download_button("Metrics CSV", data=tables.metrics_csv(rows), file_name="workbench-metrics.csv",
                       mime="text/csv", on_click="ignore", key="dl_csv")
