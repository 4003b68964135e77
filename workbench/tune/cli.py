"""The ``workbench tune`` command: a thin typer layer over `workbench.tune.run.run_tuning`.

Registered in ``workbench/cli.py`` with::

    from workbench.tune.cli import tune_command
    app.command("tune")(_user_errors(tune_command))

``python -m workbench.tune.cli ...`` runs the same command stand-alone (used by the multi-process
tests, and handy on worker machines).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import typer

__all__ = ["tune_command"]


def tune_command(
    inputs: Annotated[list[str], typer.Argument(
        help="what to tune on: scenario files, lab results.json or folders with client.pcap + server.pcap, "
             "captures (a.pcap or a.pcap+peer.pcap), timelines, rate/mahimahi traces (join paths with +)")],
    scheduler: Annotated[str, typer.Option("--scheduler", "-s", help="scheduler to tune (see `workbench schedulers`)")],
    objective: Annotated[list[str] | None, typer.Option(
        "--objective", "-O", help="goodput | ooo_p95 | ooo_mean | ooo_p99 | completion | app_delay | app_delay_p95; "
                                  "repeat for a multi-objective Pareto front")] = None,
    aggregate: Annotated[str, typer.Option(help="combine inputs by mean or worst")] = "mean",
    trials: Annotated[int, typer.Option("--trials", "-n", help="finished trials the study should have in total "
                                                               "(restarts and other workers count)")] = 50,
    holdout: Annotated[list[str] | None, typer.Option(
        "--holdout", help="held-out input for tuned-vs-default (repeatable); never used for tuning")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path("tune-results"),
    storage: Annotated[str | None, typer.Option(
        help="optuna storage: sqlite:///f.db, postgresql://..., mysql+pymysql://..., journal:PATH "
             "(default: sqlite in --out)")] = None,
    study: Annotated[str | None, typer.Option(help="study name (default: from scheduler, objectives, inputs)")] = None,
    tune: Annotated[list[str] | None, typer.Option(
        "--tune", help="tune only this parameter (repeatable; default: every parameter with a range)")] = None,
    space: Annotated[list[str] | None, typer.Option(
        "--space", help="search range NAME=LOW:HIGH[:log] or choices NAME=a|b|c (repeatable)")] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="fix a parameter NAME=VALUE (not tuned; repeatable)")] = None,
    seed: Annotated[int, typer.Option(help="sampler seed")] = 0,
    replay_seed: Annotated[int, typer.Option(help="seed of the first replay of each input")] = 0,
    repeats: Annotated[int, typer.Option(help="replays per input with seeds replay_seed, replay_seed+1, ...")] = 1,
    duration: Annotated[str | None, typer.Option(
        help="simulated time per replay, e.g. 10s (default: the input's length, at most 30 s)")] = None,
    workload: Annotated[str, typer.Option(help="bulk | finite:BYTES, for inputs that are not scenario files")] = "bulk",
    prune: Annotated[bool, typer.Option(help="stop hopeless trials early (single objective, several inputs)")] = True,
    timeout: Annotated[float | None, typer.Option(help="stop this worker after so many seconds")] = None,
    heartbeat: Annotated[float, typer.Option(
        help="seconds between heartbeats of a running trial; a trial silent for 4x this is taken as "
             "crashed and re-run")] = 10.0,
    evaluate: Annotated[bool, typer.Option(help="replay tuned vs default on tuning and held-out inputs")] = True,
    html: Annotated[bool, typer.Option(help="write tune.html with optuna's figures")] = True,
    min_goodput: Annotated[str | None, typer.Option(
        "--min-goodput", help="the best value must keep this goodput: a factor of the defaults' (0.95) or "
                              "an absolute rate (40Mbps); trials below it are never called best")] = None,
    max_ooo_p95: Annotated[str | None, typer.Option(
        "--max-ooo-p95", help="the best value must keep OOO delay p95 at most this: a factor of the "
                              "defaults' (1.1) or an absolute delay (50ms)")] = None,
    max_ooo_mean: Annotated[str | None, typer.Option(
        "--max-ooo-mean", help="as --max-ooo-p95, for the mean OOO delay")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    progress: Annotated[bool, typer.Option(help="show a progress bar")] = True,
) -> None:
    """Tune a scheduler's parameters on traces with optuna: best parameters, Pareto fronts, tuned vs
    default on held-out traces; resumable, any number of workers on one storage."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from workbench.cli import parse_duration_ns
    from workbench.tune.objective import parse_constraint
    from workbench.tune.run import Callbacks, TuneSettings, run_tuning

    constraints = [parse_constraint(name, cast('Literal["min", "max"]', bound), text)
                   for name, bound, text in (("goodput", "min", min_goodput), ("ooo_p95", "max", max_ooo_p95),
                                             ("ooo_mean", "max", max_ooo_mean))
                   if text is not None]

    err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
    out_console = Console(width=None if sys.stdout.isatty() else 160)
    settings = TuneSettings(
        inputs=inputs, scheduler=scheduler, out_dir=out, objectives=objective or ["ooo_p95"],
        aggregate=aggregate,  # type: ignore[arg-type]
        n_trials=trials, holdout=holdout or [], storage=storage, study=study, tune=tune or [], space=space or [],
        fixed=param or [], seed=seed, replay_seed=replay_seed, repeats=repeats,
        duration_ns=parse_duration_ns(duration) if duration else None, workload=workload, prune=prune,
        timeout_s=timeout, heartbeat_s=heartbeat, evaluate=evaluate, html=html,
        constraints=constraints)

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[info]}"), console=err, disable=not progress, transient=False)
    tasks: dict[str, Any] = {}

    def on_start(name: str, where: str, n: int) -> None:
        err.print(f"study {name} in {where}", highlight=False, markup=False)
        tasks["trials"] = bar.add_task("trials", total=n, info="")

    def on_trials(done: int, n: int, best: str) -> None:
        bar.update(tasks["trials"], completed=min(done, n), info=best)

    def on_eval(done: int, n: int) -> None:
        if "eval" not in tasks:
            tasks["eval"] = bar.add_task("tuned vs default", total=n, info="")
        bar.update(tasks["eval"], completed=done)

    with bar:
        outcome = run_tuning(settings, Callbacks(on_start=on_start, on_trials=on_trials, on_eval=on_eval))
    s = outcome.summary
    if as_json:
        doc = dict(s)
        if outcome.evaluation is not None:
            doc["evaluation"] = outcome.evaluation.as_dict()
        doc["files"] = {k: str(v) for k, v in outcome.files.items()}
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    _print(out_console, outcome)


