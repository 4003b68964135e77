"""One lab run, start to end: build the emulated paths, configure MPTCP and the stack, start the
captures and the two endpoints at time zero, step the path schedules, stop everything, load the
capture pair into PacketEvents and measure how well the emulation hit its targets.

`RunPlan` is what the run needs in the kernel's own terms (paths, subflows, one transfer, stack
settings); `workbench.backends._kernel.backend` builds it from an `Experiment`. `run_lab` always
cleans up: every process it started is stopped and every namespace deleted, on success, on error and
on Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from workbench.backends._kernel._sys import LineReader, check_environment, run
from workbench.backends._kernel.accuracy import (
    TARGETS,
    capture_accuracy,
    link_in_force,
    schedule_lag,
    summarize_accuracy,
)
from workbench.backends._kernel.emulation import Emulation, PathPlan, wait_until
from workbench.backends._kernel.shaping import outages
from workbench.backends._kernel.tcpprobe import TcpProbe, probe_samples, sweep_stale_instances
from workbench.backends._kernel.topology import sweep_stale

__all__ = ["LabResult", "RunPlan", "StackPlan", "SubflowPlan", "TransferPlan", "run_lab"]

ENDPOINT = Path(__file__).with_name("endpoint.py")
SNAPLEN = 128
SERVER_PORT = 5201             # the server endpoint's port (the tcp_probe filter follows it)
_LEAD_NS = 400_000_000        # from "everything started" to time zero
_GRACE_NS = 3_000_000_000     # after the planned end: in-flight data, FIN exchange
_LATE_CONNECT_NS = 20_000_000  # a first SYN later than this after time zero is reported (usually 0.2-0.4 ms)


@dataclass(frozen=True)
class SubflowPlan:
    path: int                  # index into RunPlan.paths
    join_ns: int | None = None  # None: the path manager joins as soon as it can
    backup: bool = False


@dataclass(frozen=True)
class TransferPlan:
    direction: str             # "down" (server -> client) | "up"
    size_bytes: int | None = None
    stop_ns: int | None = None  # bulk: the sender stops writing at this time after t0


@dataclass(frozen=True)
class StackPlan:
    congestion_control: str = "cubic"
    tcp_rmem: tuple[int, int, int] = (4096, 131072, 33554432)
    tcp_wmem: tuple[int, int, int] = (4096, 16384, 4194304)
    sndbuf_bytes: int | None = None   # SO_SNDBUF (locks the send buffer), None = autotuned
    sysctls: tuple[tuple[str, str], ...] = ()
    route_options: tuple[tuple[str, str], ...] = ()  # ip route ... initcwnd / rto_min / quickack


@dataclass(frozen=True)
class RunPlan:
    paths: tuple[PathPlan, ...]
    subflows: tuple[SubflowPlan, ...]
    transfer: TransferPlan
    stack: StackPlan = StackPlan()
    seed: int = 0
    duration_ns: int | None = None   # hard cap after t0
    bin_ns: int = 100_000_000


@dataclass
class LabResult:
    """What a run left: the capture pair, PacketEvents (t_ns relative to time zero), the record
    (schedule as applied, drops, accuracy, endpoint reports, wall time) and warnings."""

    workdir: Path
    client_pcap: Path
    server_pcap: Path
    events: pl.DataFrame
    record: dict[str, Any]
    rate_bins: pl.DataFrame
    delay_bins: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    # the kernel's own state of the data sender (SAMPLES: cwnd, srtt per ACK) and the raw tcp_probe
    # rows of both ends (`tcpprobe.probe_samples`); None when the tracepoint was out of reach
    samples: pl.DataFrame | None = None
    probe: pl.DataFrame | None = None

    @property
    def accuracy(self) -> dict[str, Any]:
        return dict(self.record["accuracy"])

    @property
    def emulation_ok(self) -> bool:
        return bool(self.record["accuracy"].get("met", False))


@contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP) end the run like Ctrl-C does: through the clean-up (SIGINT raises
    KeyboardInterrupt even where the parent ignored it). Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, _raise) for s in (signal.SIGTERM, signal.SIGHUP)}
    old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _json_line(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                break
    return {"error": f"no report ({text.strip()[:200]!r})"}


def run_lab(plan: RunPlan, workdir: Path, *, use_netem: bool | None = None) -> LabResult:
    """Run ``plan`` on the real kernel, files in ``workdir`` (created). See the module docstring."""
    check_environment()
    sweep_stale()
    sweep_stale_instances()
    workdir.mkdir(parents=True, exist_ok=True)
    wall0 = time.monotonic()
    with _signals_as_interrupt(), Emulation(plan.paths, workdir=workdir, seed=plan.seed, use_netem=use_netem) as emu:
        rec = _run(plan, emu, workdir)
    rec["wall_s"] = round(time.monotonic() - wall0, 3)
    return _analyse(plan, workdir, rec)


def _run(plan: RunPlan, emu: Emulation, workdir: Path) -> dict[str, Any]:
    lab = emu.lab
    t_build = time.monotonic()
    emu.build()
    first = plan.subflows[0]
    lab.configure_mptcp(initial=first.path + 1,
                        endpoints=[(s.path + 1, s.backup) for s in plan.subflows[1:] if s.join_ns is None],
                        max_subflows=max(len(plan.subflows), 2))
    st = plan.stack
    lab.set_stack(tcp_rmem=st.tcp_rmem, tcp_wmem=st.tcp_wmem, extra=dict(st.sysctls),
                  route_options=dict(st.route_options))
    build_s = time.monotonic() - t_build
    # captures at both ends, on every interface (snaplen 128)
    # (one per interface, Ethernet framing as on the wire, ns timestamps; merged per side at the end)
    dumps = {}
    for side, ns in (("client", lab.client_ns), ("server", lab.server_ns)):
        for net in lab.paths:
            pcap = workdir / f"{side}-{net.host_if}.pcap"
            dumps[(side, pcap)] = lab.spawn(ns, ["tcpdump", "-i", net.host_if, "-s", str(SNAPLEN), "-B", "8192", "-n",
                                                 "-U", "--immediate-mode", "-Z", "root", "--time-stamp-precision=nano",
                                                 "-w", str(pcap), "tcp"])
    dump_err = {key: LineReader(proc.stderr) for key, proc in dumps.items()}
    for (dump_side, dump_file), reader in dump_err.items():
        if reader.wait_for("listening on", 10.0) is None:
            raise RuntimeError(f"tcpdump ({dump_side}, {dump_file.name}) did not start: {reader.text(wait_s=0)[:300]}")
    net0 = lab.paths[first.path]
    down = plan.transfer.direction == "down"
    common = ["--port", str(SERVER_PORT), "--cc", st.congestion_control, "--label", str(workdir)]
    if st.sndbuf_bytes:
        common += ["--sndbuf", str(st.sndbuf_bytes)]
    size = ["--size", str(plan.transfer.size_bytes)] if plan.transfer.size_bytes is not None else []
    probe = TcpProbe(SERVER_PORT)
    with probe:  # the kernel's own cwnd / RTT while the endpoints run
        py = sys.executable
        server = lab.spawn(lab.server_ns, [py, str(ENDPOINT), "server", "--role", "send" if down else "recv",
                                           *common, *(size if down else [])], stdin=subprocess.PIPE)
        client = lab.spawn(lab.client_ns, [py, str(ENDPOINT), "client", "--connect", net0.server_addr, "--bind",
                                           net0.client_addr, "--role", "recv" if down else "send",
                                           *common, *([] if down else size)], stdin=subprocess.PIPE)
        outs = {"client": (client, LineReader(client.stdout), LineReader(client.stderr)),
                "server": (server, LineReader(server.stdout), LineReader(server.stderr))}
        for side, (_, out, err) in outs.items():
            if out.wait_for("ready", 20.0) is None:
                raise RuntimeError(f"the MPTCP {side} did not start: {err.text(wait_s=0)[-300:]}")
        # time zero: everything is up; the delay lines and the scheduler get it first
        t0 = time.time_ns() + _LEAD_NS
        if plan.duration_ns is not None:
            deadline = t0 + plan.duration_ns + _GRACE_NS
        elif plan.transfer.stop_ns is not None:
            deadline = t0 + plan.transfer.stop_ns + 4 * _GRACE_NS
        else:
            deadline = t0 + 60_000_000_000
        stop_at = t0 + plan.transfer.stop_ns if plan.transfer.stop_ns is not None else None
        if plan.transfer.stop_ns is None and plan.transfer.size_bytes is None and plan.duration_ns is not None:
            stop_at = t0 + plan.duration_ns  # endless bulk: stop writing at the time cap
        joins = [(s.join_ns, f"subflow-{i}", "endpoint", float(s.path + 1),
                  (lambda idx=s.path + 1, b=s.backup: lab.add_endpoint(idx, backup=b)))
                 for i, s in enumerate(plan.subflows) if i > 0 and s.join_ns is not None]
        emu.start(t0, extra=joins)
        go = f"GO {t0} {stop_at if stop_at is not None else '-'} {deadline}\n"
        for p, _, _ in outs.values():
            assert p.stdin is not None
            p.stdin.write(go)
            p.stdin.flush()
        reports = {}
        for side, (p, out, err) in outs.items():
            try:
                p.wait(timeout=max((deadline - time.time_ns()) / 1e9, 0) + 5)
            except subprocess.TimeoutExpired:
                lab.stop(p)
            text = err.text().strip()
            reports[side] = _json_line(out.text()) | ({"stderr": text[-300:]} if text else {})
    t_end = time.time_ns()
    wait_until(t_end + 300_000_000)  # the last ACKs reach the captures
    capture_drops: dict[str, int] = {}
    for (side, f), p in dumps.items():
        lab.stop(p, sig=signal.SIGINT)
        m = re.search(r"(\d+) packets? dropped by kernel", dump_err[(side, f)].text())
        capture_drops[side] = capture_drops.get(side, 0) + (int(m.group(1)) if m else 0)
    for side in ("client", "server"):
        parts = [str(f) for (sd, f) in dumps if sd == side]
        run(["mergecap", "-F", "nsecpcap", "-w", str(workdir / f"{side}.pcap"), *parts])
        for part in parts:
            Path(part).unlink()
    emulation = emu.stop()
    return {"t0_ns": t0, "end_ns": t_end - t0, "build_s": round(build_s, 3), "endpoints": reports,
            "capture_drops": capture_drops, "emulation": emulation, "delay_mode": emu.delay_mode,
            "namespaces": lab.namespaces, "probe_rows": probe.rows, "probe_problem": probe.problem,
            "addresses": {p.name: {"client": p.client_addr, "server": p.server_addr} for p in lab.paths}}


def late_connect_ns(events: pl.DataFrame) -> int | None:
    """When the client's first SYN left, ns after time zero (``events`` relative to it); None without one."""
    syn = events.filter(((pl.col("flags").cast(pl.Int64) & 0x2) != 0) & (pl.col("dir") == "c2s")
                        & (pl.col("point") == "snd"))
    return int(syn["t_ns"].min()) if syn.height else None  # type: ignore[arg-type]


