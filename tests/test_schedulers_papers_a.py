"""The seed-paper schedulers ECF, BLEST, STTF, DAPS and OTIAS: the papers' worked examples on
hand-built views (exact), their headline results in replays (direction, with a margin), and a
per-scheduler smoke test (two paths, finite transfer, every byte delivered once)."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl
import pytest

from workbench.metrics import ooo_segments
from workbench.replay import AppTrace, Bulk, ConnectionConfig, Finite, PathConfig, run_replay
from workbench.schedulers import Scheduler, available, get, info
from workbench.schedulers._daps import lcm_c_int32
from workbench.schedulers._otias import otias_metric_ns
from workbench.schedulers._sttf import sttf_transfer_time_ns

MS = 1_000_000
S = 1_000_000_000
MSS = 1424
MINE = ("ecf", "blest", "sttf", "daps", "otias")


# ---------------------------------------------------------------------------------------- fake views
@dataclass
class FakeSubflow:
    """A SubflowView with settable numbers (what a scheduler reads), for worked examples."""

    index: int
    srtt_ns: int
    cwnd: int
    in_flight: int = 0
    queued: int = 0
    ssthresh: int = 1 << 30
    rttvar_ns: int = 200 * MS
    name: str = ""
    established: bool = True
    pf: bool = False
    backup: bool = False
    ca_state: int = 0
    mss: int = MSS
    segs: set[int] = field(default_factory=set)

    @property
    def srtt_us8(self) -> int:
        return (self.srtt_ns // 1000) << 3

    @property
    def queued_bytes(self) -> int:
        return self.queued * self.mss

    @property
    def packets_out(self) -> int:
        return self.in_flight

    @property
    def unacked_bytes(self) -> int:
        return (self.in_flight + self.queued) * self.mss

    @property
    def in_slow_start(self) -> bool:
        return self.cwnd < self.ssthresh

    def carried(self, seg: int) -> bool:
        return seg in self.segs


class FakeConn:
    """A ConnView over ``n`` unsent MSS segments and a window of ``wnd_bytes``."""

    def __init__(self, n: int, *, wnd_bytes: int = 1 << 40) -> None:
        self.n_segs = n
        self.head = 0
        self.mss = MSS
        self.sent = [False] * n
        self.now_ns = 0
        self.reinject_head = -1
        self.snd_una = 0
        self.wnd_end = wnd_bytes
        self.send_buffer_full = False
        self.oldest_unacked = -1

    def window_allows(self, seg: int) -> bool:
        return (seg + 1) * MSS <= self.wnd_end

    def seg_sent(self, seg: int) -> bool:
        return self.sent[seg]

    def seg_dsn(self, seg: int) -> int:
        return seg * MSS

    def seg_len(self, seg: int) -> int:
        return MSS

    def seg_path_mask(self, seg: int) -> int:
        return 0

    @property
    def unsent_bytes(self) -> int:
        return self.sent[self.head:].count(False) * MSS

    def wake_at(self, t_ns: int) -> None:
        pass

    def penalize(self, index: int) -> None:
        raise AssertionError("no penalization expected here")


def drive(sched: Scheduler, conn: FakeConn, sfs: list[FakeSubflow]) -> dict[int, int]:
    """The engine's push loop on fake views: apply decisions (segments queue on the subflow) until the
    scheduler says wait. Returns {segment: subflow index}."""
    sched.on_start(conn, sfs)  # type: ignore[arg-type]
    out: dict[int, int] = {}
    while True:
        d = sched.select(conn, sfs)  # type: ignore[arg-type]
        if d is None:
            return out
        sub, seg, count = d
        if seg >= 0:
            segs = [seg]
        else:
            segs = []
            i = conn.head
            while len(segs) < count and i < conn.n_segs:
                if not conn.sent[i]:
                    segs.append(i)
                i += 1
        if not segs:
            return out
        for s in segs:
            conn.sent[s] = True
            out[s] = sub
            sfs[sub].segs.add(s)
            sfs[sub].queued += 1
        while conn.head < conn.n_segs and conn.sent[conn.head]:
            conn.head += 1


def arrival_ms(assignment: dict[int, int], sfs: list[FakeSubflow]) -> dict[int, float]:
    """Arrival times with the cwnds frozen: each subflow sends its queue in order, ``cwnd`` segments
    per RTT after the segments already in flight (sent at 0) are acknowledged; one-way = RTT/2."""
    out: dict[int, float] = {}
    for sf in sfs:
        rtt = sf.srtt_ns / MS
        mine = sorted(s for s, k in assignment.items() if k == sf.index)
        free = sf.cwnd - sf.in_flight
        for pos, s in enumerate(mine):
            rounds = 0 if pos < free else 1 + (pos - free) // sf.cwnd
            out[s] = rounds * rtt + rtt / 2
    return out


# ---------------------------------------------------------------------------------------- registry
def test_registered_with_metadata_params_and_variants() -> None:
    assert set(MINE) <= set(available())
    for name in MINE:
        i = info(name)
        assert i.description and "\n" not in i.description and i.source
        for p in i.params:
            assert p.choices is not None or (p.low is not None and p.high is not None), (name, p.name)
            assert p.check(p.default) == p.default
    for name in ("ecf", "blest", "daps", "otias"):
        v = {p.name: p for p in info(name).params}["variant"]
        assert v.default == "kernel" and set(v.choices or ()) == {"kernel", "paper"}
    b = {p.name: p.default for p in info("blest").params}
    assert (b["lambda_init"], b["lambda_min"], b["lambda_max"], b["lambda_bad"], b["lambda_good"]) == (
        1.2, 1.0, 1.3, 0.04, 0.01)
    assert {p.name: p.default for p in info("ecf").params}["beta"] == 0.25


# ---------------------------------------------------------------------------------------- OTIAS
def _otias_example() -> tuple[FakeConn, list[FakeSubflow]]:
    """Seed 001 §II: subflow 1 RTT 200 ms, subflow 2 RTT 20 ms, cwnd 4 each; PDUs 1-4 outstanding
    on subflow 2, PDUs 5..34 (our segments 0..29) ready."""
    return FakeConn(30), [FakeSubflow(0, 200 * MS, 4), FakeSubflow(1, 20 * MS, 4, in_flight=4)]


def _runs(assignment: dict[int, int]) -> list[tuple[str, int, int]]:
    """[(path, first PDU, last PDU)] in PDU numbering (segment 0 = PDU 5)."""
    out: list[tuple[str, int, int]] = []
    for s in sorted(assignment):
        p = "slow" if assignment[s] == 0 else "fast"
        if out and out[-1][0] == p:
            out[-1] = (p, out[-1][1], s + 5)
        else:
            out.append((p, s + 5, s + 5))
    return out


def test_otias_metric_matches_both_formulas() -> None:
    fast = FakeSubflow(1, 20 * MS, 4, in_flight=4)
    # paper narrative (§II-A): PDU 5 on the 20 ms subflow waits one RTT, arrives after 30 ms
    assert otias_metric_ns(fast) == 30 * MS
    # seed eq. 3 says (floor(0/4) + 0.5)·20 ms = 10 ms: the kernel's +1 RTT
    assert otias_metric_ns(fast, variant="paper") == 10 * MS
    slow = FakeSubflow(0, 200 * MS, 4)
    assert otias_metric_ns(slow) == otias_metric_ns(slow, variant="paper") == 100 * MS
    assert otias_metric_ns(slow, extra_queued=4) == 300 * MS  # kernel: behind a full cwnd
    assert otias_metric_ns(slow, extra_queued=4, variant="paper") == 100 * MS  # eq. 3: still 0.5 RTT


def test_otias_worked_example_kernel_variant_arrives_in_order() -> None:
    conn, sfs = _otias_example()
    a = drive(get("otias"), conn, sfs)
    assert len(a) == 30
    # exact assignment with the kernel metric: the fast subflow until its arrival estimate passes the
    # slow one's 100 ms, then one slow cwnd, then the fast subflow again
    assert _runs(a) == [("fast", 5, 20), ("slow", 21, 24), ("fast", 25, 34)]
    t = arrival_ms(a, sfs)
    arrivals = [t[s] for s in range(30)]
    assert arrivals == sorted(arrivals)  # every PDU arrives in order
    assert max(arrivals) == 150.0


def test_otias_worked_example_paper_formula_and_the_papers_claimed_split() -> None:
    conn, sfs = _otias_example()
    a = drive(get("otias", variant="paper"), conn, sfs)
    # seed eq. 3 taken literally: the slow subflow keeps "0.5 RTT" for 8 PDUs
    assert _runs(a) == [("fast", 5, 24), ("slow", 25, 32), ("fast", 33, 34)]
    t = arrival_ms(a, sfs)
    assert [t[s] for s in range(30)] != sorted(t[s] for s in range(30))  # not in order
    # The split the paper states (§II-B: PDUs 5-30 fast, 31-34 slow) follows from neither formula
    # (PDUs 29-32 always share one estimate: floor/ceil steps of cwnd = 4 from PDU 5), and with the
    # stated fixed cwnd 4 / RTT 20 ms it would not arrive in order either: PDUs 29-30 reach the
    # receiver at 150 ms, PDUs 31-34 at 100 ms.
    claimed = {s: (1 if s + 5 <= 30 else 0) for s in range(30)}
    tc = arrival_ms(claimed, [FakeSubflow(0, 200 * MS, 4), FakeSubflow(1, 20 * MS, 4, in_flight=4)])
    assert tc[30 - 5] == 150.0 and tc[31 - 5] == 100.0


def test_otias_retransmission_avoids_the_original_subflow() -> None:
    conn, sfs = _otias_example()
    conn.reinject_head = 0
    sfs[1].segs.add(0)
    sfs[1].in_flight = 0  # the fast subflow has room, but it carried the segment
    d = get("otias").select(conn, sfs)  # type: ignore[arg-type]
    assert d is not None and d[0] == 0 and d[1] == 0


# ---------------------------------------------------------------------------------------- BLEST
def test_blest_15_segment_burst_nothing_on_the_slow_path_views() -> None:
    """Seed 002 Fig. 6: 10 ms / 100 ms paths, cwnd 10 each, a 15-segment burst: the 10 segments that
    fit go to the fast subflow, the other 5 wait for it instead of taking the 100 ms path."""
    for variant, wnd in (("kernel", 6 << 20), ("paper", 128 * 1024)):
        conn = FakeConn(15, wnd_bytes=wnd)
        sfs = [FakeSubflow(0, 10 * MS, 10), FakeSubflow(1, 100 * MS, 10)]
        a = drive(get("blest", variant=variant), conn, sfs)
        assert a == {s: 0 for s in range(10)}, variant
    # minRTT sends the rest on the slow path
    conn = FakeConn(15)
    sfs = [FakeSubflow(0, 10 * MS, 10), FakeSubflow(1, 100 * MS, 10)]
    a = drive(get("minrtt"), conn, sfs)
    assert sorted(s for s, k in a.items() if k == 1) == list(range(10, 15))


def test_blest_paper_variant_uses_the_window_not_the_slow_start_branch() -> None:
    # Algorithm 1: X = MSS·(CWND_F + (rtts-1)/2)·rtts = 1424·(10 + 4.5)·10 = 206,480 B; λ = 1.2
    x_bytes = MSS * (10 + 4.5) * 10
    for wnd, slow_used in ((int(x_bytes * 1.2) + MSS * 2 + 10, True), (int(x_bytes * 1.2), False)):
        conn = FakeConn(15, wnd_bytes=wnd)
        sfs = [FakeSubflow(0, 10 * MS, 10), FakeSubflow(1, 100 * MS, 10)]
        a = drive(get("blest", variant="paper"), conn, sfs)
        assert (1 in a.values()) is slow_used, wnd


def test_blest_lambda_moves_within_bounds_once_per_rtt() -> None:
    b = get("blest")
    b.on_start(FakeConn(1), [])  # type: ignore[arg-type]
    assert b.lambda_ == pytest.approx(1.2)
    b._update_lambda(0, 100_000)  # first call only starts the clock
    b._retrans_flag = True
    b._update_lambda(50 * MS, 100_000)  # within one slow-path RTT: no change
    assert b.lambda_ == pytest.approx(1.2)
    b._update_lambda(100 * MS, 100_000)
    assert b.lambda_ == pytest.approx(1.24)
    for k in range(5):
        b._retrans_flag = True
        b._update_lambda((200 + 100 * k) * MS, 100_000)
    assert b.lambda_ == pytest.approx(1.3)
    for k in range(40):
        b._update_lambda((800 + 100 * k) * MS, 100_000)
    assert b.lambda_ == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------- ECF
@pytest.mark.parametrize(("k_segs", "waits"), [(17, False), (18, True)])
def test_ecf_kernel_delta_floor(k_segs: int, waits: bool) -> None:
    """SCHEDULERS.md §4: RTT_f 20 ms, RTT_s 80 ms, rttvar floored at 200 ms (δ = 100 ms): the kernel
    refuses the slow path only from a backlog of 1.75·CWND_s."""
    conn = FakeConn(10 + k_segs)
    sfs = [FakeSubflow(0, 20 * MS, 10), FakeSubflow(1, 80 * MS, 10)]
    sched = get("ecf")
    sched.on_start(conn, sfs)  # type: ignore[arg-type]
    assert sched.select(conn, sfs)[:3] == (0, -1, 10)  # type: ignore[index]
    conn.sent[:10] = [True] * 10
    conn.head = 10
    sfs[0].queued = 10  # fast subflow's cwnd is used up
    d = sched.select(conn, sfs)  # type: ignore[arg-type]
    assert (d is None) is waits


@pytest.mark.parametrize(("k_segs", "waits"), [(4, False), (5, True)])
def test_ecf_paper_delta_is_rtt_deviation(k_segs: int, waits: bool) -> None:
    """Paper variant, stable RTTs (σ → 0): wait when k/CWND_s·RTT_s >= 2·RTT_f, i.e. k >= CWND_s/2."""
    conn = FakeConn(10 + k_segs)
    sfs = [FakeSubflow(0, 20 * MS, 10), FakeSubflow(1, 80 * MS, 10)]
    sched = get("ecf", variant="paper")
    sched.on_start(conn, sfs)  # type: ignore[arg-type]
    sched.rtt_dev.mdev_ns = {0: 0.0, 1: 0.0}
    sched.rtt_dev._last = {0: sfs[0].srtt_us8, 1: sfs[1].srtt_us8}
    conn.sent[:10] = [True] * 10
    conn.head = 10
    sfs[0].queued = 10
    d = sched.select(conn, sfs)  # type: ignore[arg-type]
    assert (d is None) is waits


def test_ecf_hysteresis_beta() -> None:
    """Kernel variant, RTT_f 20 ms, RTT_s 80 ms, δ = 100 ms, CWND 10: the first test is
    20·(k + 10) < (1 + waiting/4)·10·180 (segments·ms). A backlog of 80 segments uses the slow
    path from a fresh start, but keeps waiting once ECF is waiting (β = 1/4); 103 ends the wait."""

    def decide(sched: Scheduler, k_segs: int) -> bool:
        conn = FakeConn(10 + k_segs)
        conn.sent[:10] = [True] * 10
        conn.head = 10
        sfs = [FakeSubflow(0, 20 * MS, 10, queued=10), FakeSubflow(1, 80 * MS, 10)]
        return sched.select(conn, sfs) is None  # type: ignore[arg-type]

    fresh = get("ecf")
    assert not decide(fresh, 80)
    ecf = get("ecf")
    assert decide(ecf, 30)       # waits, waiting = 1
    assert decide(ecf, 80)       # 1800 < 1.25 · 1800: still waiting
    assert not decide(ecf, 103)  # 2260 >= 2250: slow path, waiting reset
    assert not decide(ecf, 80)
    assert not decide(get("ecf", beta=0.0), 80)


def test_ecf_rtt_deviation_recovers_samples_from_srtt() -> None:
    from workbench.schedulers._ecf import RttDeviation
    dev = RttDeviation()
    sf = FakeSubflow(0, 100 * MS, 10)
    dev.update(sf)
    assert dev.get(0) == pytest.approx(50 * MS)  # Linux's first mdev = m/2
    # a 180 ms sample moves srtt by (180 - 100)/8 = 10 ms; the recovered error is 80 ms
    sf.srtt_ns = 110 * MS
    dev.update(sf)
    assert dev.get(0) == pytest.approx(50 * MS + (80 * MS - 50 * MS) / 4)


# ---------------------------------------------------------------------------------------- STTF
def test_sttf_transfer_time_slow_start_and_congestion_avoidance_rounds() -> None:
    ss = FakeSubflow(0, 10 * MS, 10, in_flight=4)  # 6 free, slow start: next rounds 20, 40, 80
    tt = [sttf_transfer_time_ns(ss, extra=e) / MS for e in range(0, 90)]
    assert tt[:6] == [5.0] * 6
    assert tt[6:26] == [15.0] * 20 and tt[26:66] == [25.0] * 40 and tt[66] == 35.0
    ca = FakeSubflow(0, 10 * MS, 10, in_flight=10, ssthresh=10)  # CA: next rounds 11, 12, 13
    tt = [sttf_transfer_time_ns(ca, extra=e) / MS for e in range(0, 40)]
    assert tt[:11] == [15.0] * 11 and tt[11:23] == [25.0] * 12 and tt[23:36] == [35.0] * 13
    cross = FakeSubflow(0, 10 * MS, 10, in_flight=10, ssthresh=30)  # 20, then capped at 30, then 31
    tt = [sttf_transfer_time_ns(cross, extra=e) / MS for e in range(0, 82)]
    assert tt[19] == 15.0 and tt[20] == 25.0 and tt[49] == 25.0 and tt[50] == 35.0 and tt[81] == 45.0


def test_sttf_plan_waits_for_the_fast_path_and_reschedules_when_it_changes() -> None:
    fast = FakeSubflow(0, 10 * MS, 10, in_flight=10)
    slow = FakeSubflow(1, 100 * MS, 10)
    sched = get("sttf")
    # 15-segment burst: the fast subflow delivers all of it within the slow path's 50 ms
    assert sched.select(FakeConn(15), [fast, slow]) is None  # type: ignore[arg-type]
    # 400 segments: the fast subflow (slow start) delivers 20+40+80+160 = 300 within 50 ms, so the
    # slow subflow's free cwnd takes segment 300 onwards (sent out of order, arrives in order)
    conn = FakeConn(400)
    a = drive(sched, conn, [fast, slow])
    assert sorted(a) == list(range(300, 310)) and set(a.values()) == {1}
    # in congestion avoidance only 11+12+13+14 = 50 arrive within 50 ms
    fast_ca = FakeSubflow(0, 10 * MS, 10, in_flight=10, ssthresh=10)
    a = drive(sched, FakeConn(400), [fast_ca, FakeSubflow(1, 100 * MS, 10)])
    assert sorted(a) == list(range(50, 60))
    # conditions change (fast path's RTT jumps to 300 ms): the unsent head is replanned to the slow path
    slow_fast = FakeSubflow(0, 300 * MS, 10, in_flight=10)
    d = sched.select(FakeConn(15), [slow_fast, FakeSubflow(1, 100 * MS, 10)])  # type: ignore[arg-type]
    assert d is not None and tuple(d) == (1, -1, 10)
    # without rescheduling (kau get_subflow alone) the burst is queued on the fast subflow beyond cwnd
    a = drive(get("sttf", reschedule=False), FakeConn(15),
              [FakeSubflow(0, 10 * MS, 10, in_flight=10), FakeSubflow(1, 100 * MS, 10)])
    assert a == {s: 0 for s in range(15)}


# ---------------------------------------------------------------------------------------- DAPS
def test_daps_lcm_schedule_on_views() -> None:
    """10 ms / 100 ms RTTs → one-way 5 / 50 ms, period lcm = 50: ten fast turns of C = 10 segments,
    then the slow subflow's turn carries segments 100-109 (the last of the period), then a new period."""
    for variant, period in (("kernel", 50_000), ("paper", 50)):
        sfs = [FakeSubflow(0, 100 * MS, 10), FakeSubflow(1, 10 * MS, 10)]
        sched = get("daps", variant=variant)
        a = drive(sched, FakeConn(125), sfs)
        assert sched.period == period
        assert [s for s in range(125) if a[s] == 0] == list(range(100, 110)), variant
        assert sched.periods_planned == 2


