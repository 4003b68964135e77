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

from workbench.replay.mptcp import ConnectionConfig
from workbench.replay.paths import PathConfig, StepSeries
from workbench.replay.pcap import write_pcap
from workbench.replay.run import ReplayResult, run_replay, run_single_path_baselines
from workbench.replay.workload import AppTrace, Bulk, Bursts, Finite, Workload

__all__ = [
    "AppTrace",
    "Bulk",
    "Bursts",
    "ConnectionConfig",
    "Finite",
    "PathConfig",
    "ReplayResult",
    "StepSeries",
    "Workload",
    "run_replay",
    "run_single_path_baselines",
    "write_pcap",
]
