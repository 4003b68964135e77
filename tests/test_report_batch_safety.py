"""Batch reports and interruptions: a `workbench report` killed with SIGKILL at any moment leaves
nothing a user could take for a finished report (no index, no manifest, no pages of the unfinished
run; a previous finished report in the folder stays whole), the next run cleans up after it, and a
second report into a folder that is being written is refused with one line (exit code 2)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.errors import InputError
from workbench.report import resolve_settings, run_report
from workbench.report._folder import LOCK_NAME, STAGING_PREFIX

TRACES = Path(__file__).resolve().parents[1] / "traces" / "fixtures"
INPUTS = [TRACES / n for n in ("tests_mptcp-v0.pcap", "tests_mptcp-v1.pcap", "tests_mptcp-aa-v1.pcap",
                               "ptcpdump_mptcp.pcap", "tests_mptcp-fclose.pcap")]


def _report_cmd(out: Path, *inputs: Path, schedulers: str = "minrtt,roundrobin") -> list[str]:
    return [sys.executable, "-c", "from workbench.cli import main; main()", "report", *map(str, inputs),
            "-o", str(out), "--schedulers", schedulers, "--jobs", "1", "--no-progress"]


def _env(tmp: Path) -> dict[str, str]:
    return os.environ | {"WORKBENCH_CACHE": str(tmp / "cache"), "POLARS_MAX_THREADS": "1"}


def _tree(out: Path) -> dict[str, str]:
    """Every visible file of the folder with its content hash."""
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file() and not any(x.startswith(".") for x in p.relative_to(out).parts)}


def _kill_when_a_page_is_staged(cmd: list[str], out: Path, env: dict[str, str]) -> None:
    """SIGKILL the report once a page is staged. It is paused (SIGSTOP) the moment the page is seen,
    so that it cannot finish between that look and the kill, however fast reports become."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if list(out.glob(f"{STAGING_PREFIX}*/*.html")):
                os.kill(proc.pid, signal.SIGSTOP)
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the report finished before it could be killed: give it more inputs"
        assert list(out.glob(f"{STAGING_PREFIX}*/*.html")), "no page was staged within 300 s"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


def _lock_is_free(out: Path) -> bool:
    fd = os.open(out / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.slow
def test_sigkill_leaves_no_report_and_the_next_run_finishes(tmp_path: Path) -> None:
    out = tmp_path / "report"
    _kill_when_a_page_is_staged(_report_cmd(out, *INPUTS), out, _env(tmp_path))
    # Nothing visible: no index, no manifest, no metrics, no page (a page was written, but staged).
    visible = _tree(out)
    assert not [f for f in visible if f.endswith((".html", ".json", ".csv", ".parquet"))], visible
    assert list(out.glob(f"{STAGING_PREFIX}*"))  # the staged page is there, hidden and named unfinished
    assert _lock_is_free(out)  # the kernel released the dead run's lock
    done = subprocess.run(_report_cmd(out, *INPUTS[:2]), env=_env(tmp_path), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert (out / "index.html").is_file() and (out / "manifest.json").is_file()
    assert not list(out.glob(f"{STAGING_PREFIX}*"))  # the killed run's staging folder was removed
    assert len(list(out.glob("*.html"))) == 3  # index + one page per input of the finished run


@pytest.mark.slow
def test_sigkill_keeps_the_previous_report_whole(tmp_path: Path) -> None:
    out = tmp_path / "report"
    first = subprocess.run(_report_cmd(out, *INPUTS[:2]), env=_env(tmp_path), capture_output=True, text=True,
                           timeout=600)
    assert first.returncode == 0, first.stderr
    before = _tree(out)
    assert "index.html" in before and "manifest.json" in before
    _kill_when_a_page_is_staged(_report_cmd(out, *INPUTS), out, _env(tmp_path))
    assert _tree(out) == before  # the finished report is untouched, byte for byte


@pytest.mark.slow
def test_second_report_into_a_locked_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a running report holds
    os.write(fd, b"4242\n")
    try:
        with pytest.raises(InputError, match="another report is being written into this folder"):
            run_report([str(INPUTS[0])], out, resolve_settings("minrtt"), jobs=1, show_progress=False)
        cli = subprocess.run(_report_cmd(out, INPUTS[0]), env=_env(tmp_path), capture_output=True, text=True,
                             timeout=300)
        assert cli.returncode == 2
        lines = [ln for ln in cli.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "pid 4242" in lines[0] and str(out) in lines[0], cli.stderr
        assert not (out / "index.html").exists() and not list(out.glob("*.html"))
    finally:
        os.close(fd)
    # Released: the same call now writes the report.
    res = run_report([str(INPUTS[0])], out, resolve_settings("minrtt"), jobs=1, show_progress=False)
    assert res.n_ok == 1 and (out / "index.html").is_file()


@pytest.mark.slow
def test_two_concurrent_reports_one_refused(tmp_path: Path) -> None:
    """Two real processes into one folder: exactly one finishes, the other is refused (exit 2). A is
    paused (SIGSTOP) once it writes into the folder, so that B meets it there however fast either runs (a
    report of these inputs once took 0.4 s, and A was done before B had started)."""
    out = tmp_path / "report"
    env = _env(tmp_path)
    a = subprocess.Popen(_report_cmd(out, *INPUTS[:2], schedulers="all"), env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(out.glob(f"{STAGING_PREFIX}*")) and time.monotonic() < deadline and a.poll() is None:
        time.sleep(0.01)
    os.kill(a.pid, signal.SIGSTOP)
    try:
        assert a.poll() is None, "A finished before it could be paused in the folder"
        b = subprocess.run(_report_cmd(out, INPUTS[0]), env=env, capture_output=True, text=True, timeout=300)
    finally:
        os.kill(a.pid, signal.SIGCONT)
    a.wait(600)
    assert a.returncode == 0, a.stderr.read() if a.stderr else ""
    assert b.returncode == 2 and "another report is being written" in b.stderr, b.stderr
    assert len(list(out.glob("*.html"))) == 3
