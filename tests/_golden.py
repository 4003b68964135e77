"""Golden runs, htsim-style: small experiments whose PacketEvents are stored bit-exact under
``tests/golden/`` and compared exactly by ``tests/test_golden.py``. They pin the model's behaviour
under every refactor and port of the engine.

Each scenario is 2-3 s of simulated time; together they cover lossless and lossy, constant and
time-varying paths, finite and bulk transfers and a receive-buffer-limited connection, and each runs
with every built-in scheduler and layer on the ``model`` backend.

Rewrite them (after a change that is *meant* to change behaviour; say why in the commit message):

    .venv/bin/python tests/_golden.py --rewrite
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"

_MS = 1_000_000
_S = 1_000_000_000


def _scenarios() -> dict[str, Callable[[str], object]]:
    from workbench.experiment import (
        BulkWorkload,
        FiniteWorkload,
        StepSeries,
        experiment_from_paths,
        stack_profile,
        two_way_path,
    )

    def two_const(*, loss_wifi: float = 0.0, loss_lte: float = 0.0) -> list:
        return [two_way_path("wifi", rate_bps=12e6, owd_ns=10 * _MS, buffer_bytes=40_000, loss=loss_wifi),
                two_way_path("lte", rate_bps=6e6, owd_ns=35 * _MS, buffer_bytes=80_000, loss=loss_lte)]

    def varying() -> list:
        wifi = two_way_path(
            "wifi", rate_bps=StepSeries((0, 600 * _MS, 900 * _MS, 1500 * _MS), (15e6, 0.0, 8e6, 20e6)),
            rate_up_bps=15e6, owd_ns=StepSeries((0, 1200 * _MS), (8 * _MS, 25 * _MS)), owd_up_ns=8 * _MS,
            buffer_bytes=60_000)
        lte = two_way_path(
            "lte", rate_bps=StepSeries((0, 1000 * _MS), (5e6, 9e6)), rate_up_bps=5e6,
            owd_ns=StepSeries((0, 700 * _MS, 1800 * _MS), (40 * _MS, 60 * _MS, 30 * _MS)), owd_up_ns=40 * _MS,
            buffer_bytes=120_000)
        return [wifi, lte]

    stack = stack_profile("mptcp.org-v0.95")

    def exp(paths: list, workload: object, duration_ns: int, **kw: object) -> Callable[[str], object]:
        return lambda sched: experiment_from_paths(paths, workload=workload, scheduler=sched,  # type: ignore[arg-type]
                                                   stack=kw.get("stack", stack), seed=1,  # type: ignore[arg-type]
                                                   duration_ns=duration_ns)

    return {
        "const_lossless_bulk": exp(two_const(), BulkWorkload(), 2 * _S),
        "const_lossy_finite": exp(two_const(loss_wifi=0.01, loss_lte=0.005), FiniteWorkload(1_500_000), 3 * _S),
        "varying_bulk": exp(varying(), BulkWorkload(), 5 * _S // 2),
        "rcvbuf_limited_bulk": exp(two_const(), BulkWorkload(), 2 * _S,
                                   stack=stack.with_overrides(tcp_rmem=(4096, 65536, 65536))),
    }


SCENARIOS = sorted(_scenarios())


def schedulers() -> list[str]:
    from workbench.schedulers import available
    return list(available())


def golden_path(scenario: str, scheduler: str) -> Path:
    return GOLDEN_DIR / f"{scenario}__{scheduler}.parquet"


def run_golden(scenario: str, scheduler: str) -> pl.DataFrame:
    """The PacketEvents of one golden run on the model backend."""
    from workbench.backends import get_backend

    return get_backend("model").run(_scenarios()[scenario](scheduler)).events  # type: ignore[arg-type]


def rewrite() -> None:
    GOLDEN_DIR.mkdir(exist_ok=True)
    for sc in SCENARIOS:
        for name in schedulers():
            ev = run_golden(sc, name)
            ev.write_parquet(golden_path(sc, name), compression="zstd", compression_level=19, statistics=False)
            print(f"{sc:22s} {name:12s} {ev.height:7d} rows")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if sys.argv[1:] != ["--rewrite"]:
        sys.exit("usage: python tests/_golden.py --rewrite")
    rewrite()
