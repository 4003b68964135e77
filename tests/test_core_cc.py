"""The compiled core's congestion controls (native/engine/src/cc.rs: `workbench_core.CcGroup`)
against `workbench.replay.cc`, call by call.

Each example drives three copies of one connection's CC with the same random calls: Python's on the
engine's own subflows (`SubflowSender`, whose group sums run compiled in
`workbench.replay.mptcp.lia_terms` / `olia_terms`), Python's on the shipped test double
(`StubSubflow`, for which cc.py sums in its own Python loops), and Rust's. The calls are what the
engine makes: ACKs (cong_avoid, with una / nxt / una_bytes advancing), RTT samples (on_rtt, with the
minimum and smoothed RTT updated first), losses (ssthresh, the window cut, on_state) and bare state
changes, and the engine's own field changes (a window set, a subflow joining, the counter reset), at
non-decreasing times (the same instant and CUBIC's 31.25 ms reuse period to the ns included). After
every call every field of every subflow, CUBIC's and OLIA's state included, must be equal in value
and type, floats to the bit.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import workbench_core
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay import mptcp
from workbench.replay.cc import _CubicState, make_cc
from workbench.replay.events import EventLoop
from workbench.replay.link import Link
from workbench.replay.mptcp import Connection, ConnectionConfig
from workbench.replay.paths import StepSeries
from workbench.replay.tcp import SubflowSender
from workbench.schedulers import get
from workbench.testing import StubSubflow

MS = 1_000_000
NO_RTT_US = 1 << 62  # SubflowSender.min_rtt_us before the first sample
FIELDS = ("cwnd", "ssthresh", "cwnd_cnt", "min_rtt_us", "srtt_us8", "una", "nxt", "una_bytes", "established",
          "hystart_exits")
CCS = [("reno", True), ("cubic", True), ("cubic", False), ("lia", True), ("olia", True)]


def exact(v: Any) -> Any:
    """A value compared with its type, floats by their bits (so -0.0 != 0.0 and 1 != 1.0)."""
    if isinstance(v, dict):
        return {k: exact(x) for k, x in v.items()}
    if isinstance(v, list):
        return [exact(x) for x in v]
    if isinstance(v, float):
        return ("float", v.hex())
    return (type(v).__name__, v)


def py_fields(sf: Any) -> dict:
    d = {f: getattr(sf, f) for f in FIELDS}
    cs = sf.cc_state
    d["cc_state"] = cs if cs is None or isinstance(cs, list) else {f: getattr(cs, f) for f in _CubicState.__slots__}
    return exact(d)


def engine_subflows(n: int) -> list[SubflowSender]:
    """Real engine subflows (compiled by mypyc: their constructor wants a real connection and link)."""
    loop = EventLoop()
    conn = Connection(loop, ConnectionConfig(), get("minrtt"), random.Random(0), None)
    one = StepSeries((0,), (1e6,))
    link = Link(loop, name="x", rate_bps=one, owd_ns=one, loss=StepSeries((0,), (0.0,)), buffer_bytes=10**6,
                rng=random.Random(0), deliver=lambda _: None)
    return [SubflowSender(loop, index=k, name=f"p{k}", conn=conn, link=link, mss=1448, hdr_bytes=52, init_cwnd=10,
                          rto_min_ns=200 * MS, rec=None) for k in range(n)]


class Trio:
    """One connection's CC three times: Python on engine subflows, Python on stubs, Rust."""

    def __init__(self, name: str, hystart: bool, inits: list[dict]) -> None:
        n = len(inits)
        self.engine = engine_subflows(n)
        self.stubs = [StubSubflow(cwnd=10, ssthresh=10, srtt_ms=0) for _ in range(n)]
        for stub, sf in zip(self.stubs, self.engine, strict=True):  # as SubflowSender starts (and CcGroup)
            for f in FIELDS:
                setattr(stub, f, getattr(sf, f))
        self.py = [make_cc(name, self.engine, hystart=hystart), make_cc(name, self.stubs, hystart=hystart)]
        self.rust = workbench_core.CcGroup(name, n, hystart=hystart)
        for k, fields in enumerate(inits):
            self.set(k, **fields)
        # both Python paths are the ones meant: compiled sums for the engine's subflows only
        assert mptcp.lia_terms(self.engine) is not None
        assert mptcp.lia_terms(self.stubs) is None

    def groups(self) -> list[tuple[Any, list]]:
        return [(self.py[0], self.engine), (self.py[1], self.stubs)]

    def set(self, k: int, **fields: Any) -> None:
        for _, group in self.groups():
            for f, v in fields.items():
                setattr(group[k], f, v)
        self.rust.set(k, **fields)

    def get(self, k: int, field: str) -> Any:
        return getattr(self.stubs[k], field)

    def call(self, method: str, k: int, *args: int) -> Any:
        out = [getattr(cc, method)(group[k], *args) for cc, group in self.groups()]
        out.append(getattr(self.rust, method)(k, *args))
        assert out[0] == out[1] == out[2], (method, out)
        return out[0]

    def assert_equal(self, where: object) -> None:
        for k in range(len(self.stubs)):
            rust = exact(self.rust.subflow(k))
            assert py_fields(self.engine[k]) == rust, (where, k, "engine subflows")
            assert py_fields(self.stubs[k]) == rust, (where, k, "stub subflows")


