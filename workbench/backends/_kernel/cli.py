"""`workbench lab SCENARIO|TIMELINES -o DIR`: one run on the real Linux kernel (network namespaces,
HTB, delay line or netem, real MPTCP sockets), registered on the app in `workbench.cli`.

Writes into DIR: ``client.pcap`` / ``server.pcap`` (snaplen 128), ``packet_events.parquet`` (the
capture pair loaded, times from the run's time zero), ``accuracy_rate.parquet`` /
``accuracy_delay.parquet`` (the emulation's own accuracy per 100 ms bin) and ``run.json`` (schedule
as applied, qdisc drops, accuracy, metrics, warnings, wall time). DIR appears complete or not at all.
A run whose emulation missed its targets says so on the terminal, in run.json and in the metrics.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from workbench.errors import InputError

__all__ = ["lab_command"]

_KEEP = ("client.pcap", "server.pcap")


def _experiment(path: Path, workload: str | None, duration: str | None, seed: int | None, direction: str | None,
                stack: str | None, cc: str | None) -> tuple[Any, str, list[str]]:
    """The experiment of a scenario file or saved timelines (the same reading as `workbench replay`),
    with the kernel's own scheduler."""
    from workbench.backends._kernel._convert import KERNEL_SCHEDULERS
    from workbench.cli_replay import _plan

    if direction is not None and direction not in ("down", "up"):
        raise InputError(None, f"--direction must be down or up, not {direction!r}")
    plan = _plan(path, "upstream", [], workload, seed, duration, stack=stack, direction=direction)
    e = plan.experiment
    notes = []
    if plan.kind == "scenario":
        from workbench.scenario import load_scenario

        named = getattr(load_scenario(path).scheduler, "name", None)
        if named is not None and named not in KERNEL_SCHEDULERS:
            notes.append(f"the scenario names scheduler {named!r}; the kernel runs its own (upstream default)")
    if cc is not None:
        e = dataclasses.replace(e, stack=dataclasses.replace(e.stack, congestion_control=cc))
    return e, plan.kind, notes


def _metrics(events: Any) -> dict[str, Any]:
    from workbench.metrics import summarize

    return dict(summarize(events)) if events.height else {}


def _stage(result: Any, out_dir: Path, doc: dict[str, Any]) -> None:
    """Build DIR beside itself and rename it into place (or replace files of an existing DIR)."""
    from workbench._files import write_atomic

    files: dict[str, bytes] = {}
    for name, df in (("packet_events.parquet", result.events), ("accuracy_rate.parquet", result.rate_bins),
                     ("accuracy_delay.parquet", result.delay_bins)):
        import io

        buf = io.BytesIO()
        df.write_parquet(buf)
        files[name] = buf.getvalue()
    files["run.json"] = (json.dumps(doc, indent=2, default=str) + "\n").encode()
    if out_dir.is_dir():
        for name in _KEEP:
            shutil.copyfile(result.workdir / name, out_dir / name)
        for name, data in files.items():
            write_atomic(out_dir / name, data)
        return
    for name, data in files.items():
        (result.workdir / name).write_bytes(data)
    for f in result.workdir.iterdir():
        if f.name not in _KEEP and f.name not in files:
            f.unlink()
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(result.workdir, 0o777 & ~umask)
    os.replace(result.workdir, out_dir)


