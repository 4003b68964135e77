"""Where the tests find data, one way for every test file.

The shared test traces sit beside the checkout (``../shared/traces``), in development and in CI
alike, wherever the checkout itself is; docs/DATA.md says what they are and where they come from.
Only part of them is bundled in ``traces/`` (what may be redistributed).

A test that needs shared data says so with `require` (inside a test, or at module level for a
module that needs it throughout) or `needs` (a mark, for a test or a module's ``pytestmark``).
Missing data skips on a developer machine, and FAILS when the environment variable ``CI`` is set:
in CI a skip would hide that the data, and so the test, silently went away."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["REPO", "SHARED_TRACES", "in_ci", "needs", "require"]

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces"


def in_ci() -> bool:
    """Whether the tests run in CI (``CI`` set to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _missing(paths: tuple[Path, ...]) -> str | None:
    gone = [str(p) for p in paths if not Path(p).exists()]
    if not gone:
        return None
    return (f"shared test data missing: {', '.join(gone)} (expected in {SHARED_TRACES}, "
            "beside the checkout; see docs/DATA.md)")


def require(*paths: Path) -> None:
    """Skip (developer machine) or fail (CI) unless every path exists. Called at module level it
    skips the whole module, or fails its collection in CI."""
    message = _missing(paths)
    if message is None:
        return
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


def needs(*paths: Path) -> pytest.MarkDecorator:
    """A mark for tests that need these paths: a skip when one is missing on a developer machine;
    in CI a missing path fails the test module's collection with the same message."""
    message = _missing(paths)
    if message is not None and in_ci():
        pytest.fail(message, pytrace=False)
    return pytest.mark.skipif(message is not None, reason=message or "")
