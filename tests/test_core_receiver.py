"""The compiled core's receive side (native/engine/src/receiver.rs: `workbench_core.run_receiver`) against
the Linux receive path it models, worked by hand, and against invariants over random arrivals.

Worked examples (the kernel function each follows in brackets): an ACK for every second in-order
segment, else on the delayed-ACK timer, after 16 quick ACKs and again after an idle gap longer than
the RTO (__tcp_ack_snd_check, TCP_MAX_QUICKACKS, tcp_event_data_recv); an immediate ACK for data out
of order with its SACK block, and a DSACK for a duplicate (tcp_data_queue, RFC 2018 / 2883); the
DATA_ACK as the connection-level in-order point over subflows; the announced window as the free
space of the MPTCP socket's buffer, at most the subflow's rcv_ssthresh, never moving the right edge
back (__tcp_select_window, mptcp_set_rwin); rcv_ssthresh growth (tcp_grow_window); the receiver's RTT
estimate from echoed timestamps and the buffer step one RTT after the last (tcp_rcv_rtt_update,
mptcp_rcv_space_adjust / tcp_rcvbuf_grow).

Invariants over random arrivals on 1-3 subflows (segments lost for good, duplicated, reordered,
bursts at one instant, idle gaps longer than the RTO guess and the delayed-ACK timer; delayed ACKs,
window growth and autotuning on or off, joined subflows whose buffers are set up late), from a walk
of the arrivals here: every ACK's cumulative ACK and DATA_ACK lie between the in-order points just
before and just at its time, and the last ones reach the final in-order points; SACK blocks name
segments received above the cumulative ACK; every duplicate is answered at once by a DSACK and every
out-of-order segment by a SACK (the exact ACK sequence); windows stay within the buffer and the right
edge never moves back; echoed timestamps are ones received; the same input gives the same output.
With immediate ACKs and no autotuning the whole ACK sequence (window and echoed timestamp included)
is predicted here from those rules.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import NamedTuple

import workbench_core
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MS = 1_000_000
Event = tuple[int, int, int, int, int, int, int, int]  # t_ns, kind, sf, idx, dsn, plen, t_snd_ns, ts_ecr_ns
Ack = tuple[int, int, int, int, int, int, int]  # t_snd_ns, sf, ack, sack, data_ack, rwnd, ts_ecr_ns
SACK_NONE, DSACK = -1, -2


def config(**kw: object) -> workbench_core.ReceiverConfig:
    args: dict = {"rcv_buf_bytes": 100_000, "wnd_init_bytes": None, "buf_init_bytes": None, "rcv_space_init_bytes": 0,
                  "mss_bytes": 1000, "delayed_ack": False, "delack_ns": 40 * MS, "quickack_on_meta_ooo": False,
                  "wnd_incr_bytes": 0, "init_later": [False]}
    return workbench_core.ReceiverConfig(**{**args, **kw})


def seg(t: int, sf: int, idx: int, dsn: int, plen: int = 1000, t_snd: int = 0, ecr: int = 0) -> Event:
    return (t, 0, sf, idx, dsn, plen, t_snd, ecr)


def in_order(n: int, *, t0: int = 1 * MS, dt: int = 1 * MS, sf: int = 0, idx0: int = 0, dsn0: int = 0) -> list[Event]:
    return [seg(t0 + k * dt, sf, idx0 + k, dsn0 + 1000 * k) for k in range(n)]


# ----------------------------------------------------------------------------- worked examples
def test_delayed_ack_every_second_segment_and_on_the_timer() -> None:
    """One subflow, 1000-byte segments 1 ms apart, delayed ACKs (40 ms timer), a 100 kB window:
    segments 0-15 get the 16 quick ACKs of a new connection; 16 (17 ms) waits (timer for 57 ms); 17
    (18 ms) is the second unacknowledged one: ACK 18 at once; 18 waits, 19 (20 ms) ACKs both. The timer
    armed at 17 ms finds nothing left to acknowledge. Segment 20 at 100 ms (80 ms idle, less than the
    200 ms RTO) waits for the timer: ACK 21 at 140 ms. Segment 21 at 400 ms, after 300 ms idle (more
    than the RTO), puts the receiver back into quick-ACK mode: ACK 22 at once."""
    events = [*in_order(20), seg(100 * MS, 0, 20, 20_000), seg(400 * MS, 0, 21, 21_000)]
    acks, meta, sfs = workbench_core.run_receiver(config(delayed_ack=True), events)
    expect = [(k * MS, 0, k, SACK_NONE, 1000 * k, 100_000, 0) for k in range(1, 17)]
    expect += [(18 * MS, 0, 18, SACK_NONE, 18_000, 100_000, 0), (20 * MS, 0, 20, SACK_NONE, 20_000, 100_000, 0),
               (140 * MS, 0, 21, SACK_NONE, 21_000, 100_000, 0), (400 * MS, 0, 22, SACK_NONE, 22_000, 100_000, 0)]
    assert acks == expect
    assert meta[0] == 22_000 and sfs[0][0] == 22


def test_out_of_order_data_is_acked_at_once_with_sack_and_a_duplicate_with_dsack() -> None:
    """After the 16 quick ACKs, segment 16 (17 ms) waits for the timer. 18 arrives before 17: an
    immediate ACK of 17 with a SACK block for 18 (which also acknowledges 16: the timer then finds
    nothing to do). 17 fills the hole: an immediate ACK of 19 (RFC 5681 4.2). Segments 5 and 18 again:
    immediate ACKs with a DSACK. Segment 21 ahead of 19 and 20, twice: a SACK for it each time. The
    subflow holds 18 (then 21) itself: the connection has nothing out of order, its window is whole."""
    events = [*in_order(17), seg(18 * MS, 0, 18, 18_000), seg(19 * MS, 0, 17, 17_000), seg(20 * MS, 0, 5, 5000),
              seg(21 * MS, 0, 18, 18_000), seg(22 * MS, 0, 21, 21_000), seg(23 * MS, 0, 21, 21_000)]
    acks, meta, sfs = workbench_core.run_receiver(config(delayed_ack=True), events)
    assert acks[:16] == [(k * MS, 0, k, SACK_NONE, 1000 * k, 100_000, 0) for k in range(1, 17)]
    assert acks[16:] == [(18 * MS, 0, 17, 18, 17_000, 100_000, 0), (19 * MS, 0, 19, SACK_NONE, 19_000, 100_000, 0),
                         (20 * MS, 0, 19, DSACK, 19_000, 100_000, 0), (21 * MS, 0, 19, DSACK, 19_000, 100_000, 0),
                         (22 * MS, 0, 19, 21, 19_000, 100_000, 0), (23 * MS, 0, 19, 21, 19_000, 100_000, 0)]
    assert meta[:3] == (19_000, 0, 0) and sfs[0][0] == 19


def test_quick_ack_when_the_connection_holds_data_out_of_order() -> None:
    """Subflow 1 carries DSN 1000 on while subflow 0's DSN 0 is missing: in order on the subflow, out of
    order for the connection. With quickack_on_meta_ooo (the out-of-tree kernel) each such segment
    restarts the quick-ACK budget: all 18 segments are ACKed at once. Without it (upstream), the 16
    quick ACKs run out: segment 16 waits and 17 ACKs both. Every ACK's DATA_ACK stays 0."""
    events = in_order(18, sf=1, dsn0=1000)
    base = {"delayed_ack": True, "init_later": [False, False]}
    quick, _, _ = workbench_core.run_receiver(config(quickack_on_meta_ooo=True, **base), events)
    assert [(a[0], a[1], a[2], a[4]) for a in quick] == [(k * MS, 1, k, 0) for k in range(1, 19)]
    upstream, meta, _ = workbench_core.run_receiver(config(quickack_on_meta_ooo=False, **base), events)
    assert [(a[0], a[2], a[4]) for a in upstream] == [(k * MS, k, 0) for k in range(1, 17)] + [(18 * MS, 18, 0)]
    assert meta[:3] == (0, 18_000, 18_000)  # nothing in order, 18 kB held out of order


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