def test_daps_kernel_int32_lcm_overflow_falls_back_to_min_rtt() -> None:
    assert lcm_c_int32(5_000, 50_000) == 50_000
    assert lcm_c_int32(25_000, 25_000) == 25_000
    # one-way 20 ms and 110 ms in µs: 2.2e9 wraps past 2^31 → negative period
    assert lcm_c_int32(20_000, 110_000) == -209_496
    sfs = [FakeSubflow(0, 40 * MS, 10), FakeSubflow(1, 220 * MS, 10)]
    sched = get("daps")
    a = drive(sched, FakeConn(30), sfs)
    assert sched.period <= 0
    # the default min-srtt choice with cwnd test: fast cwnd first, then the slow one, then wait
    assert a == {s: (0 if s < 10 else 1) for s in range(20)}
    # ms units: D = 20 and 110 ms, period lcm = 220; the slow turn at t = 110 follows 5 fast turns
    paper = get("daps", variant="paper")
    b = drive(paper, FakeConn(80), [FakeSubflow(0, 40 * MS, 10), FakeSubflow(1, 220 * MS, 10)])
    assert paper.period == 220
    assert [s for s in range(80) if b[s] == 1] == list(range(50, 60))


# ---------------------------------------------------------------------------------------- replays
def two_paths(loss: float = 0.0) -> list[PathConfig]:
    return [PathConfig.constant("wifi", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=60_000, loss=loss),
            PathConfig.constant("lte", rate_bps=10e6, owd_ns=40 * MS, buffer_bytes=120_000, loss=loss)]


