"""Ingest speed of both capture readers (native and tshark), and their correctness against generated
ground truth.

Usage: bench_ingest.py [CAPTURE] [--runs N] [--reader native|tshark|both]

Without CAPTURE, a 400k-packet MPTCP v1 capture is generated once with the shared test data's
capture generator (docs/DATA.md; takes minutes, needs scapy) and cached in .cache/bench/.
Each run reads the capture in a fresh Python process (as a user's command would), so the numbers
include interpreter start and imports ("process") as well as the read itself ("read"); the median
of the runs is printed with the peak RSS of the reading process. When the capture has a
<capture>.truth.npz beside it (the generator writes one), every decoded TCP and DSS field is checked
against it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "bench"
DEFAULT_CAPTURE = CACHE / "mptcp400k.pcap"
GENERATOR = REPO.parent / "shared" / "tools" / "gen_mptcp_capture.py"
READERS = ("native", "tshark")
N_PACKETS = 400_000


def ensure_capture() -> Path:
    if DEFAULT_CAPTURE.exists():
        return DEFAULT_CAPTURE
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"generating {DEFAULT_CAPTURE} ({N_PACKETS} packets, a few minutes) ...", flush=True)
    subprocess.run([sys.executable, str(GENERATOR), str(DEFAULT_CAPTURE), str(N_PACKETS)], check=True)
    return DEFAULT_CAPTURE


def _read(capture: Path, reader: str) -> pl.DataFrame:
    if reader == "native":
        from workbench.capture._native import read_native

        return read_native(capture)[0]
    from workbench.capture._tshark import read_tshark

    return read_tshark(capture)


def read_once(capture: Path, reader: str) -> None:
    """Child process: read the capture, print timing and peak RSS as JSON. The tshark reader's CPU
    time is mostly in the tshark child process, so its RSS and CPU figures cover the Python side."""
    started = time.perf_counter()
    import workbench.capture._native
    import workbench.capture._tshark  # noqa: F401  (imports are timed separately from the read)

    imported = time.perf_counter()
    cpu_before = _cpu_s()
    table = _read(capture, reader)
    done = time.perf_counter()
    cpu_s = _cpu_s() - cpu_before
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(json.dumps({"packets": table.height, "read_s": done - imported, "import_s": imported - started,
                      "read_cpu_s": cpu_s, "peak_rss_mb": peak_rss_mb}))


def _cpu_s() -> float:
    """User + system CPU time of this process: less disturbed than wall time on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(capture: Path, runs: int, reader: str) -> list[dict[str, float]]:
    results = []
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, str(capture), "--once", "--reader", reader], check=True,
                             capture_output=True, text=True, cwd=REPO).stdout
        result = json.loads(out.strip().splitlines()[-1])
        result["process_s"] = time.perf_counter() - started
        results.append(result)
    return results


def check_truth(capture: Path, reader: str) -> str:
    """Compare decoded fields with the generator's per-packet ground truth."""
    truth_path = capture.with_name(capture.name + ".truth.npz")
    if not truth_path.exists():
        return "no ground truth beside the capture: not checked"
    table = _read(capture, reader)
    truth = np.load(truth_path)
    if table.height != truth["seq"].size:
        return f"FAILED: {table.height} rows, ground truth has {truth['seq'].size} packets"
    pairs = {  # column -> (truth array, rows where the truth applies)
        "t_ns": (truth["ts_us"] * 1000, None), "flags": (truth["flags"], None), "seq": (truth["seq"], None),
        "ack": (truth["ack"], None), "win": (truth["win"], None), "payload_len": (truth["plen"], None),
        "opt_ts_val": (truth["tsval"], None), "opt_ts_ecr": (truth["tsecr"], None),
        "dss_dsn": (truth["dsn"], truth["has_dsn"] == 1), "dss_ssn": (truth["ssn"], truth["has_dsn"] == 1),
        "dss_dll": (truth["dll"], truth["has_dsn"] == 1), "dss_data_ack": (truth["dack"], truth["has_dack"] == 1),
    }
    failures = []
    for column, (expected, where) in pairs.items():
        got = table[column].fill_null(0).to_numpy()  # (nulls would make numpy use float64)
        if where is not None:
            present = table[column].is_not_null().to_numpy()
            if not present[where].all() or present[~where].any():
                failures.append(f"{column}: presence differs")
                continue
            got, expected = got[where], expected[where]
        bad = int((got.astype(np.uint64) != expected.astype(np.uint64)).sum())
        if bad:
            failures.append(f"{column}: {bad} wrong")
    return "FAILED: " + "; ".join(failures) if failures else f"all {len(pairs)} checked fields match on every packet"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reader", choices=[*READERS, "both"], default="both")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    capture = args.capture or ensure_capture()
    if args.once:
        read_once(capture, args.reader)
        return
    print(f"capture      {capture} ({capture.stat().st_size / 1e6:.0f} MB)")
    rates = {}
    for reader in READERS if args.reader == "both" else (args.reader,):
        results = run(capture, args.runs, reader)
        read_s = statistics.median(r["read_s"] for r in results)
        process_s = statistics.median(r["process_s"] for r in results)
        packets = int(results[0]["packets"])
        rates[reader] = packets / read_s
        print(f"[{reader}]")
        print(f"  packets    {packets}")
        print(f"  read       {read_s:.3f} s (median of {len(results)})  -> {packets / read_s:,.0f} packets/s")
        print(f"  read CPU   {statistics.median(r['read_cpu_s'] for r in results):.3f} s user+system of this process")
        print(f"  process    {process_s:.3f} s incl. interpreter + imports  -> {packets / process_s:,.0f} packets/s")
        print(f"  peak RSS   {max(r['peak_rss_mb'] for r in results):.0f} MB")
        print(f"  truth      {check_truth(capture, reader)}")
    if len(rates) == 2:
        print(f"native / tshark: {rates['native'] / rates['tshark']:.1f}x")
    print(f"load         {os.getloadavg()[0]:.2f} (1-min load average on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
