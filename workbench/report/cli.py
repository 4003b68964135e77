"""The ``workbench report`` command: a thin typer layer over `workbench.report.run_report`.

Registered in ``workbench/cli.py`` with ``app.command("report")(_user_errors(report_command))``.
Exit codes: 0 every input replayed (or analysed), 1 some inputs failed (the index still lists them
all with their one-line error), 2 bad usage (unknown scheduler, bad --param, no inputs, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from workbench._safe_refs import ALLOW_OUTSIDE_REFS_HELP

if TYPE_CHECKING:
    from workbench.report.pipeline import ReportSettings

__all__ = ["report_command"]


def _canonical(inputs: list[str], out: Path, settings: ReportSettings, params: list[str], duration: float | None,
               paths: list[str], jobs: int | None, executor: str, address: str | None) -> list[str]:
    """The command line that reproduces this report, every setting spelled out (argv may be a
    wrapper's, and defaults may change between versions)."""
    cmd = ["workbench", "report", *inputs, "-o", str(out), "--schedulers", ",".join(settings.schedulers)]
    for p in params:
        cmd += ["--param", p]
    cmd += ["--seed", str(settings.seed), "--workload", settings.workload, "--cc", settings.cc,
            "--baselines" if settings.baselines else "--no-baselines"]
    if settings.kernel:
        cmd.append("--kernel")
    if settings.allow_outside_refs:
        cmd.append("--allow-outside-refs")
    if duration is not None:
        cmd += ["--duration", repr(duration)]
    for p in paths:
        cmd += ["--path", p]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    if executor != "local":
        cmd += ["--executor", executor, "--address", str(address)]
    return cmd


def report_command(
    inputs: Annotated[list[str], typer.Argument(
        help="captures (a.pcap or a.pcap+peer.pcap), CSV exports, timelines, scenario or manifest files, "
             "rate/mahimahi traces, or folders of these (searched recursively)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder (created if missing)")],
    schedulers: Annotated[str, typer.Option(
        "--schedulers", "-s", help="comma-separated scheduler names, or 'all'")] = "all",
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="scheduler parameter SCHEDULER.NAME=VALUE (repeatable)")] = None,
    seed: Annotated[int, typer.Option(help="random seed of every replay")] = 0,
    duration: Annotated[float | None, typer.Option(
        help="replay duration cap in seconds (default: the capture's duration)")] = None,
    workload: Annotated[str, typer.Option(
        help="auto (finite when the capture was a finished transfer, else bulk) | bulk | finite")] = "auto",
    baselines: Annotated[bool, typer.Option(help="also replay single-path TCP on each path")] = True,
    cc: Annotated[str, typer.Option(help="congestion control of capture replays: cubic | reno | lia | olia")] = "cubic",
    kernel: Annotated[bool, typer.Option(
        help="also run the upstream scheduler on the real Linux kernel (network namespaces: needs root and an "
             "MPTCP kernel) and show it beside the model")] = False,
    path: Annotated[list[str] | None, typer.Option(
        "--path", help="name a path by its client address: ADDR=NAME (repeatable)")] = None,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", "-j", min=1, help="parallel worker processes (default: number of cores)")] = None,
    executor: Annotated[str, typer.Option(help="local | dask")] = "local",
    address: Annotated[str | None, typer.Option(
        help="dask scheduler address tcp://HOST:PORT (with --executor dask)")] = None,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
    allow_outside_refs: Annotated[bool, typer.Option("--allow-outside-refs", help=ALLOW_OUTSIDE_REFS_HELP)] = False,
) -> None:
    """Batch report: per input an HTML page (timelines, OOO delay, goodput, burstiness, shares, queues,
    buffers, metrics table), plus index.html, metrics.csv/.parquet and manifest.json."""
    from rich.console import Console

    from workbench.capture import parse_path_names
    from workbench.report.batch import resolve_settings, run_report

    settings = resolve_settings(schedulers, param or [], seed=seed,
                                duration_ns=None if duration is None else round(duration * 1e9),
                                workload=workload, baselines=baselines, cc=cc, kernel=kernel,
                                allow_outside_refs=allow_outside_refs)
    outcome = run_report(inputs, out, settings, jobs=jobs, executor=executor, address=address,
                         path_names=parse_path_names(path or []), show_progress=progress,
                         command_line=_canonical(inputs, out, settings, param or [], duration, path or [], jobs,
                                                 executor, address))
    err = Console(stderr=True)
    err.print(f"{outcome.n_ok} ok, {outcome.n_partial} analysed without replay, {outcome.n_failed} failed "
              f"of {outcome.n_inputs} inputs in {outcome.wall_s:.1f} s -> {outcome.out_dir / 'index.html'}",
              highlight=False, markup=False)
    for r in outcome.results:
        if r["status"] == "error":
            err.print(f"error: {r['error']}", highlight=False, markup=False, soft_wrap=True)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
