"""Saving and loading `Timelines` as parquet, CSV or JSON, losslessly.

All three hold the same thing: one long step table (a ``path`` column + ``STEPS``) and, per path, the
metadata that is not per step (kind, buffers and their provenance, end, period, origin, source, notes).

- parquet: the table, with the metadata as JSON in the file's key-value metadata (``workbench.timelines``).
- CSV: the table, preceded by one comment line ``# workbench-timelines <metadata JSON>``.
- JSON: ``{"format": "workbench-timelines", "version": 1, "paths": [{<metadata>, "steps": {column: [...]}}]}``.
"""

from __future__ import annotations

import io as _io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from workbench.errors import InputError
from workbench.timeline.model import STEPS, PathTimeline, Timelines

__all__ = ["FORMAT_VERSION", "load_timelines", "save_timelines"]

FORMAT_VERSION = 1
_MAGIC = "workbench-timelines"
_META_KEY = b"workbench.timelines"
_META_FIELDS = ["name", "kind", "end_ns", "buffer_down_bytes", "buffer_up_bytes", "buffer_down_src",
                "buffer_up_src", "buffer_is_lower_bound", "periodic", "t0_epoch_ns", "source", "notes",
                "caveats", "outages", "loss_counts"]

Format = Literal["parquet", "csv", "json"]


def _format_of(path: Path, fmt: str | None) -> Format:
    f = (fmt or path.suffix.lstrip(".")).lower()
    if f == "pq":
        f = "parquet"
    if f not in ("parquet", "csv", "json"):
        raise InputError(path, f"unknown timeline format {f!r}: use .parquet, .csv or .json")
    return f  # type: ignore[return-value]


def _meta(tl: PathTimeline) -> dict[str, Any]:
    d = {k: getattr(tl, k) for k in _META_FIELDS}
    d["notes"] = list(tl.notes)
    d["caveats"] = [c.to_dict() for c in tl.caveats]
    d["outages"] = [list(o) for o in tl.outages]
    d["loss_counts"] = dict(tl.loss_counts)
    return d


def _long_table(timelines: Timelines) -> pl.DataFrame:
    frames = [tl.steps.with_columns(pl.lit(name).alias("path")) for name, tl in timelines.items()]
    if not frames:
        return pl.DataFrame(schema={"path": pl.String(), **STEPS})
    return pl.concat(frames).select("path", *STEPS)


def _from_parts(table: pl.DataFrame, metas: list[dict[str, Any]], source: Path) -> Timelines:
    paths = []
    for m in metas:
        steps = table.filter(pl.col("path") == m["name"]).drop("path")
        try:
            paths.append(PathTimeline(steps=steps, **{**m, "notes": tuple(m.get("notes", ())),
                                                      "caveats": tuple(m.get("caveats", ())),
                                                      "outages": tuple(tuple(o) for o in m.get("outages", ())),
                                                      "loss_counts": tuple(dict(m.get("loss_counts", {})).items())}))
        except (ValueError, TypeError) as e:
            raise InputError(source, f"not a valid timeline: {e}") from None
    return Timelines(paths)


def _write_atomic(path: Path, data: bytes) -> None:
    # Write beside the target and rename, so a failure never leaves a half-written file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_timelines(timelines: Timelines, path: str | Path, format: Format | None = None) -> Path:
    """Write ``timelines`` to ``path``; the format follows the suffix unless given. Returns the path."""
    path = Path(path)
    fmt = _format_of(path, format)
    metas = [_meta(tl) for tl in timelines.values()]
    table = _long_table(timelines)
    header = {"format": _MAGIC, "version": FORMAT_VERSION, "paths": metas}
    if fmt == "parquet":
        arrow = table.to_arrow()
        arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}),
                                               _META_KEY: json.dumps(header).encode()})
        buf = pa.BufferOutputStream()
        pq.write_table(arrow, buf)
        data = buf.getvalue().to_pybytes()
    elif fmt == "csv":
        text = table.with_columns(pl.col(c).cast(pl.String) for c in STEPS if c.endswith("_src")).write_csv()
        data = (f"# {_MAGIC} {json.dumps(header)}\n" + text).encode()
    else:
        doc = dict(header)
        doc["paths"] = [{**m, "steps": timelines[m["name"]].steps.with_columns(
            pl.col(c).cast(pl.String) for c in STEPS if c.endswith("_src")).to_dict(as_series=False)}
            for m in metas]
        data = json.dumps(doc, indent=1).encode()
    _write_atomic(path, data)
    return path


def _check_header(header: Any, path: Path) -> list[dict[str, Any]]:
    if not isinstance(header, dict) or header.get("format") != _MAGIC:
        raise InputError(path, "not a workbench timelines file")
    if header.get("version") != FORMAT_VERSION:
        raise InputError(path, f"timelines format version {header.get('version')} (this reads {FORMAT_VERSION})")
    return header["paths"]


def load_timelines(path: str | Path, format: Format | None = None) -> Timelines:
    """Read timelines written by `save_timelines`."""
    path = Path(path)
    fmt = _format_of(path, format)
    if not path.is_file():
        raise InputError(path, "no such file")
    try:
        if fmt == "parquet":
            arrow = pq.read_table(path)
            raw = (arrow.schema.metadata or {}).get(_META_KEY)
            if raw is None:
                raise InputError(path, "not a workbench timelines file (no metadata)")
            metas = _check_header(json.loads(raw), path)
            table = pl.from_arrow(arrow)
        elif fmt == "csv":
            text = path.read_text()
            first, _, rest = text.partition("\n")
            prefix = f"# {_MAGIC} "
            if not first.startswith(prefix):
                raise InputError(path, "not a workbench timelines CSV (first line must be the metadata comment)")
            metas = _check_header(json.loads(first[len(prefix):]), path)
            table = pl.read_csv(_io.StringIO(rest), schema_overrides={
                "path": pl.String(), **{c: (pl.String() if c.endswith("_src") else t) for c, t in STEPS.items()}})
        else:
            doc = json.loads(path.read_text())
            metas = _check_header(doc, path)
            frames = [pl.DataFrame(m.pop("steps"), schema_overrides={
                c: (pl.String() if c.endswith("_src") else t) for c, t in STEPS.items()}
            ).with_columns(pl.lit(m["name"]).alias("path")) for m in metas]
            table = pl.concat(frames, how="diagonal") if frames else pl.DataFrame(schema={"path": pl.String()})
    except InputError:
        raise
    except (OSError, ValueError, KeyError, pl.exceptions.PolarsError, pa.ArrowException) as e:
        raise InputError(path, f"cannot read timelines: {e}") from None
    assert isinstance(table, pl.DataFrame)
    return _from_parts(table, metas, path)
