"""The shipped conformance suite (`workbench.testing`): every registered scheduler passes it (cases
collected from the registry, so new schedulers join automatically), and each check catches the fault
it exists for — shown with deliberately broken schedulers — while leaving correct behaviour alone."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from workbench.plugins import load_scheduler_class
from workbench.replay import Finite, PathConfig, run_replay
from workbench.schedulers import (
    ConnView,
    Decision,
    Scheduler,
    SubflowView,
    get,
    is_available,
)
from workbench.testing import (
    CHECKS,
    _Findings,
    _Probe,
    assert_conforms,
    check_scheduler,
    declares_queueing_beyond_cwnd,
    scheduler_conformance_cases,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "my_scheduler.py"
MS = 1_000_000

def _registered_cases() -> list[object]:
    # Every registered scheduler, each check its own test case; the classes that queue beyond cwnd
    # by design (upstream, DAPS, OTIAS) say so with `queues_beyond_cwnd`.
    return [pytest.param(case, id=str(case)) for case in scheduler_conformance_cases(quick=True)]


@pytest.mark.parametrize("case", _registered_cases())
def test_registered_scheduler_conforms(case) -> None:
    case.check()


# ------------------------------------------------------------------ broken schedulers, one fault each

def _fastest(subflows: list[SubflowView]) -> SubflowView | None:
    ready = [sf for sf in subflows if is_available(sf)]
    return min(ready, key=lambda s: (s.srtt_ns, s.index)) if ready else None


class Polite(Scheduler):
    """A correct minimal scheduler the broken ones below are variations of."""

    name = "polite"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        sf = _fastest(subflows)
        if sf is None:
            return None
        if conn.reinject_head >= 0:
            return Decision(sf.index, conn.reinject_head)
        if conn.head >= conn.n_segs or not conn.window_allows(conn.head):
            return None
        return Decision(sf.index)


class NeverSends(Scheduler):
    name = "never_sends"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        return None


class DropsSegment(Polite):
    """Never sends meta segment 10 (and ignores the reinjection queue that would recover it)."""

    name = "drops_segment"

    def __init__(self) -> None:
        super().__init__()
        self.next = 0  # lowest unsent segment past the dropped one (the head stays at 10 for good)

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        sf = _fastest(subflows)
        if sf is None:
            return None
        i = conn.head
        if i == 10:
            i = max(11, self.next)
            while i < conn.n_segs and conn.seg_sent(i):
                i += 1
        if i >= conn.n_segs or not conn.window_allows(i):
            return None
        self.next = i + 1
        return Decision(sf.index, i)


class IgnoresCwnd(Scheduler):
    """Everything unsent to the lowest-RTT established subflow at once."""

    name = "ignores_cwnd"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        up = [sf for sf in subflows if sf.established]
        if not up or conn.head >= conn.n_segs or not conn.window_allows(conn.head):
            return None
        return Decision(min(up, key=lambda s: (s.srtt_ns, s.index)).index, count=10_000)


class DeclaredQueueing(IgnoresCwnd):
    name = "declared_queueing"
    queues_beyond_cwnd = True


class GlobalRandom(Polite):
    """Picks a subflow with the process-wide `random` module (and waits if it has no cwnd room): not
    reproducible from the run's seed."""

    name = "global_random"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        up = [sf for sf in subflows if sf.established]
        if not up or conn.head >= conn.n_segs or not conn.window_allows(conn.head):
            return None
        sf = random.choice(up)
        return Decision(sf.index) if is_available(sf) else None


