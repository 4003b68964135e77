"""The page's work, as plain functions over library calls, each cached by a key over content.

What the page shows is a chain: source files -> `Capture` + inspect dict -> estimated timelines ->
what-if timelines -> one replay per scheduler -> metrics rows and figure series. Every step is keyed
by a string built from the content hash of the input files and the settings that matter, so the same
upload in another tab or session, or revisiting a tab, reuses the result instead of recomputing.

Two caches: ``st.cache_resource`` for the big shared objects (a `Capture`, `Timelines`: returned as
is, never copied; treated as read-only, which the library's functions respect since they return new
objects), ``st.cache_data`` for replay results (plain dicts, small). Arguments whose names start
with ``_`` are not hashed by streamlit: they are the objects the key already stands for.

The functions here decide what to run; every number comes from `workbench.*` (inspect, timeline,
compare.replay_settings, replay, metrics, report.figures). The uncached ``compute_*`` functions are
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
    "RCV_BUF_DEFAULT",
    "ConnSpec",
    "ReplaySpec",
    "Source",
    "WhatIf",
    "WorkloadSpec",
    "bundled_sources",
    "compute_replay",
    "connection_config",
    "file_key",
    "fill_notes",
    "load_source",
    "observed_source",
    "replay_plan",
    "replay_scheduler",
    "source_timelines",
    "whatif_timelines",
]

# As workbench.compare: a finite replay may take this many times the capture's duration (at least
# 30 s) before it is cut, so a scheduler slower than the kernel is still seen finishing.
FINITE_CAP_FACTOR = 4
RCV_BUF_DEFAULT = 32 << 20          # Linux tcp_rmem max, as workbench.compare
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


def load_source(source: Source, connection: int | None = None) -> tuple[Any, dict[str, Any]]:
    """(`Capture`, inspect dict) of ``source``, cached by its content key."""
    return _load_cached(source.key, connection, source)


# ---------------------------------------------------------------------------------------------------
# Timelines and what-if edits

def compute_timelines(cap: Any, conn: int) -> Any:
    """Path timelines estimated from the connection's packets (`estimate_timelines`)."""
    from workbench.timeline import estimate_timelines

    return estimate_timelines(cap.connection(conn))


@st.cache_resource(show_spinner=False, max_entries=16, ttl=3600)
def _timelines_cached(key: str, conn: int, _cap: Any) -> Any:
    return compute_timelines(_cap, conn)


def source_timelines(source: Source, cap: Any, conn: int) -> Any:
    """Estimated timelines of one connection, cached by the source's key."""
    return _timelines_cached(source.key, conn, cap)


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


@st.cache_data(show_spinner=False, max_entries=32, ttl=3600)
def _timeline_figure_json(key: str, _tls: Any) -> str:
    from workbench.timeline import timeline_figure

    return str(timeline_figure(_tls).to_json())


