"""Timelines estimated from the fidelity matrix's real-kernel runs (issue 14's "must show"): every
configuration of `benchmarks/fidelity.py` is run on the kernel backend, and its capture pair, and then
its client capture alone, go through what a user runs — `workbench compare` (estimate the timelines,
replay them on the model, compare with what was captured). Per run, view and path: the estimated
capacity bin by bin against the configured rate (measured bins within 5 %, dispersion bins within
15 %), the one-way delay against the one the emulation applied (ms, step by step), outages found
against the configured ones, and compare's goodput and per-path share errors against the capture.

    .venv/bin/python benchmarks/estimation_matrix.py [--seeds 2] [--only NAME ...]   # root

Writes ``docs/estimation.csv`` (one row per run, view and path) and ``docs/ESTIMATION.md`` (the
totals against the issue's targets, and the runs outside them). ``--report-only`` rewrites the doc
from the CSV. The kernel's runs are timing-sensitive: run it on a quiet machine.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import polars as pl
import typer
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fidelity as F  # noqa: E402
from bench_timeline_fidelity import _bin_scores  # noqa: E402

MS = 1_000_000
BIN_NS = 100 * MS
# The targets: compare's goodput within 10 % (pair) / 15 % (client alone) on >= 90 % of runs,
# share within 3 points on >= 90 %; measured capacity within 5 %, dispersion within 15 %, delay within 1 ms.
GOODPUT_TOL = {"pair": 0.10, "client": 0.15}
SHARE_PTS = 3.0
NEED = 0.90

app = typer.Typer(add_completion=False)


def _truth_rate(cfg: F.Config, path_no: int, t_rel_ns: np.ndarray) -> np.ndarray:
    """The configured rate of the data-carrying link of path ``path_no`` over each 100 ms bin
    starting at ``t_rel_ns`` (ns from the run's time zero): the mean over the bin, so a bin that a
    step cuts through is judged against what it really had."""
    series = cfg.paths[path_no].rate_bps
    offs = np.arange(0, BIN_NS, BIN_NS // 10) + BIN_NS // 20
    return np.array([np.mean([series.at(int(t) + int(o)) for o in offs]) for t in t_rel_ns])


def _owd_err_ms(truth_down: Any, truth_up: Any, steps: pl.DataFrame, t_first_ns: int, *,
                pair: bool) -> tuple[float, float]:
    """Median over the timeline's steps of estimated minus applied one-way delay (ms), down and up.
    The truth is the delay the emulation had in force (`link_in_force`: the configured steps as the
    delay line applied them, its decreases ramped so that no packet overtakes another); the client
    view's RTT halves are judged against the mean of the two directions."""
    t = steps["t_ns"].to_numpy() + t_first_ns
    down, up = truth_down.at(t), truth_up.at(t)
    if not pair:
        down = up = (down + up) / 2
    return (float(np.median(steps["owd_down_ns"].to_numpy() - down)) / 1e6,
            float(np.median(steps["owd_up_ns"].to_numpy() - up)) / 1e6)


def _outages_expected(cfg: F.Config, path_no: int) -> int:
    """Zero-rate spans of the configured rate within the run that last at least what the estimator
    calls an outage (`EstimateOptions.outage_min_ns`, 0.8 s: a shorter silence is a gap, shown as
    low capacity; the mahimahi T-Mobile trace's 0.1-0.2 s dips are such gaps)."""
    from workbench.timeline import EstimateOptions

    s, end = cfg.paths[path_no].rate_bps, int(F.DURATION_S * 1e9)
    ts, vs = list(s.t_ns), list(s.values)
    n = 0
    for i, (t, v) in enumerate(zip(ts, vs, strict=True)):
        if v == 0 and t < end and (i == 0 or vs[i - 1] != 0):
            j = i
            while j < len(vs) and vs[j] == 0:
                j += 1
            stop = ts[j] if j < len(ts) else end
            n += (min(stop, end) - t) >= EstimateOptions().outage_min_ns
    return n


def run_one(cfg: F.Config, seed: int) -> list[dict[str, Any]]:
    """One kernel run of ``cfg``, then compare from the pair and from the client capture alone."""
    from workbench.backends import get_backend
    from workbench.backends._kernel._convert import _series
    from workbench.backends._kernel.accuracy import link_in_force
    from workbench.capture import load
    from workbench.compare import compare_capture
    from workbench.timeline import estimate_bins

    work = Path(tempfile.mkdtemp(prefix=f"estimation-{cfg.name}-{seed}-"))
    base = {"config": cfg.name, "axis": cfg.axis, "seed": seed}
    try:
        e = F.experiment(cfg, seed)
        run = get_backend("kernel").run(e, workdir=work)
        if run.counters.get("emulation_ok") is False:
            return [base | {"error": f"emulation missed its targets: {'; '.join(run.warnings)}"}]
        rec = run.detail.record
        delays = []
        for p in e.paths:
            down, up = e.link(p.down[0]), e.link(p.up[0])
            delays.append(tuple(link_in_force(_series(lk.rate_bps), _series(lk.owd_ns), name=lk.name,
                                              emulation=rec["emulation"])[1] for lk in (down, up)))
        names = {a["client"]: name for name, a in rec["addresses"].items()}
        t0_ns = int(run.provenance["t0_ns"])
        rows = []
        for view in ("pair", "client"):
            w0 = time.monotonic()
            cap = load(run.provenance["client_pcap"], peer=run.provenance["server_pcap"] if view == "pair" else None,
                       path_names=names, use_cache=False)
            r = compare_capture(cap)
            ev = cap.connection(cap.main_connection)
            bins = estimate_bins(ev)
            table = {x["metric"]: x for x in r.table.iter_rows(named=True)}
            t_first = int(ev["t_ns"].min()) - t0_ns  # type: ignore[arg-type]
            for i in range(len(cfg.paths)):
                name = f"p{i + 1}"
                b = bins.filter(pl.col("path") == name)
                tl = r.timelines.get(name)
                truth = _truth_rate(cfg, i, b["t_epoch_ns"].to_numpy() - t0_ns)
                down_err, up_err = (_owd_err_ms(*delays[i], tl.steps, t_first, pair=view == "pair")
                                    if tl is not None else (None, None))
                share = table.get(f"share_{name}", {}).get("error")
                rows.append(base | {"view": view, "path": name, **_bin_scores(b, truth),
                                    "owd_down_err_ms": down_err, "owd_up_err_ms": up_err,
                                    "outages": len(tl.outages) if tl is not None else 0,
                                    "outages_expected": _outages_expected(cfg, i),
                                    "goodput_observed_mbps": table["goodput_mbps"]["observed"],
                                    "goodput_replayed_mbps": table["goodput_mbps"]["replayed"],
                                    "goodput_err": table["goodput_mbps"]["error"],
                                    "share_err_pts": 100 * share if share is not None else None,
                                    "warnings": len(r.warnings), "wall_s": time.monotonic() - w0, "error": None})
        return rows
    except Exception as ex:  # one failed run is a row with its error, not a lost matrix
        return [base | {"error": f"{type(ex).__name__}: {ex}"}]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_doc(df: pl.DataFrame, path: Path, *, command: str) -> dict[str, tuple[int, int]]:
    """ESTIMATION.md from the rows: totals per view, then every run outside a target."""
    good = df.filter(pl.col("error").is_null())
    lines = ["# Timelines estimated from real-kernel runs", "",
             "Generated by `benchmarks/estimation_matrix.py` (do not edit): every configuration of the fidelity",
             "matrix (docs/FIDELITY.md) run on the kernel backend, then `workbench compare` on its capture pair",
             "and on its client capture alone. Capacity is judged bin by bin (100 ms) against the configured",
             "rate: bins measured while the path was saturated within 5 %, bins estimated from packet dispersion",
             "within 15 % (lower-bound and outage bins are not capacity claims). One-way delay: median over the",
             "timeline's steps of estimated minus the delay the emulation applied (its delay line ramps a",
             "decrease so that no packet overtakes another; the client view has only RTT / 2). Goodput and share:",
             "compare's replay against what the capture shows (from the sender's DATA_ACKs when the capture holds",
             "the data sender only: the client capture of an upload).", "",
             f"Command: `{command}`. Data: `estimation.csv`.", ""]
    counts: dict[str, tuple[int, int]] = {}
    lines += ["| view | runs | goodput within tol. | share within 3 pts | measured bins within 5 % | "
              "dispersion bins within 15 % | delay within 1 ms | outages found / configured |",
              "|---|---|---|---|---|---|---|---|"]
    for view in ("pair", "client"):
        g = good.filter(pl.col("view") == view)
        if not g.height:
            continue
        runs = g.unique(["config", "seed"])
        gp = int((runs["goodput_err"].abs() <= GOODPUT_TOL[view]).sum())
        sh = g.filter(pl.col("share_err_pts").is_not_null())
        sh_ok = int((sh["share_err_pts"].abs() <= SHARE_PTS).sum())
        meas = g.filter(pl.col("measured") > 0)
        disp = g.filter(pl.col("dispersion") > 0)
        m_ok = float((meas["measured_ok"] * meas["measured"]).sum())
        d_ok = float((disp["dispersion_ok"] * disp["dispersion"]).sum())
        dl = g.filter(pl.col("owd_down_err_ms").is_not_null())
        dl_ok = int(((dl["owd_down_err_ms"].abs() <= 1) & (dl["owd_up_err_ms"].abs() <= 1)).sum())
        counts[f"goodput_{view}"] = (gp, runs.height)
        counts[f"share_{view}"] = (sh_ok, sh.height)
        lines.append(f"| {view} | {runs.height} | {gp} / {runs.height} ({100 * gp / runs.height:.0f} %, "
                     f"tol. {100 * GOODPUT_TOL[view]:.0f} %) | {sh_ok} / {sh.height} "
                     f"({100 * sh_ok / max(sh.height, 1):.0f} %) | {m_ok:.0f} / {meas['measured'].sum()} "
                     f"({100 * m_ok / max(int(meas['measured'].sum()), 1):.1f} %) | {d_ok:.0f} / "
                     f"{disp['dispersion'].sum()} ({100 * d_ok / max(int(disp['dispersion'].sum()), 1):.1f} %) | "
                     f"{dl_ok} / {dl.height} | {int(g['outages'].sum())} / {int(g['outages_expected'].sum())} |")
    lines += ["", f"Targets: goodput within 10 % (pair) / 15 % (client alone) and share within 3 points on "
              f"≥ {100 * NEED:.0f} % of runs.", "",
              "What the runs outside show:", "",
              "- **A base delay that moves under a standing queue** (`steps-pair`, the `ping-*` delay traces): the",
              "  estimator takes each path's base delay as the running minimum of the per-bin minimum delays over",
              "  10 s, so a delay that rises (30 -> 60 ms) while the path stays saturated is read as queueing and",
              "  the timeline keeps the lower level (errors of 2-10 ms). Tried: a 1 s level detector (a per-bin",
              "  minimum that holds still above the running minimum is a new base): on these runs the per-bin",
              "  minima never hold still (54-134 ms at a 60 ms base), since the queue does not drain; a passive",
              "  capture cannot tell the two apart there, and a shorter window would take standing queues for delay",
              "  on every bufferbloated path.",
              "- **Goodput off where the model is** (`rate-x10*`, `rmem-256k`, `umts+wifi`, `5g-car2`): the",
              "  capacity bins of these runs are within 5 % / 15 % (the columns above), so the error is the replay's",
              "  (docs/FIDELITY.md: the large rate-gap runs vary by 15 % between two kernel runs of the same",
              "  experiment).",
              ""]
    bad = df.filter(pl.col("error").is_not_null())
    if bad.height:
        lines += ["## Runs left out", ""]
        lines += [f"- `{r['config']}` seed {r['seed']}: {r['error']}" for r in bad.iter_rows(named=True)]
        lines.append("")
    lines += ["## Runs outside a target", "",
              "| config | seed | view | goodput obs. / replayed (Mbit/s) | error | worst share error (pts) | "
              "delay error down / up (ms, worst path) | outages found / configured |", "|---|---|---|---|---|---|---|---|"]
    for (cfg, seed, view), g in good.group_by("config", "seed", "view", maintain_order=True):
        r0 = g.row(0, named=True)
        sh = g["share_err_pts"].drop_nulls()
        worst_sh = float(sh.abs().max()) if sh.len() else 0.0  # type: ignore[arg-type]
        dd = g["owd_down_err_ms"].drop_nulls().abs().max()
        du = g["owd_up_err_ms"].drop_nulls().abs().max()
        out_ok = int(g["outages"].sum()) == int(g["outages_expected"].sum())
        outside = (abs(r0["goodput_err"]) > GOODPUT_TOL[str(view)] or worst_sh > SHARE_PTS
                   or (dd is not None and float(dd) > 1) or (du is not None and float(du) > 1) or not out_ok)  # type: ignore[arg-type]
        if outside:
            lines.append(f"| {cfg} | {seed} | {view} | {r0['goodput_observed_mbps']:.2f} / "
                         f"{r0['goodput_replayed_mbps']:.2f} | {100 * r0['goodput_err']:+.1f} % | {worst_sh:.1f} | "
                         f"{float(dd or 0):.2f} / {float(du or 0):.2f} | {int(g['outages'].sum())} / "  # type: ignore[arg-type]
                         f"{int(g['outages_expected'].sum())} |")
    path.write_text("\n".join(lines) + "\n")
    return counts


@app.command()
def main(seeds: Annotated[int, typer.Option(help="seeds per configuration")] = 2,
         only: Annotated[list[str] | None, typer.Option(help="only this configuration (repeatable)")] = None,
         out: Annotated[Path, typer.Option(help="folder for ESTIMATION.md and estimation.csv")] = ROOT / "docs",
         report_only: Annotated[bool, typer.Option(help="rewrite ESTIMATION.md from the CSV")] = False) -> None:
    """Runs the matrix on the kernel and writes ESTIMATION.md and estimation.csv in OUT."""
    con = Console()
    csv = out / "estimation.csv"
    cfgs = [c for c in F.configs() if not only or c.name in only]
    if report_only:
        df = pl.read_csv(csv, infer_schema_length=None)
        by_name = {c.name: c for c in F.configs()}
        df = df.with_columns(outages_expected=pl.struct("config", "path").map_elements(
            lambda r: _outages_expected(by_name[r["config"]], int(r["path"][1:]) - 1) if r["path"] else None,
            return_dtype=pl.Int64))
    else:
        if os.geteuid() != 0:
            con.print("estimation_matrix: the kernel backend needs root")
            raise typer.Exit(2)
        rows: list[dict[str, Any]] = []
        for i, c in enumerate(cfgs):
            for s in range(seeds):
                got = run_one(c, s)
                rows += got
                gp = next((r.get("goodput_err") for r in got if r.get("view") == "pair"), None)
                con.print(f"{i + 1}/{len(cfgs)} {c.name} seed {s}: "
                          + (f"ERROR {got[0]['error']}" if got[0].get("error") else
                             f"compare goodput error {100 * gp:+.1f} % (pair)" if gp is not None else "?")
                          + f" load {os.getloadavg()[0]:.1f}")
        df = pl.DataFrame(rows, infer_schema_length=None)
        if only and csv.is_file():
            old = pl.read_csv(csv, infer_schema_length=None)
            df = pl.concat([old.filter(~pl.col("config").is_in(list(only))), df.select(old.columns)],
                           how="vertical_relaxed")
        tmp = csv.with_suffix(".csv.tmp")
        df.write_csv(tmp, float_precision=4)
        tmp.replace(csv)
    cmd = "python benchmarks/estimation_matrix.py" + "".join(f" --only {n}" for n in only or []) \
        + (" --report-only" if report_only else "")
    for k, (a, b) in write_doc(df, out / "ESTIMATION.md", command=cmd).items():
        con.print(f"{k:16} {a} / {b}")
    con.print(f"wrote {out / 'ESTIMATION.md'} and {csv}")


if __name__ == "__main__":
    app()
