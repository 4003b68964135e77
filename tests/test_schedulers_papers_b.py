"""STMS-C, STMS-A (seed 000), DRePaS (seed 003) and RBP (seed 004) against their papers: the worked
examples exactly, the headline results in direction with a margin (numbers measured on this engine
are noted next to each assertion; lossy set-ups as the mean over a fixed set of seeds; a result the
engine does not reproduce is a strict xfail whose reason gives the numbers and the cause), and a lossy
two-path transfer that delivers every byte once.

Replays here are short versions of the papers' set-ups; the long ones are marked ``slow``."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import polars as pl
import pytest

from workbench.metrics import ooo_summary, summarize
from workbench.replay import Bulk, ConnectionConfig, Finite, PathConfig, ReplayResult, StepSeries, run_replay
from workbench.schedulers import Decision, Layer, Scheduler, available, get, info
from workbench.schedulers._drepas import DRePaS, drepas_scores
from workbench.schedulers._rbp import RBP, rbp_buffer_occupancy, rbp_receive_windows
from workbench.schedulers._stms import STMSAdjust, STMSCalc, stms_gap_segments, true_gap_segments

MS = 1_000_000
S = 1_000_000_000
MSS = 1424
MINE = ("stms_c", "stms_a", "drepas", "rbp")


# --------------------------------------------------------------------------- helpers
def in_order_goodput_bps(events: pl.DataFrame, t0_ns: int, t1_ns: int) -> float:
    """Receiver's in-order progress (DATA_ACKs arriving at the sender) between t0 and t1."""
    acks = events.filter((pl.col("dir") == "c2s") & (pl.col("point") == "rcv"))
    a0 = acks.filter(pl.col("t_ns") <= t0_ns)["data_ack"].max() or 0
    a1 = acks.filter(pl.col("t_ns") <= t1_ns)["data_ack"].max()
    return (a1 - a0) * 8e9 / (t1_ns - t0_ns)


def payload_rate(rate_bps: float, cfg: ConnectionConfig) -> float:
    return rate_bps * cfg.mss_bytes / (cfg.mss_bytes + cfg.header_bytes)


@dataclass
class FakeSF:
    """A SubflowView with just the attributes the schedulers read (hand-set worked examples)."""

    index: int
    srtt_ns: int
    cwnd: int
    in_flight: int = 0
    queued: int = 0
    established: bool = True
    pf: bool = False
    backup: bool = False
    ca_state: int = 0
    mss: int = MSS
    rate_bps: float = 0.0
    name: str = ""

    @property
    def srtt_us8(self) -> int:
        return self.srtt_ns // 1000 * 8

    @property
    def queued_bytes(self) -> int:
        return self.queued * self.mss

    @property
    def unacked_bytes(self) -> int:
        return (self.in_flight + self.queued) * self.mss


