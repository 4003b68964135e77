"""Tuning inputs: what each ``INPUT`` on the command line becomes — one replay setting (paths,
workload, connection, duration) that every trial replays with its candidate parameters.

An INPUT is one of:

* a scenario file (YAML/JSON with ``paths``): paths, workload, connection and duration from the file;
* a lab run's ``results.json`` (``traces/lab/*``): its configured constant paths (`lab_scenario`);
* a folder holding ``client.pcap`` + ``server.pcap`` (the lab layout): the pair, one-way delays exact;
* ``a.pcap+b.pcap``: a capture and the capture of the same session at the other end;
* any other file `open_timelines` reads (a capture, saved timelines, mahimahi, rate CSV, ping, ...),
  or several joined by ``+`` whose paths make up one session (``wifi.csv+lte.down``).

Inputs other than scenario files get the workload given on the command line (default: bulk) and run
for ``duration`` (default: the timelines' own length, at most 30 s). ``duration`` also caps scenario
and lab runs: tuning wants many short replays more than a few long ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import InputError

__all__ = ["DEFAULT_MAX_DURATION_NS", "TuneInput", "inputs_key", "load_inputs", "parse_workload"]

# Without an explicit --duration a timeline input replays its own length, capped here: long
# captures would make every trial minutes long.
DEFAULT_MAX_DURATION_NS = 30_000_000_000


@dataclass
class TuneInput:
    """One replay setting. ``paths`` are `PathConfig`s; ``label`` is unique among the inputs."""

    label: str
    source: str
    paths: list[Any]
    workload: Any
    conn: Any
    duration_ns: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def finite(self) -> bool:
        """Whether the workload ends by itself (then completion time is defined)."""
        from workbench.replay import AppTrace, Bursts, Finite

        return isinstance(self.workload, Finite | AppTrace | Bursts)


def parse_workload(text: str) -> Any:
    """``bulk`` | ``finite:BYTES`` (suffixes k/M/G = 10^3/10^6/10^9, KiB/MiB too) -> a Workload."""
    from workbench.replay import Bulk, Finite

    t = text.strip().lower()
    if t == "bulk":
        return Bulk()
    kind, _, size = t.partition(":")
    if kind == "finite" and size:
        units = {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
                 "k": 1000, "m": 1000**2, "g": 1000**3, "b": 1}
        for u in sorted(units, key=len, reverse=True):
            if size.endswith(u):
                number, scale = size[: -len(u)], units[u]
                break
        else:
            number, scale = size, 1
        try:
            n_bytes = round(float(number) * scale)
        except ValueError:
            n_bytes = 0
        if n_bytes > 0:
            return Finite(size_bytes=n_bytes)
    raise InputError(None, f"--workload must be bulk or finite:BYTES (e.g. finite:4MB), not {text!r}")


def _is_lab_results(p: Path) -> bool:
    if p.name != "results.json" or not p.is_file():
        return False
    try:
        return "configured" in json.loads(p.read_text())
    except (OSError, ValueError):
        return False


def _timeline_span_ns(tls: Any) -> int | None:
    spans = [tl.duration_ns for tl in tls.values() if tl.duration_ns]
    return max(spans) if spans else None


def _one(text: str, *, workload: Any, duration_ns: int | None) -> TuneInput:
    from workbench.replay import Bulk, ConnectionConfig
    from workbench.scenario import lab_scenario, load_scenario
    from workbench.timeline import open_timelines, sniff_timeline_input, to_path_configs

    parts = [Path(s) for s in text.split("+") if s]
    if not parts:
        raise InputError(None, f"empty input {text!r}")
    for p in parts:
        if not p.exists():
            raise InputError(p, "no such file or folder")
    first = parts[0]
    cap = duration_ns
    if len(parts) == 1 and (first.is_dir() or _is_lab_results(first)):
        folder = first if first.is_dir() else first.parent
        client, server = folder / "client.pcap", folder / "server.pcap"
        if first.is_dir() and not (client.is_file() and server.is_file()):
            raise InputError(first, "a folder input needs client.pcap and server.pcap in it")
        if not first.is_dir():
            sc = lab_scenario(first)
            dur = min(x for x in (sc.duration_ns, cap) if x) if (sc.duration_ns or cap) else None
            return TuneInput(text, str(first), sc.paths, sc.workload, sc.conn, int(dur or DEFAULT_MAX_DURATION_NS),
                             {"kind": "lab"})
        parts = [server, client]
    kinds = [sniff_timeline_input(p) for p in parts]
    if len(parts) == 1 and kinds[0] == "scenario" and first.suffix.lower() in (".yaml", ".yml", ".json"):
        sc = load_scenario(first)
        wl = sc.workload
        dur = min(x for x in (sc.duration_ns, cap) if x) if (sc.duration_ns or cap) else None
        if dur is None:
            if isinstance(wl, Bulk) and wl.stop_ns is None:
                raise InputError(first, "a bulk scenario needs duration_s (or give --duration)")
            dur = DEFAULT_MAX_DURATION_NS
        return TuneInput(text, str(first), sc.paths, wl, sc.conn, int(dur), {"kind": "scenario"})
    if len(parts) == 2 and all(k == "capture" for k in kinds):
        tls = open_timelines([parts[0]], peer=parts[1])
    else:
        tls = open_timelines(parts)
    span = _timeline_span_ns(tls)
    dur = cap if cap is not None else min(span or DEFAULT_MAX_DURATION_NS, DEFAULT_MAX_DURATION_NS)
    return TuneInput(text, text, to_path_configs(tls, duration_ns=dur), workload, ConnectionConfig(), int(dur),
                     {"kind": "timelines", "span_ns": span})


def load_inputs(items: Sequence[str | Path], *, workload: str = "bulk",
                duration_ns: int | None = None) -> list[TuneInput]:
    """Every INPUT opened once (estimation from captures is the slow part; trials reuse the result)."""
    if not items:
        raise InputError(None, "no input given")
    wl = parse_workload(workload)
    out: list[TuneInput] = []
    for item in items:
        out.append(_one(str(item), workload=wl, duration_ns=duration_ns))
    # Labels name inputs in tables and trial attributes: the shortest unique tail of each path.
    labels = [_short(i.source) for i in out]
    for k, i in enumerate(out):
        i.label = labels[k] if labels.count(labels[k]) == 1 else f"{labels[k]}#{k}"
    return out


def _short(source: str) -> str:
    parts = []
    for piece in source.split("+"):
        p = Path(piece)
        parts.append(f"{p.parent.name}/{p.name}" if p.parent.name else p.name)
    return "+".join(parts)


def inputs_key(items: Sequence[str | Path]) -> str:
    """A short stable hash of the input list (part of the default study name)."""
    text = "\n".join(str(Path(str(i)).resolve()) if "+" not in str(i) else str(i) for i in items)
    return hashlib.sha256(text.encode()).hexdigest()[:8]
