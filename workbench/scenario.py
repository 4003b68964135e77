"""Scenario files (YAML or JSON, mpshell-like): the paths, the connection settings, the workload and
the scheduler of one replay. The `paths` section is the timeline scenario format
(`workbench.timeline.importers.scenario`: constant values, ``[[t_s, value], ...]`` series, ``{file:
...}`` / ``{csv: ...}`` rate or delay files, ``{mahimahi: ...}`` traces), so a scenario's paths are
timelines with provenance and the replay sees them through `to_path_configs`.

```yaml
duration_s: 10            # simulated time cap (needed for an endless bulk workload)
seed: 0
scheduler: minrtt          # or {name: minrtt, params: {opportunistic: false}}
paths:
  - name: wifi
    rate_mbps: 30          # constant, [[t_s, Mbit/s], ...], {file: rate1.csv} or {mahimahi: x.down}
    owd_ms: 10             # both directions; or owd_down_ms / owd_up_ms (constant, series or file)
    buffer_packets: 50     # or buffer_bytes: 75000
    loss: 0.0              # per-packet probability downlink; loss_up for the uplink
  - name: lte
    rate_mbps: {file: lte_rate.csv}
    owd_down: [[0, 40], [5, 80]]
    buffer_bytes: 600000
stack: {profile: linux-upstream, tcp_rmem: [4096, 131072, 6291456], congestion_control: cubic}
                          # kernel-named settings (workbench.experiment.StackProfile); the older
                          # `connection: {cc: ..., rcv_buf_bytes: ...}` names are accepted too
direction: down           # down = download (server sends), up = upload
shared:                   # optional bottlenecks shared by paths (same keys as a path)
  - {name: core, rate_mbps: 25, owd_ms: 2, buffer_packets: 100}
# a path with `via: [core]` crosses core after its own link (server -> core -> path -> client)
subflows: [wifi, wifi, lte]   # optional; default one per path; or {path: lte, backup: true}
workload: {bulk: {stop_s: 8}}   # or {finite: {bytes: 4000000}}, {bursts: {segments: 10, idle_ms:
                                # 500, count: 20}}, {trace: [[t_s, bytes], ...] or {csv: app.csv}}
```

Errors are `InputError`s naming the file and the offending key; a top-level key not shown above is
refused with the closest valid one (`workbench._safe_refs.SCENARIO_KEYS`), never ignored.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench._safe_refs import check_scenario_keys, check_scenario_sizes, load_document, resolve_ref
from workbench.errors import InputError
from workbench.experiment import (
    PACKET_BYTES,
    BulkWorkload,
    Experiment,
    FiniteWorkload,
    PathSpec,
    SchedulerSpec,
    StackProfile,
    SubflowSpec,
    WorkloadSpec,
    experiment_from_paths,
    parse_stack,
    parse_workload,
    stack_profile,
)
from workbench.replay.paths import PathConfig, path_specs

if TYPE_CHECKING:
    from workbench.backends import Run
    from workbench.replay import ConnectionConfig, Workload

__all__ = ["PACKET_BYTES", "Scenario", "lab_scenario", "load_scenario", "scenario_from_dict"]


@dataclass
class Scenario:
    """A scenario file, resolved: paths, workload, stack, scheduler, direction, seed and duration.
    ``to_experiment()`` makes the `Experiment` every backend runs."""

    paths: list[PathConfig]
    workload_spec: WorkloadSpec
    stack: StackProfile
    scheduler: Any = None          # a Scheduler instance, or None if the file names none
    duration_ns: int | None = None
    seed: int = 0
    source: str = ""
    direction: str = "down"
    join_after_ns: int = 0
    backup: tuple[str, ...] = ()
    shared: list[PathConfig] = field(default_factory=list)       # bottlenecks shared by paths
    via: dict[str, tuple[str, ...]] = field(default_factory=dict)  # path -> shared links it crosses
    subflows: tuple[SubflowSpec, ...] | None = None                # None: one per path

    @property
    def workload(self) -> Workload:
        """The model engine's writer for this workload (a fresh one each time)."""
        from workbench.backends._model import engine_workload
        return engine_workload(self.workload_spec)

    @property
    def conn(self) -> ConnectionConfig:
        """The model engine's connection settings for this stack."""
        from workbench.backends._model import engine_connection
        return engine_connection(self.stack, join_after_ns=self.join_after_ns, backup=self.backup)

    def to_experiment(self, scheduler: Any = None, *, workload: WorkloadSpec | None = None, seed: int | None = None,
                      duration_ns: int | None = None) -> Experiment:
        """The experiment of this scenario; arguments override the file's (``scheduler``: a
        `SchedulerSpec`, a registered name or a scheduler instance)."""
        sched = scheduler if scheduler is not None else self.scheduler
        if sched is None:
            raise InputError(self.source, "no scheduler given (in the file or as an argument)")
        if isinstance(sched, str):
            sched = SchedulerSpec.of(sched)
        e = experiment_from_paths(
            [path_specs(p) for p in self.paths], workload=workload if workload is not None else self.workload_spec,
            scheduler=sched, direction="up" if self.direction == "up" else "down", stack=self.stack,
            seed=self.seed if seed is None else seed,
            duration_ns=self.duration_ns if duration_ns is None else duration_ns,
            join_after_ns=self.join_after_ns, backup=self.backup)
        if not self.shared and self.subflows is None:
            return e
        shared = [lk for p in self.shared for lk in path_specs(p)[0]]
        paths = tuple(PathSpec(p.name, down=(*(f"{v}/down" for v in self.via.get(p.name, ())), *p.down),
                               up=(*p.up, *(f"{v}/up" for v in reversed(self.via.get(p.name, ())))))
                      for p in e.paths)
        return replace(e, links=(*e.links, *shared), paths=paths,
                       subflows=self.subflows if self.subflows is not None else e.subflows)

    def run(self, scheduler: Any = None, *, backend: Any = "model", record: bool = True, **kw: Any) -> Run:
        """Run this scenario on a backend (``kw``: workload, seed, duration_ns overrides)."""
        from workbench.backends import get_backend
        return get_backend(backend).run(self.to_experiment(scheduler, **kw), record=record)


