"""Invariants of the compiled engine (native/engine, `workbench_core.run_model`) over random runs
(tests/_engines.py `scenarios()`: stepping or constant paths, shared bottlenecks, every congestion
control, every workload, both directions), for every scheduler it runs: what the model guarantees
whatever the run, checked on the run's own tables (the recorder's ``snd`` / ``rcv`` / ``drop`` /
``ack`` / ``samples`` rows, workbench/replay/tables.py) against its summary and against each other:

* determinism: the same run twice gives identical tables, summary and observations; running without
  the recorder gives the same summary (only the sampling clock's events are missing);
* every packet's fate: each ``rcv`` row is an earlier ``snd`` row of the same subflow and segment with
  ``owd_ns = t_rcv - t_snd > 0``; arrivals and drops of a segment never outnumber its sends; a queue
  drop on a path's one link happens when the segment is sent;
* the links: FIFO (a subflow's data and ACKs arrive in the order they were sent), capacity never
  exceeded (on a constant-rate link, consecutive arrivals are at least one serialisation time apart),
  one-way delay at least propagation plus serialisation, the buffer's peak never above its size;
* the counters: packets sent, retransmissions, queue drops, random losses, per path sent and acked
  bytes, as counted in the tables; the run ends on the last DATA_ACK of a completed transfer;
* bytes: new data is sent contiguously on each subflow (seq from 1), no meta data byte goes out as new
  data twice, nothing beyond what the application wrote is sent or delivered, delivery never runs
  ahead of what arrived, a completed Finite / AppTrace / Bursts transfer delivered exactly what was
  written; ACKs and DATA_ACKs never acknowledge what had not arrived when they were sent and never
  decrease (per subflow as they arrive, per connection as they are sent);
* samples: cwnd >= 1, one periodic row per subflow on every tick of the sampling clock up to the
  end, one ACK sample per ACK, the peak receive out-of-order queue at least every sampled value.

Worked examples (times computed by hand from the link model in the comments) pin the absolute values:
serialisation + propagation, drop-tail, a random loss at the end of serialisation."""

from __future__ import annotations

import heapq
from itertools import accumulate
from typing import Any

import polars as pl
import pytest
import workbench_core
from _engines import Scenario, assert_same_results, run, scenarios
from hypothesis import HealthCheck, given, settings

from workbench.replay import (
    AppTrace,
    Bursts,
    ConnectionConfig,
    Finite,
    PathConfig,
    ReplayResult,
    StepSeries,
    run_replay,
)
from workbench.replay.tables import record_frame
from workbench.schedulers import get

MS = 1_000_000
COMPILED = sorted(workbench_core.compiled_schedulers())
SETTINGS = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
# a data segment's identity in the tables (a retransmission of it repeats it)
KEY = ["subflow", "seq", "payload_bytes", "dsn", "is_retrans", "is_reinject"]


def test_every_registered_scheduler_is_compiled() -> None:
    assert {"minrtt", "minrtt_noor", "drepas", "rbp", "upstream"} <= set(COMPILED)


def _tables(r: ReplayResult) -> dict[str, pl.DataFrame]:
    return {k: record_frame(r.recorder, k) for k in ("snd", "rcv", "drop", "ack", "samples")}


def _written(sc: Scenario) -> int | None:
    """Bytes the application writes in all (None: Bulk, which writes as long as it runs)."""
    wl, mss = sc.workload, sc.conn.mss_bytes
    if isinstance(wl, Finite):
        return wl.size_bytes
    if isinstance(wl, AppTrace):
        return sum(b for _, b in wl.writes)
    if isinstance(wl, Bursts):
        return wl.segments * mss * wl.n_bursts  # each burst writes `segments` full segments
    return None


def _contiguous_prefix(intervals: list[tuple[int, int]], start: int) -> int:
    """The end of the run of ``[a, b)`` ranges covering ``start`` onward without a hole."""
    end = start
    for a, b in sorted(intervals):
        if a > end:
            break
        end = max(end, b)
    return end


def _never_ahead_of_arrivals(arrivals: pl.DataFrame, lo: str, hi: str, acks: pl.DataFrame, value: str,
                             start: int) -> None:
    """Each ACK (sent at ``t_ns - owd_ns``) acknowledges at most the contiguous prefix of the ranges
    ``[lo, hi)`` that had arrived by then."""
    ev = sorted(zip(arrivals["t_ns"].to_list(), arrivals[lo].to_list(), arrivals[hi].to_list(), strict=True))
    sent = sorted(zip((acks["t_ns"] - acks["owd_ns"]).to_list(), acks[value].to_list(), strict=True))
    heap: list[tuple[int, int]] = []
    prefix, i = start, 0
    for t_sent, acked in sent:
        while i < len(ev) and ev[i][0] <= t_sent:
            heapq.heappush(heap, (ev[i][1], ev[i][2]))
            i += 1
        while heap and heap[0][0] <= prefix:
            prefix = max(prefix, heapq.heappop(heap)[1])
        assert acked <= prefix, (value, t_sent, acked, prefix)


