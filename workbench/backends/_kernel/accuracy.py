"""How well the emulation hit its targets, per 100 ms bin: the rate delivered while the bottleneck was
saturated against the rate in force, and the delay added (at low queue) against the delay in force.
Pure functions over timestamps; the inputs are either the UDP probe's records or a lab run's
PacketEvents (a capture pair gives every packet's one-way delay).

"In force" is the schedule as applied: a rate step counts from when its ``tc`` command returned, a
delay decrease follows the delay line's ramp. How late the changes went out is a figure of its own
(`schedule_lag`). The first bin (queues filling, programs starting) is not judged.

Rate in a bin is measured from the frames received in it as bytes after the first / time from the
first to the last, which does not suffer from whole-frame quantisation at the bin edges, against the
time-weighted rate in force over the same span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from workbench.backends._kernel.shaping import Series, htb_rate

__all__ = ["TARGETS", "InForce", "capture_accuracy", "delay_bins", "rate_bins", "read_probe", "schedule_lag",
           "summarize_accuracy"]

# The run's emulation is flagged when it missed these (issue 12): median error per bin.
TARGETS = {"rate_err_p50": 0.02, "delay_err_p50_ms": 0.5}
_FRAME_BITS = 1514 * 8


@dataclass(frozen=True)
class InForce:
    """A programmed series as it was in force: steps moved to when they were applied, and linear
    ramps ``(t_start, t_end, from, to)`` where the delay line ramped a decrease."""

    t_ns: np.ndarray
    values: np.ndarray
    ramps: tuple[tuple[int, int, float, float], ...] = ()

    @classmethod
    def of(cls, s: Series, *, applied: Sequence[tuple[int, int]] = (),
           ramps: Sequence[tuple[int, int, float, float]] = ()) -> InForce:
        """``applied``: (planned, applied) times of the steps after 0 (in order); missing ones count as
        on time."""
        moved = dict(applied)
        t = [0 if i == 0 else moved.get(ti, ti) for i, ti in enumerate(s[0])]
        return cls(np.asarray(t, dtype=np.int64), np.asarray(s[1], dtype=float),
                   tuple((int(a), int(b), float(f), float(to)) for a, b, f, to in ramps if b > a))

    def at(self, t_ns: np.ndarray) -> np.ndarray:
        t = np.asarray(t_ns, dtype=np.int64)
        v = self.values[np.clip(np.searchsorted(self.t_ns, t, side="right") - 1, 0, None)]
        for a, b, f, to in self.ramps:
            inside = (t >= a) & (t < b)
            v = np.where(inside, f + (to - f) * (t - a) / (b - a), v)
        return v

    def mean(self, a_ns: np.ndarray, b_ns: np.ndarray) -> np.ndarray:
        """Time-weighted mean over [a, b] (steps only; used for rates)."""
        edges = self.t_ns
        vals = self.values

        def integral(x: np.ndarray) -> np.ndarray:
            i = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, None)
            seg = np.concatenate([[0.0], np.cumsum(vals[:-1] * np.diff(edges))])
            return seg[i] + vals[i] * (x - edges[i])

        a, b = np.asarray(a_ns, dtype=np.int64), np.asarray(b_ns, dtype=np.int64)
        span = np.maximum(b - a, 1)
        return (integral(b) - integral(a)) / span


def read_probe(path: Path) -> pl.DataFrame:
    """The probe receiver's records: seq, t_tx_ns, t_rx_ns, size_bytes (datagram payload)."""
    raw = np.fromfile(path, dtype=np.dtype([("seq", "<u8"), ("t_tx_ns", "<i8"), ("t_rx_ns", "<i8"),
                                             ("size_bytes", "<u4")]))
    return pl.DataFrame({k: raw[k] for k in ("seq", "t_tx_ns", "t_rx_ns", "size_bytes")}).sort("t_rx_ns")