class _Ctx:
    def __init__(self, src: Path, *, allow_outside: bool = False) -> None:
        self.src = src
        self.allow_outside = allow_outside  # referenced files may leave the scenario's folder

    def err(self, where: str, problem: str) -> InputError:
        return InputError(self.src, f"{where}: {problem}")

    def ref(self, where: str, name: Any) -> Path:
        """A referenced file, checked by `workbench._safe_refs.resolve_ref`."""
        try:
            return resolve_ref(self.src.parent, name, allow_outside=self.allow_outside, what=where)
        except InputError as e:
            raise InputError(self.src, e.problem) from None

    def csv_pairs(self, where: str, name: str) -> list[tuple[float, float]]:
        p = self.ref(where, name)
        out: list[tuple[float, float]] = []
        try:
            with p.open(encoding="utf-8", errors="replace") as f:
                for row in csv.reader(f):
                    if not row or row[0].strip().startswith("#"):
                        continue
                    try:
                        pair = (float(row[0]), float(row[1]))
                    except (ValueError, IndexError):
                        if out:
                            raise self.err(where, f"bad CSV line {row!r} in {p}") from None
                        continue
                    if not all(map(math.isfinite, pair)):
                        raise self.err(where, f"not a finite number in {row!r} in {p}")
                    out.append(pair)
        except (OSError, csv.Error) as e:
            raise self.err(where, f"cannot read {p}: {e}") from None
        if not out:
            raise self.err(where, f"no data rows in {p}")
        return out


def _workload(ctx: _Ctx, d: Any) -> WorkloadSpec:
    try:
        return parse_workload(d, csv_pairs=lambda name: ctx.csv_pairs("workload.trace", name))
    except ValueError as e:
        raise ctx.err("workload", str(e)) from None


# Settings of the older `connection:` section that are not stack settings: they belong to the
# subflows (join delay, backup) or are model details.
_SUBFLOW_KEYS = ("join_delay_ns", "backup")