def check_fates(sc: Scenario, t: dict[str, pl.DataFrame]) -> None:
    snd, rcv, drop = t["snd"], t["rcv"], t["drop"]
    assert (rcv["owd_ns"] > 0).all()
    rcv = rcv.with_columns(t_snd=pl.col("t_ns") - pl.col("owd_ns"))
    orphans = rcv.join(snd.rename({"t_ns": "t_snd"}), on=[*KEY, "t_snd"], how="anti")
    assert orphans.height == 0, orphans.head(3)
    data_drops = (drop.filter(pl.col("is_data")).rename({"seq_or_ack": "seq"})
                  .with_columns(pl.col(c).cast(snd.schema[c]) for c in KEY))
    fates = pl.concat([rcv.select(KEY), data_drops.select(KEY)]).group_by(KEY).len("fates")
    sends = snd.group_by(KEY).len("sends")
    extra = fates.join(sends, on=KEY, how="left").filter(pl.col("sends").is_null()
                                                          | (pl.col("fates") > pl.col("sends")))
    assert extra.height == 0, extra.head(3)
    if sc.paths:  # one link per direction: a queue overflow drops the segment as it is sent
        qd = data_drops.filter(pl.col("reason") == 0).select(*KEY, "t_ns")
        assert qd.join(snd, on=[*KEY, "t_ns"], how="anti").height == 0
    ack_drops = drop.filter(~pl.col("is_data"))
    assert (ack_drops["payload_bytes"] == 0).all() and ack_drops["dsn"].is_null().all()


def check_links(sc: Scenario, r: ReplayResult, t: dict[str, pl.DataFrame]) -> None:
    rcv, ack = t["rcv"], t["ack"]
    cfg = sc.conn
    for k in range(len(r.summary["per_path"])):
        for rows in (rcv.filter(pl.col("subflow") == k), ack.filter(pl.col("subflow") == k)):
            # FIFO: in arrival order, send times never go back
            assert ((rows["t_ns"] - rows["owd_ns"]).diff().drop_nulls() >= 0).all()
    for p in r.summary["per_path"].values():
        assert p["max_queue_bytes"] <= p["buffer_bytes"]

    def serialisation_ns(size: pl.Expr, rate_bps: float) -> pl.Expr:
        return (size.cast(pl.Int64) * 8e9 / rate_bps).floor().cast(pl.Int64)  # the link rounds, never less

    def constant(s: StepSeries) -> float | None:
        return float(s.values[0]) if len(s.values) == 1 else None

    # (subflows whose data ends on the link, its rate and delay; the same for their ACKs, if alone there).
    # With a delay that steps down, a later packet may be held back to its predecessor's arrival (FIFO),
    # so the spacing is only checked where both rate and delay are constant.
    ends: list[tuple[list[int], StepSeries, StepSeries, StepSeries | None, StepSeries | None]] = []
    if sc.paths:
        for k, p in enumerate(sc.paths):
            down, up = (p.rate_down_bps, p.owd_down_ns), (p.rate_up_bps, p.owd_up_ns)
            (dr, do), (ar, ao) = (down, up) if sc.direction == "down" else (up, down)
            ends.append(([k], dr, do, ar, ao))
    else:
        core = sc.links[0]  # every route's data ends on the shared "core" link
        ends.append((list(range(len(sc.routes))), core.rate_bps, core.owd_ns, None, None))
    for ks, rate, owd, ack_rate, ack_owd in ends:
        rate_bps, owd_ns = constant(rate), constant(owd)
        if rate_bps is not None and owd_ns is not None:
            x = (rcv.filter(pl.col("subflow").is_in(ks)).sort("t_ns", maintain_order=True)
                 .with_columns(tx=serialisation_ns(pl.col("payload_bytes") + cfg.header_bytes, rate_bps)))
            gaps = x.with_columns(gap=pl.col("t_ns").diff()).slice(1)
            assert (gaps["gap"] >= gaps["tx"]).all(), "data arrive faster than the link's capacity"
            if sc.paths:
                assert (x["owd_ns"] >= int(owd_ns) + x["tx"]).all()
        ack_bps = constant(ack_rate) if ack_rate is not None else None
        if ack_bps is not None and ack_owd is not None and constant(ack_owd) is not None:
            a = ack.filter(pl.col("subflow").is_in(ks)).with_columns(
                tx=serialisation_ns(cfg.ack_bytes + 12 * pl.col("has_sack").cast(pl.Int64), ack_bps),
                gap=pl.col("t_ns").diff()).slice(1)
            assert (a["gap"] >= a["tx"]).all(), "ACKs arrive faster than the link's capacity"


