"""How well the emulation hit its targets, per 100 ms bin: the rate delivered while the bottleneck was
saturated against the rate programmed, and the delay added (at low queue) against the delay
programmed. Pure functions over timestamps; the inputs are either the UDP probe's records or a lab
run's PacketEvents (a capture pair gives every packet's one-way delay).

A bin is judged only when one programmed value held through it: bins overlapping a change (from when
it was planned to when it took effect, a ramp included) and the bin after it are left out.

Rate in a bin is measured from the frames received in it as bytes after the first / time from the
first to the last, which does not suffer from whole-frame quantisation at the bin edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from workbench.backends._kernel.shaping import Series, _value_at

__all__ = ["TARGETS", "capture_accuracy", "delay_bins", "rate_bins", "read_probe", "summarize_accuracy"]

# The run's emulation is flagged when it missed these (issue 12): median error per bin.
TARGETS = {"rate_err_p50": 0.02, "delay_err_p50_ms": 0.5}
_FRAME_BITS = 1514 * 8


def read_probe(path: Path) -> pl.DataFrame:
    """The probe receiver's records: seq, t_tx_ns, t_rx_ns, size_bytes (datagram payload)."""
    raw = np.fromfile(path, dtype=np.dtype([("seq", "<u8"), ("t_tx_ns", "<i8"), ("t_rx_ns", "<i8"),
                                             ("size_bytes", "<u4")]))
    return pl.DataFrame({k: raw[k] for k in ("seq", "t_tx_ns", "t_rx_ns", "size_bytes")}).sort("t_rx_ns")


