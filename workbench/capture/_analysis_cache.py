"""Caching what `load` made of a capture: its PacketEvents, connection and subflow tables and
warnings, so that looking at the same capture again (a report run again with other schedulers or
parameters, a tuning study, the page) costs three parquet reads instead of the analysis (for the
bundled lab runs, client + server pairs, about a quarter of a report's work per input).

The key is everything the result is made of: the content hashes of the files, the names they were
given (the warnings and ``source`` name them), which one is the peer, the path names, the reader
asked for, and the code that reads and analyses them: the source of every module of
`workbench.capture` and the polars and numpy versions. A change to any of them is another key, so an
entry can never be stale and there is no version number to bump. Entries live beside the parsed
tables (`_read.cache_dir`, folder ``analysis``) and are checked as those are (`_read.read_entry`): a
checksum per table, the events' entry written last as the commit point; anything invalid is
deleted and rebuilt, never trusted.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from workbench.capture._read import cache_dir, content_hash, drop_entry, read_entry, write_entry
from workbench.capture.schema import PACKET_EVENTS

if TYPE_CHECKING:
    from workbench.capture._load import Capture

__all__ = ["analysis_key", "read_analysis", "write_analysis"]

_TABLES = ("connections", "subflows", "events")


@functools.cache
def _code_digest() -> str:
    """The code a capture's analysis depends on: every module of this package, polars, numpy."""
    h = hashlib.sha256()
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(f"polars {pl.__version__} numpy {np.__version__}".encode())
    return h.hexdigest()


def analysis_key(files: Sequence[Path], *, peer: Path | None, path_names: dict[str, str], reader: str,
                 one_connection: bool, digests: Mapping[Path, str] | None = None) -> str:
    """The cache key of `load`'s result for these arguments. ``digests``: the files' `content_hash`
    when the caller has them (else every file is read to hash it)."""
    def digest(f: Path) -> str:
        return (digests or {}).get(f) or content_hash(f)

    doc = {"files": [[str(f), digest(f)] for f in files],
           "peer": None if peer is None else [str(peer), digest(peer)],
           "path_names": sorted(path_names.items()), "reader": reader, "one_connection": one_connection,
           "code": _code_digest()}
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()


def _entry(key: str, table: str) -> Path:
    return cache_dir() / "analysis" / f"{key[:40]}.{table}.parquet"


def read_analysis(key: str) -> Capture | None:
    """The cached capture for ``key``, or None (no entry, or an invalid one: deleted)."""
    from workbench.capture._load import Capture

    events = read_entry(_entry(key, "events"), PACKET_EVENTS)
    if events is None:
        return None
    conns, sfs = read_entry(_entry(key, "connections")), read_entry(_entry(key, "subflows"))
    meta = events[1]
    if (conns is None or sfs is None or meta.get("key") != key
            or meta.get("tables") != {"connections": conns[1]["sha256"], "subflows": sfs[1]["sha256"]}):
        for t in _TABLES:
            drop_entry(_entry(key, t))
        return None
    state = meta["columns"]
    return Capture(source=str(meta["source"]), events=_restored(events[0], state["events"]),
                   connections=_restored(conns[0], state["connections"]),
                   subflows=_restored(sfs[0], state["subflows"]),
                   warnings=[str(w) for w in meta["warnings"]], reader=str(meta["reader"]),
                   content_hashes=[str(h) for h in meta["content_hashes"]],
                   peer=None if meta["peer"] is None else str(meta["peer"]))


def write_analysis(key: str, capture: Capture) -> None:
    """Cache ``capture`` under ``key`` (best effort: a read-only cache folder is not an error)."""
    tables = {"connections": capture.connections, "subflows": capture.subflows, "events": capture.events}
    meta = {"key": key, "source": capture.source, "warnings": capture.warnings, "reader": capture.reader,
            "content_hashes": capture.content_hashes, "peer": capture.peer,
            "columns": {t: _column_state(df) for t, df in tables.items()}}
    # The events' entry, written last, names the other two by checksum: it commits all three.
    digests = {}
    for t in ("connections", "subflows"):
        digest = write_entry(_entry(key, t), tables[t], {})
        if digest is None:
            return
        digests[t] = digest
    write_entry(_entry(key, "events"), tables["events"], meta | {"tables": digests})


# How polars holds each column, which parquet does not keep: whether it knows the column is sorted,
# and whether it is one value repeated (a literal broadcast by the analysis). Both change the
# results of some later queries in the last bit (a group's float mean summed in another order:
# `metrics._common.take`), so a cached table gets back what the analysed one had, and a report is
# the same, cold or warm, to the last bit.
def _column_state(df: pl.DataFrame) -> dict[str, list[str]]:
    sorted_asc = [c for c in df.columns if df[c].flags["SORTED_ASC"]]
    sorted_desc = [c for c in df.columns if df[c].flags["SORTED_DESC"]]
    repeated: list[str] = []
    if df.height > 1:
        # polars flags a gather from a repeated value sorted (it stays one value); from a column it
        # holds row by row, a gather in reverse order is not flagged, whatever the column's flags.
        back = df[np.arange(df.height - 1, -1, -1)]
        repeated = [c for c in df.columns if (back[c].flags["SORTED_ASC"] or back[c].flags["SORTED_DESC"])
                    and df[c].n_unique() == 1]  # (only ever one value: restored as a literal of it)
    return {"sorted_asc": sorted_asc, "sorted_desc": sorted_desc, "repeated": repeated}


def _restored(df: pl.DataFrame, state: dict[str, list[str]]) -> pl.DataFrame:
    if state["repeated"]:
        df = df.with_columns(pl.lit(df[c][0], df[c].dtype).alias(c) for c in state["repeated"])
    flagged = [pl.col(c).set_sorted() for c in state["sorted_asc"]]
    flagged += [pl.col(c).set_sorted(descending=True) for c in state["sorted_desc"]]
    return df.with_columns(flagged) if flagged else df