def check_counters(sc: Scenario, r: ReplayResult, t: dict[str, pl.DataFrame]) -> None:
    s, snd, drop, ack = r.summary, t["snd"], t["drop"], t["ack"]
    assert s["data_packets_sent"] == snd.height
    assert s["retransmissions"] == snd["is_retrans"].sum()
    assert s["queue_drops"] == (drop["reason"] == 0).sum()
    assert s["random_losses"] == (drop["reason"] == 1).sum()
    # a segment handed to a subflow as a reinjection or an opportunistic copy is sent (not as a
    # retransmission) at most once: never more such rows than such hand-overs
    assert snd.filter(pl.col("is_reinject") & ~pl.col("is_retrans")).height <= (
        s["reinjections"] + s["opportunistic_retransmissions"])
    for k, (name, p) in enumerate(s["per_path"].items()):
        mine = snd.filter(pl.col("subflow") == k)
        assert p["sent_packets"] == mine.height, name
        assert p["retransmissions"] == mine["is_retrans"].sum(), name
        assert p["sent_bytes"] == mine.filter(~pl.col("is_retrans"))["payload_bytes"].sum(), name
        acks = ack.filter(pl.col("subflow") == k)["ack_seq"]
        assert p["acked_bytes"] == (acks.max() - 1 if len(acks) else 0), name  # seq 1 = the first byte
        if sc.paths:  # a path's data link carries only this subflow's data
            d = drop.filter(pl.col("is_data") & (pl.col("subflow") == k))
            assert (p["queue_drops"], p["random_losses"]) == ((d["reason"] == 0).sum(), (d["reason"] == 1).sum())


def check_bytes(sc: Scenario, r: ReplayResult, t: dict[str, pl.DataFrame]) -> None:
    s, snd, rcv, ack = r.summary, t["snd"], t["rcv"], t["ack"]
    mss = sc.conn.mss_bytes
    assert ((snd["payload_bytes"] > 0) & (snd["payload_bytes"] <= mss)).all()
    for k in range(len(s["per_path"])):
        new = snd.filter((pl.col("subflow") == k) & ~pl.col("is_retrans"))
        seq, plen = new["seq"].to_list(), new["payload_bytes"].to_list()
        assert seq == list(accumulate(plen[:-1], initial=1))[:len(seq)], f"subflow {k}: new data not contiguous"
        # a retransmission re-sends what this subflow sent before, with the same mapping
        mine = snd.filter(pl.col("subflow") == k)
        high = (mine["seq"] + mine["payload_bytes"]).cum_max().shift(1, fill_value=1)
        assert (mine.filter(pl.col("is_retrans"))["seq"] + mine.filter(pl.col("is_retrans"))["payload_bytes"]
                <= high.filter(mine["is_retrans"])).all()
    maps = snd.group_by("subflow", "seq").agg(pl.col("dsn").n_unique(), pl.col("payload_bytes").n_unique())
    assert (maps["dsn"] == 1).all() and (maps["payload_bytes"] == 1).all()
    # a meta byte goes out as new data (neither a retransmission nor a reinjection) at most once
    new = snd.filter(~pl.col("is_retrans") & ~pl.col("is_reinject")).sort("dsn")
    assert (new["dsn"].slice(1) >= (new["dsn"] + new["payload_bytes"]).slice(0, max(new.height - 1, 0))).all()
    delivered = s["delivered_bytes"]
    arrived = _contiguous_prefix(list(zip(rcv["dsn"].to_list(), (rcv["dsn"] + rcv["payload_bytes"]).to_list(),
                                          strict=True)), 0)
    assert delivered <= arrived, (delivered, arrived)
    if delivered:
        assert s["last_delivery_ns"] in set(rcv["t_ns"].to_list())
    written = _written(sc)
    if written is not None:
        assert snd.height == 0 or (snd["dsn"] + snd["payload_bytes"]).max() <= written
        assert delivered <= written
        if s["completed"]:
            assert delivered == written, (type(sc.workload).__name__, delivered, written)
    if len(ack):
        assert ack["data_ack"].max() <= delivered
        assert (ack["ack_seq"] >= 1).all()
    if s["completed"]:
        assert s["sim_ns"] == s["all_acked_ns"]
        if written is not None and written > 0:
            assert ack.filter(pl.col("data_ack") >= written)["t_ns"].min() == s["all_acked_ns"]
    for k in range(len(s["per_path"])):
        a = ack.filter(pl.col("subflow") == k)
        assert (a["ack_seq"].diff().drop_nulls() >= 0).all() and (a["data_ack"].diff().drop_nulls() >= 0).all()
        got = rcv.filter(pl.col("subflow") == k).with_columns(end=pl.col("seq") + pl.col("payload_bytes"))
        _never_ahead_of_arrivals(got, "seq", "end", a, "ack_seq", 1)
    got = rcv.with_columns(end=pl.col("dsn") + pl.col("payload_bytes"))
    _never_ahead_of_arrivals(got, "dsn", "end", ack, "data_ack", 0)
    # the receiver's DATA_ACK never goes back: ACKs sent later carry at least what earlier ones did
    by_time = (ack.with_columns(t_sent=pl.col("t_ns") - pl.col("owd_ns")).group_by("t_sent")
               .agg(lo=pl.col("data_ack").min(), hi=pl.col("data_ack").max()).sort("t_sent"))
    assert (by_time["lo"] >= by_time["hi"].cum_max().shift(1, fill_value=0)).all()