def _analyse(plan: RunPlan, workdir: Path, rec: dict[str, Any]) -> LabResult:
    from workbench.capture import load
    warnings: list[str] = []
    probe_rows: pl.DataFrame | None = rec.pop("probe_rows", None)
    probe_problem: str | None = rec.pop("probe_problem", None)
    samples = raw = None
    client_pcap, server_pcap = workdir / "client.pcap", workdir / "server.pcap"
    path_names = {a["client"]: name for name, a in rec["addresses"].items()}
    cap = load(client_pcap, peer=server_pcap, path_names=path_names, use_cache=False)
    warnings += cap.warnings
    t0 = rec["t0_ns"]
    events = cap.events.with_columns(pl.col("t_ns") - t0)
    if cap.connections.height:
        conn = cap.main_connection
        events = events.filter(pl.col("conn") == conn).with_columns(conn=pl.lit(0, dtype=pl.UInt32))
        sfs = cap.subflows.filter(pl.col("conn") == conn)
        rec["subflows"] = [{"subflow": int(r["subflow"]), "path": r["path"], "join": bool(r["join"]),
                            "start_ns": int(r["start_ns"]) - t0 if r["start_ns"] is not None else None,
                            "bytes": int(r["bytes"] or 0)} for r in sfs.iter_rows(named=True)]
        if probe_rows is not None:
            samples, raw = probe_samples(probe_rows, sfs, t0_ns=t0,
                                         sender="server" if plan.transfer.direction == "down" else "client")
            if not samples.height:
                probe_problem = probe_problem or "tcp_probe recorded no ACK of this run's sender"
    # not a warning: no number the run shows depends on it; the record and the provenance say it
    rec["probe"] = probe_problem or "recorded"
    # accuracy: rate and delay in force per path and direction (s2c = down link)
    emu = rec["emulation"]
    links = {(p.name, d): link_in_force(lk.rate_bps, lk.owd_ns, name=lk.name, emulation=emu)
             for p in plan.paths for d, lk in (("s2c", p.down), ("c2s", p.up))}
    end = min(rec["end_ns"], plan.duration_ns or rec["end_ns"])
    rate, delay = capture_accuracy(events, links, end_ns=end, bin_ns=plan.bin_ns)
    acc = summarize_accuracy(rate, delay) | schedule_lag(emu["applied"])
    missed = []
    if acc.get("rate_err_p50") is not None and acc["rate_err_p50"] > TARGETS["rate_err_p50"]:
        missed.append(f"rate error p50 {100 * acc['rate_err_p50']:.2f} % > {100 * TARGETS['rate_err_p50']:.0f} %")
    if acc.get("delay_err_p50_ms") is not None and acc["delay_err_p50_ms"] > TARGETS["delay_err_p50_ms"]:
        missed.append(f"delay error p50 {acc['delay_err_p50_ms']:.3f} ms > {TARGETS['delay_err_p50_ms']} ms")
    if not acc["rate_bins"]:
        warnings.append("emulation accuracy: no saturated 100 ms bin, the rate could not be checked")
    if not acc["delay_bins"]:
        warnings.append("emulation accuracy: no low-queue 100 ms bin, the delay could not be checked")
    acc["met"] = not missed
    acc["targets"] = dict(TARGETS)
    if missed:
        warnings.append("EMULATION MISSED ITS TARGETS: " + "; ".join(missed) + " — kernel results may not reflect "
                        "the programmed paths")
    rec["accuracy"] = acc
    if emu["delay_mode"] == "netem" and any(outages(lk.rate_bps) for p in plan.paths for lk in (p.down, p.up)):
        warnings.append("zero capacity is emulated as HTB at 8 kbit/s under netem: a frame let through during an "
                        "outage can keep the path blocked up to 1.5 s after it ends")
    # what else makes the numbers less trustworthy
    for side, r in rec["endpoints"].items():
        if r.get("error"):
            warnings.append(f"{side} endpoint: {r['error']}")
        if r.get("deadline_hit"):
            warnings.append(f"{side} endpoint: the transfer did not finish before the time cap")
    for side, n in rec["capture_drops"].items():
        if n:
            warnings.append(f"{side} capture: tcpdump dropped {n} packets")
    for name, lk in emu["links"].items():
        for k in ("overflow", "send_errors", "oversize"):
            if lk.get(k):
                warnings.append(f"delay line {name}: {lk[k]} frames {k.replace('_', ' ')}")
        if lk.get("realtime") is False:
            warnings.append(f"delay line {name}: no real-time priority (delays less exact under load)")
    warnings += [f"schedule: {e}" for e in emu["schedule_errors"]]
    late = late_connect_ns(events)
    if late is not None and late > _LATE_CONNECT_NS:
        warnings.append(f"the client connected {late / 1e6:.0f} ms after time zero (a busy machine delayed the "
                        "endpoint): the transfer met the paths' schedule that much later than a replay does")
    # bottleneck drops: the FIFO's, plus frames the delay line dropped while an outage held the buffer full
    rec["drops"] = {name: (lk.get("fifo_drops", lk.get("qdisc_drops")) or 0) + (lk.get("hold_drops") or 0)
                    for name, lk in emu["links"].items()}
    rec["warnings"] = warnings
    if raw is not None:
        rec["probe_row_count"] = raw.height
        raw.write_parquet(workdir / "tcp_probe.parquet")
    return LabResult(workdir, client_pcap, server_pcap, events, rec, rate, delay, warnings, samples=samples,
                     probe=raw)
