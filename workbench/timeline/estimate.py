"""Estimating path timelines from PacketEvents (one capture, or a client + server pair).

Per path (the ``path`` label; all subflows on it share its bottleneck), in the data direction (the
one carrying most payload), over bins of ``bin_ns`` (default 100 ms) from the first event:

Delay samples.
  Pair (``owd_ns`` on receiver rows): one-way delay per packet, both directions, "measured".
  One capture: RTT samples, then one-way = RTT x ``rtt_split`` (down) and x (1 - split) (up),
  "estimated". At the data sender, an ACK whose number equals the end of a data segment sent once
  gives RTT = ack arrival - segment send (Karn: retransmitted segments give none). At the receiver,
  a data segment echoing TSecr = X gives RTT = its arrival - the first ACK sent with TSval = X (up to
  one TS-clock tick, 1 ms on Linux, too long; the windowed minimum below hides most of it).

Base delay: per-bin minimum, then a running minimum over ``base_window_ns`` (default 10 s, centred)
  so a slowly changing path delay is followed while short queueing episodes are not taken for it.

Queueing delay of a bin: its minimum delay sample - base. When even the least-delayed packet of the
  bin waited ``> max(queue_threshold_ns, 2 frame times)``, the bottleneck queue never emptied during
  the bin: the path was *saturated*, and what it delivered is its capacity.

Capacity: saturated bins -> delivery rate, "measured": wire bytes (``frame_bytes``) of the data
  received, between the bin's first and last arrival (bin edges cut packets in two; the span does
  not). With only the sender's capture, delivery is read from the ACKs (bytes newly acknowledged x
  the wire/payload ratio of the data sent). Other bins -> a max-filter of the per-bin delivery rate
  over ``max_filter_bins`` (centred), "estimated" (a lower bound: the path delivered at least that).

Buffer: the largest queueing delay x the capacity at that time (per packet, bytes). It is the buffer
  only if the queue overflowed: if some retransmission happened while the queue was at least
  ``overflow_fraction`` of its maximum, "estimated"; otherwise the value is a lower bound
  (``buffer_is_lower_bound``).

Loss: retransmitted data segments not explained by overflow (no bin within the look-back before the
  retransmission had queueing >= ``overflow_fraction`` x max) / data segments sent, "estimated",
  constant over the path.

Not estimated: uplink capacity (ACKs do not load it) and uplink loss: left unknown (null), so
`fill_unknown` / `to_path_configs` assume and say so.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Protocol

import polars as pl

from workbench.errors import InputError
from workbench.timeline.model import PathTimeline, Timelines, steps_from_series

__all__ = ["EstimateOptions", "estimate_bins", "estimate_timelines", "rtt_samples"]


class _HasEvents(Protocol):
    events: pl.DataFrame


@dataclass(frozen=True)
class EstimateOptions:
    """Knobs of the estimator (see the module docstring)."""

    bin_ns: int = 100_000_000
    rtt_split: float = 0.5
    base_window_ns: int = 10_000_000_000
    queue_threshold_ns: int = 2_000_000
    max_filter_bins: int = 10
    overflow_fraction: float = 0.5
    min_span_fraction: float = 0.5  # a saturated bin's arrivals must span this much of the bin

    def __post_init__(self) -> None:
        if self.bin_ns <= 0 or self.base_window_ns <= 0:
            raise ValueError("bin_ns and base_window_ns must be > 0")
        if not 0 < self.rtt_split < 1:
            raise ValueError("rtt_split must be in (0, 1)")


def _events(source: pl.DataFrame | _HasEvents) -> pl.DataFrame:
    ev = source if isinstance(source, pl.DataFrame) else source.events
    need = {"t_ns", "conn", "subflow", "path", "dir", "point", "seq", "ack", "flags", "payload_bytes",
            "frame_bytes", "is_retrans", "ts_val", "ts_ecr", "owd_ns"}
    missing = need - set(ev.columns)
    if missing:
        raise InputError(None, f"not PacketEvents: columns {sorted(missing)} missing")
    if ev.height == 0:
        raise InputError(None, "no packets to estimate from")
    return ev


def _other(d: str) -> str:
    return "c2s" if d == "s2c" else "s2c"


def rtt_samples(ev: pl.DataFrame, data_dir: str) -> tuple[pl.DataFrame, str]:
    """RTT samples ``(t_ns, rtt_ns)`` of one path's events from a single vantage point, and how they
    were taken ("ack-match" at the sender, "ts-echo" at the receiver, "none")."""
    ack_dir = _other(data_dir)
    data = ev.filter((pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
    acks = ev.filter(pl.col("dir") == ack_dir)
    d_snd = data.filter(pl.col("point") == "snd")
    a_rcv = acks.filter(pl.col("point") == "rcv")
    if d_snd.height and a_rcv.height:
        seg = (d_snd.with_columns(end=(pl.col("seq").cast(pl.Int64) + pl.col("payload_bytes")) % (1 << 32))
               .group_by("conn", "subflow", "end")
               .agg(t_snd=pl.col("t_ns").min(), n=pl.len(), retx=pl.col("is_retrans").any()))
        seg = seg.filter((pl.col("n") == 1) & ~pl.col("retx"))
        # An ACK whose range (previous ACK .. this ACK) holds a retransmitted segment ends a hole
        # filled by a retransmission: the segments it acknowledges waited for the recovery, and their
        # "RTT" would include it. Such ACKs give no sample.
        retx = (d_snd.filter(pl.col("is_retrans")).select("conn", "subflow", rseq=pl.col("seq").cast(pl.Int64))
                .unique().sort("rseq"))
        a = (a_rcv.sort("t_ns").with_columns(end=pl.col("ack").cast(pl.Int64))
             .with_columns(prev=pl.col("end").shift(1).over("conn", "subflow"))
             .filter(pl.col("prev").is_not_null() & (pl.col("end") > pl.col("prev")))
             .with_columns(q=pl.col("end") - 1).sort("q"))
        a = a.join_asof(retx, left_on="q", right_on="rseq", by=["conn", "subflow"], strategy="backward",
                        check_sortedness=False)
        first_ack = (a.filter(pl.col("rseq").is_null() | (pl.col("rseq") < pl.col("prev")))
                     .group_by("conn", "subflow", "end").agg(t_ns=pl.col("t_ns").min()))
        s = first_ack.join(seg, on=["conn", "subflow", "end"]).select(
            "t_ns", rtt_ns=pl.col("t_ns") - pl.col("t_snd")).filter(pl.col("rtt_ns") > 0)
        return s.sort("t_ns"), "ack-match"
    a_snd = acks.filter((pl.col("point") == "snd") & pl.col("ts_val").is_not_null())
    d_rcv = data.filter((pl.col("point") == "rcv") & pl.col("ts_ecr").is_not_null())
    if a_snd.height and d_rcv.height:
        sent = a_snd.group_by("conn", "subflow", "ts_val").agg(t_snd=pl.col("t_ns").min())
        echo = d_rcv.group_by("conn", "subflow", "ts_ecr").agg(t_ns=pl.col("t_ns").min())
        s = echo.join(sent, left_on=["conn", "subflow", "ts_ecr"], right_on=["conn", "subflow", "ts_val"]).select(
            "t_ns", rtt_ns=pl.col("t_ns") - pl.col("t_snd")).filter(pl.col("rtt_ns") > 0)
        return s.sort("t_ns"), "ts-echo"
    return pl.DataFrame(schema={"t_ns": pl.Int64(), "rtt_ns": pl.Int64()}), "none"


def _delivery(ev: pl.DataFrame, data_dir: str) -> pl.DataFrame:
    """Arrivals at the receiver ``(t_ns, wire_bytes)``: received data frames, or (sender-side
    capture) bytes newly acknowledged, scaled to wire bytes."""
    d = ev.filter((pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
    rcv = d.filter(pl.col("point") == "rcv")
    # Captures exported without frame lengths (some tshark CSVs) fall back to payload bytes.
    wire = pl.when(pl.col("frame_bytes") > 0).then(pl.col("frame_bytes")).otherwise(pl.col("payload_bytes"))
    if rcv.height:
        return rcv.select("t_ns", wire_bytes=wire.cast(pl.Int64))
    snd = d.filter(pl.col("point") == "snd")
    acks = ev.filter((pl.col("dir") == _other(data_dir)) & (pl.col("point") == "rcv"))
    if not snd.height or not acks.height:
        return pl.DataFrame(schema={"t_ns": pl.Int64(), "wire_bytes": pl.Int64()})
    ratio = max(float(snd["frame_bytes"].sum()) / max(float(snd["payload_bytes"].sum()), 1.0), 1.0)
    first_seq = snd.group_by("conn", "subflow").agg(seq0=pl.col("seq").min())
    newly = (
        acks.join(first_seq, on=["conn", "subflow"])
        .sort("t_ns")
        .with_columns(a=(pl.col("ack").cast(pl.Int64) - pl.col("seq0").cast(pl.Int64)))
        .with_columns(hi=pl.col("a").cum_max().over("conn", "subflow"))
        .with_columns(new=(pl.col("hi") - pl.col("hi").shift(1).over("conn", "subflow")).fill_null(0).clip(0))
    )
    return newly.select("t_ns", wire_bytes=(pl.col("new") * ratio).round().cast(pl.Int64))


def _bin(t0: int, bin_ns: int) -> pl.Expr:
    return ((pl.col("t_ns") - t0) // bin_ns).alias("bin")


def estimate_bins(source: pl.DataFrame | _HasEvents, options: EstimateOptions | None = None, **kw: Any
                  ) -> pl.DataFrame:
    """Per path and bin, what the estimator saw and decided: ``path``, ``bin``, ``t_ns`` (bin start,
    relative to the first event), ``t_epoch_ns``, ``delivered_bytes``, ``delivery_bps`` (bytes/bin),
    ``span_bps`` (rate between first and last arrival), ``min_delay_ns``, ``max_delay_ns``,
    ``base_delay_ns``, ``queue_ns``, ``saturated``, ``capacity_bps``, ``capacity_src``,
    ``base_up_ns``, ``mode`` ("owd" or "rtt:<method>"), ``data_dir``."""
    opt = options or EstimateOptions(**kw)
    ev = _events(source)
    t0 = int(ev["t_ns"].min())  # type: ignore[arg-type]
    t_end = int(ev["t_ns"].max())  # type: ignore[arg-type]
    n_bins = (t_end - t0) // opt.bin_ns + 1
    grid = pl.DataFrame({"bin": pl.int_range(0, n_bins, eager=True, dtype=pl.Int64)})
    out = []
    for path in ev["path"].unique(maintain_order=True).to_list():
        pev = ev.filter(pl.col("path") == path)
        by_dir = pev.group_by("dir").agg(pl.col("payload_bytes").sum())
        if by_dir["payload_bytes"].sum() == 0:
            continue
        data_dir = str(by_dir.sort("payload_bytes", descending=True)["dir"][0])
        ack_dir = _other(data_dir)
        owd_rows = pev.filter((pl.col("dir") == data_dir) & (pl.col("point") == "rcv")
                              & pl.col("owd_ns").is_not_null() & (pl.col("payload_bytes") > 0))
        if owd_rows.height:
            mode = "owd"
            samples = owd_rows.select("t_ns", delay_ns=pl.col("owd_ns"))
            up = pev.filter((pl.col("dir") == ack_dir) & (pl.col("point") == "rcv") & pl.col("owd_ns").is_not_null())
            up_samples = up.select("t_ns", delay_ns=pl.col("owd_ns"))
        else:
            rtt, how = rtt_samples(pev, data_dir)
            mode = f"rtt:{how}"
            samples = rtt.select("t_ns", delay_ns=pl.col("rtt_ns"))
            up_samples = None
        arrivals = _delivery(pev, data_dir)
        frame_max = int(pev.filter(pl.col("dir") == data_dir)["frame_bytes"].max() or 1514)  # type: ignore[arg-type]
        deliv = arrivals.with_columns(_bin(t0, opt.bin_ns)).group_by("bin").agg(
            delivered_bytes=pl.col("wire_bytes").sum(),
            span_ns=pl.col("t_ns").max() - pl.col("t_ns").min(),
            span_bytes=pl.col("wire_bytes").sum() - pl.col("wire_bytes").sort_by("t_ns").first(),
        )
        dl = samples.with_columns(_bin(t0, opt.bin_ns)).group_by("bin").agg(
            min_delay_ns=pl.col("delay_ns").min(), max_delay_ns=pl.col("delay_ns").max())
        w = max(1, opt.base_window_ns // opt.bin_ns)
        b = (
            grid.join(deliv, on="bin", how="left").join(dl, on="bin", how="left")
            .with_columns(delivered_bytes=pl.col("delivered_bytes").fill_null(0))
            .sort("bin")
            .with_columns(
                base_delay_ns=pl.col("min_delay_ns").rolling_min(window_size=w, center=True, min_samples=1)
                .forward_fill().backward_fill(),
                delivery_bps=pl.col("delivered_bytes") * 8e9 / opt.bin_ns,
                span_bps=pl.when(pl.col("span_ns") > 0).then(pl.col("span_bytes") * 8e9 / pl.col("span_ns")),
            )
            .with_columns(queue_ns=pl.col("min_delay_ns") - pl.col("base_delay_ns"))
        )
        # A bin is saturated when even its least-delayed packet queued, its arrivals cover most of the
        # bin, and it is neither the first nor the last bin with data (partial bins).
        active = b.filter(pl.col("delivered_bytes") > 0)["bin"]
        first_b, last_b = (int(active.min()), int(active.max())) if active.len() else (-1, -1)  # type: ignore[arg-type]
        frame_time_ns = pl.when(pl.col("span_bps") > 0).then(frame_max * 8e9 / pl.col("span_bps"))
        b = b.with_columns(saturated=(
            (pl.col("queue_ns") > pl.max_horizontal(pl.lit(float(opt.queue_threshold_ns)), 2 * frame_time_ns))
            & (pl.col("span_ns") >= opt.min_span_fraction * opt.bin_ns)
            & (pl.col("bin") > first_b) & (pl.col("bin") < last_b)
        ).fill_null(False))
        k = max(1, opt.max_filter_bins)
        b = b.with_columns(
            maxf=pl.col("delivery_bps").rolling_max(window_size=k, center=True, min_samples=1),
        ).with_columns(
            capacity_bps=pl.when(pl.col("saturated")).then(pl.col("span_bps"))
            .otherwise(pl.when(pl.col("maxf") > 0).then(pl.col("maxf"))),
            capacity_src=pl.when(pl.col("saturated")).then(pl.lit("measured"))
            .when(pl.col("maxf") > 0).then(pl.lit("estimated")),
        )
        # Idle stretches longer than the max-filter: carry the nearest estimate, still "estimated".
        b = b.with_columns(
            capacity_src=pl.when(pl.col("capacity_bps").is_null()).then(pl.lit("estimated"))
            .otherwise(pl.col("capacity_src")),
            capacity_bps=pl.col("capacity_bps").forward_fill().backward_fill(),
        ).with_columns(  # nothing delivered at all: unknown
            capacity_src=pl.when(pl.col("capacity_bps").is_not_null()).then(pl.col("capacity_src")))
        if up_samples is not None and up_samples.height:
            up_b = up_samples.with_columns(_bin(t0, opt.bin_ns)).group_by("bin").agg(
                up_min=pl.col("delay_ns").min())
            b = b.join(up_b, on="bin", how="left").sort("bin").with_columns(
                base_up_ns=pl.col("up_min").rolling_min(window_size=w, center=True, min_samples=1)
                .forward_fill().backward_fill()).drop("up_min")
        else:
            b = b.with_columns(base_up_ns=pl.lit(None, pl.Int64))
        out.append(b.drop("maxf", "span_bytes").with_columns(
            path=pl.lit(path), mode=pl.lit(mode), data_dir=pl.lit(data_dir),
            t_ns=pl.col("bin") * opt.bin_ns, t_epoch_ns=pl.col("bin") * opt.bin_ns + t0))
    if not out:
        raise InputError(None, "no path carried data: nothing to estimate")
    cols = ["path", "bin", "t_ns", "t_epoch_ns", "delivered_bytes", "delivery_bps", "span_ns", "span_bps",
            "min_delay_ns", "max_delay_ns", "base_delay_ns", "queue_ns", "saturated", "capacity_bps",
            "capacity_src", "base_up_ns", "mode", "data_dir"]
    return pl.concat([o.select(cols) for o in out])


def _smooth_capacity(bins: pl.DataFrame) -> pl.DataFrame:
    """``bin, base_delay_ns, cap_smooth_bps``: the running median (+-5 bins) of the capacity measured
    in saturated bins, else the path's median of those, else the estimate. One bin's delivery rate can
    be off (a stretch ACK after a recovery, a partial burst); a queue in bytes should not inherit that."""
    sat = pl.when(pl.col("saturated")).then(pl.col("capacity_bps"))
    med = bins.filter(pl.col("saturated"))["capacity_bps"].median()
    return bins.sort("bin").select(
        "bin", "base_delay_ns",
        cap_smooth_bps=sat.rolling_median(window_size=11, center=True, min_samples=1)
        .fill_null(pl.lit(med, pl.Float64)).fill_null(pl.col("capacity_bps")))


def _queue_samples(pev: pl.DataFrame, bins: pl.DataFrame, mode: str, data_dir: str, t0: int,
                   bin_ns: int) -> pl.DataFrame:
    """Per delay sample: its queueing delay (sample - base of its bin) and the queue in bytes."""
    if mode == "owd":
        s = pev.filter((pl.col("dir") == data_dir) & (pl.col("point") == "rcv") & pl.col("owd_ns").is_not_null()
                       & (pl.col("payload_bytes") > 0)).select("t_ns", delay_ns=pl.col("owd_ns"))
    else:
        s = rtt_samples(pev, data_dir)[0].select("t_ns", delay_ns=pl.col("rtt_ns"))
    return (s.with_columns(_bin(t0, bin_ns))
            .join(_smooth_capacity(bins), on="bin", how="left")
            .with_columns(q_ns=pl.col("delay_ns") - pl.col("base_delay_ns"))
            .with_columns(q_bytes=pl.col("q_ns").clip(0) * pl.col("cap_smooth_bps") / 8e9))


def estimate_timelines(source: pl.DataFrame | _HasEvents, options: EstimateOptions | None = None,
                       **kw: Any) -> Timelines:
    """Estimate one `PathTimeline` per path from PacketEvents (or a loaded capture); see the module
    docstring for the method. Keyword arguments are `EstimateOptions` fields. The primary path (first)
    is the one carrying subflow 0 of the busiest connection."""
    opt = options or EstimateOptions(**kw)
    ev = _events(source)
    t0 = int(ev["t_ns"].min())  # type: ignore[arg-type]
    bins = estimate_bins(ev, opt)
    main_conn = ev.group_by("conn").agg(pl.col("payload_bytes").sum()).sort("payload_bytes", descending=True)["conn"][0]
    first_path = ev.filter((pl.col("conn") == main_conn) & (pl.col("subflow") == 0))["path"]
    order = bins["path"].unique(maintain_order=True).to_list()
    if first_path.len() and first_path[0] in order:
        order.remove(first_path[0])
        order.insert(0, first_path[0])
    paths = []
    for path in order:
        b = bins.filter(pl.col("path") == path).sort("bin")
        mode, data_dir = str(b["mode"][0]), str(b["data_dir"][0])
        pev = ev.filter(pl.col("path") == path)
        down_dir = "down" if data_dir == "s2c" else "up"
        up_dir = "up" if down_dir == "down" else "down"
        t = b["t_ns"].to_list()
        if mode == "owd":
            owd_down = b["base_delay_ns"].to_list()
            owd_up = b["base_up_ns"].to_list()
            owd_src = "measured"
        else:
            rtt = b["base_delay_ns"].to_list()
            owd_down = [None if r is None else round(r * opt.rtt_split) for r in rtt]
            owd_up = [None if r is None else round(r * (1 - opt.rtt_split)) for r in rtt]
            owd_src = "estimated"
        # Buffer and loss from queueing and retransmissions.
        qs = _queue_samples(pev, b, mode, data_dir, t0, opt.bin_ns)
        q_max_ns = float(qs["q_ns"].max() or 0)  # type: ignore[arg-type]
        # No delay samples at all (a receiver-side capture without TCP timestamps): buffer unknown.
        buffer_bytes = round(float(qs["q_bytes"].max() or 0)) if qs.height else None  # type: ignore[arg-type]
        data = pev.filter((pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
        vantage = "snd" if data.filter(pl.col("point") == "snd").height else "rcv"
        sent = data.filter(pl.col("point") == vantage)
        retx = sent.filter(pl.col("is_retrans"))
        n_overflow = 0
        # Without a queue worth the name (never above the saturation threshold) nothing overflowed.
        if retx.height and q_max_ns > opt.queue_threshold_ns:
            base_rtt = float(b["base_delay_ns"].median() or 0) * (1 if mode != "owd" else 2)  # type: ignore[operator]
            lookback = int(min(2e9, 2 * (base_rtt + q_max_ns) + opt.bin_ns))
            # A drop-tail queue overflows at a number of bytes, not at a delay: with a time-varying
            # rate the same full buffer is a short queueing delay at a high rate and a long one at a
            # low rate, so bins are "hot" when their queued bytes (delay x capacity) near the maximum.
            full = b.filter(pl.col("max_delay_ns").is_not_null()).with_columns(
                q_bytes=(pl.col("max_delay_ns") - pl.col("base_delay_ns")) * pl.col("capacity_bps") / 8e9,
            ).select("t_epoch_ns", "q_bytes")
            hot = full.filter(pl.col("q_bytes") >= opt.overflow_fraction * (buffer_bytes or 0))["t_epoch_ns"].to_list()
            for tr in retx["t_ns"].to_list():
                i = bisect.bisect_right(hot, tr)
                # A hot bin that started within the look-back before the retransmission explains it.
                if i and hot[i - 1] >= tr - lookback - opt.bin_ns:
                    n_overflow += 1
        n_random = retx.height - n_overflow
        n_sent = max(sent.height - retx.height, 1)
        loss = n_random / n_sent
        lower = n_overflow == 0 and buffer_bytes is not None
        series = {
            f"capacity_{down_dir}_bps": (t, b["capacity_bps"].to_list(), "estimated"),
            f"owd_{down_dir}_ns": (t, owd_down, owd_src),
            f"owd_{up_dir}_ns": (t, owd_up, owd_src),
            f"loss_{down_dir}": ([t[0]], [loss], "estimated"),
        }
        steps = steps_from_series(series)
        # Saturated bins: delivery rate at a busy bottleneck is a direct capacity measurement.
        steps = steps.with_columns(pl.Series(f"capacity_{down_dir}_bps_src", b["capacity_src"].to_list())
                                   .cast(steps.schema[f"capacity_{down_dir}_bps_src"]))
        notes = [
            f"estimated from packets ({mode}, data {data_dir}), bins of {opt.bin_ns / 1e6:g} ms; "
            f"{int(b['saturated'].sum())} of {b.height} bins saturated (capacity measured there, "
            f"max-filter of delivery rate elsewhere); capacity in wire bit/s",
            "base delay = running minimum over "
            f"{opt.base_window_ns / 1e9:g} s" + ("" if mode == "owd" else f", owd = RTT x {opt.rtt_split:g} / "
                                                 f"x {1 - opt.rtt_split:g}"),
            f"{retx.height} retransmissions: {n_overflow} during queue overflow, {n_random} counted as random loss",
            "buffer = max queueing delay x capacity" + (
                ": lower bound, the queue never overflowed" if lower else " at overflow"),
        ]
        if mode == "rtt:none":
            notes.append("no delay samples (one capture, no ACK/data pairs to time, no TCP timestamps): "
                         "delay, buffer and saturation unknown; capacity is a max-filter of delivery only")
        paths.append(PathTimeline(
            name=str(path), steps=steps, kind="capacity", end_ns=int(t[-1]) + opt.bin_ns,
            **{f"buffer_{down_dir}_bytes": buffer_bytes,
               f"buffer_{down_dir}_src": None if buffer_bytes is None else "estimated"},
            buffer_is_lower_bound=lower, t0_epoch_ns=t0, source="PacketEvents", notes=tuple(notes)))
    return Timelines(paths)
