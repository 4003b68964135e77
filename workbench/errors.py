"""User-facing errors: one line that names the input and the problem.

Every error a user can cause (bad file, bad option, unknown scheduler) is raised as an `InputError`;
the CLI prints ``str(error)`` on one line and exits non-zero, never a stack trace.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["InputError"]


class InputError(Exception):
    """A problem with something the user gave us: a file, an option or a parameter."""

    def __init__(self, source: str | Path | None, problem: str) -> None:
        self.source = str(source) if source is not None else None
        self.problem = problem
        super().__init__(f"{self.source}: {problem}" if self.source else problem)
