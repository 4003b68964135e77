"""MPTCP trace-replay workbench: captures -> path timelines -> scheduler replays -> metrics."""

from __future__ import annotations

from workbench.errors import InputError

__version__ = "0.1.0"

__all__ = ["InputError", "__version__"]