VARIANTS = [("ecf", {}), ("ecf", {"variant": "paper"}), ("blest", {}), ("blest", {"variant": "paper"}),
            ("sttf", {}), ("sttf", {"reschedule": False}), ("daps", {}), ("daps", {"variant": "paper"}),
            ("otias", {}), ("otias", {"variant": "paper"})]


@pytest.mark.parametrize(("name", "kw"), VARIANTS, ids=[f"{n}-{'-'.join(map(str, k.values())) or 'default'}"
                                                        for n, k in VARIANTS])
def test_finite_transfer_delivered_exactly_once(name: str, kw: dict) -> None:
    size = 1_000_000
    # data written once both subflows are up, so that both paths get used
    r = run_replay(two_paths(loss=0.005), get(name, **kw), workload=AppTrace(writes=[(300 * MS, size)]),
                   seed=3)
    s = r.summary
    assert s["completed"] and s["delivered_bytes"] == size, s
    seg = ooo_segments(r.events)
    assert seg["t_deliverable_ns"].null_count() == 0
    assert seg["new_bytes"].sum() == size  # every byte handed to the application once
    r2 = run_replay(two_paths(loss=0.005), get(name, **kw), workload=Finite(size_bytes=300_000), seed=3,
                    record=False)
    assert r2.summary["completed"] and r2.summary["delivered_bytes"] == 300_000


