"""`workbench tune` as real processes: two workers on one storage complete one study without duplicate
or lost trials, and a worker killed with SIGKILL mid-study is restarted and completes it, keeping
every trial finished before the kill unchanged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest

from workbench.tune.study import resolve_storage

CLI = [sys.executable, "-m", "workbench.tune.cli"]
ENV = {**os.environ, "WORKBENCH_DEBUG": "1"}


def _scenario(path: Path, *, slow_owd_ms: float = 60.0, duration_s: float = 1.0) -> Path:
    path.write_text(json.dumps({
        "duration_s": duration_s, "seed": 0, "workload": "bulk",
        "paths": [{"name": "wifi", "rate_mbps": 30, "owd_ms": 10, "buffer_packets": 50},
                  {"name": "lte", "rate_mbps": 10, "owd_ms": slow_owd_ms, "buffer_packets": 300}]}))
    return path


def _args(inputs: list[Path], out: Path, storage: str, study: str, n: int, *extra: str) -> list[str]:
    return [*CLI, *map(str, inputs), "-s", "stms_a", "--tune", "adjust_interval_ms",
            "--space", "adjust_interval_ms=5:500:log", "--objective", "ooo_p95", "-n", str(n), "-o", str(out),
            "--storage", storage, "--study", study, "--no-evaluate", "--no-html", "--no-progress", "--json", *extra]


def _trials(storage: str, study: str, out: Path) -> list[optuna.trial.FrozenTrial]:
    st, _ = resolve_storage(storage, out)
    try:
        return optuna.load_study(study_name=study, storage=st).get_trials(deepcopy=False)
    except KeyError:
        return []


def _check_numbers(trials: list[optuna.trial.FrozenTrial]) -> None:
    numbers = [t.number for t in trials]
    assert sorted(numbers) == list(range(len(numbers))), numbers  # no duplicate, no gap
    assert len({t._trial_id for t in trials}) == len(trials)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_workers_share_one_sqlite_study(tmp_path: Path) -> None:
    inputs = [_scenario(tmp_path / "a.json", slow_owd_ms=60), _scenario(tmp_path / "b.json", slow_owd_ms=90)]
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    n = 12
    # The same command line (same --seed) on every worker, as on a cluster: per-trial seeding keeps
    # their proposals apart.
    procs = [subprocess.Popen(_args(inputs, tmp_path / f"out{k}", storage, "shared", n),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
             for k in range(2)]
    outs = [p.communicate(timeout=220) for p in procs]
    for p, (_so, se) in zip(procs, outs, strict=True):
        assert p.returncode == 0, se
    docs = [json.loads(so) for so, _ in outs]
    trials = _trials(storage, "shared", tmp_path)
    _check_numbers(trials)
    states = [t.state for t in trials]
    finished = sum(s in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED) for s in states)
    # The study has its N finished trials; racing for the last slot may add one per extra worker.
    assert n <= finished <= n + 1
    assert optuna.trial.TrialState.RUNNING not in states
    assert optuna.trial.TrialState.FAIL not in states
    # Both processes really worked on the one study, and their counts add up to it.
    here = [d["worker"]["finished_here"] for d in docs]
    assert all(h >= 1 for h in here), here
    assert sum(here) == finished
    for t in trials:
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert t.values is not None and len(t.user_attrs["per_input"]) == 2


def _wait_for_complete(storage: str, study: str, out: Path, k: int, proc: subprocess.Popen[Any],
                       timeout_s: float = 120) -> None:
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "worker ended early"
        done = [t for t in _trials(storage, study, out) if t.state == optuna.trial.TrialState.COMPLETE]
        if len(done) >= k:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {k} complete trials after {timeout_s} s")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigkill_then_restart_completes_the_study(tmp_path: Path) -> None:
    # 30 s scenarios and 40 trials: the worker must still be mid-study when the test, looking every
    # 0.2 s, sees k trials complete (with 1 s scenarios and 10 trials it once finished them all
    # between two looks, trials being ~0.1 s now).
    inputs = [_scenario(tmp_path / "a.json", slow_owd_ms=75, duration_s=30.0)]
    storage = f"journal:{tmp_path / 'study.log'}"   # the shared-filesystem backend
    n, k = 40, 4
    # Heartbeat 0.5 s: the killed worker's running trial counts as crashed after 2 s.
    args = _args(inputs, tmp_path / "out", storage, "killed", n, "--heartbeat", "0.5")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        _wait_for_complete(storage, "killed", tmp_path, k, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    before = {t.number: (t.state, t.values, t.params) for t in _trials(storage, "killed", tmp_path)
              if t.state.is_finished()}
    assert sum(s == optuna.trial.TrialState.COMPLETE for s, _, _ in before.values()) >= k

    r = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=200)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    trials = _trials(storage, "killed", tmp_path)
    _check_numbers(trials)
    after = {t.number: (t.state, t.values, t.params) for t in trials}
    for number, old in before.items():
        assert after[number] == old, f"trial {number} changed across the restart"
    finished = [t for t in trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert n <= len(finished) <= n + 1
    assert not [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    # A trial the kill interrupted was failed by the restarted worker (stale heartbeat) and replaced.
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    assert len(failed) == doc["worker"]["stale_failed"] <= 1
    assert doc["trials"]["finished"] == len(finished)
