"""MPTCP-level out-of-order (head-of-line) delay of every data segment, and the receive OOO queue.

Models STMS §5.1.1 (seed 000): "The OOO delay of a packet is defined as the time difference between
when a packet arrives at the receiver to when the packet can be submitted to the application (i.e.,
all packets with the smaller data sequence numbers have already arrived)." And OTIAS §V.A / Fig. 5
(seed 001): the size of the MPTCP-level out-of-order queue over time.

Inputs are the receiver-side rows of the data direction (``point == "rcv"``, ``dsn`` not null,
``payload_bytes > 0``): a capture at the receiver, a capture pair, or a replay. A capture taken only at
the sender has no such rows and yields empty tables.

Definitions (byte ranges, not segment numbers, because a reinjection or a retransmission can carry a
DSN range that overlaps several original segments or part of one):

* A row covers DSN bytes [dsn, dsn + payload_bytes). Rows are taken in arrival order (``t_ns``, ties
  in table order). A row's *new bytes* are the bytes no earlier row covered. A row with no new bytes is
  a *duplicate* (retransmission / reinjection that arrived after the original): it is counted but not
  part of the per-segment table.
* A(x) = arrival time of the first row covering byte x. The *in-order time* of DSN d is
  T(d) = max_{origin <= x < d} A(x): the moment every byte below d has arrived. ``origin`` is the
  lowest DSN observed (0 unless the capture missed the start).
* A segment (row with new bytes) is deliverable at t_deliverable = max(t_arrival, T(dsn)), and its
  OOO delay is t_deliverable − t_arrival >= 0.
* Bytes never observed (a *hole*, e.g. a packet the capture dropped) would block everything above
  them forever. When the receiver's own DATA_ACKs are in the table (opposite direction, ``point ==
  "snd"``), a hole is taken as filled at the first DATA_ACK at or above its end (the receiver says it
  had those bytes by then; we assume ``data_ack`` counts bytes like ``dsn``, i.e. is the next expected
  relative DSN). Otherwise segments above the hole get a null ``t_deliverable``.

Implementation: DSN space is cut into elementary pieces at every range boundary (`first_cover`), so the
first arrival per piece and the prefix maximum T over pieces are a sort and a running maximum, in
numpy connection by connection (the polars formulation they replaced, a dozen joins and window
operations whose fixed cost dominated a report of many small sources, is the oracle in
tests/test_metrics_fast_ooo.py).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from workbench.metrics._common import (
    INF_NS,
    check_columns,
    conn_groups,
    cover_one,
    false_mask,
    first_reach,
    int_array,
    mask_eq,
    masked_series,
    nullable_int,
    over_scalar,
    payload,
    quantile_aggs,
    select_conn,
    take,
    true_mask,
    with_data_dir,
)

__all__ = [
    "ooo_cdf",
    "ooo_queue_series",
    "ooo_segments",
    "ooo_summary",
]

_SEGMENT_SCHEMA: dict[str, pl.DataType] = {
    "conn": pl.UInt32(),
    "t_arrival_ns": pl.Int64(),
    "t_deliverable_ns": pl.Int64(),
    "ooo_delay_ns": pl.Int64(),
    "dsn": pl.Int64(),
    "payload_bytes": pl.Int64(),
    "new_bytes": pl.Int64(),
    "subflow": pl.UInt32(),
    "path": pl.String(),
    "is_duplicate": pl.Boolean(),
}


def _segments_all(events: pl.DataFrame) -> pl.DataFrame:
    """Every receiver-side data row with its new bytes and deliverable time (duplicates included)."""
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "payload_bytes", "dsn",
                           "data_ack", "flags"])
    ev = with_data_dir(events)
    is_dd = true_mask(ev["is_data_dir"])
    dsn_ok, dsn = nullable_int(ev["dsn"])
    pay = payload(ev)
    # The receiver-side data rows, in table order (row_id: position in the table).
    rid = np.flatnonzero(is_dd & mask_eq(ev["point"], "rcv") & dsn_ok & (pay > 0))
    if not len(rid):
        return pl.DataFrame(schema=_SEGMENT_SCHEMA)
    t_all = int_array(ev["t_ns"])
    groups = conn_groups(ev["conn"][rid])
    t, s = t_all[rid], dsn[rid]
    e = s + pay[rid]
    # The receiver's own DATA_ACKs (opposite direction, sent by it).
    ack_ok, ack_all = nullable_int(ev["data_ack"])
    ack_rows = np.flatnonzero(false_mask(ev["is_data_dir"]) & mask_eq(ev["point"], "snd") & ack_ok)
    ack_conn = ev["conn"].to_numpy()[ack_rows]
    new_bytes = np.zeros(len(rid), np.int64)
    t_inorder = np.zeros(len(rid), np.int64)
    for g, c in enumerate(groups.keys):
        at = groups.rows(g)
        i0, owned, piece, owner, start, end = cover_one(s[at], e[at], t[at], rid[at])
        a_ns = t[at][owner]
        # Holes between covered pieces: filled when a DATA_ACK reaches the hole's end, else never.
        hole = np.zeros(len(piece), bool)
        hole[1:] = start[1:] > end[:-1]
        mine = ack_conn == c
        hole_ns = np.full(len(piece), -INF_NS, np.int64)
        hole_ns[hole] = first_reach(ack_all[ack_rows[mine]], t_all[ack_rows[mine]], start[hole])
        # barrier(j): latest time among the bytes just below piece j (previous piece, hole before it);
        # T(piece_start j) is the running maximum of the barriers over DSN order.
        prev_a = np.concatenate([[-INF_NS], a_ns[:-1]])
        inorder = np.maximum.accumulate(np.maximum(prev_a, hole_ns))
        new_bytes[at] = owned
        t_inorder[at] = inorder[np.searchsorted(piece, i0)]
    order = np.lexsort((rid, t, groups.inv))  # by (conn, t_ns, row_id)
    t, s, e, new_bytes = t[order], s[order], e[order], new_bytes[order]
    t_del = np.maximum(t, t_inorder[order])
    # Duplicates bring nothing to deliver: no deliverable time, no OOO delay.
    never = (t_del >= INF_NS) | (new_bytes == 0)
    sel = rid[order]
    passed = take(ev, ["subflow", "path"], sel)
    return pl.DataFrame([
        # Flagged sorted as polars' sort flags its first key (group-bys on it then run on slices:
        # their float sums, and so the OOO mean, depend on it).
        pl.Series("conn", groups.keys[groups.inv[order]], ev["conn"].dtype).cast(pl.UInt32).set_sorted(),
        pl.Series("t_arrival_ns", t, pl.Int64),
        masked_series("t_deliverable_ns", t_del, never, pl.Int64()),
        masked_series("ooo_delay_ns", t_del - t, never, pl.Int64()),
        pl.Series("dsn", s, pl.Int64),
        pl.Series("payload_bytes", e - s, pl.Int64),
        pl.Series("new_bytes", new_bytes, pl.Int64),
        passed["subflow"].cast(pl.UInt32),
        passed["path"].cast(pl.String),
        pl.Series("is_duplicate", new_bytes == 0, pl.Boolean),
    ])


def ooo_segments(events: pl.DataFrame, conn: int | None = None, *,
                 include_duplicates: bool = False) -> pl.DataFrame:
    """Per-segment MPTCP-level OOO delay at the receiver (STMS §5.1.1), in arrival order.

    Columns: conn, t_arrival_ns, t_deliverable_ns (null = never deliverable within the trace),
    ooo_delay_ns, dsn, payload_bytes, new_bytes (bytes first brought by this segment), subflow, path,
    is_duplicate. Duplicates (no new bytes) are left out unless ``include_duplicates``.
    See the module docstring for the exact definitions.
    """
    seg = _segments_all(select_conn(events, conn))
    return seg if include_duplicates else seg.filter(~pl.col("is_duplicate"))


def summarize_segments(seg_all: pl.DataFrame) -> pl.DataFrame:
    """OOO summary per connection from `ooo_segments(..., include_duplicates=True)`."""
    dup = true_mask(seg_all["is_duplicate"])
    first = false_mask(seg_all["is_duplicate"])
    deliverable = seg_all["t_deliverable_ns"].is_not_null().to_numpy()
    groups = conn_groups(seg_all["conn"])
    k = len(groups.keys)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(groups.inv[mask], minlength=k).astype(np.int64)

    def total(col: str, mask: np.ndarray) -> np.ndarray:
        out = np.zeros(k, np.int64)
        ok, v = nullable_int(seg_all[col])
        np.add.at(out, groups.inv[mask & ok], v[mask & ok])
        return out

    counts = pl.DataFrame([
        groups.key_series("conn"),
        pl.Series("n_segments", count(first), pl.Int64),
        pl.Series("n_duplicates", count(dup), pl.Int64),
        pl.Series("duplicate_bytes", total("payload_bytes", dup), pl.Int64),
        pl.Series("unique_bytes", total("new_bytes", np.ones(len(dup), bool)), pl.Int64),
        pl.Series("n_undeliverable", count(first & ~deliverable), pl.Int64),
    ])
    # The float statistics stay polars aggregations over the same rows, in the same order.
    delivered = seg_all.filter(pl.Series(first & deliverable))
    stats = delivered.group_by("conn").agg(
        *quantile_aggs("ooo_delay_ns", "ooo_delay_", "_ms", 1e6, with_count=False),
        (pl.col("ooo_delay_ns") > 0).mean().alias("ooo_fraction"),
    )
    if stats.height == k and (np.sort(stats["conn"].to_numpy()) == groups.keys).all():
        if k > 1:
            stats = stats.sort("conn")
        return pl.concat([counts, stats.drop("conn")], how="horizontal")
    return counts.join(stats, on="conn", how="left").sort("conn")


def ooo_summary(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """OOO delay summary per connection: n_segments, n_duplicates, duplicate_bytes, unique_bytes,
    n_undeliverable, ooo_delay_{min,mean,p50,p95,p99,max}_ms over deliverable segments, and
    ooo_fraction (share of segments with a positive OOO delay). Percentiles interpolate linearly."""
    return summarize_segments(ooo_segments(events, conn, include_duplicates=True))


def ooo_cdf(events: pl.DataFrame, conn: int | None = None, *, max_points: int | None = 2000) -> pl.DataFrame:
    """Empirical CDF of the per-segment OOO delay, for plotting: columns conn, delay_ms, cdf (fraction
    of deliverable segments with delay <= delay_ms). With ``max_points``, each connection's CDF is
    thinned to about that many evenly spaced ranks (first and last kept)."""
    return cdf_from_segments(ooo_segments(events, conn), max_points=max_points)


def cdf_from_segments(seg: pl.DataFrame, *, max_points: int | None = 2000) -> pl.DataFrame:
    """`ooo_cdf` from precomputed segments (duplicates are left out).

    In numpy: the delays sorted per connection, each one's rank. The polars formulation it replaced (a
    sort and window expressions, called for every source of a report) is the oracle in
    tests/test_metrics_fast_series.py."""
    check_columns(seg, ["conn", "t_deliverable_ns", "ooo_delay_ns", "is_duplicate"], "segments")
    rows = np.flatnonzero(false_mask(seg["is_duplicate"]) & nullable_int(seg["t_deliverable_ns"])[0])
    conn = seg["conn"].to_numpy()[rows]
    has_delay, delay_ns = (a[rows] for a in nullable_int(seg["ooo_delay_ns"]))
    # By (conn, delay), a null delay first as polars sorts it. Rows tied on both give the same output
    # row whichever comes first, so any sort does, and only the sorted values are needed.
    if len(conn) and (conn == conn[0]).all() and has_delay.all():  # one connection (what a report has)
        delay_ns = np.sort(delay_ns)
    else:
        order = np.lexsort((delay_ns, has_delay, conn))
        conn, has_delay, delay_ns = conn[order], has_delay[order], delay_ns[order]
    conn_start = np.ones(len(conn), bool)
    conn_start[1:] = conn[1:] != conn[:-1]
    first = np.flatnonzero(conn_start)
    n = np.diff(np.append(first, len(conn)))  # rows of each connection
    which = np.cumsum(conn_start) - 1
    rank = np.arange(len(conn)) - first[which]
    n_row = n[which]
    # ms = ns / 1e6 as polars divides a column by a number (`over_scalar`); cdf = (rank + 1) / n is a
    # division of two columns, a true one.
    delay_ms = over_scalar(delay_ns.astype(np.float64), 1e6)
    cdf = (rank + 1).astype(np.float64) / n_row.astype(np.float64)
    if max_points is not None and max_points > 1:
        step = np.maximum((n_row + max_points - 1) // max_points, 1)
        keep = np.flatnonzero((rank % step == 0) | (rank == n_row - 1))
        conn, has_delay, delay_ms, cdf = conn[keep], has_delay[keep], delay_ms[keep], cdf[keep]
    return pl.DataFrame([
        pl.Series("conn", conn, seg["conn"].dtype).set_sorted(),  # sorted by it: flagged, as polars does
        masked_series("delay_ms", delay_ms, ~has_delay, pl.Float64()),
        pl.Series("cdf", cdf, pl.Float64),
    ])


def queue_from_segments(seg: pl.DataFrame) -> pl.DataFrame:
    """Receive OOO queue step series from (non-duplicate) segments; see `ooo_queue_series`."""
    first = np.flatnonzero(false_mask(seg["is_duplicate"]))
    ok, t_del = nullable_int(seg["t_deliverable_ns"])
    gone = first[ok[first]]
    new_ok, new = nullable_int(seg["new_bytes"])
    conn = seg["conn"].to_numpy()
    # Each segment adds its new bytes at arrival and removes them when deliverable.
    c = np.concatenate([conn[first], conn[gone]])
    t = np.concatenate([int_array(seg["t_arrival_ns"])[first], t_del[gone]])
    delta = np.concatenate([new[first], -new[gone]])
    counted = np.concatenate([new_ok[first], new_ok[gone]])
    order = np.lexsort((t, c))
    c, t, delta, counted = c[order], t[order], delta[order], counted[order]
    step = np.ones(len(c), bool)
    step[1:] = (c[1:] != c[:-1]) | (t[1:] != t[:-1])
    at = np.flatnonzero(step)
    delta = np.add.reduceat(np.where(counted, delta, 0), at) if len(at) else delta[:0]
    c, t = c[at], t[at]
    level = np.cumsum(delta)
    conn_start = np.ones(len(c), bool)
    conn_start[1:] = c[1:] != c[:-1]
    base = np.maximum.accumulate(np.where(conn_start, np.arange(len(c)), 0)) if len(c) else np.zeros(0, np.int64)
    level = level - (level[base] - delta[base])  # running sum restarted per connection
    # Drop steps that do not change the level (segments delivered on arrival), keeping the first.
    keep = (delta != 0) | conn_start
    return pl.DataFrame([
        pl.Series("conn", c[keep], seg["conn"].dtype).set_sorted(),
        pl.Series("t_ns", t[keep], seg["t_arrival_ns"].dtype),
        pl.Series("ooo_bytes", level[keep], pl.Int64),
    ])


def ooo_queue_series(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """MPTCP-level receive out-of-order queue over time (OTIAS Fig. 5): bytes that have arrived but are
    not yet deliverable in order. A step series (columns conn, t_ns, ooo_bytes): the value holds from
    ``t_ns`` until the next row. Each segment adds its new bytes at its arrival and removes them at its
    deliverable time; bytes stuck behind a never-filled hole stay in the queue."""
    return queue_from_segments(ooo_segments(events, conn))
