"""The numpy rewrites of goodput, application delay and per-path accounting
(`workbench.metrics.throughput`) against the polars formulations they replaced, kept here verbatim as
oracles, on random PacketEvents tables."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from test_metrics_fast_common import assert_same_frame, old_start_times, old_with_data_dir, packet_events
from test_metrics_fast_ooo import old_segments_all
from test_metrics_first_cover import polars_first_cover

from workbench.capture.schema import PACKET_EVENTS
from workbench.metrics._common import check_columns, select_conn, start_times, with_data_dir
from workbench.metrics.ooo import _segments_all
from workbench.metrics.throughput import (
    _APP_SCHEMA,
    app_delay,
    app_delay_from_segments,
    app_delay_summary,
    goodput,
    goodput_from_segments,
    path_stats,
)

# ---- the polars formulations replaced (oracles, verbatim but for names) ------------------------------


def old_goodput_from_segments(ev: pl.DataFrame, seg: pl.DataFrame, start: pl.DataFrame) -> pl.DataFrame:
    fin = (
        old_with_data_dir(ev).filter(pl.col("is_data_dir") & pl.col("data_fin").fill_null(False))
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


def old_app_delay_from_segments(ev: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    check_columns(ev, ["t_ns", "conn", "dir", "point", "payload_bytes", "dsn"])
    snd = (
        old_with_data_dir(ev)
        .with_row_index("row_id")
        .filter(pl.col("is_data_dir") & (pl.col("point") == "snd") & pl.col("dsn").is_not_null()
                & (pl.col("payload_bytes") > 0))
        .select("conn", pl.col("row_id").cast(pl.Int64), "t_ns", pl.col("dsn").cast(pl.Int64).alias("s"),
                (pl.col("dsn").cast(pl.Int64) + pl.col("payload_bytes").cast(pl.Int64)).alias("e"))
    )
    if snd.height == 0 or seg.height == 0:
        return pl.DataFrame(schema=_APP_SCHEMA)
    _, pieces = polars_first_cover(snd)
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


def old_path_stats(events: pl.DataFrame, conn: int | None = None, *, point: str | None = None) -> pl.DataFrame:
    """`path_stats` as polars expressions (see its docstring for the columns)."""
    check_columns(events, ["t_ns", "conn", "subflow", "path", "dir", "point", "payload_bytes",
                           "is_retrans", "is_reinject"])
    ev = old_with_data_dir(select_conn(events, conn)).filter(
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


# ---- tests ---------------------------------------------------------------------------------------------


def _check(ev: pl.DataFrame) -> None:
    seg, want_seg = _segments_all(ev), old_segments_all(ev)
    firsts, want_firsts = (s.filter(~pl.col("is_duplicate")) for s in (seg, want_seg))
    assert_same_frame(goodput_from_segments(ev, firsts, start_times(ev)),
                      old_goodput_from_segments(ev, want_firsts, old_start_times(ev)))
    assert_same_frame(goodput(ev), old_goodput_from_segments(ev, want_firsts, old_start_times(ev)))
    delivered = want_firsts.filter(pl.col("t_deliverable_ns").is_not_null())
    want_ad = old_app_delay_from_segments(ev, delivered)
    assert_same_frame(app_delay_from_segments(ev, firsts), want_ad)  # (it leaves out the undelivered)
    assert_same_frame(app_delay_from_segments(ev, delivered), want_ad)
    assert_same_frame(app_delay_from_segments(ev, seg), old_app_delay_from_segments(ev, want_seg))
    assert_same_frame(app_delay(ev), want_ad)
    assert_same_frame(app_delay_summary(ev), app_delay_summary(ev))
    for point in (None, "snd", "rcv", "drop"):
        assert_same_frame(path_stats(ev, point=point), old_path_stats(ev, point=point))
    assert_same_frame(path_stats(ev, 0), old_path_stats(ev, 0))


@settings(max_examples=150, deadline=None)
@given(packet_events())
def test_goodput_app_delay_and_paths_match_the_polars_formulation(ev: pl.DataFrame) -> None:
    _check(ev)
    _check(with_data_dir(ev))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 12), st.sampled_from([0, 10, 20, 30, 40]),
                          st.sampled_from([10, 20]), st.integers(0, 1), st.sampled_from(["snd", "rcv"]),
                          st.booleans(), st.booleans()),
                min_size=1, max_size=40),
       st.sampled_from([0, 1_600_000_000_123_456_789]))
def test_pair_shapes(segs: list[tuple[int, int, int, int, int, str, bool, bool]], base: int) -> None:
    # Both ends of a transfer on one clock: segments sent (re-sent, reinjected on the other subflow)
    # and received, at epoch times (goodput and throughput divide ns by 1e9).
    rows = [{"t_ns": base + t, "conn": c, "subflow": sf, "path": ["wifi", "lte"][sf], "dir": "s2c",
             "point": p, "seq": 1, "ack": 1, "flags": 0x010, "payload_bytes": n, "frame_bytes": n + 52,
             "rwnd_bytes": 1, "dsn": d, "data_ack": None, "data_fin": fin, "is_retrans": False,
             "is_reinject": r, "ts_val": None, "ts_ecr": None, "owd_ns": None}
            for c, t, d, n, sf, p, r, fin in segs]
    _check(pl.DataFrame(rows, schema=PACKET_EVENTS))


def test_empty() -> None:
    ev = pl.DataFrame(schema=PACKET_EVENTS)
    _check(ev)
    assert app_delay(ev).schema == _APP_SCHEMA
