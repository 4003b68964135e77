"""Estimating path timelines from PacketEvents (one capture, or a client + server pair).

Per path (the ``path`` label; all subflows on it share its bottleneck), in the data direction (the
one carrying most payload; a tie is "s2c"), over bins of ``bin_ns`` (default 100 ms) from the first event:

Delay samples.
  Pair (``owd_ns`` on receiver rows): one-way delay per packet, both directions, "measured".
  One capture: RTT samples, then one-way = RTT x ``rtt_split`` (down) and x (1 - split) (up),
  "estimated". At the data sender, an ACK whose number equals the end of a data segment sent once
  gives RTT = ack arrival - segment send (Karn: retransmitted segments give none). At the receiver,
  a data segment echoing TSecr = X gives RTT = its arrival - the first ACK sent with TSval = X (up to
  one TS-clock tick, 1 ms on Linux, too long; the windowed minimum below hides most of it). At a
  receiver without TCP timestamps (CSV exports of cellular captures): the handshake RTT of the
  path's subflows or the first exchange after it, whichever is smaller (mode "rtt:handshake";
  a cellular handshake includes the radio's wake-up), or without a handshake in the capture the median RTT of
  the ACK clock of its flights ("rtt:ack-clock"; `_vantage`), held constant. Never a silent
  default: with no sample at all the delay stays unknown and `fill_unknown` says what it assumes.

Base delay: per-bin minimum, then a running minimum over ``base_window_ns`` (default 10 s, centred)
  so a slowly changing path delay is followed while short queueing episodes are not taken for it.

Queueing delay of a bin: its minimum delay sample - base. When even the least-delayed packet of the
  bin waited ``> max(queue_threshold_ns, 2 frame times)``, the bottleneck queue never emptied during
  the bin: the path was *saturated*, and what it delivered is its capacity.

Capacity, every bin tagged with how it is known:
  - "measured": saturated bins, the delivery rate: wire bytes (``frame_bytes``) of the data received
    between the bin's first and last arrival (with only the sender's capture, delivery is read from
    the ACKs: bytes newly acknowledged x the wire/payload ratio of the data sent);
  - "outage": no packet in either direction while data was outstanding (`_outages`): 0, from when
    the bottleneck stopped (the last data segment's arrival before the silence, less the one-way
    delay) to when it started again (the first arrival after it, less the one-way delay); exact
    edges, not bins;
  - "dispersion": the path did not fill, but back-to-back segments arrived spaced at the bottleneck
    rate (`_dispersion`, over the bin or up to +-2 bins around it);
  - "lower_bound": neither: a max-filter of the delivery rate over ``max_filter_bins`` (centred): the
    path delivered at least that;
  - "estimated": idle stretches carry the nearest value.

Buffer: a robust maximum (the k-th largest, k = max(3, 0.1 %) of samples, so one stale timestamp
  echo after a timeout does not make a megabyte queue) of queueing delay x capacity per packet. It is
  the buffer only if the queue overflowed: if some retransmission happened while the queue was at
  least ``overflow_fraction`` of that, "estimated"; otherwise it is a lower bound (buffer tag
  "lower_bound", ``buffer_is_lower_bound``), which `fill_unknown` does not replay as the buffer.

Loss (`_losses`): retransmitted data segments are overflow drops (a near-full queue in the look-back),
  bursts around an outage, other bursts (clusters far denser than the path's average loss spacing),
  or random; only the random ones / data segments sent make the path's loss probability
  ("estimated", constant over the path), and only when there are at least ``MIN_RANDOM_LOSSES`` (3).

Caveats (``PathTimeline.caveats``): a single vantage point, delay from the handshake, no delay at
  all, capacity bins that are only lower bounds, a buffer lower bound, outages, loss bursts, and
  bytes carried by subflows missing from the capture (`_vantage.missing_subflow_bytes`).

Not estimated: uplink capacity (ACKs do not load it) and uplink loss: left unknown (null), so
`fill_unknown` / `to_path_configs` assume and say so.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import polars as pl

from workbench.errors import InputError
from workbench.timeline._dispersion import dispersion_bins
from workbench.timeline._losses import classify_retransmissions
from workbench.timeline._outages import find_outages
from workbench.timeline._vantage import ack_clock_rtt_samples, handshake_rtt_ns, missing_subflow_bytes
from workbench.timeline.model import Caveat, PathTimeline, Source, Timelines, steps_from_series

__all__ = ["ASSUMED_HEADER_BYTES", "EstimateOptions", "estimate_bins", "estimate_timelines", "rtt_samples"]

ASSUMED_HEADER_BYTES = 90  # per segment, where a capture has no frame lengths (= the replay's default)
MIN_RANDOM_LOSSES = 3      # fewer random losses than this give no loss rate


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
    outage_min_ns: int = 800_000_000  # a silence shorter than this (or 4 RTTs) is not an outage
    dispersion: bool = True             # capacity from packet dispersion where a path did not fill

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
    # Captures exported without frame lengths (tshark CSVs) count payload + the replay model's default
    # header (90 B: IPv4, TCP timestamps, DSS), the same the replay then adds to each segment.
    wire = (pl.when(pl.col("frame_bytes") > 0).then(pl.col("frame_bytes"))
            .otherwise(pl.col("payload_bytes") + ASSUMED_HEADER_BYTES))
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


@dataclass
class _PathInfo:
    """What the per-bin pass found about one path, beyond its bins (for `estimate_timelines`)."""

    mode: str
    data_dir: str
    samples: pl.DataFrame          # t_ns, delay_ns (owd, or RTT)
    outages: list[tuple[int, int]]  # absolute ns
    handshake_ns: int | None


def _delay_samples(pev: pl.DataFrame, data_dir: str, handshake: dict[str, int], path: str
                   ) -> tuple[str, pl.DataFrame, pl.DataFrame | None]:
    """(mode, samples ``t_ns, delay_ns``, uplink one-way samples or None)."""
    ack_dir = _other(data_dir)
    owd_rows = pev.filter((pl.col("dir") == data_dir) & (pl.col("point") == "rcv")
                          & pl.col("owd_ns").is_not_null() & (pl.col("payload_bytes") > 0))
    if owd_rows.height:
        up = pev.filter((pl.col("dir") == ack_dir) & (pl.col("point") == "rcv") & pl.col("owd_ns").is_not_null())
        return ("owd", owd_rows.select("t_ns", delay_ns=pl.col("owd_ns")),
                up.select("t_ns", delay_ns=pl.col("owd_ns")))
    rtt, how = rtt_samples(pev, data_dir)
    if how == "none" or rtt.height == 0:
        # No timestamps to echo and no sender view. The handshake RTT is one clean sample; the ACK
        # clock of the flights is used only without one: at a receiver that gets its segments in
        # batches (cellular radios, USB tethering) a pause inside a flight looks like a flight
        # boundary and gives "RTTs" far below the real one, so only their median is taken.
        hs = handshake.get(path)
        t_first = int(pev["t_ns"].min())  # type: ignore[arg-type]
        one = {"t_ns": pl.Int64(), "rtt_ns": pl.Int64()}
        if hs is not None:
            rtt, how = pl.DataFrame({"t_ns": [t_first], "rtt_ns": [hs]}, schema=one), "handshake"
        else:
            clock = ack_clock_rtt_samples(pev, data_dir, handshake_ns=None)
            if clock.height:
                rtt = pl.DataFrame({"t_ns": [t_first], "rtt_ns": [int(clock["rtt_ns"].median())]},  # type: ignore[arg-type]
                                   schema=one)
                how = "ack-clock"
            else:
                how = "none"
    return f"rtt:{how}", rtt.select("t_ns", delay_ns=pl.col("rtt_ns")), None


def _path_data_dir(pev: pl.DataFrame) -> str | None:
    """The data direction of one path's events: the ``dir`` carrying more payload bytes; None when
    neither carries any. A tie goes to "s2c", as in `workbench.metrics.data_directions` (and so the
    replay direction the report picks). The tie-break must be explicit: picking the first row of a
    ``group_by`` sorted by bytes left a tie to the group order, which polars draws from a per-process
    random hash seed, so an echo transfer (the same bytes each way) was estimated sometimes as a c2s
    and sometimes as an s2c path, and a report's numbers changed from run to run."""
    c2s = int(pev.filter(pl.col("dir") == "c2s")["payload_bytes"].cast(pl.Int64).sum())
    s2c = int(pev.filter(pl.col("dir") == "s2c")["payload_bytes"].cast(pl.Int64).sum())
    if c2s == 0 and s2c == 0:
        return None
    return "c2s" if c2s > s2c else "s2c"


