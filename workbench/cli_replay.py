"""`workbench replay` and `workbench schedulers`: the typer command functions (registered on the app
in `workbench.cli`).

``replay`` takes a scenario file (YAML/JSON, `workbench.scenario`) or saved timelines (`.parquet` /
`.csv` / `.json` written by ``workbench timeline``), a scheduler (registered name, ``module:Class`` or
``file.py:Class``, `workbench.plugins`), replays it, prints the headline metrics and optionally writes
PacketEvents / Samples parquet, a JSON summary and a pcap into a folder. Captures and raw traces are
not replayed directly: ``workbench timeline`` turns them into timelines first (one place decides how
paths are estimated).

Everything that can be wrong with the input is checked before anything is written; the output
folder appears complete or not at all.

This module does not import `workbench.cli` at import time (that module imports this one to
register the commands); the console, the error wrapper and the duration parser are looked up when a
command runs.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from workbench._text import fmt_value as _fmt
from workbench.errors import InputError

if TYPE_CHECKING:
    from workbench.replay import ConnectionConfig, PathConfig, Workload
    from workbench.schedulers import Scheduler

__all__ = ["parse_workload", "register", "replay_command", "schedulers_command"]

F = TypeVar("F", bound=Callable[..., Any])

_DEFAULT_DURATION_NS = 10_000_000_000  # timelines carry no workload: bulk for 10 s unless told
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
               "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def _user_errors(fn: F) -> F:
    """`workbench.cli._user_errors`, looked up at call time (no import cycle with workbench.cli)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from workbench.cli import _user_errors as wrap

        return wrap(fn)(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _size_bytes(text: str, what: str) -> int:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _SIZE_UNITS:
        raise InputError(None, f"{what}: not a size: {text!r} (examples: 4000000, 4MB, 512KiB)")
    n = round(float(m.group(1)) * _SIZE_UNITS[unit])
    if n <= 0:
        raise InputError(None, f"{what}: the size must be positive, got {text!r}")
    return n


def parse_workload(text: str) -> Workload:
    """``bulk`` | ``finite:BYTES`` | ``bursts:SEGMENTS:IDLE_MS[:COUNT]`` -> a `Workload`."""
    from workbench.replay import Bulk, Bursts, Finite

    what = f"--workload {text!r}"
    kind, *args = [p.strip() for p in text.strip().split(":")]
    kind = kind.lower()
    usage = "bulk, finite:BYTES or bursts:SEGMENTS:IDLE_MS[:COUNT]"
    if kind == "bulk" and not args:
        return Bulk()
    if kind == "finite" and len(args) == 1:
        return Finite(size_bytes=_size_bytes(args[0], what))
    if kind == "bursts" and len(args) in (2, 3):
        try:
            segments = int(args[0])
            idle_ms = float(args[1])
            count = int(args[2]) if len(args) == 3 else 10
        except ValueError:
            raise InputError(None, f"{what}: expected {usage}") from None
        if segments <= 0 or idle_ms < 0 or count <= 0:
            raise InputError(None, f"{what}: segments and count must be positive, idle time not negative")
        return Bursts(segments=segments, idle_ns=round(idle_ms * 1e6), n_bursts=count)
    raise InputError(None, f"{what}: expected {usage}")


@dataclass
class _Plan:
    """Everything a replay needs, resolved and validated before anything runs or is written."""

    source: str
    kind: str  # "scenario" | "timelines"
    paths: list[PathConfig]
    scheduler: Scheduler
    workload: Workload
    conn: ConnectionConfig | None
    seed: int
    duration_ns: int | None


def _input_kind(path: Path) -> str:
    from workbench.timeline import sniff_timeline_input

    kind = sniff_timeline_input(path)  # InputError for missing / empty / unknown files
    if kind in ("scenario", "timelines"):
        return kind
    raise InputError(path, f"is a {kind} file; replay takes a scenario file or saved timelines — "
                           f"make timelines first: workbench timeline {path} -o paths.parquet")


def _plan(scenario: Path, scheduler: str | None, params: list[str], workload: str | None, seed: int | None,
          duration: str | None) -> _Plan:
    from workbench.cli import parse_duration_ns
    from workbench.plugins import parse_param_args, resolve_scheduler

    # options first: a typo should not cost a scenario load
    raw_params = parse_param_args(params)
    if raw_params and scheduler is None:
        raise InputError(None, "--param goes with --scheduler (the scenario's scheduler takes its "
                               "parameters in the file)")
    wl = parse_workload(workload) if workload is not None else None
    duration_ns = parse_duration_ns(duration) if duration is not None else None
    sched = resolve_scheduler(scheduler, raw_params) if scheduler is not None else None
    kind = _input_kind(scenario)
    if kind == "scenario":
        from workbench.scenario import load_scenario

        sc = load_scenario(scenario)
        sched = sched if sched is not None else sc.scheduler
        if sched is None:
            raise InputError(scenario, "names no scheduler; give --scheduler NAME")
        plan = _Plan(str(scenario), kind, sc.paths, sched, wl if wl is not None else sc.workload, sc.conn,
                     seed if seed is not None else sc.seed,
                     duration_ns if duration_ns is not None else sc.duration_ns)
    else:
        from workbench.replay import Bulk
        from workbench.timeline import load_timelines, to_path_configs

        if sched is None:
            raise InputError(scenario, "timelines name no scheduler; give --scheduler NAME")
        tls = load_timelines(scenario)
        dur = duration_ns if duration_ns is not None else _DEFAULT_DURATION_NS
        plan = _Plan(str(scenario), kind, to_path_configs(tls, duration_ns=dur), sched,
                     wl if wl is not None else Bulk(), None, seed if seed is not None else 0, dur)
    if plan.duration_ns is None and getattr(plan.workload, "stop_ns", 1) is None:  # endless bulk (run_replay's rule)
        raise InputError(scenario, "this workload never ends by itself: give --duration (e.g. 10s) or "
                                   "duration_s in the scenario")
    return plan


def _workload_text(wl: Workload) -> str:
    name = type(wl).__name__.lower()
    try:
        fields = {k: v for k, v in asdict(wl).items() if k not in ("finished", "written", "done_bursts", "pending")}  # type: ignore[call-overload]
    except TypeError:
        fields = {}
    return name + (f" {fields}" if fields else "")


def _stage_outputs(result: Any, report: dict[str, Any], pcap: bool) -> dict[str, bytes]:
    """File name -> bytes, all built in memory before anything touches the output folder."""
    files: dict[str, bytes] = {}
    for name, df in (("packet_events.parquet", result.events), ("samples.parquet", result.samples)):
        buf = io.BytesIO()
        df.write_parquet(buf)
        files[name] = buf.getvalue()
    if pcap:
        from workbench.replay import write_pcap

        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "replay.pcap"
            write_pcap(result, p)
            files["replay.pcap"] = p.read_bytes()
    files["summary.json"] = (json.dumps(report, indent=2, default=str) + "\n").encode()
    return files


def _write_outputs(out_dir: Path, files: dict[str, bytes]) -> list[Path]:
    """A new folder appears whole (built beside it, then renamed); into an existing folder each file
    is replaced atomically."""
    from workbench._files import write_atomic

    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(out_dir, "--out must be a folder, and this is a file")
    if out_dir.is_dir():
        return [write_atomic(out_dir / name, data) for name, data in files.items()]
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.", suffix=".tmp"))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's folders are private
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [out_dir / name for name in files]


def _print_report(plan: _Plan, report: dict[str, Any]) -> None:
    from rich.table import Table

    from workbench.cli import out

    m = report["metrics"]
    e = report["engine"]
    out.print(f"[bold]{plan.source}[/] ({plan.kind}): {report['scheduler']}, {report['workload']}, "
              f"seed {plan.seed}", highlight=False)
    t = Table(title="Replay", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    completed = e["completed"]
    rows = [
        ("goodput Mbit/s", _fmt(m.get("goodput_mbps"))),
        ("delivered bytes", _fmt(m.get("delivered_bytes"))),
        ("completion s", _fmt(e["completion_ns"] / 1e9, 3) if completed
         else "– (ran to the time cap)" if getattr(plan.workload, "stop_ns", 1) is None else "not completed"),
        ("simulated s", _fmt(e["sim_ns"] / 1e9, 3)),
        ("OOO delay p50 ms", _fmt(m.get("ooo_p50_ms"))),
        ("OOO delay p95 ms", _fmt(m.get("ooo_p95_ms"))),
        ("OOO delay mean ms", _fmt(m.get("ooo_mean_ms"))),
        ("reinjections", _fmt(m.get("reinjections"))),
        ("retransmissions", _fmt(m.get("retrans"))),
    ]
    for k, v in rows:
        t.add_row(k, v)
    out.print(t)
    t = Table(title="Paths", title_justify="left")
    for col in ("path", "bytes", "share", "throughput Mbit/s", "retrans", "reinj", "RTT p50 ms"):
        t.add_column(col, justify="left" if col == "path" else "right")
    for p in plan.paths:
        n = p.name
        t.add_row(n, _fmt(m.get(f"bytes_{n}")), _fmt(m.get(f"share_{n}"), 3), _fmt(m.get(f"throughput_mbps_{n}")),
                  _fmt(m.get(f"retrans_{n}")), _fmt(m.get(f"reinjections_{n}")), _fmt(m.get(f"rtt_p50_ms_{n}")))
    out.print(t)
    if report.get("files"):
        out.print(f"wrote {', '.join(Path(f).name for f in report['files'])} to {Path(report['files'][0]).parent}",
                  highlight=False)


@_user_errors
def replay_command(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML/JSON) or saved timelines (.parquet/.csv/.json)")],
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", "-s", help="registered name (see `workbench schedulers`), module:Class or file.py:Class; "
                                  "default: the scenario's")] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="scheduler parameter NAME=VALUE (repeatable; layers: inner=NAME, inner.NAME=VALUE)")] = None,
    workload: Annotated[str | None, typer.Option(
        help="bulk | finite:BYTES | bursts:SEGMENTS:IDLE_MS[:COUNT] (default: the scenario's; timelines: bulk)")] = None,
    seed: Annotated[int | None, typer.Option(help="random seed (loss); default: the scenario's, else 0")] = None,
    duration: Annotated[str | None, typer.Option(
        help="simulated time cap, e.g. 10s (default: the scenario's; timelines: 10s)")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", "-o", help="folder for packet_events.parquet, samples.parquet, summary.json (+ replay.pcap)")] = None,
    pcap: Annotated[bool, typer.Option("--pcap", help="also write replay.pcap (needs --out)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
) -> None:
    """Replay a scenario or saved timelines with one scheduler: metrics table, optional parquet/pcap."""
    from workbench.metrics import summarize

    if pcap and out_dir is None:
        raise InputError(None, "--pcap writes into the --out folder: give --out DIR")
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise InputError(out_dir, "--out must be a folder, and this is a file")
    plan = _plan(scenario, scheduler, param or [], workload, seed, duration)
    from workbench.replay import run_replay

    kw: dict[str, Any] = {"workload": plan.workload, "seed": plan.seed, "duration_ns": plan.duration_ns}
    if plan.conn is not None:
        kw["conn"] = plan.conn
    result = run_replay(plan.paths, plan.scheduler, **kw)
    metrics = dict(summarize(result.events, result.samples)) if result.events.height else {}
    report: dict[str, Any] = {
        "source": plan.source, "kind": plan.kind, "scheduler": result.scheduler,
        "workload": _workload_text(plan.workload), "seed": plan.seed,
        "duration_s": plan.duration_ns / 1e9 if plan.duration_ns is not None else None,
        "paths": [p.name for p in plan.paths], "metrics": metrics,
        "engine": {k: v for k, v in result.summary.items() if k != "wall_s"},
    }
    if out_dir is not None:
        files = _stage_outputs(result, report, pcap)
        report["files"] = [str(p) for p in _write_outputs(out_dir, files)]
    if as_json:
        import sys

        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
        return
    _print_report(plan, report)


def _param_text(p: Any) -> str:
    if p.choices is not None:
        rng = "{" + ",".join(str(c).lower() if isinstance(c, bool) else str(c) for c in p.choices) + "}"
    elif p.low is not None or p.high is not None:
        rng = f"[{_fmt(p.low)}..{_fmt(p.high)}]" + (" log" if p.log else "")
    else:
        rng = ""
    default = str(p.default).lower() if isinstance(p.default, bool) else p.default
    return f"{p.name}={default} {rng}".strip()


@_user_errors
def schedulers_command(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """The registered schedulers: description, parameters (default, range), and where each comes from."""
    from workbench.plugins import scheduler_catalog

    cat = scheduler_catalog()
    if as_json:
        import sys

        sys.stdout.write(json.dumps(cat, indent=2, default=str) + "\n")
        return
    from rich.table import Table

    from workbench.cli import out
    from workbench.schedulers import info

    t = Table(title="Schedulers", title_justify="left", show_lines=True)
    for col in ("name", "description", "parameters (default, range)", "source"):
        t.add_column(col, overflow="fold")
    for entry in cat:
        i = info(entry["name"])
        t.add_row(entry["name"] + (" (layer)" if entry["layer"] else ""), entry["description"],
                  "\n".join(_param_text(p) for p in i.params) or "–", entry["source"])
    out.print(t)
    out.print("your own: --scheduler module:Class or path/to/file.py:Class (docs/SCHEDULERS-API.md)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``replay`` and ``schedulers`` to ``app`` (what workbench/cli.py does; for tests and
    embedding)."""
    app.command("replay")(replay_command)
    app.command("schedulers")(schedulers_command)


if __name__ == "__main__":  # python -m workbench.cli_replay ...: the main app, with these commands
    from workbench.cli import app as _app

    if not any(c.name in ("replay", "schedulers") for c in _app.registered_commands):
        register(_app)
    _app()
