"""The `workbench` command line: thin typer commands over library calls, rich tables for people,
`--json` for machines. Any problem the user can fix is one line on stderr and a non-zero exit."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from workbench._safe_refs import ALLOW_OUTSIDE_REFS_HELP
from workbench._text import fmt_value
from workbench.errors import InputError

app: typer.Typer = typer.Typer(
    name="workbench",
    help="MPTCP trace-replay workbench: captures -> path timelines -> scheduler replays -> metrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Piped output gets a wide fixed width so tables stay readable in logs and CI.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)

F = TypeVar("F", bound=Callable[..., Any])

# Exit codes: 2 = the input or an option is wrong, 3 = an internal error (a bug: please report it).
EXIT_INPUT = 2
EXIT_INTERNAL = 3


def _user_errors(fn: F) -> F:
    """Turn errors into one line and an exit code; a stack trace only with WORKBENCH_DEBUG=1."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import os

        try:
            return fn(*args, **kwargs)
        except InputError as e:
            err.print(f"error: {e}", markup=False, highlight=False, emoji=False, soft_wrap=True)
            raise typer.Exit(EXIT_INPUT) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as e:
            if os.environ.get("WORKBENCH_DEBUG"):
                raise
            err.print(f"internal error: {type(e).__name__}: {e} (set WORKBENCH_DEBUG=1 for the trace)",
                      markup=False, highlight=False, emoji=False, soft_wrap=True)
            raise typer.Exit(EXIT_INTERNAL) from None

    return wrapper  # type: ignore[return-value]


@app.callback()
def _root() -> None:
    """MPTCP trace-replay workbench: captures -> path timelines -> scheduler replays -> metrics."""


_fmt = fmt_value


@app.command()
@_user_errors
def inspect(
    file: Annotated[Path, typer.Argument(help="capture (pcap/pcapng) or a tshark CSV export")],
    peer: Annotated[Path | None, typer.Option(help="capture of the same session at the other end")] = None,
    connection: Annotated[int | None, typer.Option("--connection", "-c",
                                                   help="connection to detail (default: the busiest MPTCP one)")] = None,
    path: Annotated[list[str] | None, typer.Option("--path", help="name a path by its client address: ADDR=NAME")] = None,
    reader: Annotated[str, typer.Option(help="auto | native | tshark")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
) -> None:
    """Connections, subflows, goodput, RTT, one-way delay and MPTCP out-of-order delay of a capture."""
    from workbench.inspect import inspect_capture

    if reader not in ("auto", "native", "tshark"):
        raise InputError(None, f"--reader must be auto, native or tshark, not {reader!r}")
    from workbench.capture import parse_path_names

    report = inspect_capture(file, peer=peer, connection=connection, path_names=parse_path_names(path or []),
                             reader=reader)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
        return
    _print_inspect(report)


def _print_inspect(r: dict[str, Any]) -> None:
    src = r["source"] + (f"  +  peer {r['peer']}" if r.get("peer") else "")
    out.print(f"[bold]{src}[/]  (reader: {r['reader']})")
    t = Table(title="Connections", title_justify="left")
    for col in ("conn", "kind", "version", "vantage", "subflows", "packets", "bytes s2c", "bytes c2s", "duration s"):
        t.add_column(col, justify="right" if col not in ("kind", "vantage") else "left")
    for c in r["connections"]:
        t.add_row(str(c["conn"]), c["kind"], _fmt(c["version"]), c["vantage"], str(c["subflows"]), str(c["packets"]),
                  str(c["bytes_s2c"]), str(c["bytes_c2s"]), _fmt(c["duration_s"], 3))
    out.print(t)
    d = r["detail"]
    t = Table(title=f"Subflows of connection {d['conn']} (data {d['data_dir']})", title_justify="left")
    for col in ("sf", "path", "client", "server", "join", "packets", "data bytes", "share", "duration s",
                "RTT min ms", "RTT p50 ms", "retrans", "reinj"):
        t.add_column(col, justify="left" if col in ("path", "client", "server") else "right")
    for s in d["subflows"]:
        t.add_row(str(s["subflow"]), s["path"], s["client"], s["server"], "yes" if s["join"] else "",
                  str(s["packets"]), str(s["data_bytes"]), _fmt(s["share"], 3), _fmt(s["duration_s"], 3),
                  _fmt(s["rtt_min_ms"]), _fmt(s["rtt_p50_ms"]), str(s["retrans"]), str(s["reinjections"]))
    out.print(t)
    m = d["metrics"]
    if m.get("delivered_bytes"):
        out.print(f"goodput {_fmt(m.get('goodput_mbps'))} Mbit/s over {_fmt(m.get('completion_s'), 3)} s, "
                  f"{m.get('delivered_bytes')} bytes delivered in order")
    else:
        out.print("no data delivered in order (no mapped data segments seen at the receiver)")
    if m.get("ooo_n"):
        out.print(f"MPTCP out-of-order delay over {m['ooo_n']} segments: mean {_fmt(m['ooo_mean_ms'])} ms, "
                  f"p50 {_fmt(m['ooo_p50_ms'])}, p95 {_fmt(m['ooo_p95_ms'])}, p99 {_fmt(m['ooo_p99_ms'])}, "
                  f"max {_fmt(m['ooo_max_ms'])} ms; {_fmt(100 * (m.get('ooo_fraction') or 0), 1)}% waited")
    elif d.get("ooo_note"):
        out.print(d["ooo_note"])
    if d["owd"]:
        t = Table(title="One-way delay (from the pair)", title_justify="left")
        for col in ("path", "dir", "n", "min ms", "p50 ms", "p95 ms", "max ms"):
            t.add_column(col, justify="left" if col in ("path", "dir") else "right")
        for o in d["owd"]:
            t.add_row(o["path"], o["dir"], str(o["n"]), _fmt(o["min_ms"], 3), _fmt(o["p50_ms"], 3),
                      _fmt(o["p95_ms"], 3), _fmt(o["max_ms"], 3))
        out.print(t)
    for w in r["warnings"]:
        out.print(f"[yellow]warning:[/] {w}", highlight=False)


def parse_duration_ns(text: str) -> int:
    """"100ms", "1.5s", "250us", "30" (seconds) -> nanoseconds."""
    units = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000}
    t = text.strip()
    for unit in sorted(units, key=len, reverse=True):
        if t.endswith(unit):
            number, scale = t[: -len(unit)], units[unit]
            break
    else:
        number, scale = t, units["s"]
    try:
        value = float(number)
    except ValueError:
        raise InputError(None, f"not a duration: {text!r} (examples: 100ms, 1.5s, 30)") from None
    if value <= 0:
        raise InputError(None, f"a duration must be positive, got {text!r}")
    return round(value * scale)