def test_the_window_is_the_free_space_of_the_buffer() -> None:
    """A 10 kB buffer, immediate ACKs, two subflows (the first announced window: 10 kB, right edge 10000).
      1 ms: subflow 1 brings DSN 3000-4000: out of order for the connection; free space 9000 would end
            at 9000, short of the edge 10000: announced 10000 - 0 = 10000.
      2 ms: DSN 0 on subflow 0: in order to 1000; free 9000 ends at 10000 = the edge: 9000.
      3 ms: DSN 1000: in order to 2000; free 9000 ends at 11000 (new edge): 9000, what the buffer allows.
      4 ms: DSN 2000 fills the hole: in order to 4000, nothing held: 10000 (edge 14000).
      5 ms: subflow 1 brings DSN 6000: held out of order again; free 9000 would end at 13000 < 14000:
            the edge stays, 10000."""
    events = [seg(1 * MS, 1, 0, 3000), seg(2 * MS, 0, 0, 0), seg(3 * MS, 0, 1, 1000), seg(4 * MS, 0, 2, 2000),
              seg(5 * MS, 1, 1, 6000)]
    acks, meta, _ = workbench_core.run_receiver(config(rcv_buf_bytes=10_000, init_later=[False, False]), events)
    assert acks == [(1 * MS, 1, 1, SACK_NONE, 0, 10_000, 0), (2 * MS, 0, 1, SACK_NONE, 1000, 9000, 0),
                    (3 * MS, 0, 2, SACK_NONE, 2000, 9000, 0), (4 * MS, 0, 3, SACK_NONE, 4000, 10_000, 0),
                    (5 * MS, 1, 2, SACK_NONE, 4000, 10_000, 0)]
    assert meta == (4000, 1000, 1000, 10_000, 0, 14_000)