def _estimate(ev: pl.DataFrame, opt: EstimateOptions) -> tuple[pl.DataFrame, dict[str, _PathInfo]]:
    t0 = int(ev["t_ns"].min())  # type: ignore[arg-type]
    t_end = int(ev["t_ns"].max())  # type: ignore[arg-type]
    n_bins = (t_end - t0) // opt.bin_ns + 1
    grid = pl.DataFrame({"bin": pl.int_range(0, n_bins, eager=True, dtype=pl.Int64)})
    handshake = handshake_rtt_ns(ev)
    out = []
    infos: dict[str, _PathInfo] = {}
    for path in ev["path"].unique(maintain_order=True).to_list():
        pev = ev.filter(pl.col("path") == path)
        data_dir = _path_data_dir(pev)
        if data_dir is None:
            continue
        mode, samples, up_samples = _delay_samples(pev, data_dir, handshake, str(path))
        arrivals = _delivery(pev, data_dir)
        frame_max = int(pev.filter(pl.col("dir") == data_dir)["frame_bytes"].max()  # type: ignore[arg-type]
                        or pev.filter(pl.col("dir") == data_dir)["payload_bytes"].max() or 1514)
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
        # bin, and it is neither the first nor the last bin with data (partial bins). The handshake /
        # ACK-clock samples are too few to tell a queue: no bin is saturated from them.
        active = b.filter(pl.col("delivered_bytes") > 0)["bin"]
        first_b, last_b = (int(active.min()), int(active.max())) if active.len() else (-1, -1)  # type: ignore[arg-type]
        frame_time_ns = pl.when(pl.col("span_bps") > 0).then(frame_max * 8e9 / pl.col("span_bps"))
        saturated = (
            (pl.col("queue_ns") > pl.max_horizontal(pl.lit(float(opt.queue_threshold_ns)), 2 * frame_time_ns))
            & (pl.col("span_ns") >= opt.min_span_fraction * opt.bin_ns)
            & (pl.col("bin") > first_b) & (pl.col("bin") < last_b)
            & pl.lit(mode not in ("rtt:handshake", "rtt:ack-clock"))
        ).fill_null(False)
        b = b.with_columns(saturated=saturated)
        # Outages: a path RTT for the threshold (owd mode: both directions).
        base_med = b["base_delay_ns"].median()
        rtt_ns = None if base_med is None else float(base_med) * (2 if mode == "owd" else 1)  # type: ignore[arg-type]
        outages = find_outages(ev, str(path), data_dir, rtt_ns=rtt_ns, min_gap_ns=opt.outage_min_ns)
        rcv_t = pev.filter((pl.col("dir") == data_dir) & (pl.col("point") == "rcv")
                           & (pl.col("payload_bytes") > 0))["t_ns"].sort().to_list()
        if outages and rcv_t:
            # The silence is seen at the capture; the bottleneck stopped one one-way delay before the
            # last data segment arrived, and started again one one-way delay before the first one after.
            owd_ns = 0.0 if base_med is None else float(base_med) * (1 if mode == "owd" else opt.rtt_split)  # type: ignore[arg-type]
            moved = []
            for a, e in outages:
                i = bisect.bisect_right(rcv_t, a)
                j = bisect.bisect_left(rcv_t, e)
                a2 = round((rcv_t[i - 1] if i else a) - owd_ns)
                e2 = round((rcv_t[j] if j < len(rcv_t) else e) - owd_ns)
                moved.append((a2, max(e2, a2 + 1)))
            outages = moved
        if outages:
            # A packet in flight during an outage waited for the path to come back: its delay is the
            # outage's, not a queue's. Such samples neither make bins saturated nor size the buffer.
            in_flight = pl.lit(False)
            for a, e in outages:
                in_flight = in_flight | ((pl.col("t_ns") > a) & (pl.col("t_ns") - pl.col("delay_ns") < e))
            samples = samples.filter(~in_flight)
            dl = samples.with_columns(_bin(t0, opt.bin_ns)).group_by("bin").agg(
                min_delay_ns=pl.col("delay_ns").min(), max_delay_ns=pl.col("delay_ns").max())
            b = b.drop("min_delay_ns", "max_delay_ns", "base_delay_ns", "queue_ns").join(dl, on="bin", how="left").sort("bin")
            b = b.with_columns(
                base_delay_ns=pl.col("min_delay_ns").rolling_min(window_size=w, center=True, min_samples=1)
                .forward_fill().backward_fill()).with_columns(queue_ns=pl.col("min_delay_ns") - pl.col("base_delay_ns"))
            b = b.with_columns(saturated=saturated)
        in_outage = pl.lit(False)
        for a, e in outages:
            # A bin is "in" the outage when the silence covers its whole span.
            in_outage = in_outage | ((pl.col("bin") * opt.bin_ns + t0 >= a) & ((pl.col("bin") + 1) * opt.bin_ns + t0 <= e))
        at_receiver = pev.filter((pl.col("dir") == data_dir) & (pl.col("point") == "rcv")).height > 0
        if opt.dispersion and at_receiver and arrivals.height >= 2:
            spaced = arrivals
            if mode == "owd":
                # With one-way delays a segment that queued at all left the bottleneck exactly one
                # transmission time after the one before it: only those pairs are dispersion samples
                # (an application-paced sender's spacing is then never taken for the bottleneck's).
                # (Same rows, same order as `arrivals`, which `_delivery` takes with the same filter.)
                owd = (pev.filter((pl.col("dir") == data_dir) & (pl.col("point") == "rcv") & (pl.col("payload_bytes") > 0))
                       .select("t_ns", "owd_ns").with_row_index("i").with_columns(_bin(t0, opt.bin_ns))
                       .join(b.select("bin", "base_delay_ns"), on="bin", how="left").sort("i"))
                queued = (owd["owd_ns"] - owd["base_delay_ns"] > 50_000).fill_null(False)
                if queued.len() == arrivals.height:
                    spaced = arrivals.with_columns(queued=queued)
            disp = dispersion_bins(spaced, t0_ns=t0, bin_ns=opt.bin_ns, n_bins=n_bins)
        else:
            disp = grid.with_columns(disp_bps=pl.lit(None, pl.Float64), disp_pairs=pl.lit(0, pl.Int64))
        k = max(1, opt.max_filter_bins)
        b = b.join(disp, on="bin", how="left").sort("bin").with_columns(
            maxf=pl.col("delivery_bps").rolling_max(window_size=k, center=True, min_samples=1),
            outage=in_outage,
        ).with_columns(
            capacity_bps=pl.when(pl.col("saturated")).then(pl.col("span_bps"))
            .when(pl.col("outage")).then(pl.lit(0.0))
            .when(pl.col("disp_bps").is_not_null() & (pl.col("disp_bps") >= 0.97 * pl.col("maxf").fill_null(0)))
            .then(pl.max_horizontal("disp_bps", "delivery_bps"))
            .otherwise(pl.when(pl.col("maxf") > 0).then(pl.col("maxf"))),
            # A dispersion below what the path delivered nearby (a paced sender's spacing) is overruled
            # by the lower bound.
            capacity_src=pl.when(pl.col("saturated")).then(pl.lit("measured"))
            .when(pl.col("outage")).then(pl.lit("outage"))
            .when(pl.col("disp_bps").is_not_null() & (pl.col("disp_bps") >= 0.97 * pl.col("maxf").fill_null(0)))
            .then(pl.lit("dispersion"))
            .when(pl.col("maxf") > 0).then(pl.lit("lower_bound")),
        )
        # Idle stretches longer than the max-filter: carry the nearest estimate, "estimated".
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
        infos[str(path)] = _PathInfo(mode=mode, data_dir=data_dir, samples=samples, outages=outages,
                                     handshake_ns=handshake.get(str(path)))
    if not out:
        raise InputError(None, "no path carried data: nothing to estimate")
    cols = ["path", "bin", "t_ns", "t_epoch_ns", "delivered_bytes", "delivery_bps", "span_ns", "span_bps",
            "min_delay_ns", "max_delay_ns", "base_delay_ns", "queue_ns", "saturated", "disp_bps", "disp_pairs",
            "outage", "capacity_bps", "capacity_src", "base_up_ns", "mode", "data_dir"]
    return pl.concat([o.select(cols) for o in out]), infos


