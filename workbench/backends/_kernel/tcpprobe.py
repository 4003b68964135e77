"""The kernel's own TCP state during a lab run, from the ``tcp:tcp_probe`` tracepoint.

Linux fires ``tcp_probe`` on every segment a TCP socket receives in the established state (the
subflows of an MPTCP connection are TCP sockets), before the segment is processed; it carries the
socket's congestion window, slow-start threshold, smoothed RTT, send and receive windows. A lab run
records it in a tracefs instance of its own (``instances/workbench-...``: its own buffer and filter,
so another tracer or a second lab run at the same time does not disturb it), filtered to the lab's
server port, with the monotonic clock; rows are mapped to the capture's subflows by the client's
address and port afterwards (a second lab run uses the same addresses, but not the same ports).

What the model records as SAMPLES and the kernel states here: ``cwnd_segments`` and ``srtt_ns`` of
the data sender, one row per ACK it received (kind ``ack``). The kernel row is taken before the ACK
is processed; the bytes in flight it shows (snd_nxt - snd_una) include SACKed and lost segments, so
``inflight_segments`` and the buffer columns stay empty rather than approximate. The raw table keeps the values as the tracepoint gives them for calibration: snd_una, snd_nxt,
windows, and ``current_ssthresh_segments``, which is tcp_current_ssthresh (the slow-start threshold
during a window reduction, else at least 3/4 of cwnd: it rises with cwnd in congestion avoidance).

No tracefs (not root, no CONFIG_FTRACE, a container without it): the run goes on without the
kernel's state; ``provenance["kernel_state"]`` says why (no number the run shows depends on it).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import polars as pl

from workbench.capture.schema import SAMPLES

__all__ = ["TcpProbe", "probe_samples", "sweep_stale_instances"]

_TRACEFS = Path("/sys/kernel/tracing")
_BUFFER_KB_PER_CPU = 65536  # ~800k events per CPU: a 60 s run at 100 Mbit/s with one ACK per segment
_LINE = re.compile(r"\s(\d+\.\d+): tcp_probe: (.*)$")
_FIELDS = ("src", "dest", "snd_nxt", "snd_una", "snd_cwnd", "ssthresh", "snd_wnd", "srtt", "rcv_wnd")
PROBE_COLUMNS: dict[str, pl.DataType] = {
    "t_ns": pl.Int64(), "local": pl.String(), "remote": pl.String(), "snd_nxt": pl.UInt32(),
    "snd_una": pl.UInt32(), "cwnd_segments": pl.UInt32(), "current_ssthresh_segments": pl.UInt32(),
    "snd_wnd_bytes": pl.UInt32(), "srtt_us": pl.UInt32(), "rcv_wnd_bytes": pl.UInt32(),
}


def _tracefs() -> Path | None:
    """The tracefs mount, mounted here if the kernel has it and nobody did (root)."""
    if (_TRACEFS / "instances").is_dir():
        return _TRACEFS
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(_TRACEFS)], capture_output=True, check=False)
    return _TRACEFS if (_TRACEFS / "instances").is_dir() else None


def sweep_stale_instances() -> int:
    """Remove the tracefs instances of lab runs whose process is gone (killed before its cleanup ran:
    each holds trace buffers); the number removed."""
    root = _TRACEFS / "instances"
    if not root.is_dir():
        return 0
    n = 0
    for d in root.glob("workbench-*-*"):
        pid = d.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                d.rmdir()
                n += 1
    return n


class TcpProbe:
    """``with TcpProbe(port) as probe: ...`` records tcp_probe for sockets on ``port``; ``probe.rows``
    (after the block) is the raw table in wall-clock ns, ``probe.problem`` why there is none."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.rows: pl.DataFrame | None = None
        self.problem: str | None = None
        self._dir: Path | None = None
        self._mono_to_wall_ns = 0

    def __enter__(self) -> TcpProbe:
        root = _tracefs()
        if root is None or not (root / "events" / "tcp" / "tcp_probe").is_dir():
            self.problem = "this kernel has no tcp_probe tracepoint in reach (tracefs)"
            return self
        d = root / "instances" / f"workbench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            d.mkdir()
            self._dir = d
            (d / "buffer_size_kb").write_text(str(_BUFFER_KB_PER_CPU))
            (d / "trace_clock").write_text("mono")
            ev = d / "events" / "tcp" / "tcp_probe"
            (ev / "filter").write_text(f"sport == {self.port} || dport == {self.port}")
            (ev / "enable").write_text("1")
            (d / "tracing_on").write_text("1")
        except OSError as e:
            self.problem = f"tracefs refused the tcp_probe instance ({e.strerror or e})"
            self._remove()
        # trace_clock mono is CLOCK_MONOTONIC; captures use the wall clock
        self._mono_to_wall_ns = time.time_ns() - time.monotonic_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        d = self._dir
        if d is None:
            return
        try:
            (d / "tracing_on").write_text("0")
            if exc[0] is None:
                self.rows = _parse((d / "trace").read_text(errors="replace"), self._mono_to_wall_ns)
                if (d / "per_cpu").is_dir() and _overrun(d):
                    self.problem = "the trace buffer overflowed: the kernel's state is incomplete"
        except OSError as e:
            self.problem = f"could not read the tcp_probe trace ({e.strerror or e})"
        finally:
            self._remove()

    def _remove(self) -> None:
        d, self._dir = self._dir, None
        if d is None:
            return
        with contextlib.suppress(OSError):
            (d / "events" / "tcp" / "tcp_probe" / "enable").write_text("0")
        with contextlib.suppress(OSError):
            d.rmdir()  # tracefs removes the instance and its buffers


