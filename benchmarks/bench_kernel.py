"""The kernel backend: wall time per lab run, the emulation's own error figures, and the model and
the kernel side by side on the same experiments (two constant paths; rate and delay traces; each as a
download and an upload). Needs root and an MPTCP kernel.

    .venv/bin/python benchmarks/bench_kernel.py [--seconds 3] [--runs 1]

Prints, per run: wall time of the kernel run (set-up, transfer, tear-down, capture loading), the
emulation accuracy (median / p95 of the per-100 ms-bin rate error while saturated and delay error at
low queue), and the headline metrics of the model (scheduler "upstream") and of the kernel
(the upstream default scheduler) with their difference. The machine's load is printed too: the
delay line is a user-space process, so a busy machine shows in its figures.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

CONSTANT = """
duration_s: {dur}
scheduler: upstream
paths:
  - {{name: wifi, rate_mbps: 30, owd_ms: 10, buffer_packets: 50}}
  - {{name: lte, rate_mbps: 10, owd_ms: 40, buffer_packets: 500}}
workload: {{bulk: {{stop_s: {stop}}}}}
"""
TRACES = """
duration_s: {dur}
scheduler: upstream
paths:
  - {{name: wifi, rate_mbps: [[0, 20], [0.8, 8], [1.6, 25], [2.4, 15]], owd_ms: 10, buffer_packets: 60}}
  - {{name: lte, rate_mbps: 12, owd_ms: [[0, 30], [1.5, 60], [2.5, 20]], buffer_bytes: 300000}}
workload: {{bulk: {{stop_s: {stop}}}}}
"""
METRICS = ("goodput_mbps", "share_wifi", "share_lte", "ooo_p50_ms", "ooo_p95_ms", "rtt_p50_ms_wifi", "rtt_p50_ms_lte",
           "retrans")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0, help="bulk transfer length")
    ap.add_argument("--runs", type=int, default=1, help="kernel runs per case")
    a = ap.parse_args()
    from workbench.backends import get_backend
    from workbench.metrics import summarize
    from workbench.scenario import load_scenario

    print(f"kernel {os.uname().release}, load average {os.getloadavg()}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-kernel-"))
    kernel, model = get_backend("kernel"), get_backend("model")
    for name, text in (("constant", CONSTANT), ("traces", TRACES)):
        f = tmp / f"{name}.yaml"
        f.write_text(text.format(dur=a.seconds + 2, stop=a.seconds))
        for direction in ("down", "up"):
            sc = load_scenario(f)
            sc.direction = direction
            e = sc.to_experiment("upstream")
            m_model = summarize(model.run(e).events)
            for i in range(a.runs):
                w0 = time.monotonic()
                run = kernel.run(e, workdir=tmp / f"{name}-{direction}-{i}")
                m_kernel = summarize(run.events)
                wall = time.monotonic() - w0
                acc = run.provenance["accuracy"]
                print(f"\n{name} {direction} #{i}: kernel run wall {wall:.1f} s (lab part {run.provenance['wall_s']:.1f} s,"
                      f" delay by {run.provenance['delay_mode']}), load {os.getloadavg()[0]:.1f}")
                print(f"  emulation: rate error p50 {100 * acc.get('rate_err_p50', float('nan')):.3f} % "
                      f"p95 {100 * acc.get('rate_err_p95', float('nan')):.2f} % over {acc['rate_bins']} bins; "
                      f"delay error p50 {acc.get('delay_err_p50_ms', float('nan')):.3f} ms "
                      f"p95 {acc.get('delay_err_p95_ms', float('nan')):.3f} ms over {acc['delay_bins']} bins; "
                      f"targets {'met' if acc['met'] else 'MISSED'}")
                print(f"  {'metric':18} {'model':>10} {'kernel':>10} {'diff':>9}")
                for k in METRICS:
                    mv, kv = m_model.get(k), m_kernel.get(k)
                    diff = (f"{100 * (kv - mv) / mv:+.1f}%" if isinstance(mv, int | float) and isinstance(kv, int | float)
                            and mv else "–")
                    print(f"  {k:18} {mv if mv is None else round(mv, 3):>10} {kv if kv is None else round(kv, 3):>10} "
                          f"{diff:>9}")


if __name__ == "__main__":
    main()