# ------------------------------------------------------------------------------------------ scenarios

cwnds = st.integers(1, 300) | st.integers(1, 100_000)
durations_ns = (st.sampled_from([0, 1000, 31_250_000]) | st.integers(0, 3 * MS) | st.integers(0, 100 * MS)
                | st.integers(0, 3000 * MS))
rtts_us = st.integers(0, 2000) | st.integers(1000, 400_000)


@st.composite
def subflow_init(draw: st.DrawFn) -> dict:
    nxt = draw(st.integers(0, 100))
    return {
        "cwnd": draw(cwnds),
        "ssthresh": draw(st.just(1 << 30) | st.integers(2, 300)),
        "cwnd_cnt": draw(st.just(0.0) | st.floats(-1.5, 300.0)),
        "srtt_us8": draw(st.just(0) | st.integers(1, 8 * 400_000)),
        "min_rtt_us": draw(st.just(NO_RTT_US) | rtts_us),
        "una": draw(st.integers(0, nxt)),
        "nxt": nxt,
        "una_bytes": draw(st.integers(1, 10**6)),
        "established": draw(st.sampled_from([True, True, True, False])),
    }


def rtt_train(gap_us: tuple[int, int]) -> st.SearchStrategy[list[tuple[int, int]]]:
    """RTT samples within one round (una stays), as (gap before it, RTT) µs: close together an ACK
    train, spread out a round of samples for HyStart's delay detection; all above a random floor."""
    return st.integers(0, 40_000).flatmap(lambda floor_us: st.lists(
        st.tuples(st.integers(*gap_us), st.integers(floor_us, floor_us + 30_000)), min_size=2, max_size=16))


def ops(n: int) -> st.SearchStrategy[tuple]:
    k = st.integers(0, n - 1)
    by_kind = {
        # (segments acked, segments acked in sequence, segments sent meanwhile, bytes acked)
        "ack": st.tuples(st.integers(0, 64) | st.integers(0, 3000), st.integers(0, 40), st.integers(0, 40),
                         st.integers(0, 60_000)),
        "rtt": rtts_us,
        "rtts": st.sampled_from([(0, 3000), (2001, 20_000)]).flatmap(rtt_train),
        # entering Recovery (3) or Loss (4), and the window after the cut as a share of ssthresh
        "loss": st.tuples(st.sampled_from([3, 4]), st.floats(0.0, 1.0)),
        "state": st.integers(0, 4),
        # the engine's own changes: a window set (recovery's end, PRR), a join, a counter reset
        "set": st.tuples(st.just("cwnd"), st.integers(1, 400)) | st.tuples(st.just("ssthresh"), st.integers(2, 400))
        | st.tuples(st.just("established"), st.just(True)) | st.tuples(st.just("cwnd_cnt"), st.just(0.0)),
    }
    # most calls are ACKs, as in a replay
    kinds = st.sampled_from(["ack", "ack", "ack", "ack", "rtt", "rtts", "loss", "state", "set"])
    return kinds.flatmap(lambda kind: st.tuples(st.just(kind), k, durations_ns, by_kind[kind]))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[dict], int, list[tuple]]:
    n = draw(st.integers(1, 4))
    inits = [draw(subflow_init()) for _ in range(n)]
    t0_ns = draw(st.just(0) | st.integers(0, 10_000 * MS))  # 0: CUBIC's epoch_start 0 means "none"
    return inits, t0_ns, draw(st.lists(ops(n), min_size=10, max_size=60))


