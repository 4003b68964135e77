"""Send/receive buffer occupancy over time (DESIGN "Metrics"; OTIAS §V.B and STMS §5.1.1 vary host
buffers), from the SAMPLES table. Captures carry no such samples; for the receive OOO queue of a capture
use `ooo.ooo_queue_series`, which derives it from PacketEvents.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from workbench.metrics._common import check_columns, int_array, mask_eq, nullable_int, polars_sort_order

__all__ = ["buffer_series", "buffer_summary"]

_CONN_LEVEL = ["snd_buf_bytes", "rcv_buf_bytes", "rcv_ooo_bytes"]


def buffer_series(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Connection-level buffer occupancy per sample time: columns conn, t_ns, snd_buf_bytes,
    rcv_buf_bytes, rcv_ooo_bytes. The SAMPLES table repeats connection-level columns on every subflow
    row, so one row per (conn, t_ns) is kept. Periodic samples are used when there are any (evenly
    spaced in time, so means are time averages), else every sample.

    In numpy: the rows sorted by (conn, t_ns), the first of each run of equal keys. The polars
    formulation it replaced (a filter, a sort and a group-by, for every source of a report) is the
    oracle in tests/test_metrics_fast_series.py."""
    check_columns(samples, ["t_ns", "kind", "conn", *_CONN_LEVEL], what="Samples")
    conn_all = samples["conn"].to_numpy()
    mine = np.ones(samples.height, bool) if conn is None else conn_all == conn
    periodic = mine & mask_eq(samples["kind"], "periodic")
    rows = np.flatnonzero(periodic if periodic.any() else mine)
    c, t_ns = conn_all[rows], int_array(samples["t_ns"])[rows]
    # The first of each (conn, t_ns) is the first in the order polars' (unstable) sort gives; which of
    # tied rows that is only matters when their buffer values differ, which they do not in a replay's
    # Samples (connection-level values repeated on every subflow's row).
    values = tuple(a[rows] for col in _CONN_LEVEL for a in nullable_int(samples[col]))
    order = polars_sort_order({"conn": (c, samples["conn"].dtype), "t_ns": (t_ns, samples["t_ns"].dtype)},
                              ties_only_through=values)
    rows, c, t_ns = rows[order], c[order], t_ns[order]
    new = np.ones(len(rows), bool)
    new[1:] = (c[1:] != c[:-1]) | (t_ns[1:] != t_ns[:-1])
    first = rows[new]
    return pl.DataFrame([
        pl.Series("conn", c[new], samples["conn"].dtype).set_sorted(),  # sorted by it: flagged, as polars does
        pl.Series("t_ns", t_ns[new], samples["t_ns"].dtype),
        *(samples[col][first] for col in _CONN_LEVEL),
    ])


def buffer_summary(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Mean and max of each connection-level buffer over `buffer_series`: columns conn,
    {snd_buf,rcv_buf,rcv_ooo}_{mean,max}_bytes."""
    aggs = []
    for c in _CONN_LEVEL:
        stem = c.removesuffix("_bytes")
        aggs += [pl.col(c).cast(pl.Float64).mean().alias(f"{stem}_mean_bytes"),
                 pl.col(c).max().alias(f"{stem}_max_bytes")]
    return buffer_series(samples, conn).group_by("conn").agg(*aggs).sort("conn")