def test_rcv_ssthresh_grows_per_tcp_grow_window() -> None:
    """A 20 kB buffer announcing 10 kB at first, growing by 2 x MSS (2000) per new segment
    (tcp_grow_window: rcv_ssthresh += max(2 x advmss, 2 x len), up to what the buffer allows): windows
    12000, 14000, ..., 20000, then no more. A duplicate does not grow it; with a step of 1000 a full
    segment grows it by 2 x 1000 and a 300-byte one by 1000."""
    acks, _, sfs = workbench_core.run_receiver(
        config(rcv_buf_bytes=20_000, wnd_init_bytes=10_000, wnd_incr_bytes=2000), in_order(7))
    assert [a[5] for a in acks] == [12_000, 14_000, 16_000, 18_000, 20_000, 20_000, 20_000]
    assert sfs[0][1] == 20_000
    dup = [seg(1 * MS, 0, 0, 0), seg(2 * MS, 0, 0, 0), seg(3 * MS, 0, 1, 1000)]
    acks, _, _ = workbench_core.run_receiver(config(wnd_init_bytes=10_000, wnd_incr_bytes=2000), dup)
    assert [(a[3], a[5]) for a in acks] == [(SACK_NONE, 12_000), (DSACK, 12_000), (SACK_NONE, 14_000)]
    small = [seg(1 * MS, 0, 0, 0, 1000), seg(2 * MS, 0, 1, 1000, 300), seg(3 * MS, 0, 2, 1300, 1000)]
    acks, _, _ = workbench_core.run_receiver(config(wnd_init_bytes=5000, wnd_incr_bytes=1000), small)
    assert [a[5] for a in acks] == [7000, 8000, 10_000]


def test_receiver_rtt_and_the_buffer_step_one_rtt_after_the_last() -> None:
    """Autotuning: the first space 5000 B, the first buffer's window 20 kB (tcp_rmem[1]), rcv_ssthresh
    from 10 kB by 2000 per segment, 1000-byte segments, immediate ACKs, the measurement from t = 0.
      10 ms: echoes no timestamp: no RTT sample, so no measurement yet.
      20 ms: echoes 10 ms: sample 10 ms, the estimate x8 = 80000 (the first taken whole). A
             measurement: 2000 B read since 0, not more than the space: no step, a new one from here.
      21-29 ms: one RTT (10 ms) has not passed.
      30 ms: echoes 12 ms: sample 18 ms, x8 = 80000 - 80000/8 + 18000 = 88000, RTT 11 ms: not yet.
      31 ms: 11 ms since 20 ms: 10000 B read (12000 - 2000) > 5000: the step. tcp_rcvbuf_grow:
             2 x 10000 + 2 x (2 x 10000 x (10000 - 5000) / 5000) = 60000, for the MPTCP socket and the
             subflow (from its own space, also 5000).
    rcv_ssthresh reached the first buffer's 20000 at the fifth segment; the ACK at 31 ms still shows
    20000 (it grew before the step), the next one 22000."""
    events = [seg(10 * MS, 0, 0, 0), seg(20 * MS, 0, 1, 1000, ecr=10 * MS)]
    events += [seg((20 + k) * MS, 0, 1 + k, 1000 * (1 + k), ecr=10 * MS) for k in range(1, 9)]
    events += [seg(30 * MS, 0, 10, 10_000, ecr=12 * MS), seg(31 * MS, 0, 11, 11_000, ecr=12 * MS),
               seg(32 * MS, 0, 12, 12_000, ecr=12 * MS)]
    acks, meta, sfs = workbench_core.run_receiver(
        config(rcv_buf_bytes=1_000_000, wnd_init_bytes=10_000, buf_init_bytes=20_000, rcv_space_init_bytes=5000,
               wnd_incr_bytes=2000), events)
    assert [a[5] for a in acks] == [12_000, 14_000, 16_000, 18_000] + [20_000] * 8 + [22_000]
    assert meta == (13_000, 0, 0, 60_000, 10_000, 13_000 + 22_000)
    assert sfs[0][1:5] == (22_000, 60_000, 10_000, 88_000)


