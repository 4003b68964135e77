"""Measuring the emulation with the paced UDP probe (`probe.py`): one saturating flow to see the rate
delivered, one light flow (200 small datagrams a second, never queued) to see the delay added, both
per 100 ms bin against what was programmed."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

from workbench.backends._kernel._sys import LineReader
from workbench.backends._kernel.accuracy import delay_bins, link_in_force, rate_bins, read_probe
from workbench.backends._kernel.emulation import Emulation, wait_until

__all__ = ["probe_run"]

PROBE = Path(__file__).with_name("probe.py")
UDP_FRAME_OVERHEAD_BYTES = 14 + 20 + 8   # Ethernet + IPv4 + UDP: what HTB counts besides the payload


def probe_run(emu: Emulation, *, path: int, rate_dir: str, duration_ns: int, bin_ns: int = 100_000_000,
              lead_ns: int = 600_000_000, size_bytes: int = 1400, overdrive: float = 1.25) -> dict[str, Any]:
    """On a built (not started) emulation: a saturating probe in ``rate_dir`` ("down" | "up") on path
    ``path`` (0-based) and a light delay probe the other way, for ``duration_ns``. Returns the rate
    bins of the saturated direction ("rate"), the delay bins of the other one ("delay"), the raw
    receiver records ("rx_rate", "rx_delay"), datagrams sent ("sent"), the changes as applied and the
    emulation's counters ("meta")."""
    plan, net, lab = emu.plans[path], emu.lab.paths[path], emu.lab
    rate_link, delay_link = (plan.down, plan.up) if rate_dir == "down" else (plan.up, plan.down)
    # saturating flow: receiver at the far end of rate_dir
    if rate_dir == "down":
        r_ns, r_addr, s_ns, s_addr = lab.client_ns, net.client_addr, lab.server_ns, net.server_addr
    else:
        r_ns, r_addr, s_ns, s_addr = lab.server_ns, net.server_addr, lab.client_ns, net.client_addr
    t0 = time.time_ns() + lead_ns
    stop = t0 + duration_ns
    until = stop + int(max(delay_link.owd_ns[1]) + max(rate_link.owd_ns[1])) + 1_500_000_000
    out_rate, out_delay = emu.workdir / f"probe-rate-{path}.bin", emu.workdir / f"probe-delay-{path}.bin"
    py = sys.executable
    recv_rate = lab.spawn(r_ns, [py, str(PROBE), "recv", "--bind", r_addr, "--port", "9001", "--out", str(out_rate),
                                 "--until-ns", str(until)])
    recv_delay = lab.spawn(s_ns, [py, str(PROBE), "recv", "--bind", s_addr, "--port", "9002", "--out",
                                  str(out_delay), "--until-ns", str(until)])
    for p in (recv_rate, recv_delay):
        if LineReader(p.stdout).wait_for("ready", 10.0) is None:
            raise RuntimeError("the probe receiver did not start")
    emu.start(t0)
    top = max(rate_link.rate_bps[1]) * overdrive
    sched = ",".join(f"{t}:{v * overdrive}" for t, v in zip(*rate_link.rate_bps, strict=True))
    send_rate = lab.spawn(s_ns, [py, str(PROBE), "send", "--dst", r_addr, "--port", "9001", "--bind", s_addr,
                                 "--rate-bps", str(top), "--schedule", sched, "--size", str(size_bytes),
                                 "--t0-ns", str(t0), "--stop-ns", str(stop)])
    send_delay = lab.spawn(r_ns, [py, str(PROBE), "send", "--dst", s_addr, "--port", "9002", "--bind", r_addr,
                                  "--rate-bps", str(200 * 100 * 8), "--size", "100", "--t0-ns", str(t0),
                                  "--stop-ns", str(stop)])
    sent_out = {"rate": LineReader(send_rate.stdout), "delay": LineReader(send_delay.stdout)}
    for p in (send_rate, send_delay, recv_rate, recv_delay):
        p.wait(timeout=(until - time.time_ns()) / 1e9 + 30)
    sent = {k: int(r.text().split()[-1]) for k, r in sent_out.items()}
    wait_until(until)
    applied = emu.stop()
    rx_rate, rx_delay = read_probe(out_rate), read_probe(out_delay)
    rate_in_force = link_in_force(rate_link.rate_bps, rate_link.owd_ns, name=rate_link.name, emulation=applied)
    _, delay_in_force = link_in_force(delay_link.rate_bps, delay_link.owd_ns, name=delay_link.name, emulation=applied)
    return {
        "rate": rate_bins(rx_rate["t_rx_ns"] - t0, rx_rate["size_bytes"] + UDP_FRAME_OVERHEAD_BYTES,
                          rate_in_force[0], bin_ns=bin_ns, end_ns=duration_ns,
                          owd_ns=rx_rate["t_rx_ns"] - rx_rate["t_tx_ns"], owd=rate_in_force[1]),
        "delay": delay_bins(rx_delay["t_tx_ns"] - t0, rx_delay["t_rx_ns"] - rx_delay["t_tx_ns"], delay_in_force,
                            bin_ns=bin_ns, end_ns=duration_ns),
        "applied": pl.DataFrame(applied["applied"]) if applied["applied"] else pl.DataFrame(),
        "rx_rate": rx_rate, "rx_delay": rx_delay, "sent": sent, "meta": applied,
        "links": {"rate": rate_link.name, "delay": delay_link.name},
    }
