"""Reading scenario files safely: what a scenario file may make the workbench read, parse and build.

A scenario file is data, often someone else's. So:

* YAML is parsed with the safe loader only (no ``!!python/...`` tags: they are refused, never
  run), and the document's size once aliases are expanded is bounded, so an alias bomb ("billion
  laughs") is refused before anything walks it. The file itself is bounded too.
* Files it refers to (``{file: ...}``, ``{csv: ...}``, ``{mahimahi: ...}``, a scheduler's
  ``file.py``) must be regular files inside the scenario's folder: ``../`` and absolute paths that
  leave it are refused unless the user allows them (``allow_outside=True``, the CLI's
  ``--allow-outside-refs``); devices, folders and oversized files are refused always.
* Sizes are bounded: durations, byte counts, packet counts, rates, series lengths and bin widths
  beyond what any real experiment uses are refused with the key that holds them, and NaN or
  infinite numbers are refused anywhere.
* Top-level keys are the scenario format's (`SCENARIO_KEYS`, what `workbench.scenario` reads); any
  other is refused with the closest valid one, so a typo (``schedular:``) never silently gives a
  replay of defaults.

Every refusal is an `InputError` (one line, exit code 2).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from workbench.errors import InputError

__all__ = ["ALLOW_OUTSIDE_REFS_HELP", "MAX_REF_BYTES", "MAX_SCENARIO_BYTES", "MAX_YAML_NODES", "SCENARIO_KEYS",
           "check_scenario_keys", "check_scenario_sizes", "load_document", "resolve_ref"]

MAX_SCENARIO_BYTES = 4 << 20        # a scenario is a page of settings; series belong in referenced files
MAX_REF_BYTES = 512 << 20           # a referenced rate, delay or mahimahi file
MAX_YAML_NODES = 200_000            # nodes after alias expansion (a 10k-step series is 30k nodes)
MAX_DEPTH = 64                      # nesting of the document
_OUTSIDE_HINT = "pass --allow-outside-refs (allow_outside=True) to allow it"
# The help of every command's --allow-outside-refs (replay, timeline, report): one meaning, one text.
ALLOW_OUTSIDE_REFS_HELP = "let the scenario refer to files outside its folder (../, absolute paths)"

# Every top-level key `workbench.scenario.scenario_from_dict` reads (the timeline importer reads
# `paths` alone, and a scenario file is one format for both). A new key is added here and there.
SCENARIO_KEYS = ("paths", "scheduler", "workload", "duration_s", "seed", "stack", "connection", "direction",
                 "shared", "subflows")

# Upper bounds by key, far above any real experiment and far below what would exhaust the machine.
_DAY_S = 86_400
_LIMITS: dict[str, float] = {
    "duration_s": 7 * _DAY_S, "stop_s": 7 * _DAY_S, "idle_ms": _DAY_S * 1e3, "bin_ms": _DAY_S * 1e3,
    "segments": 10**7, "count": 10**7, "buffer_packets": 10**7, "packet_bytes": 1 << 16, "mss_bytes": 1 << 16,
    "trace": float(1 << 40),  # an application trace: [t_s, bytes] pairs
}
_BYTES_LIMIT = float(1 << 40)       # any other *_bytes key, and a finite transfer's bytes: 1 TiB
_RATE_LIMIT_BPS = 1e13              # 10 Tbit/s
_DELAY_LIMIT_NS = 3.6e12            # one hour one way
_SERIES_LIMIT = 1_000_000           # [t, value] pairs in one written series


def _bounded_loader() -> type:
    """The safe loader (the C one when PyYAML has it). Depth and alias expansion are checked on the
    composed node graph (`_expanded_nodes`) before any Python object is constructed."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    return Loader


def _expanded_nodes(node: Any, memo: dict[int, int], depth: int = 0) -> int:
    """Node count with every alias expanded (shared nodes counted at each use), computed once per
    node: cheap however large the expansion."""
    if depth > MAX_DEPTH:
        raise _TooDeep
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a recursive alias (a node containing itself) counts once
    value = getattr(node, "value", None)
    total = 1
    if isinstance(value, list):
        for item in value:
            if isinstance(item, tuple):
                total += sum(_expanded_nodes(x, memo, depth + 1) for x in item)
            else:
                total += _expanded_nodes(item, memo, depth + 1)
            if total > MAX_YAML_NODES:
                break
    memo[key] = total
    return total


class _TooDeep(Exception):
    pass


