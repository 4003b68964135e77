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
connection: {cc: cubic, rcv_buf_bytes: 6291456, send_buf_bytes: 4194304, mss_bytes: 1424}
workload: {bulk: {stop_s: 8}}   # or {finite: {bytes: 4000000}}, {bursts: {segments: 10, idle_ms:
                                # 500, count: 20}}, {trace: [[t_s, bytes], ...] or {csv: app.csv}}
```

Errors are `InputError`s naming the file and the offending key.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from workbench.errors import InputError
from workbench.replay.mptcp import ConnectionConfig
from workbench.replay.paths import PathConfig
from workbench.replay.workload import AppTrace, Bulk, Bursts, Finite, Workload

__all__ = ["PACKET_BYTES", "Scenario", "lab_scenario", "load_scenario", "scenario_from_dict"]

PACKET_BYTES = 1514  # a full Ethernet frame: what a pfifo limit in packets holds


@dataclass
class Scenario:
    paths: list[PathConfig]
    workload: Workload
    conn: ConnectionConfig
    scheduler: Any = None          # a Scheduler instance, or None if the file names none
    duration_ns: int | None = None
    seed: int = 0
    source: str = ""

    def run(self, scheduler: Any = None, **kw: Any) -> Any:
        """``run_replay`` with this scenario (``scheduler`` overrides the file's)."""
        from workbench.replay.run import run_replay

        sched = scheduler if scheduler is not None else self.scheduler
        if sched is None:
            raise InputError(self.source, "no scheduler given (in the file or as an argument)")
        args = {"workload": self.workload, "conn": self.conn, "seed": self.seed,
                "duration_ns": self.duration_ns} | kw
        return run_replay(self.paths, sched, **args)


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


def _workload(ctx: _Ctx, d: Any) -> Workload:
    if d is None:
        return Bulk()
    if isinstance(d, str):
        d = {d: {}}
    if not isinstance(d, dict) or len(d) != 1:
        raise ctx.err("workload", "expected one of bulk / finite / bursts / trace")
    (kind, a), = d.items()
    a = a or {}
    try:
        if kind == "bulk":
            stop = a.get("stop_s")
            return Bulk(stop_ns=int(float(stop) * 1e9) if stop is not None else None)
        if kind == "finite":
            return Finite(size_bytes=int(a["bytes"]))
        if kind == "bursts":
            return Bursts(segments=int(a["segments"]), idle_ns=int(float(a.get("idle_ms", 100)) * 1e6),
                          n_bursts=int(a.get("count", 10)))
        if kind == "trace":
            pairs = ctx.csv_pairs("workload.trace", a["csv"]) if isinstance(a, dict) else a
            return AppTrace(writes=[(int(float(t) * 1e9), int(b)) for t, b in pairs])
    except (KeyError, TypeError, ValueError) as e:
        raise ctx.err(f"workload.{kind}", f"bad or missing setting ({e})") from None
    raise ctx.err("workload", f"unknown workload {kind!r} (bulk, finite, bursts, trace)")


def _conn(ctx: _Ctx, d: Any) -> ConnectionConfig:
    if d is None:
        return ConnectionConfig()
    if not isinstance(d, dict):
        raise ctx.err("connection", "expected a mapping")
    known = {f.name for f in fields(ConnectionConfig)}
    bad = set(d) - known
    if bad:
        raise ctx.err("connection", f"unknown setting(s) {sorted(bad)}; known: {sorted(known)}")
    try:
        kw = dict(d)
        if "backup" in kw:
            kw["backup"] = tuple(kw["backup"])
        return ConnectionConfig(**kw)
    except (TypeError, ValueError) as e:
        raise ctx.err("connection", str(e)) from None


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
    return Scenario(paths=to_path_configs(tls, duration_ns=duration_ns), workload=_workload(ctx, d.get("workload")),
                    conn=_conn(ctx, d.get("connection")), scheduler=_scheduler(ctx, d.get("scheduler")),
                    duration_ns=duration_ns, seed=int(d.get("seed", 0)), source=str(source))


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
    if isinstance(transfer, str):
        t_accept = handshake_times(paths)[0][0]
        wl: Workload = Bulk(stop_ns=t_accept + int(float(transfer.split()[0]) * 1e9))
    else:
        wl = Finite(size_bytes=int(transfer))
    conn = ConnectionConfig(cc=c.get("cc", "cubic"), send_buf_bytes=None, rcv_buf_bytes=32 << 20,
                            quickack_on_meta_ooo=False)
    if scheduler is None:
        from workbench.schedulers import get
        scheduler = get("upstream")
    return Scenario(paths=paths, workload=wl, conn=conn, scheduler=scheduler, duration_ns=60_000_000_000,
                    source=str(p))
