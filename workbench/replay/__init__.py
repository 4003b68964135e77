"""The replay engine: a packet-level, discrete-event model of Linux MPTCP over given path timelines.

>>> from workbench.replay import PathConfig, run_replay, Bulk, ConnectionConfig
>>> from workbench.schedulers import get
>>> paths = [PathConfig.constant("wifi", rate_bps=30e6, owd_ns=10_000_000),
...          PathConfig.constant("lte", rate_bps=10e6, owd_ns=40_000_000)]
>>> r = run_replay(paths, get("minrtt"), workload=Bulk(), duration_ns=5_000_000_000)
>>> r.events  # PACKET_EVENTS, r.samples: SAMPLES, r.summary: counters

The engine never imports polars at module level except in ``tables.py`` (building the tables).
"""

from __future__ import annotations

import os

from workbench.replay._compiled import check_compiled_engine, engine_is_compiled, use_python_engine

if os.environ.get("WORKBENCH_PURE_PYTHON"):
    use_python_engine()
check_compiled_engine()  # before importing them: a stale compiled module would hide source edits

from workbench.replay.mptcp import ConnectionConfig  # noqa: E402
from workbench.replay.network import Route  # noqa: E402
from workbench.replay.paths import PathConfig, StepSeries  # noqa: E402
from workbench.replay.pcap import write_pcap  # noqa: E402
from workbench.replay.run import ReplayResult, run_network, run_replay, run_single_path_baselines  # noqa: E402
from workbench.replay.workload import AppTrace, Bulk, Bursts, Finite, Workload  # noqa: E402

__all__ = [
    "AppTrace",
    "Bulk",
    "Bursts",
    "ConnectionConfig",
    "Finite",
    "PathConfig",
    "ReplayResult",
    "Route",
    "StepSeries",
    "Workload",
    "engine_is_compiled",
    "run_network",
    "run_replay",
    "run_single_path_baselines",
    "write_pcap",
]
