"""Resource bounds: before a capture is read, the workbench estimates the peak memory of its analysis
from the input size (`workbench.capture._memory`, coefficients measured by
benchmarks/bench_memory.py) and refuses with one line and exit code 2 when the machine does not
have that much available; the same command runs when it does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.capture import load
from workbench.capture._memory import available_bytes, check_fits, estimate_peak_bytes
from workbench.errors import InputError

TRACES = Path(__file__).resolve().parents[1] / "traces"
CAPTURE = TRACES / "fixtures" / "tests_mptcp-v0.pcap"
PAIR = (TRACES / "lab" / "c07" / "client.pcap", TRACES / "lab" / "c07" / "server.pcap")
WB = [sys.executable, "-c", "from workbench.cli import main; main()"]


def test_estimate_grows_with_input_and_covers_measured_peaks() -> None:
    # Peaks measured by benchmarks/bench_memory.py (lab/c05/client.pcap cuts): inspect, report,
    # compare at 6.61 MiB of input peaked at 201, 253 and 254 MiB.
    assert estimate_peak_bytes(int(6.61 * 2**20)) > 254 * 2**20
    assert estimate_peak_bytes(2 * 2**20) > 209 * 2**20
    assert estimate_peak_bytes(10 * 2**20) > estimate_peak_bytes(2**20) > estimate_peak_bytes(0)


def test_available_memory_follows_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_MEMORY_LIMIT_MB", "64")
    assert available_bytes() == 64 * 2**20
    monkeypatch.setenv("WORKBENCH_MEMORY_LIMIT_MB", "lots")
    with pytest.raises(InputError, match="WORKBENCH_MEMORY_LIMIT_MB"):
        available_bytes()


def test_refused_before_reading(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    need = estimate_peak_bytes(CAPTURE.stat().st_size)
    monkeypatch.setenv("WORKBENCH_MEMORY_LIMIT_MB", str((need - 2**20) / 2**20))  # 1 MiB short
    with pytest.raises(InputError) as e:
        load(CAPTURE)
    assert str(e.value).startswith(str(CAPTURE)) and "memory" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "cache").exists()  # refused before anything was read or cached
    monkeypatch.setenv("WORKBENCH_MEMORY_LIMIT_MB", str((need + 2**20) / 2**20))  # 1 MiB to spare
    assert load(CAPTURE).events.height > 0


def test_a_pair_counts_both_files(monkeypatch: pytest.MonkeyPatch) -> None:
    one = estimate_peak_bytes(PAIR[0].stat().st_size)
    both = estimate_peak_bytes(PAIR[0].stat().st_size + PAIR[1].stat().st_size)
    monkeypatch.setenv("WORKBENCH_MEMORY_LIMIT_MB", str((one + both) / 2 / 2**20))
    check_fits([PAIR[0]])  # the capture alone fits
    with pytest.raises(InputError, match="in 2 files"):
        check_fits(list(PAIR))


@pytest.mark.slow
@pytest.mark.parametrize("command", [["inspect"], ["compare"], ["report", "--schedulers", "minrtt", "-o", "{out}"]])
def test_cli_refuses_with_one_line_and_exit_2(command: list[str], tmp_path: Path) -> None:
    env = os.environ | {"WORKBENCH_MEMORY_LIMIT_MB": "1", "WORKBENCH_CACHE": str(tmp_path / "cache")}
    argv = [*WB, command[0], str(CAPTURE), *(c.format(out=tmp_path / "out") for c in command[1:])]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if command[0] == "report":
        # A batch reports a refused input as its error row (exit 1), the others go on.
        assert r.returncode == 1
        assert "GB of memory" in (tmp_path / "out" / "index.html").read_text()
        return
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "GB of memory" in lines[0] and str(CAPTURE) in lines[0], r.stderr
