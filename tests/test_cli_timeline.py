"""`workbench timeline`: every kind of input recognised from its content, saved timelines that load
back equal, the HTML figure, and clean errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import SHARED_TRACES, require

from workbench.timeline import load_timelines, open_timelines, sniff_timeline_input

SHARED = SHARED_TRACES
TL = SHARED / "timelines"
require(TL, SHARED / "lab", SHARED / "hsr-mptcp")
WORKBENCH = Path(sys.executable).with_name("workbench")


@pytest.mark.parametrize(("path", "kind"), [
    (SHARED / "lab" / "c07" / "client.pcap", "capture"),
    (SHARED / "hsr-mptcp" / "client.1529185491.lia.laptop3.M.D1024.wlan12.U4.pcap.csv", "csv-export"),
    (TL / "mahimahi" / "TMobile-LTE-short.down", "mahimahi"),
    (TL / "nuwins-ping" / "atnt" / "101830443_ping_102242676.out", "ping"),
    (TL / "5gophers" / "car-driving-trace-1.csv", "multipath-csv"),
    (TL / "oboe" / "oboe_trace_0.txt", "rate-csv"),
    (SHARED / "lab" / "v01" / "rate1.csv", "rate-csv"),
])
def test_sniff(path: Path, kind: str) -> None:
    assert sniff_timeline_input(path) == kind


def test_mahimahi_directions_are_one_path() -> None:
    down, up = TL / "mahimahi" / "TMobile-LTE-short.down", TL / "mahimahi" / "TMobile-LTE-short.up"
    tls = open_timelines([down, up])
    assert list(tls) == ["TMobile-LTE-short"]
    path = tls["TMobile-LTE-short"]
    # Every line is one 1500-byte opportunity; both directions are there. The up trace is the
    # longer one (140000 ms); the down trace (139986 ms) wraps to fill the same span, so it carries
    # its own bytes plus the first 14 ms of itself again.
    up_lines, down_ms = up.read_text().split(), [int(x) for x in down.read_text().split()]
    assert path.total_bytes("up") == 1500 * len(up_lines)
    # (timestamps fold modulo the period: an opportunity at ms 139986 is one at ms 0)
    assert path.total_bytes("down") == 1500 * (len(down_ms) + sum(1 for t in down_ms if t % 139986 < 14))


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_DEBUG"}
    return subprocess.run([str(WORKBENCH), *map(str, args)], capture_output=True, text=True, timeout=300, env=env)


def test_timeline_from_pair_saves_loads_and_draws(tmp_path: Path) -> None:
    lab = SHARED / "lab" / "c07"
    out, html = tmp_path / "c07.json", tmp_path / "c07.html"
    r = _run("timeline", lab / "client.pcap", "--peer", lab / "server.pcap", "--path", "10.0.1.1=wifi",
             "--path", "10.0.2.1=lte", "-o", out, "--html", html)
    assert r.returncode == 0, r.stderr
    tls = load_timelines(out)
    truth = json.loads((lab / "results.json").read_text())["configured"]
    assert list(tls) == ["wifi", "lte"]
    assert tls["wifi"].mean("owd_down_ns") / 1e6 == pytest.approx(truth["path1"]["one_way_delay_ms"], abs=1)
    assert tls["lte"].mean("owd_up_ns") / 1e6 == pytest.approx(truth["path2"]["one_way_delay_ms"], abs=1)
    page = html.read_text()
    # Self-contained, works offline: plotly.js inline, no script fetched from elsewhere.
    assert "Plotly.newPlot" in page and '<script src="http' not in page and len(page) > 1_000_000
    assert oct(html.stat().st_mode & 0o777) != oct(0o600)


def test_timeline_bad_inputs(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01\x02 not anything")
    r = _run("timeline", junk, "-o", tmp_path / "x.parquet")
    assert r.returncode == 2 and "junk.bin" in r.stderr and "Traceback" not in r.stderr
    r = _run("timeline", SHARED / "lab" / "v01" / "rate1.csv", "-o", tmp_path / "x.txt")
    assert r.returncode == 2 and ".parquet, .csv or .json" in r.stderr
    r = _run("timeline", SHARED / "lab" / "v01" / "rate1.csv", "-o", tmp_path / "x.parquet", "--bin", "fast")
    assert r.returncode == 2 and "not a duration" in r.stderr
    assert not (tmp_path / "x.parquet").exists()  # nothing half-written