def _load_yaml(text: str, source: Path) -> Any:
    import yaml

    loader = _bounded_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            n = _expanded_nodes(node, {})
        except (_TooDeep, RecursionError):
            raise InputError(source, f"YAML nested more than {MAX_DEPTH} levels deep") from None
        if n > MAX_YAML_NODES:
            raise InputError(source, f"YAML expands to more than {MAX_YAML_NODES} values (aliases used as a "
                                     "bomb?): refused")
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        if "python/" in str(e) or "could not determine a constructor" in str(e):
            first = f"tag not allowed in a scenario (safe loading only): {first}"
        raise InputError(source, f"not a valid scenario file (not valid YAML: {first})") from None
    except RecursionError:
        raise InputError(source, f"YAML nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()


def load_document(path: str | Path) -> Any:
    """The parsed document of a scenario file (JSON if its suffix says so, else YAML, which also
    reads JSON), read with the bounds of the module docstring."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise InputError(p, "scenario is not a regular file")
        if size > MAX_SCENARIO_BYTES:
            raise InputError(p, f"scenario file of {size} bytes is over the {MAX_SCENARIO_BYTES} bytes allowed "
                                "(long series belong in a referenced file)")
        raw = p.read_bytes()
    except OSError as e:
        raise InputError(p, f"cannot read scenario: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(p, f"scenario is not UTF-8 text (byte {e.start})") from None
    if "\x00" in text:
        raise InputError(p, "scenario contains a NUL byte: not a text file")
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise InputError(p, f"not a valid scenario file (not valid JSON: {str(e).splitlines()[0]})") from None
        except RecursionError:
            raise InputError(p, f"JSON nested more than {MAX_DEPTH} levels deep") from None
        try:
            _depth_ok(doc)
        except (_TooDeep, RecursionError):
            raise InputError(p, f"JSON nested more than {MAX_DEPTH} levels deep") from None
        return doc
    return _load_yaml(text, p)


def _depth_ok(x: Any, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise _TooDeep
    if isinstance(x, dict):
        for v in x.values():
            _depth_ok(v, depth + 1)
    elif isinstance(x, list):
        for v in x:
            _depth_ok(v, depth + 1)


def resolve_ref(base_dir: str | Path, name: Any, *, allow_outside: bool, what: str) -> Path:
    """The file a scenario's reference names (relative to `base_dir`, the scenario's folder), checked:
    a regular file, not too large, and inside `base_dir` unless `allow_outside`. Raises an
    `InputError` without a source (the caller adds the scenario's name)."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(None, f"{what}: a file reference is a non-empty file name, not {name!r}")
    if "\x00" in name or len(name) > 4096:
        raise InputError(None, f"{what}: not a usable file name")
    base = Path(base_dir).resolve()
    given = Path(name)
    try:
        target = (given if given.is_absolute() else base / given).resolve()
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (Python < 3.13)
        raise InputError(None, f"{what}: cannot resolve {name!r}: {e}") from None
    if not allow_outside and not target.is_relative_to(base):
        raise InputError(None, f"{what}: {name!r} is outside the scenario's folder; {_OUTSIDE_HINT}")
    try:
        st = target.stat()
    except FileNotFoundError:
        raise InputError(None, f"{what}: file {name!r} not found") from None
    except OSError as e:
        raise InputError(None, f"{what}: cannot read {name!r}: {e.strerror or e}") from None
    import stat

    if not stat.S_ISREG(st.st_mode):
        raise InputError(None, f"{what}: {name!r} is not a regular file")
    if st.st_size > MAX_REF_BYTES:
        raise InputError(None, f"{what}: {name!r} has {st.st_size} bytes, over the {MAX_REF_BYTES} allowed")
    return target


def _limit_of(key: str) -> tuple[float, str] | None:
    if key in _LIMITS:
        return _LIMITS[key], ""
    if key.endswith("_bytes") or key == "bytes":
        return _BYTES_LIMIT, " bytes"
    for suffix, scale in (("_mbps", 1e6), ("_kbps", 1e3), ("_bps", 1.0)):
        if key.endswith(suffix):
            return _RATE_LIMIT_BPS / scale, ""
    for suffix, scale in (("_ms", 1e6), ("_us", 1e3), ("_ns", 1.0)):
        if key.startswith("owd") and key.endswith(suffix):
            return _DELAY_LIMIT_NS / scale, ""
    return None


def _check_value(where: str, key: str, v: Any) -> None:
    if isinstance(v, float) and not math.isfinite(v):
        raise InputError(None, f"{where}: {v} is not a finite number")
    if isinstance(v, bool) or not isinstance(v, int | float):
        return
    lim = _limit_of(key)
    if lim is not None and abs(v) > lim[0]:
        raise InputError(None, f"{where}: {v:g} is over the {lim[0]:g}{lim[1]} allowed")


def _walk(x: Any, where: str, key: str) -> None:
    if isinstance(x, dict):
        for k, v in x.items():
            _walk(v, f"{where}.{k}" if where else str(k), str(k))
    elif isinstance(x, list):
        if len(x) > _SERIES_LIMIT:
            raise InputError(None, f"{where}: {len(x)} entries, over the {_SERIES_LIMIT} allowed")
        for i, v in enumerate(x):
            # A [t_s, value] pair is bounded by the key that holds the series (loose for its time).
            _walk(v, f"{where}[{i}]", key)
    else:
        _check_value(where, key, x)


def check_scenario_keys(doc: Any) -> None:
    """Refuse a top-level key that is not in `SCENARIO_KEYS`, naming the closest valid key (or all of
    them when none is close). Raises an `InputError` without a source (the caller adds the file)."""
    import difflib

    if not isinstance(doc, dict):
        return
    for key in doc:
        if key in SCENARIO_KEYS:
            continue
        close = difflib.get_close_matches(str(key), SCENARIO_KEYS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(SCENARIO_KEYS)}"
        raise InputError(None, f"unknown top-level key {str(key)!r} ({hint})")


def check_scenario_sizes(doc: Any) -> None:
    """Refuse NaN/infinite numbers anywhere and sizes beyond the bounds of the module docstring.
    Raises an `InputError` without a source naming the key (``paths[1].buffer_bytes``)."""
    if not isinstance(doc, dict):
        return
    for key in ("duration_s", "seed"):
        v = doc.get(key)
        # duration_s: null means "no cap"; seed: null is no seed at all.
        if (v is not None or (key == "seed" and key in doc)) and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise InputError(None, f"{key}: expected a number, got {v!r}")
    seed = doc.get("seed")
    if seed is not None and (seed != int(seed) if math.isfinite(seed) else True):
        raise InputError(None, f"seed: expected a whole number, got {seed!r}")
    dur = doc.get("duration_s")
    if dur is not None and math.isfinite(dur) and dur <= 0:
        raise InputError(None, f"duration_s: must be > 0, got {dur!r}")
    _walk(doc, "", "")
