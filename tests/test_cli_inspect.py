"""`workbench inspect` as a user runs it: the installed console script in a subprocess, its exit code,
its one-line errors on bad input, its JSON, and what it warns about."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import SHARED_TRACES, needs

SHARED = SHARED_TRACES
LAB = SHARED / "lab"
needs_data = needs(LAB, SHARED / "hsr-mptcp", SHARED / "pair", SHARED / "fixtures")
WORKBENCH = Path(sys.executable).with_name("workbench")


def run(*args: str | Path, tmp_path: Path, env_path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKBENCH_CACHE": str(tmp_path / "cache")}
    env.pop("WORKBENCH_DEBUG", None)
    if env_path is not None:
        env["PATH"] = env_path
    return subprocess.run([str(WORKBENCH), *map(str, args)], capture_output=True, text=True, env=env, timeout=300)


def _pcap(linktype: int, packets: list[bytes]) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    for i, p in enumerate(packets):
        out += struct.pack("<IIII", 1_700_000_000 + i, 0, len(p), len(p)) + p
    return out


def _udp_frame() -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, 64, 17, 0, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    return b"\x00" * 12 + b"\x08\x00" + ip + struct.pack("!HHHH", 1, 2, 8, 0)


def assert_clean_error(r: subprocess.CompletedProcess[str], name: str, problem: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert name in lines[0] and problem in lines[0], lines[0]
    assert "Traceback" not in r.stderr + r.stdout


@needs_data
def test_lab_pair_json(tmp_path: Path) -> None:
    r = run("inspect", LAB / "c01" / "client.pcap", "--peer", LAB / "c01" / "server.pcap",
            "--path", "10.0.1.1=wifi", "--path", "10.0.2.1=lte", "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    truth = json.loads((LAB / "c01" / "results.json").read_text())
    assert [s["path"] for s in doc["detail"]["subflows"]] == ["wifi", "lte"]
    assert doc["detail"]["metrics"]["goodput_mbps"] == pytest.approx(truth["client"]["goodput_mbps"], rel=0.02)
    owd = {(o["path"], o["dir"]): o["min_ms"] for o in doc["detail"]["owd"]}
    assert owd[("lte", "s2c")] == pytest.approx(40.0, abs=0.5)
    assert doc["detail"]["metrics"]["ooo_p95_ms"] > doc["detail"]["metrics"]["ooo_p50_ms"] >= 0


@needs_data
def test_human_output_names_paths_and_metrics(tmp_path: Path) -> None:
    r = run("inspect", LAB / "c07" / "client.pcap", "--path", "10.0.2.1=lte", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "lte" in r.stdout and "10.0.1.1" in r.stdout
    assert "out-of-order delay" in r.stdout and "goodput" in r.stdout


@needs_data
def test_csv_export_finds_its_partner_file(tmp_path: Path) -> None:
    one = SHARED / "hsr-mptcp" / "client.1529185491.lia.laptop3.M.D1024.wlan12.U4.pcap.csv"
    r = run("inspect", one, "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["detail"]["subflows"]) == 2
    # D1024: a 1 MiB download (plus the HTTP response header) arrives in order.
    assert doc["detail"]["metrics"]["delivered_bytes"] >= 1024 * 1000


@needs_data
def test_plain_tcp_capture_is_single_path(tmp_path: Path) -> None:
    r = run("inspect", SHARED / "pair" / "client_1_tcp_only.pcap", "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert all(c["kind"] == "tcp" for c in doc["connections"])
    assert "plain TCP" in doc["detail"]["ooo_note"]


@pytest.mark.parametrize(("content", "problem"), [
    (b"hello, not a capture\n", "not a pcap or pcapng capture"),
    (b"", "empty file"),
    (b"\xd4\xc3\xb2\xa1\x02\x00", "truncated"),
    (_pcap(1, [_udp_frame()]), "no TCP packets"),
])
def test_bad_input_is_one_line(tmp_path: Path, content: bytes, problem: str) -> None:
    f = tmp_path / "input.pcap"
    f.write_bytes(content)
    assert_clean_error(run("inspect", f, tmp_path=tmp_path), "input.pcap", problem)


def test_missing_file(tmp_path: Path) -> None:
    assert_clean_error(run("inspect", tmp_path / "nope.pcap", tmp_path=tmp_path), "nope.pcap", "no such file")


def test_unknown_link_type_without_tshark(tmp_path: Path) -> None:
    f = tmp_path / "user0.pcap"
    f.write_bytes(_pcap(147, [b"abcd"]))
    venv_bin = str(WORKBENCH.parent)
    r = run("inspect", f, tmp_path=tmp_path, env_path=f"{venv_bin}:/nonexistent")
    assert_clean_error(r, "user0.pcap", "tshark")


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is part of the set-up")
def test_unknown_link_type_falls_back_to_tshark(tmp_path: Path) -> None:
    # The same frame as raw IPv4 under DLT_USER0 is unknown to both readers: tshark reads it (no
    # error about the link type) and finds no TCP in it.
    f = tmp_path / "user0.pcap"
    f.write_bytes(_pcap(147, [b"abcd"]))
    assert_clean_error(run("inspect", f, tmp_path=tmp_path), "user0.pcap", "no TCP packets")


@needs_data
def test_two_captures_of_different_sessions(tmp_path: Path) -> None:
    r = run("inspect", LAB / "c01" / "client.pcap", "--peer", LAB / "c07" / "server.pcap", tmp_path=tmp_path)
    assert_clean_error(r, "c07/server.pcap", "not a capture of the same session")


@needs_data
def test_malformed_mptcp_option_is_read_and_reported(tmp_path: Path) -> None:
    r = run("inspect", SHARED / "fixtures" / "tests_mptcp-dss-oobr.pcap", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "malformed MPTCP option" in r.stdout


@needs_data
def test_truncated_capture_keeps_prefix_and_warns(tmp_path: Path) -> None:
    f = tmp_path / "cut.pcap"
    f.write_bytes((LAB / "c07" / "client.pcap").read_bytes()[:100_000])
    r = run("inspect", f, "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert any("read stopped early" in w for w in doc["warnings"])
    assert doc["connections"][0]["packets"] > 100


@needs_data
def test_bad_path_option(tmp_path: Path) -> None:
    r = run("inspect", LAB / "c07" / "client.pcap", "--path", "lte", tmp_path=tmp_path)
    assert r.returncode == 2 and "ADDRESS=NAME" in r.stderr and "Traceback" not in r.stderr
