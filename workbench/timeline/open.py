"""Any input that describes paths, opened as Timelines: a capture (estimated from its packets), saved
timelines, a scenario file, mahimahi traces, `t,rate` files, multi-path throughput CSVs, ping logs.

The format is recognised from the file's content (magic bytes, header line), the suffix only
breaking ties, so users need not say what they give. `kind` applies to rate files, which cannot say
themselves whether they hold link capacity or achieved throughput; `t_unit` / `rate_unit` give the
units of rate files whose header does not (or that have none).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from workbench.errors import InputError
from workbench.timeline.io import _MAGIC as _TIMELINES_MAGIC
from workbench.timeline.model import PathTimeline, Timelines

__all__ = ["capture_source", "open_timelines", "sniff_timeline_input"]

_CAPTURE_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
                   b"\x0a\x0d\x0d\x0a"}


def _head(path: Path, n_bytes: int = 4096) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(n_bytes)
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None


def sniff_timeline_input(path: str | Path) -> str:
    """What kind of path description a file is: "capture", "csv-export", "timelines", "scenario",
    "mahimahi", "ping", "multipath-csv", "rate-csv"; InputError if none."""
    from workbench.capture._csvexport import is_csv_export

    p = Path(path)
    if not p.is_file():
        raise InputError(p, "no such file" if not p.exists() else "not a regular file")
    head = _head(p)
    if not head:
        raise InputError(p, "empty file")
    if head[:4] in _CAPTURE_MAGICS:
        return "capture"
    if head[:4] == b"PAR1":
        return "timelines"
    text = head.decode("utf-8", errors="replace")
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if _TIMELINES_MAGIC in first:
        return "timelines"
    if is_csv_export(p):
        return "csv-export"
    suffix = p.suffix.lower()
    if suffix in (".yaml", ".yml") or (suffix == ".json" and '"paths"' in text):
        return "scenario"
    if "PING " in text or "bytes from" in text:
        return "ping"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if lines and all(ln.isdigit() for ln in lines[:50]):
        return "mahimahi"
    if "_throughput_mbps" in first or ("throughput" in first.lower() and first.count(",") >= 2):
        return "multipath-csv"
    if lines and len(lines[0].replace("\t", ",").split(",")) >= 2:
        return "rate-csv"
    raise InputError(p, "not a capture, timelines, scenario, mahimahi, rate, multi-path CSV or ping file")


def capture_source(path: str | Path) -> Path | list[Path]:
    """What to load for a capture named on the command line: the file itself, or — a tshark CSV export
    (one file per subflow) — it and its partner files beside it (the same connection-start token), so
    naming one subflow's export loads the whole connection."""
    from workbench.capture._csvexport import group_csv_exports, is_csv_export

    p = Path(path)
    if not p.is_file() or not is_csv_export(p):
        return p
    siblings = [q for q in p.parent.iterdir() if q.is_file() and q.suffix == p.suffix]
    group = next((g for g in group_csv_exports(siblings) if p in g), [p])
    return group if len(group) > 1 else p


def _mahimahi_partner(p: Path) -> tuple[Path | None, Path | None]:
    """`X.down` and `X.up` beside each other are one path's two directions."""
    if p.suffix == ".down":
        up = p.with_suffix(".up")
        return p, (up if up.is_file() else None)
    if p.suffix == ".up":
        down = p.with_suffix(".down")
        return (down if down.is_file() else None), p
    return p, None


def open_timelines(
    inputs: Sequence[str | Path], *, peer: str | Path | None = None, bin_ns: int = 100_000_000,
    path_names: dict[str, str] | None = None, kind: Literal["capacity", "throughput"] = "capacity",
    t_unit: str | None = None, rate_unit: str | None = None, allow_outside: bool = False,
) -> Timelines:
    """Open each input and put their paths together (names must differ). A capture's paths are
    estimated from its packets (`peer`: the capture at the other end, for one-way delays). A scenario's
    referenced files must lie in its folder unless `allow_outside` (`workbench._safe_refs`)."""
    from workbench.timeline.estimate import EstimateOptions, estimate_timelines
    from workbench.timeline.importers import read_5gophers, read_mahimahi, read_ping, read_rate_csv
    from workbench.timeline.importers.scenario import read_scenario
    from workbench.timeline.io import load_timelines

    if not inputs:
        raise InputError(None, "no input given")
    if peer is not None and len(inputs) != 1:
        raise InputError(peer, "--peer goes with exactly one capture")
    paths: list[PathTimeline] = []
    seen_mahimahi: set[Path] = set()
    for raw in inputs:
        p = Path(raw)
        what = sniff_timeline_input(p)
        if what in ("capture", "csv-export"):
            from workbench.capture import load

            source = capture_source(p) if what == "csv-export" else p
            cap = load(source, peer=peer, path_names=path_names)
            paths += estimate_timelines(cap, EstimateOptions(bin_ns=bin_ns)).values()
        elif what == "timelines":
            paths += load_timelines(p).values()
        elif what == "scenario":
            paths += read_scenario(p, allow_outside=allow_outside).values()
        elif what == "mahimahi":
            down, up = _mahimahi_partner(p)
            key = (down or up or p).with_suffix("")
            if key in seen_mahimahi:
                continue  # the other direction of a path already read
            seen_mahimahi.add(key)
            paths.append(read_mahimahi(down, up, name=key.name, bin_ns=bin_ns))
        elif what == "ping":
            # Ping logs live in one folder per carrier; a second log of a carrier gets its own name.
            name = p.parent.name or p.stem
            if any(q.name == name for q in paths):
                name = f"{name}-{p.stem}"
            paths.append(read_ping(p, name=name))
        elif what == "multipath-csv":
            paths += read_5gophers(p).values()
        else:
            paths.append(read_rate_csv(p, kind=kind, t_unit=t_unit, rate_unit=rate_unit))
    return Timelines(paths)
