"""The workbench's Streamlit page: pick or upload a capture -> Overview -> Paths (timelines, what-if)
-> Replay (schedulers, workload, buffers; observed vs predicted) -> Tune -> Download.

Serve it with ``workbench ui`` (or ``streamlit run app.py``). This file holds the layout and the
widgets only: the work is done by library calls through `workbench.ui.work` (cached by content
hash), tables come from `workbench.ui.tables`, downloads from `workbench.ui.report`, tuning from
`workbench.ui.tuning`. Every tab runs inside `guard`, so a problem shows as one line, never a trace.

Speed (issue 15: upload -> first timeline plot, and the first visit, under 3 s; measured by
``benchmarks/bench_page.py``): nothing heavy is imported before a capture is there (polars, plotly,
the engine and the kernel backend load where they are used); while the uploader waits for a file, the
server imports what the first plot needs and the browser loads plotly.js (`workbench.ui.warm`); the
Paths tab's timelines and plot are made right after the capture is read; the tabs are stateful
(``on_change="rerun"``), so what only one tab shows is computed and drawn while that tab is open (the
Overview's measurements, made last; the Capture tab's large figure; the downloads); figures are
cached as objects, not rebuilt from JSON on every rerun.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import streamlit as st

from workbench.ui import work
from workbench.ui.boundary import error_line, guard
from workbench.ui.uploads import UploadStore, max_upload_bytes

ROOT = Path(__file__).resolve().parent
TRACES = ROOT / "traces"
DEFAULT_TRACE = "lab/c07"
# AppTest cannot drive st.file_uploader: a test puts {"captures": [(name, bytes)], "peer": (name, bytes)
# | None} here and the page hands it to the very handler the uploader's callback uses (no captures:
# the files were removed).
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
    """What the uploader's callback (and the test hook) calls: store the files, decide what they are
    (one capture, a capture and its peer, one connection's CSV exports; `workbench.ui.intake`) and
    remember the source and the line that says what was used."""
    from workbench.ui.intake import plan_upload

    for k in ("wb_upload_error", "wb_upload_note"):
        ss.pop(k, None)
    try:
        up = _store().accept(captures, peer)
        plan = plan_upload(up.files, up.names, up.peer)
        used = [*plan.files, *([plan.peer] if plan.peer else [])]
        label = " + ".join(up.names[f] for f in plan.files) + (f"  (peer {up.names[plan.peer]})" if plan.peer else "")
        ss.wb_upload = work.make_source(plan.files, plan.peer, label, names={f: up.names[f] for f in used})
        ss.wb_upload_note = plan.note
    except Exception as e:
        ss.pop("wb_upload", None)
        ss.wb_upload_error = error_line(e)


def _on_upload() -> None:
    files = ss.get("up_capture") or []
    peer = ss.get("up_peer")
    if files:
        _accept([(f.name, f) for f in files], (peer.name, peer) if peer is not None else None)
    else:
        _clear_upload()


def _clear_upload() -> None:
    """Files removed: so is everything said about them (an old error must not stay on screen)."""
    _store().clear()
    for k in ("wb_upload", "wb_upload_error", "wb_upload_note"):
        ss.pop(k, None)


def _input_source() -> work.Source | None:
    sb = st.sidebar
    sb.header("Input")
    # ?input=upload opens the page on the uploader (no bundled trace is read first).
    ss.setdefault("input_mode", "Upload" if st.query_params.get("input") == "upload" else "Bundled trace")
    mode = sb.radio("Source", ["Bundled trace", "Upload"], key="input_mode", horizontal=True)
    sb.text_input("Path names (ADDR=NAME, comma-separated)", key="path_names",
                  placeholder="10.0.1.1=wifi, 10.0.2.1=lte")
    raw_names = [s for s in ss.get("path_names", "").replace(";", ",").split(",") if s.strip()]
    names: dict[str, str] = {}
    if raw_names:
        from workbench.capture import parse_path_names

        names = parse_path_names(raw_names)
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
    if injected is not None:
        if injected["captures"]:
            _accept(list(injected["captures"]), injected.get("peer"))
        else:
            _clear_upload()
    if ss.get("wb_upload_error"):
        st.error(ss.wb_upload_error)
        return None
    if ss.get("wb_upload_note"):
        sb.info(ss.wb_upload_note)
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
    # While the user picks a file, the server imports what reading it and drawing its first plot will
    # need, and the browser loads plotly.js (`workbench.ui.warm`); both after this view is drawn.
    from workbench.ui.warm import plotly_preload_html, warm_imports

    warm_imports()
    preload = plotly_preload_html()
    if preload is not None:
        st.html(preload, unsafe_allow_javascript=True)
    st.stop()

# Imported once a capture is there (polars): the first visit of the uploader does not wait for them.
# pandas before any figure or table: plotly looks it up in sys.modules without the import lock, so a
# rerun (a click on a tab) starting while the run it replaces was still importing pandas for a table saw
# a half-made module ("partially initialized module 'pandas' has no attribute 'Series'"). Imported here,
# in every run before any figure, a run waits until the import is complete.
import pandas  # noqa: E402, F401

from workbench.ui import tables  # noqa: E402

# A new input: what belongs to the old one (what-if edits, the connection choice, results, tuning) is
# keyed by the input and starts afresh; what is not about one trace (schedulers, their parameters,
# workload and connection settings) carries over, and the page says so.
_prev = ss.get("wb_source")
if _prev is not None and _prev["key"] != source.key:
    ss.wb_carry = (f"New input: what-if edits and results start afresh; schedulers, their parameters, workload "
                   f"and connection settings carried over from {_prev['label']}.")
ss.wb_source = {"key": source.key, "label": source.label}
SKEY = source.key[:16]

rename = source.rename
cap: Any = None
with guard(st.error, rename), st.spinner("Reading the capture…"):
    cap = work.load_capture(source)
if cap is None:
    st.stop()

conn_rows = cap.connections.select("conn", "kind").to_dicts()
conn_ids = [int(c["conn"]) for c in conn_rows]
if len(conn_ids) > 1:
    st.sidebar.selectbox("Connection", conn_ids, index=conn_ids.index(int(cap.main_connection)),
                         key=f"connection|{SKEY}", help="default: the busiest MPTCP connection")
conn = int(ss.get(f"connection|{SKEY}", cap.main_connection))
st.caption(f"**{source.label}** · reader {cap.reader} · connection {conn}")
if ss.get("wb_carry"):
    st.caption(ss.wb_carry)
conn_kind = next((c["kind"] for c in conn_rows if c["conn"] == conn), None)
if conn_kind != "mptcp":
    st.info(f"No MPTCP in connection {conn}: it is analysed as single-path TCP.", icon="ℹ️")

# Stateful tabs: a click on a tab reruns the page, and ``.open`` says which one the user sees, so what
# only one tab shows is made when it is open. Widgets are drawn whatever tab is open (a widget not
# drawn in a run loses its value).
t_over, t_capture, t_paths, t_replay, t_tune, t_down = st.tabs(
    ["Overview", "Capture", "Paths", "Replay", "Tune", "Download"], key="page_tab", on_change="rerun")
# The tabs are filled in the order that gets the first plot on screen soonest: the path timelines
# (Paths) right after reading the capture, then the replay and tuning controls, the downloads, the
# capture views (both when their tab is open) and the Overview's measurements (when open) last.

# ------------------------------------------------------------------------------------------- Paths
tls: Any = None
tl_key = ""
data_dir = "down"
edits: dict[str, work.WhatIf] = {}
with t_paths, guard(st.error, rename):
    with st.spinner("Estimating path timelines…"):
        base_tls = work.source_timelines(source, cap, conn)
    # An upload's data goes up: its columns are the ones shown and its buffer the one edited first.
    data_dir = work.source_direction(source, cap, conn)
    st.markdown("What-if edits change what the Replay and Tune tabs replay.")
    for p, tl in base_tls.items():
        c1, c2, c3, c4 = st.columns([2, 2, 1, 2])
        # Keyed by the input: an edit of one trace never applies to the next one, and the buffer box
        # starts from this trace's estimate.
        scale = c1.number_input(f"{p}: rate ×", min_value=0.0, max_value=100.0, value=1.0, step=0.1,
                                key=f"wi_scale|{SKEY}|{p}")
        delay = c2.number_input(f"{p}: add one-way delay (ms)", min_value=-1000.0, max_value=10_000.0, value=0.0,
                                step=5.0, key=f"wi_delay|{SKEY}|{p}")
        set_buf = c3.checkbox("set buffer", key=f"wi_bufon|{SKEY}|{p}")
        est_buf = tl.buffer_up_bytes if data_dir == "up" else tl.buffer_down_bytes
        buf = c4.number_input(f"{p}: bottleneck buffer (bytes)", min_value=0, max_value=1 << 30,
                              value=int(est_buf or 64_000), step=10_000, key=f"wi_buf|{SKEY}|{p}",
                              disabled=not set_buf)
        edits[p] = work.WhatIf(float(scale), float(delay), int(buf) if set_buf else None)
    tls, tl_key = work.whatif_timelines(source.key, base_tls, edits)
    st.plotly_chart(work.timeline_figure(tl_key, tls), key="timeline_fig")
    st.dataframe(tables.timelines_table(tls, data_dir), hide_index=True)
    # What limits these numbers, next to them (the timelines' caveats, else what the page can tell).
    for w in work.trust_warnings(source, cap.warnings, tls):
        st.warning(rename(w))
    with st.expander("How the timelines were made"):
        for p, tl in tls.items():
            st.markdown(f"**{p}** ({tl.source})")
            for n in tl.notes:
                st.text(n)

# ---------------------------------------------------------------------------------------- Overview


def _overview() -> dict[str, Any]:
    """The inspect dict of the connection, made when a tab needs it (cached by input and connection)."""
    return work.load_overview(source, cap, conn)


def _draw_overview(ov: dict[str, Any]) -> None:
    """The Overview tab: headline metrics, connections, subflows, per-path numbers, one-way delays."""
    m = ov["detail"]["metrics"]
    cols = st.columns(5)
    cols[0].metric("goodput", f"{m['goodput_mbps']:.2f} Mbit/s" if m.get("goodput_mbps") else "–")
    cols[1].metric("completion", f"{m['completion_s']:.3f} s" if m.get("completion_s") else "–")
    cols[2].metric("delivered", f"{m['delivered_bytes']:,} B" if m.get("delivered_bytes") else "–")
    cols[3].metric("OOO delay p50", f"{m['ooo_p50_ms']:.1f} ms" if m.get("ooo_p50_ms") is not None else "–")
    cols[4].metric("OOO delay p95", f"{m['ooo_p95_ms']:.1f} ms" if m.get("ooo_p95_ms") is not None else "–")
    if m.get("goodput_mbps") is None:
        st.caption("goodput, completion and delivered bytes need the receiver's side of the data: this capture "
                   "holds only the sender's (give the receiver's capture as peer); the per-path table below "
                   "shows what was sent.")
    if ov["detail"].get("ooo_note") and conn_kind == "mptcp":
        st.info(ov["detail"]["ooo_note"])
    st.subheader("Connections")
    st.dataframe(tables.connections_table(ov), hide_index=True)
    st.subheader(f"Subflows of connection {conn} (data {ov['detail']['data_dir']})")
    st.dataframe(tables.subflows_table(ov), hide_index=True)
    st.subheader("Per path")
    st.dataframe(tables.paths_table(ov), hide_index=True)
    owd = tables.owd_table(ov)
    if owd.height:
        st.subheader("One-way delay (from the pair)")
        st.dataframe(owd, hide_index=True)
    for w in ov["warnings"]:
        st.warning(rename(w))


# ------------------------------------------------------------------------------------------ Replay


def _kv(key: str, default: Any) -> Any:
    """A widget's value as the session keeps it (`_keep`), else ``default``; handed to the widget as
    its default. Streamlit forgets the state of a widget that was not drawn in a run (e.g. while the
    Upload mode waits for a file), and a widget re-created from session state alone showed empty in
    the browser (an empty scheduler list, every number at its minimum) while the script saw values."""
    return ss.setdefault("wb_keep", {}).get(key, default)


def _keep(*keys: str) -> None:
    keep = ss.setdefault("wb_keep", {})
    for k in keys:
        if k in ss:
            keep[k] = ss[k]


def _param_widget(sched: str, spec: Any) -> Any:
    key = f"p|{sched}|{spec.name}"
    label = f"{spec.name}"
    if spec.choices is not None:
        choices = list(spec.choices)
        v = _kv(key, spec.default)
        return st.selectbox(label, choices, index=choices.index(v) if v in choices else 0, key=key,
                            help=spec.doc or None)
    if isinstance(spec.default, int) and not isinstance(spec.default, bool):
        return st.number_input(label, min_value=None if spec.low is None else int(spec.low),
                               max_value=None if spec.high is None else int(spec.high), step=1, key=key,
                               value=int(_kv(key, spec.default)), help=spec.doc or None)
    if isinstance(spec.default, float):
        return st.number_input(label, min_value=None if spec.low is None else float(spec.low),
                               max_value=None if spec.high is None else float(spec.high), format="%.4g", key=key,
                               value=float(_kv(key, spec.default)), help=spec.doc or None)
    return st.text_input(label, key=key, value=str(_kv(key, spec.default)), help=spec.doc or None)


_WL_KEYS = {"wl_kind": "captured", "wl_seconds": 10.0, "wl_bytes": 4_000_000, "wl_segs": 64, "wl_idle": 200.0,
            "wl_n": 10, "snd_auto": True, "snd_buf": 4 << 20, "rcv_auto": True, "rcv_buf": 32 << 20,
            "cc": "cubic",
            "seed": 0, "made_with": "upstream"}
replay_specs: list[work.ReplaySpec] = []
workload_spec = work.WorkloadSpec()
conn_spec = work.ConnSpec()
setup_key = ""
made_with = "upstream"


def _setup() -> work.ReplaySetup:
    """The one replay setup of the Replay and the Tune tab (`work.replay_setup`)."""
    return work.replay_setup(cap, conn, _overview(), tls, workload_spec, conn_spec)


with t_replay, guard(st.error, rename):
    from workbench.schedulers import available, info

    kv = {k: _kv(k, v) for k, v in _WL_KEYS.items()}
    all_scheds = available()
    # no default in the run after `_apply_best` set the value (a widget given both warns); else the kept
    # value as the default, or a widget re-created from session state alone shows empty (see `_kv`)
    chosen = st.multiselect("Schedulers", all_scheds, key="schedulers",
                            default=None if ss.pop("wb_schedulers_set", False) else
                            [x for x in _kv("schedulers", ["minrtt", "upstream"]) if x in all_scheds])
    if chosen:
        pcols = st.columns(min(len(chosen), 4))
        for i, s in enumerate(chosen):
            with pcols[i % len(pcols)].expander(f"{s} parameters", expanded=False):
                st.caption(info(s).description)
                params = {p.name: _param_widget(s, p) for p in info(s).params}
                _keep(*(f"p|{s}|{p.name}" for p in info(s).params))
            replay_specs.append(work.ReplaySpec(s, tuple(sorted(params.items())), workload_spec, conn_spec))
    c1, c2, c3 = st.columns(3)
    with c1:
        kind = st.radio("Workload", list(WORKLOADS), format_func=WORKLOADS.__getitem__, key="wl_kind",
                        index=list(WORKLOADS).index(kv["wl_kind"]))
        seconds = st.number_input("bulk: seconds", min_value=0.1, max_value=600.0, step=1.0, key="wl_seconds",
                                  value=float(kv["wl_seconds"]), disabled=kind != "bulk")
        size = st.number_input("finite: bytes", min_value=1, max_value=10**11, step=1_000_000, key="wl_bytes",
                               value=int(kv["wl_bytes"]), disabled=kind != "finite")
        made_with = st.selectbox("The capture was made with", all_scheds, key="made_with",
                                 index=all_scheds.index(kv["made_with"]) if kv["made_with"] in all_scheds else 0,
                                 help="the scheduler the captured connection ran (Linux's default: upstream); "
                                      "its row is compared with what was observed")
    with c2:
        segs = st.number_input("bursts: segments per burst", min_value=1, max_value=100_000, key="wl_segs",
                               value=int(kv["wl_segs"]), disabled=kind != "bursts")
        idle = st.number_input("bursts: idle ms", min_value=0.0, max_value=60_000.0, step=50.0, key="wl_idle",
                               value=float(kv["wl_idle"]), disabled=kind != "bursts")
        nb = st.number_input("bursts: count", min_value=1, max_value=10_000, key="wl_n", value=int(kv["wl_n"]),
                             disabled=kind != "bursts")
    with c3:
        auto_snd = st.checkbox("send buffer: Linux autotuning", key="snd_auto", value=bool(kv["snd_auto"]))
        snd = st.number_input("send buffer (bytes)", min_value=1424, max_value=1 << 30, step=1 << 20, key="snd_buf",
                              value=int(kv["snd_buf"]), disabled=auto_snd)
        auto_rcv = st.checkbox("receive buffer: as the capture shows", key="rcv_auto", value=bool(kv["rcv_auto"]),
                               help="the buffer behind the largest window the receiver announced once it stopped "
                                    "growing; 32 MiB when the window was still growing at the end")
        rcv = st.number_input("receive buffer (bytes)", min_value=1 << 14, max_value=1 << 31, step=1 << 20,
                              key="rcv_buf", value=int(kv["rcv_buf"]), disabled=auto_rcv)
        ccs = ["cubic", "reno", "lia", "olia"]
        cc = st.selectbox("congestion control", ccs, key="cc", index=ccs.index(kv["cc"]) if kv["cc"] in ccs else 0)
        seed = st.number_input("seed", min_value=0, max_value=2**31 - 1, key="seed", value=int(kv["seed"]))
    with_kernel = st.checkbox(
        "also run the real Linux kernel (upstream scheduler, network namespaces)", key="with_kernel",
        value=False, help="the same experiment on the real MPTCP stack, beside the model's rows (needs root and "
                          "an MPTCP kernel: checked when ticked)")
    # Checked when asked for: the check loads the kernel backend and probes for netem (subprocesses),
    # which the first view of every server process paid for before.
    no_kernel = work.kernel_available() if with_kernel else None
    if no_kernel is not None:
        st.caption(f"The real kernel cannot run here: {no_kernel}")
    _keep("schedulers", *_WL_KEYS)
    workload_spec = work.WorkloadSpec(kind, float(seconds), int(size), int(segs), float(idle), int(nb))
    conn_spec = work.ConnSpec(cc, None if auto_snd else int(snd), None if auto_rcv else int(rcv), int(seed))
    replay_specs = [work.ReplaySpec(s.scheduler, s.params, workload_spec, conn_spec) for s in replay_specs]
    setup_key = work.ReplaySpec("", (), workload_spec, conn_spec).key(tl_key)
    run_key = "|".join([tl_key, *(s.key(tl_key) for s in replay_specs)])

    why_not = ("No path timelines (see the Paths tab): nothing to replay." if tls is None else
               "Pick at least one scheduler above to replay." if not replay_specs else "")
    if why_not:
        st.info(why_not)
    if st.button("Run replay", type="primary", key="run_replay", disabled=bool(why_not)):
        setup = _setup()
        obs = work.observed_source(source, cap, conn)
        results = [obs]
        with st.status("Replaying…", expanded=True) as status:
            for i, spec in enumerate(replay_specs, 1):
                status.update(label=f"Replaying {spec.scheduler} ({i}/{len(replay_specs)})…")
                results.append(work.replay_scheduler(tl_key, setup, spec))
                status.write(f"{spec.scheduler}: done")
            kernel_warnings: list[str] = []
            if with_kernel and no_kernel is None:
                status.update(label="Running the real kernel (upstream)…")
                k = work.compute_kernel(setup)
                results.append(k)
                kernel_warnings = [f"kernel: {w}" for w in k["warnings"]]
                status.write("kernel: done")
            status.update(label=f"Replayed {len(replay_specs)} scheduler(s)", state="complete", expanded=False)
        ss.wb_results = {"source": source.key, "run_key": run_key, "rows": [r["row"] for r in results],
                         "sources": [r["figures"] for r in results], "paths": list(tls),
                         "settings": [f"workload: {setup.workload_text}",
                                      f"replay cap: {setup.duration_ns / 1e9:.1f} s",
                                      f"connection: cc {conn_spec.cc}, send buffer "
                                      f"{conn_spec.send_buf_bytes or 'autotuned'}, receive buffer "
                                      + (f"{conn_spec.rcv_buf_bytes} B" if conn_spec.rcv_buf_bytes else "as the capture shows")
                                      + f", seed {conn_spec.seed}"],
                         "notes": list(setup.notes) + work.fill_notes(tls) + kernel_warnings}

    res = ss.get("wb_results")
    if res and res["source"] == source.key:
        if res["run_key"] != run_key:
            st.info("The settings changed since these results: press **Run replay** to update them.")
        st.subheader("Observed vs. predicted")
        st.caption(" · ".join(res["settings"]))
        st.dataframe(tables.results_table(res["rows"], res["paths"], made_with=made_with), hide_index=True,
                     key="results_table")
        trust = tables.error_table(res["rows"], made_with, res["paths"])
        if trust.height:
            st.markdown(f"**How far to trust these rows**: the replay of **{made_with}** (the scheduler the "
                        "capture was made with) against what was observed. The other rows share its timelines "
                        "and settings, so expect errors of this size in them too.")
            st.dataframe(trust, hide_index=True, key="trust_table")
        else:
            st.caption(f"The capture's own scheduler ({made_with}) was not replayed: add it to see how far "
                       "the replayed rows can be trusted.")
        for w in work.trust_warnings(source, cap.warnings, tls):
            st.warning(rename(w))
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
    keep = ss.setdefault("wb_keep", {})
    # Into the kept values, and the widgets forgotten: they are drawn again from the kept values (a
    # widget given both a default and a value set through session state would warn).
    for name, value in params.items():
        keep[f"p|{sched}|{name}"] = value
        ss.pop(f"p|{sched}|{name}", None)
    current = list(ss.get("schedulers", keep.get("schedulers", [])))
    keep["schedulers"] = current if sched in current else [*current, sched]
    # Set through session state (a callback may): a new default alone is not enough, the browser keeps
    # the keyed widget's old value and BLEST went missing from the Replay rows (tests/test_app_browser_inputs.py).
    ss["schedulers"] = keep["schedulers"]
    ss.wb_schedulers_set = True
    ss.wb_applied = f"applied to the Replay tab: {sched} {params}"


with t_tune, guard(st.error, rename):
    from workbench.ui import tuning

    tunable = [s for s in available() if any(p.low is not None or p.choices for p in info(s).params)]
    c1, c2, c3 = st.columns(3)
    t_sched = c1.selectbox("Scheduler", tunable, key="tune_sched")
    t_objs = c2.multiselect("Objective(s)", list(tuning.OBJECTIVE_CHOICES), default=["ooo_p95"],
                            format_func=lambda o: tuning.OBJECTIVE_CHOICES[o], key="tune_objs")
    t_trials = c3.number_input("Trials", 1, 1000, 20, key="tune_trials")
    t_min_gp = st.number_input("keep at least this fraction of the defaults' goodput (0 = no constraint)",
                               min_value=0.0, max_value=2.0, value=0.95, step=0.05, key="tune_min_goodput")
    st.caption("Tunes exactly what the Replay tab replays: the Paths tab's timelines (what-if included), the "
               "Replay tab's workload, connection settings and seed (one replay setup for both tabs). The first "
               "trial is the scheduler's defaults; a value that loses goodput beyond the constraint is never "
               "called the best.")
    if st.button("Run study", key="run_tune", disabled=tls is None):
        setup = _setup()
        bar = st.progress(0.0, text="starting…")

        def _progress(done: int, wanted: int, best: str) -> None:
            bar.progress(min(done / max(wanted, 1), 1.0), text=f"{done}/{wanted} trials · {best}")

        ss.wb_tune = tuning.run_study(_store().root, setup, setup_key, source.label, t_sched, t_objs,
                                      int(t_trials), min_goodput=float(t_min_gp) or None, on_trials=_progress)
        ss.wb_tune["source"] = source.key
    tr = ss.get("wb_tune")
    if tr and tr.get("source") == source.key:
        best = tuning.best_params(tr)
        summ = tr["summary"]
        counts = summ.get("trials", {})
        st.write(f"**{tr['scheduler']}**: {counts.get('complete', 0)} complete, {counts.get('pruned', 0)} pruned, "
                 f"{counts.get('failed', 0)} failed trials")
        if summ.get("constraints"):
            c = summ["constraints"]
            st.caption(f"constraint: {'; '.join(c['required'])} — kept by {c['kept_by']} of {c['complete']} "
                       "complete trials")
        if best is None:
            st.warning("No trial keeps the constraint: no tuned value is better than the defaults.")
        else:
            entry = summ.get("best") or (summ.get("pareto") or [{}])[0]
            st.code(entry.get("param_line") or str(best), language=None)
            st.markdown("Change of every objective against the scheduler's defaults:")
            st.dataframe(tuning.changes_table(entry), hide_index=True, key="tune_changes")
            st.caption(" · ".join(tuning.change_text(entry)))
            st.button("Apply best parameters to Replay", key="apply_best", on_click=_apply_best,
                      args=(tr["scheduler"], best))
        if ss.get("wb_applied"):
            st.success(ss.pop("wb_applied"))
        st.plotly_chart(tuning.history_figure(tr), key="tune_history")
        pf = tuning.pareto_figure(tr)
        if pf is not None:
            st.plotly_chart(pf, key="tune_pareto")

# ---------------------------------------------------------------------------------------- Download


def _report_results(snap: dict[str, Any]) -> dict[str, Any]:
    """The rows and figure series of the downloads: the Replay tab's results, else the observed run."""
    res = snap["res"]
    if res is not None:
        return dict(res)
    obs = work.observed_source(snap["source"], snap["cap"], snap["conn"])
    return {"rows": [obs["row"]], "sources": [obs["figures"]], "paths": list(snap["tls"] or []),
            "settings": ["no replay run yet: observed metrics only"], "notes": []}


def _report_page(snap: dict[str, Any]) -> str:
    """The HTML report of what the page shows (`workbench.ui.report`)."""
    from workbench.ui.report import report_html

    res = _report_results(snap)
    rows, made, tls_, rename_ = res["rows"], snap["made_with"], snap["tls"], snap["rename"]
    ov = work.load_overview(snap["source"], snap["cap"], snap["conn"])
    page_tables = [("Observed vs. predicted", tables.results_table(rows, res["paths"], made_with=made)),
                   (f"Error of the capture's own scheduler ({made}) against the observed run",
                    tables.error_table(rows, made, res["paths"])),
                   ("Subflows", tables.subflows_table(ov))]
    if tls_ is not None:
        page_tables.append(("Path timelines (what-if applied)", tables.timelines_table(tls_, snap["data_dir"])))
    notes = ([rename_(w) for w in work.trust_warnings(snap["source"], snap["cap"].warnings, tls_)]
             + [rename_(w) for w in ov["warnings"]] + list(res["notes"]))
    return report_html(title=f"{snap['source'].label}: workbench report", settings=list(res["settings"]),
                       tables=page_tables, rows=rows, sources=res["sources"],
                       timeline_json=work.timeline_figure_json(snap["tl_key"], tls_) if tls_ is not None else None,
                       notes=notes)


def _report_csv(snap: dict[str, Any]) -> bytes:
    return tables.metrics_csv(_report_results(snap)["rows"])


@st.cache_data(show_spinner="Making the report…", max_entries=8, ttl=3600)
def _report_page_cached(key: str, _snap: dict[str, Any]) -> str:
    """`_report_page`, cached by what it shows (``key``): reruns while the tab is open reuse it."""
    return _report_page(_snap)


# The downloads are made when the Download tab is open (nothing is measured for them while another tab
# is shown), from what this run shows: the snapshot holds this run's objects, not names a later run
# rebinds. They are handed over as bytes, not callables: streamlit names such a file by its content, so
# its address survives reruns, while a callable gets a new address on every rerun and a click just
# after one (opening the tab reruns the page) downloaded nothing ("Deferred file ... not found"). So
# the buttons are drawn only while the tab is open: no stale button to click.
with t_down, guard(st.error, rename):
    if t_down.open:
        _res = ss.get("wb_results")
        _snap = {"res": _res if _res and _res["source"] == source.key else None, "source": source, "cap": cap,
                 "conn": conn, "tls": tls, "tl_key": tl_key, "data_dir": data_dir, "made_with": made_with,
                 "rename": rename}
        _shown = [_snap["res"][k] for k in ("rows", "settings", "notes")] if _snap["res"] else None
        _key = json.dumps([source.key, conn, _shown, tl_key, data_dir, made_with], default=str)
        st.write("The report and metrics of what the Replay tab shows.")
        st.download_button("HTML report", data=_report_page_cached(_key, _snap),
                           file_name="workbench-report.html", mime="text/html", on_click="ignore", key="dl_html")
        st.download_button("Metrics CSV", data=_report_csv(_snap), file_name="workbench-metrics.csv",
                           mime="text/csv", on_click="ignore", key="dl_csv")

# ----------------------------------------------------------------------------------------- Capture
with t_capture, guard(st.error, rename):
    st.caption("Per path, as Wireshark's graphs show a capture: data sequence number over time (retransmissions ×, "
               "MPTCP reinjections ◆), RTT and one-way delay, throughput per 100 ms, each segment's out-of-order "
               "delay; the estimated timeline (dashed) and a ground truth (dotted) drawn over them.")
    truth_files: list[tuple[str, str]] = []     # (file, path)
    c1, c2 = st.columns([3, 1])
    gt = c1.file_uploader("Ground truth to overlay (optional): t_s,rate_mbps or t_s,owd_ms", type=["csv"],
                          key=f"gt|{SKEY}")
    cv_tls = work.source_timelines(source, cap, conn)
    gt_path = c2.selectbox("for path", list(cv_tls), key=f"gt_path|{SKEY}")
    # The largest figure of the page (every packet of every path): made and sent only when this tab is
    # open, so it never delays the first plot nor weighs on the browser while another tab is shown.
    if t_capture.open:
        if gt is not None:
            f = _store().scratch(f"truth-{SKEY}.csv")
            f.write_bytes(gt.getvalue())
            truth_files.append((str(f), str(gt_path)))
        with st.spinner("Drawing the capture…"):
            lab_dir = str(Path(source.files[0]).parent) if ss.get("input_mode") == "Bundled trace" else None
            cv_fig = work.capture_view(source, cap, conn, cv_tls, tuple(truth_files), lab_folder=lab_dir)
        st.plotly_chart(cv_fig, key="capture_view", width="stretch")

# ---------------------------------------------------------------------------------- Overview (last)
# The Overview's measurements (OOO delays, RTTs and one-way delays of every packet) are the run's
# slowest step: made last, so that the Paths plot and every control are on screen before them, and
# only while the Overview is open (the default tab), not on every click elsewhere: a click on
# another tab before they start reruns the page without them.
with t_over, guard(st.error, rename):
    if t_over.open:
        with st.spinner("Measuring the connection…"):
            _ov = _overview()
        _draw_overview(_ov)
