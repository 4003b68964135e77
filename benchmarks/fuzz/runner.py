"""Running fuzz cases in isolation: a worker process (spawned, so it shares no state or threads
with the caller) that runs case after case under an address-space limit (`RLIMIT_AS`), watched by
the caller with a per-case time limit. A case that hangs gets the worker killed; one that kills the
worker (abort, segfault, allocation failure) is classified from its exit status and stderr; either
way a fresh worker takes the next case."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["IsolatedRunner", "Limits"]


@dataclass(frozen=True)
class Limits:
    time_s: float = 20.0            # wall time per case
    memory_bytes: int = 1 << 30     # address space the worker may add on top of what its imports took


def _vm_size_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _worker_main(conn: Any, memory_bytes: int, stderr_path: str) -> None:
    # One core, one thread pool thread: the campaign runs beside other work on a small machine.
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)  # what a dying native library prints lands where the caller can read it
    import resource

    # Warm the imports of every target before the limit, so the limit bounds the case, not imports.
    import workbench.inspect
    import workbench.scenario
    import workbench.timeline.convert
    import workbench.ui.uploads  # noqa: F401
    from benchmarks.fuzz.targets import run_target

    limit = _vm_size_bytes() + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    conn.send(("ready", ""))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        kind, path = msg
        conn.send(run_target(kind, path))


class IsolatedRunner:
    """Runs cases in a worker with `limits`; restarts the worker after a hang or a death."""

    def __init__(self, limits: Limits = Limits()) -> None:
        self.limits = limits
        self._ctx = mp.get_context("spawn")
        self._tmp = tempfile.TemporaryDirectory(prefix="wb-fuzz-worker-")
        self._stderr = Path(self._tmp.name) / "stderr.txt"
        self._proc: Any = None
        self._conn: Any = None
        self.restarts = 0

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_worker_main, args=(child, self.limits.memory_bytes, str(self._stderr)),
                                       daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(120):
            raise RuntimeError("fuzz worker did not start within 120 s")
        parent.recv()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            os.kill(self._proc.pid, signal.SIGKILL)
        if self._proc is not None:
            self._proc.join(10)
        self._proc = None
        self.restarts += 1

    def run(self, kind: str, path: str | Path) -> tuple[str, str]:
        if self._proc is None:
            self._start()
        self._conn.send((kind, str(path)))
        if not self._conn.poll(self.limits.time_s):
            self._kill()
            return "hang", f"no result within {self.limits.time_s:g} s"
        try:
            return self._conn.recv()
        except (EOFError, ConnectionResetError):
            self._proc.join(10)
            code = self._proc.exitcode
            tail = self._stderr.read_text(errors="replace")[-2000:] if self._stderr.exists() else ""
            self._kill()
            last = (tail.strip().splitlines() or [""])[-1][:200]
            if "memory allocation" in tail or "MemoryError" in tail or "Cannot allocate" in tail \
                    or "bad_alloc" in tail or code == -signal.SIGKILL:
                return "memory", f"worker died (exit {code}): {last}"
            return "crash", f"worker died (exit {code}): {last}"

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except OSError:
                pass
            if self._proc.is_alive():
                os.kill(self._proc.pid, signal.SIGKILL)
                self._proc.join(5)
        self._proc = None
        self._tmp.cleanup()

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
