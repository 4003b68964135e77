"""Where the tests find data: the shared test traces sit beside the checkout (``../shared``), in
development and in CI alike, wherever the checkout itself is."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces"
