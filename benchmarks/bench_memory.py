"""Peak memory (RSS) per input size of `workbench inspect`, `workbench report` (one scheduler) and
`workbench compare` (estimate the capture's timelines and replay them), and the memory estimate the
workbench uses to refuse a capture before a run would exceed the machine's memory
(`workbench.capture._memory`): it must stay above every measured peak.

Usage: bench_memory.py [CAPTURE] [--sizes-mb 0.25,0.5,1,2,4] [--commands inspect,report,compare]

The inputs are the first N MB (whole records) of CAPTURE, a classic pcap (default: the lab capture
../shared/traces/lab/c05/client.pcap: 6.9 MB, headers only, about 120 bytes per packet,
the most packets per byte and so the most memory per byte). Each command runs in a fresh process with an empty parse
cache; its peak RSS comes from wait4(). Prints one row per size and command, and the fitted
bytes of peak RSS per input byte above the interpreter's own.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEFAULT = REPO.parent / "shared" / "traces" / "lab" / "c05" / "client.pcap"


def cut_capture(src: Path, size_bytes: int, dst: Path) -> int:
    """The first records of `src` up to `size_bytes`; returns the size written."""
    from benchmarks.fuzz.mutate import pcap_records

    data = src.read_bytes()
    _head, recs, _ = pcap_records(data)
    end = 24
    for off, ln in recs:
        if off + ln > size_bytes:
            break
        end = off + ln
    dst.write_bytes(data[:end])
    return end


def peak_rss(argv: list[str], env: dict[str, str]) -> tuple[int, float, int]:
    """(peak RSS bytes, wall s, exit code) of one command in a fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024, wall, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--sizes-mb", default="0.25,0.5,1,2,4")
    ap.add_argument("--commands", default="inspect,report,compare")
    a = ap.parse_args()
    from workbench.capture._memory import estimate_peak_bytes

    wb = [sys.executable, "-c", "from workbench.cli import main; main()"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="wb-bench-mem-") as tmp:
        t = Path(tmp)
        base_rss, _, _ = peak_rss([*wb, "--help"], os.environ | {"POLARS_MAX_THREADS": "1"})
        print(f"interpreter + imports (workbench --help): {base_rss / 2**20:.0f} MiB")
        print(f"{'command':8s} {'input MiB':>9s} {'packets':>8s} {'peak MiB':>9s} {'est. MiB':>9s} {'wall s':>7s}")
        seen: set[int] = set()
        for mb in (float(x) for x in a.sizes_mb.split(",")):
            f = t / f"in-{mb:g}.pcap"
            size = cut_capture(a.capture, int(mb * 2**20), f)
            if size in seen:
                continue
            seen.add(size)
            from benchmarks.fuzz.mutate import pcap_records

            n_packets = len(pcap_records(f.read_bytes())[1])
            for cmd in a.commands.split(","):
                env = os.environ | {"WORKBENCH_CACHE": str(t / f"cache-{cmd}-{mb}"), "POLARS_MAX_THREADS": "1"}
                argv = {"inspect": [*wb, "inspect", str(f)],
                        "report": [*wb, "report", str(f), "-o", str(t / f"rep-{mb}"), "--schedulers", "minrtt",
                                   "--jobs", "1", "--no-progress", "--no-baselines"],
                        "compare": [*wb, "compare", str(f)]}[cmd]
                rss, wall, code = peak_rss(argv, env)
                est = estimate_peak_bytes(size)
                rows.append((cmd, size, rss))
                flag = "" if code == 0 else f"  (exit {code})"
                print(f"{cmd:8s} {size / 2**20:9.2f} {n_packets:8d} {rss / 2**20:9.0f} {est / 2**20:9.0f} {wall:7.1f}"
                      f"{'  ESTIMATE BELOW PEAK' if est < rss else ''}{flag}", flush=True)
    for cmd in a.commands.split(","):
        pts = [(s, r) for c, s, r in rows if c == cmd]
        if len(pts) >= 2:
            (s0, r0), (s1, r1) = min(pts), max(pts)
            slope = (r1 - r0) / (s1 - s0) if s1 != s0 else float("nan")
            print(f"{cmd}: about {slope:.0f} bytes of peak RSS per input byte above "
                  f"{(r0 - slope * s0) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