@app.command()
@_user_errors
def timeline(
    inputs: Annotated[list[Path], typer.Argument(help="captures, CSV exports, scenario, mahimahi, rate, "
                                                      "multi-path CSV, ping or saved timeline files")],
    output: Annotated[Path, typer.Option("--output", "-o", help="where to save: .parquet, .csv or .json")],
    peer: Annotated[Path | None, typer.Option(help="capture at the other end (with one capture)")] = None,
    bin: Annotated[str, typer.Option("--bin", help="bin size for estimation and binning")] = "100ms",
    html: Annotated[Path | None, typer.Option(help="also write an interactive figure (self-contained HTML)")] = None,
    path: Annotated[list[str] | None, typer.Option("--path", help="name a path by its client address: ADDR=NAME")] = None,
    kind: Annotated[str, typer.Option(help="what rate files hold: capacity | throughput")] = "capacity",
    t_unit: Annotated[str | None, typer.Option(
        help="time unit of rate files whose header does not say: s | ms | us | ns")] = None,
    rate_unit: Annotated[str | None, typer.Option(
        help="rate unit of rate files whose header does not say: bit/s | kbit/s | Mbit/s | Gbit/s | B/s | kB/s | MB/s")]
    = None,
    allow_outside_refs: Annotated[bool, typer.Option("--allow-outside-refs", help=ALLOW_OUTSIDE_REFS_HELP)] = False,
) -> None:
    """Path timelines (capacity, one-way delay, loss, buffer per path) from captures or trace files."""
    from workbench._files import write_atomic
    from workbench.capture import parse_path_names
    from workbench.timeline import open_timelines, save_timelines

    if kind not in ("capacity", "throughput"):
        raise InputError(None, f"--kind must be capacity or throughput, not {kind!r}")
    if output.suffix.lower() not in (".parquet", ".csv", ".json"):
        raise InputError(output, "the output must end in .parquet, .csv or .json")
    tls = open_timelines(inputs, peer=peer, bin_ns=parse_duration_ns(bin),
                         path_names=parse_path_names(path or []), kind=kind,  # type: ignore[arg-type]
                         t_unit=t_unit, rate_unit=rate_unit, allow_outside=allow_outside_refs)
    save_timelines(tls, output)
    if html is not None:
        from workbench.timeline import timeline_figure

        write_atomic(html, timeline_figure(tls).to_html(include_plotlyjs=True, full_html=True))
    _print_timelines(tls)
    out.print(f"saved {len(tls)} path(s) to {output}" + (f", figure in {html}" if html else ""))


