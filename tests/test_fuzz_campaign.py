"""The fuzz harness in CI: a fixed-seed campaign of 5,000 capture cases through the full load path
(read -> streams -> connections -> PacketEvents -> metrics), 2,000 cases of the other inputs
(tshark CSV exports, rate and mahimahi files, scenario files, uploads), each case isolated with a
time and memory limit; no crash, hang or memory blow-up is allowed. Also: the harness itself sees
every outcome (planted ones), and the structure-aware generator reaches the class of input behind
the first campaign's crash (a SYN whose MP_JOIN has no token).

Budget (measured on the 2-core machine while other work ran beside): a capture part of 1,000 cases
took 139 s (80-140 ms per case, mostly polars' per-operation overhead in the metrics), so the five
parts cost 7-12 minutes of CPU, 4-6 minutes of wall time under ``pytest -n 2``; the other inputs
took 85 s in all (uploads 51 s, CSV 13 s, scenarios 12 s, mahimahi 3 s, rate 2 s).
`python -m benchmarks.fuzz` runs the big campaigns on demand.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.fuzz import IsolatedRunner, Limits, make_case, run_campaign  # noqa: E402
from benchmarks.fuzz.campaign import SHARED_TRACES  # noqa: E402

CI_SEED = 20261124
CAPTURE_PARTS = 5
CAPTURE_CASES_PER_PART = 1000            # 5 x 1000 = 5,000 reader cases
OTHER_CASES = {"csv": 400, "rate": 400, "mahimahi": 400, "scenario": 400, "upload": 400}
LIMITS = Limits(time_s=60.0, memory_bytes=1 << 30)


@pytest.fixture(autouse=True)
def _shared_data() -> None:
    # Missing seed data must fail, not skip: the campaign would silently test nothing.
    assert (SHARED_TRACES / "fixtures").is_dir(), f"fuzz seeds missing: {SHARED_TRACES / 'fixtures'}"


@pytest.mark.slow
def test_harness_sees_every_outcome(tmp_path: Path) -> None:
    planted = ["ok", "warning", "error", "unclean", "crash", "hang", "memory", "abort", "ok"]
    got = []
    with IsolatedRunner(Limits(time_s=5.0, memory_bytes=256 << 20)) as runner:
        for i, what in enumerate(planted):
            f = tmp_path / f"case{i}.txt"
            f.write_text(what)
            got.append(runner.run("_selftest", f)[0])
        restarts = runner.restarts
    # An error that names no input is not clean: it counts as a crash. An abort kills the worker.
    assert got == ["ok", "warning", "error", "crash", "crash", "hang", "memory", "crash", "ok"]
    assert restarts == 2  # after the hang and after the abort; the worker survives the rest


def test_crafted_cases_reach_a_join_syn_without_token() -> None:
    """The structure-aware generator makes SYNs whose MP_JOIN has the 16-byte (SYN/ACK) form: the
    input class behind the first campaign's crash, which mutation of the bundled captures missed."""
    import polars as pl

    from benchmarks.fuzz.craft import crafted_capture
    from workbench.capture._native import read_native
    from workbench.capture.schema import MPTCP_SUBTYPES

    rng = random.Random(CI_SEED)
    hits = 0
    with pytest.MonkeyPatch.context() as mp, __import__("tempfile").TemporaryDirectory() as tmp:
        mp.setenv("WORKBENCH_CACHE", tmp)
        for i in range(150):
            data, suffix = crafted_capture(rng)
            f = Path(tmp) / f"c{i}{suffix}"
            f.write_bytes(data)
            try:
                df, _ = read_native(f)
            except Exception:
                continue
            join = (pl.col("mp_subtypes") & (1 << MPTCP_SUBTYPES["MP_JOIN"])) != 0
            syn = ((pl.col("flags") & 0x12) == 0x02)
            hits += df.filter(join & syn & pl.col("mp_join_token").is_null()).height
    assert hits > 0


def _assert_clean(res) -> None:
    bad = {o: res.counts.get(o, 0) for o in ("crash", "hang", "memory")}
    assert not any(bad.values()), f"{res.line()}\n" + "\n".join(f"{n} x {s}" for s, n in res.signatures.items())


@pytest.mark.slow
@pytest.mark.parametrize("part", range(CAPTURE_PARTS))
def test_capture_campaign(part: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    res = run_campaign("capture", CAPTURE_CASES_PER_PART, seed=CI_SEED + part, limits=LIMITS,
                       keep_dir=tmp_path / "kept", minimize=False)
    print(res.line())
    assert res.cases == CAPTURE_CASES_PER_PART
    _assert_clean(res)
    # The cases exercise both sides: most captures still load (with warnings), some are refused.
    loaded = res.counts["ok"] + res.counts["warning"]
    assert loaded > 0.4 * res.cases and res.counts["error"] > 0.03 * res.cases, res.line()


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(OTHER_CASES))
def test_other_inputs_campaign(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    res = run_campaign(kind, OTHER_CASES[kind], seed=CI_SEED, limits=LIMITS, keep_dir=tmp_path / "kept",
                       minimize=False)
    print(res.line())
    assert res.cases == OTHER_CASES[kind]
    _assert_clean(res)
    assert res.counts["error"] > 0 and res.counts["ok"] + res.counts["warning"] > 0, res.line()


def test_cases_are_reproducible() -> None:
    """A fixed seed gives the same cases: a CI failure can be replayed locally."""
    for kind in ("capture", "scenario", "csv"):
        a = make_case(kind, random.Random(5))
        b = make_case(kind, random.Random(5))
        assert a == b


def test_minimizer_keeps_only_what_fails() -> None:
    """A failure caused by one record of a 60-record capture is shrunk to that record (plus the
    file header); the minimized file still fails the same way."""
    from benchmarks.fuzz.craft import pcap_bytes
    from benchmarks.fuzz.minimize import minimize_capture
    from benchmarks.fuzz.mutate import pcap_records

    frames = [(i * 10**6, bytes([i]) * 60) for i in range(60)]
    data = pcap_bytes(frames, 1, random.Random(0))
    culprit = bytes([37]) * 60
    calls = []

    def fails(d: bytes) -> bool:
        calls.append(1)
        return culprit in d

    small = minimize_capture(data, fails, max_tries=400)
    assert fails(small) and len(small) < len(data)
    _, recs, _ = pcap_records(small)
    assert len(recs) <= 1 and len(small) <= 24 + 16 + 60
    assert len(calls) < 400