def _overrun(d: Path) -> bool:
    for stats in (d / "per_cpu").glob("cpu*/stats"):
        m = re.search(r"^overrun: (\d+)", stats.read_text(), re.M)
        if m and int(m.group(1)):
            return True
    return False


def _parse(text: str, mono_to_wall_ns: int) -> pl.DataFrame:
    cols: dict[str, list[Any]] = {k: [] for k in PROBE_COLUMNS}
    for line in text.splitlines():
        m = _LINE.search(line)
        if m is None:
            continue
        kv = dict(x.split("=", 1) for x in m.group(2).split() if "=" in x)
        if not all(k in kv for k in _FIELDS):
            continue
        sec, _, frac = m.group(1).partition(".")
        cols["t_ns"].append(int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9]) + mono_to_wall_ns)
        cols["local"].append(kv["src"])
        cols["remote"].append(kv["dest"])
        cols["snd_nxt"].append(int(kv["snd_nxt"], 16))
        cols["snd_una"].append(int(kv["snd_una"], 16))
        cols["cwnd_segments"].append(int(kv["snd_cwnd"]))
        cols["current_ssthresh_segments"].append(int(kv["ssthresh"]))
        cols["snd_wnd_bytes"].append(int(kv["snd_wnd"]))
        cols["srtt_us"].append(int(kv["srtt"]))
        cols["rcv_wnd_bytes"].append(int(kv["rcv_wnd"]))
    return pl.DataFrame(cols, schema=PROBE_COLUMNS)


def probe_samples(rows: pl.DataFrame, subflows: pl.DataFrame, *, t0_ns: int, sender: str) -> tuple[pl.DataFrame,
                                                                                                   pl.DataFrame]:
    """SAMPLES rows of the data sender (``sender`` "server" or "client") and the raw probe table with
    ``subflow``/``path``/``side`` and ``t_ns`` from time zero, for the capture's ``subflows`` (conn 0;
    columns subflow, client, server, path). Rows of sockets the capture does not hold are left out."""
    key = subflows.select(pl.col("subflow").cast(pl.UInt32), "path", pl.col("client").alias("c"),
                          pl.col("server").alias("s"))
    # a socket's local address is the client's on the client side, the server's on the server side
    srv = rows.join(key, left_on=["local", "remote"], right_on=["s", "c"]).with_columns(side=pl.lit("server"))
    cli = rows.join(key, left_on=["local", "remote"], right_on=["c", "s"]).with_columns(side=pl.lit("client"))
    raw = pl.concat([srv, cli]).with_columns(pl.col("t_ns") - t0_ns).sort("t_ns", maintain_order=True)
    snd = raw.filter(pl.col("side") == sender)
    n = snd.height
    samples = pl.DataFrame({
        "t_ns": snd["t_ns"], "kind": pl.Series(["ack"] * n), "conn": pl.Series([0] * n),
        "subflow": snd["subflow"], "path": snd["path"], "cwnd_segments": snd["cwnd_segments"],
        "inflight_segments": pl.Series([None] * n), "srtt_ns": snd["srtt_us"].cast(pl.Int64) * 1000,
        "snd_queue_bytes": pl.Series([None] * n), "snd_buf_bytes": pl.Series([None] * n),
        "rcv_ooo_bytes": pl.Series([None] * n), "rcv_buf_bytes": pl.Series([None] * n),
    }).select([pl.col(c).cast(t) for c, t in SAMPLES.items()])
    return samples, raw
