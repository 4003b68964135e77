"""Tuning across machines against a real database server: a PostgreSQL cluster from Debian's
packages, created and started by the fixture in a temporary folder (as an unprivileged user when the
suite runs as root: PostgreSQL refuses to run as root), listening on 127.0.0.1 and a free port, and
stopped at the end. Nothing is installed at test time (scripts/setup.sh --test installs
``postgresql``; the test extra installs ``psycopg2-binary``).

Two `workbench tune` workers share one study there; one is killed with SIGKILL in the middle of a
trial and restarted. Afterwards: every trial finished before the kill is unchanged, no trial number
is lost or duplicated, the killed worker's running trial was marked FAIL (stale heartbeat) by a
surviving worker and replaced, and the study has its N finished trials. An unreachable server makes
`workbench tune` fail at once with one line (exit code 2).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

from workbench.tune.study import HEARTBEAT_ATTR

CLI = [sys.executable, "-m", "workbench.tune.cli"]
ENV = {**os.environ, "POLARS_MAX_THREADS": "1"}


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user() -> dict[str, Any]:
    """subprocess arguments that drop root to `nobody` (PostgreSQL will not run as root)."""
    if os.geteuid() != 0:
        return {}
    import pwd

    nobody = pwd.getpwnam("nobody")

    def drop() -> None:
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    return {"preexec_fn": drop}


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A running PostgreSQL server; yields its SQLAlchemy URL."""
    bindir = _pg_bin()
    if bindir is None or not (bindir / "pg_ctl").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("PostgreSQL server binaries missing: scripts/setup.sh --test installs postgresql")
        pytest.skip("PostgreSQL server binaries not installed (scripts/setup.sh --test)")
    pytest.importorskip("psycopg2") if os.environ.get("CI") != "true" else __import__("psycopg2")
    root = Path(tempfile.mkdtemp(prefix="wb-pg-"))
    os.chmod(root, 0o755)
    data, sock, logs = root / "data", root / "sock", root / "logs"
    for d in (data, sock, logs):
        d.mkdir()
    if os.geteuid() == 0:
        import pwd

        nobody = pwd.getpwnam("nobody")
        for d in (data, sock, logs):
            os.chown(d, nobody.pw_uid, nobody.pw_gid)
    port = _free_port()
    drop = _as_user()
    try:
        subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "wb", "-A", "trust", "-E", "UTF8",
                        "--no-sync"], check=True, capture_output=True, cwd=root, **drop)
        opts = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        subprocess.run([str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(logs / "log.txt"), "-w",
                        "-t", "60", "start"], check=True, capture_output=True, cwd=root, **drop)
    except subprocess.CalledProcessError as e:
        log = (logs / "log.txt").read_text() if (logs / "log.txt").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {e.stderr.decode(errors='replace')[-500:]} {log[-500:]}")
    try:
        yield f"postgresql+psycopg2://wb@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, cwd=root, **drop)
        shutil.rmtree(root, ignore_errors=True)


def _scenario(path: Path, slow_owd_ms: float, duration_s: float = 1.0) -> Path:
    path.write_text(json.dumps({
        "duration_s": duration_s, "seed": 0, "workload": "bulk",
        "paths": [{"name": "wifi", "rate_mbps": 30, "owd_ms": 10, "buffer_packets": 50},
                  {"name": "lte", "rate_mbps": 10, "owd_ms": slow_owd_ms, "buffer_packets": 300}]}))
    return path


def _args(inputs: list[Path], out: Path, storage: str, study: str, n: int, *extra: str) -> list[str]:
    return [*CLI, *map(str, inputs), "-s", "stms_a", "--tune", "adjust_interval_ms",
            "--space", "adjust_interval_ms=5:500:log", "--objective", "ooo_p95", "-n", str(n), "-o", str(out),
            "--storage", storage, "--study", study, "--no-evaluate", "--no-html", "--no-progress", "--json", *extra]


def _trials(storage: str, study: str) -> list[optuna.trial.FrozenTrial]:
    try:
        return optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
    except KeyError:
        return []


FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_workers_sigkill_one_mid_trial_and_restart(postgres: str, tmp_path: Path) -> None:
    # 30 s replays and 40 trials: a trial lasts long enough for both workers to be seen mid-trial, and
    # the study long enough that A is killed mid-study (with 8 s ones and 14 trials, trials being ~0.1 s
    # now, A once finished the study before the test saw both workers mid-trial)
    inputs = [_scenario(tmp_path / "a.json", 60, 30.0), _scenario(tmp_path / "b.json", 90, 30.0)]
    n, study = 40, "pg-shared"
    # Heartbeat 0.5 s: a dead worker's running trial is stale after 2 s.
    args = [_args(inputs, tmp_path / f"out{k}", postgres, study, n, "--heartbeat", "0.5") for k in range(3)]
    a = subprocess.Popen(args[0], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    b = subprocess.Popen(args[1], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    killed_trial = None
    try:
        # Kill A while it has a trial running, once a few trials are finished.
        t_end = time.monotonic() + 300
        while time.monotonic() < t_end:
            assert a.poll() is None, a.stderr.read() if a.stderr else "worker A ended early"
            trials = _trials(postgres, study)
            if sum(t.state in FINISHED for t in trials) >= 4:
                running = [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
                if len(running) == 2:  # both workers are mid-trial: A's is one of them
                    os.kill(a.pid, signal.SIGKILL)
                    a.wait(30)
                    t_dead, t_kill = time.time(), time.monotonic()
                    # A's trial is the one left behind: B's running trial beats every 0.5 s or ends,
                    # a dead worker's does neither (and is stale only 2 s after its last beat).
                    time.sleep(1.0)
                    orphans = {t.number for t in _trials(postgres, study)
                               if t.state == optuna.trial.TrialState.RUNNING and t.number in {r.number for r in running}
                               and float(t.user_attrs.get(HEARTBEAT_ATTR, 0.0)) < t_dead}
                    if orphans:
                        killed_trial = orphans
                        break
                    # A finished its trial between the query and the kill (a trial takes ~0.3 s): it died
                    # with nothing running. Start it again and wait for another moment.
                    a = subprocess.Popen(args[0], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                         env=ENV)
            time.sleep(0.05)
        assert killed_trial is not None, "no moment with both workers mid-trial"
        before = {t.number: (t.state, t.values, t.params) for t in _trials(postgres, study) if t.state.is_finished()}
        # Restart the killed worker (a new process, same command line) while B goes on.
        c = subprocess.run(args[2], capture_output=True, text=True, env=ENV, timeout=400)
        b_out, b_err = b.communicate(timeout=400)
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
    assert a.returncode == -signal.SIGKILL
    assert c.returncode == 0, c.stderr
    assert b.returncode == 0, b_err
    docs = [json.loads(b_out), json.loads(c.stdout)]
    trials = _trials(postgres, study)
    numbers = [t.number for t in trials]
    assert sorted(numbers) == list(range(len(numbers))), numbers   # none lost, none duplicated
    assert len({t._trial_id for t in trials}) == len(trials)
    after = {t.number: (t.state, t.values, t.params) for t in trials}
    for number, old in before.items():
        assert after[number] == old, f"trial {number} changed across the kill and restart"
    assert not [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    # The killed worker's running trial, and only it, was marked FAIL by a surviving worker.
    assert len(failed) == 1 and failed[0].number in killed_trial, (failed, killed_trial)
    assert sum(d["worker"]["stale_failed"] for d in docs) == 1
    finished = [t for t in trials if t.state in FINISHED]
    assert n <= len(finished) <= n + 2
    # Each finished trial was counted by exactly one worker (the killed one counts what it finished).
    here_after_kill = sum(d["worker"]["finished_here"] for d in docs)
    assert here_after_kill <= len(finished)
    fail_at = failed[0].datetime_complete.timestamp() if failed[0].datetime_complete else float("nan")
    print(f"\nkill/restart: {len(before)} trials finished before the kill, killed mid-trial {sorted(killed_trial)}; "
          f"stale trial {failed[0].number} marked FAIL {fail_at - (time.time() - (time.monotonic() - t_kill)):.1f} s "
          f"after the kill; study ended with {len(finished)} finished / {len(trials)} trials "
          f"(worker B {docs[0]['worker']['finished_here']}, restarted worker {docs[1]['worker']['finished_here']})")


@pytest.mark.slow
@pytest.mark.parametrize("url", [
    "postgresql+psycopg2://wb@127.0.0.1:{closed}/postgres",           # nothing listens there
    "postgresql+psycopg2://wb:secret@127.0.0.1:{closed}/postgres",    # ... and the password is not shown
    "postgresql+psycopg2://wb@/postgres?host=/nonexistent-socket-dir",
])
def test_unreachable_storage_fails_fast_with_one_line(url: str, tmp_path: Path) -> None:
    url = url.format(closed=_free_port())
    inputs = [_scenario(tmp_path / "a.json", 60)]
    r = subprocess.run(_args(inputs, tmp_path / "out", url, "nope", 3), capture_output=True, text=True, env=ENV,
                       timeout=120)  # a guard against a hang, not a speed assertion
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "--storage" in lines[0] and "OperationalError" in lines[0]
    assert "secret" not in r.stderr
    assert r.stdout == ""


def test_postgres_driver_is_installed() -> None:
    """The test extra brings the driver: without it the storage URL above would fail differently."""
    with contextlib.suppress(ImportError):
        import psycopg2  # noqa: F401

        return
    if os.environ.get("CI") == "true":
        pytest.fail("psycopg2 missing: pip install -e '.[test]'")
    pytest.skip("psycopg2 not installed")