def _excluded(n_bins: int, bin_ns: int, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    bad = np.zeros(n_bins, dtype=bool)
    bad[:1] = True  # the first bin: queues filling, processes starting
    for a, b in spans:
        lo, hi = int(min(a, b) // bin_ns), int(max(a, b) // bin_ns) + 1  # + the bin after
        bad[max(lo, 0):min(hi + 1, n_bins)] = True
    return bad


def rate_bins(t_ns: pl.Series, frame_bytes: pl.Series, programmed: Series, *, bin_ns: int, end_ns: int,
              changes_ns: Sequence[int] = (), start_ns: int = 0, owd_ns: pl.Series | None = None,
              programmed_owd: Series | None = None) -> pl.DataFrame:
    """Rate delivered per bin (receive times ``t_ns`` relative to t0, Ethernet frame sizes) against the
    programmed rate. With the packets' one-way delays (``owd_ns``, ``programmed_owd``) only saturated
    bins are kept: every packet of the bin, the first included, waited behind at least two full
    frames (its one-way delay exceeds the programmed delay by two frame times), so the link never
    idled. Columns: bin, t_ns, n, delivered_bps, programmed_bps, rel_err."""
    n_bins = int((end_ns - start_ns) // bin_ns)
    spans = [(t, t) for t in programmed[0] if t > 0] + [(t, t) for t in changes_ns]
    planned = [t for t in programmed[0] if t > 0]
    spans += [(p, a) for p, a in zip(sorted(planned), sorted(changes_ns), strict=False)]
    bad = _excluded(n_bins, bin_ns, [(a - start_ns, b - start_ns) for a, b in spans])
    df = pl.DataFrame({"t": t_ns.cast(pl.Int64), "b": frame_bytes.cast(pl.Int64)}).with_columns(
        bin=((pl.col("t") - start_ns) // bin_ns))
    if owd_ns is not None and programmed_owd is not None:
        t_list = df["t"].to_list()
        extra = np.array([_value_at(programmed_owd, t) + 2 * _FRAME_BITS / _value_at(programmed, t) * 1e9
                          for t in t_list])
        df = df.with_columns(queued=pl.Series(owd_ns.cast(pl.Float64).to_numpy() > extra))
        busy = df.group_by("bin").agg(pl.col("queued").all())
        idle_bins = set(busy.filter(~pl.col("queued"))["bin"].to_list())
        bad[[k for k in idle_bins if 0 <= k < n_bins]] = True
    df = df.sort("t")
    g = df.filter((pl.col("bin") >= 0) & (pl.col("bin") < n_bins)).group_by("bin").agg(
        n=pl.len(), span_ns=pl.col("t").max() - pl.col("t").min(), bytes_after_first=pl.col("b").sum() - pl.col("b").first())
    g = g.filter(pl.col("n") >= 3).with_columns(delivered_bps=pl.col("bytes_after_first") * 8e9 / pl.col("span_ns"))
    g = g.filter(~pl.col("bin").map_elements(lambda k: bool(bad[k]), return_dtype=pl.Boolean))
    g = g.with_columns(t_ns=pl.col("bin") * bin_ns + start_ns)
    g = g.with_columns(programmed_bps=pl.col("t_ns").map_elements(lambda t: _value_at(programmed, t + bin_ns // 2),
                                                                   return_dtype=pl.Float64))
    return g.with_columns(rel_err=pl.col("delivered_bps") / pl.col("programmed_bps") - 1).select(
        "bin", "t_ns", "n", "delivered_bps", "programmed_bps", "rel_err").sort("bin")


def delay_bins(t_ns: pl.Series, owd_ns: pl.Series, programmed: Series, *, bin_ns: int, end_ns: int,
               transitions: Sequence[tuple[int, int]] = (), start_ns: int = 0) -> pl.DataFrame:
    """Delay added per bin: the smallest one-way delay of the bin (the packet that met the emptiest
    queue) against the programmed delay. ``t_ns`` = send times relative to t0. Columns: bin, t_ns,
    n, measured_ns, programmed_ns, err_ns."""
    n_bins = int((end_ns - start_ns) // bin_ns)
    spans = list(transitions) + [(t, t) for t in programmed[0] if t > 0]
    bad = _excluded(n_bins, bin_ns, [(a - start_ns, b - start_ns) for a, b in spans])
    df = pl.DataFrame({"t": t_ns.cast(pl.Int64), "owd": owd_ns.cast(pl.Int64)}).with_columns(
        bin=(pl.col("t") - start_ns) // bin_ns)
    g = df.filter((pl.col("bin") >= 0) & (pl.col("bin") < n_bins)).group_by("bin").agg(
        n=pl.len(), measured_ns=pl.col("owd").min())
    g = g.filter(~pl.col("bin").map_elements(lambda k: bool(bad[k]), return_dtype=pl.Boolean))
    g = g.with_columns(t_ns=pl.col("bin") * bin_ns + start_ns)
    g = g.with_columns(programmed_ns=pl.col("t_ns").map_elements(lambda t: _value_at(programmed, t + bin_ns // 2),
                                                                  return_dtype=pl.Float64))
    return g.with_columns(err_ns=pl.col("measured_ns") - pl.col("programmed_ns")).select(
        "bin", "t_ns", "n", "measured_ns", "programmed_ns", "err_ns").sort("bin")


def summarize_accuracy(rate: pl.DataFrame | None, delay: pl.DataFrame | None) -> dict[str, float | int | None]:
    """Median / p95 / max of |error| over the judged bins, and whether the targets were met."""
    out: dict[str, float | int | None] = {"rate_bins": 0, "delay_bins": 0}
    if rate is not None and rate.height:
        e = rate["rel_err"].abs()
        out |= {"rate_bins": rate.height, "rate_err_p50": float(e.median()),  # type: ignore[arg-type]
                "rate_err_p95": float(e.quantile(0.95)), "rate_err_max": float(e.max()),  # type: ignore[arg-type]
                "rate_bias": float(rate["rel_err"].median())}  # type: ignore[arg-type]
    if delay is not None and delay.height:
        e = delay["err_ns"].abs() / 1e6
        out |= {"delay_bins": delay.height, "delay_err_p50_ms": float(e.median()),  # type: ignore[arg-type]
                "delay_err_p95_ms": float(e.quantile(0.95)), "delay_err_max_ms": float(e.max()),  # type: ignore[arg-type]
                "delay_bias_ms": float(delay["err_ns"].median()) / 1e6}  # type: ignore[arg-type]
    return out


def capture_accuracy(events: pl.DataFrame, links: dict[tuple[str, str], tuple[Series, Series]], *, t0_ns: int,
                     end_ns: int, bin_ns: int = 100_000_000,
                     changes: dict[tuple[str, str], list[tuple[int, int]]] | None = None,
                     ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Emulation accuracy from a lab run's PacketEvents (a capture pair: every received packet has
    its one-way delay). ``links`` maps (path, "s2c"|"c2s") to (programmed rate, programmed delay).

    Rate: in the direction that carries the data, the frames received per bin, in bins where the link
    was saturated (see `rate_bins`).
    Delay: per path and direction, the bin's smallest one-way delay against the programmed one, in
    the direction that does not carry the data (ACKs meet an empty queue) — a saturated direction
    has no low-queue packet to measure.
    Returns (rate bins, delay bins), each with columns path and dir added."""
    changes = changes or {}
    rcv = events.filter((pl.col("point") == "rcv") & pl.col("owd_ns").is_not_null())
    data_bytes = rcv.group_by("dir").agg(pl.col("payload_bytes").sum())
    data_dir = data_bytes.sort("payload_bytes", descending=True)["dir"][0] if data_bytes.height else "s2c"
    rates, delays = [], []
    for (path, d), (rate, owd) in links.items():
        sel = rcv.filter((pl.col("path") == path) & (pl.col("dir") == d)).sort("t_ns").with_columns(
            t_rel=pl.col("t_ns") - t0_ns)
        if sel.height < 3:
            continue
        spans = changes.get((path, d), [])
        if d == data_dir:
            r = rate_bins(sel["t_rel"], sel["frame_bytes"], rate, bin_ns=bin_ns, end_ns=end_ns,
                          changes_ns=[a for a, _ in spans], owd_ns=sel["owd_ns"], programmed_owd=owd)
            rates.append(r.with_columns(path=pl.lit(path), dir=pl.lit(d)))
        else:
            snd_t = sel["t_rel"] - sel["owd_ns"]
            dl = delay_bins(snd_t, sel["owd_ns"], owd, bin_ns=bin_ns, end_ns=end_ns, transitions=spans)
            delays.append(dl.with_columns(path=pl.lit(path), dir=pl.lit(d)))
    empty_r = pl.DataFrame(schema={"bin": pl.Int64, "t_ns": pl.Int64, "n": pl.UInt32, "delivered_bps": pl.Float64,
                                   "programmed_bps": pl.Float64, "rel_err": pl.Float64, "path": pl.String,
                                   "dir": pl.String})
    empty_d = pl.DataFrame(schema={"bin": pl.Int64, "t_ns": pl.Int64, "n": pl.UInt32, "measured_ns": pl.Int64,
                                   "programmed_ns": pl.Float64, "err_ns": pl.Float64, "path": pl.String,
                                   "dir": pl.String})
    return (pl.concat(rates, how="vertical_relaxed") if rates else empty_r,
            pl.concat(delays, how="vertical_relaxed") if delays else empty_d)