def _stack(ctx: _Ctx, d: Any, where: str) -> tuple[StackProfile, int, tuple[str, ...]]:
    """(stack, join_after_ns, backup path names) from a ``stack:`` or ``connection:`` mapping."""
    if d is None:
        return stack_profile("linux-upstream"), 0, ()
    if not isinstance(d, dict):
        raise ctx.err(where, "expected a mapping")
    kw = dict(d)
    try:
        join_ns = int(kw.pop("join_delay_ns", 0))
        backup = tuple(str(b) for b in kw.pop("backup", ()) or ())
        if "header_bytes" in kw:
            kw["frame_overhead_bytes"] = int(kw.pop("header_bytes"))
        return parse_stack(kw), join_ns, backup
    except (TypeError, ValueError) as e:
        raise ctx.err(where, str(e)) from None


def _scheduler(ctx: _Ctx, d: Any) -> Any:
    """A registered name, ``module:Class`` or ``file.py:Class`` (relative to the scenario file), with
    params validated against the class's ParamSpecs (`workbench.plugins.resolve_scheduler`)."""
    if d is None:
        return None
    from workbench.plugins import resolve_scheduler
    if isinstance(d, str):
        name, params = d, {}
    elif isinstance(d, dict) and "name" in d and isinstance(d.get("params") or {}, dict):
        name, params = str(d["name"]), dict(d.get("params") or {})
    else:
        raise ctx.err("scheduler", "expected a name or {name: ..., params: {...}}")
    target, sep, cls = name.strip().rpartition(":")
    if (target if sep else name.strip()).endswith(".py"):
        # A scheduler file is code: it is held to the same folder rule as any referenced file.
        found = ctx.ref("scheduler", target if sep else name.strip())
        name = f"{found}:{cls}" if sep else str(found)
    try:
        return resolve_scheduler(name, params, base_dir=ctx.src.parent)
    except InputError as e:
        raise ctx.err("scheduler", e.problem if e.source is None else str(e)) from None


def scenario_from_dict(d: Any, *, source: str | Path = "<dict>", base_dir: str | Path | None = None,
                       allow_outside: bool = False) -> Scenario:
    """A `Scenario` from an already parsed mapping (what `load_scenario` reads from a file).
    Referenced files must lie in the scenario's folder unless `allow_outside` (`workbench._safe_refs`)."""
    from workbench.timeline.convert import to_path_configs
    from workbench.timeline.importers.scenario import scenario_timelines

    ctx = _Ctx(Path(source), allow_outside=allow_outside)
    if not isinstance(d, dict):
        raise ctx.err("top level", "expected a mapping")
    try:
        check_scenario_keys(d)
        check_scenario_sizes(d)
    except InputError as e:
        raise InputError(ctx.src, e.problem) from None
    dur = d.get("duration_s")
    duration_ns = int(float(dur) * 1e9) if dur is not None else None
    folder = base_dir if base_dir is not None else Path(source).parent
    d, via = _split_via(ctx, d)
    try:
        tls = scenario_timelines(d, folder, allow_outside=allow_outside)
        shared_tls = (scenario_timelines({"paths": d["shared"]}, folder, allow_outside=allow_outside)
                      if d.get("shared") else None)
    except InputError as e:
        raise ctx.err("paths", e.problem) from None
    shared = to_path_configs(shared_tls, duration_ns=duration_ns) if shared_tls is not None else []
    names = {tl.name for tl in tls.values()}
    shared_names = {p.name for p in shared}
    if names & shared_names:
        raise ctx.err("shared", f"names used by a path and a shared link: {sorted(names & shared_names)}")
    for path, links in via.items():
        if path not in names:
            raise ctx.err("paths", f"via on unknown path {path!r}")
        for v in links:
            if v not in shared_names:
                raise ctx.err(f"paths.{path}.via", f"unknown shared link {v!r}; known: {sorted(shared_names)}")
    subflows = _subflows(ctx, d.get("subflows"), names)
    if "stack" in d and "connection" in d:
        raise ctx.err("stack", "give either stack or connection (the older name), not both")
    where = "stack" if "stack" in d else "connection"
    stack, join_ns, backup = _stack(ctx, d.get(where), where)
    direction = str(d.get("direction", "down"))
    if direction not in ("down", "up"):
        raise ctx.err("direction", f"expected down (download) or up (upload), got {direction!r}")
    return Scenario(paths=to_path_configs(tls, duration_ns=duration_ns), workload_spec=_workload(ctx, d.get("workload")),
                    stack=stack, scheduler=_scheduler(ctx, d.get("scheduler")), duration_ns=duration_ns,
                    seed=int(d.get("seed", 0)), source=str(source), direction=direction, join_after_ns=join_ns,
                    backup=backup, shared=shared, via=via, subflows=subflows)


