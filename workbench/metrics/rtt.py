"""Round-trip-time samples per subflow, and one-way-delay summaries per path.

Two RTT estimators, both from a single host's observations (so they work on one capture, a capture
pair or a replay without any clock alignment):

* `rtt_timestamps` (RFC 7323 timestamps): at one host, a packet it sends with TSval = v at t, and the
  first packet it receives after t on the same subflow whose TSecr == v. Only the earliest packet
  carrying a given TSval is used (TSval ticks in ms, so several packets share one; later ones would
  bias samples low).
* `rtt_seq_ack` (classic seq/ack with Karn's rule, RFC 6298 §3): at the data sender, a segment's RTT is
  the first cumulative ACK covering seq + len minus its send time; segments whose bytes were ever
  retransmitted on that subflow are excluded because their ACK is ambiguous.

Relative sequence numbers are taken as they are (no unwrapping past 4 GiB per subflow).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from workbench.metrics._common import (
    ACK,
    INF_NS,
    SYN,
    check_columns,
    dense_key,
    false_mask,
    first_reach,
    int_array,
    labels,
    mask_eq,
    ms,
    nullable_int,
    payload,
    polars_sort_order,
    run_lengths,
    select_conn,
    sorted_unique,
    take,
    true_mask,
    with_data_dir,
)

__all__ = [
    "best_rtt_samples",
    "owd_summary",
    "rtt_handshake",
    "rtt_samples",
    "rtt_seq_ack",
    "rtt_summary",
    "rtt_timestamps",
]

_RTT_SCHEMA: dict[str, pl.DataType] = {
    "conn": pl.UInt32(), "subflow": pl.UInt32(), "path": pl.String(), "vantage": pl.String(),
    "method": pl.String(), "t_ns": pl.Int64(), "rtt_ns": pl.Int64(),
}

# At the client host the client's own segments (c2s) are "snd" rows and the server's (s2c) are "rcv"
# rows; at the server host the reverse. `vantage` names the host where both observations were made.
_VANTAGE = (
    pl.when((pl.col("dir") == "c2s") == (pl.col("point") == "snd"))
    .then(pl.lit("client"))
    .otherwise(pl.lit("server"))
)


def rtt_timestamps(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """RTT samples from TCP timestamps echoes, per subflow and vantage host.

    A sample: packet P sent by host H (``point == "snd"``) with ts_val = v, observed at t_P (the first
    such packet for v on that subflow), and the first packet Q received by H (``point == "rcv"``,
    opposite direction, same subflow) observed after t_P with ts_ecr == v; rtt = t_Q − t_P, stamped at
    t_Q. It covers H → peer → H over the subflow's path, *including the peer's response delay* (delayed
    ACK; for a pure ACK from H, the time until the peer next sends). At the client vantage this is the
    RTT the client sees, at the server the one the server sees; a capture pair yields both.
    Columns: conn, subflow, path, vantage ("client"/"server"), method ("ts"), t_ns, rtt_ns.
    """
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "ts_val", "ts_ecr"])
    ev = select_conn(events, conn).filter(pl.col("point") != "drop").with_columns(_VANTAGE.alias("vantage"))
    sent = (
        ev.filter((pl.col("point") == "snd") & pl.col("ts_val").is_not_null())
        .group_by("conn", "subflow", "vantage", "ts_val")
        .agg(pl.col("t_ns").min().alias("t_p"), pl.col("path").first())
    )
    echoed = ev.filter(
        (pl.col("point") == "rcv") & pl.col("ts_ecr").is_not_null() & (pl.col("ts_ecr") != 0)
    ).select("conn", "subflow", "vantage", pl.col("ts_ecr").alias("ts_val"), pl.col("t_ns").alias("t_q"))
    out = (
        sent.join(echoed, on=["conn", "subflow", "vantage", "ts_val"], how="inner")
        .filter(pl.col("t_q") > pl.col("t_p"))
        .group_by("conn", "subflow", "vantage", "ts_val")
        .agg(pl.col("path").first(), pl.col("t_p").first(), pl.col("t_q").min())
        .select("conn", "subflow", "path", "vantage", pl.lit("ts").alias("method"),
                pl.col("t_q").alias("t_ns"), (pl.col("t_q") - pl.col("t_p")).alias("rtt_ns"))
        .sort("conn", "subflow", "vantage", "t_ns")
    )
    return out.cast(_RTT_SCHEMA)  # type: ignore[arg-type]


def rtt_seq_ack(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """RTT samples from sequence/ACK numbers at the data sender, with Karn's rule.

    Uses the sender's vantage: data-direction segments it sends (``point == "snd"``, payload > 0) and
    ACKs it receives (opposite direction, ``point == "rcv"``, ACK flag). For each segment
    [seq, seq + len) on a subflow that is not a retransmission and whose bytes were never
    retransmitted on that subflow (no ``is_retrans`` segment overlaps it), rtt = time of the first ACK
    with ack >= seq + len observed after the send − send time. It covers sender → receiver → sender,
    including the receiver's delayed-ACK time. Needs the sender side (capture at the sender, pair,
    replay); empty otherwise.
    Columns: conn, subflow, path, vantage ("client" or "server", the sender), method ("seq"), t_ns
    (the ACK), rtt_ns.
    """
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "seq", "ack", "flags",
                           "payload_bytes", "is_retrans"])
    ev = with_data_dir(select_conn(events, conn))
    pay = payload(ev)
    data = np.flatnonzero(true_mask(ev["is_data_dir"]) & mask_eq(ev["point"], "snd") & (pay > 0))
    if not len(data):
        return pl.DataFrame(schema=_RTT_SCHEMA)
    conn_dt, sf_dt = ev["conn"].dtype, ev["subflow"].dtype
    conn_all, sf_all = int_array(ev["conn"]), int_array(ev["subflow"])
    t_all, s_all = int_array(ev["t_ns"]), int_array(ev["seq"])
    e_all = s_all + pay
    sub = dense_key(conn_all, sf_all)  # the subflow: one key for (conn, subflow)

    def ordered(rows: np.ndarray, key: np.ndarray, name: str) -> np.ndarray:
        """``rows`` in the order polars' sort by (conn, subflow, ``name`` = ``key``) gives them."""
        return rows[polars_sort_order({"conn": (conn_all[rows], conn_dt), "subflow": (sf_all[rows], sf_dt),
                                       name: (key, pl.Int64())})]

    retr = true_mask(ev["is_retrans"])[data]
    clean = data[~retr]
    if retr.any():
        # Union of retransmitted ranges per subflow as disjoint intervals (sorted by start, a new one
        # begins where the start exceeds every earlier end), so a segment overlaps a retransmission iff
        # the last interval starting at or below its last byte ends above its start.
        rr = data[retr]
        rr = rr[np.lexsort((s_all[rr], sub[rr]))]
        rk, rs, re_ = sub[rr], s_all[rr], e_all[rr]
        new = np.ones(len(rr), bool)
        for k in sorted_unique(rk):
            at = np.flatnonzero(rk == k)
            new[at[1:]] = rs[at[1:]] > np.maximum.accumulate(re_[at])[:-1]
        starts = np.flatnonzero(new)
        r_k, r_s, r_e = rk[starts], rs[starts], np.maximum.reduceat(re_, starts)
        clean = ordered(clean, e_all[clean] - 1, "_last")
        i = _last_at_or_below(r_k, r_s, sub[clean], e_all[clean] - 1)
        clean = clean[(i < 0) | (r_e[np.maximum(i, 0)] <= s_all[clean])]
    # A segment sent several times without the retransmission flag (e.g. duplicated rows) is also
    # ambiguous: keep only ranges sent exactly once.
    clean = clean[run_lengths(sub[clean], s_all[clean], e_all[clean]) == 1]
    flags_ok, flags = nullable_int(ev["flags"])
    acks = np.flatnonzero(false_mask(ev["is_data_dir"]) & mask_eq(ev["point"], "rcv") & flags_ok
                          & ((flags & ACK) != 0))
    if not len(acks):
        return pl.DataFrame(schema=_RTT_SCHEMA)
    clean = ordered(clean, e_all[clean], "e")
    # rtt: the first cumulative ACK on the subflow reaching the segment's end, if after the send.
    ack_all = int_array(ev["ack"])
    t_ack = np.full(len(clean), INF_NS, np.int64)
    for k in sorted_unique(sub[clean]):
        at = np.flatnonzero(sub[clean] == k)
        mine = acks[sub[acks] == k]
        t_ack[at] = first_reach(ack_all[mine], t_all[mine], e_all[clean[at]])
    keep = (t_ack < INF_NS) & (t_ack > t_all[clean])
    clean, t_ack = clean[keep], t_ack[keep]
    by = polars_sort_order({"conn": (conn_all[clean], conn_dt), "subflow": (sf_all[clean], sf_dt),
                            "t_ns": (t_ack, pl.Int64())})
    clean, t_ack = clean[by], t_ack[by]
    passed = take(ev, ["subflow", "path"], clean)
    return pl.DataFrame([
        ev["conn"][clean].cast(pl.UInt32).set_sorted(),  # sorted by it: flagged, as polars does
        passed["subflow"].cast(pl.UInt32),
        passed["path"].cast(pl.String),
        labels("vantage", ["server", "client"], mask_eq(ev["dir"], "c2s")[clean].astype(np.int64)),
        labels("method", ["seq"], np.zeros(len(clean), np.int64), literal=True),
        pl.Series("t_ns", t_ack, pl.Int64),
        pl.Series("rtt_ns", t_ack - t_all[clean], pl.Int64),
    ])


