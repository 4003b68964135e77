"""The replay engine: a packet-level, discrete-event model of Linux MPTCP over given path timelines.

>>> from workbench.replay import PathConfig, run_replay, Bulk, ConnectionConfig
>>> from workbench.schedulers import get
>>> paths = [PathConfig.constant("wifi", rate_bps=30e6, owd_ns=10_000_000),
...          PathConfig.constant("lte", rate_bps=10e6, owd_ns=40_000_000)]
>>> r = run_replay(paths, get("minrtt"), workload=Bulk(), duration_ns=5_000_000_000)
>>> r.events  # PACKET_EVENTS, r.samples: SAMPLES, r.summary: counters

The engine itself is compiled (native/engine, the `workbench_core` module scripts/setup.sh builds):
the event list, links, TCP subflows, congestion control, the MPTCP connection, the built-in
schedulers and the recorder. This package plans runs, resolves Python objects at that edge, and turns
the recorder's columns into tables; it imports polars only in ``tables.py`` (building the tables).
"""

from __future__ import annotations

from workbench.replay.config import ConnectionConfig
from workbench.replay.network import Route
from workbench.replay.paths import PathConfig, StepSeries
from workbench.replay.pcap import write_pcap
from workbench.replay.run import ReplayResult, run_network, run_replay, run_single_path_baselines
from workbench.replay.workload import AppTrace, Bulk, Bursts, Finite, Workload

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
    "run_network",
    "run_replay",
    "run_single_path_baselines",
    "write_pcap",
]
