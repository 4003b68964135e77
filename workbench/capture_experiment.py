"""The experiment a capture implies: what the capture says about the connection beyond its paths
(bytes delivered, MSS, header bytes per data segment, when the client joined the second subflow,
which way the data went, the largest receive window the data receiver announced), an upstream-Linux
stack with those values, and the estimated timelines as the experiment's links and paths.

This is the one builder `compare`, `report`, `tune` and the page use, so the same capture gives the
same experiment everywhere. Where a capture cannot say (a tshark CSV export has no frame lengths),
the value falls back to the model's default and a warning says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from workbench.errors import InputError
from workbench.experiment import (
    Experiment,
    StackProfile,
    WorkloadSpec,
    experiment_from_paths,
    stack_profile,
)

if TYPE_CHECKING:
    from workbench.capture import Capture
    from workbench.timeline import Timelines

__all__ = ["CAPTURE_RCV_BUF_BYTES", "CaptureSettings", "capture_settings", "capture_stack", "timelines_experiment"]

# The receive buffer a capture's replays grant when the capture shows no window (a CSV export without
# the window field): large enough never to limit (Linux autotunes up to tcp_rmem[2]).
CAPTURE_RCV_BUF_BYTES = 32 << 20

_SYN = 0x002
_ACK = 0x010


@dataclass(frozen=True)
class CaptureSettings:
    delivered_bytes: int
    mss_bytes: int | None            # None: not readable (no data segments)
    header_bytes: int | None         # None: not readable (CSV exports carry no frame lengths)
    join_after_ns: int               # client: initial SYN/ACK received -> first MP_JOIN SYN sent
    direction: Literal["down", "up"]  # down = the server sent the data
    warnings: tuple[str, ...] = ()
    rcv_wnd_max_bytes: int | None = None  # the receiver's window limit, when the capture shows one

    def as_dict(self) -> dict[str, Any]:
        return {"delivered_bytes": self.delivered_bytes, "mss_bytes": self.mss_bytes,
                "header_bytes": self.header_bytes, "join_delay_ns": self.join_after_ns,
                "data_dir": "s2c" if self.direction == "down" else "c2s", "rcv_wnd_max_bytes": self.rcv_wnd_max_bytes}


def capture_settings(cap: Capture, conn: int, *, summary: Mapping[str, Any] | None = None) -> CaptureSettings:
    """Read the connection's settings off the capture (see the module docstring). ``summary``: the
    connection's `workbench.metrics.summarize` when the caller has it already (its data direction
    and goodput source are read; made here otherwise)."""
    from workbench.metrics import summarize

    ev = cap.connection(conn)
    s = summary if summary is not None else summarize(ev, conn=conn)
    data_dir = s["data_dir"]
    warnings: list[str] = []
    data = ev.filter((pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
    mss: int | None = int(data["payload_bytes"].max()) if data.height else None  # type: ignore[arg-type]
    header: int | None = None
    if mss is not None and "frame_bytes" in data.columns:
        full = data.filter((pl.col("payload_bytes") == mss) & pl.col("frame_bytes").is_not_null())
        if full.height:
            hdr = (full["frame_bytes"].cast(pl.Int64) - full["payload_bytes"].cast(pl.Int64)).mode().min()
            header = int(hdr) if hdr is not None and int(hdr) > 0 else None  # type: ignore[arg-type]
    if s.get("goodput_source") == "data_ack":
        warnings.append("the capture holds the data sender only: goodput and shares come from its DATA_ACKs "
                        "and paths, the receiver's out-of-order delay is not observable")
    if mss is None:
        warnings.append("MSS not readable from the capture (no data segments): model default used")
    if header is None:
        warnings.append("header bytes per segment not readable from the capture (no frame lengths): "
                        "model default (90 B: IPv4, TCP timestamps, DSS) used")
    # Join delay at the client: from the SYN/ACK it received on subflow 0 to the SYN it sent on
    # subflow 1 (both seen at the client when the client was captured; from the server side the same
    # difference also holds the two paths' delays, so only a client view is used).
    join_ns = 0
    if "flags" in ev.columns:
        hs = ev.filter((pl.col("flags") & _SYN) != 0)
        synack0 = hs.filter((pl.col("subflow") == 0) & ((pl.col("flags") & _ACK) != 0) & (pl.col("point") == "rcv"))
        join_syn = hs.filter((pl.col("subflow") > 0) & ((pl.col("flags") & _ACK) == 0) & (pl.col("point") == "snd")
                             & (pl.col("dir") == "c2s"))
        if synack0.height and join_syn.height:
            join_ns = max(0, int(join_syn["t_ns"].min()) - int(synack0["t_ns"].min()))  # type: ignore[arg-type]
    # The receive window: Linux announces 64 kB in its SYN and grows the window with the data it
    # receives up to scaling ratio x tcp_rmem[2]. A window that reached its largest value in the first
    # half of the transfer and stayed there shows that limit; one still growing at the end says only
    # that the limit is higher (None: the replay's buffer then never limits).
    wnd: int | None = None
    if "rwnd_bytes" in ev.columns:
        acks = ev.filter((pl.col("dir") != data_dir) & pl.col("rwnd_bytes").is_not_null()).sort("t_ns")
        w = acks["rwnd_bytes"].max() if acks.height else None
        if w is not None and int(w) > 0:  # type: ignore[arg-type]
            t_reach = acks.filter(pl.col("rwnd_bytes") >= 0.95 * int(w))["t_ns"].min()  # type: ignore[arg-type]
            t0, t1 = data["t_ns"].min(), data["t_ns"].max()
            if t0 is not None and t1 is not None and int(t_reach) - int(t0) <= (int(t1) - int(t0)) // 2:  # type: ignore[arg-type]
                wnd = int(w)  # type: ignore[arg-type]
    return CaptureSettings(delivered_bytes=int(s["delivered_bytes"] or 0), mss_bytes=mss, header_bytes=header,
                           join_after_ns=join_ns, direction="down" if data_dir == "s2c" else "up",
                           warnings=tuple(warnings), rcv_wnd_max_bytes=wnd)


def capture_stack(settings: CaptureSettings | None, *, congestion_control: str = "cubic",
                  rcv_buf_bytes: int | None = None, send_buf_bytes: int | None = None) -> StackProfile:
    """An upstream-Linux stack with the capture's MSS and header size; ``send_buf_bytes`` None =
    autotuned (SO_SNDBUF not set), as an unmodified application runs; ``rcv_buf_bytes`` None = the
    receive buffer whose window is the largest the capture shows (tcp_rmem[2] = that window over the
    profile's scaling ratio), `CAPTURE_RCV_BUF_BYTES` when the capture shows no window."""
    if rcv_buf_bytes is None:
        wnd = settings.rcv_wnd_max_bytes if settings is not None else None
        ratio = stack_profile("linux-upstream").scaling_ratio
        rcv_buf_bytes = -(-wnd * 1000 // round(ratio * 1000)) if wnd else CAPTURE_RCV_BUF_BYTES
    over: dict[str, Any] = {"congestion_control": congestion_control,
                            "tcp_rmem": (4096, min(131072, rcv_buf_bytes), rcv_buf_bytes)}
    if send_buf_bytes is not None:
        over["tcp_wmem"] = (4096, min(16384, send_buf_bytes), send_buf_bytes)
        over["sndbuf_locked"] = True
    if settings is not None and settings.mss_bytes is not None:
        over["advmss"] = settings.mss_bytes
    if settings is not None and settings.header_bytes is not None:
        over["frame_overhead_bytes"] = settings.header_bytes
    if settings is not None and settings.join_after_ns > 0:
        # the join time the capture shows is what happened: nothing waits on top of it
        over["join_when_established"] = False
    return stack_profile("linux-upstream", **over)


def timelines_experiment(timelines: Timelines, *, workload: WorkloadSpec, scheduler: Any, stack: StackProfile,
                         seed: int = 0, duration_ns: int | None = None, span_ns: int | None = None,
                         join_after_ns: int = 0, direction: Literal["down", "up"] = "down",
                         **fill: Any) -> Experiment:
    """The experiment replaying ``timelines`` (primary path first); ``span_ns`` tiles periodic
    timelines (default: ``duration_ns``); ``fill`` goes to `workbench.timeline.to_path_configs`."""
    from workbench.replay.paths import path_specs
    from workbench.timeline import to_path_configs

    try:
        paths = to_path_configs(timelines, duration_ns=span_ns if span_ns is not None else duration_ns, **fill)
    except InputError:
        raise
    return experiment_from_paths([path_specs(p) for p in paths], workload=workload, scheduler=scheduler,
                                 direction=direction, stack=stack, seed=seed, duration_ns=duration_ns,
                                 join_after_ns=join_after_ns)
