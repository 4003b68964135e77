"""The compiled engine's records and a shared link's dispatch, in whole runs: each subflow's packets
reach that subflow's own receiver and sender when they share a bottleneck (against what each subflow
sent), the recorder's row kinds arrive as typed frames that the tables are built from (against the
schemas and the tables' own counts), the handshake rows are the named records; and minRTT's scan
(`workbench.schedulers._minrtt._lowest_rtt_available`) against a hand-worked choice."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import pytest

from workbench.experiment._model import LinkSpec
from workbench.replay import Finite, PathConfig, Route, StepSeries, run_network, run_replay
from workbench.replay.recorder import HandshakeRow
from workbench.replay.tables import RECORD_SCHEMAS, record_frame
from workbench.schedulers import get
from workbench.schedulers._minrtt import _lowest_rtt_available
from workbench.schedulers.base import CA_LOSS, CA_OPEN

MS = 1_000_000
S = 1_000_000_000


def _spec(name: str, rate_bps: float, owd_ns: int, buffer_bytes: int = 100_000) -> LinkSpec:
    return LinkSpec(name, rate_bps=StepSeries.constant(rate_bps), owd_ns=StepSeries.constant(owd_ns),
                    buffer_bytes=buffer_bytes)


@pytest.mark.parametrize("engine", ["compiled", "bridge"])
def test_a_shared_link_hands_each_packet_to_its_own_subflow(engine: str) -> None:
    """Two subflows share the data bottleneck "fwd" (10 Mbit/s, 5 ms, a 30 kB queue that overflows), then
    part: subflow 0's data go on over a 1 ms link, subflow 1's over a 100 ms one; each has its own ACK
    link (5 ms, 100 ms). Hand-worked bounds: subflow 0's segments take at most 5 + 1 ms plus a full
    queue (30 kB = 24 ms) and two serialisations (< 2 ms), so < 40 ms; subflow 1's at least 105 ms. Its
    ACKs take at least 100 ms, subflow 0's less. Every segment a receiver got is one its subflow sent."""
    links = [_spec("fwd", 10e6, 5 * MS, buffer_bytes=30_000), _spec("last0", 100e6, 1 * MS),
             _spec("last1", 100e6, 100 * MS), _spec("back0", 10e6, 5 * MS), _spec("back1", 10e6, 100 * MS)]
    routes = [Route("p", data=("fwd", "last0"), ack=("back0",)), Route("q", data=("fwd", "last1"), ack=("back1",))]
    r = run_network(links, routes, get("minrtt"), workload=Finite(size_bytes=1_000_000), duration_ns=20 * S,
                    engine=engine)
    assert r.summary["completed"] and r.summary["delivered_bytes"] == 1_000_000
    assert r.summary["queue_drops"] > 0  # the shared queue overflowed
    snd, rcv, ack = (record_frame(r.recorder, k) for k in ("snd", "rcv", "ack"))
    key = ["subflow", "seq", "dsn", "payload_bytes"]
    for k in (0, 1):
        sent = set(snd.filter(pl.col("subflow") == k).select(key).iter_rows())
        got = set(rcv.filter(pl.col("subflow") == k).select(key).iter_rows())
        assert got and got <= sent, k
    owd = {k: (rcv.filter(pl.col("subflow") == k)["owd_ns"], ack.filter(pl.col("subflow") == k)["owd_ns"])
           for k in (0, 1)}
    assert owd[0][0].max() < 40 * MS and owd[1][0].min() >= 105 * MS
    assert owd[0][1].max() < 100 * MS and owd[1][1].min() >= 100 * MS
    assert min(len(owd[k][j]) for k in (0, 1) for j in (0, 1)) > 20  # both subflows carried a share


