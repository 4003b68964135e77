"""Send/receive buffer occupancy over time (DESIGN "Metrics"; OTIAS §V.B and STMS §5.1.1 vary host
buffers), from the SAMPLES table. Captures carry no such samples; for the receive OOO queue of a capture
use `ooo.ooo_queue_series`, which derives it from PacketEvents.
"""

from __future__ import annotations

import polars as pl

from workbench.metrics._common import check_columns, select_conn

__all__ = ["buffer_series", "buffer_summary"]

_CONN_LEVEL = ["snd_buf_bytes", "rcv_buf_bytes", "rcv_ooo_bytes"]


def buffer_series(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Connection-level buffer occupancy per sample time: columns conn, t_ns, snd_buf_bytes,
    rcv_buf_bytes, rcv_ooo_bytes. The SAMPLES table repeats connection-level columns on every subflow
    row, so one row per (conn, t_ns) is kept. Periodic samples are used when there are any (evenly
    spaced in time, so means are time averages), else every sample."""
    check_columns(samples, ["t_ns", "kind", "conn", *_CONN_LEVEL], what="Samples")
    sm = select_conn(samples, conn)
    periodic = sm.filter(pl.col("kind") == "periodic")
    use = periodic if periodic.height else sm
    return (
        use.sort("conn", "t_ns")
        .group_by("conn", "t_ns", maintain_order=True)
        .agg(*[pl.col(c).first() for c in _CONN_LEVEL])
    )


def buffer_summary(samples: pl.DataFrame, conn: int | None = None) -> pl.DataFrame:
    """Mean and max of each connection-level buffer over `buffer_series`: columns conn,
    {snd_buf,rcv_buf,rcv_ooo}_{mean,max}_bytes."""
    aggs = []
    for c in _CONN_LEVEL:
        stem = c.removesuffix("_bytes")
        aggs += [pl.col(c).cast(pl.Float64).mean().alias(f"{stem}_mean_bytes"),
                 pl.col(c).max().alias(f"{stem}_max_bytes")]
    return buffer_series(samples, conn).group_by("conn").agg(*aggs).sort("conn")
