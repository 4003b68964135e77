"""The numpy rewrite of the seq/ACK RTT estimator (`workbench.metrics.rtt.rtt_seq_ack`, Karn's rule)
against the polars formulation it replaced, kept here verbatim as the oracle, on random PacketEvents
tables and on sender-side shapes (MSS segments, retransmissions, cumulative ACKs at equal times)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from test_metrics_fast_common import assert_same_frame, old_with_data_dir, packet_events

from workbench.capture.schema import PACKET_EVENTS
from workbench.metrics._common import ACK, check_columns, select_conn, with_data_dir
from workbench.metrics.rtt import _RTT_SCHEMA, best_rtt_samples, rtt_samples, rtt_seq_ack, rtt_summary

# ---- the polars formulation replaced (oracle, verbatim but for names) --------------------------------

_VANTAGE = (
    pl.when((pl.col("dir") == "c2s") == (pl.col("point") == "snd"))
    .then(pl.lit("client"))
    .otherwise(pl.lit("server"))
)


def old_rtt_seq_ack(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """`rtt_seq_ack` as polars expressions (see its docstring for the definition)."""
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "seq", "ack", "flags",
                           "payload_bytes", "is_retrans"])
    ev = old_with_data_dir(select_conn(events, conn)).with_columns(_VANTAGE.alias("vantage"))
    data = ev.filter(pl.col("is_data_dir") & (pl.col("point") == "snd") & (pl.col("payload_bytes") > 0)).select(
        "conn", "subflow", "path", "vantage", "t_ns",
        pl.col("seq").cast(pl.Int64).alias("s"),
        (pl.col("seq").cast(pl.Int64) + pl.col("payload_bytes").cast(pl.Int64)).alias("e"),
        pl.col("is_retrans").fill_null(False).alias("retr"),
    )
    if data.height == 0:
        return pl.DataFrame(schema=_RTT_SCHEMA)
    keys = ["conn", "subflow"]
    # Union of retransmitted ranges per subflow as disjoint intervals (sort by start; a new interval
    # begins where the start exceeds every earlier end), so "does a segment overlap a retransmission"
    # is one backward as-of join: the last merged interval starting before the segment's end.
    merged = (
        data.filter(pl.col("retr"))
        .sort(*keys, "s")
        .with_columns(pl.col("e").cum_max().shift(1).over(keys).alias("_prev_end"))
        .with_columns((pl.col("_prev_end").is_null() | (pl.col("s") > pl.col("_prev_end")))
                      .cum_sum().over(keys).alias("_grp"))
        .group_by(*keys, "_grp")
        .agg(pl.col("s").min().alias("r_s"), pl.col("e").max().alias("r_e"))
        .select(*keys, "r_s", "r_e")
        .sort(*keys, "r_s")
    )
    clean = data.filter(~pl.col("retr")).with_columns((pl.col("e") - 1).alias("_last"))
    if merged.height:
        clean = (
            clean.sort(*keys, "_last")
            .join_asof(merged, left_on="_last", right_on="r_s", by=keys, strategy="backward",
                       check_sortedness=False)
            .filter(pl.col("r_e").is_null() | (pl.col("r_e") <= pl.col("s")))
        )
    # A segment sent several times without the retransmission flag (e.g. duplicated rows) is also
    # ambiguous: keep only ranges sent exactly once.
    clean = clean.filter(pl.len().over(*keys, "s", "e") == 1)
    acks = (
        ev.filter(~pl.col("is_data_dir") & (pl.col("point") == "rcv")
                  & ((pl.col("flags").cast(pl.Int32) & ACK) != 0))
        .sort(*keys, "t_ns")
        .select(*keys, "t_ns", pl.col("ack").cast(pl.Int64).cum_max().over(keys).alias("ack_max"))
        .group_by(*keys, "ack_max")
        .agg(pl.col("t_ns").min().alias("t_ack"))
        .sort(*keys, "ack_max")
    )
    if acks.height == 0:
        return pl.DataFrame(schema=_RTT_SCHEMA)
    out = (
        clean.sort(*keys, "e")
        .join_asof(acks, left_on="e", right_on="ack_max", by=keys, strategy="forward",
                   check_sortedness=False)
        .filter(pl.col("t_ack").is_not_null() & (pl.col("t_ack") > pl.col("t_ns")))
        .select("conn", "subflow", "path", "vantage", pl.lit("seq").alias("method"),
                pl.col("t_ack").alias("t_ns"), (pl.col("t_ack") - pl.col("t_ns")).alias("rtt_ns"))
        .sort("conn", "subflow", "t_ns")
    )
    return out.cast(_RTT_SCHEMA)  # type: ignore[arg-type]


# ---- tests ---------------------------------------------------------------------------------------------


def _check(ev: pl.DataFrame, conn: int | None = None) -> None:
    got, want = rtt_seq_ack(ev, conn), old_rtt_seq_ack(ev, conn)
    assert_same_frame(got, want)
    # What the summary reads: the per-path statistics of these samples (float means in row order).
    assert_same_frame(rtt_summary(got, by=("path",)), rtt_summary(want, by=("path",)))
    assert_same_frame(rtt_summary(got), rtt_summary(want))


@settings(max_examples=200, deadline=None)
@given(packet_events())
def test_seq_ack_samples_match_the_polars_formulation(ev: pl.DataFrame) -> None:
    _check(ev)
    _check(with_data_dir(ev))
    _check(ev, 0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 20), st.integers(0, 8),
                          st.sampled_from([1000, 1000, 500]), st.booleans()), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 30), st.integers(0, 10)),
                max_size=30))
def test_sender_shapes(segs: list[tuple[int, int, int, int, int, bool]],
                       acks: list[tuple[int, int, int, int]]) -> None:
    # At the data sender: MSS segments per subflow (some re-sent, flagged or not), and cumulative ACKs
    # coming back, several at one time, some acking many segments at once.
    def row(c: int, sf: int, t: int, d: str, p: str, seq: int, ack: int, n: int, r: bool) -> dict:
        return {"t_ns": t, "conn": c, "subflow": sf, "path": ["wifi", "lte", "5g"][sf], "dir": d, "point": p,
                "seq": seq, "ack": ack, "flags": ACK, "payload_bytes": n, "frame_bytes": n + 52,
                "rwnd_bytes": 1, "dsn": None, "data_ack": None, "data_fin": False, "is_retrans": r,
                "is_reinject": False, "ts_val": None, "ts_ecr": None, "owd_ns": None}
    rows = [row(c, sf, t, "s2c", "snd", 1 + k * 1000, 1, n, r) for c, sf, t, k, n, r in segs]
    rows += [row(c, sf, t, "c2s", "rcv", 1, 1 + k * 1000, 0, False) for c, sf, t, k in acks]
    ev = pl.DataFrame(rows, schema=PACKET_EVENTS)
    _check(ev)
    assert_same_frame(best_rtt_samples(ev), old_rtt_seq_ack(ev) if old_rtt_seq_ack(ev).height
                      else best_rtt_samples(ev))


def test_empty() -> None:
    ev = pl.DataFrame(schema=PACKET_EVENTS)
    _check(ev)
    assert rtt_seq_ack(ev).schema == _RTT_SCHEMA
    assert rtt_samples(ev).height == 0
