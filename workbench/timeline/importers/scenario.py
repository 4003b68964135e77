"""Per-path scenario files (YAML or JSON), in the spirit of mpshell: what each path should look like.

    paths:                      # a list (or a mapping name -> spec); the first path is the primary
      - name: wifi
        rate_mbps: 30           # constant rate, both directions unless rate_up_* is given
        owd_ms: 10              # one-way delay, both directions unless owd_up_* / owd_down_* given
        buffer_packets: 50      # x packet_bytes (default 1514, a full Ethernet frame); or buffer_bytes
        loss: 0.01              # random loss per packet, downlink; loss_up for the uplink
      - name: lte
        rate: {file: rate2.csv}            # a t,rate file (units in its header, or t_unit / rate_unit)
        rate_up: {mahimahi: trace.up}      # a mahimahi trace (bin_ms: 100)
        owd_down: [[0, 40], [2.5, 60]]     # [t_s, ms] steps
        owd_up_ms: 40
        buffer_bytes: 600000

Keys carry their units: ``rate_mbps`` / ``rate_kbps`` / ``rate_bps``, ``owd_ms`` / ``owd_us``. A
series is a list of ``[t_s, value]`` pairs (value in Mbit/s for rates, ms for delays) or
``{file: ...}`` (or ``{csv: ...}``, relative to the scenario file; rate files as in `read_rate_csv`, delay files
``t_s,owd_ms``) or, for rates, ``{mahimahi: ...}``.

Provenance: values written in the scenario are "assumed" (chosen, not observed); values read from a
referenced trace file keep the importer's tag ("measured"). Kind: "capacity" (a scenario specifies
links), unless ``kind: throughput`` is given for a path.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from workbench._safe_refs import check_scenario_keys, check_scenario_sizes, load_document, resolve_ref
from workbench.errors import InputError
from workbench.timeline.importers.mahimahi import read_mahimahi
from workbench.timeline.importers.rate_csv import parse_time_unit, read_rate_csv
from workbench.timeline.model import PathTimeline, Source, Timelines, steps_from_series

__all__ = ["read_scenario", "scenario_timelines"]

_RATE_KEYS = {"mbps": 1e6, "kbps": 1e3, "bps": 1.0}
_DELAY_KEYS = {"ms": 1e6, "us": 1e3, "ns": 1.0}
_KNOWN = {"name", "kind", "buffer_packets", "buffer_bytes", "packet_bytes", "loss", "loss_down", "loss_up",
          "bin_ms", "rate", "rate_down", "rate_up", "owd", "owd_down", "owd_up",
          *(f"{b}_{u}" for b in ("rate", "rate_down", "rate_up") for u in _RATE_KEYS),
          *(f"{b}_{u}" for b in ("owd", "owd_down", "owd_up") for u in _DELAY_KEYS)}

Series = tuple[list[int], list[float], Source]
_MAX_T_NS = 2**62  # about 146 years: a later time is a mistake, and int64 ns must hold it


def _read_delay_file(path: Path) -> Series:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read delay file: {e}") from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    if not lines:
        raise InputError(path, "empty delay file")
    head = [h.strip() for h in lines[0].replace("\t", ",").split(",")]
    try:
        ns_per_t = parse_time_unit(head[0].rsplit("_", 1)[-1])
        unit = head[1].rsplit("_", 1)[-1].lower()
        ns_per_v = _DELAY_KEYS[unit]
    except (ValueError, KeyError, IndexError):
        raise InputError(path, "delay file needs a header with units, e.g. t_s,owd_ms") from None
    t, v = [], []
    for i, ln in enumerate(lines[1:], start=2):
        f = ln.replace("\t", ",").split(",")
        try:
            t.append(round(float(f[0]) * ns_per_t))
            v.append(float(f[1]) * ns_per_v)
        except (ValueError, IndexError, OverflowError):  # OverflowError: round(inf)
            raise InputError(path, f"line {i}: expected '<t>,<owd>'") from None
        if not math.isfinite(v[-1]) or v[-1] < 0 or abs(t[-1]) > _MAX_T_NS:
            raise InputError(path, f"line {i}: time or delay out of range")
    return t, v, "measured"


def _series(spec: Any, *, what: str, base_dir: Path, scale: float, path_name: str, bin_ns: int,
            allow_outside: bool = False) -> Series:
    """A constant, a list of [t_s, value] pairs, or a file reference -> (t_ns, values, src)."""
    where = f"path {path_name}: {what}"
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        if not spec >= 0 or not math.isfinite(spec):  # NaN fails every comparison
            raise InputError(None, f"{where} must be a finite number >= 0")
        return [0], [float(spec) * scale], "assumed"
    if isinstance(spec, list):
        try:
            pairs = [(round(float(t) * 1e9), float(v) * scale) for t, v in spec]
        except (TypeError, ValueError, OverflowError):
            raise InputError(None, f"{where}: a series is a list of [t_s, value] pairs") from None
        if any(not math.isfinite(v) or abs(t) > _MAX_T_NS for t, v in pairs):
            raise InputError(None, f"{where}: series values must be finite numbers")
        if not pairs:
            raise InputError(None, f"{where}: empty series")
        if any(b[0] <= a[0] for a, b in itertools.pairwise(pairs)):
            raise InputError(None, f"{where}: series times must increase")
        if any(v < 0 for _, v in pairs):
            raise InputError(None, f"{where}: values must be >= 0")
        return [p[0] for p in pairs], [p[1] for p in pairs], "assumed"
    if isinstance(spec, dict) and ("file" in spec or "csv" in spec):
        f = resolve_ref(base_dir, spec.get("file", spec.get("csv")), allow_outside=allow_outside, what=where)
        if what.startswith("owd"):
            return _read_delay_file(f)
        tl = read_rate_csv(f, kind="capacity", t_unit=spec.get("t_unit"), rate_unit=spec.get("rate_unit"))
        s = tl.steps
        return s["t_ns"].to_list(), s["capacity_down_bps"].to_list(), "measured"
    if isinstance(spec, dict) and "mahimahi" in spec and what.startswith("rate"):
        f = resolve_ref(base_dir, spec["mahimahi"], allow_outside=allow_outside, what=where)
        tl = read_mahimahi(f, bin_ns=_bin_ns(spec.get("bin_ms", bin_ns / 1e6), where))
        s = tl.steps
        return s["t_ns"].to_list(), s["capacity_down_bps"].to_list(), "measured"
    raise InputError(None, f"{where}: expected a number, [[t_s, value], ...], {{file: ...}}"
                     + (" or {mahimahi: ...}" if what.startswith("rate") else ""))


def _pick(spec: dict[str, Any], bases: list[str], units: dict[str, float], default_scale: float
          ) -> tuple[Any, float, str] | None:
    """The first key among ``bases`` (with or without a unit suffix) present in ``spec``."""
    for b in bases:
        for u, scale in units.items():
            if f"{b}_{u}" in spec:
                return spec[f"{b}_{u}"], scale, f"{b}_{u}"
        if b in spec:
            return spec[b], default_scale, b
    return None


def _bin_ns(bin_ms: Any, where: str) -> int:
    """A bin width: a number of ms in (0, one day]."""
    if isinstance(bin_ms, bool) or not isinstance(bin_ms, (int, float)) or not 0.001 <= bin_ms <= 86_400_000:
        raise InputError(None, f"{where}: bin_ms must be a number of ms from 0.001 to 86400000, not {bin_ms!r}")
    return int(bin_ms * 1e6)


def _int_setting(spec: dict[str, Any], key: str, name: str) -> int:
    v = spec[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(None, f"path {name}: {key} must be a number, not {v!r}")
    return int(v)


def _path(name: str, spec: dict[str, Any], base_dir: Path, allow_outside: bool = False) -> PathTimeline:
    unknown = set(spec) - _KNOWN
    if unknown:
        raise InputError(None, f"path {name}: unknown keys {sorted(unknown, key=str)}")
    bin_ns = _bin_ns(spec.get("bin_ms", 100), f"path {name}")
    series: dict[str, Series] = {}
    periodic_end: int | None = None
    for d in ("down", "up"):
        got = _pick(spec, [f"rate_{d}", "rate"], _RATE_KEYS, 1e6)
        if got is not None:
            value, scale, key = got
            series[f"capacity_{d}_bps"] = _series(value, what=key, base_dir=base_dir, scale=scale,
                                                  path_name=name, bin_ns=bin_ns, allow_outside=allow_outside)
            if isinstance(value, dict) and "mahimahi" in value:
                ref = resolve_ref(base_dir, value["mahimahi"], allow_outside=allow_outside, what=f"path {name}")
                periodic_end = max(periodic_end or 0, int(read_mahimahi(ref, bin_ns=bin_ns).end_ns or 0))
        got = _pick(spec, [f"owd_{d}", "owd"], _DELAY_KEYS, 1e6)
        if got is not None:
            value, scale, key = got
            t, v, src = _series(value, what=key, base_dir=base_dir, scale=scale, path_name=name,
                                bin_ns=bin_ns, allow_outside=allow_outside)
            series[f"owd_{d}_ns"] = (t, [round(x) for x in v], src)
    if "capacity_down_bps" not in series:
        raise InputError(None, f"path {name}: no rate (rate_mbps, rate: ...)")
    for d, keys in (("down", ("loss_down", "loss")), ("up", ("loss_up",))):
        for k in keys:
            if k in spec:
                p = spec[k]
                if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
                    raise InputError(None, f"path {name}: {k} must be a probability in [0, 1]")
                series[f"loss_{d}"] = ([0], [float(p)], "assumed")
                break
    # What a pfifo limit in packets holds: full frames.
    mtu = _int_setting(spec, "packet_bytes", name) if "packet_bytes" in spec else 1514
    buffer = None
    if "buffer_bytes" in spec:
        buffer = _int_setting(spec, "buffer_bytes", name)
    elif "buffer_packets" in spec:
        buffer = _int_setting(spec, "buffer_packets", name) * mtu
    if buffer is not None and buffer < 0:
        raise InputError(None, f"path {name}: buffer must be >= 0")
    kind = spec.get("kind", "capacity")
    if kind not in ("capacity", "throughput"):
        raise InputError(None, f"path {name}: kind must be capacity or throughput")
    notes = ["scenario file: written values assumed, referenced traces measured"]
    if "buffer_packets" in spec:
        notes.append(f"buffer {spec['buffer_packets']} packets x {mtu} B")
    return PathTimeline(
        name=name, steps=steps_from_series(series), kind=kind,
        buffer_down_bytes=buffer, buffer_up_bytes=buffer,
        buffer_down_src="assumed" if buffer is not None else None,
        buffer_up_src="assumed" if buffer is not None else None,
        # Periodic (a mahimahi trace wraps) only when everything else is constant.
        end_ns=periodic_end, periodic=periodic_end is not None and all(
            len(t) == 1 or k.startswith("capacity") for k, (t, _, _) in series.items()),
        source="scenario", notes=tuple(notes))


def scenario_timelines(doc: Any, base_dir: str | Path = ".", *, allow_outside: bool = False) -> Timelines:
    """Timelines from an already parsed scenario document (see the module docstring). Referenced
    files must lie inside `base_dir` unless `allow_outside` (`workbench._safe_refs.resolve_ref`)."""
    if not isinstance(doc, dict) or "paths" not in doc:
        raise InputError(None, "a scenario needs a top-level 'paths' list or mapping")
    raw = doc["paths"]
    if isinstance(raw, dict):
        items = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, list):
        items = []
        for i, v in enumerate(raw):
            if not isinstance(v, dict) or "name" not in v:
                raise InputError(None, f"paths[{i}] needs a name")
            items.append((str(v["name"]), v))
    else:
        raise InputError(None, "'paths' must be a list or a mapping")
    if not items:
        raise InputError(None, "a scenario needs at least one path")
    out = []
    for name, spec in items:
        if not isinstance(spec, dict):
            raise InputError(None, f"path {name}: expected a mapping of settings")
        out.append(_path(name, {k: v for k, v in spec.items() if k != "name"} | {"name": name}, Path(base_dir),
                         allow_outside=allow_outside))
    return Timelines(out)


def read_scenario(path: str | Path, *, allow_outside: bool = False) -> Timelines:
    """Read a YAML or JSON scenario file (the suffix decides; YAML also reads JSON), safely: see
    `workbench._safe_refs` (safe YAML, bounded sizes, references inside its folder unless allowed)."""
    path = Path(path)
    doc = load_document(path)
    try:
        check_scenario_keys(doc)
        check_scenario_sizes(doc)
        return scenario_timelines(doc, path.parent, allow_outside=allow_outside)
    except InputError as e:
        if e.source is None:
            raise InputError(path, e.problem) from None
        raise