def _print_timelines(tls: Any) -> None:
    t = Table(title="Paths", title_justify="left")
    for col in ("path", "kind", "duration s", "capacity down Mbit/s", "OWD down ms", "OWD up ms", "loss down",
                "buffer down B", "source", "caveats"):
        t.add_column(col, justify="left" if col in ("path", "kind", "source", "caveats") else "right")
    for name, tl in tls.items():
        cap = tl.mean("capacity_down_bps")
        owd_d, owd_u = tl.mean("owd_down_ns"), tl.mean("owd_up_ns")
        loss = tl.mean("loss_down")
        t.add_row(name, tl.kind, _fmt(tl.duration_ns / 1e9 if tl.duration_ns else None, 1),
                  _fmt(cap / 1e6 if cap is not None else None), _fmt(owd_d / 1e6 if owd_d is not None else None),
                  _fmt(owd_u / 1e6 if owd_u is not None else None), _fmt(loss, 4),
                  _fmt(tl.buffer_down_bytes) + (" (≥)" if tl.buffer_is_lower_bound else ""), tl.source[:60],
                  ", ".join(dict.fromkeys(c.kind for c in getattr(tl, "caveats", ()))))
    out.print(t)
    for c in getattr(tls, "caveats", []):
        out.print(f"[yellow]caveat:[/] {c}", highlight=False)


@app.command()
@_user_errors
def compare(
    file: Annotated[Path, typer.Argument(help="capture (pcap/pcapng) or a tshark CSV export")],
    peer: Annotated[Path | None, typer.Option(help="capture of the same session at the other end")] = None,
    scheduler: Annotated[str, typer.Option(help="scheduler the capture was made with")] = "upstream",
    connection: Annotated[int | None, typer.Option("--connection", "-c", help="connection (default: busiest)")] = None,
    path: Annotated[list[str] | None, typer.Option("--path", help="name a path by its client address: ADDR=NAME")] = None,
    cc: Annotated[str, typer.Option(help="congestion control of the capture: cubic | reno | lia | olia")] = "cubic",
    seed: Annotated[int, typer.Option(help="replay seed")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
    backend: Annotated[str, typer.Option(
        help="model (the replay engine), kernel (the real Linux kernel: root), or both side by side")] = "model",
) -> None:
    """Estimate a capture's path timelines, replay them with its scheduler, compare observed vs replayed."""
    from workbench.capture import load, parse_path_names
    from workbench.compare import compare_capture
    from workbench.timeline.open import capture_source

    # A CSV export brings its partner subflows' files, as `timeline` does.
    cap = load(capture_source(file), peer=peer, path_names=parse_path_names(path or []))
    if backend not in ("model", "kernel", "both"):
        raise InputError(None, f"--backend must be model, kernel or both, not {backend!r}")
    r = compare_capture(cap, scheduler=scheduler, conn=connection, cc=cc, seed=seed,
                        backend="kernel" if backend == "kernel" else "model", with_kernel=backend == "both")
    if as_json:
        doc = {"source": r.source, "scheduler": r.scheduler, "settings": r.settings,
               "rows": [row | {"warnings": r.warnings_for(row["metric"])} for row in r.table.to_dicts()],
               "warnings": [str(w) for w in r.warnings], "caveats": [w.to_dict() for w in r.warnings]}
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    replayed = "kernel" if backend == "kernel" else "model"
    both = r.kernel is not None
    t = Table(title=f"{r.source}: observed vs replayed ({r.scheduler}, {replayed}{' and kernel' if both else ''})",
              title_justify="left")
    cols = ["metric", "observed", replayed, "difference", *(["kernel", "kernel difference"] if both else []),
            "see warnings"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("metric", "see warnings") else "right")

    def shown(diff: float | None, kind: str) -> str:
        return "–" if diff is None else (f"{100 * diff:+.1f}%" if kind == "rel" else f"{100 * diff:+.2f} pt")

    for row in r.table.iter_rows(named=True):
        extra = [_fmt(row["kernel"], 3), shown(row["kernel_error"], row["error_kind"])] if both else []
        t.add_row(row["metric"], _fmt(row["observed"], 3), _fmt(row["replayed"], 3),
                  shown(row["error"], row["error_kind"]), *extra, _ranges(r.warnings_for(row["metric"])))
    out.print(t)
    for i, w in enumerate(r.warnings, start=1):
        out.print(f"[yellow]warning {i}:[/] {w}", highlight=False)


def _ranges(ix: list[int]) -> str:
    """[1, 2, 3, 5] -> "1-3, 5" (which numbered warnings bear on a row)."""
    parts: list[str] = []
    for i in ix:
        if parts and parts[-1].split("-")[-1] == str(i - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{i}"
        else:
            parts.append(str(i))
    return ", ".join(parts)


from workbench.backends._kernel.cli import lab_command  # noqa: E402  (the kernel backend)
from workbench.cli_replay import replay_command, schedulers_command  # noqa: E402  (needs the helpers above)
from workbench.report.cli import report_command  # noqa: E402
from workbench.tune.cli import tune_command  # noqa: E402
from workbench.ui.cli import ui_command  # noqa: E402  (imports typer only, no streamlit)

app.command("replay")(replay_command)
app.command("schedulers")(schedulers_command)
app.command("report")(_user_errors(report_command))
app.command("tune")(_user_errors(tune_command))
app.command("ui")(ui_command)
app.command("lab")(_user_errors(lab_command))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