def _print(console: Any, outcome: Any) -> None:
    from rich.table import Table

    s = outcome.summary
    c = s["trials"]
    console.print(f"study {s['study']}: {c['finished']} finished trials ({c['complete']} complete, {c['pruned']} "
                  f"pruned, {c['failed']} failed); this worker finished {s['worker']['finished_here']} in "
                  f"{s['worker']['wall_s']:.1f} s", highlight=False)
    from workbench.tune.output import change_lines

    if s.get("constraints"):
        c = s["constraints"]
        console.print(f"constraints: {'; '.join(c['required'])}: kept by {c['kept_by']} of {c['complete']} "
                      "complete trials", highlight=False, markup=False)
        if not s.get("best") and not s.get("pareto"):
            console.print("[yellow]warning:[/] no trial keeps the constraints: nothing beats the defaults",
                          highlight=False)
    if s.get("best"):
        b = s["best"]
        vals = ", ".join(f"{k} {v:.4g}" for k, v in b["values"].items())
        console.print(f"best: trial {b['trial']}: {vals}", highlight=False)
        console.print(f"  {b['param_line']}", highlight=False, markup=False)
        # Every objective's change, not only the one tuned for: a lower OOO delay bought with goodput
        # shows as such.
        console.print("  change against the defaults:", highlight=False)
        for line in change_lines(b):
            console.print(f"    {line}", highlight=False, markup=False)
    for e in s.get("pareto") or []:
        vals = ", ".join(f"{k} {v:.4g}" for k, v in e["values"].items())
        console.print(f"pareto trial {e['trial']}: {vals}  {e['param_line']}", highlight=False, markup=False)
        console.print("    " + "; ".join(change_lines(e)), highlight=False, markup=False)
    ev = outcome.evaluation
    if ev is not None:
        metrics = list(dict.fromkeys([*(o["metric"] for o in s["objectives"]), "goodput_mbps", "ooo_p95_ms"]))
        t = Table(title=f"Tuned vs default ({s['aggregate']} over inputs)", title_justify="left")
        for col in ("set", "candidate", *metrics, "vs default"):
            t.add_column(col, justify="left" if col in ("set", "candidate", "vs default") else "right")
        for set_name, by_cand in ev.aggregates.items():
            for cand, agg in by_cand.items():
                t.add_row(set_name, cand, *(f"{agg[m]:.4g}" if agg.get(m) is not None else "–" for m in metrics),
                          ev.verdicts.get(set_name, {}).get(cand, ""))
        console.print(t)
        for f in ev.flags:
            console.print(f"[yellow]warning:[/] {f}", highlight=False)
    for k, p in outcome.files.items():
        console.print(f"{k}: {p}", highlight=False, markup=False)


def main() -> None:
    from workbench.cli import _user_errors

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command("tune")(_user_errors(tune_command))
    app()


if __name__ == "__main__":
    main()
