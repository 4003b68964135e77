"""`summarize` / `prepare` + `summarize_prepared` (what a report computes for every source) against the
same composed of the polars formulations the numpy rewrites replaced (the oracles of the other
``test_metrics_fast_*`` modules): on random PacketEvents and Samples tables, and on bundled captures
and replays, where every rewritten function is compared too."""

from __future__ import annotations

import polars as pl
import pytest
from _paths import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from test_metrics_fast_burst import old_burstiness, old_fast_subflows, old_free_cwnd_series, old_send_bursts
from test_metrics_fast_common import (
    assert_same_frame,
    assert_same_summary,
    lossy_two_path_replay,
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
    Prepared,
    Summary,
    burstiness,
    fast_subflows,
    free_cwnd_series,
    prepare,
    send_bursts,
    summarize,
    summarize_prepared,
)
from workbench.metrics.buffers import buffer_series, buffer_summary
from workbench.metrics.rtt import (
    _RTT_SCHEMA,
    best_rtt_samples,
    rtt_handshake,
    rtt_seq_ack,
    rtt_timestamps,
)
from workbench.metrics.throughput import (
    app_delay_from_segments,
    path_stats,
)

# ---- `summarize` composed of the polars formulations -------------------------------------------------


def old_best_rtt_samples(events: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    for estimator in (old_rtt_seq_ack, rtt_timestamps, rtt_handshake):
        chosen = estimator(events, conn)
        if chosen.height:
            return chosen
    return pl.DataFrame(schema=_RTT_SCHEMA)


def _with_polars_formulations(**old: object) -> pytest.MonkeyPatch:
    """A monkeypatch context in which `workbench.metrics.summary` calls the given polars formulations
    (by the names it imports) in place of the numpy rewrites."""
    import workbench.metrics.summary as summary_module

    mp = pytest.MonkeyPatch()
    for name, fn in old.items():
        mp.setattr(summary_module, name, fn)
    return mp


def old_prepare(events: pl.DataFrame, conn: int | None = None) -> Prepared:
    """`prepare` itself over the polars formulations of the steps it calls."""
    mp = _with_polars_formulations(with_data_dir=old_with_data_dir, _segments_all=old_segments_all,
                                   start_times=old_start_times, queue_from_segments=old_queue_from_segments)
    try:
        prep = prepare(events, conn)
        prep.ooo_queue  # noqa: B018 - made (and cached) while the polars formulation is in place
        return prep
    finally:
        mp.undo()


def old_summarize_prepared(prep: Prepared, samples: pl.DataFrame | None = None) -> Summary:
    """`summarize_prepared` itself (it only picks and renames) with every metric it calls that was
    rewritten in numpy swapped for its polars formulation."""

    def old_app_delay(ev: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
        # the polars formulation was handed only the segments that ever became deliverable
        return old_app_delay_from_segments(ev, seg.filter(pl.col("t_deliverable_ns").is_not_null()))

    mp = _with_polars_formulations(
        data_directions=old_data_directions, goodput_from_segments=old_goodput_from_segments,
        summarize_segments=old_summarize_segments, app_delay_from_segments=old_app_delay, path_stats=old_path_stats,
        best_rtt_samples=old_best_rtt_samples, send_bursts=old_send_bursts, burstiness=old_burstiness,
        buffer_summary=old_buffer_summary)
    try:
        return summarize_prepared(prep, samples)
    finally:
        mp.undo()


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
    r = lossy_two_path_replay(scheduler)
    _same_everywhere(r.events, r.samples)
    _same_everywhere(r.events.filter(pl.col("point") != "snd"), None)  # a receiver-side capture
    _same_everywhere(r.events.filter(pl.col("point") != "rcv"), None)  # a sender-side capture
