"""The compiled core's receive side (native/engine/src/receiver.rs: `workbench_core.run_receiver`)
against the Python engine's (`ConnReceiver` + `SubflowReceiver` on an `EventLoop`).

Random arrivals over 1-3 subflows (segments lost for good, duplicated, reordered, bursts at one
instant, idle gaps longer than the RTO guess and than the delayed-ACK timer), with and without
delayed ACKs, window growth and receive-buffer autotuning (joined subflows whose buffers are set up
late included). Every ACK must match field by field and in order (time, subflow, cumulative ACK,
SACK / DSACK, DATA_ACK, window, echoed timestamp), and so must the final state of the connection
and of each subflow.
"""

from __future__ import annotations

import random

import workbench_core
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay.events import EventLoop
from workbench.replay.link import Link
from workbench.replay.mptcp import ConnReceiver
from workbench.replay.paths import StepSeries
from workbench.replay.tcp import DataPkt, SubflowReceiver

MS = 1_000_000
Event = tuple[int, int, int, int, int, int, int, int]  # t_ns, kind, sf, idx, dsn, plen, t_snd_ns, ts_ecr_ns


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict, list[Event]]:
    n_sf = draw(st.integers(1, 3))
    mss = draw(st.sampled_from([1424, 1000, 536]))
    autotune = draw(st.booleans())
    cfg = {
        "rcv_buf_bytes": draw(st.integers(20_000, 2_000_000)),
        "wnd_init_bytes": draw(st.none() | st.integers(5_000, 100_000)),
        "buf_init_bytes": draw(st.integers(20_000, 200_000)) if autotune else None,
        "rcv_space_init_bytes": draw(st.integers(1, 30_000)) if autotune else 0,
        "mss_bytes": mss,
        "delayed_ack": draw(st.booleans()),
        "delack_ns": draw(st.sampled_from([1 * MS, 40 * MS])),
        "quickack_on_meta_ooo": draw(st.booleans()),
        "wnd_incr_bytes": draw(st.sampled_from([0, 2 * mss])),
        "init_later": [k > 0 and draw(st.booleans()) for k in range(n_sf)],
    }
    n = draw(st.integers(1, 160))
    segs = []  # (sf, idx, dsn, plen)
    dsn = 0
    next_idx = [0] * n_sf
    for _ in range(n):
        sf = draw(st.integers(0, n_sf - 1))
        plen = draw(st.just(mss) | st.integers(1, mss))
        segs.append((sf, next_idx[sf], dsn, plen))
        next_idx[sf] += 1
        dsn += plen
    # arrival order: the send order with local reordering; some lost for good, some twice
    keyed = []
    for pos, s in enumerate(segs):
        copies = draw(st.sampled_from([1, 1, 1, 1, 1, 1, 0, 2]))
        keyed += [(pos + draw(st.floats(0, 8)), s) for _ in range(copies)]
    keyed.sort(key=lambda x: x[0])
    events: list[Event] = []
    t = 0
    ecr = 0
    for _, (sf, idx, d, plen) in keyed:
        t += draw(st.sampled_from([0, 0, 50_000, 1 * MS, 3 * MS, 60 * MS, 300 * MS]))
        ecr = draw(st.integers(ecr, t))
        events.append((t, 0, sf, idx, d, plen, max(0, t - draw(st.integers(0, 80 * MS))), ecr))
    for k, later in enumerate(cfg["init_later"]):
        if later:
            events.append((draw(st.integers(0, max(t, 1))), 1, k, 0, 0, 0, 0, 0))
    return cfg, events


