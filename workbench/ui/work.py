"""The page's work, as plain functions over library calls, each cached by a key over content.

What the page shows is a chain: source files -> `Capture` + inspect dict -> estimated timelines ->
what-if timelines -> one replay per scheduler -> metrics rows and figure series. Every step is keyed
by a string built from the content hash of the input files and the settings that matter, so the same
upload in another tab or session, or revisiting a tab, reuses the result instead of recomputing.

Two caches: ``st.cache_resource`` for the big shared objects (a `Capture`, `Timelines`, plotly
figures: returned as is, never copied; treated as read-only, which the library's functions respect
since they return new objects), ``st.cache_data`` for replay results (plain dicts, small). Arguments
whose names start with ``_`` are not hashed by streamlit: they are the objects the key stands for.

The functions here decide what to run; every number comes from `workbench.*` (inspect, timeline,
capture_experiment, replay, metrics, report.figures). The uncached ``compute_*`` functions are
the ones tests call directly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from workbench.errors import InputError

__all__ = [
    "DEFAULT_OWD_NS",
    "FINITE_CAP_FACTOR",
    "ConnSettings",
    "ConnSpec",
    "ReplaySetup",
    "ReplaySpec",
    "Source",
    "WhatIf",
    "WorkloadSpec",
    "bundled_sources",
    "capture_view",
    "compute_kernel",
    "compute_replay",
    "connection_settings",
    "data_direction",
    "file_key",
    "fill_notes",
    "kernel_available",
    "load_capture",
    "load_overview",
    "load_source",
    "observed_source",
    "params_text",
    "replay_plan",
    "replay_scheduler",
    "replay_setup",
    "sent_bytes",
    "source_direction",
    "source_timelines",
    "timeline_figure",
    "timeline_figure_json",
    "trust_warnings",
    "whatif_timelines",
]

# As workbench.compare: a finite replay may take this many times the capture's duration (at least
# 30 s) before it is cut, so a scheduler slower than the kernel is still seen finishing.
FINITE_CAP_FACTOR = 4
# As the report: a path whose delay the input cannot tell (CSV exports of a receiver without
# timestamps) is replayed with this one-way delay, and the page says so (`fill_notes`).
DEFAULT_OWD_NS = 20_000_000
_MAX_POINTS = 600                   # per figure trace (display thinning only)


# ---------------------------------------------------------------------------------------------------
# Sources

@dataclass(frozen=True)
class Source:
    """What to load: capture file(s) (one pcap/pcapng, or one connection's CSV exports), an optional
    peer capture, path names, and ``key``: a hash over the files' contents and the path names."""

    files: tuple[str, ...]
    peer: str | None
    label: str
    key: str
    path_names: tuple[tuple[str, str], ...] = ()
    names: dict[str, str] = field(default_factory=dict, hash=False, compare=False)  # path -> shown name

    def rename(self, text: str) -> str:
        """``text`` with the private file paths replaced by the names the user knows."""
        for path, shown in sorted(self.names.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(path, shown).replace(Path(path).name, shown)
        return text


@st.cache_data(show_spinner=False, max_entries=256)
def _file_sha(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def file_key(path: str | Path) -> str:
    """sha256 of a file's bytes (remembered per path, size and mtime: a bundled trace is hashed once)."""
    st_ = Path(path).stat()
    return _file_sha(str(path), st_.st_size, st_.st_mtime_ns)


def _source_key(digests: Sequence[str], path_names: Sequence[tuple[str, str]]) -> str:
    return hashlib.sha256(json.dumps([list(digests), list(path_names)]).encode()).hexdigest()


def make_source(files: Sequence[str], peer: str | None, label: str, path_names: Sequence[tuple[str, str]] = (),
                names: dict[str, str] | None = None, digest: str | None = None) -> Source:
    """A `Source`; ``digest`` (the uploads' own content key) saves hashing the files again."""
    digests = [digest] if digest else [file_key(f) for f in files] + ([f"peer:{file_key(peer)}"] if peer else [])
    pn = tuple(sorted(path_names))
    return Source(tuple(files), peer, label, _source_key(digests, pn), pn, dict(names or {}))


def bundled_sources(root: str | Path) -> dict[str, tuple[tuple[str, ...], str | None]]:
    """The bundled traces under ``root`` (the repository's ``traces/``): each lab run's client.pcap
    with its server.pcap as peer, then the parser fixtures. Label -> (files, peer)."""
    root = Path(root)
    out: dict[str, tuple[tuple[str, ...], str | None]] = {}
    for d in sorted((root / "lab").glob("*/")):
        client, server = d / "client.pcap", d / "server.pcap"
        if client.is_file():
            label = f"lab/{d.name}: client.pcap" + (" + peer server.pcap" if server.is_file() else "")
            out[label] = ((str(client),), str(server) if server.is_file() else None)
    for f in sorted((root / "fixtures").glob("*.pcap*")):
        out[f"fixtures/{f.name}"] = ((str(f),), None)
    return out


# ---------------------------------------------------------------------------------------------------
# Capture and overview

def compute_load(source: Source, connection: int | None) -> tuple[Any, dict[str, Any]]:
    """Load the source and describe it (`workbench.inspect.inspect_loaded`)."""
    from workbench.capture import load
    from workbench.inspect import inspect_loaded

    src: Any
    if len(source.files) == 1:
        src = source.files[0]
    else:
        src = list(source.files)
    cap = load(src, peer=source.peer, path_names=dict(source.path_names) or None)
    return cap, inspect_loaded(cap, connection=connection)


@st.cache_resource(show_spinner=False, max_entries=8, ttl=3600)
def _load_cached(key: str, connection: int | None, _source: Source) -> tuple[Any, dict[str, Any]]:
    return compute_load(_source, connection)


@st.cache_resource(show_spinner=False, max_entries=8, ttl=3600)
def _capture_cached(key: str, _source: Source) -> Any:
    from workbench.capture import load

    src: Any = _source.files[0] if len(_source.files) == 1 else list(_source.files)
    return load(src, peer=_source.peer, path_names=dict(_source.path_names) or None)


def load_capture(source: Source) -> Any:
    """The `Capture` of ``source`` (no metrics yet: the page draws the path timelines first), cached
    by its content key."""
    return _capture_cached(source.key, source)


@st.cache_resource(show_spinner=False, max_entries=16, ttl=3600)
def _overview_cached(key: str, conn: int, _cap: Any) -> dict[str, Any]:
    from workbench.inspect import inspect_loaded

    return inspect_loaded(_cap, connection=conn)


def load_overview(source: Source, cap: Any, conn: int) -> dict[str, Any]:
    """The inspect dict of one connection (`workbench.inspect.inspect_loaded`), cached by the source's
    key and the connection."""
    return _overview_cached(source.key, conn, cap)


def load_source(source: Source, connection: int | None = None) -> tuple[Any, dict[str, Any]]:
    """(`Capture`, inspect dict) of ``source``, cached by its content key."""
    return _load_cached(source.key, connection, source)


# ---------------------------------------------------------------------------------------------------
# Timelines and what-if edits

def compute_timelines(cap: Any, conn: int) -> Any:
    """Path timelines estimated from the connection's packets (`estimate_timelines`), as they are: an
    upload (data client -> server) is replayed as one (`replay_setup` sets the experiment's direction,
    as `compare` and `report` do), so its timelines are not turned around."""
    from workbench.timeline import estimate_timelines

    return estimate_timelines(cap.connection(conn))


def data_direction(cap: Any, conn: int) -> str:
    """Which way the connection's data went: "down" (server -> client, a download) or "up" (an
    upload), by `workbench.metrics.data_direction` (more payload bytes; ties are downloads). The Paths
    tab shows and edits that direction's columns."""
    from workbench.metrics import data_direction as dd

    return "up" if dd(cap.connection(conn), conn) == "c2s" else "down"


@st.cache_resource(show_spinner=False, max_entries=16, ttl=3600)
def _timelines_cached(key: str, conn: int, _cap: Any) -> Any:
    return compute_timelines(_cap, conn)


def source_timelines(source: Source, cap: Any, conn: int) -> Any:
    """Estimated timelines of one connection, cached by the source's key."""
    return _timelines_cached(source.key, conn, cap)


@st.cache_data(show_spinner=False, max_entries=64, ttl=3600)
def _direction_cached(key: str, conn: int, _cap: Any) -> str:
    return data_direction(_cap, conn)


def source_direction(source: Source, cap: Any, conn: int) -> str:
    """`data_direction` of one connection, cached by the source's key."""
    return _direction_cached(source.key, conn, cap)


@dataclass(frozen=True)
class WhatIf:
    """What-if edits of one path: rate factor, added one-way delay (both directions) and a set
    bottleneck buffer (None = keep the estimated one)."""

    scale: float = 1.0
    delay_ms: float = 0.0
    buffer_bytes: int | None = None

    @property
    def is_identity(self) -> bool:
        return self.scale == 1.0 and self.delay_ms == 0.0 and self.buffer_bytes is None


def whatif_key(edits: dict[str, WhatIf]) -> str:
    """A stable text for a set of edits (identity edits left out)."""
    return json.dumps({p: asdict(w) for p, w in sorted(edits.items()) if not w.is_identity}, sort_keys=True)


def compute_whatif(tls: Any, edits: dict[str, WhatIf]) -> Any:
    """``tls`` with the edits applied through the library's transforms (`scale_rate`, `add_delay`,
    `set_buffer`); paths without edits are returned unchanged."""
    from workbench.timeline import add_delay, scale_rate, set_buffer

    out = tls
    for path, w in edits.items():
        if path not in out or w.is_identity:
            continue
        if w.scale != 1.0:
            if w.scale < 0:
                raise InputError(None, f"path {path}: the rate factor must be >= 0")
            out = scale_rate(out, float(w.scale), paths=path)
        if w.delay_ms:
            out = add_delay(out, round(w.delay_ms * 1e6), paths=path)
        if w.buffer_bytes is not None:
            if w.buffer_bytes < 0:
                raise InputError(None, f"path {path}: the buffer must be >= 0 bytes")
            out = set_buffer(out, int(w.buffer_bytes), paths=path)
    return out


@st.cache_resource(show_spinner=False, max_entries=32, ttl=3600)
def _whatif_cached(key: str, wkey: str, _tls: Any, _edits: dict[str, WhatIf]) -> Any:
    return compute_whatif(_tls, _edits)


def whatif_timelines(source_key: str, tls: Any, edits: dict[str, WhatIf]) -> tuple[Any, str]:
    """(edited timelines, key of source + edits)."""
    wkey = whatif_key(edits)
    key = hashlib.sha256(f"{source_key}\n{wkey}".encode()).hexdigest()
    return _whatif_cached(key, wkey, tls, edits), key


@st.cache_resource(show_spinner=False, max_entries=32, ttl=3600)
def _timeline_figure(key: str, _tls: Any) -> Any:
    from workbench.timeline import timeline_figure as figure

    return figure(_tls)


def timeline_figure(key: str, tls: Any) -> Any:
    """The plotly figure of the timelines (`workbench.timeline.timeline_figure`), cached by the
    timelines' key and shared as is (read-only: `st.plotly_chart` copies what it sends). A figure
    object, not its JSON: building a figure again from JSON re-validates every trace, on every rerun."""
    return _timeline_figure(key, tls)


def timeline_figure_json(key: str, tls: Any) -> str:
    """`timeline_figure` as plotly JSON (what the HTML report embeds)."""
    return str(timeline_figure(key, tls).to_json())


# ---------------------------------------------------------------------------------------------------
# Replays

@dataclass(frozen=True)
class WorkloadSpec:
    """``captured``: a finite transfer of the bytes the capture delivered; ``bulk``: greedy for
    ``seconds``; ``finite``: ``size_bytes`` once; ``bursts``: ``n_bursts`` x ``segments`` segments,
    ``idle_ms`` apart."""

    kind: str = "captured"
    seconds: float = 10.0
    size_bytes: int = 4_000_000
    segments: int = 64
    idle_ms: float = 200.0
    n_bursts: int = 10

    def describe(self, delivered: int | None = None) -> str:
        return {"captured": f"finite {delivered or '?'} bytes (delivered in the capture)",
                "bulk": f"bulk for {self.seconds:g} s", "finite": f"finite {self.size_bytes} bytes",
                "bursts": f"{self.n_bursts} bursts of {self.segments} segments, {self.idle_ms:g} ms idle"
                }.get(self.kind, self.kind)


@dataclass(frozen=True)
class ConnSpec:
    """Connection settings a user may change: congestion control, send buffer (None = Linux
    autotuning), receive buffer (None = the one behind the largest window the capture shows), seed."""

    cc: str = "cubic"
    send_buf_bytes: int | None = None
    rcv_buf_bytes: int | None = None
    seed: int = 0


@dataclass(frozen=True)
class ReplaySpec:
    """One replay: scheduler name, its parameters (sorted pairs), workload and connection."""

    scheduler: str
    params: tuple[tuple[str, Any], ...]
    workload: WorkloadSpec
    conn: ConnSpec

    def key(self, timelines_key: str) -> str:
        doc = [timelines_key, self.scheduler, [list(p) for p in self.params], asdict(self.workload),
               asdict(self.conn)]
        return hashlib.sha256(json.dumps(doc, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class ConnSettings:
    """What the replays take from the capture besides its paths: the stack, when the client joined its
    second subflow, and which way the data went ("down" or "up": an upload is replayed as one)."""

    stack: Any
    join_after_ns: int
    direction: str
    notes: tuple[str, ...] = ()


def connection_settings(cap: Any, conn: int, spec: ConnSpec) -> ConnSettings:
    """The connection settings of the replays, from `workbench.capture_experiment.capture_settings`:
    the one reader `compare` and `report` use too (MSS, header bytes, join delay and data direction as
    the capture shows them, an upstream-Linux stack), with the user's buffers and congestion control.
    What the capture cannot say (CSV exports: no frame lengths) falls back to the model's defaults,
    with a note."""
    from workbench.capture_experiment import capture_settings, capture_stack

    try:
        cs = capture_settings(cap, conn)
    except (InputError, TypeError, ValueError) as e:
        try:
            direction = data_direction(cap, conn)
        except (InputError, ValueError):
            direction = "down"
        return ConnSettings(capture_stack(None, congestion_control=spec.cc, rcv_buf_bytes=spec.rcv_buf_bytes,
                                          send_buf_bytes=spec.send_buf_bytes), 0, direction,
                            (f"connection settings not readable from the capture ({e}): model defaults used",))
    return ConnSettings(capture_stack(cs, congestion_control=spec.cc, rcv_buf_bytes=spec.rcv_buf_bytes,
                                      send_buf_bytes=spec.send_buf_bytes), cs.join_after_ns, cs.direction,
                        tuple(cs.warnings))


def replay_plan(cap: Any, conn: int, overview: dict[str, Any], wl: WorkloadSpec) -> tuple[Any, int, str]:
    """(workload, duration cap in ns, description) of the replays."""
    from workbench.experiment import BulkWorkload as Bulk
    from workbench.experiment import BurstsWorkload as Bursts
    from workbench.experiment import FiniteWorkload as Finite

    ev = cap.connection(conn)
    span_ns = int(ev["t_ns"].max() - ev["t_ns"].min())
    finite_cap = max(FINITE_CAP_FACTOR * span_ns, 30_000_000_000)
    delivered = overview["detail"]["metrics"].get("delivered_bytes")
    if wl.kind == "captured":
        if delivered:
            return Finite(size_bytes=int(delivered)), finite_cap, wl.describe(int(delivered))
        # Taken at the sender only: no receiver-side rows say what was delivered, but what the
        # sender put on the wire for the first time is the same amount for a transfer that ended.
        sent = sent_bytes(cap, conn, overview)
        if not sent:
            raise InputError(cap.source, "no data sent or delivered in this capture: pick another workload")
        return Finite(size_bytes=sent), finite_cap, (f"finite {sent} bytes (sent in the capture; the "
                                                     "receiver's side was not captured)")
    if wl.kind == "bulk":
        if wl.seconds <= 0:
            raise InputError(None, "the bulk transfer needs a positive duration")
        stop = round(wl.seconds * 1e9)
        # After the writer stops the connection drains; give it as long again (at least 10 s).
        return Bulk(stop_ns=stop), stop + max(stop, 10_000_000_000), wl.describe()
    if wl.kind == "finite":
        if wl.size_bytes <= 0:
            raise InputError(None, "the finite transfer needs a positive number of bytes")
        return Finite(size_bytes=int(wl.size_bytes)), finite_cap, wl.describe()
    if wl.kind == "bursts":
        if wl.segments <= 0 or wl.n_bursts <= 0 or wl.idle_ms < 0:
            raise InputError(None, "bursts need segments > 0, a count > 0 and an idle time >= 0")
        return (Bursts(segments=int(wl.segments), idle_ns=round(wl.idle_ms * 1e6), n_bursts=int(wl.n_bursts)),
                finite_cap + round(wl.n_bursts * wl.idle_ms * 1e6), wl.describe())
    raise InputError(None, f"unknown workload {wl.kind!r}")


@dataclass(frozen=True)
class ReplaySetup:
    """Everything a replay needs besides the scheduler, as an `Experiment` (its scheduler is a
    placeholder): the paths with what-if edits as links, the workload, the stack read off the capture,
    the duration cap and the seed, with the workload described in words. The Replay tab and the Tune
    tab both replay exactly this (`replay_setup` is the one place it is built), so a scheduler with
    the same parameters gives the same numbers in both."""

    experiment: Any
    workload_text: str
    notes: tuple[str, ...] = ()

    @property
    def duration_ns(self) -> int:
        return int(self.experiment.duration_ns)

    @property
    def seed(self) -> int:
        return int(self.experiment.seed)

    # The model engine's view of the same experiment (what the tuner's objective replays).
    @property
    def paths(self) -> tuple[Any, ...]:
        from workbench.backends._model import engine_paths
        return tuple(engine_paths(self.experiment))

    @property
    def workload(self) -> Any:
        from workbench.backends._model import engine_workload
        return engine_workload(self.experiment.transfers[0].workload)

    @property
    def conn(self) -> Any:
        from workbench.backends._model import engine_connection
        joins = [s.join_after_ns for s in self.experiment.subflows[1:]]
        return engine_connection(self.experiment.stack, join_after_ns=joins[0] if joins else 0)

    def for_scheduler(self, scheduler: str, params: Any = ()) -> Any:
        from dataclasses import replace

        from workbench.experiment import SchedulerSpec
        return replace(self.experiment, scheduler=SchedulerSpec.of(scheduler, dict(params)))

    def run(self, scheduler: str, params: Any = (), *, backend: str = "model") -> Any:
        """One run of this setup with ``scheduler(**params)`` on a backend (a `Run`)."""
        from workbench.backends import get_backend
        return get_backend(backend).run(self.for_scheduler(scheduler, params))


def replay_setup(cap: Any, conn: int, overview: dict[str, Any], tls: Any, wl: WorkloadSpec,
                 cs: ConnSpec) -> ReplaySetup:
    """The one function that turns the page's inputs (capture, timelines with what-if, workload and
    connection settings) into what is replayed; see `ReplaySetup`. With the defaults (captured
    workload, cubic, autotuned send buffer, 32 MiB receive buffer, seed 0) it is the experiment
    `workbench.compare.compare_capture` replays for the same capture, uploads included (tested)."""
    from workbench.capture_experiment import timelines_experiment

    workload, duration_ns, text = replay_plan(cap, conn, overview, wl)
    settings = connection_settings(cap, conn, cs)
    e = timelines_experiment(tls, workload=workload, scheduler="upstream", stack=settings.stack,
                             seed=int(cs.seed), duration_ns=int(duration_ns), join_after_ns=settings.join_after_ns,
                             direction="up" if settings.direction == "up" else "down",
                             default_owd_ns=DEFAULT_OWD_NS)
    return ReplaySetup(e, text, settings.notes)


def kernel_available() -> str | None:
    """None when this machine can run the kernel backend, else why not (one line)."""
    try:
        from workbench.backends._kernel import LabUnavailable, check_environment
    except ImportError as e:
        return str(e)
    try:
        check_environment()
    except LabUnavailable as e:
        return str(e)
    return None


def compute_kernel(setup: ReplaySetup) -> dict[str, Any]:
    """The real kernel (upstream scheduler) on the same experiment: its metrics row, kind "kernel"."""
    from workbench.metrics import prepare, summarize_prepared
    from workbench.report.figures import source_data

    r = setup.run("upstream", backend="kernel")
    prep = prepare(r.events)
    row: dict[str, Any] = {"source": "kernel", "kind": "kernel", "params": "upstream (real Linux kernel)"}
    row |= dict(summarize_prepared(prep))
    row["completed"] = bool(r.counters.get("completed", True))
    row["emulation_ok"] = bool(r.counters.get("emulation_ok", True))
    return {"row": row, "figures": source_data("kernel", "kernel", prep, None, _MAX_POINTS),
            "wall_s": float(r.provenance.get("wall_s") or 0.0), "warnings": list(r.warnings)}


def sent_bytes(cap: Any, conn: int, overview: dict[str, Any]) -> int:
    """Data bytes the sender sent once (no retransmissions, no reinjections), as seen at the sender."""
    import polars as pl

    ev = cap.connection(conn)
    data_dir = overview["detail"]["data_dir"]
    first = ev.filter((pl.col("dir") == data_dir) & (pl.col("point") == "snd") & ~pl.col("is_retrans")
                      & ~pl.col("is_reinject"))
    return int(first["payload_bytes"].sum() or 0)


def compute_replay(setup: ReplaySetup, spec: ReplaySpec) -> dict[str, Any]:
    """Replay ``setup`` with one scheduler; returns the metrics row (`summarize`, plus the scheduler's
    parameters) and the figure series (`workbench.report.figures.source_data`), plain data."""
    from workbench.metrics import prepare, summarize_prepared
    from workbench.report.figures import source_data

    r = setup.run(spec.scheduler, spec.params)
    prep = prepare(r.events)
    row: dict[str, Any] = {"source": spec.scheduler, "kind": "scheduler", "params": params_text(spec.params)}
    row |= dict(summarize_prepared(prep, r.samples))
    row["completed"] = bool(r.counters.get("completed"))
    return {"row": row, "figures": source_data(spec.scheduler, "scheduler", prep, r.samples, _MAX_POINTS),
            "wall_s": float(r.provenance.get("wall_s") or 0.0)}


def params_text(params: Any) -> str:
    """``name=value`` pairs of a scheduler's parameters, as they are recorded in tables and CSVs."""
    items = sorted(dict(params).items())
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in items)


def fill_notes(tls: Any) -> list[str]:
    """What the replay assumes beyond the timelines (`fill_unknown`'s notes), one line per item."""
    from workbench.timeline import fill_unknown

    out = []
    for tl in tls.values():
        try:
            filled = fill_unknown(tl, default_owd_ns=DEFAULT_OWD_NS)
        except InputError as e:
            out.append(str(e))
            continue
        out.extend(f"{tl.name}: {n}" for n in filled.notes if n not in tl.notes)
    return out


@st.cache_data(show_spinner=False, max_entries=128, ttl=3600)
def _replay_cached(key: str, _setup: ReplaySetup, _spec: ReplaySpec) -> dict[str, Any]:
    return compute_replay(_setup, _spec)


def replay_scheduler(timelines_key: str, setup: ReplaySetup, spec: ReplaySpec) -> dict[str, Any]:
    """`compute_replay`, cached by (timelines key, scheduler, parameters, workload, connection): the
    setup is a function of exactly those (`replay_setup`)."""
    return _replay_cached(spec.key(timelines_key), setup, spec)


def compute_observed(cap: Any, conn: int) -> dict[str, Any]:
    """The observed row and figure series of the capture's connection (same functions as replays)."""
    from workbench.metrics import prepare, summarize_prepared
    from workbench.report.figures import source_data

    prep = prepare(cap.connection(conn), conn)
    row = {"source": "observed", "kind": "observed"} | dict(summarize_prepared(prep))
    return {"row": row, "figures": source_data("observed", "observed", prep, None, _MAX_POINTS)}


@st.cache_data(show_spinner=False, max_entries=16, ttl=3600)
def _observed_cached(key: str, conn: int, _cap: Any) -> dict[str, Any]:
    return compute_observed(_cap, conn)


def observed_source(source: Source, cap: Any, conn: int) -> dict[str, Any]:
    """`compute_observed`, cached by the source's key."""
    return _observed_cached(source.key, conn, cap)


def trust_warnings(source: Source, warnings: Sequence[str], tls: Any) -> list[str]:
    """What limits every replayed number of this input, one sentence each: the timelines' caveats
    (single vantage point, assumed values, lower-bound buffers, missing subflows, ...; see
    `workbench.timeline.Caveat`) and, where the timelines carry none yet, what the page can tell itself:
    one vantage point, assumed values in the notes, subflows the capture misses."""
    out: list[str] = []
    caveats = list(getattr(tls, "caveats", None) or []) if tls is not None else []
    out.extend(str(c) for c in caveats)
    kinds = {getattr(c, "kind", "") for c in caveats}
    if source.peer is None and "single_vantage" not in kinds:
        out.append("one vantage point (no peer capture): one-way delays, queueing and losses of the paths are "
                   "estimated from one end, and every replayed delay depends on them")
    if "assumed" not in kinds and tls is not None:
        out.extend(f"{tl.name}: {n}" for tl in tls.values() for n in tl.notes if "assum" in n)
    if "missing_subflows" not in kinds:
        out.extend(w for w in warnings if "subflow" in w and ("missing" in w or "no counterpart" in w
                                                              or "not in" in w))
    return list(dict.fromkeys(out))


@st.cache_resource(show_spinner=False, max_entries=16, ttl=3600)
def _capture_view_cached(key: str, conn: int, truth_key: tuple[tuple[str, str], ...], lab_folder: str | None,
                         _truth: tuple[tuple[str, str], ...], _cap: Any, _tls: Any) -> Any:
    from workbench.report.capture_views import capture_view_data, capture_view_figure, lab_truth, read_truth

    truth = [read_truth(f, path_name=p) for f, p in _truth]
    if lab_folder and not truth:
        truth = lab_truth(lab_folder, list(_tls))
    data = capture_view_data(_cap.connection(conn), conn, timelines=_tls, truth=truth)
    return capture_view_figure(data, title="")


def capture_view(source: Source, cap: Any, conn: int, tls: Any, truth: tuple[tuple[str, str], ...] = (),
                 *, lab_folder: str | None = None) -> Any:
    """The capture views (`workbench.report.capture_views`) as a plotly figure, cached by the source's
    key, the connection and the ground-truth files (by content), shared as is (read-only).
    ``lab_folder``: a bundled lab run's folder, whose ``rate<N>.csv`` / ``owd<N>.csv`` are overlaid
    when no file is given."""
    truth_key = tuple((file_key(f), p) for f, p in truth)
    return _capture_view_cached(source.key, conn, truth_key, lab_folder, tuple(truth), cap, tls)
