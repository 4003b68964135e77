"""Every crash the fuzzers found, replayed: each folder of tests/fuzz_regressions holds a minimized
input (and the files it refers to) and expect.json saying what it must now give (a warning or a
clean one-line error containing a phrase) and what it did before the fix. The cases run through the
fuzz harness's own target and classification, in its isolated worker (time and memory limits), so a
regression shows up as the crash, hang or memory outcome it would be in a campaign."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.fuzz import IsolatedRunner, Limits  # noqa: E402

CASES = sorted(p.parent for p in (REPO / "tests" / "fuzz_regressions").glob("*/expect.json"))


@pytest.fixture(scope="module")
def runner():
    with IsolatedRunner(Limits(time_s=60, memory_bytes=1 << 30)) as r:
        yield r


def test_the_mp_join_case_is_there() -> None:
    names = {c.name for c in CASES}
    assert "mp_join_syn_len16" in names and len(CASES) >= 10, names


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_regression(case: Path, runner: IsolatedRunner, tmp_path: Path) -> None:
    expect = json.loads((case / "expect.json").read_text())
    # A copy: targets may write beside their input (uploads), and the repository stays clean.
    work = tmp_path / case.name
    work.mkdir()
    for f in case.iterdir():
        if f.name != "expect.json":
            (work / f.name).write_bytes(f.read_bytes())
    outcome, detail = runner.run(expect["kind"], work / expect["input"])
    assert outcome == expect["outcome"], f"{case.name}: {outcome}: {detail} (before the fix: {expect['found']})"
    if outcome == "error":
        assert expect["contains"] in detail, detail
        assert "\n" not in detail


def test_mp_join_case_warns_and_keeps_the_subflow() -> None:
    """Independent of the harness: the capture loads, its one subflow stands alone, and the warning
    says why (the old code raised TypeError formatting the missing token)."""
    from workbench.capture import load

    cap = load(REPO / "tests" / "fuzz_regressions" / "mp_join_syn_len16" / "case.pcap", use_cache=False)
    assert cap.connections.height == 1 and cap.subflows["join"].to_list() == [True]
    assert any("MP_JOIN on a SYN without a token" in w for w in cap.warnings), cap.warnings
