"""Tables for the page, as pure functions from the library's plain data to polars frames: column
choice, order, units in the headers, rounding. No numbers are computed here beyond unit changes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

__all__ = [
    "ERROR_METRICS",
    "RESULT_COLUMNS",
    "connections_table",
    "error_table",
    "metrics_csv",
    "owd_table",
    "paths_table",
    "results_table",
    "subflows_table",
    "timelines_table",
]

# (summary key, column header) of the observed-vs-predicted table, in order.
RESULT_COLUMNS: list[tuple[str, str]] = [
    ("goodput_mbps", "goodput Mbit/s"),
    ("completion_s", "completion s"),
    ("ooo_p50_ms", "OOO p50 ms"),
    ("ooo_p95_ms", "OOO p95 ms"),
    ("ooo_p99_ms", "OOO p99 ms"),
    ("ooo_mean_ms", "OOO mean ms"),
    ("ooo_fraction", "OOO fraction"),
    ("free_cwnd_mean_segments", "free cwnd mean seg"),
    ("free_cwnd_peak_segments", "free cwnd peak seg"),
    ("retrans", "retrans"),
    ("reinjections", "reinjections"),
]


def _round(df: pl.DataFrame, digits: int = 3) -> pl.DataFrame:
    return df.with_columns(pl.col(c).round(digits) for c, t in df.schema.items() if t.is_float())


def connections_table(overview: dict[str, Any]) -> pl.DataFrame:
    """Every connection of the capture (inspect's ``connections``)."""
    rows = overview.get("connections") or []
    df = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame({"conn": []})
    return _round(df)


def subflows_table(overview: dict[str, Any]) -> pl.DataFrame:
    """Subflows of the detailed connection: addresses, path, bytes, share, RTT, retransmissions."""
    rows = overview["detail"]["subflows"]
    if not rows:
        return pl.DataFrame({"subflow": []})
    df = pl.DataFrame(rows, infer_schema_length=None).rename({"rtt_min_ms": "RTT min ms", "rtt_p50_ms": "RTT p50 ms",
                                                             "duration_s": "duration s"})
    return _round(df)


def paths_table(overview: dict[str, Any]) -> pl.DataFrame:
    """Per path: share of the data bytes and throughput while active (inspect's ``paths``)."""
    paths = overview["detail"].get("paths") or {}
    rows = [{"path": p, "share": r.get("share"), "bytes": r.get("bytes"),
             "throughput Mbit/s": (r["throughput_bps"] / 1e6) if r.get("throughput_bps") is not None else None,
             "retrans": r.get("retrans"), "reinjections": r.get("reinjections")}
            for p, r in paths.items()]
    return _round(pl.DataFrame(rows, infer_schema_length=None)) if rows else pl.DataFrame({"path": []})


def owd_table(overview: dict[str, Any]) -> pl.DataFrame:
    """One-way delay per path and direction (a capture pair only)."""
    rows = overview["detail"].get("owd") or []
    return _round(pl.DataFrame(rows, infer_schema_length=None)) if rows else pl.DataFrame({"path": []})


def timelines_table(tls: Any, direction: str = "down") -> pl.DataFrame:
    """Mean capacity, one-way delay, loss and buffer per path, with the what-if notes; capacity, loss
    and buffer of the data direction (``direction``: "down", or "up" for an upload)."""
    d = "up" if direction == "up" else "down"
    rows = []
    for name, tl in tls.items():
        cap, od, ou, loss = (tl.mean(f"capacity_{d}_bps"), tl.mean("owd_down_ns"), tl.mean("owd_up_ns"),
                             tl.mean(f"loss_{d}"))
        rows.append({"path": name, f"capacity {d} Mbit/s": cap / 1e6 if cap is not None else None,
                     "OWD down ms": od / 1e6 if od is not None else None,
                     "OWD up ms": ou / 1e6 if ou is not None else None, f"loss {d}": loss,
                     f"buffer {d} B": tl.buffer_up_bytes if d == "up" else tl.buffer_down_bytes,
                     "what-if": "; ".join(n.removeprefix("what-if: ") for n in tl.notes if n.startswith("what-if"))})
    return _round(pl.DataFrame(rows, infer_schema_length=None))


def results_table(rows: Sequence[dict[str, Any]], paths: Sequence[str] = (), *, made_with: str | None = None
                  ) -> pl.DataFrame:
    """Observed vs. predicted: one row per source (observed first), what the row is (``role``: the
    observed run, the capture's own scheduler, or a what-if), the scheduler's parameters, headline
    metrics and the share of each path."""
    out = []
    for r in rows:
        role = ("observed" if r.get("kind") == "observed" else
                "real kernel (upstream)" if r.get("kind") == "kernel" else
                "capture's own scheduler" if made_with is not None and r["source"] == made_with else "what-if")
        d: dict[str, Any] = {"source": r["source"], "role": role, "params": r.get("params") or ""}
        for key, header in RESULT_COLUMNS:
            v = r.get(key)
            d[header] = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
        for p in paths:
            v = r.get(f"share_{p}")
            d[f"share {p}"] = float(v) if v is not None else None
        out.append(d)
    schema = ({"source": pl.String, "role": pl.String, "params": pl.String}
              | {h: pl.Float64 for _, h in RESULT_COLUMNS} | {f"share {p}": pl.Float64 for p in paths})
    return _round(pl.DataFrame(out, schema=schema))


# Metrics whose replayed value is compared with the observed one (the trust table), with headers.
ERROR_METRICS: list[tuple[str, str]] = [("goodput_mbps", "goodput Mbit/s"), ("completion_s", "completion s"),
                                        ("ooo_p50_ms", "OOO p50 ms"), ("ooo_p95_ms", "OOO p95 ms"),
                                        ("ooo_mean_ms", "OOO mean ms")]


def error_table(rows: Sequence[dict[str, Any]], made_with: str, paths: Sequence[str] = ()) -> pl.DataFrame:
    """The replay of the capture's own scheduler against the observed run: per metric the observed
    and replayed value, the error (replayed - observed) and the error relative to the observed value;
    with a kernel row (the real kernel ran the same experiment) also the kernel's value and the
    model's difference from it. Empty when the replayed row or both references are missing."""
    obs = next((r for r in rows if r.get("kind") == "observed"), None)
    rep = next((r for r in rows if r.get("kind") == "scheduler" and r["source"] == made_with), None)
    ker = next((r for r in rows if r.get("kind") == "kernel"), None)
    schema = {"metric": pl.String, "observed": pl.Float64, f"replayed ({made_with})": pl.Float64,
              "error": pl.Float64, "error %": pl.Float64}
    if ker is not None:
        schema |= {"kernel": pl.Float64, "model − kernel": pl.Float64, "model − kernel %": pl.Float64}
    if rep is None or (obs is None and ker is None):
        return pl.DataFrame(schema=schema)

    def num(row: dict[str, Any] | None, key: str) -> float | None:
        v = row.get(key) if row is not None else None
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    keys = [*ERROR_METRICS, *((f"share_{p}", f"share {p}") for p in paths)]
    out = []
    for key, header in keys:
        o, r, k = num(obs, key), num(rep, key), num(ker, key)
        err = r - o if o is not None and r is not None else None
        row = {"metric": header, "observed": o, f"replayed ({made_with})": r, "error": err,
               "error %": err / abs(o) * 100 if err is not None and o else None}
        if ker is not None:
            dk = r - k if r is not None and k is not None else None
            row |= {"kernel": k, "model − kernel": dk, "model − kernel %": dk / abs(k) * 100 if dk is not None and k
                    else None}
        out.append(row)
    return _round(pl.DataFrame(out, schema=schema))


def metrics_csv(rows: Sequence[dict[str, Any]]) -> bytes:
    """Every metric of every row (the full `summarize` dicts) as CSV, for download."""
    if not rows:
        return b""
    return pl.DataFrame(list(rows), infer_schema_length=None).write_csv().encode()
