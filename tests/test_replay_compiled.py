"""The replay engine is the compiled one (native/engine, the Python module `workbench_core`, built by
scripts/setup.sh; there is no Python engine to fall back to): the module imports wherever the tests
run, CI included, with the model's entry point and a port of every registered scheduler; a replay
reports that it ran there (``engine_stats``), a registered scheduler as its compiled port and a user's
own class through the plug-in bridge. Only the four built-in workloads (Bulk, Finite, Bursts, AppTrace)
have a compiled port: a user's own `Workload` subclass is refused with a clear error naming it."""

from __future__ import annotations

import importlib
from typing import ClassVar

import pytest

from workbench.replay import AppTrace, Bulk, Bursts, Finite, PathConfig, Workload, run_replay
from workbench.replay._core import core
from workbench.schedulers import available, get
from workbench.schedulers._minrtt import MinRTT

MS = 1_000_000
PATHS = [PathConfig.constant("wifi", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=60_000, loss=0.002),
         PathConfig.constant("lte", rate_bps=8e6, owd_ns=40 * MS, buffer_bytes=300_000)]


def test_the_compiled_module_imports_with_every_port() -> None:
    """No skip, no fallback: a build that did not happen or does not load fails here (in CI too)."""
    wb = importlib.import_module("workbench_core")
    assert core() is wb
    assert callable(wb.run_model)
    assert set(available()) <= set(wb.compiled_schedulers())


@pytest.mark.parametrize("engine", ["auto", "compiled"])
def test_a_replay_reports_the_compiled_engine(engine: str) -> None:
    size = 300_000
    r = run_replay(PATHS, get("minrtt"), workload=Finite(size_bytes=size), duration_ns=10_000 * MS, seed=7,
                   engine=engine)
    assert r.engine_stats["engine"] == "compiled"
    assert r.engine_stats["scheduler"] == "compiled"
    assert r.summary["completed"] and r.summary["delivered_bytes"] == size  # it ran, to the end


def test_a_users_own_scheduler_reports_the_bridge() -> None:
    class Mine(MinRTT):  # not registered: no compiled port
        name: ClassVar[str] = "user_mine"

    r = run_replay(PATHS, Mine(), workload=Finite(size_bytes=100_000), duration_ns=10_000 * MS)
    assert r.engine_stats["engine"] == "compiled" and r.engine_stats["scheduler"] == "bridge"
    assert r.summary["completed"]


BUILTIN_WORKLOADS = [Bulk(stop_ns=200 * MS), Finite(size_bytes=50_000), Bursts(segments=5, idle_ns=20 * MS, n_bursts=2),
                     AppTrace(writes=[(0, 10_000), (50 * MS, 20_000)])]


@pytest.mark.parametrize("wl", BUILTIN_WORKLOADS, ids=lambda w: type(w).__name__)
def test_every_builtin_workload_runs_compiled(wl: Workload) -> None:
    r = run_replay(PATHS, get("minrtt"), workload=wl, duration_ns=2_000 * MS, engine="compiled")
    assert r.engine_stats["engine"] == "compiled"
    assert r.summary["delivered_bytes"] > 0


class MyWorkload(Workload):
    """A user's own workload class: the engine runs only the built-ins."""


@pytest.mark.parametrize("engine", ["auto", "compiled"])
def test_a_users_own_workload_is_refused_clearly(engine: str) -> None:
    with pytest.raises(TypeError) as info:
        run_replay(PATHS, get("minrtt"), workload=MyWorkload(), duration_ns=1_000 * MS, engine=engine)
    msg = str(info.value)
    assert "MyWorkload" in msg, msg
    assert all(name in msg for name in ("Bulk", "Finite", "Bursts", "AppTrace")), msg