def fig8_paths() -> list[PathConfig]:
    """Seed 002 Table II / Fig. 8 right: 100 Mbit/s paths, RTT 10 ms and 100 ms."""
    return [PathConfig.constant("p1", rate_bps=100e6, owd_ns=5 * MS, buffer_bytes=500_000),
            PathConfig.constant("p2", rate_bps=100e6, owd_ns=50 * MS, buffer_bytes=500_000)]


def burst_ms(name: str, n_segments: int, **kw: object) -> tuple[float, int]:
    """One burst written at 1 s (both subflows up, cwnd 10 each, srtt from the handshakes): time until
    the receiver application has it all, and packets sent on the slow path."""
    r = run_replay(fig8_paths(), get(name, **kw), workload=AppTrace(writes=[(S, n_segments * MSS)]))
    s = r.summary
    assert s["completed"]
    return (s["last_delivery_ns"] - S) / MS, s["per_path"]["p2"]["sent_packets"]


def test_blest_15_segment_burst_replay_stays_on_the_fast_path() -> None:
    t_blest, slow_blest = burst_ms("blest", 15)
    t_min, slow_min = burst_ms("minrtt", 15)
    assert slow_blest == 0 and slow_min == 5
    assert t_blest < 0.5 * t_min


def test_fig8_burst_completion_blest_sttf_beat_minrtt_sttf_fastest() -> None:
    """Seed 002 Fig. 8 (right, 10/100 ms): BLEST and STTF finish bursts of 10-50 segments much sooner
    than minRTT (LRF), which puts the part beyond the fast cwnd on the 100 ms path; STTF is fastest.
    Measured (ms, size 10/20/30/40/50): minRTT 6.2/51.2/51.2/51.2/51.2, BLEST = STTF
    6.2/16.3/17.5/26.5/27.7."""
    for n in (20, 30, 40, 50):
        t_min, _ = burst_ms("minrtt", n)
        t_blest, s_blest = burst_ms("blest", n)
        t_sttf, s_sttf = burst_ms("sttf", n)
        assert t_blest < 0.7 * t_min and t_sttf < 0.7 * t_min, n
        assert t_sttf <= t_blest + 0.5, n
        assert s_sttf == 0 and s_blest == 0


