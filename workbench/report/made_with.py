"""Which scheduler made a report input, as far as the input says: the reference the trust table
compares the model with (the model's replay of that scheduler against what was observed).

Where it is read:

* a lab run (``workbench lab``, ``traces/lab/*``): ``results.json`` beside the capture records the
  kernel's ``net.mptcp.scheduler`` as ``system.mptcp_scheduler``. Kernel names are mapped to the
  workbench's schedulers: upstream Linux's ``default`` (and its BPF twin ``bpf_burst``) is
  ``upstream``, the BPF round-robin and redundant schedulers are ``roundrobin`` and ``redundant``; a
  name that is a workbench scheduler is taken as it is;
* a scenario: its ``scheduler:`` (the scheduler it is about);
* anything else (a capture from elsewhere, a CSV export, timelines): nothing says, and Linux's
  default scheduler is assumed, which the page states.

An unreadable ``results.json`` (missing, not JSON, no such field) says nothing: the default is
assumed, never an error for the report.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_SCHEDULER", "MadeWith", "assumed", "from_lab_run", "from_scenario", "kernel_scheduler"]

DEFAULT_SCHEDULER = "upstream"      # Linux's default MPTCP scheduler, as the workbench models it
# Kernel scheduler names (net.mptcp.scheduler) -> workbench scheduler names.
_KERNEL_NAMES = {"default": "upstream", "bpf_burst": "upstream", "bpf_rr": "roundrobin", "bpf_red": "redundant"}
_MAX_RESULTS_BYTES = 16 * 1024 * 1024   # a lab run's results.json is tens of kB


@dataclass(frozen=True)
class MadeWith:
    """The scheduler an input was made with and where that was read (None: assumed, nothing said)."""

    scheduler: str
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def assumed() -> MadeWith:
    """Nothing in the input says: Linux's default scheduler."""
    return MadeWith(DEFAULT_SCHEDULER, None)


def kernel_scheduler(name: str) -> str:
    """The workbench scheduler of a kernel scheduler name (itself when it is not a known kernel name)."""
    return _KERNEL_NAMES.get(name.strip(), name.strip())


def from_lab_run(folder: str | Path) -> MadeWith | None:
    """What ``folder/results.json`` (a lab run's record) says, or None when it says nothing."""
    f = Path(folder) / "results.json"
    try:
        if not f.is_file() or f.stat().st_size > _MAX_RESULTS_BYTES:
            return None
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    system = doc.get("system") if isinstance(doc, dict) else None
    name = system.get("mptcp_scheduler") if isinstance(system, dict) else None
    if not isinstance(name, str) or not name.strip():
        return None
    return MadeWith(kernel_scheduler(name), f"results.json: system.mptcp_scheduler = {name.strip()}")


def from_scenario(scheduler: Any) -> MadeWith | None:
    """What a scenario's ``scheduler:`` says (the resolved scheduler, or None when it names none)."""
    name = getattr(scheduler, "name", None)
    if not isinstance(name, str) or not name or name == "base":
        return None
    return MadeWith(name, f"the scenario's scheduler: {name}")
