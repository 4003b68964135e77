"""A lab run leaves nothing behind (issue 12): every namespace (and with it every veth and qdisc) and
every process it started are gone after an error inside the run and after Ctrl-C at the terminal;
two runs at once do not collide; without root the command refuses with one line and exit code 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._kernel import lab_namespaces, require_lab

pytestmark = pytest.mark.slow

MS = 1_000_000
S = 1_000_000_000
EXE = str(Path(sys.executable).with_name("workbench"))
SCENARIO = """
duration_s: 4
scheduler: upstream
paths:
  - {name: wifi, rate_mbps: 20, owd_ms: 10, buffer_packets: 50}
  - {name: lte, rate_mbps: [[0, 10], [1, 5]], owd_ms: [[0, 30], [1, 15]], buffer_packets: 200}
workload: {bulk: {stop_s: 2}}
"""


def _procs_mentioning(text: str) -> list[str]:
    """Command lines of live processes that name ``text`` (our run's folder)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            found.append(f"{d.name}: {cmd}")
    return found


def test_cleanup_after_an_error_inside_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run fails after everything started (delay lines, rate scheduler, captures, endpoints)."""
    require_lab()
    from workbench.backends._kernel import emulation, topology
    from workbench.backends._kernel.backend import KernelBackend
    from workbench.experiment import BulkWorkload, experiment_from_paths, two_way_path

    labs: list[topology.Lab] = []
    real_build, real_start = topology.Lab.build, emulation.Emulation.start

    def build(self: topology.Lab, **kw: object) -> None:
        labs.append(self)
        real_build(self, **kw)  # type: ignore[arg-type]

    def start(self: emulation.Emulation, *a: object, **kw: object) -> None:
        real_start(self, *a, **kw)  # type: ignore[arg-type]
        time.sleep(0.3)
        assert self.lab.exists() and _procs_mentioning(str(tmp_path)), "nothing was running to clean up"
        raise RuntimeError("injected failure")

    monkeypatch.setattr(topology.Lab, "build", build)
    monkeypatch.setattr(emulation.Emulation, "start", start)
    e = experiment_from_paths([two_way_path("a", rate_bps=10e6, owd_ns=10 * MS, buffer_packets=50),
                               two_way_path("b", rate_bps=10e6, owd_ns=20 * MS, buffer_packets=50)],
                              workload=BulkWorkload(stop_ns=2 * S), duration_ns=4 * S)
    with pytest.raises(RuntimeError, match="injected failure"):
        KernelBackend().run(e, workdir=tmp_path / "work")
    (lab,) = labs
    assert lab.exists() == []
    assert _procs_mentioning(str(tmp_path)) == []


def _no_sigint_ignore() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as at a terminal (a background job ignores it)


def test_ctrl_c_cleans_up_and_writes_nothing(tmp_path: Path) -> None:
    require_lab()
    sc = tmp_path / "s.yaml"
    sc.write_text(SCENARIO)
    out = tmp_path / "out"
    p = subprocess.Popen([EXE, "lab", str(sc), "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=_no_sigint_ignore)
    deadline = time.monotonic() + 60
    # wait until the run is in full swing: namespaces made, endpoints running
    while time.monotonic() < deadline and p.poll() is None:
        if lab_namespaces(p.pid) and any("endpoint.py" in c for c in _procs_mentioning(str(tmp_path))):
            break
        time.sleep(0.1)
    assert p.poll() is None and lab_namespaces(p.pid), "the run did not get going"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert lab_namespaces(p.pid) == []
    assert _procs_mentioning(str(tmp_path)) == []
    assert not out.exists() and [f.name for f in tmp_path.iterdir()] == ["s.yaml"]  # nothing half-written


def test_two_runs_at_once(tmp_path: Path) -> None:
    require_lab()
    sc = tmp_path / "s.yaml"
    sc.write_text(SCENARIO)
    procs = [subprocess.Popen([EXE, "lab", str(sc), "-o", str(tmp_path / f"out{i}"), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    docs = []
    for p in procs:
        o, e = p.communicate(timeout=180)
        assert p.returncode == 0, e
        docs.append(json.loads(o))
    ns1, ns2 = (set(d["run"]["namespaces"]) for d in docs)
    assert len(ns1) == len(ns2) == 4 and not ns1 & ns2
    for d in docs:
        receiver = d["run"]["endpoints"]["client"]
        assert receiver["bytes_received"] == d["metrics"]["delivered_bytes"] > 0
    assert all(lab_namespaces(p.pid) == [] for p in procs)


def test_without_root_one_line_and_exit_2(tmp_path: Path) -> None:
    require_lab()
    sc = tmp_path / "s.yaml"
    sc.write_text(SCENARIO)
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", EXE, "lab", str(sc), "-o",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HOME": "/nonexistent"})
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "needs root" in p.stderr, p.stderr


def test_sweep_removes_what_a_killed_run_left(tmp_path: Path) -> None:
    """A run killed with SIGKILL cannot clean up; the next run removes its namespaces (and only those
    whose process is gone)."""
    require_lab()
    from workbench.backends._kernel.topology import sweep_stale

    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    stale, alive = f"wbk-{dead.pid}-0badc0-c", f"wbk-{os.getpid()}-0badc0-c"
    for ns in (stale, alive):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        removed = sweep_stale()
        assert stale in removed and alive not in removed
        assert lab_namespaces(dead.pid) == [] and lab_namespaces(os.getpid()) == [alive]
    finally:
        for ns in (stale, alive):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
