"""Every built-in congestion control, as the compiled engine runs it (`workbench_core.CcGroup`), passes
the shipped CC conformance checks (workbench.testing.check_congestion_control); the checks catch a CC
that breaks the contract, and a user's own CC class (``make=``) is checked on the stubs as it is."""

from __future__ import annotations

import pytest

from workbench.testing import CC_CHECKS, StubSubflow, check_congestion_control


@pytest.mark.parametrize("check", CC_CHECKS)
@pytest.mark.parametrize("name", ["reno", "cubic", "lia", "coupled", "olia"])
def test_builtin_cc_conforms(name: str, check: str) -> None:
    assert check_congestion_control(name, checks=[check]) == []


class Greedy:
    """Grows by two segments per ACK per subflow of its group (more with more subflows: the coupling
    works backwards) and never backs off."""

    def __init__(self, group: list[StubSubflow]) -> None:
        self.group = group

    def cong_avoid(self, sf: StubSubflow, acked: int, now_ns: int) -> None:
        sf.cwnd += 2 * len(self.group) * acked

    def ssthresh(self, sf: StubSubflow) -> int:
        return sf.cwnd


def test_the_checks_catch_a_broken_cc() -> None:
    problems = check_congestion_control("lia", make=Greedy)
    kinds = {p.split(":")[0] for p in problems}
    assert kinds == {"slow_start", "decrease", "avoidance", "coupled"}, problems


class HalfReno:
    """A plain-Python Reno (tcp_slow_start + tcp_cong_avoid_ai, halving on loss): a user's own CC
    that keeps the contract, except, with ``flaw``, in exactly one way."""

    def __init__(self, group: list[StubSubflow], flaw: str = "") -> None:
        self.group, self.flaw = group, flaw

    def cong_avoid(self, sf: StubSubflow, acked: int, now_ns: int) -> None:
        if self.flaw == "no_ssthresh":  # slow start for ever
            sf.cwnd += acked
            return
        if sf.cwnd < sf.ssthresh:
            cwnd = min(sf.cwnd + acked, sf.ssthresh)
            acked -= cwnd - sf.cwnd
            sf.cwnd = cwnd
            if acked <= 0:
                return
        if self.flaw == "frozen":
            return
        sf.cwnd_cnt += acked
        if sf.cwnd_cnt >= sf.cwnd:
            sf.cwnd += int(sf.cwnd_cnt // sf.cwnd)
            sf.cwnd_cnt %= sf.cwnd

    def ssthresh(self, sf: StubSubflow) -> int:
        if self.flaw == "deep_cut":
            return max(sf.cwnd >> 2, 2)
        return max(sf.cwnd >> 1, 2)


@pytest.mark.parametrize(("flaw", "caught"), [("", set()), ("no_ssthresh", {"slow_start"}),
                                              ("frozen", {"avoidance"}), ("deep_cut", {"decrease"})])
def test_a_users_cc_is_checked_as_it_is(flaw: str, caught: set[str]) -> None:
    problems = check_congestion_control("reno", make=lambda group: HalfReno(group, flaw))
    assert {p.split(":")[0] for p in problems} == caught, problems


def test_the_default_checks_the_compiled_cc_on_the_stubs() -> None:
    """The adapter takes the stubs' fields into the compiled CC and its results back: 10 ACKs in slow
    start on a stub are cwnd 10 -> 20 on the stub, and CUBIC's ssthresh of cwnd 100 is 100 x 717/1024
    = 70.02 -> 70 with W_max 100 in the stub's cc_state."""
    from workbench._cc_conformance import _CompiledCC

    sf = StubSubflow(cwnd=100, ssthresh=1 << 30, srtt_ms=20)
    cc = _CompiledCC("cubic", [sf])
    assert cc.ssthresh(sf) == 70
    assert sf.cc_state["last_max_cwnd"] == 100.0
    sf.cwnd = 10
    for _ in range(10):
        cc.cong_avoid(sf, 1, 0)
    assert (sf.cwnd, sf.cwnd_cnt) == (20, 0.0)
