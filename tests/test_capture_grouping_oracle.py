"""Connection grouping, relative DSNs and reinjections checked against Wireshark's own MPTCP analysis
(tshark's mptcp.stream, mptcp.dsn with mapping analysis, mptcp.reinjection_of) on real captures."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, require

from workbench.capture import load, read_packets
from workbench.capture._mptcp import idsn_of_key, token_of_key

SHARED = SHARED_TRACES
pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is part of the set-up")

CAPTURES = [
    *sorted((SHARED / "fixtures").glob("*.pcap")),
    *sorted((SHARED / "pair").glob("*.pcap")),
    SHARED / "lab" / "c07" / "client.pcap",
    SHARED / "lab" / "c07" / "server.pcap",
    SHARED / "lab" / "v01" / "server.pcap",
]
require(SHARED / "fixtures", SHARED / "pair", *CAPTURES)


def _tshark_fields(path: Path, fields: list[str], *, two_pass: bool) -> pl.DataFrame:
    cmd = ["tshark", "-r", str(path), "-n", "-Y", "tcp", "-o", "mptcp.analyze_mappings:TRUE",
           "-o", "mptcp.intersubflows_retransmission:TRUE",
           "-T", "fields", "-E", "occurrence=f", "-E", "separator=\t", *(["-2"] if two_pass else [])]
    for f in ["frame.number", *fields]:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return pl.read_csv(io.BytesIO(out), separator="\t", has_header=False, new_columns=["frame", *fields],
                       infer_schema_length=0).with_columns(pl.col("frame").cast(pl.UInt32))


def _tshark_mptcp(path: Path) -> pl.DataFrame:
    # Two passes give the first SYN of a v1 connection its mptcp.stream; but the two-pass mapping
    # analysis derives wrong raw DSNs on lab/c07's joined subflow, so DSNs come from one pass.
    streams = _tshark_fields(path, ["mptcp.stream"], two_pass=True)
    mapped = _tshark_fields(path, ["tcp.len", "mptcp.rawdsn64", "mptcp.reinjection_of"], two_pass=False)
    return streams.join(mapped, on="frame").with_columns(
        pl.col("mptcp.stream").cast(pl.Int64), pl.col("tcp.len").cast(pl.Int64),
        pl.col("mptcp.rawdsn64").cast(pl.UInt64))


@pytest.fixture(scope="module", params=CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def both(request: pytest.FixtureRequest) -> tuple[pl.DataFrame, pl.DataFrame]:
    cap = load(request.param)
    frames = read_packets(request.param).packets["frame"]
    assert cap.events.height == frames.len()  # one event per TCP segment, in frame order
    return cap.events.with_columns(frame=frames), _tshark_mptcp(request.param)


def test_connections_are_tsharks_mptcp_streams(both) -> None:
    ours, ts = both
    joined = ours.select("frame", "conn").join(ts.select("frame", ms="mptcp.stream"), on="frame")
    joined = joined.filter(pl.col("ms").is_not_null())
    # The same partition of packets: each of our connections is exactly one of tshark's and back.
    assert joined.group_by("conn").agg(pl.col("ms").n_unique())["ms"].max() in (None, 1)
    assert joined.group_by("ms").agg(pl.col("conn").n_unique())["conn"].max() in (None, 1)


def test_dsn_of_every_data_segment_is_tsharks(both) -> None:
    ours, ts = both
    # tshark's mptcp.rawdsn64 is the 64-bit DSN it derives for each segment from the mappings. Ours
    # is relative to the direction's IDSN + 1: the difference must be one constant per connection and
    # direction. (tshark's *relative* mptcp.dsn is not used: on a joined subflow of lab/c07 it is
    # computed from the wrong base.)
    joined = (ours.filter(pl.col("payload_bytes") > 0).select("frame", "conn", "dir", "dsn")
              .join(ts.select("frame", raw="mptcp.rawdsn64"), on="frame")
              .filter(pl.col("raw").is_not_null()))
    if joined.is_empty():
        pytest.skip("no mapped data in this capture")
    assert joined["dsn"].null_count() == 0, joined.filter(pl.col("dsn").is_null()).head()
    base = joined.with_columns(base=(pl.col("raw").cast(pl.Int128) - pl.col("dsn").cast(pl.Int128)) % (1 << 64))
    per_dir = base.group_by("conn", "dir").agg(pl.col("base").n_unique())
    assert per_dir["base"].max() == 1, base.group_by("conn", "dir", "base").len()


def test_reinjections_are_tsharks(both) -> None:
    ours, ts = both
    # Wireshark marks a data segment whose DSN range overlaps one sent earlier on another subflow.
    # Every segment it marks, we mark. Where we mark more (a few on the pair dataset, which Wireshark
    # leaves unmarked), a brute-force check over all earlier segments must confirm the overlap.
    theirs = set(ts.filter(pl.col("mptcp.reinjection_of").is_not_null() & (pl.col("tcp.len") > 0))["frame"])
    mine = set(ours.filter(pl.col("is_reinject"))["frame"])
    assert theirs <= mine
    data = ours.filter(pl.col("dsn").is_not_null() & (pl.col("payload_bytes") > 0)).sort("t_ns")
    rows = data.select("frame", "conn", "dir", "subflow", "t_ns", "dsn", "payload_bytes").rows(named=True)
    by_frame = {r["frame"]: r for r in rows}
    for f in sorted(mine - theirs):
        s = by_frame[f]
        assert any(r["conn"] == s["conn"] and r["dir"] == s["dir"] and r["subflow"] != s["subflow"]
                   and r["t_ns"] < s["t_ns"] and r["dsn"] < s["dsn"] + s["payload_bytes"]
                   and r["dsn"] + r["payload_bytes"] > s["dsn"] for r in rows), f
    assert len(mine - theirs) <= max(5, len(theirs) // 10)


def test_token_and_idsn_from_the_rfc_examples() -> None:
    # RFC 8684 / the v1 capture: the MP_JOIN token a peer sends is SHA-256(key)[0:4]; checked against
    # the token that the second subflow of lab c07 actually carried (read with tshark by hand:
    # tcp.options.mptcp.recvtok of the MP_JOIN SYN) and the IDSN tshark derived (mptcp.expected_idsn).
    server_key = 6310041469938806948   # SYN/ACK sender key, lab/c07 frame 2
    assert idsn_of_key(server_key, 1) == 18098490017687829578
    cap = load(SHARED / "lab" / "c07" / "client.pcap")
    row = cap.connections.row(0, named=True)
    assert row["server_key"] == server_key
    assert row["server_token"] == token_of_key(server_key, 1)
