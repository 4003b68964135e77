"""The work of one report input, as a plain function of plain data: load → observed metrics →
path timelines (estimated from the capture, or given) → one replay per scheduler and a single-path
TCP baseline per path → metrics rows + figure data.

`run_job` is what local worker processes and dask workers execute. It returns a dict of plain
Python values and bytes (the metrics table as parquet bytes), never polars/plotly objects, so the
result pickles cheaply and the parent alone writes files. Every number comes from library calls
(`workbench.metrics.summarize`, `aggregation_benefit`, the series functions via `figures`); this
module only decides what to run and with which workload and duration:

* workload: ``auto`` = a finite transfer of the delivered bytes when the capture shows a finished
  transfer (DATA_FIN seen in the data direction, nothing left undelivered), else bulk;
* duration: ``--duration`` when given, else the main connection's duration in the capture (bulk
  replays are cut there). A finite replay ends by itself; its cap is then ``FINITE_CAP_FACTOR`` x
  the capture's duration, so a scheduler slower than the kernel is still seen finishing;
* connection settings of capture replays: `workbench.capture_experiment` (the one builder `compare`,
  `tune` and the page use too): what the capture says (MSS, header bytes per segment, the client's
  delay before joining subflows), an upstream-Linux stack (32 MiB receive buffer, autotuned send
  buffer) and ``--cc``; what the capture cannot say (CSV exports have no frame lengths) falls back
  to the model's defaults, with a note;
* the scheduler the input was made with (`workbench.report.made_with`: a lab run's results.json, a
  scenario's ``scheduler:``, else Linux's default, assumed) is recorded as ``made_with``: the trust
  table compares the model's replay of that scheduler with what was observed;
* every replay is an `Experiment` run on a backend (`workbench.backends`): the model for every
  scheduler and the single-path baselines, and with ``kernel`` also the real Linux kernel for the
  scheduler it runs (upstream default), whose row carries its difference from the model's;
* non-capture inputs (timelines, scenario, rate/mahimahi traces) have no observed row; their duration
  is ``--duration``, else the scenario's ``duration_s``, else the timelines' span, else 10 s. A
  scenario's own workload and connection settings are used (`workbench.scenario.load_scenario`);
  the report's ``--seed`` replaces the file's, so one seed governs the whole report.
"""

from __future__ import annotations

import io
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from workbench.errors import InputError
from workbench.report.jobs import JobSpec

__all__ = ["FINITE_CAP_FACTOR", "ReportSettings", "params_text", "run_job"]

FINITE_CAP_FACTOR = 4
DEFAULT_DURATION_NS = 10_000_000_000
# When a timeline or rate file gives no delay, the replay needs one: stated in the page notes.
DEFAULT_OWD_NS = 20_000_000

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class ReportSettings:
    """Everything that decides a report's numbers besides its inputs (recorded in manifest.json)."""

    schedulers: tuple[str, ...]
    params: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()   # (scheduler, ((key, value), ...))
    seed: int = 0
    duration_ns: int | None = None
    workload: str = "auto"             # auto | bulk | finite
    baselines: bool = True
    cc: str = "cubic"                  # congestion control of capture replays (scenarios say their own)
    max_points: int = 600              # per figure trace (display thinning only)
    kernel: bool = False               # also run the upstream scheduler on the real kernel (root)
    allow_outside_refs: bool = False   # scenarios may refer to files outside their folder (_safe_refs)

    def params_of(self, name: str) -> dict[str, Any]:
        return dict(dict(self.params).get(name, ()))

    def to_dict(self) -> dict[str, Any]:
        return {"schedulers": list(self.schedulers),
                "params": {k: dict(v) for k, v in self.params},
                "seed": self.seed, "duration_ns": self.duration_ns, "workload": self.workload,
                "baselines": self.baselines, "cc": self.cc, "max_points": self.max_points, "kernel": self.kernel,
                "allow_outside_refs": self.allow_outside_refs}


