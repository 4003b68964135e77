"""`summarize` / `prepare` + `summarize_prepared` (what a report computes for every source) against the
same composed of the polars formulations the numpy rewrites replaced (the oracles of the other
``test_metrics_fast_*`` modules): on random PacketEvents and Samples tables, and on bundled captures
and replays, where every rewritten function is compared too."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import polars as pl
import pytest
from _paths import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from test_metrics_fast_burst import old_burstiness, old_fast_subflows, old_free_cwnd_series, old_send_bursts
from test_metrics_fast_common import (
    assert_same_frame,
    assert_same_summary,
    old_data_directions,
    old_start_times,
    old_with_data_dir,
    packet_events,
    samples_tables,
)
from test_metrics_fast_ooo import old_queue_from_segments, old_segments_all, old_summarize_segments
from test_metrics_fast_rtt import old_rtt_seq_ack
from test_metrics_fast_series import old_buffer_series, old_buffer_summary
from test_metrics_fast_throughput import (
    old_app_delay_from_segments,
    old_goodput_from_segments,
    old_path_stats,
)

from workbench.errors import InputError
from workbench.metrics import (
    Summary,
    burst_summary,
    burstiness,
    fast_subflows,
    free_cwnd_series,
    main_connection,
    prepare,
    rtt_summary,
    send_bursts,
    summarize,
    summarize_prepared,
)
from workbench.metrics._common import select_conn
from workbench.metrics.buffers import buffer_series, buffer_summary
from workbench.metrics.rtt import (
    _RTT_SCHEMA,
    best_rtt_samples,
    owd_summary,
    rtt_handshake,
    rtt_seq_ack,
    rtt_timestamps,
)
from workbench.metrics.throughput import (
    app_delay_from_segments,
    goodput_from_data_acks,
    path_stats,
)

# ---- `summarize` composed of the polars formulations (verbatim but for names) ------------------------


def _f(x: object) -> float | None:
    return None if x is None else float(x)  # type: ignore[arg-type]


def old_best_rtt_samples(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    for estimator in (old_rtt_seq_ack, rtt_timestamps, rtt_handshake):
        chosen = estimator(events, conn)
        if chosen.height:
            return chosen
    return pl.DataFrame(schema=_RTT_SCHEMA)


@dataclass(frozen=True)
class OldPrepared:
    conn: int
    events: pl.DataFrame
    segments: pl.DataFrame
    start: pl.DataFrame

    @cached_property
    def firsts(self) -> pl.DataFrame:
        return self.segments.filter(~pl.col("is_duplicate"))

    @cached_property
    def ooo_queue(self) -> pl.DataFrame:
        return old_queue_from_segments(self.firsts)


def old_prepare(events: pl.DataFrame, conn: int | None = None) -> OldPrepared:
    if conn is None:
        conn = main_connection(events)
    ev = old_with_data_dir(select_conn(events, conn))
    if ev.height == 0:
        raise InputError(None, f"no packet events for connection {conn}")
    return OldPrepared(conn, ev, old_segments_all(ev), old_start_times(ev))


def old_summarize_prepared(prep: OldPrepared, samples: pl.DataFrame | None = None) -> Summary:
    conn, ev, seg_all = prep.conn, prep.events, prep.segments
    out: Summary = {"conn": conn, "data_dir": str(old_data_directions(ev)["data_dir"][0])}

    seg = prep.firsts
    gp = old_goodput_from_segments(ev, seg, prep.start)
    out["goodput_source"] = "receiver" if gp.height else None
    if not gp.height and "data_ack" in ev.columns and "dsn" in ev.columns:
        gp = goodput_from_data_acks(ev)  # the sender's capture alone
        out["goodput_source"] = "data_ack" if gp.height else None
    g = gp.row(0, named=True) if gp.height else {}
    out["goodput_mbps"] = _f(g["goodput_bps"]) / 1e6 if g.get("goodput_bps") is not None else None
    out["delivered_bytes"] = g.get("bytes")
    out["completion_s"] = _f(g.get("completion_s"))
    out["undelivered_bytes"] = g.get("undelivered_bytes")

    oo = old_summarize_segments(seg_all)
    o = oo.row(0, named=True) if oo.height else {}
    out["ooo_n"] = o.get("n_segments")
    for stat in ("mean", "p50", "p95", "p99", "max"):
        out[f"ooo_{stat}_ms"] = _f(o.get(f"ooo_delay_{stat}_ms"))
    out["ooo_fraction"] = _f(o.get("ooo_fraction"))
    out["duplicates"] = o.get("n_duplicates")
    out["undeliverable"] = o.get("n_undeliverable")
    q = prep.ooo_queue
    out["ooo_queue_max_bytes"] = int(q["ooo_bytes"].max()) if q.height else None  # type: ignore[arg-type]

    ad = old_app_delay_from_segments(ev, seg.filter(pl.col("t_deliverable_ns").is_not_null()))
    a_ms = ad["app_delay_ns"].cast(pl.Float64) / 1e6
    out["app_delay_mean_ms"] = _f(a_ms.mean()) if ad.height else None
    out["app_delay_p95_ms"] = _f(a_ms.quantile(0.95, "linear")) if ad.height else None
    out["app_delay_max_ms"] = _f(a_ms.max()) if ad.height else None

    ps = old_path_stats(ev)
    out["retrans"] = int(ps["retrans"].sum()) if ps.height else None
    out["reinjections"] = int(ps["reinjections"].sum()) if ps.height else None
    # Share of the data-direction bytes that were redundant (retransmitted or reinjected copies).
    out["redundant_fraction"] = (1.0 - ps["unique_bytes"].sum() / ps["bytes"].sum()
                                 if ps.height and ps["bytes"].sum() > 0 else None)
    for p in ps.iter_rows(named=True):
        name = p["path"]
        out[f"bytes_{name}"] = p["bytes"]
        out[f"share_{name}"] = _f(p["share"])
        out[f"throughput_mbps_{name}"] = _f(p["throughput_bps"]) / 1e6 if p["throughput_bps"] is not None else None
        out[f"retrans_{name}"] = p["retrans"]
        out[f"reinjections_{name}"] = p["reinjections"]

    rs = old_best_rtt_samples(ev)
    method = rs["method"][0] if rs.height else None
    out["rtt_method"] = method
    if method is not None:
        for r in rtt_summary(rs, by=("path",)).iter_rows(named=True):
            for stat in ("min", "p50", "mean", "p95"):
                out[f"rtt_{stat}_ms_{r['path']}"] = _f(r[f"rtt_{stat}_ms"])

    for r in owd_summary(ev).iter_rows(named=True):
        out[f"owd_p50_ms_{r['path']}_{r['dir']}"] = _f(r["owd_p50_ms"])
        out[f"owd_p95_ms_{r['path']}_{r['dir']}"] = _f(r["owd_p95_ms"])

    bs = burst_summary(old_send_bursts(ev), by=("conn",))
    b = bs.row(0, named=True) if bs.height else {}
    out["burst_segments_mean"] = _f(b.get("burst_segments_mean"))
    out["burst_segments_p95"] = _f(b.get("burst_segments_p95"))
    out["burst_segments_max"] = b.get("burst_segments_max")

    bu = old_burstiness(samples, conn) if samples is not None and samples.height else None
    c = bu.row(0, named=True) if bu is not None and bu.height else {}
    out["free_cwnd_mean_segments"] = _f(c.get("free_cwnd_mean_segments"))
    out["free_cwnd_peak_segments"] = _f(c.get("free_cwnd_peak_segments"))
    out["fast_path"] = c.get("path")
    bf = old_buffer_summary(samples, conn) if samples is not None and samples.height else None
    f = bf.row(0, named=True) if bf is not None and bf.height else {}
    for k in ("snd_buf_max_bytes", "rcv_buf_max_bytes", "rcv_ooo_max_bytes"):
        out[k] = f.get(k)
    return out


# ---- tests ---------------------------------------------------------------------------------------------


def _same_everywhere(events: pl.DataFrame, samples: pl.DataFrame | None, conn: int | None = None) -> None:
    """`prepare` + `summarize_prepared` and every rewritten function on the prepared connection."""
    try:
        want_prep = old_prepare(events, conn)
    except (InputError, IndexError) as e:  # no such connection, nothing but drops (main_connection)
        with pytest.raises(type(e)):
            prepare(events, conn)
        return
    prep = prepare(events, conn)
    ev = prep.events
    assert prep.conn == want_prep.conn
    assert_same_frame(ev, want_prep.events)
    assert_same_frame(prep.segments, want_prep.segments)
    assert_same_frame(prep.start, want_prep.start)
    assert_same_frame(prep.firsts, want_prep.firsts)
    assert_same_frame(prep.ooo_queue, want_prep.ooo_queue)
    assert_same_summary(summarize_prepared(prep, samples), old_summarize_prepared(want_prep, samples))
    assert_same_summary(summarize(events, samples, conn=conn), old_summarize_prepared(want_prep, samples))
    assert_same_frame(best_rtt_samples(ev), old_best_rtt_samples(ev))
    assert_same_frame(rtt_seq_ack(ev), old_rtt_seq_ack(ev))
    assert_same_frame(app_delay_from_segments(ev, prep.firsts),
                      old_app_delay_from_segments(ev, want_prep.firsts.filter(pl.col("t_deliverable_ns").is_not_null())))
    assert_same_frame(path_stats(ev), old_path_stats(ev))
    assert_same_frame(send_bursts(ev), old_send_bursts(ev))
    if samples is not None:
        assert_same_frame(fast_subflows(samples, prep.conn), old_fast_subflows(samples, prep.conn))
        assert_same_frame(free_cwnd_series(samples, prep.conn), old_free_cwnd_series(samples, prep.conn))
        assert_same_frame(burstiness(samples, prep.conn), old_burstiness(samples, prep.conn))
        assert_same_frame(buffer_series(samples, prep.conn), old_buffer_series(samples, prep.conn))
        assert_same_frame(buffer_summary(samples, prep.conn), old_buffer_summary(samples, prep.conn))


@settings(max_examples=100, deadline=None)
@given(packet_events(), st.one_of(st.none(), samples_tables()), st.sampled_from([None, None, 0, 1]))
def test_summaries_match_the_polars_formulation(events: pl.DataFrame, samples: pl.DataFrame | None,
                                                conn: int | None) -> None:
    _same_everywhere(events, samples, conn)


def _captures() -> list[tuple[str, pl.DataFrame]]:
    from workbench.capture import load

    out = [(p.name, load(p).events) for p in sorted((REPO / "traces" / "fixtures").glob("*.pcap"))]
    lab = REPO / "traces" / "lab" / "c07"
    out.append(("lab c07 pair", load(lab / "server.pcap", peer=lab / "client.pcap").events))
    out.append(("lab c07 server", load(lab / "server.pcap").events))
    return out


@pytest.mark.parametrize("name", ["captures"])
def test_bundled_captures(name: str) -> None:
    for label, events in _captures():
        if events.height == 0:
            continue
        for conn in sorted(set(events["conn"].to_list())):
            try:
                _same_everywhere(events, None, conn)
            except AssertionError as e:
                raise AssertionError(f"{label}, connection {conn}") from e


@pytest.mark.parametrize("scheduler", ["minrtt", "redundant", "roundrobin"])
def test_replays(scheduler: str) -> None:
    from workbench.replay import Bulk, PathConfig, StepSeries, run_replay
    from workbench.schedulers import get

    c = StepSeries.constant
    paths = [PathConfig(name="wifi", rate_down_bps=c(30e6), rate_up_bps=c(30e6), owd_down_ns=c(5e6),
                        owd_up_ns=c(5e6), loss_down=c(0.01)),
             PathConfig(name="lte", rate_down_bps=c(10e6), rate_up_bps=c(10e6), owd_down_ns=c(20e6),
                        owd_up_ns=c(20e6))]
    r = run_replay(paths, get(scheduler), workload=Bulk(stop_ns=int(1e9)), duration_ns=int(1.5e9))
    _same_everywhere(r.events, r.samples)
    _same_everywhere(r.events.filter(pl.col("point") != "snd"), None)  # a receiver-side capture
    _same_everywhere(r.events.filter(pl.col("point") != "rcv"), None)  # a sender-side capture
