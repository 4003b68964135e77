"""Ground truth made with the replay engine: known path timelines -> PacketEvents, seen from both ends
("pair") or from the client alone ("client"), for the timeline-estimation tests of issue 14.

The engine records data segments at the sender and the receiver and ACKs at the receiver (with one-way
delays). The client's own capture is what it received (data, ``rcv``) and what it sent (ACKs: the
server-side arrival minus the ACK's one-way delay, ``snd``); it has no one-way delays.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from workbench.replay import Bulk, ConnectionConfig, Finite, PathConfig, StepSeries, run_replay
from workbench.schedulers import get

S = 1_000_000_000
MS = 1_000_000
FRAME = 1514


def path(name: str, *, rate_bps: float | StepSeries, owd_ms: float, buffer_bytes: int, loss: float = 0.0) -> PathConfig:
    rate = rate_bps if isinstance(rate_bps, StepSeries) else StepSeries.constant(float(rate_bps))
    return PathConfig(name=name, rate_down_bps=rate, rate_up_bps=StepSeries.constant(100e6),
                      owd_down_ns=StepSeries.constant(round(owd_ms * MS)),
                      owd_up_ns=StepSeries.constant(round(owd_ms * MS)),
                      loss_down=StepSeries.constant(loss),
                      buffer_down_bytes=buffer_bytes, buffer_up_bytes=1_000_000)


@dataclass(frozen=True)
class Truth:
    paths: list[PathConfig]
    events: pl.DataFrame       # the pair view (engine's PacketEvents without drops)

    @property
    def t0_ns(self) -> int:
        return int(self.events["t_ns"].min())  # type: ignore[arg-type]

    def view(self, which: str) -> pl.DataFrame:
        """"pair", "client" (with TCP timestamps) or "client-nots" (without)."""
        if which == "pair":
            return self.events
        return client_view(self.events, timestamps=which == "client")


def replay_truth(paths: list[PathConfig], *, size_bytes: int | None = None, duration_s: float = 6.0,
                 seed: int = 1, scheduler: str = "minrtt") -> Truth:
    wl = Finite(size_bytes=size_bytes) if size_bytes else Bulk()
    r = run_replay(paths, get(scheduler), workload=wl, duration_ns=round(duration_s * S), seed=seed,
                   conn=ConnectionConfig(quickack_on_meta_ooo=False))
    return Truth(paths, r.events.filter(pl.col("point") != "drop"))


def client_view(events: pl.DataFrame, *, timestamps: bool = True) -> pl.DataFrame:
    """What a capture at the client alone holds: data received, ACKs sent; no one-way delays.

    The engine records no TSecr; with ``timestamps`` each data segment echoes, as Linux does, the
    TSval of the newest ACK its sender had received when it sent it (send time = arrival - one-way
    delay), so the client view can time RTTs by timestamp echo like a real client capture.
    Without, the capture has no timestamps at all (ts_val and ts_ecr null)."""
    data = events.filter((pl.col("dir") == "s2c") & (pl.col("point") == "rcv"))
    acks_at_server = events.filter((pl.col("dir") == "c2s") & (pl.col("point") == "rcv"))
    acks = acks_at_server.with_columns(
        t_ns=pl.col("t_ns") - pl.col("owd_ns"), point=pl.lit("snd").cast(events.schema["point"]))
    if timestamps:
        seen = acks_at_server.select("conn", "subflow", t_seen=pl.col("t_ns"), echo=pl.col("ts_val")).sort("t_seen")
        data = (data.with_columns(t_sent=pl.col("t_ns") - pl.col("owd_ns")).sort("t_sent")
                .join_asof(seen, left_on="t_sent", right_on="t_seen", by=["conn", "subflow"], strategy="backward",
                           check_sortedness=False)
                .with_columns(ts_ecr=pl.col("echo")).drop("t_sent", "t_seen", "echo").select(events.columns))
    else:
        data = data.with_columns(ts_val=pl.lit(None, pl.UInt32), ts_ecr=pl.lit(None, pl.UInt32))
        acks = acks.with_columns(ts_val=pl.lit(None, pl.UInt32), ts_ecr=pl.lit(None, pl.UInt32))
    return pl.concat([data, acks]).with_columns(owd_ns=pl.lit(None, pl.Int64)).sort("t_ns")


def rate_at(p: PathConfig, t_rel_ns: int) -> float:
    return float(p.rate_down_bps.at(int(t_rel_ns)))
