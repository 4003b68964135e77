"""Congestion-control conformance: what every congestion control must do, checked on `StubSubflow`s
(the shipped test double: the few subflow fields a CC reads and writes), so a built-in or a new CC is
held to the Linux contract the built-in ones follow.

By default `check_congestion_control(name)` checks the compiled CC the engine runs (Reno, CUBIC with
HyStart, LIA, OLIA: `workbench_core.CcGroup`, native/engine/src/cc.rs) through a small adapter that
copies the stubs' fields into the group before each call and back after it. ``make=`` checks your own
CC instead: any object with ``cong_avoid(sf, acked, now_ns)`` and ``ssthresh(sf) -> int`` that reads
and writes the stub's fields (cwnd and ssthresh in segments, ``cwnd_cnt`` its growth counter,
``srtt_us8``, ``min_rtt_us``, ``una_bytes``, ...), built by ``make(group)`` for a list of stubs.

Checks (`CC_CHECKS`):

``slow_start``  below ssthresh each ACKed segment adds one segment (tcp_slow_start): 10 single-segment
                ACKs take cwnd 10 -> 20, and growth stops at ssthresh (10 ACKs from 10 at ssthresh 14: 14).
``decrease``    on loss ssthresh is between half and three quarters of cwnd (Reno/LIA/OLIA 1/2,
                CUBIC 717/1024), and never below 2.
``avoidance``   at ssthresh, a window of ACKs per RTT for 20 RTTs grows cwnd by at least one segment
                and never more than doubles it in one RTT.
``coupled``     with two subflows of equal RTT, the coupled increase of one is no larger than a lone
                subflow's under the same CC (RFC 6356 goal 2: do no harm) — checked when ``name`` is a
                coupled CC (``lia``/``coupled``, ``olia``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["CC_CHECKS", "StubSubflow", "check_congestion_control"]

CC_CHECKS: tuple[str, ...] = ("slow_start", "decrease", "avoidance", "coupled")
_COUPLED = ("lia", "coupled", "olia")
_MAX_WINDOW = 100_000  # segments: far beyond any real window
# the subflow fields `workbench_core.CcGroup.set` takes (the CC's own state and counters it keeps)
_SETTABLE = ("cwnd", "ssthresh", "cwnd_cnt", "min_rtt_us", "srtt_us8", "una", "nxt", "una_bytes", "established")


class StubSubflow:
    """A subflow as a congestion controller sees it (cwnd in segments, srtt in µs × 8)."""

    def __init__(self, *, cwnd: int, ssthresh: int, srtt_ms: float) -> None:
        self.cwnd = cwnd
        self.ssthresh = ssthresh
        self.cwnd_cnt = 0.0
        self.cc_state: Any = None
        self.srtt_us8 = int(srtt_ms * 1000) << 3
        self.min_rtt_us = int(srtt_ms * 1000)
        self.established = True
        self.una_bytes = 1
        self.una = self.nxt = 0
        self.hystart_exits = 0


class _CompiledCC:
    """The compiled CC `name` (`workbench_core.CcGroup`) over a group of stubs, with the interface the
    checks drive: before each call every stub's fields go into the group (a coupled CC reads them
    all), after it every subflow's fields come back (its ``cc_state`` and ``hystart_exits`` too)."""

    def __init__(self, name: str, group: list[StubSubflow], *, hystart: bool = True) -> None:
        import workbench_core

        self.group = group
        self.cc = workbench_core.CcGroup(name, len(group), hystart=hystart)

    def _index(self, sf: StubSubflow) -> int:
        for k, s in enumerate(self.group):
            if s is sf:
                return k
        raise ValueError("subflow not in this CC's group")

    def _push(self) -> None:
        for k, s in enumerate(self.group):
            self.cc.set(k, cwnd=int(s.cwnd), ssthresh=int(s.ssthresh), cwnd_cnt=float(s.cwnd_cnt),
                        min_rtt_us=int(s.min_rtt_us), srtt_us8=int(s.srtt_us8), una=int(s.una), nxt=int(s.nxt),
                        una_bytes=int(s.una_bytes), established=bool(s.established))

    def _pull(self) -> None:
        for k, s in enumerate(self.group):
            for field, value in self.cc.subflow(k).items():
                setattr(s, field, value)

    def _call(self, method: str, sf: StubSubflow, *args: int) -> Any:
        k = self._index(sf)
        self._push()
        out = getattr(self.cc, method)(k, *args)
        self._pull()
        return out

    def cong_avoid(self, sf: StubSubflow, acked: int, now_ns: int) -> None:
        self._call("cong_avoid", sf, acked, now_ns)

    def ssthresh(self, sf: StubSubflow) -> int:
        return int(self._call("ssthresh", sf))

    def on_rtt(self, sf: StubSubflow, rtt_us: int, now_ns: int) -> None:
        self._call("on_rtt", sf, rtt_us, now_ns)

    def on_state(self, sf: StubSubflow, state: int, now_ns: int) -> None:
        self._call("on_state", sf, state, now_ns)


