"""The report's metrics tables in two shapes.

* tidy (``metrics.csv`` / ``metrics.parquet``): one row per input x source (observed, scheduler,
  baseline) x path x metric, with the metric's unit and the scheduler's parameters: what a
  spreadsheet or ``polars.pivot`` wants, and the same columns whatever the inputs' paths are called.
  Connection-level metrics have path ``""``; per-path ones (``share_wifi``, ``owd_p50_ms_lte_s2c``)
  are split into the metric (``share``, ``owd_p50_ms_s2c``) and the path.
* wide (``metrics_wide.csv``): one row per input x source, with per-path columns named by the path's
  place (``path1`` = the primary path, ...) and ``path1_name`` saying which path it is, instead of
  one column per address of every input (64 columns for two inputs before).

Pure functions of the per-input summary rows and path lists; no numbers are computed here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl

__all__ = ["ID_COLUMNS", "split_path", "tidy_metrics", "unit_of", "wide_metrics"]

ID_COLUMNS = ["input", "input_id", "source", "kind", "params", "seed"]
_TEXT = {"data_dir", "rtt_method", "fast_path", "conn"}  # descriptive or id columns: wide table only
_DIRS = ("_c2s", "_s2c")
_COUNTS = {"retrans", "reinjections", "ooo_n", "duplicates", "undeliverable", "conn"}


def unit_of(metric: str) -> str:
    """The unit of a `summarize` metric, from its name's suffix (the metrics package names them so)."""
    m = metric
    for d in _DIRS:
        m = m.removesuffix(d)
    if m.endswith("_mbps"):
        return "Mbit/s"
    if m.endswith("_ms"):
        return "ms"
    if m.endswith("_bytes") or m == "bytes":
        return "bytes"
    if m.endswith("_s"):
        return "s"
    if m.endswith("_segments") or m.startswith("burst_segments"):
        return "segments"
    if m.endswith("fraction") or m == "share":
        return "fraction"
    if m == "aggregation_benefit":
        return "[-1, 1]"
    if m in _COUNTS:
        return "count"
    return ""


def split_path(key: str, paths: Sequence[str]) -> tuple[str, str]:
    """(metric, path) of a summary key: ``share_wifi`` -> (share, wifi), ``owd_p50_ms_lte_s2c`` ->
    (owd_p50_ms_s2c, lte); a connection-level key -> (key, "")."""
    for p in sorted(paths, key=len, reverse=True):
        if key.endswith(f"_{p}"):
            return key[: -len(p) - 1], p
        for d in _DIRS:
            if key.endswith(f"_{p}{d}"):
                return key[: -len(p) - len(d) - 1] + d, p
    return key, ""


def _paths_of(rows: Sequence[dict[str, Any]], paths: Sequence[str] | None) -> list[str]:
    found = [k[len("share_"):] for r in rows for k in r if k.startswith("share_")]
    return list(dict.fromkeys([*(paths or []), *found]))


def tidy_metrics(inputs: Sequence[tuple[Sequence[dict[str, Any]], Sequence[str] | None]]) -> pl.DataFrame:
    """``inputs``: per input its summary rows and its paths (primary first; None: read off the rows)."""
    out: list[dict[str, Any]] = []
    for rows, paths in inputs:
        names = _paths_of(rows, paths)
        for r in rows:
            ids = {c: r.get(c) for c in ID_COLUMNS}
            ids["params"] = ids["params"] or ""
            for key, v in r.items():
                # Unknown values stay (null): a row that measured nothing still says so.
                if key in ID_COLUMNS or key in _TEXT or isinstance(v, str):
                    continue
                if isinstance(v, bool):
                    v = float(v)
                if v is not None and not isinstance(v, int | float):
                    continue
                metric, path = split_path(key, names)
                out.append(ids | {"path": path, "metric": metric, "value": None if v is None else float(v),
                                  "unit": unit_of(metric)})
    schema = {"input": pl.String, "input_id": pl.String, "source": pl.String, "kind": pl.String,
              "params": pl.String, "seed": pl.Int64, "path": pl.String, "metric": pl.String, "value": pl.Float64,
              "unit": pl.String}
    return pl.DataFrame(out, schema=schema)


def wide_metrics(inputs: Sequence[tuple[Sequence[dict[str, Any]], Sequence[str] | None]]) -> pl.DataFrame:
    """One row per input x source; per-path columns by the path's place (``share_path1``) with
    ``path1_name`` naming it; columns in a fixed order (ids, connection metrics, then per path)."""
    out: list[dict[str, Any]] = []
    for rows, paths in inputs:
        names = _paths_of(rows, paths)
        place = {p: f"path{i}" for i, p in enumerate(names, 1)}
        for r in rows:
            d: dict[str, Any] = {c: r.get(c) for c in ID_COLUMNS}
            d["params"] = d["params"] or ""
            for i, p in enumerate(names, 1):
                d[f"path{i}_name"] = p
            for key, v in r.items():
                if key in ID_COLUMNS:
                    continue
                metric, path = split_path(key, names)
                d[f"{metric}_{place[path]}" if path else metric] = v
            out.append(d)
    if not out:
        return pl.DataFrame(schema={c: pl.String for c in ID_COLUMNS})
    table = pl.from_dicts(out, infer_schema_length=None, strict=False)
    place_re = re.compile(r"(?:^|_)path(\d+)(?:_name)?$")
    per_path = sorted((c for c in table.columns if place_re.search(c)),
                      key=lambda c: (int(place_re.search(c).group(1)), not c.endswith("_name"), c))  # type: ignore[union-attr]
    rest = [c for c in table.columns if c not in ID_COLUMNS and c not in per_path]
    return table.select([*ID_COLUMNS, *rest, *per_path])
