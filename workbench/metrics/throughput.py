"""Goodput, completion time, application delay and per-path byte accounting.

* Goodput (DESIGN "Metrics"): in-order bytes delivered to the application per second. A byte counts
  when it becomes deliverable in order at the receiver (``t_deliverable_ns`` of `ooo_segments`), so
  head-of-line blocking lowers goodput exactly as the application sees it, and duplicates never count.
* Completion time of a finite transfer, and the application delay (DRePaS §VI.B, seed 003: "the time
  difference between the application sending data and the peer application reading it").
* Per-path bytes, throughput and share, retransmissions and MPTCP reinjections.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from workbench.metrics._common import (
    check_columns,
    conn_groups,
    cover_one,
    dense_key,
    int_array,
    labels,
    mask_eq,
    mask_ne,
    masked_series,
    nullable_int,
    over_scalar,
    payload,
    polars_sort_order,
    quantile_aggs,
    select_conn,
    start_times,
    string_rank,
    take,
    true_mask,
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
    """`goodput_series` from precomputed segments and start times (`start_times`: one row per
    connection; a connection without one, or with a null one, gets a single row with a null t_ns).

    In numpy: each delivered segment's bin, the bytes summed per (connection, bin), every bin from 0 to
    the connection's last. The polars formulation it replaced (a join, two group-bys, an
    explode, a second join and a sort: a report called it for every source) is the oracle in
    tests/test_metrics_fast_series.py.
    """
    if bin_ns <= 0:
        raise ValueError("bin_ns must be positive")
    check_columns(seg, ["conn", "t_deliverable_ns", "new_bytes"], "segments")
    check_columns(start, ["conn", "start_ns"], "start times")
    delivered, t_del_ns = nullable_int(seg["t_deliverable_ns"])
    rows = np.flatnonzero(delivered)
    t_del_ns = t_del_ns[rows]
    new_bytes = nullable_int(seg["new_bytes"])[1][rows]  # a null adds nothing, as in polars' sum
    groups = conn_groups(seg["conn"][rows])
    conns, inv = groups.keys, groups.inv
    # Each connection's origin (the left join on `start`): null when it has none.
    has_origin, origin_all_ns = nullable_int(start["start_ns"])
    origin_of = {int(c): (bool(ok), int(o)) for c, ok, o
                 in zip(start["conn"].to_numpy(), has_origin, origin_all_ns, strict=True)}
    found = [origin_of.get(int(c), (False, 0)) for c in conns]
    conn_has_origin = np.array([ok for ok, _ in found], bool)
    conn_origin_ns = np.array([o for _, o in found], np.int64)
    # Bin of each delivered segment (before its connection's origin: bin 0).
    bin_index = np.maximum(t_del_ns - conn_origin_ns[inv], 0) // bin_ns
    ok = conn_has_origin[inv]
    last = np.full(len(conns), -1, np.int64)
    np.maximum.at(last, inv[ok], bin_index[ok])
    # Rows per connection: bins 0..last, or the one row of a connection without an origin (its bins
    # are null: one null bin, which polars' join on it matched with nothing, so 0 bytes).
    n_rows = np.where(conn_has_origin, last + 1, 1)
    first_row = np.cumsum(n_rows) - n_rows
    out_conn = np.repeat(np.arange(len(conns)), n_rows)
    out_bin = np.arange(len(out_conn)) - first_row[out_conn]
    out_bytes = np.zeros(len(out_conn), np.int64)
    np.add.at(out_bytes, first_row[inv[ok]] + bin_index[ok], new_bytes[ok])
    t_ns = conn_origin_ns[out_conn] + out_bin * bin_ns
    # rate = bytes * 8e9 / bin_ns: polars divides a column by a number as a multiplication by the
    # reciprocal (`over_scalar`).
    rate_bps = over_scalar(out_bytes.astype(np.float64) * 8e9, bin_ns)
    return pl.DataFrame([
        pl.Series("conn", conns[out_conn], seg["conn"].dtype).set_sorted(),  # sorted by it: flagged, as polars does
        masked_series("t_ns", t_ns, ~conn_has_origin[out_conn], pl.Int64()),
        pl.Series("bytes", out_bytes, pl.Int64),
        pl.Series("rate_bps", rate_bps, pl.Float64),
    ])


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
    """`goodput` from precomputed segments (`ooo_segments`) and start times (`start_times`) of ``ev``."""
    tagged = with_data_dir(ev)
    fin_conns = tagged["conn"].to_numpy()[true_mask(tagged["is_data_dir"]) & true_mask(tagged["data_fin"])]
    groups = conn_groups(seg["conn"])
    k = len(groups.keys)
    ok, t_del = nullable_int(seg["t_deliverable_ns"])
    new = int_array(seg["new_bytes"])
    end = np.full(k, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(end, groups.inv[ok], t_del[ok])
    has_end = np.zeros(k, bool)
    has_end[groups.inv[ok]] = True
    delivered = np.zeros(k, np.int64)
    np.add.at(delivered, groups.inv[ok], new[ok])
    undelivered = np.zeros(k, np.int64)
    np.add.at(undelivered, groups.inv[~ok], new[~ok])
    # The connection's time origin, where `start` has one.
    origin = dict(zip(start["conn"].to_list(), start["start_ns"].to_list(), strict=True))
    start_of = [origin.get(int(c)) for c in groups.keys]
    has_start = np.array([v is not None for v in start_of], bool)
    start_ns = np.array([0 if v is None else v for v in start_of], np.int64)
    has_dur = has_end & has_start
    dur_s = over_scalar(np.where(has_dur, end - start_ns, 0).astype(np.float64), 1e9)
    with np.errstate(divide="ignore", invalid="ignore"):
        gp = (delivered * 8).astype(np.float64) / dur_s
    return pl.DataFrame([
        groups.key_series("conn"),
        masked_series("start_ns", start_ns, ~has_start, start["start_ns"].dtype),
        masked_series("end_ns", end, ~has_end, seg["t_deliverable_ns"].dtype),
        pl.Series("bytes", delivered, pl.Int64),
        masked_series("goodput_bps", gp, ~(has_dur & (dur_s > 0)), pl.Float64(), when=True),
        masked_series("completion_s", dur_s, ~(has_dur & (undelivered == 0)), pl.Float64(), when=True),
        pl.Series("undelivered_bytes", undelivered, pl.Int64),
        pl.Series("data_fin", np.isin(groups.keys, fin_conns), pl.Boolean),
    ])


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
    """`app_delay` of segments (`ooo_segments` rows; those without a deliverable time are left out)
    against the data-direction sends of ``ev``."""
    check_columns(ev, ["t_ns", "conn", "dir", "point", "payload_bytes", "dsn"])
    ev = with_data_dir(ev)
    dsn_ok, dsn_all = nullable_int(ev["dsn"])
    pay = payload(ev)
    snd = np.flatnonzero(true_mask(ev["is_data_dir"]) & mask_eq(ev["point"], "snd") & dsn_ok & (pay > 0))
    if not len(snd) or seg.height == 0:
        return pl.DataFrame(schema=_APP_SCHEMA)
    snd_groups = conn_groups(ev["conn"][snd])
    t_snd = int_array(ev["t_ns"])[snd]
    s_snd = dsn_all[snd]
    e_snd = s_snd + pay[snd]
    # The segments that became deliverable, in (conn, dsn) order as polars' sort gives it.
    seg_conn_dt, dsn_dt = seg["conn"].dtype, seg["dsn"].dtype
    ok, t_del = nullable_int(seg["t_deliverable_ns"])
    seg_conn, dsn = seg["conn"].to_numpy(), int_array(seg["dsn"])

    def by_conn_dsn(rows: np.ndarray) -> np.ndarray:
        return rows[polars_sort_order({"conn": (seg_conn[rows], seg_conn_dt), "dsn": (dsn[rows], dsn_dt)})]

    rows = by_conn_dsn(np.flatnonzero(ok))
    # The sender piece containing the segment's first byte: last piece starting at or below dsn,
    # provided it also ends above dsn (otherwise the byte was never seen sent).
    t_send = np.zeros(len(rows), np.int64)
    sent = np.zeros(len(rows), bool)
    for g, c in enumerate(snd_groups.keys):
        at = snd_groups.rows(g)
        _, _, _, owner, start, end = cover_one(s_snd[at], e_snd[at], t_snd[at], snd[at])
        mine = np.flatnonzero(seg_conn[rows] == c)
        i = np.searchsorted(start, dsn[rows[mine]], "right") - 1
        hit = (i >= 0) & (end[np.maximum(i, 0)] > dsn[rows[mine]])
        sent[mine] = hit
        t_send[mine[hit]] = t_snd[at][owner[i[hit]]]
    keep = np.flatnonzero(sent)
    back = by_conn_dsn(rows[keep])  # sorted again, as the polars formulation did after its as-of join
    pos = np.empty(len(seg_conn), np.int64)
    pos[rows[keep]] = keep
    t_send = t_send[pos[back]]
    passed = take(seg, ["dsn", "new_bytes", "subflow", "path"], back)
    return pl.DataFrame([
        seg["conn"][back].cast(pl.UInt32).set_sorted(),  # sorted by it: flagged, as polars does
        passed["dsn"].cast(pl.Int64),
        passed["new_bytes"].cast(pl.Int64),
        pl.Series("t_send_ns", t_send, pl.Int64),
        pl.Series("t_deliverable_ns", t_del[back], pl.Int64),
        pl.Series("app_delay_ns", t_del[back] - t_send, pl.Int64),
        passed["subflow"].cast(pl.UInt32),
        passed["path"].cast(pl.String),
    ])


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
    ev = with_data_dir(select_conn(events, conn))
    pay = payload(ev)
    rows = np.flatnonzero(true_mask(ev["is_data_dir"]) & (pay > 0) & mask_ne(ev["point"], "drop"))
    conn_all = ev["conn"].to_numpy()
    if point is None:
        # Per connection "snd" when the sender side was observed, else "rcv".
        is_snd = mask_eq(ev["point"], "snd")[rows]
        pt_snd = np.isin(conn_all[rows], conn_all[rows][is_snd])
        keep = np.where(pt_snd, is_snd, mask_eq(ev["point"], "rcv")[rows])
        rows, pt_snd = rows[keep], pt_snd[keep]
        point_names = ["rcv", "snd"]
    else:
        rows = rows[mask_eq(ev["point"], point)[rows]]
        pt_snd = np.zeros(len(rows), bool)
        point_names = [point]
    # Groups (conn, path), numbered in that sort order.
    paths = ev["path"][rows]
    c = conn_all[rows].astype(np.int64)
    key = dense_key(c, string_rank(paths))
    n = int(key.max()) + 1 if len(key) else 0
    first = np.zeros(n, np.int64)  # a row of each group
    first[key[::-1]] = np.arange(len(rows))[::-1]
    retr = true_mask(ev["is_retrans"])[rows]
    reinj = true_mask(ev["is_reinject"])[rows]
    b, t = pay[rows], int_array(ev["t_ns"])[rows]

    def total(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(n, np.int64)
        np.add.at(out, key[mask], b[mask])
        return out

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(key[mask], minlength=n).astype(np.int64)

    every = np.ones(len(rows), bool)
    bytes_, unique = total(every), total(~retr & ~reinj)
    t_first = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(t_first, key, t)
    t_last = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(t_last, key, t)
    pairs = dense_key(key, int_array(ev["subflow"])[rows])
    first_of_pair = np.zeros(int(pairs.max()) + 1 if len(pairs) else 0, np.int64)
    first_of_pair[pairs[::-1]] = np.arange(len(pairs))[::-1]
    n_subflows = np.bincount(key[first_of_pair], minlength=n).astype(np.int64)
    of_conn = dense_key(c[first])  # each group's connection

    dur_s = over_scalar((t_last - t_first).astype(np.float64), 1e9)
    with np.errstate(divide="ignore", invalid="ignore"):
        # int / int in polars: both as Float64, then divided, as here.
        throughput = (bytes_ * 8).astype(np.float64) / dur_s
        share = bytes_.astype(np.float64) / _per_conn_sum(of_conn, bytes_).astype(np.float64)
        unique_share = unique.astype(np.float64) / _per_conn_sum(of_conn, unique).astype(np.float64)
    return pl.DataFrame([
        pl.Series("conn", c[first], ev["conn"].dtype).set_sorted(),  # sorted by it: flagged, as polars does
        paths[first].cast(pl.String),
        pl.Series("n_subflows", n_subflows, pl.Int64),
        # (polars flags it sorted when constant: a literal, or one connection's choice broadcast)
        labels("point", point_names, pt_snd[first].astype(np.int64),
               literal=point is not None or len(np.unique(c)) <= 1),
        pl.Series("segments", count(every), pl.Int64),
        pl.Series("bytes", bytes_, pl.Int64),
        pl.Series("unique_bytes", unique, pl.Int64),
        pl.Series("retrans", count(retr), pl.Int64),
        pl.Series("reinjections", count(reinj), pl.Int64),
        pl.Series("retrans_bytes", total(retr), pl.Int64),
        pl.Series("reinject_bytes", total(reinj), pl.Int64),
        pl.Series("t_first_ns", t_first, ev["t_ns"].dtype),
        pl.Series("t_last_ns", t_last, ev["t_ns"].dtype),
        masked_series("throughput_bps", throughput, ~(dur_s > 0), pl.Float64(), when=True),
        pl.Series("share", share, pl.Float64),
        pl.Series("unique_share", unique_share, pl.Float64),
    ])


def _per_conn_sum(of_conn: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per element, the sum of ``v`` over the elements of its connection."""
    out = np.zeros(int(of_conn.max()) + 1 if len(of_conn) else 0, np.int64)
    np.add.at(out, of_conn, v)
    return out[of_conn]
