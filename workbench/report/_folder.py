"""The output folder of a batch report while it is written: one writer at a time, and nothing a
user could take for a finished report until the report is finished.

* One writer: an exclusive `fcntl.flock` on ``.workbench-report.lock`` in the folder. A second
  report into the same folder is refused at once with one line (it does not wait: a long report
  would hold it for minutes, and two reports interleaving pages are never what the user wants).
  The kernel drops the lock when its holder dies, SIGKILL included, so a killed run never blocks
  the next one.
* Pages are written into a hidden staging folder (``.unfinished-report-<pid>``) as results arrive,
  and moved into the folder only when every input is done. The previous report (if any) stays
  whole and consistent while a new one runs; at publication its index, manifest and metrics tables
  are removed first, the new pages moved in, and the new tables, index and manifest written last.
  A run killed at any point leaves either the previous report untouched, or no index and no
  manifest (the folder is then visibly unfinished), never an index over a mix of pages.
* Staging folders of killed runs are removed by the next run (it holds the lock, so they are
  nobody's).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from workbench.errors import InputError

__all__ = ["LOCK_NAME", "STAGING_PREFIX", "ReportFolder"]

LOCK_NAME = ".workbench-report.lock"
STAGING_PREFIX = ".unfinished-report-"
# What marks a folder as a finished report, removed before new pages replace the old ones.
_FINISHED_MARKS = ("index.html", "manifest.json", "metrics.csv", "metrics.parquet", "metrics_wide.csv")


class ReportFolder:
    """Context manager around writing one report into `out` (see the module docstring)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.staging = out / f"{STAGING_PREFIX}{os.getpid()}"
        self._fd: int | None = None

    def __enter__(self) -> ReportFolder:
        import fcntl

        self.out.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise InputError(self.out, f"another report is being written into this folder (pid {holder}); "
                                       "wait for it to finish or choose another folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        for stale in self.out.glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)
        self.staging.mkdir()
        return self

    def publish_pages(self) -> None:
        """Every input is done: retire the previous report's index and tables, move the new pages in.
        The caller then writes the new tables, index and manifest (the index last but one)."""
        for name in _FINISHED_MARKS:
            (self.out / name).unlink(missing_ok=True)
        for page in sorted(self.staging.iterdir()):
            os.replace(page, self.out / page.name)

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # releases the lock
            self._fd = None