def rate_bins(t_ns: pl.Series, frame_bytes: pl.Series, rate: InForce, *, bin_ns: int, end_ns: int,
              owd_ns: pl.Series | None = None, owd: InForce | None = None) -> pl.DataFrame:
    """Rate delivered per bin (receive times ``t_ns`` from t0, Ethernet frame sizes) against the rate
    in force. With the packets' one-way delays (``owd_ns`` and the delay in force ``owd``) only
    saturated bins are kept: every packet of the bin, the first included, waited behind at least two
    full frames (its one-way delay exceeds the delay in force by two frame times), so the link never
    idled. Columns: bin, t_ns, n, delivered_bps, programmed_bps, rel_err."""
    t = t_ns.cast(pl.Int64).to_numpy()
    df = pl.DataFrame({"t": t, "b": frame_bytes.cast(pl.Int64).to_numpy()}).with_columns(bin=pl.col("t") // bin_ns)
    if owd_ns is not None and owd is not None:
        # a packet's queueing delay is behind it when it arrives: the delay in force when it was sent
        sent = t - owd_ns.cast(pl.Int64).to_numpy()
        extra = owd.at(sent) + 2 * _FRAME_BITS / np.maximum(rate.at(t), 1.0) * 1e9
        df = df.with_columns(queued=pl.Series(owd_ns.cast(pl.Float64).to_numpy() > extra))
    else:
        df = df.with_columns(queued=pl.lit(True))
    g = df.filter((pl.col("bin") >= 1) & (pl.col("bin") < end_ns // bin_ns)).sort("t").group_by("bin").agg(
        n=pl.len(), t_first=pl.col("t").first(), t_last=pl.col("t").last(),
        bytes_after_first=pl.col("b").sum() - pl.col("b").first(), busy=pl.col("queued").all())
    g = g.filter((pl.col("n") >= 3) & pl.col("busy") & (pl.col("t_last") > pl.col("t_first")))
    g = g.with_columns(delivered_bps=pl.col("bytes_after_first") * 8e9 / (pl.col("t_last") - pl.col("t_first")),
                       programmed_bps=pl.Series(rate.mean(g["t_first"].to_numpy(), g["t_last"].to_numpy()),
                                                dtype=pl.Float64),
                       t_ns=pl.col("bin") * bin_ns)
    return g.with_columns(rel_err=pl.col("delivered_bps") / pl.col("programmed_bps") - 1).select(
        "bin", "t_ns", "n", "delivered_bps", "programmed_bps", "rel_err").sort("bin")


def delay_bins(t_ns: pl.Series, owd_ns: pl.Series, owd: InForce, *, bin_ns: int, end_ns: int) -> pl.DataFrame:
    """Delay added per bin: of the bin's packets (``t_ns`` = send times from t0), the one that met the
    emptiest queue (smallest one-way delay above the delay in force when it was sent). Columns: bin,
    t_ns, n, measured_ns, programmed_ns, err_ns."""
    t = t_ns.cast(pl.Int64).to_numpy()
    prog = owd.at(t)
    df = pl.DataFrame({"t": t, "owd": owd_ns.cast(pl.Int64).to_numpy(), "prog": prog}).with_columns(
        bin=pl.col("t") // bin_ns, err=pl.col("owd") - pl.col("prog"))
    g = df.filter((pl.col("bin") >= 1) & (pl.col("bin") < end_ns // bin_ns)).sort("err").group_by("bin").agg(
        n=pl.len(), measured_ns=pl.col("owd").first(), programmed_ns=pl.col("prog").first(),
        err_ns=pl.col("err").first())
    return g.with_columns(t_ns=pl.col("bin") * bin_ns).select(
        "bin", "t_ns", "n", "measured_ns", "programmed_ns", "err_ns").sort("bin")


def schedule_lag(applied: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """How late the timed changes took effect (tc returned) after their planned time, ms."""
    lags = [(c["applied_ns"] - c["planned_ns"]) / 1e6 for c in applied]
    if not lags:
        return {"schedule_lag_p50_ms": None, "schedule_lag_max_ms": None}
    return {"schedule_lag_p50_ms": float(np.median(lags)), "schedule_lag_max_ms": float(max(lags))}


def summarize_accuracy(rate: pl.DataFrame | None, delay: pl.DataFrame | None) -> dict[str, Any]:
    """Median / p95 / max of |error| over the judged bins (and the signed median: the bias)."""
    out: dict[str, Any] = {"rate_bins": 0, "delay_bins": 0}
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


def capture_accuracy(events: pl.DataFrame, links: dict[tuple[str, str], tuple[InForce, InForce]], *, end_ns: int,
                     bin_ns: int = 100_000_000) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Emulation accuracy from a lab run's PacketEvents (times from t0; a capture pair gives every
    received packet its one-way delay). ``links`` maps (path, "s2c"|"c2s") to (rate, delay) in force.

    Rate: in the direction that carries the data, in saturated bins (see `rate_bins`).
    Delay: in the direction that does not carry the data (ACKs meet an empty queue) — a saturated
    direction has no low-queue packet to measure.
    Returns (rate bins, delay bins), each with columns path and dir added."""
    rcv = events.filter((pl.col("point") == "rcv") & pl.col("owd_ns").is_not_null())
    data_bytes = rcv.group_by("dir").agg(pl.col("payload_bytes").sum())
    data_dir = data_bytes.sort("payload_bytes", descending=True)["dir"][0] if data_bytes.height else "s2c"
    rates, delays = [], []
    for (path, d), (rate, owd) in links.items():
        sel = rcv.filter((pl.col("path") == path) & (pl.col("dir") == d)).sort("t_ns")
        if sel.height < 3:
            continue
        if d == data_dir:
            r = rate_bins(sel["t_ns"], sel["frame_bytes"], rate, bin_ns=bin_ns, end_ns=end_ns, owd_ns=sel["owd_ns"],
                          owd=owd)
            rates.append(r.with_columns(path=pl.lit(path), dir=pl.lit(d)))
        else:
            dl = delay_bins(sel["t_ns"] - sel["owd_ns"], sel["owd_ns"], owd, bin_ns=bin_ns, end_ns=end_ns)
            delays.append(dl.with_columns(path=pl.lit(path), dir=pl.lit(d)))
    empty_r = pl.DataFrame(schema={"bin": pl.Int64, "t_ns": pl.Int64, "n": pl.UInt32, "delivered_bps": pl.Float64,
                                   "programmed_bps": pl.Float64, "rel_err": pl.Float64, "path": pl.String,
                                   "dir": pl.String})
    empty_d = pl.DataFrame(schema={"bin": pl.Int64, "t_ns": pl.Int64, "n": pl.UInt32, "measured_ns": pl.Int64,
                                   "programmed_ns": pl.Float64, "err_ns": pl.Float64, "path": pl.String,
                                   "dir": pl.String})
    return (pl.concat(rates, how="vertical_relaxed") if rates else empty_r,
            pl.concat(delays, how="vertical_relaxed") if delays else empty_d)


def link_in_force(rate: Series, owd: Series, *, name: str, emulation: dict[str, Any]) -> tuple[InForce, InForce]:
    """Rate and delay in force on link ``name``, from the emulation's record (`Emulation.stop`):
    rate steps from when tc returned; delay steps from the delay line's own record (with its ramps),
    or from when tc returned (netem)."""
    t0 = emulation["t0_ns"]
    if emulation.get("delay_mode") == "delayline":
        rate = htb_rate(rate)  # the class's rate; the outages are the delay line's (not judged here)
    applied = [c for c in emulation["applied"] if c["link"] == name]
    r = InForce.of(rate, applied=[(c["planned_ns"], c["applied_ns"]) for c in applied if c["what"] == "rate_bps"])
    changes = emulation["links"].get(name, {}).get("changes") or []
    if changes:
        d = InForce.of(owd, applied=[(c["t_ns"] - t0, c["t_ns"] - t0) for c in changes],
                       ramps=[(c["t_ns"] - t0, c["ramp_end_ns"] - t0, c["from_owd_ns"], c["owd_ns"]) for c in changes])
    else:
        d = InForce.of(owd, applied=[(c["planned_ns"], c["applied_ns"]) for c in applied if c["what"] == "owd_ns"])
    return r, d