def estimate_bins(source: pl.DataFrame | _HasEvents, options: EstimateOptions | None = None, **kw: Any
                  ) -> pl.DataFrame:
    """Per path and bin, what the estimator saw and decided: ``path``, ``bin``, ``t_ns`` (bin start,
    relative to the first event), ``t_epoch_ns``, ``delivered_bytes``, ``delivery_bps`` (bytes/bin),
    ``span_bps`` (rate between first and last arrival), ``min_delay_ns``, ``max_delay_ns``,
    ``base_delay_ns``, ``queue_ns``, ``saturated``, ``disp_bps`` / ``disp_pairs`` (capacity from
    dispersion and the back-to-back pairs behind it), ``outage`` (the bin lies in an outage),
    ``capacity_bps``, ``capacity_src`` (measured / outage / dispersion / lower_bound / estimated),
    ``base_up_ns``, ``mode`` ("owd" or "rtt:<method>"), ``data_dir``."""
    opt = options or EstimateOptions(**kw)
    return _estimate(_events(source), opt)[0]


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


def _queue_samples(samples: pl.DataFrame, bins: pl.DataFrame, t0: int, bin_ns: int) -> pl.DataFrame:
    """Per delay sample: its queueing delay (sample - base of its bin) and the queue in bytes."""
    return (samples.with_columns(_bin(t0, bin_ns))
            .join(_smooth_capacity(bins), on="bin", how="left")
            .with_columns(q_ns=pl.col("delay_ns") - pl.col("base_delay_ns"))
            .with_columns(q_bytes=pl.col("q_ns").clip(0) * pl.col("cap_smooth_bps") / 8e9))