def rtt_sample(trio: Trio, k: int, rtt_us: int, now_ns: int) -> None:
    """As SubflowSender.rtt_sample (minimum and smoothed RTT), then the CC's on_rtt."""
    srtt_us8 = trio.get(k, "srtt_us8")
    srtt_us8 = rtt_us << 3 if srtt_us8 == 0 else srtt_us8 + rtt_us - (srtt_us8 >> 3)
    trio.set(k, min_rtt_us=min(trio.get(k, "min_rtt_us"), rtt_us), srtt_us8=max(srtt_us8, 1))
    trio.call("on_rtt", k, rtt_us, now_ns)


def run_op(trio: Trio, op: tuple, now_ns: int) -> int:
    """Run `op` at `now_ns`; returns the time after it (a train of RTT samples takes time)."""
    kind, k = op[0], op[1]
    if kind != "set" and not trio.get(k, "established"):
        # Only an established subflow gets ACKs, samples and losses (and it stays established). OLIA
        # would not be defined otherwise: the rate sum leaves out a subflow that is not established, so
        # its cwnd / rate^2 has no bound and cwnd grows past any integer size.
        trio.set(k, established=True)
    if kind == "ack":
        acked, d_una, d_nxt, d_bytes = op[3]
        nxt = trio.get(k, "nxt") + d_nxt
        trio.set(k, nxt=nxt, una=min(trio.get(k, "una") + d_una, nxt), una_bytes=trio.get(k, "una_bytes") + d_bytes)
        trio.call("cong_avoid", k, acked, now_ns)
    elif kind == "rtt":
        rtt_sample(trio, k, op[3], now_ns)
    elif kind == "rtts":
        for gap_us, rtt_us in op[3]:
            now_ns += gap_us * 1000
            rtt_sample(trio, k, rtt_us, now_ns)
    elif kind == "loss":
        state, share = op[3]
        ssthresh = trio.call("ssthresh", k)
        cut = {"ssthresh": ssthresh, "cwnd": max(1, int(ssthresh * share))}
        if state == 4:
            cut["cwnd_cnt"] = 0.0
        trio.set(k, **cut)
        trio.call("on_state", k, state, now_ns)
    elif kind == "state":
        trio.call("on_state", k, op[3], now_ns)
    else:
        field, value = op[3]
        trio.set(k, **{field: value})
    return now_ns


@pytest.mark.parametrize(("name", "hystart"), CCS, ids=[f"{n}{'' if h else '-nohystart'}" for n, h in CCS])
@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sc=scenarios())
def test_cc_equals_the_python_cc_after_every_call(name: str, hystart: bool, sc) -> None:
    inits, now_ns, script = sc
    trio = Trio(name, hystart, inits)
    trio.assert_equal("init")
    for i, op in enumerate(script):
        now_ns = run_op(trio, op, now_ns + op[2])
        trio.assert_equal((i, op))


# ------------------------------------------------------------------------------------------ by hand


def cubic_state(group: Any, k: int = 0) -> dict:
    return group.subflow(k)["cc_state"]


