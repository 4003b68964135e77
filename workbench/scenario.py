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
workload: {bulk: {stop_s: 8}}   # or {finite: {bytes: 4000000}}, {bursts: {segments: 10, idle_ms:
                                # 500, count: 20}}, {trace: [[t_s, bytes], ...] or {csv: app.csv}}
```

Errors are `InputError`s naming the file and the offending key.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.experiment import (
    PACKET_BYTES,
    BulkWorkload,
    Experiment,
    FiniteWorkload,
    SchedulerSpec,
    StackProfile,
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
        return experiment_from_paths(
            [path_specs(p) for p in self.paths], workload=workload if workload is not None else self.workload_spec,
            scheduler=sched, direction="up" if self.direction == "up" else "down", stack=self.stack,
            seed=self.seed if seed is None else seed,
            duration_ns=self.duration_ns if duration_ns is None else duration_ns,
            join_after_ns=self.join_after_ns, backup=self.backup)

    def run(self, scheduler: Any = None, *, backend: Any = "model", record: bool = True, **kw: Any) -> Run:
        """Run this scenario on a backend (``kw``: workload, seed, duration_ns overrides)."""
        from workbench.backends import get_backend
        return get_backend(backend).run(self.to_experiment(scheduler, **kw), record=record)


class _Ctx:
    def __init__(self, src: Path) -> None:
        self.src = src

    def err(self, where: str, problem: str) -> InputError:
        return InputError(self.src, f"{where}: {problem}")

    def csv_pairs(self, where: str, name: str) -> list[tuple[float, float]]:
        p = (self.src.parent / name) if not Path(name).is_absolute() else Path(name)
        if not p.exists():
            raise self.err(where, f"CSV file {p} not found")
        out = []
        with p.open() as f:
            for row in csv.reader(f):
                if not row or row[0].strip().startswith("#"):
                    continue
                try:
                    out.append((float(row[0]), float(row[1])))
                except (ValueError, IndexError):
                    if out:
                        raise self.err(where, f"bad CSV line {row!r} in {p}") from None
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
    try:
        return resolve_scheduler(name, params, base_dir=ctx.src.parent)
    except InputError as e:
        raise ctx.err("scheduler", e.problem if e.source is None else str(e)) from None


def scenario_from_dict(d: Any, *, source: str | Path = "<dict>", base_dir: str | Path | None = None) -> Scenario:
    """A `Scenario` from an already parsed mapping (what `load_scenario` reads from a file)."""
    from workbench.timeline.convert import to_path_configs
    from workbench.timeline.importers.scenario import scenario_timelines

    ctx = _Ctx(Path(source))
    if not isinstance(d, dict):
        raise ctx.err("top level", "expected a mapping")
    dur = d.get("duration_s")
    duration_ns = int(float(dur) * 1e9) if dur is not None else None
    try:
        tls = scenario_timelines(d, base_dir if base_dir is not None else Path(source).parent)
    except InputError as e:
        raise ctx.err("paths", e.problem) from None
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
                    backup=backup)


def load_scenario(path: str | Path) -> Scenario:
    """Read a YAML or JSON scenario file."""
    p = Path(path)
    if not p.is_file():
        raise InputError(p, "scenario file not found")
    text = p.read_text()
    try:
        if p.suffix.lower() == ".json":
            d = json.loads(text)
        else:
            import yaml

            d = yaml.safe_load(text)
    except Exception as e:
        raise InputError(p, f"not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'}: "
                            f"{str(e).splitlines()[0]}") from None
    return scenario_from_dict(d, source=p)


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