def _split_via(ctx: _Ctx, d: dict[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """The document without the paths' ``via`` keys, and those keys (path -> shared link names)."""
    raw = d.get("paths")
    if not isinstance(raw, list):
        return d, {}
    via: dict[str, tuple[str, ...]] = {}
    clean = []
    for p in raw:
        if isinstance(p, dict) and "via" in p:
            v = p["via"]
            v = [v] if isinstance(v, str) else v
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ctx.err(f"paths.{p.get('name')}.via", "expected a shared link name or a list of them")
            via[str(p.get("name"))] = tuple(v)
            p = {k: x for k, x in p.items() if k != "via"}
        clean.append(p)
    return {**d, "paths": clean}, via


def _subflows(ctx: _Ctx, raw: Any, paths: set[str]) -> tuple[SubflowSpec, ...] | None:
    """``subflows: [wifi, {path: lte, backup: true, join_after_ms: 50}, ...]`` (first = initial)."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise ctx.err("subflows", "expected a non-empty list of path names or {path: ...} mappings")
    out = []
    for i, x in enumerate(raw):
        item = {"path": x} if isinstance(x, str) else x
        if not isinstance(item, dict) or set(item) - {"path", "backup", "join_after_ms"}:
            raise ctx.err(f"subflows[{i}]", "expected a path name or {path, backup, join_after_ms}")
        if item.get("path") not in paths:
            raise ctx.err(f"subflows[{i}]", f"unknown path {item.get('path')!r}; known: {sorted(paths)}")
        try:
            out.append(SubflowSpec(str(item["path"]), join_after_ns=int(float(item.get("join_after_ms", 0)) * 1e6),
                                   backup=bool(item.get("backup", False))))
        except (TypeError, ValueError) as e:
            raise ctx.err(f"subflows[{i}]", str(e)) from None
    if not 1 <= len(out) <= 8:
        raise ctx.err("subflows", f"1 to 8 subflows are supported, got {len(out)}")
    return tuple(out)


def load_scenario(path: str | Path, *, allow_outside: bool = False) -> Scenario:
    """Read a YAML or JSON scenario file: safe loading only, bounded sizes, referenced files inside
    the scenario's folder unless `allow_outside` (see `workbench._safe_refs`)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "scenario file not found")
    d = load_document(p)
    return scenario_from_dict(d, source=p, allow_outside=allow_outside)


def lab_scenario(results_json: str | Path, *, scheduler: Any = None) -> Scenario:
    """The configured setting of a lab run (``traces/lab/*/results.json``): two constant paths
    (buffers in packets), CUBIC, upstream-kernel receiver, autotuned send buffer, the server writing
    for "N s" after accepting, or a finite transfer. Default scheduler: upstream default."""
    p = Path(results_json)
    try:
        c = json.loads(p.read_text())["configured"]
        paths = []
        for key, label in (("path1", "wifi"), ("path2", "lte")):
            q = c[key]
            paths.append(PathConfig.constant(
                label, rate_bps=q["rate_down_mbps"] * 1e6, rate_up_bps=q["rate_up_mbps"] * 1e6,
                owd_ns=int(q["one_way_delay_ms"] * 1e6), buffer_bytes=int(q["buffer"]) * PACKET_BYTES))
        transfer = c["transfer"]
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise InputError(p, f"not a lab results.json with constant paths ({e})") from None
    from workbench.replay.run import handshake_times
    wl: WorkloadSpec
    if isinstance(transfer, str):
        t_accept = handshake_times(paths)[0][0]
        wl = BulkWorkload(stop_ns=t_accept + int(float(transfer.split()[0]) * 1e9))
    else:
        wl = FiniteWorkload(size_bytes=int(transfer))
    stack = stack_profile("linux-upstream", congestion_control=c.get("cc", "cubic"),
                          tcp_rmem=(4096, 131072, 32 << 20))
    if scheduler is None:
        from workbench.schedulers import get
        scheduler = get("upstream")
    return Scenario(paths=paths, workload_spec=wl, stack=stack, scheduler=scheduler, duration_ns=60_000_000_000,
                    source=str(p))
