"""What the analysis layer tells the user when a capture is incomplete (no handshake, clocks of a
pair that disagree), the parquet cache, and a fuzz test of the whole load path: mutated captures give
a Capture or a clean InputError, never anything else."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, require

from workbench.capture import READER_VERSION, load, read_packets
from workbench.errors import InputError

SHARED = SHARED_TRACES
C07 = SHARED / "lab" / "c07"
require(C07, SHARED / "fixtures", SHARED / "pair" / "client_2.pcap")
needs_editcap = pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap comes with tshark")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("WORKBENCH_CACHE", str(cache))
    return cache


@needs_editcap
def test_capture_without_handshake_is_flagged(tmp_path: Path) -> None:
    cut = tmp_path / "late.pcap"
    # Drop the first 20 frames: the initial subflow's MP_CAPABLE handshake is gone.
    subprocess.run(["editcap", "-r", str(C07 / "client.pcap"), str(cut), "21-100000"], check=True)
    cap = load(cut)
    text = " ".join(cap.warnings)
    assert "without its handshake" in text
    assert "MP_JOIN to unknown token" not in text or cap.connections.height >= 2
    # Data still has relative DSNs (from the lowest DSN seen) and an OOO delay can be computed.
    assert cap.events["dsn"].drop_nulls().min() == 0


@needs_editcap
def test_pair_with_clock_offset_is_flagged_and_estimated(tmp_path: Path) -> None:
    shifted = tmp_path / "server-shifted.pcap"
    subprocess.run(["editcap", "-t", "0.5", str(C07 / "server.pcap"), str(shifted)], check=True)
    cap = load(C07 / "client.pcap", peer=shifted)
    clock = [w for w in cap.warnings if "clocks differ" in w]
    assert clock, cap.warnings
    # The server clock is 500 ms ahead, so the client's is 500 ms behind it; paths are symmetric.
    offset_ms = float(clock[0].split("client clock is ")[1].split(" ms")[0])
    assert offset_ms == pytest.approx(-500.0, abs=0.5)


def test_same_session_both_orders() -> None:
    a = load(C07 / "client.pcap", peer=C07 / "server.pcap")
    b = load(C07 / "server.pcap", peer=C07 / "client.pcap")
    owd_a = a.events.filter(pl.col("owd_ns").is_not_null()).group_by("dir").agg(pl.col("owd_ns").min()).sort("dir")
    owd_b = b.events.filter(pl.col("owd_ns").is_not_null()).group_by("dir").agg(pl.col("owd_ns").min()).sort("dir")
    assert owd_a.equals(owd_b)
    assert a.connections["vantage"].to_list() == ["client"]
    assert b.connections["vantage"].to_list() == ["server"]


def test_cache_is_used_and_survives_corruption(private_cache: Path) -> None:
    first = read_packets(C07 / "client.pcap")
    second = read_packets(C07 / "client.pcap")
    assert not first.from_cache and second.from_cache
    assert first.packets.equals(second.packets)
    files = list(private_cache.glob("*.parquet"))
    assert len(files) == 1 and f"-v{READER_VERSION}." in files[0].name
    assert files[0].name.startswith(first.content_hash[:32])
    files[0].write_bytes(b"not parquet")
    third = read_packets(C07 / "client.pcap")
    assert not third.from_cache and third.packets.equals(first.packets)


def test_cache_follows_content_not_name(tmp_path: Path) -> None:
    copy = tmp_path / "renamed.pcap"
    copy.write_bytes((C07 / "client.pcap").read_bytes())
    read_packets(C07 / "client.pcap")
    assert read_packets(copy).from_cache


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:  # cut anywhere
        return bytes(b[: rng.randrange(len(b))])
    if kind == 1:  # flip bytes past the file header
        for _ in range(rng.randint(1, 20)):
            i = rng.randrange(24, len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:  # overwrite a run with random bytes
        i = rng.randrange(24, len(b))
        n = rng.randint(1, 64)
        b[i : i + n] = bytes(rng.randrange(256) for _ in range(min(n, len(b) - i)))
        return bytes(b)
    # swap two chunks (packets out of their usual order, bogus headers at record boundaries)
    i, j = sorted(rng.sample(range(24, len(b)), 2))
    n = min(rng.randint(8, 200), j - i)
    b[i : i + n], b[j : j + n] = b[j : j + n], b[i : i + n]
    return bytes(b)


SEEDS = [p for p in sorted((SHARED / "fixtures").glob("*.pcap"))] + [SHARED / "pair" / "client_2.pcap"]


def test_fuzz_load_gives_capture_or_input_error(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    originals = {p: p.read_bytes() for p in SEEDS}
    outcomes = {"capture": 0, "error": 0}
    for case in range(300):
        src = rng.choice(SEEDS)
        f = tmp_path / f"case{case}.pcap"
        f.write_bytes(_mutate(originals[src], rng))
        try:
            cap = load(f, use_cache=False)
        except InputError as e:
            assert str(e).startswith(str(f)), str(e)
            assert "\n" not in str(e)
            outcomes["error"] += 1
        else:
            assert cap.events.height > 0
            assert cap.events["conn"].max() < cap.connections.height
            outcomes["capture"] += 1
        f.unlink()
    # Both outcomes are exercised.
    assert outcomes["capture"] > 50 and outcomes["error"] > 10, outcomes