def _last_at_or_below(keys: np.ndarray, starts: np.ndarray, key: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For intervals sorted by (keys, starts): per query (key, x), the index of the last interval of
    that key starting at or below x, or -1."""
    out = np.full(len(x), -1, np.int64)
    for k in sorted_unique(key):
        lo, hi = np.searchsorted(keys, k, "left"), np.searchsorted(keys, k, "right")
        at = np.flatnonzero(key == k)
        i = np.searchsorted(starts[lo:hi], x[at], "right") - 1
        out[at] = np.where(i >= 0, lo + i, -1)
    return out


def rtt_handshake(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """One RTT sample per subflow from its three-way handshake, at whichever host was observed.

    At the host that sent the SYN: SYN -> SYN/ACK. At the host that answered: SYN/ACK -> the first
    ACK after it. Neither side's stack delays these, so this is close to the path's base RTT; it is
    the only estimate for a receiver-side capture without TCP timestamps (e.g. tshark CSV exports).
    Retransmitted SYNs would make the sample ambiguous (Karn): the subflow then gives none.
    Columns as `rtt_timestamps`, method "hs".
    """
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "flags"])
    ev = select_conn(events, conn).filter(pl.col("point") != "drop").with_columns(_VANTAGE.alias("vantage"))
    flags = pl.col("flags").cast(pl.Int32)
    is_syn = ((flags & SYN) != 0) & ((flags & ACK) == 0)
    is_synack = ((flags & SYN) != 0) & ((flags & ACK) != 0)
    keys = ["conn", "subflow", "vantage"]
    per = ev.group_by(keys).agg(
        pl.col("path").first(),
        pl.col("t_ns").filter(is_syn & (pl.col("point") == "snd")).min().alias("syn_out"),
        pl.col("t_ns").filter(is_syn & (pl.col("point") == "snd")).len().alias("n_syn"),
        pl.col("t_ns").filter(is_synack & (pl.col("point") == "rcv")).min().alias("synack_in"),
        pl.col("t_ns").filter(is_synack & (pl.col("point") == "snd")).min().alias("synack_out"),
        pl.col("t_ns").filter(is_synack & (pl.col("point") == "snd")).len().alias("n_synack"),
        pl.col("t_ns").filter(~is_syn & ~is_synack & ((flags & ACK) != 0) & (pl.col("point") == "rcv"))
        .alias("acks_in"),
    )
    opener = per.filter((pl.col("n_syn") == 1) & pl.col("synack_in").is_not_null()).select(
        *keys, "path", t_ns=pl.col("synack_in"), rtt_ns=pl.col("synack_in") - pl.col("syn_out"))
    # At the answering host: its SYN/ACK out, then the first ACK in after it.
    responder = (
        per.filter((pl.col("n_synack") == 1) & pl.col("syn_out").is_null())
        .explode("acks_in")
        .filter(pl.col("acks_in") > pl.col("synack_out"))
        .group_by(keys)
        .agg(pl.col("path").first(), pl.col("synack_out").first(), pl.col("acks_in").min().alias("t_ns"))
        .select(*keys, "path", "t_ns", rtt_ns=pl.col("t_ns") - pl.col("synack_out"))
    )
    out = pl.concat([opener, responder]).filter(pl.col("rtt_ns") > 0).select(
        "conn", "subflow", "path", "vantage", pl.lit("hs").alias("method"), "t_ns", "rtt_ns")
    return out.cast(_RTT_SCHEMA).sort("conn", "subflow", "vantage")  # type: ignore[arg-type]


def rtt_samples(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """All estimators' samples stacked (column ``method`` = "ts", "seq" or "hs")."""
    return pl.concat([rtt_timestamps(events, conn), rtt_seq_ack(events, conn), rtt_handshake(events, conn)])


def best_rtt_samples(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """The samples of the best estimator available: seq/ack with Karn's rule where the data sender
    was observed, else TCP timestamps, else the handshakes. Column ``method`` says which."""
    # In order of preference, stopping at the first that has samples (`rtt_samples` would run all three).
    for estimator in (rtt_seq_ack, rtt_timestamps, rtt_handshake):
        chosen = estimator(events, conn)
        if chosen.height:
            return chosen
    return pl.DataFrame(schema=_RTT_SCHEMA)


def rtt_summary(samples: pl.DataFrame, by: tuple[str, ...] = ("conn", "path", "subflow", "method")) -> pl.DataFrame:
    """Summary of RTT samples (from `rtt_timestamps`, `rtt_seq_ack` or `rtt_samples`) grouped by
    ``by``: n, rtt_min_ms, rtt_p50_ms, rtt_mean_ms, rtt_p95_ms, rtt_max_ms."""
    r = ms(pl.col("rtt_ns"))
    return (
        samples.group_by(*by)
        .agg(
            pl.len().cast(pl.Int64).alias("n"),
            r.min().alias("rtt_min_ms"),
            r.quantile(0.5, "linear").alias("rtt_p50_ms"),
            r.mean().alias("rtt_mean_ms"),
            r.quantile(0.95, "linear").alias("rtt_p95_ms"),
            r.max().alias("rtt_max_ms"),
        )
        .sort(*by)
    )


def owd_summary(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """One-way delay per connection, path and direction, from ``owd_ns`` of the rows that carry it
    (receiver-side rows of a capture pair or a replay). Columns: conn, path, dir, n, owd_min_ms,
    owd_p50_ms, owd_p95_ms, owd_max_ms. Empty when no row has an OWD."""
    check_columns(events, ["conn", "path", "dir", "owd_ns"])
    d = ms(pl.col("owd_ns"))
    return (
        select_conn(events, conn)
        .filter(pl.col("owd_ns").is_not_null())
        .group_by("conn", "path", "dir")
        .agg(
            pl.len().cast(pl.Int64).alias("n"),
            d.min().alias("owd_min_ms"),
            d.quantile(0.5, "linear").alias("owd_p50_ms"),
            d.quantile(0.95, "linear").alias("owd_p95_ms"),
            d.max().alias("owd_max_ms"),
        )
        .sort("conn", "path", "dir")
    )