def test_cubic_ssthresh_is_717_of_1024_with_fast_convergence() -> None:
    g = workbench_core.CcGroup("CUBIC", 1)
    g.set(0, cwnd=100, ssthresh=50)
    assert g.ssthresh(0) == 70  # 100 x 717/1024 = 70.02
    assert cubic_state(g)["last_max_cwnd"] == 100.0
    g.set(0, cwnd=80)
    assert g.ssthresh(0) == 56
    assert cubic_state(g)["last_max_cwnd"] == 68.0078125  # below W_max: 80 x (1024 + 717) / 2048
    g.on_state(0, 4, 0)  # Loss: every field reset, W_max too
    assert cubic_state(g)["last_max_cwnd"] == 0.0


def test_slow_start_and_lias_quarter_segment_per_window() -> None:
    g = workbench_core.CcGroup("reno", 1)
    g.set(0, cwnd=10, ssthresh=14)
    g.cong_avoid(0, 10, 0)  # 4 segments reach ssthresh, the 6 acks left over go to the AI counter
    assert (g.subflow(0)["cwnd"], g.subflow(0)["cwnd_cnt"]) == (14, 6.0)
    # RFC 6356: two equal paths, alpha = cwnd_tot x (w/rtt^2) / (cwnd_tot/rtt)^2 = w / cwnd_tot, one
    # segment per cwnd_tot / alpha acked: 80 x 80 / 40 = 160, then 81 x 81 / 41 = 160.02
    lia = workbench_core.CcGroup("coupled", 2)
    for k in (0, 1):
        lia.set(k, cwnd=40, ssthresh=10, srtt_us8=8 * 20_000, established=True)
    for _ in range(160):
        lia.cong_avoid(0, 1, 0)
    assert (lia.subflow(0)["cwnd"], lia.subflow(0)["cwnd_cnt"]) == (41, 0.0)
    for _ in range(160):
        lia.cong_avoid(0, 1, 0)
    assert lia.subflow(0)["cwnd"] == 41  # 160 < 160.02
    lia.cong_avoid(0, 1, 0)
    assert lia.subflow(0)["cwnd"] == 42
    assert lia.subflow(1)["cwnd"] == 40
    with pytest.raises(ValueError, match="unknown congestion control 'bbr'"):
        workbench_core.CcGroup("bbr", 1)
    with pytest.raises(IndexError):
        lia.cong_avoid(2, 1, 0)


def lia_pair() -> Trio:
    """LIA on two paths in congestion avoidance: cwnd 40 and 30, srtt 50.618 and 53.861 ms."""
    return Trio("lia", True, [{"cwnd": cwnd, "ssthresh": 10, "srtt_us8": s, "established": True}
                              for cwnd, s in zip((40, 30), (404_944, 430_888), strict=True)])


def test_lia_squares_with_c_pow_as_python_does() -> None:
    """Python's `r ** 2` is C pow(r, 2), which glibc rounds differently from r * r about once in a
    thousand; here one of the squares differs, and with r * r the counter would end at
    69.9242995533275 (Rust's compiler turns a literal pow(x, 2.0) into x * x unless kept from it)."""
    trio = lia_pair()
    trio.call("cong_avoid", 0, 1000, 0)
    trio.assert_equal("after 1000 acked")
    assert trio.get(0, "cwnd_cnt") == 69.92429955332727
    assert trio.get(0, "cwnd") == 48  # 1000 // 116.26


def test_cong_avoid_ai_floors_as_python_floor_division() -> None:
    """`cwnd_cnt // w` is CPython's fmod-based floor division, not floor(cwnd_cnt / w): here the
    counter reaches 1046.3351630025068, just under 9 w (w = 116.25946255583409 for these two paths)
    though the quotient rounds to 9.0. Python grows cwnd by 8 and keeps almost a whole w; floor(x / w)
    would grow it by 9 and leave the counter slightly negative."""
    trio = lia_pair()
    trio.set(0, cwnd_cnt=0.3351630025067607)  # + 1046 acked = 1046.3351630025068 exactly
    trio.call("cong_avoid", 0, 1046, 0)
    trio.assert_equal("after 1046 acked")
    assert trio.get(0, "cwnd") == 48
    assert 116.259 < trio.get(0, "cwnd_cnt") < 116.26