# ----------------------------------------------------------------------------- invariants
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
    # arrival order: the send order with local reordering; some lost for good, some twice (in some
    # scenarios rarely, so that long in-order runs leave the delayed ACKs to the timer)
    jitter = draw(st.sampled_from([0.0, 1.5, 8.0]))
    fates = draw(st.sampled_from([[1, 1, 1, 1, 1, 1, 0, 2], [1] * 30 + [0, 2]]))
    keyed = []
    for pos, s in enumerate(segs):
        copies = draw(st.sampled_from(fates))
        keyed += [(pos + draw(st.floats(0, jitter)), s) for _ in range(copies)]
    keyed.sort(key=lambda x: x[0])
    events: list[Event] = []
    t = 0
    ecr = 0
    # idle gaps beyond the RTO guess restart the quick ACKs: some scenarios have none, so that the
    # delayed-ACK timer has work
    gaps = draw(st.sampled_from([[0, 0, 50_000, 1 * MS, 3 * MS, 60 * MS, 300 * MS], [0, 50_000, 1 * MS, 3 * MS]]))
    for _, (sf, idx, d, plen) in keyed:
        t += draw(st.sampled_from(gaps))
        ecr = draw(st.integers(ecr, t))
        events.append((t, 0, sf, idx, d, plen, max(0, t - draw(st.integers(0, 80 * MS))), ecr))
    for k, later in enumerate(cfg["init_later"]):
        if later:
            events.append((draw(st.integers(0, max(t, 1))), 1, k, 0, 0, 0, 0, 0))
    return cfg, events


class Step(NamedTuple):
    """One data arrival, as the receive side must see it, and the in-order points after it."""

    t: int
    sf: int
    idx: int
    plen: int
    t_snd: int
    kind: str  # "in" (the subflow's next segment), "ooo" (beyond it), "dup" (below it)
    mex: tuple[int, ...]  # each subflow's next expected segment after this arrival
    data_ack: int  # the connection's in-order point after it
    ooo_bytes: int  # bytes the connection holds beyond it


def walk(n_sf: int, events: list[Event]) -> list[Step]:
    """The arrivals in the order the event list runs them (by time, then as listed). A subflow hands
    its segments to the connection in its own order; the connection's in-order point is the end of
    the contiguous DSN ranges from 0 among those handed over."""
    got: list[dict[int, tuple[int, int]]] = [{} for _ in range(n_sf)]
    mex = [0] * n_sf
    handed: dict[int, int] = {}  # dsn -> plen
    data_ack = 0
    steps = []
    for t, _, k, i, dsn, plen, t_snd, _ in sorted((e for e in events if e[1] == 0), key=lambda e: e[0]):
        kind = "in" if i == mex[k] else "ooo" if i > mex[k] else "dup"
        got[k].setdefault(i, (dsn, plen))
        while mex[k] in got[k]:
            d, ln = got[k][mex[k]]
            handed[d] = ln
            mex[k] += 1
        while data_ack in handed:
            data_ack += handed[data_ack]
        ooo = sum(ln for d, ln in handed.items() if d > data_ack)
        steps.append(Step(t, k, i, plen, t_snd, kind, tuple(mex), data_ack, ooo))
    return steps


def predicted_acks(cfg: dict, steps: list[Step]) -> list[Ack]:
    """Immediate ACKs, no autotuning: one ACK per arrival, from the rules of the worked examples.
    Window: the buffer's free space (rcv_buf less what the connection holds out of order), at most the
    subflow's rcv_ssthresh (grown per tcp_grow_window on new data), the right edge never moving back.
    Echoed timestamp: TS.Recent, taken from a segment at or below the last ACK sent (RFC 7323 4.3)."""
    n_sf = len(cfg["init_later"])
    buf = cfg["rcv_buf_bytes"]
    wnd_init = buf if cfg["wnd_init_bytes"] is None else min(cfg["wnd_init_bytes"], buf)
    ssthresh, last_ack, ts_recent = [wnd_init] * n_sf, [0] * n_sf, [0] * n_sf
    edge = wnd_init  # the first window (the handshake's) ends there
    out = []
    for s in steps:
        k = s.sf
        if s.idx <= last_ack[k] and s.t_snd > ts_recent[k]:
            ts_recent[k] = s.t_snd
        if cfg["wnd_incr_bytes"] and s.kind != "dup" and ssthresh[k] < buf:
            ssthresh[k] += min(max(cfg["wnd_incr_bytes"], 2 * s.plen), buf - ssthresh[k])
        w = max(min(buf - s.ooo_bytes, ssthresh[k]), 0)
        edge = max(edge, s.data_ack + w)
        sack = SACK_NONE if s.kind == "in" else s.idx if s.kind == "ooo" else DSACK
        out.append((s.t, k, s.mex[k], sack, s.data_ack, edge - s.data_ack, ts_recent[k]))
        last_ack[k] = s.mex[k]
    return out