def _windows(cc: Any, sf: StubSubflow, n: int, *, rtt_ns: int, t0_ns: int = 0) -> list[int]:
    """cwnd after each of ``n`` RTTs of single-segment ACKs (one window per RTT)."""
    out = []
    t = t0_ns
    for _ in range(n):
        w = min(sf.cwnd, _MAX_WINDOW)  # a runaway CC must not make the check itself run away
        for i in range(w):
            sf.una_bytes += 1448
            cc.cong_avoid(sf, 1, t + rtt_ns * i // w)
            if sf.cwnd > _MAX_WINDOW:
                break
        t += rtt_ns
        out.append(sf.cwnd)
        if sf.cwnd > _MAX_WINDOW:
            break
    return out


def _check(make: Callable[[list[Any]], Any], name: str, check: str) -> list[str]:
    if check == "slow_start":
        sf = StubSubflow(cwnd=10, ssthresh=1 << 30, srtt_ms=50)
        cc = make([sf])
        for _ in range(10):
            cc.cong_avoid(sf, 1, 0)
        out = [] if sf.cwnd == 20 else [f"10 ACKs in slow start took cwnd 10 -> {sf.cwnd}, expected 20"]
        sf2 = StubSubflow(cwnd=10, ssthresh=14, srtt_ms=50)
        cc2 = make([sf2])
        for _ in range(10):  # 4 reach ssthresh; the 6 past it are far less than a window of avoidance
            cc2.cong_avoid(sf2, 1, 0)
        if sf2.cwnd != 14:
            out.append(f"10 ACKs from cwnd 10 at ssthresh 14 took cwnd to {sf2.cwnd}, expected 14")
        return out
    if check == "decrease":
        out = []
        for cwnd in (2, 3, 10, 100, 1000):
            sf = StubSubflow(cwnd=cwnd, ssthresh=cwnd, srtt_ms=50)
            th = make([sf]).ssthresh(sf)
            if th < 2 or (cwnd >= 8 and not 0.5 * cwnd - 1 <= th <= 0.75 * cwnd):
                out.append(f"ssthresh {th} for cwnd {cwnd}")
        return out
    if check == "avoidance":
        sf = StubSubflow(cwnd=20, ssthresh=20, srtt_ms=50)
        cc = make([sf])
        ws = _windows(cc, sf, 20, rtt_ns=50_000_000, t0_ns=1_000_000_000)
        out = []
        if ws[-1] <= 20:
            out.append(f"no growth in 20 RTTs of congestion avoidance (cwnd {ws[-1]})")
        prev = 20
        for w in ws:
            if w > 2 * prev:
                out.append(f"cwnd more than doubled in one RTT ({prev} -> {w})")
                break
            prev = w
        return out
    if check == "coupled":
        if name.lower() not in _COUPLED:
            return []
        lone = StubSubflow(cwnd=20, ssthresh=20, srtt_ms=50)
        grow_lone = _windows(make([lone]), lone, 10, rtt_ns=50_000_000)[-1] - 20
        a, b = (StubSubflow(cwnd=20, ssthresh=20, srtt_ms=50) for _ in range(2))
        grow_a = _windows(make([a, b]), a, 10, rtt_ns=50_000_000)[-1] - 20
        return [] if grow_a <= grow_lone else [f"coupled growth {grow_a} > a lone subflow's {grow_lone}"]
    raise ValueError(f"unknown check {check!r}; known: {', '.join(CC_CHECKS)}")


def check_congestion_control(name: str, *, make: Callable[[list[Any]], Any] | None = None,
                             checks: Iterable[str] = CC_CHECKS) -> list[str]:
    """Problems found (``[]`` = conforms), each as ``"<check>: <problem>"``. ``name`` is the CC's name
    (``reno``, ``cubic``, ``lia``/``coupled``, ``olia``: a coupled one also gets the ``coupled``
    check). ``make(group)`` builds the CC to check for a list of `StubSubflow`s; by default the
    compiled one of that name (`workbench_core.CcGroup`, through an adapter)."""
    if make is None:

        def make(group: list[Any]) -> Any:
            return _CompiledCC(name, group)
    return [f"{c}: {p}" for c in checks for p in _check(make, name, c)]