@dataclass
class FakeConn:
    """A ConnView over ``n_segs`` full segments; ``sent`` = indices already sent."""

    n_segs: int
    sent: set[int] = field(default_factory=set)
    snd_una: int = 0
    now_ns: int = 0
    mss: int = MSS
    reinject_head: int = -1
    wnd_end: int = 1 << 40

    @property
    def head(self) -> int:
        i = 0
        while i in self.sent:
            i += 1
        return i

    def seg_sent(self, seg: int) -> bool:
        return seg in self.sent

    def seg_dsn(self, seg: int) -> int:
        return seg * self.mss

    def seg_len(self, seg: int) -> int:
        return self.mss

    def seg_path_mask(self, seg: int) -> int:
        return 0

    def window_allows(self, seg: int) -> bool:
        return (seg + 1) * self.mss <= self.wnd_end

    def nth_unsent(self, n: int) -> int:
        """The n-th (0-based) unsent segment from the head by a plain scan (the engine bisects)."""
        for i in range(self.head, self.n_segs):
            if i not in self.sent:
                if n == 0:
                    return i
                n -= 1
        return self.n_segs

    def seg_at_dsn(self, dsn: int) -> int:
        return min(-(-dsn // self.mss), self.n_segs)


# --------------------------------------------------------------------------- registry
def test_registered_with_metadata_params_and_layers() -> None:
    assert set(available()) >= set(MINE)
    for name in MINE:
        i = info(name)
        assert i.description and i.source and i.params
        for p in i.params:
            if p.choices is None:
                assert p.low is not None and p.high is not None and p.low <= p.default <= p.high, p
    a = get("stms_a")
    assert a.adjust_interval_ms == 0.0 and a.ewma_weight == pytest.approx(1 / 16)
    assert get("drepas").mincontribution == 0.1 and get("drepas").interval_s == 3.0
    assert get("rbp").beta == pytest.approx(1 / 16)
    d = get("drepas", inner="stms_a", inner_params={"ewma_weight": 0.1}, mincontribution=0.2)
    assert isinstance(d, Layer) and isinstance(d.inner, STMSAdjust) and d.inner.ewma_weight == 0.1
    r = RBP(get("minrtt_noor"), beta=0.25)
    assert "RBP(MinRTTNoOR(" in repr(r)
    # layers stack: flow control over a path manager over STMS
    stacked = RBP(DRePaS("stms_c"))
    assert isinstance(stacked.inner.inner, STMSCalc)


# --------------------------------------------------------------------------- STMS worked examples
def test_stms_eq2_true_gap_equals_cwnd_f_when_rtt_s_is_3_rtt_f() -> None:
    """Eq. (2) and Fig. 9: RTT_s = 3·RTT_f, symmetric delays -> Gap = B_f·(OWD_s − OWD_f) = CWND_f."""
    cwnd_f, rtt_f = 37, 20 * MS
    bw_f = cwnd_f * MSS * 8 / (rtt_f / S)
    assert true_gap_segments(bw_fast_bps=bw_f, owd_fast_ns=rtt_f // 2, owd_slow_ns=3 * rtt_f // 2,
                             mss_bytes=MSS) == pytest.approx(cwnd_f, rel=1e-12)
    # STMS-C's estimate from srtt/2 and cwnd/srtt gives exactly the same
    assert stms_gap_segments(cwnd_fast=cwnd_f, srtt_fast_ns=rtt_f, srtt_slow_ns=3 * rtt_f) == cwnd_f
    assert stms_gap_segments(cwnd_fast=cwnd_f, srtt_fast_ns=rtt_f, srtt_slow_ns=rtt_f) == 0


def test_stms_algorithm1_fast_takes_the_head_slow_jumps_the_gap() -> None:
    """Algorithm 1 on Fig. 9's numbers: fast (cwnd 10, full) and slow (RTT 3x) -> the slow subflow's
    segments start at unsentPackets[CWND_f] and are contiguous; the fast one then sends from the
    head, skipping what the slow one took."""
    fast = FakeSF(0, srtt_ns=20 * MS, cwnd=10, in_flight=10)
    slow = FakeSF(1, srtt_ns=60 * MS, cwnd=4)
    conn = FakeConn(n_segs=100)
    st = STMSCalc()
    for k in range(4):
        d = st.select(conn, [fast, slow])
        assert d == Decision(1, 10 + k)
        conn.sent.add(d.seg)
        slow.in_flight += 1
    assert st.select(conn, [fast, slow]) is None  # both cwnds full
    fast.in_flight = 0
    assert st.select(conn, [fast, slow]) == Decision(0, -1, 10)  # the 10 gap segments, in order
    conn.sent.update(range(10))
    fast.in_flight = 5  # 5 free
    slow.in_flight = 3
    assert conn.head == 14
    assert st.select(conn, [fast, slow]) == Decision(0, -1, 5)  # from the head 14 (10..13 slow)
    fast.in_flight = 10
    # slow again: unsentPackets[10] counted from head 14 -> 24
    assert st.select(conn, [fast, slow]) == Decision(1, 24)
    # not enough unsent data beyond the gap: skip the round (§4)
    assert st.select(FakeConn(n_segs=8), [fast, FakeSF(1, srtt_ns=60 * MS, cwnd=4)]) is None


def test_stms_a_algorithm2_gap_adjustment_worked_example() -> None:
    """Algorithm 2: a DATA_ACK acking > 2 segments moves the gap +data_acked if the old left edge was
    slow data, −data_acked otherwise; per adjust_interval gap += w · Σ delta_gap."""
    fast = FakeSF(0, srtt_ns=20 * MS, cwnd=10, in_flight=10)
    slow = FakeSF(1, srtt_ns=60 * MS, cwnd=4)
    conn = FakeConn(n_segs=200)
    st = STMSAdjust(adjust_interval_ms=100.0, ewma_weight=0.25)
    st.on_start(conn, [fast, slow])
    d = st.select(conn, [fast, slow])
    assert d == Decision(1, 10)  # initial gap = STMS-C's value = CWND_f
    conn.sent.add(10)
    conn.sent.update(range(10))

    def ack(una_segs: int, t_ms: int) -> None:
        conn.snd_una = una_segs * MSS
        conn.now_ns = t_ms * MS
        st.on_ack(conn, fast, conn.now_ns)

    ack(2, 1)     # 2 segments: normal ACK clocking, no adjustment
    ack(10, 2)    # 8 segments, left edge 2 was fast data -> −8
    ack(15, 3)    # 5 segments, left edge 10 was the slow segment -> +5
    assert st._acc == {1: -3.0}
    ack(16, 101)  # interval over (it started at the first ACK after the gap was set, t = 1 ms)
    assert st._gap[1] == pytest.approx(10 + 0.25 * -3)
    assert st._acc == {}


# --------------------------------------------------------------------------- STMS replays
def _stms_lab(*, rtt_s_ms: int, fast_buf: int = 187_000, slow_buf: int = 1_875_000) -> list[PathConfig]:
    """§2.1: 30 Mbit/s both, 0.01 % loss, RTT_f 20 ms; fast buffer 50 ms, slow 500 ms unless given."""
    return [PathConfig.constant("fast", rate_bps=30e6, owd_ns=10 * MS, buffer_bytes=fast_buf, loss=1e-4),
            PathConfig.constant("slow", rate_bps=30e6, owd_ns=rtt_s_ms // 2 * MS, buffer_bytes=slow_buf,
                                loss=1e-4)]


@functools.cache
def _eq3_goodput_bps(name: str) -> tuple[float, float]:
    """(in-order goodput 4-30 s, full payload rate) of the eq. (3) set-up. Lossless, so one run is the
    whole answer (the seed draws nothing); cached because both variants compare against minRTT w/o PR."""
    fast = PathConfig.constant("fast", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=100_000)
    slow = PathConfig.constant("slow", rate_bps=5e6, owd_ns=100 * MS, buffer_bytes=200_000)
    eq1 = (20e6 + 5e6) / 8 * 0.200
    cfg = ConnectionConfig(rcv_buf_bytes=int(0.75 * eq1))
    r = run_replay([fast, slow], get(name), workload=Bulk(), conn=cfg, duration_ns=30 * S)
    return in_order_goodput_bps(r.events, 4 * S, 30 * S), payload_rate(25e6, cfg)


@pytest.mark.slow
@pytest.mark.parametrize("variant", [
    "stms_a",
    pytest.param("stms_c", marks=pytest.mark.xfail(strict=True, reason=(
        "STMS-C gets 16.5 Mbit/s = 0.70 x full over 4-30 s (needs 0.85; 4-12 s in an earlier engine: 0.68, "
        "0.74 at 1.0 x eq. (1), 0.81 at 1.2 x); STMS-A 20.6, minRTT w/o PR 14.2. With cwnd growth as Linux's "
        "tcp_is_cwnd_limited the slow subflow's cwnd reaches "
        "110-142 segments (BDP 88) by 4 s, its 320 ms queue fills in bursts whenever the MPTCP window opens, "
        "the slow one-way delay swings 140-233 ms per half second (mean 197 ms, srtt_s 308 ms) and STMS-C's "
        "gap (srtt/2, cwnd_f/srtt_f, recomputed at every slow send) cannot follow it: fast-path data waits in "
        "the receiver (100-150 kB out of order) and the fast path delivers 13.6 of 20 Mbit/s. The old engine "
        "held the slow cwnd lower until ~8 s (21.5 Mbit/s), after which it showed the same stalls."))),
])
def test_stms_buffer_requirement_eq3_below_default_eq1(variant: str) -> None:
    """Eq. (3) vs. eq. (1): with a receive buffer of 0.75 × eq. (1) ((B_f + B_s)·RTT_s, 625 kB here; the
    closed-form test shows minRTT needs all of it), both paths saturated, STMS — whose requirement
    (B_f + B_s)·(OWD_s + OWD_f) is about 0.55-0.7 × eq. (1) — still gets nearly the full aggregate,
    the default without opportunistic retransmission does not. Lossless: deterministic, one run each.
    Measured (Mbit/s, 4-30 s: without opportunistic retransmission the slow subflow's queue fills and
    its window collapses in cycles of about 12 s since HyStart ends slow start as Linux does, so a
    4-12 s window caught a good phase at 19.5): full 23.5; STMS-A 20.6, STMS-C 16.5 (xfail, see its
    reason), minRTT (with PR) 20.5, minRTT w/o PR 14.2.
    (Earlier engines, 4-12 s: STMS-A 22.3, STMS-C 16.0, minRTT 20.5, minRTT w/o PR 9.3.)"""
    g, full = _eq3_goodput_bps(variant)
    g_noor, _ = _eq3_goodput_bps("minrtt_noor")
    assert g >= 0.85 * full, (variant, g, full)
    assert g_noor <= 0.7 * full, (g_noor, full)
    assert g >= 1.3 * g_noor, (variant, g, g_noor)


SEEDS = range(1, 9)  # lossy STMS and DRePaS replays: the mean over these 8 seeds, fixed


@pytest.mark.slow
def test_stms_fig10b_ooo_delay_far_below_default_and_ecf() -> None:
    """Fig. 10b: RTT_f 20 ms, slow RTT 100 and 300 ms: STMS-A's mean OOO delay is far below minRTT's
    (and ECF's when registered; with full send buffers ECF behaves like minRTT, §5). Mean over 8 seeds
    of 4 s bulk: with 0.01 % loss a single seed is one draw of whether and when a loss halves the
    slow subflow's cwnd, which sets its queue and so minRTT's OOO delay (RTT_s 100 ms: 7-48 ms per seed,
    slow srtt 106-177 ms; the old engine spread as much, 6-46 ms).
    Measured (ms, seeds 1-8): RTT_s 100 ms: minRTT 26.4 30.8 48.2 7.0 34.9 22.6 47.1 47.7 (mean 33.1),
    ECF the same, STMS-A 14.9 18.4 6.2 5.5 19.5 17.0 14.9 13.6 (mean 13.7);
    RTT_s 300 ms: minRTT 34.7 34.7 48.1 51.4 34.7 34.7 40.7 46.6 (mean 40.7), ECF the same,
    STMS-A 4.0 4.0 3.4 16.0 4.0 4.3 3.2 3.9 (mean 5.4)."""
    baselines = ["minrtt"] + (["ecf"] if "ecf" in available() else [])
    for rtt_s in (100, 300):
        mean = {}
        for name in [*baselines, "stms_a"]:
            per_seed = [ooo_summary(run_replay(_stms_lab(rtt_s_ms=rtt_s), get(name), workload=Bulk(), duration_ns=4 * S,
                                               seed=seed).events)["ooo_delay_mean_ms"][0] for seed in SEEDS]
            mean[name] = sum(per_seed) / len(per_seed)
        for b in baselines:
            assert mean["stms_a"] <= 0.5 * mean[b], (rtt_s, mean)


@pytest.mark.slow
@pytest.mark.parametrize("fast_buf", [30_000, 60_000])
def test_stms_table1_fig13a_small_fast_path_buffer(fast_buf: int) -> None:
    """Table 1 / Fig. 13a: with 30-60 kB of buffer on the fast path the default's bursts cost it
    throughput; STMS keeps the fast path ACK-clocked. Receive buffer 2 MB (the MPTCP window must be
    able to stall for the bursts to appear; with 6 MB nothing stalls in 10 s). Mean over 8 seeds: with
    0.01 % loss one seed decides whether a loss halves the slow subflow's cwnd (then all three get
    ~43 Mbit/s) or whether minRTT's fast path loses a burst (34-40 Mbit/s); one seed is one draw.
    Measured (goodput 2-10 s, Mbit/s, seeds 1-8):
    30 kB: minRTT 34.3 47.2 48.0 43.0 50.4 40.0 50.5 42.4 (mean 44.5), STMS-C 51.2 49.1 51.4 43.0 52.3
    49.8 52.6 45.4 (mean 49.4, +11.0 %), STMS-A 51.2 49.2 52.3 43.0 52.3 49.9 52.6 51.9 (mean 50.3, +13.1 %);
    60 kB: minRTT 51.0 48.5 49.8 43.2 50.9 49.9 51.2 43.0 (mean 48.43), STMS-C 51.5 49.1 52.4 43.4 52.4
    50.2 52.7 51.2 (mean 50.38), STMS-A 51.4 49.0 52.2 43.2 52.3 50.2 52.6 52.2 (mean 50.39): +4.0 %, i.e.
    just at the margin; most of it is seed 8 (minRTT's slow subflow carries 15.4 MB, STMS's 25.7 MB). At
    60 kB minRTT's fast path already carries ~27.5 of 30 Mbit/s (the paper's default: 20.8).
    The old engine's seed 1 alone (30 kB: 48.9 / 52.3 / 54.3, 60 kB: 50.4 / 53.8 / 53.9) was one draw:
    over seeds 1-8 it gave 30 kB 41.4 / 48.9 / 49.4 and 60 kB 48.6 / 52.4 / 47.9 (STMS-A below minRTT)."""
    cfg = ConnectionConfig(rcv_buf_bytes=2_000_000)
    g = {}
    for name in ("minrtt", "stms_c", "stms_a"):
        per_seed = [in_order_goodput_bps(run_replay(_stms_lab(rtt_s_ms=200, fast_buf=fast_buf), get(name),
                                                    workload=Bulk(), conn=cfg, duration_ns=10 * S,
                                                    seed=seed).events, 2 * S, 10 * S) for seed in SEEDS]
        g[name] = sum(per_seed) / len(per_seed)
    assert g["stms_c"] >= 1.04 * g["minrtt"] and g["stms_a"] >= 1.04 * g["minrtt"], g


def _true_gap_segments(events: pl.DataFrame, t0: int, t1: int) -> float:
    """Eq. (2) from what the replay actually did in [t0, t1): fast-path delivery rate and the mean
    one-way delays (queueing included) of the data on each path."""
    rcv = events.filter((pl.col("point") == "rcv") & (pl.col("dir") == "s2c")
                        & (pl.col("t_ns") >= t0) & (pl.col("t_ns") < t1))
    per = {p: (b, o) for p, b, o in rcv.group_by("path").agg(
        (pl.col("payload_bytes").cast(pl.Int64).sum() * 1e9 / (t1 - t0)).alias("Bps"),
        pl.col("owd_ns").mean()).iter_rows()}
    return true_gap_segments(bw_fast_bps=per["fast"][0] * 8, owd_fast_ns=per["fast"][1],
                             owd_slow_ns=per["slow"][1], mss_bytes=MSS)


@pytest.mark.slow
def test_stms_fig12_gap_converges_after_fast_latency_drops() -> None:
    """Fig. 12a: the fast path's RTT goes from 20 to 5 ms at 5 s; STMS-A's gap follows the new true
    gap (eq. (2) evaluated on the replay's own delivery rate and one-way delays).
    Measured: before: true 227, STMS-A 214; after (8-10 s): true 384, STMS-A 378 (STMS-C 311)."""
    t_change, t_end = 5 * S, 10 * S
    owd = StepSeries((0, t_change), (10 * MS, 2.5 * MS))
    fast = PathConfig(name="fast", rate_down_bps=StepSeries.constant(30e6), rate_up_bps=StepSeries.constant(30e6),
                      owd_down_ns=owd, owd_up_ns=owd, buffer_down_bytes=60_000, buffer_up_bytes=100_000)
    slow = PathConfig.constant("slow", rate_bps=30e6, owd_ns=100 * MS, buffer_bytes=375_000)
    r = run_replay([fast, slow], STMSAdjust(), workload=Bulk(), duration_ns=t_end, seed=1)
    log = [(t, i, g) for t, kind, i, g in r.observations if kind == "gap"]

    def mean_gap(t0: int, t1: int) -> float:
        g = [x for t, _, x in log if t0 <= t < t1]
        return sum(g) / len(g)

    before, after = mean_gap(t_change - 2 * S, t_change), mean_gap(t_end - 2 * S, t_end)
    true_before = _true_gap_segments(r.events, t_change - 2 * S, t_change)
    true_after = _true_gap_segments(r.events, t_end - 2 * S, t_end)
    assert after == pytest.approx(true_after, rel=0.2), (after, true_after)
    assert after - before >= 0.5 * (true_after - true_before), (before, after, true_before, true_after)


# --------------------------------------------------------------------------- DRePaS
def test_drepas_scores_against_mincontribution() -> None:
    """Algorithm 2: factor_i = throughput_i / max throughput; score 1 iff factor_i >= mincontribution."""
    assert drepas_scores([1000.0, 99.0, 100.0], mincontribution=0.1) == [1, 0, 1]
    assert drepas_scores([0.0, 0.0], mincontribution=0.1) == [1, 1]  # idle: nothing to compare


def _wlan(rate: StepSeries | None = None) -> PathConfig:
    r = rate if rate is not None else StepSeries.constant(10e6)
    return PathConfig(name="wlan", rate_down_bps=r, rate_up_bps=StepSeries.constant(10e6),
                      owd_down_ns=StepSeries.constant(25 * MS), owd_up_ns=StepSeries.constant(25 * MS),
                      loss_down=StepSeries.constant(0.001), buffer_down_bytes=60_000, buffer_up_bytes=60_000)


# 2G: low rate, deep buffer -> srtt about 1.4 s under load (bufferbloat, §IV/§VI)
G2 = PathConfig.constant("2g", rate_bps=200e3, owd_ns=150 * MS, buffer_bytes=40_000)


@pytest.mark.slow
def test_drepas_2g_path_goes_probing_and_comes_back_when_wlan_degrades() -> None:
    """§V: the 2G path contributes < 10 % of the WLAN's throughput -> probing after one interval of
    zero scores; when the WLAN drops to 0.3 Mbit/s (at 8 s) the probed 2G path is active again.
    Probes: 10 copies every interval, no new payload on the probing path.
    Measured: probing at 6.2 s, active again at 9.5 s (an earlier engine: 3.4 s and 9.6 s; since
    HyStart ends the WLAN's slow start early, as Linux does, the 2G path's share of the first 3 s
    interval is above 10 % and the first zero score comes one interval later)."""
    wlan = _wlan(StepSeries((0, 8 * S), (10e6, 0.3e6)))
    cfg = ConnectionConfig(send_buf_bytes=1 << 20, rcv_buf_bytes=2 << 20)  # decoupled CUBIC
    r = run_replay([wlan, G2], DRePaS("minrtt"), workload=Bulk(), conn=cfg, duration_ns=14 * S, seed=1)
    log = [(t, i, s) for t, kind, i, s in r.observations if kind == "path_state"]
    changes = [(t, s) for t, i, s in log if i == 1]
    assert changes and changes[0][1] == "probing" and changes[0][0] <= 2 * 3 * S + 1.5 * S, changes
    back = [t for t, s in changes if s == "active" and t > 8 * S]
    assert back and back[0] <= 8 * S + 3 * S, changes
    # while probing the 2G path carried only probe copies (reinjection-flagged), no new data
    t_probe = changes[0][0]
    t_back = back[0]
    snd = r.events.filter((pl.col("point") == "snd") & (pl.col("dir") == "s2c") & (pl.col("path") == "2g")
                          & (pl.col("t_ns") > t_probe + 2 * S) & (pl.col("t_ns") < t_back))
    assert snd.height > 0 and snd.filter(~pl.col("is_reinject") & ~pl.col("is_retrans")).height == 0
    assert snd.height <= 10 * (1 + (t_back - t_probe) // (3 * S)) + 10


@functools.cache
def _drepas_table1_runs() -> dict[str, tuple[list[int], list[float]]]:
    """Table I's set-up, seeds 1-8: per scheduler (completion times ns, mean application delays ms).
    16 MiB over a lossy WLAN (0.2 %) and a bufferbloated 2G path, Android buffers, decoupled CUBIC."""
    size = 16 << 20
    wlan = PathConfig(name="wlan", rate_down_bps=StepSeries.constant(10e6), rate_up_bps=StepSeries.constant(10e6),
                      owd_down_ns=StepSeries.constant(25 * MS), owd_up_ns=StepSeries.constant(25 * MS),
                      loss_down=StepSeries.constant(0.002), buffer_down_bytes=60_000, buffer_up_bytes=60_000)
    cfg = ConnectionConfig(send_buf_bytes=1 << 20, rcv_buf_bytes=2 << 20)
    out: dict[str, tuple[list[int], list[float]]] = {"minrtt": ([], []), "drepas": ([], [])}
    for seed in SEEDS:
        for name, sched in (("minrtt", get("minrtt")), ("drepas", DRePaS("minrtt"))):
            r = run_replay([wlan, G2], sched, workload=Finite(size_bytes=size), conn=cfg, seed=seed)
            assert r.summary["completed"] and r.summary["delivered_bytes"] == size, (name, seed, r.summary)
            out[name][0].append(r.summary["all_acked_ns"])
            out[name][1].append(summarize(r.events)["app_delay_mean_ms"])
    return out


@pytest.mark.slow
def test_drepas_table1_2g_wlan_completion_time_below_default() -> None:
    """Table I (2G+WLAN, 32 MiB): MPTCP 74.8 s vs. DRePaS 40.4 s; Fig. 8: lower application delay.
    Here 16 MiB over a lossy WLAN (0.2 %) and a bufferbloated 2G path, Android buffers, decoupled
    CUBIC, 8 seeds: DRePaS finishes no later on every seed and halves the mean application delay.
    Measured (s, seeds 1-8): minRTT 39.2 21.5 27.5 21.6 27.2 31.5 39.5 24.6 (mean 29.1; the 2G path
    carries 0.45-1.2 MB, srtt 1.0-1.5 s); DRePaS(minRTT) 22.2 20.3 22.9 20.6 22.1 22.8 25.0 19.5 (mean 21.9);
    mean application delay 745-1476 ms vs. 153-190 ms. (The old engine, seeds 1-4: minRTT 42.0 172.4
    189.3 220.7 s — its WLAN cwnd froze at 1-2 segments after an RTO (seed 2: for 154 s), the bug
    the tcp_cwnd_validate change fixed; DRePaS 24.4 22.3 70.9 25.6 s. With 0.1 % WLAN loss and OLIA
    the difference is small for 32 MiB: 39.2 vs. 38.5 s, mean application delay 255 vs. 167 ms.)"""
    runs = _drepas_table1_runs()
    t, delay = {k: v[0] for k, v in runs.items()}, {k: v[1] for k, v in runs.items()}
    assert all(d <= m for d, m in zip(t["drepas"], t["minrtt"], strict=True)), t
    assert sum(delay["drepas"]) <= 0.5 * sum(delay["minrtt"]), delay


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    "the paper's magnitude (DRePaS <= 0.6 x MPTCP's completion time; Table I: 40.4 vs 74.8 s) does not "
    "hold: mean over seeds 1-8 21.9 vs 29.1 s = 0.75 (DRePaS is faster on every seed, by 1-17 s). The old "
    "engine's 0.23 (seeds 1-4) came from minRTT runs whose WLAN cwnd froze at 1-2 segments after an RTO "
    "(172-221 s completions; seed 2: cwnd <= 2 for 90 % of the run, one stretch of 154 s); with Linux's "
    "tcp_cwnd_validate minRTT recovers, and what the 2G path still costs it is HOL blocking behind a 1-1.5 s srtt."))
def test_drepas_table1_completion_time_below_0_6_of_default() -> None:
    """Table I's size of the gain: DRePaS completes in at most 0.6 × minRTT's time (sum over seeds)."""
    t = {k: v[0] for k, v in _drepas_table1_runs().items()}
    assert sum(t["drepas"]) <= 0.6 * sum(t["minrtt"]), t


# --------------------------------------------------------------------------- RBP
def test_rbp_buffer_division_worked_example() -> None:
    """Eqs. (2)-(4) by hand: acwnd (10, 40) segments, RTT (20, 100) ms.
    Buf_0 = 10·(⌈100/40 + 1/2⌉ + 1/2) = 35, Buf_1 = 40·(⌈20/200 + 1/2⌉ + 1/2) = 60;
    recvBuffer 190 -> B = (70, 120); unordered (5, 70), rwnd 100 -> rwnd_i = 100·(65, 50)/115."""
    buf = rbp_buffer_occupancy([10.0, 40.0], [20e6, 100e6])
    assert buf == [35.0, 60.0]
    b, w = rbp_receive_windows(buf, [5.0, 70.0], recv_buffer=190.0, rwnd=100.0)
    assert b == [70.0, 120.0]
    assert w == [pytest.approx(100 * 65 / 115), pytest.approx(100 * 50 / 115)]
    # B_1 <= unordered_1 -> rwnd_1 = 0 and subflow 0 gets the whole window
    _, w = rbp_receive_windows(buf, [5.0, 120.0], recv_buffer=190.0, rwnd=100.0)
    assert w == [100.0, 0.0]
    # one subflow: Buf_i = acwnd_i, it gets everything
    assert rbp_buffer_occupancy([7.0], [30e6]) == [7.0]
    # eq. (1): acwnd EWMA with beta = 1/16 on every cwnd change
    rbp = RBP(get("minrtt"))
    sf = FakeSF(0, srtt_ns=20 * MS, cwnd=10)
    rbp.on_start(FakeConn(n_segs=0, wnd_end=190 * MSS), [sf])
    sf.cwnd = 26
    rbp._update_acwnd(sf)
    rbp._update_acwnd(sf)  # unchanged cwnd: no second update
    assert rbp._acwnd[0] == pytest.approx(10 * 15 / 16 + 26 / 16)
    assert rbp.recv_buffer == 190 * MSS


def test_rbp_gates_a_subflow_whose_share_is_used_up() -> None:
    """A subflow with rwnd_i = 0 is hidden from the inner scheduler (eq. (4)-(6))."""
    fast = FakeSF(0, srtt_ns=20 * MS, cwnd=10)
    slow = FakeSF(1, srtt_ns=100 * MS, cwnd=40)
    conn = FakeConn(n_segs=100, wnd_end=190 * MSS)
    rbp = RBP(get("minrtt_noor"))
    rbp.on_start(conn, [fast, slow])
    d = rbp.select(conn, [fast, slow])
    assert d is not None and d.subflow == 0  # lowest RTT first
    rbp._unordered[0] = 10**9  # as if subflow 0 had a huge backlog of out-of-order data at the receiver
    d = rbp.select(conn, [fast, slow])
    assert d is not None and d.subflow == 1


def _data_ack_goodput_bps(r: ReplayResult, t0_ns: int, t1_ns: int) -> float:
    """`in_order_goodput_bps` straight from the recorder's DATA_ACK tap (no event table: cheaper)."""
    from workbench.replay.tables import record_frame
    assert r.recorder is not None
    acks = record_frame(r.recorder, "ack")
    a0 = acks.filter(acks["t_ns"] <= t0_ns)["data_ack"].max() or 0
    a1 = acks.filter(acks["t_ns"] <= t1_ns)["data_ack"].max()
    return (a1 - a0) * 8e9 / (t1_ns - t0_ns)


_RBP_CAUSE = ("The old engine's RBP gain was minRTT runs whose subflow cwnd froze at 1-2 segments after an RTO "
              "(old, seeds 0-3: {old}); with Linux's tcp_cwnd_validate no minRTT run collapses")


@pytest.mark.slow
@pytest.mark.parametrize("owd0_ms", [
    pytest.param(10, marks=pytest.mark.xfail(strict=True, reason=(
        "RBP +1.4 % over minRTT (mean of seeds 0-7: 8.56 vs 8.44 Mbit/s; per seed -4.6 % to +9.3 %, better "
        "in 5 of 8), not the +3 % asked. " + _RBP_CAUSE.format(
            old="8.03 vs 7.47, +7.5 %, all of it seed 2, where sf1's cwnd stayed <= 2 for 7.9 s")))),
    pytest.param(50, marks=pytest.mark.xfail(strict=True, reason=(
        "RBP -3.7 % vs minRTT (mean of seeds 0-7: 6.76 vs 7.02 Mbit/s; better in 2 of 8). " + _RBP_CAUSE.format(
            old="6.22 vs 5.53, +12.5 %, from seeds 1 and 2, where sf0's cwnd stayed <= 2 for 12-13 s")))),
])
def test_rbp_fig4_lossy_heterogeneous_goodput_above_default(owd0_ms: int) -> None:
    """Fig. 4 / Table 1: subflow0 5 Mbit/s with 10-50 ms path delay, subflow1 10 Mbit/s, 50 ms, 0.1 %
    loss on both, MSS 1400, Reno, shared receive buffer 2 × 65536 B; mean of 8 seeds of 15 s (paper:
    50 runs, up to +20 %). "Default" = minRTT (out-of-tree default with PR).
    Measured (Mbit/s, 2-15 s, seeds 0-7): 10 ms: minRTT 8.82 8.56 8.75 8.72 8.74 7.63 8.88 7.44 (mean 8.44),
    RBP 8.42 8.92 8.54 8.90 8.45 7.81 9.71 7.72 (mean 8.56, +1.4 %); 50 ms: minRTT 6.91 7.24 7.22 7.34 7.12
    6.42 7.66 6.26 (mean 7.02), RBP 7.12 7.03 7.33 6.92 7.03 5.90 6.93 5.83 (mean 6.76, -3.7 %).
    Neither reaches +3 %: strict xfail (see the reasons). Before the tcp_cwnd_validate fix (seeds 0-3)
    RBP looked +7.5 % and +12.5 % better only because minRTT's subflow cwnd froze after an RTO in some
    seeds (5.4 and 4.6 Mbit/s runs); over seeds 0-7 the old engine gave +1.6 % and +5.5 %."""
    cfg = ConnectionConfig(rcv_buf_bytes=2 * 65536, mss_bytes=1400, cc="reno")
    p0 = PathConfig.constant("sf0", rate_bps=5e6, owd_ns=owd0_ms * MS, buffer_bytes=50_000, loss=0.001)
    p1 = PathConfig.constant("sf1", rate_bps=10e6, owd_ns=50 * MS, buffer_bytes=100_000, loss=0.001)
    g = {}
    for name in ("minrtt", "rbp"):
        runs = [run_replay([p0, p1], get(name), workload=Bulk(), conn=cfg, duration_ns=15 * S, seed=seed)
                for seed in range(8)]
        g[name] = sum(_data_ack_goodput_bps(r, 2 * S, 15 * S) for r in runs) / len(runs)
    assert g["rbp"] >= 1.03 * g["minrtt"], g


# --------------------------------------------------------------------------- every byte once
class _ReadOnly(Layer):
    """Engine state must be the same before and after each decision of the wrapped scheduler."""

    name = "readonly_b"

    def select(self, conn, subflows):  # type: ignore[no-untyped-def]
        snap = (conn.head, conn.n_segs, conn.snd_una, conn.wnd_end,
                tuple((s.in_flight, s.queued, s.srtt_ns) for s in subflows))
        d = self.inner.select(conn, subflows)
        assert snap == (conn.head, conn.n_segs, conn.snd_una, conn.wnd_end,
                        tuple((s.in_flight, s.queued, s.srtt_ns) for s in subflows))
        return d


@pytest.mark.parametrize("name", MINE)
def test_lossy_two_path_finite_transfer_delivers_every_byte_once(name: str) -> None:
    size = 1_500_000
    paths = [PathConfig.constant("wifi", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=60_000, loss=0.005),
             PathConfig.constant("lte", rate_bps=10e6, owd_ns=40 * MS, buffer_bytes=120_000, loss=0.005)]
    sched: Scheduler = _ReadOnly(get(name))
    r = run_replay(paths, sched, workload=Finite(size_bytes=size), seed=11)
    assert r.summary["completed"] and r.summary["delivered_bytes"] == size, r.summary
    o = ooo_summary(r.events).row(0, named=True)
    assert o["unique_bytes"] == size and o["n_undeliverable"] == 0
    sent = r.events.filter((pl.col("point") == "snd") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    assert set(sent["path"].unique().to_list()) == {"wifi", "lte"}  # both paths carried data
    assert math.isfinite(summarize(r.events, r.samples)["goodput_mbps"])
    r2 = run_replay(paths, get(name), workload=Finite(size_bytes=size), seed=11)
    assert r.events.equals(r2.events)  # deterministic