def _print(doc: dict[str, Any], out_dir: Path) -> None:
    from rich.table import Table

    from workbench._text import fmt_value as fmt
    from workbench.cli import out

    m, acc, rec = doc["metrics"], doc["accuracy"], doc["run"]
    out.print(f"[bold]{doc['source']}[/] on the Linux kernel ({doc['kernel']}): {doc['transfer']}, "
              f"delay by {rec['delay_mode']}, wall {rec['wall_s']:.1f} s", highlight=False)
    t = Table(title="Kernel run", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k, v in (("goodput Mbit/s", fmt(m.get("goodput_mbps"))), ("delivered bytes", fmt(m.get("delivered_bytes"))),
                 ("completion s", fmt(m.get("completion_s"), 3)), ("OOO delay p50 ms", fmt(m.get("ooo_p50_ms"))),
                 ("OOO delay p95 ms", fmt(m.get("ooo_p95_ms"))), ("reinjections", fmt(m.get("reinjections"))),
                 ("retransmissions", fmt(m.get("retrans")))):
        t.add_row(k, v)
    out.print(t)
    t = Table(title="Paths", title_justify="left")
    for col in ("path", "bytes", "share", "throughput Mbit/s", "RTT p50 ms", "join ms", "qdisc drops down/up"):
        t.add_column(col, justify="left" if col == "path" else "right")
    joins = {s["path"]: s["start_ns"] for s in rec.get("subflows", [])}
    for n, (down, up) in zip(doc["paths"], doc["links"], strict=True):
        drops = f"{rec['drops'].get(down)}/{rec['drops'].get(up)}"
        j = joins.get(n)
        t.add_row(n, fmt(m.get(f"bytes_{n}")), fmt(m.get(f"share_{n}"), 3), fmt(m.get(f"throughput_mbps_{n}")),
                  fmt(m.get(f"rtt_p50_ms_{n}")), fmt(j / 1e6 if j is not None else None, 1), drops)
    out.print(t)
    rate = f"{100 * acc['rate_err_p50']:.2f} %" if acc.get("rate_err_p50") is not None else "–"
    delay = f"{acc['delay_err_p50_ms']:.3f} ms" if acc.get("delay_err_p50_ms") is not None else "–"
    verdict = "[green]met[/]" if acc["met"] else "[red bold]MISSED[/]"
    lag = acc.get("schedule_lag_p50_ms")
    lag_text = f"; schedule changes took effect {lag:.1f} ms late (p50)" if lag is not None else ""
    out.print(f"emulation accuracy (p50 per 100 ms bin): rate {rate} over {acc['rate_bins']} saturated bins, "
              f"delay {delay} over {acc['delay_bins']} bins — targets {verdict}{lag_text}", highlight=False)
    for w in doc["warnings"]:
        out.print(f"[yellow]warning:[/] {w}", highlight=False)
    out.print(f"wrote client.pcap, server.pcap, packet_events.parquet, accuracy_*.parquet, run.json to {out_dir}",
              highlight=False)


def lab_command(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML/JSON) or saved timelines (.parquet/.csv/.json)")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="folder for the pcaps, PacketEvents, run.json")],
    direction: Annotated[str | None, typer.Option(
        help="who sends: down (server -> client) | up (default: the scenario's, else down)")] = None,
    workload: Annotated[str | None, typer.Option(
        help="bulk | bulk:SECONDS | finite:SIZE (default: the scenario's; timelines: bulk)")] = None,
    duration: Annotated[str | None, typer.Option(help="time cap, e.g. 10s (default: the scenario's; timelines: 10s)")] = None,
    seed: Annotated[int | None, typer.Option(help="random loss seed (default: the scenario's, else 0)")] = None,
    stack: Annotated[str | None, typer.Option(help="stack profile (default: the scenario's, else linux-upstream)")] = None,
    cc: Annotated[str | None, typer.Option(help="congestion control per socket (default: the stack's)")] = None,
    delay: Annotated[str, typer.Option(help="how delay is made: auto | netem | delayline")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="print run.json instead of tables")] = False,
) -> None:
    """Run a scenario on the real Linux kernel (namespaces, HTB, delay line, MPTCP sockets, captures)."""
    from workbench.backends._kernel._sys import check_environment, netem_available
    from workbench.backends._kernel.backend import KernelBackend

    check_environment()  # first: without root nothing else can be looked at anyway
    if delay not in ("auto", "netem", "delayline"):
        raise InputError(None, f"--delay must be auto, netem or delayline, not {delay!r}")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(out_dir, "--out must be a folder, and this is a file")
    if delay == "netem" and not netem_available():
        raise InputError(None, "--delay netem: this kernel has no netem (use --delay delayline or auto)")
    experiment, kind, input_notes = _experiment(scenario, workload, duration, seed, direction, stack, cc)
    backend = KernelBackend(delay=delay)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.", suffix=".lab"))
    try:
        result, notes = backend.run_lab(experiment, workdir=work)
        metrics = _metrics(result.events)
        if not result.emulation_ok:
            metrics["emulation_missed_targets"] = True
        from workbench.experiment import workload_text

        t = experiment.transfers[0]
        paths = [experiment.path(n) for n in result.record["addresses"]]
        doc = {"source": str(scenario), "kind": kind, "backend": "kernel", "kernel": os.uname().release,
               "transfer": f"{workload_text(t.workload)} {t.direction}", "direction": t.direction,
               "seed": experiment.seed, "paths": [p.name for p in paths],
               "links": [[p.down[0], p.up[0]] for p in paths],
               "scheduler": "upstream (kernel default)", "stack": dataclasses.asdict(experiment.stack),
               "metrics": metrics, "accuracy": result.accuracy, "emulation_ok": result.emulation_ok,
               "warnings": input_notes + notes + result.warnings,
               "run": {k: v for k, v in result.record.items() if k not in ("accuracy", "warnings")}}
        _stage(result, out_dir, doc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    _print(doc, out_dir)
