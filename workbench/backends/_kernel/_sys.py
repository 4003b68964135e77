"""Running the system tools the kernel backend drives (ip, tc, ethtool, sysctl, tcpdump), inside a
network namespace or not, and checking up front that this machine can run a lab at all: root, an
MPTCP kernel, network namespaces and the tools."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.errors import InputError

__all__ = ["LabUnavailable", "LineReader", "check_environment", "delayline_binary", "netem_available", "ns_cmd", "run"]

TOOLS = ("ip", "tc", "ethtool", "tcpdump", "mergecap")


class LabUnavailable(InputError):
    """This machine cannot run the kernel backend (one line: what is missing)."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, f"workbench lab: {problem}")


def ns_cmd(ns: str | None, args: Sequence[str]) -> list[str]:
    """``args`` run inside network namespace ``ns`` (as-is when None)."""
    return ["ip", "netns", "exec", ns, *args] if ns else list(args)


def run(args: Sequence[str], *, ns: str | None = None, check: bool = True, input: str | None = None,
        timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run one command; a failure raises RuntimeError with the command and its stderr (a set-up step
    that fails is a bug or a missing kernel feature, not bad user input)."""
    cmd = ns_cmd(ns, args)
    p = subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[:300]}")
    return p


def delayline_binary() -> Path:
    """The delay line built by scripts/setup.sh into the virtualenv (WORKBENCH_DELAYLINE overrides)."""
    env = os.environ.get("WORKBENCH_DELAYLINE")
    if env:
        return Path(env)
    return Path(sys.executable).with_name("workbench-delayline")


_netem: bool | None = None


def netem_available() -> bool:
    """Whether ``tc qdisc add ... netem`` works in this kernel (tried once, in a scratch namespace)."""
    global _netem
    if _netem is None:
        ns = f"wbk-probe-{os.getpid()}"
        try:
            run(["ip", "netns", "add", ns])
            run(["ip", "link", "add", "name", "nt0", "type", "dummy"], ns=ns)
            _netem = run(["tc", "qdisc", "add", "dev", "nt0", "root", "netem", "delay", "1ms"], ns=ns,
                         check=False).returncode == 0
        except (RuntimeError, OSError):
            _netem = False
        finally:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return _netem


def check_environment(*, need_delayline: bool = True) -> None:
    """Raise `LabUnavailable` naming the first thing missing: root, MPTCP, tools, the delay line."""
    if sys.platform != "linux":
        raise LabUnavailable(f"needs Linux (this is {sys.platform})")
    if os.geteuid() != 0:
        raise LabUnavailable("needs root (network namespaces, qdiscs and captures); run it as root or with sudo")
    enabled = Path("/proc/sys/net/mptcp/enabled")
    if not enabled.exists():
        raise LabUnavailable("needs a kernel with MPTCP (CONFIG_MPTCP): /proc/sys/net/mptcp is missing")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise LabUnavailable(f"needs {', '.join(missing)} (bash scripts/setup.sh installs them)")
    if need_delayline and not netem_available() and not delayline_binary().is_file():
        raise LabUnavailable(f"this kernel has no netem and the delay line {delayline_binary()} is not built "
                             "(bash scripts/setup.sh builds it)")


class LineReader:
    """Collects the lines a child process writes on one pipe, in a daemon thread, so waiting for
    "ready" never blocks on a process that says something else (or nothing)."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._done = False
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        try:
            for line in stream:
                with self._cond:
                    self.lines.append(line.rstrip("\n"))
                    self._cond.notify_all()
        except (OSError, ValueError):
            pass
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def wait_for(self, needle: str, timeout_s: float) -> str | None:
        """The first line containing ``needle``, or None after ``timeout_s`` / at end of stream."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                if self._done or left <= 0:
                    return None
                self._cond.wait(left)

    def text(self, *, wait_s: float = 2.0) -> str:
        """Everything read so far (waits up to ``wait_s`` for the end of the stream)."""
        self._thread.join(timeout=wait_s)
        with self._cond:
            return "\n".join(self.lines)