def _robust_max(values: pl.Series) -> float | None:
    """The k-th largest value, k = max(3, 0.1 % of them): the top of a queue that many packets saw,
    not one stale sample."""
    v = values.drop_nulls().sort(descending=True)
    if v.len() == 0:
        return None
    k = min(v.len(), max(3, math.ceil(0.001 * v.len())))
    return float(v[k - 1])


def _capacity_series(b: pl.DataFrame, outages_rel: list[tuple[int, int]]) -> tuple[list[int], list[float | None], list[str | None]]:
    """Bin capacities with the outages laid over them at their exact edges."""
    t = b["t_ns"].to_list()
    v = b["capacity_bps"].to_list()
    src = b["capacity_src"].to_list()
    if not outages_rel:
        return t, v, src
    points: dict[int, tuple[float | None, str | None]] = dict(zip(t, zip(v, src, strict=True), strict=True))

    def at(x: int) -> tuple[float | None, str | None]:
        i = max(0, sum(1 for ti in t if ti <= x) - 1)
        return v[i], src[i]

    for a, e in outages_rel:
        resume = at(e)
        for ti in [ti for ti in points if a <= ti < e]:
            points[ti] = (0.0, "outage")
        points[a] = (0.0, "outage")
        if e not in points:
            points[e] = resume
    ts = sorted(points)
    return ts, [points[x][0] for x in ts], [points[x][1] for x in ts]


