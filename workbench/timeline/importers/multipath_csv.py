"""Multi-path CSV (one rate column per path) -> `Timelines`.

Generic form: a header, a time column (or a sample index with a fixed step), and one rate column per
path whose unit is declared in its name (``Verizon_throughput_mbps``) or by the caller. The path is
named by the column with the rate suffix removed (``Verizon``); a lone ``throughput_mbps`` column is
named after the file.

5Gophers (`read_5gophers`): per-second throughput of three carriers side by side
(``seq_num`` = second, ``<Carrier>_throughput_mbps``) or one phone walking (``throughput_mbps`` with
``radio_type`` 4G/5G). These are what 8 parallel TCP connections achieved, so kind "throughput".
Missing seconds (``seq_num`` jumps) become null (unknown) steps rather than being bridged.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, cast

import polars as pl

from workbench.errors import InputError
from workbench.timeline.importers.rate_csv import parse_rate_unit, parse_time_unit
from workbench.timeline.model import PathTimeline, Timelines, steps_from_series

__all__ = ["read_5gophers", "read_multipath_csv"]

_RATE_COL = re.compile(r"^(?P<path>.*?)_?(?:throughput|rate|bw|bandwidth)?_?(?P<unit>mbps|kbps|gbps|bps)$",
                       re.IGNORECASE)


def read_multipath_csv(path: str | Path, *, kind: Literal["capacity", "throughput"],
                       time_column: str | None = None, t_unit: str = "s", index_column: str | None = None,
                       step_ns: int | None = None, rate_columns: list[str] | None = None,
                       rate_unit: str | None = None) -> Timelines:
    """One timeline per rate column, all on the file's time axis (values "measured").

    Time: ``time_column`` in ``t_unit``, or ``index_column`` (integer sample number) x ``step_ns``;
    with an index, missing sample numbers are kept as unknown steps and ``end_ns`` = (last + 1) x step.
    Rate columns: ``rate_columns`` or every column named ``<path>_..._<unit>`` (mbps/kbps/gbps/bps).
    """
    path = Path(path)
    try:
        df = pl.read_csv(path, infer_schema_length=10_000)
    except (OSError, pl.exceptions.PolarsError) as e:
        raise InputError(path, f"cannot read CSV: {e}") from None
    if (time_column is None) == (index_column is None):
        raise ValueError("give exactly one of time_column and index_column")
    if index_column is not None and step_ns is None:
        raise ValueError("index_column needs step_ns")
    tcol = time_column or index_column
    if tcol not in df.columns:
        raise InputError(path, f"no column {tcol!r}; columns are {df.columns}")
    cols = rate_columns or [c for c in df.columns if _RATE_COL.match(c) and c != tcol]
    if not cols:
        raise InputError(path, f"no rate columns (named <path>_<unit>, e.g. wifi_mbps) among {df.columns}")
    for c in cols:
        if c not in df.columns:
            raise InputError(path, f"no column {c!r}")
    if df.height == 0:
        raise InputError(path, "no data rows (only a header)")
    df = df.sort(tcol)
    t_raw = df[tcol]
    if t_raw.null_count() or t_raw.n_unique() != df.height:
        raise InputError(path, f"column {tcol!r} must be unique and non-null")
    if index_column is not None:
        assert step_ns is not None
        idx = t_raw.cast(pl.Int64)
        # (at least one row, none null: min and max are ints)
        full = pl.DataFrame({tcol: pl.int_range(cast(int, idx.min()), cast(int, idx.max()) + 1, eager=True)})
        n_missing = full.height - df.height
        df = full.join(df.with_columns(idx), on=tcol, how="left")
        t_ns = (df[tcol] * step_ns).to_list()
        end_ns: int | None = (int(idx.max()) + 1) * step_ns  # type: ignore[arg-type]
    else:
        n_missing = 0
        t_ns = (t_raw.cast(pl.Float64) * parse_time_unit(t_unit)).round().cast(pl.Int64).to_list()
        end_ns = None
    out = []
    for c in cols:
        m = _RATE_COL.match(c)
        unit = rate_unit or (m.group("unit") if m else None)
        if unit is None:
            raise InputError(path, f"column {c!r}: rate unit not declared (name it <path>_mbps or pass rate_unit)")
        name = (m.group("path") or path.stem) if m else c
        rate = (df[c].cast(pl.Float64) * parse_rate_unit(unit)).to_list()
        if any(r is not None and r < 0 for r in rate):
            raise InputError(path, f"column {c!r}: negative rate")
        notes = [f"column {c!r} of {path.name}: " + (
            "achieved throughput (not capacity)" if kind == "throughput" else "link capacity")]
        if n_missing:
            notes.append(f"{n_missing} missing samples kept as unknown steps")
        out.append(PathTimeline(name=name, steps=steps_from_series({"capacity_down_bps": (t_ns, rate, "measured")}),
                                kind=kind, end_ns=end_ns, source=f"multipath CSV: {path}", notes=tuple(notes)))
    return Timelines(out)


def read_5gophers(path: str | Path) -> Timelines:
    """A 5Gophers throughput trace (``car-driving-trace-*.csv``: one path per carrier;
    ``walking-trace.csv``: one path, its radio type per second noted). Kind "throughput", 1 s steps."""
    path = Path(path)
    tls = read_multipath_csv(path, kind="throughput", index_column="seq_num", step_ns=1_000_000_000)
    df = pl.read_csv(path)
    notes = []
    if {"protocol", "num_tcp_conn"} <= set(df.columns):
        how = df.select("protocol", "num_tcp_conn").unique().sort("num_tcp_conn").rows()
        notes.append("measured with " + ", ".join(f"{n} parallel {p} connections" for p, n in how)
                     + " (aggregate throughput)")
    if "radio_type" in df.columns:
        counts = df.group_by("radio_type").len().sort("radio_type")
        radio = df.sort("seq_num")["radio_type"]
        changes = int((radio != radio.shift(1)).sum())
        notes.append("radio type per second: " + ", ".join(f"{r} {n} s" for r, n in counts.iter_rows())
                     + f"; {changes} changes")
    return Timelines([tl.replace(notes=(*tl.notes, *notes)) for tl in tls.values()])
