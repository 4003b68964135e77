"""The ``kernel`` backend: the real Linux MPTCP stack in network namespaces, with emulated paths
(HTB + FIFO rate limits, the project's delay line or netem), captures at both ends and the
emulation's own accuracy. `KernelBackend` plugs into `workbench.backends`; `workbench lab` is its
command line (`cli`)."""

from workbench.backends._kernel._sys import LabUnavailable, check_environment, netem_available
from workbench.backends._kernel.backend import KernelBackend
from workbench.backends._kernel.labrun import LabResult

__all__ = ["KernelBackend", "LabResult", "LabUnavailable", "check_environment", "netem_available"]
