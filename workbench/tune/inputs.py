"""Tuning inputs: what each ``INPUT`` on the command line becomes — one replay setting (paths,
workload, stack, duration) as an `Experiment` that every trial runs with its candidate parameters on
the model backend.

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
from typing import Any, Literal

from workbench.errors import InputError

__all__ = ["DEFAULT_MAX_DURATION_NS", "TuneInput", "inputs_key", "load_inputs", "parse_workload"]

# Without an explicit --duration a timeline input replays its own length, capped here: long
# captures would make every trial minutes long.
DEFAULT_MAX_DURATION_NS = 30_000_000_000


@dataclass
class TuneInput:
    """One replay setting as an `Experiment` (its scheduler and seed are set per trial);
    ``label`` is unique among the inputs."""

    label: str
    source: str
    experiment: Any
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        return int(self.experiment.duration_ns)

    @property
    def workload(self) -> Any:
        return self.experiment.transfers[0].workload

    @property
    def paths(self) -> list[Any]:
        """The model engine's paths of this experiment."""
        from workbench.backends._model import engine_paths
        return engine_paths(self.experiment)

    @property
    def finite(self) -> bool:
        """Whether the workload ends by itself (then completion time is defined)."""
        from workbench.experiment import BulkWorkload

        return not isinstance(self.workload, BulkWorkload)

    def for_trial(self, scheduler: Any, *, seed: int) -> Any:
        """The experiment with a trial's scheduler (a name, `SchedulerSpec` or instance) and seed."""
        from dataclasses import replace

        from workbench.experiment import SchedulerSpec
        spec = (scheduler if isinstance(scheduler, SchedulerSpec) else SchedulerSpec.of(scheduler)
                if isinstance(scheduler, str) else SchedulerSpec.instance(scheduler))
        return replace(self.experiment, scheduler=spec, seed=seed)


def parse_workload(text: str) -> Any:
    """``bulk[:SECONDS]`` | ``finite:SIZE`` | ``bursts:SEGMENTS:IDLE_MS[:COUNT]`` -> a workload spec
    (`workbench.experiment.parse_workload`, the one parser `replay` uses too)."""
    from workbench.experiment import parse_workload as parse

    try:
        return parse(text)
    except ValueError as e:
        raise InputError(None, f"--workload {text!r}: {e}") from None


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
    from workbench.capture_experiment import timelines_experiment
    from workbench.experiment import BulkWorkload, stack_profile
    from workbench.scenario import lab_scenario, load_scenario
    from workbench.timeline import open_timelines, sniff_timeline_input

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
            return TuneInput(text, str(first), sc.to_experiment(duration_ns=int(dur or DEFAULT_MAX_DURATION_NS)),
                             {"kind": "lab"})
        parts = [server, client]
    kinds = [sniff_timeline_input(p) for p in parts]
    if len(parts) == 1 and kinds[0] == "scenario" and first.suffix.lower() in (".yaml", ".yml", ".json"):
        sc = load_scenario(first)
        wl = sc.workload_spec
        dur = min(x for x in (sc.duration_ns, cap) if x) if (sc.duration_ns or cap) else None
        if dur is None:
            if isinstance(wl, BulkWorkload) and wl.stop_ns is None:
                raise InputError(first, "a bulk scenario needs duration_s (or give --duration)")
            dur = DEFAULT_MAX_DURATION_NS
        return TuneInput(text, str(first), sc.to_experiment("upstream", duration_ns=int(dur)), {"kind": "scenario"})
    if len(parts) == 2 and all(k == "capture" for k in kinds):
        tls = open_timelines([parts[0]], peer=parts[1])
    else:
        tls = open_timelines(parts)
    span = _timeline_span_ns(tls)
    dur = cap if cap is not None else min(span or DEFAULT_MAX_DURATION_NS, DEFAULT_MAX_DURATION_NS)
    direction: Literal["down", "up"]
    stack, join_ns, direction = stack_profile("linux-upstream"), 0, "down"
    if kinds[0] == "capture":
        # a capture (pair): the stack it shows, as compare, report and the page read it
        from workbench.capture import load
        from workbench.capture_experiment import capture_settings, capture_stack
        cap_obj = load(parts[0], peer=parts[1] if len(parts) == 2 and kinds[1] == "capture" else None)
        cs = capture_settings(cap_obj, cap_obj.main_connection)
        # an upload capture is replayed as an upload, as compare, report and the page do
        stack, join_ns, direction = capture_stack(cs), cs.join_after_ns, cs.direction
    e = timelines_experiment(tls, workload=workload, scheduler="upstream", stack=stack, duration_ns=int(dur),
                             join_after_ns=join_ns, direction=direction)
    return TuneInput(text, text, e, {"kind": "timelines", "span_ns": span})


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