class MutatesState(Polite):
    """"Penalizes" the slow subflow by writing its ssthresh instead of calling conn.penalize."""

    name = "mutates_state"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        slow = max((sf for sf in subflows if sf.established), key=lambda s: s.srtt_ns, default=None)
        if slow is not None and slow.ssthresh != max(2, slow.cwnd // 2):
            slow.ssthresh = max(2, slow.cwnd // 2)  # type: ignore[misc]
        return super().select(conn, subflows)


class WaitsForBigWindow(Polite):
    """Sends only when the receiver offers at least 64 segments of window."""

    name = "waits_for_big_window"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        if conn.wnd_end - conn.snd_una < 64 * conn.mss:
            return None
        return super().select(conn, subflows)


class AbandonsAfterRto(Polite):
    """Never uses a subflow again after its first RTO (unless it is the last one left)."""

    name = "abandons_after_rto"

    def __init__(self) -> None:
        super().__init__()
        self.banned: set[int] = set()

    def on_loss(self, conn: ConnView, sf: SubflowView, kind: str, now_ns: int) -> None:
        if kind == "rto":
            self.banned.add(sf.index)

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        kept = [sf for sf in subflows if sf.index not in self.banned]
        return super().select(conn, kept or subflows)


class Spins(Scheduler):
    """Asks to be woken "now" forever: simulated time never advances."""

    name = "spins"

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        conn.wake_at(conn.now_ns)
        return None


def _failed(problems: list[str]) -> set[str]:
    return {p.split(":", 1)[0] for p in problems}


def test_a_correct_minimal_scheduler_passes_everything() -> None:
    assert check_scheduler(Polite, quick=True) == []


def test_never_sends_fails_delivery() -> None:
    problems = check_scheduler(NeverSends, quick=True, checks=["delivery", "receive_window", "outage"])
    assert _failed(problems) == {"delivery", "receive_window", "outage"}
    assert any("did not complete" in p and "0 B delivered" in p for p in problems)


def test_dropping_a_segment_fails_delivery() -> None:
    problems = check_scheduler(DropsSegment, quick=True, checks=["delivery", "read_only", "cwnd"])
    assert _failed(problems) == {"delivery"}, problems
    assert "did not complete" in problems[0] and "14240 B delivered in order" in problems[0]  # segments 0-9


def test_ignoring_cwnd_fails_only_the_cwnd_check() -> None:
    problems = check_scheduler(IgnoresCwnd, quick=True)
    assert _failed(problems) == {"cwnd"}, problems
    assert re.search(r"beyond its cwnd room", problems[0])
    # declaring it (class attribute, or the override) makes the same behaviour conform
    assert declares_queueing_beyond_cwnd(DeclaredQueueing())
    assert check_scheduler(DeclaredQueueing, quick=True, checks=["cwnd"]) == []
    assert check_scheduler(IgnoresCwnd, quick=True, checks=["cwnd"], queues_beyond_cwnd=True) == []


def test_global_random_fails_determinism() -> None:
    problems = check_scheduler(GlobalRandom, quick=True, checks=["deterministic", "delivery", "cwnd"])
    assert _failed(problems) == {"deterministic"}, problems
    assert "different PacketEvents" in problems[0]


def test_writing_a_view_attribute_fails_read_only() -> None:
    problems = check_scheduler(MutatesState, quick=True, checks=["read_only", "delivery"])
    assert _failed(problems) == {"read_only"}, problems
    assert "ssthresh" in problems[0]


def test_assigning_a_connection_attribute_is_reported() -> None:
    class BumpsWindow(Polite):
        name = "bumps_window"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
            conn.wnd_end = conn.wnd_end + 1  # type: ignore[misc]
            return super().select(conn, subflows)

    problems = check_scheduler(BumpsWindow, quick=True, checks=["read_only"])
    assert problems and "assigned conn.wnd_end" in problems[0]


def test_waiting_for_window_that_never_comes_fails_receive_window() -> None:
    problems = check_scheduler(WaitsForBigWindow, quick=True)
    assert _failed(problems) == {"receive_window"}, problems
    assert "receive buffer of 16 segments" in problems[0]


def test_abandoning_a_path_fails_outage() -> None:
    problems = check_scheduler(AbandonsAfterRto, quick=True, checks=["outage", "delivery"])
    assert _failed(problems) == {"outage"}, problems
    assert "carried no new data" in problems[0]


def test_a_replay_that_never_ends_is_stopped_and_reported() -> None:
    problems = check_scheduler(Spins, quick=True, checks=["delivery"], time_budget_s=1.0)
    assert len(problems) == 1 and "did not terminate within 1 s of wall time" in problems[0]


def test_a_scheduler_that_crashes_the_run_fails_every_check() -> None:
    class BadIndex(Polite):
        name = "bad_index"

        def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
            return Decision(7) if conn.head < conn.n_segs else None

    problems = check_scheduler(BadIndex, quick=True)
    assert _failed(problems) == set(CHECKS)  # no check passes vacuously
    assert all("the replay raised IndexError" in p for p in problems)


def test_unbuildable_scheduler_and_unknown_check() -> None:
    def boom() -> Scheduler:
        raise RuntimeError("no")

    assert check_scheduler(boom, checks=["delivery"]) == ["delivery: could not build the scheduler: RuntimeError: no"]
    assert "not a workbench Scheduler" in check_scheduler(lambda: object(), checks=["cwnd"])[0]  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="unknown check"):
        check_scheduler("minrtt", checks=["nope"])
    with pytest.raises(ValueError, match="unknown check"):
        scheduler_conformance_cases(["minrtt"], checks=["nope"])


def test_assert_conforms_lists_every_problem() -> None:
    with pytest.raises(AssertionError, match=r"ignores_cwnd fails the conformance suite:\n  cwnd: "):
        assert_conforms(IgnoresCwnd, quick=True, checks=["cwnd", "delivery"])
    assert_conforms(get("minrtt", opportunistic=False), quick=True, checks=["delivery"])


def test_cases_accept_names_classes_instances_and_factories() -> None:
    cases = scheduler_conformance_cases(["minrtt", Polite, get("roundrobin", num_segments=1),
                                         lambda: get("ecf")], quick=True, checks=["delivery"])
    assert [str(c) for c in cases] == ["minrtt-delivery", "polite-delivery",
                                       "RoundRobin(num_segments=1, cwnd_limited=True)-delivery", "<lambda>-delivery"]
    for c in cases:
        c.check()
    assert [c.check_name for c in scheduler_conformance_cases(["minrtt"])] == list(CHECKS)


def test_the_probe_does_not_change_the_run() -> None:
    paths = [PathConfig.constant("a", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=60_000, loss=0.01),
             PathConfig.constant("b", rate_bps=10e6, owd_ns=40 * MS, buffer_bytes=120_000, loss=0.01)]
    wl = Finite(size_bytes=400_000)
    for name in ("minrtt", "upstream"):
        f = _Findings(deadline=float("inf"), declared_queueing=False)
        probed = run_replay(paths, _Probe(get(name), f), workload=wl, seed=5)
        plain = run_replay(paths, get(name), workload=wl, seed=5)
        assert probed.events.equals(plain.events)
        assert f.n_select > 100


# ------------------------------------------------------------------ the documented example

def test_example_scheduler_passes_the_full_suite() -> None:
    cls = load_scheduler_class(f"{EXAMPLE}:MyScheduler")
    assert check_scheduler(cls) == []
    assert check_scheduler(cls(max_burst=1), quick=True) == []


def test_example_scheduler_as_an_instance_in_run_replay() -> None:
    cls = load_scheduler_class(f"{EXAMPLE}:MyScheduler")
    paths = [PathConfig.constant("wifi", rate_bps=20e6, owd_ns=10 * MS),
             PathConfig.constant("lte", rate_bps=10e6, owd_ns=40 * MS)]
    r = run_replay(paths, cls(max_burst=8), workload=Finite(size_bytes=1_000_000))
    assert r.summary["completed"] and r.summary["delivered_bytes"] == 1_000_000
    assert r.scheduler == "MyScheduler(max_burst=8)"
    assert set(r.summary["per_path"]) == {"wifi", "lte"} and all(
        p["sent_packets"] > 0 for p in r.summary["per_path"].values())


def test_docs_show_the_example_file_verbatim() -> None:
    doc = (ROOT / "docs" / "SCHEDULERS-API.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    assert EXAMPLE.read_text() in blocks
    assert 25 <= len(EXAMPLE.read_text().splitlines()) <= 35
