"""Goodput, completion time, application delay and per-path byte accounting.

* Goodput (DESIGN "Metrics"): in-order bytes delivered to the application per second. A byte counts
  when it becomes deliverable in order at the receiver (``t_deliverable_ns`` of `ooo_segments`), so
  head-of-line blocking lowers goodput exactly as the application sees it, and duplicates never count.
* Completion time of a finite transfer, and the application delay (DRePaS §VI.B, seed 003: "the time
  difference between the application sending data and the peer application reading it").
* Per-path bytes, throughput and share, retransmissions and MPTCP reinjections.
"""

from __future__ import annotations

import polars as pl

from workbench.metrics._common import (
    check_columns,
    first_cover,
    quantile_aggs,
    select_conn,
    start_times,
    with_data_dir,
)
from workbench.metrics.ooo import ooo_segments

__all__ = [
    "DEFAULT_BIN_NS",
    "app_delay",
    "app_delay_stats",
    "app_delay_summary",
    "goodput",
    "goodput_from_data_acks",
    "goodput_series",
    "path_stats",
]

DEFAULT_BIN_NS = 100_000_000  # 100 ms goodput bins


def _deliveries(events: pl.DataFrame, conn: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    ev = select_conn(events, conn)
    return ooo_segments(ev), start_times(ev)


def goodput_series(events: pl.DataFrame, conn: int | None = None, *,
                   bin_ns: int = DEFAULT_BIN_NS) -> pl.DataFrame:
    """In-order bytes delivered to the application per time bin.

    Bins are ``bin_ns`` wide and start at the connection's time origin (first SYN observation, else
    first data observation, see `goodput`). Columns: conn, t_ns (bin start), bytes, rate_bps
    (= bytes * 8 / bin width). Bins between the first and the last delivery with nothing delivered
    are present with 0, so the series can be plotted as is.
    """
    if bin_ns <= 0:
        raise ValueError("bin_ns must be positive")
    seg, start = _deliveries(events, conn)
    return series_from_segments(seg, start, bin_ns)


def series_from_segments(seg: pl.DataFrame, start: pl.DataFrame, bin_ns: int) -> pl.DataFrame:
    """`goodput_series` from precomputed segments and start times."""
    binned = (
        seg.filter(pl.col("t_deliverable_ns").is_not_null())
        .join(start, on="conn", how="left")
        .with_columns(((pl.col("t_deliverable_ns") - pl.col("start_ns")).clip(lower_bound=0) // bin_ns)
                      .alias("bin"))
        .group_by("conn", "bin")
        .agg(pl.col("new_bytes").sum().alias("bytes"), pl.col("start_ns").first())
    )
    full = (
        binned.group_by("conn")
        .agg(pl.col("bin").max().alias("last"), pl.col("start_ns").first())
        .with_columns(pl.int_ranges(0, pl.col("last") + 1).alias("bin"))
        .explode("bin")
        .select("conn", "bin", "start_ns")
    )
    return (
        full.join(binned.select("conn", "bin", "bytes"), on=["conn", "bin"], how="left")
        .with_columns(pl.col("bytes").fill_null(0).cast(pl.Int64))
        .sort("conn", "bin")
        .select(
            "conn",
            (pl.col("start_ns") + pl.col("bin") * bin_ns).alias("t_ns"),
            "bytes",
            (pl.col("bytes").cast(pl.Float64) * 8e9 / bin_ns).alias("rate_bps"),
        )
    )


def goodput(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Overall goodput and completion time per connection.

    Definitions (chosen here, documented for every consumer):
      * start_ns: the connection's first SYN observation (any point) when the table has one, else the
        first observation of a data-direction payload segment;
      * end_ns: the time the last in-order byte became deliverable at the receiver;
      * bytes: in-order bytes delivered (unique DSN bytes that became deliverable);
      * goodput_bps = bytes * 8 / (end_ns − start_ns);
      * completion_s = (end_ns − start_ns) / 1e9, only when every byte that arrived became deliverable
        (no permanent hole); otherwise null. ``data_fin`` says whether a DATA_FIN was seen in the data
        direction, i.e. whether the trace holds the end of a finite transfer.

    Needs receiver-side rows of the data direction; connections without them get no row.
    Columns: conn, start_ns, end_ns, bytes, goodput_bps, completion_s, undelivered_bytes, data_fin.
    """
    ev = select_conn(events, conn)
    seg, start = _deliveries(ev, None)
    return goodput_from_segments(ev, seg, start)


def goodput_from_data_acks(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Goodput as the data sender sees it, for captures that hold the sender but not the receiver (a
    client capture of an upload, a server capture of a download): bytes = the highest DATA_ACK the
    sender received less the first data sequence number it sent, end_ns = when that DATA_ACK first
    arrived, start_ns as `goodput`. Later than the receiver's view by the ACK's one-way delay.
    completion_s only when every byte sent was acknowledged. Same columns as `goodput`; no row for a
    connection without DATA_ACKs at the sender."""
    ev = with_data_dir(select_conn(events, conn))
    sent = ev.filter(pl.col("is_data_dir") & (pl.col("point") == "snd") & (pl.col("payload_bytes") > 0)
                     & pl.col("dsn").is_not_null()).group_by("conn").agg(
        pl.col("dsn").min().cast(pl.Int64).alias("dsn0"),
        (pl.col("dsn") + pl.col("payload_bytes")).max().cast(pl.Int64).alias("dsn_end"))
    acks = ev.filter(~pl.col("is_data_dir") & (pl.col("point") == "rcv") & pl.col("data_ack").is_not_null())
    top = acks.group_by("conn").agg(pl.col("data_ack").max().cast(pl.Int64).alias("top"))
    end = acks.join(top, on="conn").filter(pl.col("data_ack").cast(pl.Int64) == pl.col("top")) \
        .group_by("conn").agg(pl.col("t_ns").min().alias("end_ns"))
    fin = ev.filter(pl.col("is_data_dir") & pl.col("data_fin").fill_null(False)).group_by("conn") \
        .agg(pl.lit(True).alias("data_fin"))
    return (
        sent.join(top, on="conn").join(end, on="conn").join(start_times(ev), on="conn", how="left")
        .join(fin, on="conn", how="left")
        .with_columns(bytes=(pl.min_horizontal("top", "dsn_end") - pl.col("dsn0")).clip(0),
                      _dur_s=(pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64) / 1e9)
        .select(
            "conn", "start_ns", "end_ns", "bytes",
            pl.when(pl.col("_dur_s") > 0).then(pl.col("bytes") * 8 / pl.col("_dur_s")).alias("goodput_bps"),
            pl.when(pl.col("top") >= pl.col("dsn_end")).then(pl.col("_dur_s")).alias("completion_s"),
            (pl.col("dsn_end") - pl.min_horizontal("top", "dsn_end")).alias("undelivered_bytes"),
            pl.col("data_fin").fill_null(False),
        )
        .sort("conn")
    )


def goodput_from_segments(ev: pl.DataFrame, seg: pl.DataFrame, start: pl.DataFrame) -> pl.DataFrame:
    fin = (
        with_data_dir(ev).filter(pl.col("is_data_dir") & pl.col("data_fin").fill_null(False))
        .group_by("conn").agg(pl.lit(True).alias("data_fin"))
    )
    agg = seg.group_by("conn").agg(
        pl.col("t_deliverable_ns").max().alias("end_ns"),
        pl.col("new_bytes").filter(pl.col("t_deliverable_ns").is_not_null()).sum().cast(pl.Int64)
        .alias("bytes"),
        pl.col("new_bytes").filter(pl.col("t_deliverable_ns").is_null()).sum().cast(pl.Int64)
        .alias("undelivered_bytes"),
    )
    return (
        agg.join(start, on="conn", how="left")
        .join(fin, on="conn", how="left")
        .with_columns(((pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64) / 1e9).alias("_dur_s"))
        .select(
            "conn",
            "start_ns",
            "end_ns",
            "bytes",
            pl.when(pl.col("_dur_s") > 0).then(pl.col("bytes") * 8 / pl.col("_dur_s")).alias("goodput_bps"),
            pl.when(pl.col("undelivered_bytes") == 0).then(pl.col("_dur_s")).alias("completion_s"),
            "undelivered_bytes",
            pl.col("data_fin").fill_null(False),
        )
        .sort("conn")
    )


def app_delay(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Application delay of every delivered segment (DRePaS §VI.B): the time from the application
    handing the data to MPTCP to the peer application being able to read it.

    Applications' writes are not observable in packets, so the write is approximated by the first
    transmission of the data: app_delay_ns = t_deliverable at the receiver (see `ooo_segments`) −
    the first ``snd`` observation at the sender of the segment's first DSN byte (any subflow; the
    earliest copy counts, so a reinjected segment is timed from its original send). It includes the
    one-way delay, retransmission/reinjection time and the OOO (head-of-line) delay; it excludes time
    spent in the sender's send buffer before the first transmission.

    Needs both observation points on one clock (a replay, or a capture pair aligned by ingest); returns
    an empty table otherwise. Columns: conn, dsn, new_bytes, t_send_ns, t_deliverable_ns,
    app_delay_ns, subflow, path (the receiver-side subflow that brought the bytes).
    """
    ev = select_conn(events, conn)
    seg = ooo_segments(ev).filter(pl.col("t_deliverable_ns").is_not_null())
    return app_delay_from_segments(ev, seg)


_APP_SCHEMA: dict[str, pl.DataType] = {
    "conn": pl.UInt32(), "dsn": pl.Int64(), "new_bytes": pl.Int64(), "t_send_ns": pl.Int64(),
    "t_deliverable_ns": pl.Int64(), "app_delay_ns": pl.Int64(), "subflow": pl.UInt32(), "path": pl.String(),
}


def app_delay_from_segments(ev: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    check_columns(ev, ["t_ns", "conn", "dir", "point", "payload_bytes", "dsn"])
    snd = (
        with_data_dir(ev)
        .with_row_index("row_id")
        .filter(pl.col("is_data_dir") & (pl.col("point") == "snd") & pl.col("dsn").is_not_null()
                & (pl.col("payload_bytes") > 0))
        .select("conn", pl.col("row_id").cast(pl.Int64), "t_ns", pl.col("dsn").cast(pl.Int64).alias("s"),
                (pl.col("dsn").cast(pl.Int64) + pl.col("payload_bytes").cast(pl.Int64)).alias("e"))
    )
    if snd.height == 0 or seg.height == 0:
        return pl.DataFrame(schema=_APP_SCHEMA)
    _, pieces = first_cover(snd)
    # The sender piece containing the segment's first byte: last piece starting at or below dsn,
    # provided it also ends above dsn (otherwise the byte was never seen sent).
    first_send = pieces.select("conn", "piece_start", "piece_end", pl.col("a_ns").alias("t_send_ns"))
    out = (
        seg.filter(pl.col("t_deliverable_ns").is_not_null())
        .sort("conn", "dsn")
        .join_asof(first_send.sort("conn", "piece_start"), left_on="dsn", right_on="piece_start",
                   by="conn", strategy="backward", check_sortedness=False)
        .filter(pl.col("piece_end") > pl.col("dsn"))
        .sort("conn", "dsn")
        .select("conn", "dsn", "new_bytes", "t_send_ns", "t_deliverable_ns",
                (pl.col("t_deliverable_ns") - pl.col("t_send_ns")).alias("app_delay_ns"), "subflow", "path")
    )
    return out.cast(_APP_SCHEMA)  # type: ignore[arg-type]


def app_delay_summary(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Application delay per connection: app_delay_{n,min,mean,p50,p95,p99,max}(_ms). DRePaS reports
    the mean and the max. Empty when `app_delay` is."""
    return app_delay_stats(app_delay(events, conn))


def app_delay_stats(delays: pl.DataFrame) -> pl.DataFrame:
    """`app_delay_summary` of an `app_delay` table (e.g. from `app_delay_from_segments` with segments
    derived once for several metrics)."""
    return (
        delays
        .group_by("conn")
        .agg(*quantile_aggs("app_delay_ns", "app_delay_", "_ms", 1e6))
        .sort("conn")
    )


def path_stats(events: pl.DataFrame, conn: int | None = None, *, point: str | None = None) -> pl.DataFrame:
    """Per-path accounting of the data direction, per connection.

    Rows counted: data-direction segments with payload, at one observation point: ``point`` if given,
    else per connection "snd" when the sender side was observed (what the scheduler put on each path),
    else "rcv" (a receiver-only capture).

    Columns: conn, path, n_subflows, point, segments, bytes (payload incl. retransmissions and
    reinjections), unique_bytes (payload of segments that are neither ``is_retrans`` nor
    ``is_reinject``), retrans (count of ``is_retrans`` segments), reinjections (count of
    ``is_reinject``), retrans_bytes, reinject_bytes, t_first_ns, t_last_ns, throughput_bps (bytes * 8
    over the path's active period t_first..t_last; null if that is 0), share (bytes / connection
    bytes), unique_share (unique_bytes / connection unique_bytes).
    """
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "payload_bytes",
                           "is_retrans", "is_reinject"])
    ev = with_data_dir(select_conn(events, conn)).filter(
        pl.col("is_data_dir") & (pl.col("payload_bytes") > 0) & (pl.col("point") != "drop")
    )
    if point is None:
        chosen = ev.group_by("conn").agg(
            pl.when((pl.col("point") == "snd").any()).then(pl.lit("snd")).otherwise(pl.lit("rcv"))
            .alias("_pt")
        )
    else:
        chosen = ev.select("conn").unique().with_columns(pl.lit(point).alias("_pt"))
    ev = ev.join(chosen, on="conn").filter(pl.col("point").cast(pl.String) == pl.col("_pt"))
    b = pl.col("payload_bytes").cast(pl.Int64)
    retr = pl.col("is_retrans").fill_null(False)
    reinj = pl.col("is_reinject").fill_null(False)
    per = ev.group_by("conn", "path").agg(
        pl.col("subflow").n_unique().cast(pl.Int64).alias("n_subflows"),
        pl.col("_pt").first().alias("point"),
        pl.len().cast(pl.Int64).alias("segments"),
        b.sum().alias("bytes"),
        b.filter(~retr & ~reinj).sum().alias("unique_bytes"),
        retr.sum().cast(pl.Int64).alias("retrans"),
        reinj.sum().cast(pl.Int64).alias("reinjections"),
        b.filter(retr).sum().alias("retrans_bytes"),
        b.filter(reinj).sum().alias("reinject_bytes"),
        pl.col("t_ns").min().alias("t_first_ns"),
        pl.col("t_ns").max().alias("t_last_ns"),
    )
    dur_s = (pl.col("t_last_ns") - pl.col("t_first_ns")).cast(pl.Float64) / 1e9
    return (
        per.with_columns(
            pl.when(dur_s > 0).then(pl.col("bytes") * 8 / dur_s).alias("throughput_bps"),
            (pl.col("bytes") / pl.col("bytes").sum().over("conn")).alias("share"),
            (pl.col("unique_bytes") / pl.col("unique_bytes").sum().over("conn")).alias("unique_share"),
        )
        .sort("conn", "path")
    )