def python_receiver(cfg: dict, events: list[Event]) -> tuple[list, tuple, list]:
    loop = EventLoop()
    acks: list = []
    ack_link = Link(loop, name="acks", rate_bps=StepSeries.constant(1e15), owd_ns=StepSeries.constant(0.0),
                    loss=StepSeries.constant(0.0), buffer_bytes=10**12, rng=random.Random(0),
                    deliver=acks.append)
    meta = ConnReceiver(cfg["rcv_buf_bytes"], cfg["wnd_init_bytes"], buf_init_bytes=cfg["buf_init_bytes"],
                        rcv_space_init_bytes=cfg["rcv_space_init_bytes"], mss_bytes=cfg["mss_bytes"])
    rcvs = [SubflowReceiver(loop, index=k, meta=meta, link=ack_link, rec=None, ack_bytes=66,
                            delayed_ack=cfg["delayed_ack"], delack_ns=cfg["delack_ns"],
                            quickack_on_meta_ooo=cfg["quickack_on_meta_ooo"], wnd_incr_bytes=cfg["wnd_incr_bytes"],
                            init_later=later)
            for k, later in enumerate(cfg["init_later"])]
    for t, kind, sf, idx, dsn, plen, t_snd, ecr in events:
        if kind == 0:
            pkt = DataPkt(sf, idx, 0, plen, dsn, t_snd, False, False, ecr)
            loop.at(t, rcvs[sf].on_data, pkt)
        else:
            loop.at(t, lambda r: r.init_buffer_space(), rcvs[sf])
    loop.run()
    got = [(a.t_snd_ns, a.sf, a.ack, a.sack, a.data_ack, a.rwnd, a.ts_ecr_ns) for a in acks]
    m = (meta.rcv_nxt, meta.ooo_bytes, meta.max_ooo_bytes, meta.wnd_cap, meta.drs_space, meta.wnd_sent_end)
    s = [(r.rcv_nxt, r.rcv_ssthresh, r.wnd_cap, r.rcv_space, r.rcv_rtt_us8, r.ts_recent_ns) for r in rcvs]
    return got, m, s


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_receive_side_equals_the_python_engine_ack_by_ack(sc) -> None:
    cfg, events = sc
    py_acks, py_meta, py_sfs = python_receiver(cfg, events)
    rs_acks, rs_meta, rs_sfs = workbench_core.run_receiver(workbench_core.ReceiverConfig(**cfg), events)
    assert rs_acks == py_acks
    assert rs_meta == py_meta
    assert rs_sfs == py_sfs


def test_holes_by_hand() -> None:
    """1000-byte segments, immediate ACKs, a 100 kB buffer. On one subflow, segments 0, 2, 1: the
    subflow holds 2 (SACKed) and its fill ACKs all 3000 bytes. Then on a second subflow, data at DSN
    4000 before the first subflow's 3000: the connection holds 1000 bytes out of order, the window
    it announces is held at the right edge already announced (103000, so 100 kB: its free space, 99 kB,
    would shrink it, which mptcp_set_rwin never does), and the
    fill takes the DATA_ACK to 5000."""
    cfg = workbench_core.ReceiverConfig(rcv_buf_bytes=100_000, wnd_init_bytes=None, buf_init_bytes=None,
                                        rcv_space_init_bytes=0, mss_bytes=1000, delayed_ack=False, delack_ns=MS,
                                        quickack_on_meta_ooo=False, wnd_incr_bytes=0, init_later=[False, False])
    events = [(10, 0, 0, 0, 0, 1000, 0, 0), (20, 0, 0, 2, 2000, 1000, 0, 0), (30, 0, 0, 1, 1000, 1000, 0, 0),
              (40, 0, 1, 0, 4000, 1000, 0, 0), (50, 0, 0, 3, 3000, 1000, 0, 0)]
    acks, meta, sfs = workbench_core.run_receiver(cfg, events)
    assert acks == [(10, 0, 1, -1, 1000, 100_000, 0), (20, 0, 1, 2, 1000, 100_000, 0),
                    (30, 0, 3, -1, 3000, 100_000, 0), (40, 1, 1, -1, 3000, 100_000, 0),
                    (50, 0, 4, -1, 5000, 100_000, 0)]
    assert meta[:3] == (5000, 0, 1000)
    assert [s[0] for s in sfs] == [4, 1]