def estimate_timelines(source: pl.DataFrame | _HasEvents, options: EstimateOptions | None = None,
                       **kw: Any) -> Timelines:
    """Estimate one `PathTimeline` per path from PacketEvents (or a loaded capture); see the module
    docstring for the method. Keyword arguments are `EstimateOptions` fields. The primary path (first)
    is the one carrying subflow 0 of the busiest connection."""
    opt = options or EstimateOptions(**kw)
    ev = _events(source)
    t0 = int(ev["t_ns"].min())  # type: ignore[arg-type]
    bins, infos = _estimate(ev, opt)
    # Busiest connection; ties go to the lowest ``conn`` (group_by order is not deterministic).
    main_conn = (ev.group_by("conn").agg(pl.col("payload_bytes").cast(pl.Int64).sum())
                 .sort(["payload_bytes", "conn"], descending=[True, False])["conn"][0])
    first_path = ev.filter((pl.col("conn") == main_conn) & (pl.col("subflow") == 0))["path"]
    order = bins["path"].unique(maintain_order=True).to_list()
    if first_path.len() and first_path[0] in order:
        order.remove(first_path[0])
        order.insert(0, first_path[0])
    session = _session_caveats(ev, infos, main_conn)
    paths = []
    for path in order:
        b = bins.filter(pl.col("path") == path).sort("bin")
        info = infos[str(path)]
        mode, data_dir = info.mode, info.data_dir
        pev = ev.filter(pl.col("path") == path)
        down_dir = "down" if data_dir == "s2c" else "up"
        up_dir = "up" if down_dir == "down" else "down"
        t = b["t_ns"].to_list()
        caveats: list[Caveat] = list(session) if path == order[0] else []
        if mode == "owd":
            owd_down = b["base_delay_ns"].to_list()
            owd_up = b["base_up_ns"].to_list()
            owd_src: Source = "measured"
        else:
            rtt = b["base_delay_ns"].to_list()
            owd_down = [None if r is None else round(r * opt.rtt_split) for r in rtt]
            owd_up = [None if r is None else round(r * (1 - opt.rtt_split)) for r in rtt]
            owd_src = "estimated"
        if mode in ("rtt:handshake", "rtt:ack-clock"):
            hs = info.handshake_ns
            what = (f"the handshake and the first exchange after it (RTT {hs / 1e6:.0f} ms)"
                    if mode == "rtt:handshake" and hs
                    else "the median ACK-clock RTT of the flights (no handshake in the capture)")
            caveats.append(Caveat(str(path), f"owd_{down_dir}_ns", "delay_handshake",
                                  f"no TCP timestamps: delay from {what}, split in half and held constant; "
                                  "queueing and saturation cannot be seen"))
        elif mode == "rtt:none":
            caveats.append(Caveat(str(path), f"owd_{down_dir}_ns", "delay_unknown",
                                  "no delay sample in the capture (no timestamps, no handshake, no sender view): "
                                  "delay unknown"))
        # Buffer from the queue the delay samples saw.
        qs = _queue_samples(info.samples, b, t0, opt.bin_ns)
        enough = qs.height >= 20 and mode not in ("rtt:handshake", "rtt:ack-clock")
        q_max_ns = _robust_max(qs["q_ns"]) if enough else None
        buffer_f = _robust_max(qs["q_bytes"]) if enough else None
        buffer_bytes = None if buffer_f is None else round(buffer_f)
        data = pev.filter((pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
        vantage = "snd" if data.filter(pl.col("point") == "snd").height else "rcv"
        sent = data.filter(pl.col("point") == vantage)
        retx = sent.filter(pl.col("is_retrans"))
        base_rtt = float(b["base_delay_ns"].median() or 0) * (2 if mode == "owd" else 1)  # type: ignore[arg-type]
        hot: list[int] = []
        lookback = int(min(2e9, 2 * (base_rtt + (q_max_ns or 0)) + opt.bin_ns))
        # Without a queue worth the name (never above the saturation threshold) nothing overflowed.
        if retx.height and q_max_ns is not None and q_max_ns > opt.queue_threshold_ns:
            # A drop-tail queue overflows at a number of bytes, not at a delay: with a time-varying
            # rate the same full buffer is a short queueing delay at a high rate and a long one at a
            # low rate, so bins are "hot" when their queued bytes (delay x capacity) near the maximum.
            full = b.filter(pl.col("max_delay_ns").is_not_null()).with_columns(
                q_bytes=(pl.col("max_delay_ns") - pl.col("base_delay_ns")) * pl.col("capacity_bps") / 8e9,
            ).select("t_epoch_ns", "q_bytes")
            hot = full.filter(pl.col("q_bytes") >= opt.overflow_fraction * (buffer_bytes or 0))["t_epoch_ns"].to_list()
        around_ns = int(max(1e9, 4 * base_rtt))
        counts = classify_retransmissions(retx["t_ns"].to_list(), hot_bin_starts_ns=hot, bin_ns=opt.bin_ns,
                                          lookback_ns=lookback, outages=info.outages, around_ns=around_ns,
                                          burst_ns=int(max(200e6, 2 * base_rtt)),
                                          span_ns=(int(cast(int, sent["t_ns"].max())
                                                       - cast(int, sent["t_ns"].min()))
                                                   if sent.height else None))
        n_sent = max(sent.height - retx.height, 1)
        # One or two isolated losses are no evidence of a loss rate (one in 16 segments is not "6 %
        # random loss"): below MIN_RANDOM_LOSSES the path is replayed without random loss.
        loss = counts["random"] / n_sent if counts["random"] >= MIN_RANDOM_LOSSES else 0.0
        # The queue overflowed if a loss came while it was near full — also around an outage, when the
        # queue filled behind the stopped link (its losses are counted as the outage's).
        overflowed = counts["overflow"] > 0 or (counts["outage"] > 0 and any(
            a - around_ns <= h <= e + around_ns for h in hot for a, e in info.outages))
        lower = not overflowed and buffer_bytes is not None
        outages_rel = [(a - t0, e - t0) for a, e in info.outages]
        cap_t, cap_v, cap_src = _capacity_series(b, outages_rel)
        series: dict[str, tuple[Sequence[int], Sequence[float | int | None], Source]] = {
            f"capacity_{down_dir}_bps": (cap_t, cap_v, "estimated"),
            f"owd_{down_dir}_ns": (t, owd_down, owd_src),
            f"owd_{up_dir}_ns": (t, owd_up, owd_src),
            f"loss_{down_dir}": ([t[0]], [loss], "estimated"),
        }
        steps = steps_from_series(series)
        # Each capacity step carries its own provenance (measured / dispersion / lower_bound / ...).
        src_of = dict(zip(cap_t, cap_src, strict=True))
        col = f"capacity_{down_dir}_bps_src"
        srcs = []
        last = None
        for ti in steps["t_ns"].to_list():
            last = src_of.get(ti, last)
            srcs.append(last)
        steps = steps.with_columns(pl.Series(col, srcs, dtype=pl.String).cast(steps.schema[col]))
        steps = steps.with_columns(pl.when(pl.col(f"capacity_{down_dir}_bps").is_not_null()).then(pl.col(col)).alias(col))
        by_src = b.group_by("capacity_src").len()
        n_src = {str(r[0]): int(r[1]) for r in by_src.iter_rows()}
        n_lb = n_src.get("lower_bound", 0)
        if n_lb:
            caveats.append(Caveat(str(path), f"capacity_{down_dir}_bps", "capacity_lower_bound",
                                  f"{n_lb} of {b.height} bins: the path never filled and its packet spacing "
                                  "said nothing; capacity there is only a lower bound (what it delivered)"))
        if lower:
            caveats.append(Caveat(str(path), f"buffer_{down_dir}_bytes", "buffer_lower_bound",
                                  f"the queue never overflowed: the buffer is at least {buffer_bytes} B, its size "
                                  "is unknown"))
        if info.outages:
            spans = ", ".join(f"{a / 1e9:.2f}-{e / 1e9:.2f} s" for a, e in outages_rel)
            caveats.append(Caveat(str(path), f"capacity_{down_dir}_bps", "outage",
                                  f"{len(info.outages)} outage(s), no packet while data was outstanding: {spans} "
                                  "(capacity 0)"))
        if counts["outage"] or counts["burst"]:
            caveats.append(Caveat(str(path), f"loss_{down_dir}", "loss_bursts",
                                  f"{counts['outage'] + counts['burst']} retransmissions came in bursts "
                                  f"({counts['outage']} around outages, replayed as the outage; {counts['burst']} "
                                  "in other clusters, not replayed): not counted as independent random loss"))
        notes = [
            f"estimated from packets ({mode}, data {data_dir}), bins of {opt.bin_ns / 1e6:g} ms; capacity per bin: "
            + ", ".join(f"{n_src.get(k, 0)} {k}" for k in ("measured", "dispersion", "lower_bound", "outage",
                                                            "estimated"))
            + " (measured = saturated, dispersion = back-to-back spacing, lower_bound = delivered); capacity in "
            "wire bit/s",
            "base delay = running minimum over "
            f"{opt.base_window_ns / 1e9:g} s" + ("" if mode == "owd" else f", owd = RTT x {opt.rtt_split:g} / "
                                                 f"x {1 - opt.rtt_split:g}"),
            f"{retx.height} retransmissions: {counts['overflow']} during queue overflow, {counts['outage']} around "
            f"outages, {counts['burst']} in other bursts, {counts['random']} counted as random loss"
            + ("" if counts["random"] >= MIN_RANDOM_LOSSES or not counts["random"]
               else f" (fewer than {MIN_RANDOM_LOSSES}: too few for a rate, 0 replayed)"),
            "buffer = max queueing delay x capacity" + (
                ": lower bound, the queue never overflowed" if lower else " at overflow"),
        ]
        if buffer_bytes is None:
            notes[-1] = "buffer unknown (too few delay samples to see a queue)"
        # buffer_down_* or buffer_up_*
        buffer: dict[str, Any] = {f"buffer_{down_dir}_bytes": buffer_bytes, f"buffer_{down_dir}_src":
                                  None if buffer_bytes is None else ("lower_bound" if lower else "estimated")}
        paths.append(PathTimeline(
            name=str(path), steps=steps, kind="capacity", end_ns=max(int(t[-1]) + opt.bin_ns, cap_t[-1] + 1),
            **buffer, buffer_is_lower_bound=lower, t0_epoch_ns=t0, source="PacketEvents", notes=tuple(notes),
            caveats=tuple(caveats), outages=tuple(outages_rel), loss_counts=tuple(counts.items())))
    return Timelines(paths)


def _session_caveats(ev: pl.DataFrame, infos: dict[str, _PathInfo], main_conn: Any) -> list[Caveat]:
    """Caveats about the whole capture: one vantage point, subflows missing from it."""
    out: list[Caveat] = []
    modes = {i.mode for i in infos.values()}
    if "owd" not in modes:
        pts = ev.group_by("dir", "point").len()
        data_dir = next(iter(infos.values())).data_dir
        at_rcv = pts.filter((pl.col("dir") == data_dir) & (pl.col("point") == "rcv")).height > 0
        at_snd = pts.filter((pl.col("dir") == data_dir) & (pl.col("point") == "snd")).height > 0
        side = ("client" if data_dir == "s2c" else "server") if at_rcv and not at_snd else (
            ("server" if data_dir == "s2c" else "client") if at_snd and not at_rcv else "one")
        out.append(Caveat("", "capture", "single_vantage",
                          f"one vantage point ({side} capture only): one-way delays are RTT halves, queues and "
                          "buffers come from RTT samples, losses before the capture point are inferred; give the "
                          "other end's capture (--peer) for measured values"))
    if ev.filter((pl.col("payload_bytes") > 0) & (pl.col("frame_bytes").fill_null(0) == 0)).height:
        out.append(Caveat("", "capture", "no_frame_sizes",
                          f"no frame lengths in the capture (CSV export): wire bytes = payload + an assumed "
                          f"{ASSUMED_HEADER_BYTES} B of headers per segment"))
    conn_ev = ev.filter(pl.col("conn") == main_conn)
    data_dir = next(iter(infos.values())).data_dir
    missing = missing_subflow_bytes(conn_ev, data_dir)
    if missing:
        out.append(Caveat("", "capture", "missing_subflows",
                          f"at least {missing} bytes were carried by subflows not in this capture (DATA_ACK/DSN "
                          "reach beyond the captured subflows' data): the paths seen are not the whole connection"))
    return out