def check(cfg: dict, events: list[Event], acks: list[Ack], meta: tuple, sfs: list[tuple]) -> None:
    n_sf = len(cfg["init_later"])
    steps = walk(n_sf, events)
    times = [s.t for s in steps]
    start = (tuple([0] * n_sf), 0)

    def before(t: int) -> tuple[tuple[int, ...], int]:  # in-order points after every arrival earlier than t
        j = bisect_left(times, t)
        return (steps[j - 1].mex, steps[j - 1].data_ack) if j else start

    def at(t: int) -> tuple[tuple[int, ...], int]:  # ...and after those at t too
        j = bisect_right(times, t)
        return (steps[j - 1].mex, steps[j - 1].data_ack) if j else start

    # SACK and DSACK: exactly one immediate ACK per arrival out of order or duplicate, in that order
    blocks = [a for a in acks if a[3] != SACK_NONE]
    assert [a[:5] for a in blocks] == [(s.t, s.sf, s.mex[s.sf], s.idx if s.kind == "ooo" else DSACK, s.data_ack)
                                       for s in steps if s.kind != "in"]
    assert all(a[3] > a[2] for a in blocks if a[3] >= 0)  # a SACK block lies above the cumulative ACK
    # plain ACKs: at an in-order arrival of their subflow or a delayed-ACK time after one; between the
    # in-order points before and at their time; no more of them than in-order arrivals
    for k in range(n_sf):
        arrivals = [s.t for s in steps if s.sf == k and s.kind == "in"]
        plain = [a for a in acks if a[1] == k and a[3] == SACK_NONE]
        assert len(plain) <= len(arrivals)
        for t, _, ack, _, data_ack, _, _ in plain:
            assert t in arrivals or t - cfg["delack_ns"] in arrivals
            (lo, dlo), (hi, dhi) = before(t), at(t)
            assert lo[k] <= ack <= hi[k] and dlo <= data_ack <= dhi
    # monotone per subflow: cumulative ACK, DATA_ACK, echoed timestamp (one the subflow received)
    for k in range(n_sf):
        mine = [a for a in acks if a[1] == k]
        for f in (2, 4, 6):
            assert [a[f] for a in mine] == sorted(a[f] for a in mine)
        sent_times = {0} | {s.t_snd for s in steps if s.sf == k}
        assert all(a[6] in sent_times for a in mine)
        # every in-order segment is acknowledged in the end
        final = steps[-1].mex[k] if steps else 0
        assert (mine[-1][2] if mine else 0) == final == sfs[k][0]
    # the connection: every in-order byte acknowledged in the end; windows within the buffer, the right
    # edge never moving back
    assert acks == sorted(acks, key=lambda a: a[0])
    assert [a[4] for a in acks] == sorted(a[4] for a in acks)
    final_data_ack = steps[-1].data_ack if steps else 0
    assert max((a[4] for a in acks), default=0) == final_data_ack == meta[0]
    assert meta[1] == (steps[-1].ooo_bytes if steps else 0) and meta[2] == max((s.ooo_bytes for s in steps), default=0)
    assert all(0 <= a[5] <= cfg["rcv_buf_bytes"] for a in acks)
    edges = [a[4] + a[5] for a in acks]
    assert edges == sorted(edges)
    assert meta[3] <= cfg["rcv_buf_bytes"] and all(s[2] <= cfg["rcv_buf_bytes"] for s in sfs)
    if not cfg["delayed_ack"] and cfg["buf_init_bytes"] is None:
        assert acks == predicted_acks(cfg, steps)


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_acks_follow_the_arrivals(sc: tuple[dict, list[Event]]) -> None:
    cfg, events = sc
    out = workbench_core.run_receiver(workbench_core.ReceiverConfig(**cfg), events)
    check(cfg, events, *out)
    assert workbench_core.run_receiver(workbench_core.ReceiverConfig(**cfg), events) == out  # deterministic