def timeline_figure_json(key: str, tls: Any) -> str:
    """The plotly figure of the timelines as JSON (`timeline_figure`), cached by the timelines' key."""
    return _timeline_figure_json(key, tls)


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
    autotuning), receive buffer, seed."""

    cc: str = "cubic"
    send_buf_bytes: int | None = None
    rcv_buf_bytes: int = RCV_BUF_DEFAULT
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


def connection_config(cap: Any, conn: int, spec: ConnSpec) -> tuple[Any, list[str]]:
    """The replay's `ConnectionConfig`: MSS, header bytes and join delay as the capture shows them
    (`workbench.compare.replay_settings`), an upstream-Linux receiver (as `workbench.compare`), and
    the user's buffers and congestion control. CSV exports cannot say (no frame lengths): engine
    defaults, with a note."""
    from workbench.compare import replay_settings
    from workbench.replay import ConnectionConfig

    common = {"cc": spec.cc, "send_buf_bytes": spec.send_buf_bytes, "rcv_buf_bytes": spec.rcv_buf_bytes,
              "quickack_on_meta_ooo": False}
    try:
        rs = replay_settings(cap, conn)
        return ConnectionConfig(mss_bytes=int(rs["mss_bytes"]), header_bytes=int(rs["header_bytes"]),
                                join_delay_ns=int(rs["join_delay_ns"]), **common), []
    except (InputError, TypeError, ValueError) as e:
        return ConnectionConfig(**common), [f"connection settings not readable from the capture ({e}): "
                                            "engine defaults used"]


def replay_plan(cap: Any, conn: int, overview: dict[str, Any], wl: WorkloadSpec) -> tuple[Any, int, str]:
    """(workload, duration cap in ns, description) of the replays."""
    from workbench.replay import Bulk, Bursts, Finite

    ev = cap.connection(conn)
    span_ns = int(ev["t_ns"].max() - ev["t_ns"].min())  # type: ignore[operator]
    finite_cap = max(FINITE_CAP_FACTOR * span_ns, 30_000_000_000)
    delivered = overview["detail"]["metrics"].get("delivered_bytes")
    if wl.kind == "captured":
        if not delivered:
            raise InputError(cap.source, "no data delivered in order in this capture: pick another workload")
        return Finite(size_bytes=int(delivered)), finite_cap, wl.describe(int(delivered))
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


def compute_replay(tls: Any, spec: ReplaySpec, workload: Any, duration_ns: int, cfg: Any) -> dict[str, Any]:
    """Replay ``tls`` with one scheduler; returns the metrics row (`summarize`) and the figure series
    (`workbench.report.figures.source_data`), plain data."""
    from workbench.metrics import summarize
    from workbench.replay import run_replay
    from workbench.report.figures import source_data
    from workbench.schedulers import get
    from workbench.timeline import to_path_configs

    paths = to_path_configs(tls, duration_ns=duration_ns, default_owd_ns=DEFAULT_OWD_NS)
    r = run_replay(paths, get(spec.scheduler, **dict(spec.params)), workload=workload, conn=cfg,
                   seed=spec.conn.seed, duration_ns=duration_ns)
    row = {"source": spec.scheduler, "kind": "scheduler"} | dict(summarize(r.events, r.samples))
    row["completed"] = bool(r.summary.get("completed"))
    return {"row": row, "figures": source_data(spec.scheduler, "scheduler", r.events, r.samples, None, _MAX_POINTS),
            "wall_s": float(r.summary.get("wall_s") or 0.0)}


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
def _replay_cached(key: str, _tls: Any, _spec: ReplaySpec, _workload: Any, duration_ns: int, _cfg: Any
                   ) -> dict[str, Any]:
    return compute_replay(_tls, _spec, _workload, duration_ns, _cfg)


def replay_scheduler(timelines_key: str, tls: Any, spec: ReplaySpec, workload: Any, duration_ns: int,
                     cfg: Any) -> dict[str, Any]:
    """`compute_replay`, cached by (timelines key, scheduler, parameters, workload, connection)."""
    return _replay_cached(spec.key(timelines_key), tls, spec, workload, duration_ns, cfg)


def compute_observed(cap: Any, conn: int) -> dict[str, Any]:
    """The observed row and figure series of the capture's connection (same functions as replays)."""
    from workbench.metrics import summarize
    from workbench.report.figures import source_data

    ev = cap.connection(conn)
    row = {"source": "observed", "kind": "observed"} | dict(summarize(ev, conn=conn))
    return {"row": row, "figures": source_data("observed", "observed", ev, None, conn, _MAX_POINTS)}


@st.cache_data(show_spinner=False, max_entries=16, ttl=3600)
def _observed_cached(key: str, conn: int, _cap: Any) -> dict[str, Any]:
    return compute_observed(_cap, conn)


def observed_source(source: Source, cap: Any, conn: int) -> dict[str, Any]:
    """`compute_observed`, cached by the source's key."""
    return _observed_cached(source.key, conn, cap)
