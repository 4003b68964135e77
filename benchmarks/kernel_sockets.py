"""The kernel's socket-memory state during a fidelity configuration: `ss -tmiM` in the client's and
the server's namespace every few milliseconds while the kernel backend runs it.

tcp_probe (the kernel backend's SAMPLES) has the sender's cwnd, ssthresh and srtt per ACK, but not
what the MPTCP socket and its subflows hold: send and receive buffers (skmem tb / rb), memory queued
(w / r), the receiver's autotuning state (rcv_space, rcv_ssthresh, rcv_rtt) or the subflow's
"sndbuf_limited" time. This kernel refuses kprobes, so they are read from outside, as `ss` prints
them: a sample every ``--every-ms`` (each `ss` call itself takes a few ms on 2 cores). A diagnostic
for calibration (docs/FIDELITY.md "Known differences" quotes it), not a test.

    .venv/bin/python benchmarks/kernel_sockets.py buf-1bdp --side client --bulk-s 3
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fidelity import BULK_S, configs, experiment

app = typer.Typer(add_completion=False)

# what is printed per socket: skmem fields, then the `ss -i` fields named here
_SKMEM = ("rb", "r", "tb", "w")
_FIELDS = ("cwnd", "ssthresh", "rcv_space", "rcv_ssthresh", "rcv_rtt", "rtt", "bytes_received", "notsent",
           "sndbuf_limited", "unacked")


def parse_ss(text: str) -> list[dict[str, str]]:
    """One dict per socket of `ss -tmiMH` output: ``kind`` (tcp = a subflow, mptcp = the MPTCP
    socket), ``local`` / ``peer`` addresses, the skmem fields and the fields of ``_FIELDS``."""
    out = []
    for block in re.split(r"\n(?=\S)", text.strip()):
        head = block.split()
        if len(head) < 6 or "skmem:(" not in block:
            continue
        rec = {"kind": head[0], "local": head[4], "peer": head[5]}
        skmem = re.search(r"skmem:\(([^)]*)\)", block)
        if skmem:
            rec |= {k: v for k, v in re.findall(r"([a-z_]+?)(\d+)(?=,|$)", skmem.group(1)) if k in _SKMEM}
        for f in _FIELDS:
            m = re.search(rf"(?<![a-z_]){f}:(\S+)", block)
            if m:
                rec[f] = m.group(1)
        out.append(rec)
    return out


@app.command()
def main(config: Annotated[str, typer.Argument(help="a fidelity configuration (benchmarks/fidelity.py --list)")],
         side: Annotated[str, typer.Option(help="client | server: whose sockets")] = "client",
         bulk_s: Annotated[float, typer.Option(min=0.5, max=60.0, help="seconds of bulk transfer")] = BULK_S,
         seed: int = 0,
         every_ms: Annotated[float, typer.Option(min=1.0, help="sampling period")] = 5.0) -> None:
    """Runs CONFIG on the kernel backend and prints its sockets' memory state over time."""
    cfgs = {c.name: c for c in configs()}
    if config not in cfgs:
        print(f"kernel_sockets: unknown configuration {config!r}; see benchmarks/fidelity.py --list")
        raise typer.Exit(2)
    if side not in ("client", "server"):
        print(f"kernel_sockets: --side must be client or server, not {side!r}")
        raise typer.Exit(2)
    from workbench.backends import get_backend
    from workbench.backends._kernel.labrun import SERVER_PORT

    e = experiment(cfgs[config], seed, bulk_s=bulk_s)
    suffix = "-c" if side == "client" else "-s"
    samples: list[tuple[float, str]] = []
    stop = threading.Event()

    def poll() -> None:
        ns = None
        while not stop.is_set() and ns is None:  # the run's namespaces appear once it starts
            names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
            ns = next((n.split()[0] for n in names if n and n.split()[0].startswith("wbk-")
                       and n.split()[0].endswith(suffix)), None)
            time.sleep(0.002)
        while not stop.is_set() and ns is not None:
            r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tmiMH", f"( sport = :{SERVER_PORT} or dport = :{SERVER_PORT} )"],
                               capture_output=True, text=True).stdout
            if "skmem" in r:
                samples.append((time.monotonic(), r))
            time.sleep(every_ms / 1e3)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    try:
        get_backend("kernel").run(e)
    finally:
        stop.set()
        th.join()
    if not samples:
        print("kernel_sockets: no socket seen (the run's namespaces are named wbk-*)")
        raise typer.Exit(1)
    t0 = samples[0][0]
    for t, text in samples:
        parts = []
        for s in parse_ss(text):
            name = "MPTCP" if s["kind"] == "mptcp" else f"sf {s['peer'] if side == 'server' else s['local']}"
            parts.append(name + " " + " ".join(f"{k}={s[k]}" for k in (*_SKMEM, *_FIELDS) if k in s))
        print(f"{t - t0:6.3f}  " + " | ".join(parts))


if __name__ == "__main__":
    app()