def params_text(name: str, settings: ReportSettings) -> str:
    """Every parameter of scheduler ``name`` as the replay used it (defaults + overrides), as
    ``k=v`` pairs: recorded in each row, so the CSV and the page say what was replayed."""
    from workbench.schedulers import info

    given = settings.params_of(name)
    full = {p.name: given.get(p.name, p.default) for p in info(name).params} | given
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(full.items()))


def _one_line(e: BaseException) -> str:
    if isinstance(e, InputError):
        text = str(e)
    else:
        text = f"{type(e).__name__}: {e}"
    return " ".join(text.split()) or type(e).__name__


class _Steps:
    """Progress of one job in steps; `tick` reports to the caller's callback when there is one."""

    def __init__(self, total: int, cb: Progress | None) -> None:
        self.total, self.done, self.cb = total, 0, cb

    def tick(self, label: str, n: int = 1) -> None:
        self.done += n
        if self.cb is not None:
            self.cb(min(self.done, self.total), self.total, label)


def _finite_transfer(events: Any, summary: dict[str, Any]) -> bool:
    # DATA_FIN, or a TCP FIN from the sender where the capture cannot show DSS flags (CSV exports).
    from workbench.compare import finished_transfer
    return finished_transfer(events, summary)


def _input_timelines(spec: JobSpec, *, allow_outside: bool = False) -> tuple[Any, Any, Any, int | None, Any]:
    """Timelines of a non-capture input, and what the file itself asks for: workload spec, stack
    profile, duration and scheduler (None where it says nothing). A scenario's referenced files must
    lie in its folder unless `allow_outside`."""
    from workbench.timeline import Timelines, load_timelines, read_mahimahi, read_rate_csv, read_scenario
    path = Path(spec.files[0])
    if spec.kind == "timelines":
        return load_timelines(path), None, None, None, None
    if spec.kind == "scenario":
        from workbench.scenario import load_scenario
        sc = load_scenario(path, allow_outside=allow_outside)
        return (read_scenario(path, allow_outside=allow_outside), sc.workload_spec, sc.stack, sc.duration_ns,
                sc.scheduler)
    if spec.kind == "rate":
        return Timelines([read_rate_csv(path, kind="capacity", name=path.stem)]), None, None, None, None
    if spec.kind == "mahimahi":
        return Timelines([read_mahimahi(path, name=path.stem)]), None, None, None, None
    raise InputError(path, f"cannot take timelines from a {spec.kind} input")


def _capture_stack(cap: Any, conn: int, cc: str, notes: list[str], *, summary: dict[str, Any]) -> tuple[Any, int]:
    """(stack, join_after_ns) of a capture's replays (see the module docstring); ``summary``: the
    observed connection's metrics row."""
    from workbench.capture_experiment import capture_settings, capture_stack
    try:
        cs = capture_settings(cap, conn, summary=summary)
    except (InputError, TypeError, ValueError) as e:
        notes.append(f"connection settings not readable from the capture ({_one_line(e)}): model defaults used")
        return capture_stack(None, congestion_control=cc, rcv_buf_bytes=None), 0
    notes.extend(cs.warnings)
    return capture_stack(cs, congestion_control=cc, rcv_buf_bytes=None), cs.join_after_ns


def _baseline_experiments(e: Any) -> dict[str, Any]:
    """Plain single-path TCP on each path alone, with the same links, stack, workload and seed."""
    from dataclasses import replace

    from workbench.experiment import SchedulerSpec, SubflowSpec
    out = {}
    for p in e.paths:
        names = {*p.down, *p.up}
        out[p.name] = replace(e, links=tuple(lk for lk in e.links if lk.name in names), paths=(p,),
                              subflows=(SubflowSpec(p.name),), protocol="tcp",
                              scheduler=SchedulerSpec.of("minrtt", {"opportunistic": False}))
    return out


def _capture_view(ev: Any, conn: int, timelines: Any, spec: JobSpec, max_points: int) -> dict[str, Any] | None:
    """The capture views' data (`workbench.report.capture_views`), with a lab run's ground truth
    beside the capture drawn over them; a view that cannot be drawn never fails the input."""
    from workbench.report.capture_views import capture_view_data, lab_truth

    try:
        paths = list(timelines) if timelines is not None else sorted(ev["path"].unique().to_list())
        truth = lab_truth(Path(spec.files[0]).parent, paths) if spec.kind == "capture" else []
        return capture_view_data(ev, conn, timelines=timelines, truth=truth, max_points=max_points)
    except Exception:
        return None