def check_samples(sc: Scenario, r: ReplayResult, t: dict[str, pl.DataFrame]) -> None:
    smp, s = t["samples"], r.summary
    assert (smp["cwnd"] >= 1).all()
    assert smp.filter(~pl.col("is_periodic")).height == t["ack"].height  # one sample per ACK
    if smp.height:
        assert smp["rcv_ooo_bytes"].max() <= s["max_rcv_ooo_bytes"]
    if sc.conn.send_buf_bytes is not None and smp.height:
        assert smp["snd_buf_bytes"].max() <= sc.conn.send_buf_bytes
    tick = sc.conn.sample_interval_ns
    periodic = smp.filter(pl.col("is_periodic"))
    if not tick:
        assert periodic.height == 0
        return
    per_t = periodic.group_by("t_ns").len().sort("t_ns")
    times = per_t["t_ns"].to_list()
    if not times:  # the first tick (at 0) found the transfer done: nothing to write
        assert s["completed"] and s["all_acked_ns"] == 0
        return
    assert times == list(range(0, len(times) * tick, tick)), times[:5]  # every tick from 0, none skipped
    assert (per_t["len"] == len(s["per_path"])).all()  # every subflow on every tick
    assert times[-1] <= s["sim_ns"] < times[-1] + tick  # up to the end


def check_all(sc: Scenario, r: ReplayResult) -> None:
    t = _tables(r)
    check_fates(sc, t)
    check_links(sc, r, t)
    check_counters(sc, r, t)
    check_bytes(sc, r, t)
    check_samples(sc, r, t)


@pytest.mark.parametrize("name", COMPILED)
@settings(SETTINGS, max_examples=150)
@given(sc=scenarios())
def test_the_tables_obey_the_model(name: str, sc: Scenario) -> None:
    check_all(sc, run(get(name), sc))


@pytest.mark.parametrize("name", COMPILED)
@settings(SETTINGS, max_examples=30)
@given(sc=scenarios())
def test_a_run_is_deterministic_and_recording_changes_nothing(name: str, sc: Scenario) -> None:
    a, b = run(get(name), sc), run(get(name), sc)
    assert_same_results(a, b)
    quiet = run(get(name), sc, record=False)
    assert quiet.recorder is None and quiet.observations == []
    sa, sq = ({k: v for k, v in x.summary.items() if k not in ("wall_s", "events")} for x in (a, quiet))
    assert sa == sq
    # the recorder adds only the sampling clock's events: one per tick, and one that finds the run done
    ticks = record_frame(a.recorder, "samples").filter(pl.col("is_periodic"))["t_ns"].n_unique()
    extra = a.summary["events"] - quiet.summary["events"] - ticks
    assert 0 <= extra <= int(a.summary["completed"] and sc.conn.sample_interval_ns > 0), extra


# ------------------------------------------------------------------------------ worked examples
def _one_path(**kw: Any) -> PathConfig:
    """8 Mbit/s both ways (1 byte per µs), 10 ms one-way, 150 kB buffers, no loss unless given."""
    c = StepSeries.constant
    args: dict[str, Any] = dict(name="a", rate_down_bps=c(8e6), rate_up_bps=c(8e6), owd_down_ns=c(10 * MS),
                                owd_up_ns=c(10 * MS), loss_down=c(0.0), loss_up=c(0.0), buffer_down_bytes=150_000,
                                buffer_up_bytes=150_000)
    return PathConfig(**{**args, **kw})


