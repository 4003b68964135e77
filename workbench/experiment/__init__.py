"""The experiment as data: what every backend runs (`workbench.backends`).

>>> from workbench.experiment import two_way_path, Experiment, SubflowSpec, TransferSpec, FiniteWorkload
>>> links, path = two_way_path("wifi", rate_bps=30e6, owd_ns=10_000_000, buffer_bytes=75_000)

Nothing here imports an engine: frozen dataclasses, a workload parser and the stack profiles.
"""

from workbench.experiment._build import experiment_from_paths, two_way_path
from workbench.experiment._model import (
    PACKET_BYTES,
    Experiment,
    LinkSpec,
    PathSpec,
    SchedulerSpec,
    SubflowSpec,
    TransferSpec,
)
from workbench.experiment._series import StepSeries
from workbench.experiment._stack import PROFILES, StackProfile, parse_stack, stack_profile
from workbench.experiment._workload import (
    BulkWorkload,
    BurstsWorkload,
    FiniteWorkload,
    TraceWorkload,
    WorkloadSpec,
    parse_workload,
    workload_text,
)

__all__ = [
    "PACKET_BYTES",
    "PROFILES",
    "BulkWorkload",
    "BurstsWorkload",
    "Experiment",
    "FiniteWorkload",
    "LinkSpec",
    "PathSpec",
    "SchedulerSpec",
    "StackProfile",
    "StepSeries",
    "SubflowSpec",
    "TraceWorkload",
    "TransferSpec",
    "WorkloadSpec",
    "experiment_from_paths",
    "parse_stack",
    "parse_workload",
    "stack_profile",
    "two_way_path",
    "workload_text",
]