def _timelines_span_ns(timelines: Any) -> int | None:
    spans = []
    for tl in timelines.values():
        if tl.end_ns is not None:
            spans.append(int(tl.end_ns))
        elif tl.steps.height > 1:
            spans.append(int(tl.steps["t_ns"][-1]))
    return max(spans) if spans else None


def _summarized(base: dict[str, Any], events: Any, samples: Any, conn: int | None) -> tuple[dict[str, Any], Any]:
    """A source's metrics row and its `Prepared` connection, which its figures are drawn from too."""
    from workbench.metrics import prepare, summarize_prepared
    prep = prepare(events, conn)
    return base | summarize_prepared(prep, samples), prep


def run_job(spec: JobSpec, settings: ReportSettings, progress: Progress | None = None) -> dict[str, Any]:
    """Run one input; never raises for a bad input: the result's ``status`` is "ok", "partial"
    (observed metrics only, the replay could not be set up: ``note`` says why) or "error" (``error``
    is the one-line reason)."""
    t0 = time.perf_counter()
    result: dict[str, Any] = {
        "id": spec.id, "label": spec.label, "kind": spec.kind, "status": "error", "error": spec.error,
        "note": None, "files": [], "warnings": [], "notes": [], "metrics_parquet": None, "figures": None,
        "workload": None, "duration_ns": None, "connection": None, "wall_s": 0.0, "trace": None,
        "made_with": None,
    }
    from workbench.capture import content_hash  # the parse and analysis caches' hash: `load` reuses it

    for f in [*spec.files, *([spec.peer] if spec.peer else [])]:
        role = "peer" if f == spec.peer else "input"
        try:
            result["files"].append({"path": f, "role": role, "sha256": content_hash(Path(f)),
                                    "bytes": Path(f).stat().st_size})
        except OSError:
            result["files"].append({"path": f, "role": role, "sha256": None, "bytes": None})
    if spec.error is not None:
        return result
    try:
        _run(spec, settings, progress, result)
    except InputError as e:
        result["status"], result["error"] = "error", _one_line(e)
    except Exception as e:  # one bad input never aborts the batch
        result["status"], result["error"] = "error", _one_line(e)
        result["trace"] = traceback.format_exc()
    result["wall_s"] = time.perf_counter() - t0
    return result


