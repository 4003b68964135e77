"""Will a capture fit in memory? An estimate of the peak memory a full analysis (read, streams,
connections, PacketEvents, metrics, replays of the report) needs for a capture of a given size,
and a refusal, before anything is read, when the machine does not have that much available.

The estimate is linear in the input size, with coefficients measured by
``benchmarks/bench_memory.py`` (peak RSS of inspect, report and compare on captures of 0.25 to 4 MiB
and more) and rounded up so that the estimate stays above every measured peak. The memory
available is the smallest of the kernel's MemAvailable, the cgroup's limit minus its usage, and
``WORKBENCH_MEMORY_LIMIT_MB`` when set (to share a machine, or to test the refusal).
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import InputError

__all__ = ["available_bytes", "check_fits", "estimate_peak_bytes"]

# Measured (benchmarks/bench_memory.py on lab/c05/client.pcap cut to 0.5, 2 and 6.6 MB; headers
# only, 120 bytes per packet, the most packets per byte): peak RSS = 119-192 MiB (interpreter,
# imports, report pages) + 9-15 bytes per input byte (inspect 12, report 9, compare 15). Taken with a
# margin for smaller records (down to 70 bytes per packet) and for a capture loaded with its peer.
_BASE_BYTES = 300 << 20
_BYTES_PER_INPUT_BYTE = 40


def estimate_peak_bytes(input_bytes: int) -> int:
    """Estimated peak memory of analysing inputs of `input_bytes` in total (pcap, pcapng or tshark
    CSV exports, which hold about as many bytes per packet as a headers-only capture)."""
    return _BASE_BYTES + _BYTES_PER_INPUT_BYTE * max(input_bytes, 0)


def _cgroup_free() -> int | None:
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        return max(int(limit) - used, 0)
    except (OSError, ValueError):
        return None


def available_bytes() -> int | None:
    """Memory this process may still use, or None when it cannot be told."""
    found: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    cg = _cgroup_free()
    if cg is not None:
        found.append(cg)
    env = os.environ.get("WORKBENCH_MEMORY_LIMIT_MB")
    if env:
        try:
            found.append(int(float(env) * 2**20))
        except ValueError:
            raise InputError(None, f"WORKBENCH_MEMORY_LIMIT_MB must be a number of MB, not {env!r}") from None
    return min(found) if found else None


def check_fits(paths: list[Path]) -> None:
    """Refuse (InputError, one line naming the first input) when analysing `paths` together would
    need more memory than is available."""
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except OSError:
            return  # the reader reports a missing or unreadable file itself
    need = estimate_peak_bytes(total)
    have = available_bytes()
    if have is not None and need > have:
        what = f"{total / 2**20:.0f} MB of input" + (f" in {len(paths)} files" if len(paths) > 1 else "")
        raise InputError(paths[0], f"needs about {need / 2**30:.1f} GB of memory to analyse ({what}), "
                                   f"and {have / 2**30:.1f} GB is available: refused before running out of "
                                   "memory (cut the capture, e.g. with editcap, or use a bigger machine)")
