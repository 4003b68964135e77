"""The model against the real kernel on the CI subset of the fidelity matrix (benchmarks/fidelity.py
``--quick``: six configurations x two seeds, the kernel backend one run at a time), held to issue
13's targets for the upstream default scheduler: goodput within 5 %, per-path share within 3 points,
MPTCP-level OOO delay p50 / p95 within 25 % (or 2 ms / 5 ms), RTT p50 of every path within 15 %.

Where the model is known to be outside a target, `KNOWN_GAPS` names the (configuration, target) with
the numbers measured and the suspected cause, and the test asserts it is *still* outside: the day the
model agrees, the entry must go. Everything not listed must be inside. A kernel run whose emulation
missed its own accuracy targets is re-run once; a configuration with no trustworthy kernel run fails.
A (configuration, target) whose verdict differs between the two kernel runs (inside against one,
outside against the other) is reported and not judged (see MAX_IRREPRODUCIBLE).

Needs root and an MPTCP kernel: skipped on a developer machine without them, FAILS under CI=true.
Takes about 2 minutes (12 kernel runs of 4 s plus their teardown, 12 model runs).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import polars as pl  # noqa: E402

from benchmarks.fidelity import QUICK, TARGETS, compare, run_matrix, verdicts_per_kernel_run  # noqa: E402
from tests._kernel import require_lab  # noqa: E402

SEEDS = (0, 1)
# The kernel itself is not reproducible within the targets everywhere: between two 3 s runs of the same
# experiment on a loaded 2-core machine it agreed with itself on goodput 30 / 52, share 37 / 51, OOO p50
# 36 / 52, OOO p95 34 / 52, RTT p50 38 / 52 configurations of the full matrix (docs/FIDELITY.md). So a
# verdict counts only when it is the same against each kernel run on its own (inside against both, or
# outside against both); a pair the kernel's spread straddles is reported and not judged (the tolerance
# is not widened). At most this many per target, or the test fails as void.
MAX_IRREPRODUCIBLE = 2

# (configuration, target) -> what was measured (model / kernel, seed means, from the full matrix in
# docs/FIDELITY.md) and the suspected cause. Targets: goodput, share, ooo_p50, ooo_p95, rtt_p50.
# The subset was picked from the full matrix (docs/FIDELITY.md, 2026-11-24) for configurations whose every
# metric was clearly inside or clearly outside its target: a first pick (buf-0.5bdp, wifi+tmobile,
# finite-1M, then finite-up-1M) flipped share, RTT and OOO verdicts between two runs of the kernel on a loaded machine
# (buf-0.5bdp kernel goodput 17.5 vs 25.0 Mbit/s across seeds). "hypothesis" marks a cause not yet shown.
_RWND = ("receive window: the kernel advertises about tcp_rmem x its scaling ratio (tcp_win_from_space) and "
         "autotunes it, the model grants the whole buffer (hypothesis; the tcp_rmem axis shows the effect: "
         "kernel 7.7 / 12.8 / 18.8 / 33.2 Mbit/s at 128k / 256k / 512k / 1M, model 10.3 / 16.9 / 33.0 / 34.6)")
_OOO_SLOW = ("the model's slower subflow queues more than the kernel's (window usage tracked like "
             "tcp_cwnd_validate, no TSQ; tests/test_compare_lab.py OOO_P50_KNOWN_GAP), so its segments wait "
             "longer at the MPTCP level (hypothesis)")
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("rmem-512k", "goodput"): "model 32.99 / kernel 18.82 Mbit/s (+75 %): " + _RWND,
    ("rmem-512k", "ooo_p50"): "model 0.0 / kernel 17.2 ms: the kernel's window-limited subflows reorder more; " + _RWND,
    ("rmem-512k", "ooo_p95"): "model 45.3 / kernel 101.8 ms: " + _RWND,
    ("rmem-512k", "rtt_p50"): "RTT p50 +63 % in the model: its larger window fills the bottleneck queue; " + _RWND,
    ("buf-3bdp", "ooo_p50"): "model 6.4 / kernel 0.0 ms: " + _OOO_SLOW,
    ("ping-atnt", "ooo_p50"): "model 7.9 / kernel 0.0 ms: " + _OOO_SLOW,
    ("ping-atnt", "ooo_p95"): "model 110.0 / kernel 75.1 ms: " + _OOO_SLOW,
    ("up-rtt-x8", "ooo_p50"): "model 13.8 / kernel 1.8 ms: " + _OOO_SLOW,
    ("up-rtt-x8", "ooo_p95"): "model 190.5 / kernel 42.8 ms: " + _OOO_SLOW,
    ("finite-2M-rtt-x8", "goodput"): "model 17.34 / kernel 20.52 Mbit/s (-15.5 %), completion 0.92 / 0.79 s, "
                                     "retransmissions 69 / 4: the model loses and recovers where the kernel does "
                                     "not (slow start into the 40 ms path's queue; hypothesis: HyStart as "
                                     "implemented, RACK)",
    ("finite-2M-rtt-x8", "share"): "7.3 points: the model's loss recovery on the slow path shifts data to the fast "
                                   "one (hypothesis, as the goodput)",
    ("finite-2M-rtt-x8", "ooo_p50"): "model 30.9 / kernel 0.0 ms: " + _OOO_SLOW,
    ("finite-2M-rtt-x8", "ooo_p95"): "model 235.4 / kernel 55.0 ms: " + _OOO_SLOW,
    ("finite-2M-rtt-x8", "rtt_p50"): "RTT p50 +18.5 % in the model: its slow path's queue is fuller (hypothesis)",
}


# (configuration, target) pairs whose verdict flipped between repeated runs of this subset on the kernel
# alone (the model is deterministic), even judged against each kernel run on its own: the kernel's spread
# there is as wide as the target. They are reported, not judged; the numbers are the kernel's per run.
KERNEL_FLIPS: dict[tuple[str, str], str] = {
    ("rmem-512k", "share"): "share error against the kernel 0.2 points (full matrix, seed mean; 7 points between its "
                            "two seeds), 7.6 / 4.5 / 1.8 points in three test runs: the kernel's split between a "
                            "30 Mbit/s 40 ms and a 10 Mbit/s 100 ms path under a 512 kB receive buffer varies run to run",
    ("oboe-pair", "ooo_p50"): "kernel OOO p50 22.6 / 16.1 ms (two seeds of the full matrix), 21.9 and 24.6 ms (seed "
                              "means of two test runs) against the model's 16.5 ms: inside or outside 25 % by run",
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
        if ok is not None and per_run[(r["config"], target)] is None:
            # Against one kernel run the model is inside, against the other outside: the kernel's own
            # spread decides the verdict, so this pair says nothing either way.
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