def _run(spec: JobSpec, settings: ReportSettings, progress: Progress | None, result: dict[str, Any]) -> None:
    import polars as pl

    from workbench.backends import get_backend
    from workbench.capture_experiment import capture_stack, timelines_experiment
    from workbench.experiment import BulkWorkload, FiniteWorkload, SchedulerSpec, workload_text
    from workbench.metrics import aggregation_benefit
    from workbench.report import figures, made_with
    from workbench.timeline import estimate_timelines, fill_unknown, timeline_figure

    n_steps = 3 + len(settings.schedulers) + (1 if settings.baselines else 0) + (1 if settings.kernel else 0)
    join_after_ns = 0
    direction: Literal["down", "up"] = "down"
    steps = _Steps(n_steps, progress)
    common = {"input": spec.label, "input_id": spec.id, "seed": settings.seed}
    rows: list[dict[str, Any]] = []
    fig_sources: list[figures.SourceData] = []
    notes: list[str] = result["notes"]

    observed = None
    if spec.kind in ("capture", "csv"):
        from workbench.capture import load
        # The scheduler the capture was made with, where the lab run beside it says (the trust table's
        # reference), else Linux's default, assumed.
        said = made_with.from_lab_run(Path(spec.files[0]).parent) if spec.kind == "capture" else None
        result["made_with"] = (said or made_with.assumed()).to_dict()
        src: Any = spec.files[0] if spec.kind == "capture" else list(spec.files)
        digests = {Path(f["path"]): f["sha256"] for f in result["files"] if f["sha256"] is not None}
        cap = load(src, peer=spec.peer, path_names=dict(spec.path_names) or None, digests=digests)
        result["warnings"] = list(cap.warnings)
        conn = cap.main_connection
        ev = cap.connection(conn)
        steps.tick("observed metrics")
        obs, obs_prep = _summarized(common | {"source": "observed", "kind": "observed"}, ev, None, conn)
        c = cap.connections.filter(pl.col("conn") == conn).row(0, named=True)
        capture_ns = int(c["end_ns"] - c["start_ns"]) if c["end_ns"] is not None else 0
        if not obs.get("delivered_bytes"):
            # Nothing was delivered (a handshake-only capture): observed row and page, no replay.
            rows.append(obs)
            fig_sources.append(figures.source_data("observed", "observed", obs_prep, None, settings.max_points))
            result["status"], result["note"] = "partial", "no data delivered in the capture: nothing to replay"
            _finish(result, rows, fig_sources, None, steps)
            return
        finite = settings.workload == "finite" or (settings.workload == "auto" and _finite_transfer(ev, obs))
        if finite:
            size = int(obs["delivered_bytes"])
            workload: Any = FiniteWorkload(size)
            result["workload"] = f"finite {size} bytes (delivered in the capture)"
            cap_ns = settings.duration_ns or max(capture_ns, 1_000_000_000) * FINITE_CAP_FACTOR
        else:
            workload = BulkWorkload()
            result["workload"] = "bulk"
            cap_ns = settings.duration_ns or capture_ns
        observed = (ev, conn)
        rows.append(obs)
        fig_sources.append(figures.source_data("observed", "observed", obs_prep, None, settings.max_points))
        direction = "down" if obs.get("data_dir") == "s2c" else "up"  # an upload replays as one
        stack, join_after_ns = _capture_stack(cap, conn, settings.cc, notes, summary=obs)
        try:
            timelines = estimate_timelines(ev)
        except InputError as e:
            result["status"], result["note"] = "partial", f"no path timelines: {_one_line(e)}"
            result["capture_view"] = _capture_view(ev, conn, None, spec, settings.max_points)
            _finish(result, rows, fig_sources, None, steps)
            return
        result["capture_view"] = _capture_view(ev, conn, timelines, spec, settings.max_points)
    else:
        timelines, file_workload, file_stack, file_ns, file_scheduler = _input_timelines(
            spec, allow_outside=settings.allow_outside_refs)
        result["made_with"] = (made_with.from_scenario(file_scheduler) or made_with.assumed()).to_dict()
        cap_ns = settings.duration_ns or file_ns or _timelines_span_ns(timelines) or DEFAULT_DURATION_NS
        workload = file_workload if file_workload is not None else BulkWorkload()
        result["workload"] = "bulk" if file_workload is None else f"from the file: {workload_text(file_workload)}"
        stack = file_stack if file_stack is not None else capture_stack(None, congestion_control=settings.cc,
                                                                         rcv_buf_bytes=None)
        steps.tick("timelines read")
    result["duration_ns"] = cap_ns
    result["connection"] = asdict(stack)
    result["paths"] = list(timelines)     # primary first: the order (and colours) of every figure
    steps.tick("path timelines")

    try:
        base_experiment = timelines_experiment(
            timelines, workload=workload, scheduler=SchedulerSpec.of("upstream", {}), stack=stack,
            seed=settings.seed, duration_ns=cap_ns, join_after_ns=join_after_ns, direction=direction,
            default_owd_ns=DEFAULT_OWD_NS)
    except InputError as e:
        if observed is None:
            raise
        result["status"], result["note"] = "partial", f"cannot replay: {_one_line(e)}"
        _finish(result, rows, fig_sources, timeline_figure(timelines).to_json(), steps)
        return
    for tl in timelines.values():
        filled = fill_unknown(tl, default_owd_ns=DEFAULT_OWD_NS)
        notes.extend(f"{tl.name}: {n}" for n in filled.notes if n not in tl.notes)
    tl_fig_json = timeline_figure(timelines).to_json()

    model = get_backend("model")
    sched_rows: list[dict[str, Any]] = []
    for name in settings.schedulers:
        # Only the scheduler differs between the replays: the path configs are converted once.
        r = model.run(replace(base_experiment, scheduler=SchedulerSpec.of(name, settings.params_of(name))))
        row, prep = _summarized(common | {"source": name, "kind": "scheduler", "params": params_text(name, settings)},
                                r.events, r.samples, None)
        sched_rows.append(row)
        fig_sources.append(figures.source_data(name, "scheduler", prep, r.samples, settings.max_points))
        steps.tick(f"replay {name}")
    base_rows: list[dict[str, Any]] = []
    if settings.kernel:
        sched_rows.extend(_kernel_rows(base_experiment, common, sched_rows, notes, settings, fig_sources))
        steps.tick("kernel")
    if settings.baselines:
        base = {name: model.run(e) for name, e in _baseline_experiments(base_experiment).items()}
        for pname, r in base.items():
            row, _ = _summarized(common | {"source": f"baseline:{pname}", "kind": "baseline"}, r.events, r.samples,
                                 None)
            base_rows.append(row)
        single_bps = [float(b.get("goodput_mbps") or 0.0) for b in base_rows]
        if single_bps and any(single_bps):
            # Kaspar's B of each multipath row against the best single path (observed included).
            for row in [*rows, *sched_rows]:
                g = row.get("goodput_mbps")
                row["aggregation_benefit"] = aggregation_benefit(float(g), single_bps) if g is not None else None
        steps.tick("single-path baselines")
    rows.extend(sched_rows)
    rows.extend(base_rows)
    result["status"] = "ok"
    result["finite"] = isinstance(workload, FiniteWorkload)
    _finish(result, rows, fig_sources, tl_fig_json, steps)