@pytest.mark.parametrize("engine", ["compiled", "bridge"])
def test_record_frames_are_typed_and_feed_the_tables(engine: str) -> None:
    """The recorder gives each row kind as a typed frame (`record_frame`), the tables' input; the
    compiled engine's columns come from Rust buffers, the same whether minRTT runs compiled or through
    the plug-in bridge."""
    paths = [PathConfig.constant("a", rate_bps=8e6, owd_ns=10 * MS, buffer_bytes=30_000, loss=0.01),
             PathConfig.constant("b", rate_bps=4e6, owd_ns=30 * MS, buffer_bytes=60_000)]
    r = run_replay(paths, get("minrtt"), workload=Finite(400_000), duration_ns=10 * S, record=True, seed=3,
                   engine=engine)
    frames = {k: record_frame(r.recorder, k) for k in RECORD_SCHEMAS}
    for kind, schema in RECORD_SCHEMAS.items():
        assert dict(frames[kind].schema) == schema, kind
        assert frames[kind].height > 0, kind
    drops = frames["drop"]
    assert drops.filter(~drops["is_data"])["dsn"].null_count() == drops.filter(~drops["is_data"]).height
    ev = r.events
    assert ev.filter((ev["point"] == "snd") & (ev["payload_bytes"] > 0)).height == frames["snd"].height
    assert ev.filter(ev["point"] == "drop").height == drops.height
    assert r.samples.height == frames["samples"].height
    assert frames["snd"]["payload_bytes"].sum() == 400_000 + frames["snd"].filter(
        frames["snd"]["is_retrans"] | frames["snd"]["is_reinject"])["payload_bytes"].sum()
    # the counters agree with the rows
    assert drops.height == r.summary["queue_drops"] + r.summary["random_losses"]
    assert frames["snd"]["is_retrans"].sum() == r.summary["retransmissions"]
    assert frames["snd"].height == r.summary["data_packets_sent"]
    rcv = ev.filter((ev["point"] == "rcv") & (ev["payload_bytes"] > 0))
    assert sorted(rcv["owd_ns"].to_list()) == sorted(frames["rcv"]["owd_ns"].to_list())
    # the handshake: named records, SYN / SYN-ACK / ACK per subflow
    assert r.recorder.handshake and all(type(h) is HandshakeRow for h in r.recorder.handshake)
    assert [h.tcp_flags for h in r.recorder.handshake] == [0x002, 0x012, 0x010] * 2


def _sf(index: int, *, srtt_ms: float, cwnd: int = 10, in_flight: int = 0, queued_bytes: int = 0,
        backup: bool = False, established: bool = True, pf: bool = False, ca_state: int = CA_OPEN) -> SimpleNamespace:
    return SimpleNamespace(index=index, srtt_us8=int(srtt_ms * 1000) << 3, cwnd=cwnd, in_flight=in_flight,
                           queued_bytes=queued_bytes, mss=1424, backup=backup, established=established, pf=pf,
                           ca_state=ca_state)


def test_minrtt_scan_picks_the_fastest_subflow_with_room() -> None:
    """get_available_subflow's common case (mptcp_sched.c, v0.95), worked by hand:
    0: 5 ms, but cwnd full (in_flight 10 >= cwnd 10)           -> busy
    1: 2 ms, a backup                                           -> counted, not chosen
    2: 8 ms, 6 segments of room, 5 x 1424 B queued (< 6 x 1424)  -> available
    3: 20 ms, free                                              -> available, slower than 2
    4: 1 ms, potentially failed                                 -> skipped (not busy)
    5: 3 ms, in Loss state                                      -> busy
    6: 8 ms, free, as fast as 2 but later                       -> the first of equals stays
    so subflow 2, with "some subflow was busy" and one backup."""
    subs = [_sf(0, srtt_ms=5, in_flight=10), _sf(1, srtt_ms=2, backup=True),
            _sf(2, srtt_ms=8, in_flight=4, queued_bytes=5 * 1424), _sf(3, srtt_ms=20),
            _sf(4, srtt_ms=1, pf=True), _sf(5, srtt_ms=3, ca_state=CA_LOSS), _sf(6, srtt_ms=8)]
    sf, busy, n_backup = _lowest_rtt_available(subs)
    assert (sf.index if sf else None, busy, n_backup) == (2, True, 1)
    # 6 x 1424 B queued fills subflow 2's room: it is busy too, and 6 (same srtt) takes its place
    subs[2].queued_bytes = 6 * 1424
    sf, busy, _ = _lowest_rtt_available(subs)
    assert (sf.index if sf else None, busy) == (6, True)
    # nothing busy, nothing available: no choice
    sf, busy, n_backup = _lowest_rtt_available([_sf(0, srtt_ms=1, established=False), _sf(1, srtt_ms=1, pf=True)])
    assert (sf, busy, n_backup) == (None, False, 0)
