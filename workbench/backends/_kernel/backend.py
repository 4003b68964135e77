"""The ``kernel`` backend: an `Experiment` run on the real Linux MPTCP stack.

    >>> from workbench.backends import get_backend
    >>> run = get_backend("kernel").run(experiment)       # root and an MPTCP kernel needed
    >>> run.events                  # PacketEvents from the capture pair, t_ns from time zero
    >>> run.counters["emulation_ok"], run.warnings

What it runs: network namespaces (client, server, one router per path), HTB + FIFO per path and
direction following the capacity timeline, the delay line (or netem) following the delay timeline,
real MPTCP sockets at both ends with the kernel path manager opening the subflows, the upstream
default scheduler, congestion control per socket, tcp_rmem/tcp_wmem per namespace from the stack
profile. ``run.detail`` is the `LabResult` (pcaps, per-bin accuracy, the full record).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from workbench.backends._base import Backend, Run, UnsupportedExperiment, required_capabilities
from workbench.backends._kernel._convert import KERNEL_SCHEDULERS, plan_from_experiment, unsupported
from workbench.backends._kernel.labrun import LabResult, run_lab

if TYPE_CHECKING:
    from workbench.experiment import Experiment

__all__ = ["KernelBackend"]


class KernelBackend(Backend):
    """Runs experiments on this machine's kernel. ``delay``: "auto" (netem where the kernel has it,
    else the delay line), "netem" or "delayline"; ``bin_ns``: the accuracy bins."""

    name: ClassVar[str] = "kernel"
    capabilities: ClassVar[frozenset[str]] = frozenset({"upload", "kernel-scheduler", "time-varying", "random-loss"})

    def __init__(self, *, delay: str = "auto", bin_ns: int = 100_000_000) -> None:
        if delay not in ("auto", "netem", "delayline"):
            raise ValueError(f"delay must be auto, netem or delayline, not {delay!r}")
        self.delay = delay
        self.bin_ns = bin_ns

    def check(self, experiment: Experiment) -> None:
        need = required_capabilities(experiment)
        if experiment.scheduler.name in KERNEL_SCHEDULERS:
            need.discard("python-scheduler")  # the model's object for the scheduler the kernel has
        missing = sorted(need - self.capabilities)
        problems = [f"needs {', '.join(missing)}"] if missing else []
        problems += unsupported(experiment)
        if problems:
            raise UnsupportedExperiment(self.name, "; ".join(problems))

    def run(self, experiment: Experiment, *, record: bool = True, workdir: Path | None = None) -> Run:
        """Run it. The capture pair and the record stay in ``workdir`` (default: a new temporary
        folder, named in ``provenance["workdir"]``)."""
        result, notes = self.run_lab(experiment, workdir=workdir)
        return self.to_run(experiment, result, notes)

    def run_lab(self, experiment: Experiment, *, workdir: Path | None = None) -> tuple[LabResult, list[str]]:
        """The lab result itself (pcaps, accuracy bins, record) and the adaptation notes."""
        self.check(experiment)
        plan, notes = plan_from_experiment(experiment, bin_ns=self.bin_ns)
        work = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="workbench-kernel-"))
        use_netem = None if self.delay == "auto" else self.delay == "netem"
        return run_lab(plan, work, use_netem=use_netem), notes

    def to_run(self, experiment: Experiment, result: LabResult, notes: list[str]) -> Run:
        rec = result.record
        emu = rec["emulation"]
        counters: dict[str, Any] = {
            "emulation_ok": result.emulation_ok,
            "qdisc_drops": rec["drops"],
            "capture_drops": rec["capture_drops"],
            "delay_line": {k: {f: v.get(f) for f in ("rx", "sent", "lost", "overflow", "late_p50_us", "late_p99_us",
                                                      "late_max_us")} for k, v in emu["links"].items()},
            "joins_ns": {s["path"]: s["start_ns"] for s in rec.get("subflows", [])},
            "end_ns": rec["end_ns"],
        }
        prov = {"backend": self.name, "scheduler": "upstream (kernel default)", "kernel": _kernel_release(),
                "delay_mode": rec["delay_mode"], "wall_s": rec["wall_s"], "workdir": str(result.workdir),
                "client_pcap": str(result.client_pcap), "server_pcap": str(result.server_pcap),
                "t0_ns": rec["t0_ns"], "accuracy": result.accuracy, "schedule_applied": emu["applied"],
                "delay_changes": {k: v.get("changes", []) for k, v in emu["links"].items()},
                "endpoints": rec["endpoints"], "kernel_state": rec.get("probe")}
        events, samples = result.events, result.samples
        return Run(backend=self.name, experiment=experiment, counters=counters, provenance=prov,
                   warnings=[*notes, *result.warnings], events_fn=lambda: events, samples_fn=lambda: samples,
                   detail=result)


def _kernel_release() -> str:
    import os
    return os.uname().release
