"""The compiled engine core (mypyc, setup.py) is the same model as its Python source: a lossy
two-path replay gives identical PacketEvents both ways; and a compiled module older than its source
is refused, so an edit can never be silently ignored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from workbench.replay import engine_is_compiled

ROOT = Path(__file__).resolve().parents[1]

_RUN = """
import sys
from workbench.replay import Bulk, PathConfig, engine_is_compiled, run_replay
from workbench.schedulers import get
paths = [PathConfig.constant("wifi", rate_bps=20e6, owd_ns=10_000_000, buffer_bytes=60_000, loss=0.002),
         PathConfig.constant("lte", rate_bps=8e6, owd_ns=40_000_000, buffer_bytes=300_000)]
r = run_replay(paths, get("minrtt"), workload=Bulk(), duration_ns=4_000_000_000, seed=7)
r.events.write_parquet(sys.argv[1])
print(engine_is_compiled())
"""


def _replay(out: Path, *, pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_PURE_PYTHON"}
    if pure:
        env["WORKBENCH_PURE_PYTHON"] = "1"
    p = subprocess.run([sys.executable, "-c", _RUN, str(out)], capture_output=True, text=True, env=env,
                       timeout=300, check=True)
    return p.stdout.strip()


def test_engine_is_compiled_in_ci() -> None:
    """Set-up compiles the engine core (gcc and the Python headers are installed by it); in CI a
    silent fallback to the Python sources is a failure, not a slower pass. (Elsewhere running as
    Python is allowed: WORKBENCH_PURE_PYTHON=1, or no compiler.)"""
    if not os.environ.get("CI"):
        pytest.skip("outside CI the engine may run as Python")
    assert os.environ.get("WORKBENCH_PURE_PYTHON") is None, "CI must not run the engine as Python"
    assert engine_is_compiled(), "the compiled replay engine did not build or load: see scripts/setup.sh"


@pytest.mark.skipif(not engine_is_compiled() and not os.environ.get("CI"),
                    reason="the engine is not compiled here (no C compiler); in CI it must be")
def test_compiled_and_python_engines_give_identical_events(tmp_path: Path) -> None:
    compiled, python = tmp_path / "compiled.parquet", tmp_path / "python.parquet"
    assert _replay(compiled, pure=False) == "True"
    assert _replay(python, pure=True) == "False"
    a, b = pl.read_parquet(compiled), pl.read_parquet(python)
    assert a.height > 1000 and a.filter(pl.col("point") == "drop").height > 0  # losses exercised
    assert a.equals(b)


def test_stale_compiled_module_is_detected(tmp_path: Path) -> None:
    from workbench.replay._compiled import stale_compiled

    source, compiled = tmp_path / "tcp.py", tmp_path / "tcp.cpython-311-x86_64-linux-gnu.so"
    compiled.write_bytes(b"")
    source.write_text("# edited after the build\n")
    os.utime(compiled, (1_000, 1_000))
    os.utime(source, (2_000, 2_000))
    assert stale_compiled(compiled) == source
    os.utime(compiled, (3_000, 3_000))  # rebuilt
    assert stale_compiled(compiled) is None
    assert stale_compiled(source) is None  # running from source: nothing can be stale
