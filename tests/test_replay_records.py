"""Typed packet and recorder records, the per-subflow dispatch of a shared link, and the engine-side
O(subflows) scans (minRTT's choice, LIA's and OLIA's group terms) against their Python forms."""

from __future__ import annotations

import random

import pytest

from workbench.replay import Bulk, ConnectionConfig, Finite, PathConfig, StepSeries, run_replay
from workbench.replay.cc import _lia_terms, _olia_terms
from workbench.replay.events import EventLoop
from workbench.replay.link import Link
from workbench.replay.mptcp import lia_terms, lowest_rtt_available, olia_terms
from workbench.replay.network import Route, wire
from workbench.replay.recorder import AckRow, DropRow, HandshakeRow, RcvRow, Recorder, SampleRow, SndRow
from workbench.replay.tables import RECORD_SCHEMAS, record_frame
from workbench.replay.tcp import AckPkt, DataPkt
from workbench.schedulers import get
from workbench.schedulers._minrtt import _lowest_rtt_available
from workbench.testing import StubSubflow

MS = 1_000_000
S = 1_000_000_000


def _link(loop: EventLoop, name: str, owd_ns: int) -> Link:
    return Link(loop, name=name, rate_bps=StepSeries.constant(10e6), owd_ns=StepSeries.constant(owd_ns),
                loss=StepSeries.constant(0.0), buffer_bytes=100_000, rng=random.Random(1),
                deliver=None)  # type: ignore[arg-type]


def test_a_shared_link_hands_each_packet_to_its_own_subflow() -> None:
    loop = EventLoop()
    links = {"fwd": _link(loop, "fwd", 5 * MS), "back0": _link(loop, "back0", 5 * MS),
             "back1": _link(loop, "back1", 5 * MS)}
    got: dict[str, list[object]] = {"data0": [], "data1": [], "ack0": [], "ack1": []}
    routes = [Route("p", ("fwd",), ("back0",)), Route("p", ("fwd",), ("back1",))]
    wire(links, routes, data_ends=[got["data0"].append, got["data1"].append],
         ack_ends=[got["ack0"].append, got["ack1"].append], data_header_bytes=90, ack_bytes=78)
    assert links["fwd"].deliver_by_subflow is not None  # two subflows cross it
    sent = [DataPkt(k % 2, k, 1 + 1000 * k, 1000, 1000 * k, 0, False, False) for k in range(6)]
    for p in sent:
        links["fwd"].send(p, p.plen + 90)
    links["back1"].send(AckPkt(1, 3, -1, 3000, 65535, 0), 78)
    loop.run()
    assert got["data0"] == sent[0::2] and got["data1"] == sent[1::2]
    assert got["ack0"] == [] and [a.ack for a in got["ack1"]] == [3]  # type: ignore[attr-defined]


def test_recorder_rows_are_named_records_and_tables_read_them() -> None:
    paths = [PathConfig.constant("a", rate_bps=8e6, owd_ns=10 * MS, buffer_bytes=30_000, loss=0.01),
             PathConfig.constant("b", rate_bps=4e6, owd_ns=30 * MS, buffer_bytes=60_000)]
    r = run_replay(paths, get("minrtt"), workload=Finite(400_000), duration_ns=10 * S, record=True, seed=3,
                   engine="python")
    rec = r.recorder
    assert isinstance(rec, Recorder)
    for rows, kind in ((rec.snd, SndRow), (rec.rcv, RcvRow), (rec.ack, AckRow), (rec.samples, SampleRow),
                       (rec.drop, DropRow), (rec.handshake, HandshakeRow)):
        assert rows and all(type(x) is kind for x in rows), kind.__name__
    ev = r.events
    snd = ev.filter((ev["point"] == "snd") & (ev["payload_bytes"] > 0))
    assert snd.height == len(rec.snd)
    assert snd["payload_bytes"].sum() == sum(x.payload_bytes for x in rec.snd)
    rcv = ev.filter((ev["point"] == "rcv") & (ev["payload_bytes"] > 0))
    assert sorted(rcv["owd_ns"].to_list()) == sorted(x.owd_ns for x in rec.rcv)
    drops = ev.filter(ev["point"] == "drop")
    assert drops.height == len(rec.drop)
    assert r.samples.height == len(rec.samples)


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_record_frames_are_typed_and_feed_the_tables(engine: str) -> None:
    """Both engines' recorders give each row kind as a typed frame (`record_frame`), the tables' input;
    the compiled engine's columns come from Rust buffers."""
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


def _connection(cc: str, n: int):
    paths = [PathConfig.constant(f"p{i}", rate_bps=10e6, owd_ns=(10 + 10 * i) * MS, buffer_bytes=60_000)
             for i in range(n)]
    r = run_replay(paths, get("minrtt"), workload=Bulk(), duration_ns=2 * S, record=True,
                   conn=ConnectionConfig(cc=cc), engine="python")
    assert r.recorder is not None and r.recorder.conn is not None
    return r.recorder.conn


@pytest.mark.parametrize("n", [2, 4])
def test_engine_scans_match_their_python_forms(n: int) -> None:
    conn = _connection("olia", n)
    subs = conn.subflows
    # vary the subflows so every branch of the scans has something to decide
    subs[0].cwnd = subs[0].in_flight  # busy
    last = subs[-1]  # free, and the fastest
    last.srtt_us8, last.cwnd, last.queued_bytes, last.ca_state = 1, last.in_flight + 5, 0, 0
    assert lowest_rtt_available(subs) == _lowest_rtt_available(subs)
    assert lia_terms(subs) == _lia_terms(subs)
    for sf in subs:
        assert olia_terms(subs, sf) == _olia_terms(subs, sf)
    assert lowest_rtt_available(subs)[0] is subs[-1]  # type: ignore[index]


def test_engine_scans_leave_test_doubles_to_the_python_forms() -> None:
    stubs = [StubSubflow(cwnd=10, ssthresh=5, srtt_ms=20), StubSubflow(cwnd=20, ssthresh=5, srtt_ms=40)]
    assert lowest_rtt_available(stubs) is None
    assert lia_terms(stubs) is None
    assert olia_terms(stubs, stubs[0]) is None