def _bulk_ooo(name: str, rcv_buf: int, paths: list[PathConfig]) -> tuple[float, float]:
    """Goodput (Mbit/s) and time-mean connection-level OOO queue (KB) after a 3 s warm-up."""
    r = run_replay(paths, get(name), workload=Bulk(), conn=ConnectionConfig(rcv_buf_bytes=rcv_buf),
                   duration_ns=8 * S)
    sm = r.samples.filter((pl.col("kind") == "periodic") & (pl.col("t_ns") >= 3 * S))
    return r.delivery_rate_bps / 1e6, float(sm["rcv_ooo_bytes"].mean()) / 1e3


def test_otias_fig5_6_smaller_ooo_queue_and_throughput_at_small_receive_buffer() -> None:
    """Seed 001 Fig. 5-6 direction, 160 KB receive buffer (the smallest the paper shows), paths with
    RTT 20 ms / 200 ms and little queueing (OTIAS's RTT/2 one-way estimate holds): OTIAS keeps a
    much smaller MPTCP OOO queue than minRTT and the upstream default, and more throughput: 1.2 x
    minRTT's (the paper's comparison). The upstream default is not in the paper; its throughput here rose
    from 8.27 to 9.84 Mbit/s (OTIAS 11.18) once every subflow's ACK re-announced the connection's furthest
    right edge, as mptcp_set_rwin does (an edge the slow subflow offered no longer waits 90 ms for that
    subflow's ACK), so against it the margin asked is 1.1 x."""
    paths = [PathConfig.constant("fast", rate_bps=10e6, owd_ns=10 * MS, buffer_bytes=20_000),
             PathConfig.constant("slow", rate_bps=10e6, owd_ns=100 * MS, buffer_bytes=100_000)]
    g_ot, q_ot = _bulk_ooo("otias", 160_000, paths)
    g_min, q_min = _bulk_ooo("minrtt", 160_000, paths)
    g_up, q_up = _bulk_ooo("upstream", 160_000, paths)
    assert q_ot < 0.5 * q_min and q_ot < 0.5 * q_up, (q_ot, q_min, q_up)
    assert g_ot > 1.2 * g_min and g_ot > 1.1 * g_up, (g_ot, g_min, g_up)
