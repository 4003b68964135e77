"""Metrics: pure functions over PacketEvents (and optionally Samples), the same for captures and
replays. Definitions follow the seed papers (docs/ARCHITECTURE.md "Metrics"; papers: docs/MODEL.md):

* `ooo`: MPTCP-level out-of-order delay per segment (STMS §5.1.1) and the receive OOO queue (OTIAS
  Fig. 5);
* `throughput`: goodput (in-order delivered bytes), completion time, application delay (DRePaS), per-path
  bytes/throughput/share, retransmissions and reinjections;
* `rtt`: RTT samples per subflow (timestamps; seq/ack with Karn's rule) and one-way delay summaries;
* `burst`: fast-subflow burstiness (STMS §5.1.2) and back-to-back send bursts;
* `buffers`: send/receive buffer occupancy from the replay's Samples;
* `aggregation`: Kaspar's bandwidth aggregation benefit B (DRePaS §IV);
* `summary`: one flat dict of headline numbers per connection.

Functions that return tables take ``conn: int | None`` (None = every connection, one group per
``conn``); times are ns (``*_ns``), summaries are in ms (``*_ms``), rates in bit/s (``*_bps``).
"""

from __future__ import annotations

from workbench.metrics._common import data_direction, data_directions, start_times
from workbench.metrics.aggregation import aggregation_benefit
from workbench.metrics.buffers import buffer_series, buffer_summary
from workbench.metrics.burst import (
    DEFAULT_BURST_GAP_NS,
    burst_summary,
    burstiness,
    fast_subflows,
    free_cwnd_series,
    send_bursts,
)
from workbench.metrics.ooo import ooo_cdf, ooo_queue_series, ooo_segments, ooo_summary
from workbench.metrics.rtt import (
    best_rtt_samples,
    owd_summary,
    rtt_handshake,
    rtt_samples,
    rtt_seq_ack,
    rtt_summary,
    rtt_timestamps,
)
from workbench.metrics.summary import (
    Prepared,
    Summary,
    main_connection,
    prepare,
    summarize,
    summarize_prepared,
)
from workbench.metrics.throughput import (
    DEFAULT_BIN_NS,
    app_delay,
    app_delay_summary,
    goodput,
    goodput_series,
    path_stats,
)

__all__ = [
    "DEFAULT_BIN_NS",
    "DEFAULT_BURST_GAP_NS",
    "Prepared",
    "Summary",
    "aggregation_benefit",
    "app_delay",
    "app_delay_summary",
    "best_rtt_samples",
    "buffer_series",
    "buffer_summary",
    "burst_summary",
    "burstiness",
    "data_direction",
    "data_directions",
    "fast_subflows",
    "free_cwnd_series",
    "goodput",
    "goodput_series",
    "main_connection",
    "ooo_cdf",
    "ooo_queue_series",
    "ooo_segments",
    "ooo_summary",
    "owd_summary",
    "path_stats",
    "prepare",
    "rtt_handshake",
    "rtt_samples",
    "rtt_seq_ack",
    "rtt_summary",
    "rtt_timestamps",
    "send_bursts",
    "start_times",
    "summarize",
    "summarize_prepared",
]
