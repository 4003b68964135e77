"""Scenario files (YAML or JSON, mpshell-like): paths, connection settings, workload, scheduler.

```yaml
duration_s: 10            # simulated time cap (needed for an endless bulk workload)
seed: 0
scheduler: minrtt          # or {name: minrtt, params: {opportunistic: false}}
paths:
  - name: wifi
    rate_mbps: 30          # constant, or a series: [[t_s, value], ...] or {csv: rate1.csv}
    rate_up_mbps: 30       # optional (default: same as down)
    owd_ms: 10             # both directions; or owd_down_ms / owd_up_ms (constant or series)
    buffer_packets: 50     # or buffer_bytes: 75000 (a packet counts 1514 bytes)
    loss: 0.0              # per-packet probability down (constant or series); loss_up optional
  - name: lte
    rate_mbps: {csv: lte_rate.csv}   # two columns: t_s, value (header line optional)
    owd_ms: [[0, 40], [5, 80]]
    buffer_bytes: 600000
connection: {cc: cubic, rcv_buf_bytes: 6291456, send_buf_bytes: 4194304, mss_bytes: 1424}
workload: {bulk: {stop_s: 8}}   # or {finite: {bytes: 4000000}}, {bursts: {segments: 10, idle_ms:
                                # 500, count: 20}}, {trace: [[t_s, bytes], ...] or {csv: app.csv}}
```

Rates take ``_bps`` / ``_kbps`` / ``_mbps`` suffixes, delays ``_ns`` / ``_us`` / ``_ms`` / ``_s``;
series times are in seconds. CSV paths are relative to the scenario file. Errors are `InputError`s
naming the file and the offending key.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from workbench.errors import InputError
from workbench.replay.mptcp import ConnectionConfig
from workbench.replay.paths import PathConfig, StepSeries
from workbench.replay.workload import AppTrace, Bulk, Bursts, Finite, Workload

__all__ = ["Scenario", "lab_scenario", "load_scenario"]

_RATE_UNITS = {"_bps": 1.0, "_kbps": 1e3, "_mbps": 1e6}
_TIME_UNITS = {"_ns": 1.0, "_us": 1e3, "_ms": 1e6, "_s": 1e9}
PACKET_BYTES = 1514


@dataclass
class Scenario:
    paths: list[PathConfig]
    workload: Workload
    conn: ConnectionConfig
    scheduler: Any = None          # a Scheduler instance, or None if the file names none
    duration_ns: int | None = None
    seed: int = 0
    source: str = ""

    def run(self, scheduler: Any = None, **kw: Any):
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

    def series(self, where: str, v: Any, scale: float) -> StepSeries:
        if isinstance(v, int | float) and not isinstance(v, bool):
            if v < 0:
                raise self.err(where, f"negative value {v}")
            return StepSeries.constant(float(v) * scale)
        pairs: list[tuple[float, float]]
        if isinstance(v, dict) and "csv" in v:
            pairs = self.csv_pairs(where, str(v["csv"]))
        elif isinstance(v, list) and v and all(isinstance(x, list | tuple) and len(x) == 2 for x in v):
            pairs = [(float(a), float(b)) for a, b in v]
        else:
            raise self.err(where, "expected a number, [[t_s, value], ...] or {csv: file}")
        pairs.sort()
        ts = [round(t * 1e9) for t, _ in pairs]
        if len(set(ts)) != len(ts):
            raise self.err(where, "repeated time in series")
        if any(b < 0 for _, b in pairs):
            raise self.err(where, "negative value in series")
        return StepSeries(tuple(ts), tuple(b * scale for _, b in pairs))

    def pick(self, d: dict, where: str, base: str, units: dict[str, float], default: Any = None,
             required: bool = True) -> StepSeries | None:
        found = [(k, s) for k, s in ((base + u, s) for u, s in units.items()) if k in d]
        if len(found) > 1:
            raise self.err(where, f"give only one of {[k for k, _ in found]}")
        if not found:
            if default is not None:
                return default
            if required:
                raise self.err(where, f"missing {base}{'/'.join(units)}")
            return None
        k, s = found[0]
        return self.series(f"{where}.{k}", d[k], s)


def _path(ctx: _Ctx, i: int, d: Any) -> PathConfig:
    where = f"paths[{i}]"
    if not isinstance(d, dict):
        raise ctx.err(where, "expected a mapping")
    name = str(d.get("name", f"path{i + 1}"))
    where = f"paths[{i}] ({name})"
    rate = ctx.pick(d, where, "rate", _RATE_UNITS)
    rate_up = ctx.pick(d, where, "rate_up", _RATE_UNITS, default=rate)
    owd = ctx.pick(d, where, "owd", _TIME_UNITS, required=False)
    owd_down = ctx.pick(d, where, "owd_down", _TIME_UNITS, default=owd, required=owd is None)
    owd_up = ctx.pick(d, where, "owd_up", _TIME_UNITS, default=owd if owd is not None else owd_down)
    zero = StepSeries.constant(0.0)
    loss = ctx.series(f"{where}.loss", d["loss"], 1.0) if "loss" in d else zero
    loss_up = ctx.series(f"{where}.loss_up", d["loss_up"], 1.0) if "loss_up" in d else zero
    if any(v > 1 for v in loss.values + loss_up.values):
        raise ctx.err(where, "loss is a probability in [0, 1]")
    if "buffer_bytes" in d and "buffer_packets" in d:
        raise ctx.err(where, "give buffer_bytes or buffer_packets, not both")
    try:
        buf = (int(d["buffer_packets"]) * PACKET_BYTES if "buffer_packets" in d
               else int(d.get("buffer_bytes", 150_000)))
    except (TypeError, ValueError):
        raise ctx.err(where, "buffer must be an integer") from None
    if buf <= 0:
        raise ctx.err(where, "buffer must be > 0")
    return PathConfig(name=name, rate_down_bps=rate, rate_up_bps=rate_up,  # type: ignore[arg-type]
                      owd_down_ns=owd_down, owd_up_ns=owd_up, loss_down=loss, loss_up=loss_up,  # type: ignore[arg-type]
                      buffer_down_bytes=buf, buffer_up_bytes=max(buf, 150_000))


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
    if d is None:
        return None
    from workbench.schedulers import get
    if isinstance(d, str):
        name, params = d, {}
    elif isinstance(d, dict) and "name" in d:
        name, params = str(d["name"]), dict(d.get("params") or {})
    else:
        raise ctx.err("scheduler", "expected a name or {name: ..., params: {...}}")
    try:
        return get(name, **params)
    except InputError as e:
        raise ctx.err("scheduler", e.problem) from None


def scenario_from_dict(d: dict, *, source: str | Path = "<dict>") -> Scenario:
    """A `Scenario` from an already parsed mapping (what `load_scenario` reads from a file)."""
    ctx = _Ctx(Path(source))
    if not isinstance(d, dict):
        raise ctx.err("top level", "expected a mapping")
    ps = d.get("paths")
    if not isinstance(ps, list) or not ps:
        raise ctx.err("paths", "need a non-empty list of paths")
    paths = [_path(ctx, i, p) for i, p in enumerate(ps)]
    if len({p.name for p in paths}) != len(paths):
        raise ctx.err("paths", "path names must be unique")
    dur = d.get("duration_s")
    return Scenario(paths=paths, workload=_workload(ctx, d.get("workload")), conn=_conn(ctx, d.get("connection")),
                    scheduler=_scheduler(ctx, d.get("scheduler")),
                    duration_ns=int(float(dur) * 1e9) if dur is not None else None,
                    seed=int(d.get("seed", 0)), source=str(source))


def load_scenario(path: str | Path) -> Scenario:
    """Read a YAML or JSON scenario file."""
    p = Path(path)
    if not p.exists():
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
    from workbench.replay.run import _handshake_times
    if isinstance(transfer, str):
        t_accept = _handshake_times(paths)[0][0]
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