# no handshake (the subflow is up at 0), an ACK per segment, no sampling clock
QUICK = ConnectionConfig(handshake=False, delayed_ack=False, sample_interval_ns=0)


def test_worked_example_serialisation_and_propagation() -> None:
    """Three full segments (1424 B + 90 B of headers = 1514 B, 1.514 ms each at 1 byte/µs) leave at 0
    and serialise back to back: they finish at 1.514, 3.028, 4.542 ms and arrive 10 ms later. Each is
    ACKed at once: 78 B (78 µs) + 10 ms back. The transfer completes with the third ACK."""
    r = run_replay([_one_path()], get("minrtt"), workload=Finite(size_bytes=3 * 1424), conn=QUICK,
                   duration_ns=1000 * MS)
    t = _tables(r)
    assert t["snd"].rows() == [(0, 0, 1 + 1424 * i, 1424, 1424 * i, False, False) for i in range(3)]
    arrive = [1_514_000 * (i + 1) + 10 * MS for i in range(3)]  # 11.514, 13.028, 14.542 ms
    assert t["rcv"]["t_ns"].to_list() == arrive and t["rcv"]["owd_ns"].to_list() == arrive
    acked = [a + 78_000 + 10 * MS for a in arrive]  # 21.592, 23.106, 24.620 ms
    assert t["ack"].select("t_ns", "ack_seq", "data_ack", "owd_ns").rows() == [
        (acked[i], 1 + 1424 * (i + 1), 1424 * (i + 1), 10_078_000) for i in range(3)]
    s = r.summary
    assert (s["completed"], s["all_acked_ns"], s["sim_ns"]) == (True, acked[2], acked[2])
    assert (s["delivered_bytes"], s["last_delivery_ns"]) == (4272, arrive[2])
    # two segments waited in the buffer while the first was on the wire
    assert s["per_path"]["a"]["max_queue_bytes"] == 2 * 1514
    # RTT samples 21.592, 23.106, 24.620 ms; srtt_us8 = 8 * 21592 = 172736, += 23106 - 21592 -> 174250,
    # += 24620 - (174250 >> 3 = 21781) -> 177089; srtt = 177089 >> 3 = 22136 µs
    assert s["per_path"]["a"]["srtt_ns"] == 22_136_000
    check_all(Scenario(paths=(_one_path(),), links=(), routes=(), conn=QUICK, workload=Finite(size_bytes=3 * 1424),
                       duration_ns=1000 * MS, seed=0, direction="down"), r)


def test_worked_example_drop_tail() -> None:
    """A 3000-byte buffer: of four segments handed over at 0, the first goes on the wire, the second
    waits (1514 B buffered), the third and fourth would make 3028 B > 3000: dropped at 0. Both come
    back as retransmissions and the transfer completes."""
    sc = Scenario(paths=(_one_path(buffer_down_bytes=3000),), links=(), routes=(), conn=QUICK,
                  workload=Finite(size_bytes=4 * 1424), duration_ns=5000 * MS, seed=0, direction="down")
    r = run(get("minrtt"), sc)
    t = _tables(r)
    first = t["drop"].filter(pl.col("t_ns") == 0)
    assert first.select("seq_or_ack", "is_data", "reason").rows() == [(1 + 2 * 1424, True, 0), (1 + 3 * 1424, True, 0)]
    assert t["rcv"]["t_ns"].to_list()[:2] == [11_514_000, 13_028_000]
    assert r.summary["per_path"]["a"]["max_queue_bytes"] == 1514
    assert r.summary["retransmissions"] >= 2 and r.summary["completed"]
    check_all(sc, r)


def test_worked_example_random_loss_at_the_end_of_serialisation() -> None:
    """Loss probability 1 until 2 ms, 0 after: the first segment finishes serialising at 1.514 ms and is
    lost then; the second finishes at 3.028 ms and arrives at 13.028 ms."""
    lossy = _one_path(loss_down=StepSeries((0, 2 * MS), (1.0, 0.0)))
    sc = Scenario(paths=(lossy,), links=(), routes=(), conn=QUICK, workload=Finite(size_bytes=3 * 1424),
                  duration_ns=5000 * MS, seed=0, direction="down")
    r = run(get("minrtt"), sc)
    t = _tables(r)
    assert t["drop"].select("t_ns", "seq_or_ack", "reason").rows() == [(1_514_000, 1, 1)]
    assert t["rcv"]["t_ns"].to_list()[:2] == [13_028_000, 14_542_000]
    assert r.summary["random_losses"] == 1 and r.summary["completed"]
    check_all(sc, r)
