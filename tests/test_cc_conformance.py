"""Every built-in congestion control passes the shipped CC conformance checks, and the checks
catch a CC that breaks the contract."""

from __future__ import annotations

import pytest

from workbench.replay.cc import CongestionControl
from workbench.testing import CC_CHECKS, check_congestion_control


@pytest.mark.parametrize("check", CC_CHECKS)
@pytest.mark.parametrize("name", ["reno", "cubic", "lia", "olia"])
def test_builtin_cc_conforms(name: str, check: str) -> None:
    assert check_congestion_control(name, checks=[check]) == []


def test_the_checks_catch_a_broken_cc() -> None:
    class Greedy(CongestionControl):
        """Grows by two segments per ACK per subflow of its group (more with more subflows: the
        coupling works backwards) and never backs off."""

        name = "greedy"

        def cong_avoid(self, sf, acked, now_ns):  # type: ignore[no-untyped-def]
            sf.cwnd += 2 * len(self.group) * acked

        def ssthresh(self, sf):  # type: ignore[no-untyped-def]
            return sf.cwnd

    problems = check_congestion_control("lia", make=Greedy)
    kinds = {p.split(":")[0] for p in problems}
    assert kinds == {"slow_start", "decrease", "avoidance", "coupled"}, problems
