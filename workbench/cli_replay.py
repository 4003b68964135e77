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
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from workbench._safe_refs import ALLOW_OUTSIDE_REFS_HELP
from workbench._text import fmt_value as _fmt
from workbench.errors import InputError
from workbench.experiment import BulkWorkload, Experiment, SchedulerSpec, WorkloadSpec, workload_text

if TYPE_CHECKING:
    from workbench.backends import Run

__all__ = ["parse_workload", "register", "replay_command", "schedulers_command"]

F = TypeVar("F", bound=Callable[..., Any])

_DEFAULT_DURATION_NS = 10_000_000_000  # timelines carry no workload: bulk for 10 s unless told


def _user_errors(fn: F) -> F:
    """`workbench.cli._user_errors`, looked up at call time (no import cycle with workbench.cli)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from workbench.cli import _user_errors as wrap

        return wrap(fn)(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def parse_workload(text: str) -> WorkloadSpec:
    """``bulk[:SECONDS]`` | ``finite:SIZE`` | ``bursts:SEGMENTS:IDLE_MS[:COUNT]`` -> a workload spec
    (`workbench.experiment.parse_workload`, the one parser)."""
    from workbench.experiment import parse_workload as parse

    try:
        return parse(text)
    except ValueError as e:
        raise InputError(None, f"--workload {text!r}: {e}") from None


@dataclass
class _Plan:
    """Everything a replay needs, resolved and validated before anything runs or is written."""

    source: str
    kind: str  # "scenario" | "timelines"
    experiment: Experiment

    @property
    def seed(self) -> int:
        return self.experiment.seed

    @property
    def workload(self) -> WorkloadSpec:
        return self.experiment.transfers[0].workload


def _input_kind(path: Path) -> str:
    from workbench.timeline import sniff_timeline_input

    kind = sniff_timeline_input(path)  # InputError for missing / empty / unknown files
    if kind in ("scenario", "timelines"):
        return kind
    raise InputError(path, f"is a {kind} file; replay takes a scenario file or saved timelines — "
                           f"make timelines first: workbench timeline {path} -o paths.parquet")


def _plan(scenario: Path, scheduler: str | None, params: list[str], workload: str | None, seed: int | None,
          duration: str | None, *, stack: str | None = None, direction: str | None = None,
          timeline_defaults: dict[str, Any] | None = None, allow_outside: bool = False) -> _Plan:
    """``timeline_defaults``: `workbench.timeline.to_path_configs` fill values for saved timelines
    that lack a quantity (default_owd_ns, default_capacity_bps, default_buffer_bytes)."""
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
    spec = SchedulerSpec.instance(sched) if sched is not None else None
    if stack is not None:
        from workbench.experiment import stack_profile
        try:
            stack_obj = stack_profile(stack)
        except ValueError as e:
            raise InputError(None, f"--stack: {e}") from None
    kind = _input_kind(scenario)
    if kind == "scenario":
        from workbench.scenario import load_scenario

        sc = load_scenario(scenario, allow_outside=allow_outside)
        if sc.scheduler is None and spec is None:
            raise InputError(scenario, "names no scheduler; give --scheduler NAME")
        if stack is not None:
            sc.stack = stack_obj
        if direction is not None:
            sc.direction = direction
        experiment = sc.to_experiment(spec, workload=wl, seed=seed, duration_ns=duration_ns)
    else:
        from workbench.capture_experiment import timelines_experiment
        from workbench.timeline import load_timelines

        if spec is None:
            raise InputError(scenario, "timelines name no scheduler; give --scheduler NAME")
        tls = load_timelines(scenario)
        dur = duration_ns if duration_ns is not None else _DEFAULT_DURATION_NS
        from workbench.experiment import stack_profile
        experiment = timelines_experiment(
            tls, workload=wl if wl is not None else BulkWorkload(), scheduler=spec,
            stack=stack_obj if stack is not None else stack_profile("linux-upstream"),
            seed=seed if seed is not None else 0, duration_ns=dur,
            direction="up" if direction == "up" else "down", **(timeline_defaults or {}))
    w = experiment.transfers[0].workload
    if experiment.duration_ns is None and isinstance(w, BulkWorkload) and w.stop_ns is None:
        raise InputError(scenario, "this workload never ends by itself: give --duration (e.g. 10s) or "
                                   "duration_s in the scenario")
    return _Plan(str(scenario), kind, experiment)


def _stage_outputs(result: Run, report: dict[str, Any], pcap: bool) -> dict[str, bytes]:
    """File name -> bytes, all built in memory before anything touches the output folder."""
    files: dict[str, bytes] = {}
    for name, df in (("packet_events.parquet", result.events), ("samples.parquet", result.samples)):
        if df is None:
            continue
        buf = io.BytesIO()
        df.write_parquet(buf)
        files[name] = buf.getvalue()
    if pcap:
        from workbench.replay import write_pcap

        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "replay.pcap"
            write_pcap(result.detail, p)
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
    completed = e.get("completed")
    rows = [
        ("goodput Mbit/s", _fmt(m.get("goodput_mbps"))),
        ("delivered bytes", _fmt(m.get("delivered_bytes"))),
        ("completion s", _fmt(m.get("completion_s"), 3) if completed
         else "– (ran to the time cap)" if getattr(plan.workload, "stop_ns", 1) is None else "not completed"),
        ("simulated s", _fmt(e["sim_ns"] / 1e9, 3) if "sim_ns" in e else "–"),
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
    for n in plan.experiment.path_names:
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
    backend: Annotated[str, typer.Option(help="model (the replay engine) or kernel (real Linux MPTCP in "
                                              "network namespaces; root)")] = "model",
    stack: Annotated[str | None, typer.Option(
        help="stack profile: linux-upstream or mptcp.org-v0.95 (default: the scenario's, else linux-upstream)")] = None,
    direction: Annotated[str | None, typer.Option(
        help="down (download: the server sends) or up (upload); default: the scenario's, else down")] = None,
    default_owd_ms: Annotated[float | None, typer.Option(
        help="saved timelines without a delay: one-way delay to assume (ms), shown as assumed")] = None,
    default_rate_mbps: Annotated[float | None, typer.Option(
        help="saved timelines without a capacity: capacity to assume (Mbit/s), shown as assumed")] = None,
    default_buffer_bytes: Annotated[int | None, typer.Option(
        help="saved timelines without a buffer: bottleneck buffer to assume (bytes)")] = None,
    allow_outside_refs: Annotated[bool, typer.Option("--allow-outside-refs", help=ALLOW_OUTSIDE_REFS_HELP)] = False,
) -> None:
    """Replay a scenario or saved timelines with one scheduler: metrics table, optional parquet/pcap."""
    from workbench.metrics import summarize

    if pcap and out_dir is None:
        raise InputError(None, "--pcap writes into the --out folder: give --out DIR")
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise InputError(out_dir, "--out must be a folder, and this is a file")
    if pcap and backend != "model":
        raise InputError(None, "--pcap writes the model's packets; the kernel backend keeps its own captures "
                               "(workbench lab)")
    defaults: dict[str, Any] = {}
    if default_owd_ms is not None:
        defaults["default_owd_ns"] = int(default_owd_ms * 1e6)
    if default_rate_mbps is not None:
        defaults["default_capacity_bps"] = default_rate_mbps * 1e6
    if default_buffer_bytes is not None:
        defaults["default_buffer_bytes"] = default_buffer_bytes
    plan = _plan(scenario, scheduler, param or [], workload, seed, duration, stack=stack, direction=direction,
                 timeline_defaults=defaults, allow_outside=allow_outside_refs)
    from workbench.backends import get_backend

    result = get_backend(backend).run(plan.experiment)
    metrics = dict(summarize(result.events, result.samples)) if result.events.height else {}
    e = plan.experiment
    report: dict[str, Any] = {
        "source": plan.source, "kind": plan.kind, "backend": result.backend,
        "scheduler": result.provenance.get("scheduler", e.scheduler.name),
        "scheduler_params": dict(e.scheduler.params) or _params_of(e.scheduler.obj),
        "workload": workload_text(plan.workload), "direction": e.transfers[0].direction, "seed": plan.seed,
        "duration_s": e.duration_ns / 1e9 if e.duration_ns is not None else None,
        "stack": asdict(e.stack), "paths": e.path_names, "metrics": metrics,
        "engine": result.counters, "warnings": result.warnings,
    }
    if out_dir is not None:
        files = _stage_outputs(result, report, pcap)
        report["files"] = [str(p) for p in _write_outputs(out_dir, files)]
    if as_json:
        import sys

        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
        return
    _print_report(plan, report)


def _params_of(sched: Any) -> dict[str, Any]:
    """The declared parameters of a scheduler instance with their values (recorded in the output)."""
    try:
        from workbench.schedulers import info
        return {p.name: getattr(sched, p.name) for p in info(sched.name).params if hasattr(sched, p.name)}
    except Exception:  # a user's scheduler without declared parameters
        return {}


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
