"""`t,rate` files -> single-path timelines, with declared units.

Two columns, time and rate, one sample per line, any separator (comma, tab, spaces), optionally a
header. Units are never guessed from the numbers: they come from the header names (``t_s``,
``t_ms``, ``rate_mbps``, ``rate_kbps``, ``bps``, ...) or from the caller (``t_unit=``, ``rate_unit=``);
a file with neither is refused. Each sample starts a step: the rate holds from its time until the next
sample's (irregular sampling is fine) and the last one holds on (``end_ns`` None), which is how the
lab applied ``rate1.csv``.

Whether the numbers are link capacity or the throughput a flow achieved is not in the file either:
``kind`` is required. Known sources: `read_oboe` (Oboe traces: ``t_s<TAB>Mbit/s``, no header,
achieved throughput) and the lab's ``rate*.csv`` (``t_s,rate_mbps``, the HTB rate applied = capacity).
"""

from __future__ import annotations

import math
import re
from itertools import pairwise
from pathlib import Path
from typing import Literal

from workbench.errors import InputError
from workbench.timeline.model import PathTimeline, steps_from_series

__all__ = ["parse_rate_unit", "parse_time_unit", "read_oboe", "read_rate_csv"]

_MAX_T_NS = 2**62  # about 146 years: any later time is a corrupt line, and int64 ns must hold it
_TIME_UNITS_NS = {"s": 1e9, "sec": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
_RATE_UNITS_BPS = {
    "bit/s": 1.0, "bps": 1.0, "kbit/s": 1e3, "kbps": 1e3, "mbit/s": 1e6, "mbps": 1e6, "gbit/s": 1e9,
    "gbps": 1e9, "byte/s": 8.0, "b/s": 8.0, "kbyte/s": 8e3, "kb/s": 8e3, "mbyte/s": 8e6, "mb/s": 8e6,
}


def parse_time_unit(unit: str) -> float:
    """Nanoseconds per unit of a time unit name ("s", "ms", "us", "ns")."""
    try:
        return _TIME_UNITS_NS[unit.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown time unit {unit!r}; use one of {sorted(_TIME_UNITS_NS)}") from None


def parse_rate_unit(unit: str) -> float:
    """bit/s per unit of a rate unit name. Bits: "bit/s", "kbit/s", "Mbit/s", "Gbit/s" (or "bps",
    "kbps", "Mbps", "Gbps", case-insensitive); bytes: "byte/s", "kbyte/s", "Mbyte/s" ("B/s", "kB/s",
    "MB/s" are bytes only when written with a capital B)."""
    u = unit.strip()
    if u in ("B/s", "kB/s", "KB/s", "MB/s"):
        return {"B/s": 8.0, "kB/s": 8e3, "KB/s": 8e3, "MB/s": 8e6}[u]
    try:
        return _RATE_UNITS_BPS[u.lower()]
    except KeyError:
        raise ValueError(f"unknown rate unit {unit!r}; use e.g. bit/s, kbit/s, Mbit/s, byte/s") from None


def _units_from_header(name: str, kind: Literal["time", "rate"]) -> str | None:
    """Unit declared by a column name such as ``t_s``, ``time_ms``, ``rate_mbps``, ``throughput_kbps``."""
    m = re.search(r"(?:^|[_\s(\[])([a-zA-Z/]+)\)?\]?$", name.strip())
    if not m:
        return None
    u = m.group(1)
    try:
        (parse_time_unit if kind == "time" else parse_rate_unit)(u)
    except ValueError:
        return None
    return u


def _split(line: str, sep: str | None) -> list[str]:
    if sep is None:
        # The first of comma, tab, semicolon present separates fields (headers may contain spaces:
        # "rate (Mbit/s)"); otherwise any whitespace.
        sep = next((c for c in ",\t;" if c in line), None)
    return [f.strip() for f in (line.split(sep) if sep else line.split())]


def read_rate_csv(path: str | Path, *, kind: Literal["capacity", "throughput"], name: str | None = None,
                  t_unit: str | None = None, rate_unit: str | None = None, sep: str | None = None,
                  direction: Literal["down", "up"] = "down") -> PathTimeline:
    """A timeline whose ``capacity_<direction>_bps`` follows a two-column time/rate file.

    Units: from the header (``t_s,rate_mbps``) or ``t_unit`` / ``rate_unit`` (these win). Values are
    tagged "measured"; delay, loss and buffer are unknown.
    """
    path = Path(path)
    try:
        lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read rate file: {e}") from None
    if not lines:
        raise InputError(path, "empty rate file")
    first = _split(lines[0], sep)
    header = None
    try:
        float(first[0])
    except ValueError:
        header, lines = first, lines[1:]
    if header is not None:
        if len(header) < 2:
            raise InputError(path, f"header {', '.join(header)!r} needs a time and a rate column")
        t_unit = t_unit or _units_from_header(header[0], "time")
        rate_unit = rate_unit or _units_from_header(header[1], "rate")
    if t_unit is None or rate_unit is None:
        missing = " and ".join(x for x, u in (("t_unit", t_unit), ("rate_unit", rate_unit)) if u is None)
        raise InputError(path, f"units not declared: name them in the header (e.g. t_s,rate_mbps) or pass {missing}")
    try:
        ns_per_t, bps_per_rate = parse_time_unit(t_unit), parse_rate_unit(rate_unit)
    except ValueError as e:
        raise InputError(path, str(e)) from None
    t_ns: list[int] = []
    rate_bps: list[float] = []
    for i, ln in enumerate(lines, start=2 if header else 1):
        f = _split(ln, sep)
        try:
            t, r = float(f[0]), float(f[1])
        except (ValueError, IndexError):
            raise InputError(path, f"line {i}: expected '<time>{sep or ','}<rate>', got {ln!r}") from None
        if r < 0:
            raise InputError(path, f"line {i}: negative rate {r}")
        # NaN and infinities parse as floats but are no time or rate (and cannot become integer ns).
        if not (math.isfinite(t) and math.isfinite(r)) or abs(t * ns_per_t) >= _MAX_T_NS:
            raise InputError(path, f"line {i}: time or rate out of range ({ln.strip()[:60]!r})")
        t_ns.append(round(t * ns_per_t))
        rate_bps.append(r * bps_per_rate)
    if not t_ns:
        raise InputError(path, "no samples")
    if any(b <= a for a, b in pairwise(t_ns)):
        raise InputError(path, "times must be strictly increasing")
    what = "link capacity" if kind == "capacity" else "achieved throughput (not capacity)"
    return PathTimeline(
        name=name or path.stem,
        steps=steps_from_series({f"capacity_{direction}_bps": (t_ns, rate_bps, "measured")}),
        kind=kind, end_ns=None, source=f"rate file: {path}",
        notes=(f"{len(t_ns)} samples in {t_unit}, {rate_unit}: {what}; each holds until the next, "
               "the last holds on",))


def read_oboe(path: str | Path, *, name: str | None = None) -> PathTimeline:
    """An Oboe trace (``t_s<TAB>Mbit/s``, irregular sampling): achieved throughput, not capacity."""
    return read_rate_csv(path, kind="throughput", name=name, t_unit="s", rate_unit="Mbit/s")