def _kernel_rows(e: Any, common: dict[str, Any], model_rows: list[dict[str, Any]], notes: list[str],
                 settings: ReportSettings, fig_sources: list[Any]) -> list[dict[str, Any]]:
    """The real kernel running the upstream scheduler on the same experiment: its row, with its
    difference from the model's upstream row (``vs_model_*``), and the emulation's own flag."""
    from workbench.backends import UnsupportedExperiment, get_backend
    from workbench.report import figures
    try:
        run = get_backend("kernel").run(e)
    except UnsupportedExperiment as err:
        notes.append(f"kernel: {err}")
        return []
    except InputError as err:  # no root, no MPTCP kernel: one line, the rest of the report stands
        notes.append(f"kernel: not run ({_one_line(err)})")
        return []
    notes.extend(f"kernel: {w}" for w in run.warnings)
    row, prep = _summarized(common | {"source": "kernel", "kind": "kernel", "params": "upstream (real Linux kernel)"},
                            run.events, None, None)
    row["emulation_ok"] = bool(run.counters.get("emulation_ok", True))
    model_row = next((r for r in model_rows if r.get("source") == "upstream"), None)
    if model_row is not None:
        for key in ("goodput_mbps", "ooo_p50_ms", "ooo_p95_ms"):
            k, m = row.get(key), model_row.get(key)
            if k is not None and m is not None:
                model_row[f"vs_kernel_{key}"] = float(m) - float(k)
    fig_sources.append(figures.source_data("kernel", "kernel", prep, None, settings.max_points))
    return [row]


def _finish(result: dict[str, Any], rows: list[dict[str, Any]], fig_sources: list[Any], tl_fig_json: str | None,
            steps: _Steps) -> None:
    import polars as pl

    from workbench.report import figures

    table = pl.DataFrame(rows, infer_schema_length=None)
    buf = io.BytesIO()
    table.write_parquet(buf)
    result["metrics_parquet"] = buf.getvalue()
    result["figures"] = figures.page_figure_data(fig_sources, rows, tl_fig_json, finite=result.get("finite"),
                                                 paths=result.get("paths"))
    result["figures"]["capture_view"] = result.pop("capture_view", None)
    result["error"] = None
    steps.tick("figures", n=steps.total - steps.done)
