"""Per-subflow tshark CSV exports say which files belong to one connection, but a file can also hold
the end of another connection (hsr-mptcp 1529184937: the wlan14 export opens with the last data
segment and FINs of connection 1529184908's subflow 47744, 8 s before this connection's SYN). The
reader keeps streams whose data sequence numbers cannot share the connection's IDSN apart
(`workbench.capture._mptcp.split_by_dsn_space`): checked against the export's own tshark cells and,
on captures, against tshark's mptcp.stream."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, needs

from workbench.capture import load

HSR = SHARED_TRACES / "hsr-mptcp"
FILES = [HSR / "client.1529184937.olia.laptop3.M.D1024.wlan12.M3.pcap.csv",
         HSR / "client.1529184937.olia.laptop3.M.D1024.wlan14.U4.pcap.csv"]
EARLIER = HSR / "client.1529184908.lia.laptop3.M.D256.wlan14.U4.pcap.csv"
FIELDS = ["frame.time_epoch", "ip.src", "ip.dst", "tcp.srcport", "tcp.dstport", "tcp.seq", "tcp.ack", "tcp.len",
          "tcp.flags", "tcp.analysis.bytes_in_flight", "tcp.analysis.ack_rtt", "tcp.options.mptcp.rawdataack",
          "tcp.options.mptcp.rawdataseqno"]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _client_port(r: dict[str, str]) -> int:
    return int(r["tcp.srcport"]) if r["tcp.dstport"] == "8000" else int(r["tcp.dstport"])


@needs(*FILES, EARLIER)
def test_the_stray_segment_of_1529184937_is_another_connections() -> None:
    rows = [r for f in FILES for r in _rows(f)]
    syn_ports = {_client_port(r) for r in rows if r["tcp.flags"] == "0x00000002"}
    stray_ports = {_client_port(r) for r in rows} - syn_ports
    # What the export shows: one stream without a handshake, whose port opened connection 1529184908.
    assert len(stray_ports) == 1
    (stray,) = stray_ports
    assert any(_client_port(r) == stray and r["tcp.flags"] == "0x00000002" for r in _rows(EARLIER))

    cap = load(FILES, use_cache=False)
    sf = cap.subflows
    main = cap.main_connection
    ports = {c: {int(x.rsplit(":", 1)[1]) for x in sf.filter(pl.col("conn") == c)["client"]} for c in sf["conn"]}
    assert ports[main] == syn_ports and {stray} in ports.values()
    assert sf.filter(pl.col("conn") == main)["handshake"].all()
    # The connection's first subflow is the one whose SYN came first, and no other subflow joins late.
    first_syn = min((r for r in rows if r["tcp.flags"] == "0x00000002"), key=lambda r: r["frame.time_epoch"])
    assert sf.filter((pl.col("conn") == main) & (pl.col("subflow") == 0))["client"].item().endswith(
        f":{_client_port(first_syn)}")
    stray_conn = next(c for c, p in ports.items() if p == {stray})
    assert any(w.startswith(f"connection {stray_conn}: given as part of connection {main}") for w in cap.warnings)
    assert not any(w.startswith(f"connection {main}:") for w in cap.warnings)  # its vantage is known now

    # Relative DSNs of the connection are its raw DSNs (tshark's cells) from the first byte it sent.
    data = [r for r in rows if r["tcp.options.mptcp.rawdataseqno"] and int(r["tcp.len"]) > 0
            and r["ip.src"] != first_syn["ip.src"] and _client_port(r) in syn_ports]
    base = min(int(r["tcp.options.mptcp.rawdataseqno"]) for r in data)
    ev = cap.connection(main).filter((pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    got = sorted(zip(ev["t_ns"].to_list(), ev["dsn"].to_list(), strict=True))
    want = sorted((int(Decimal(r["frame.time_epoch"]) * 10**9), (int(r["tcp.options.mptcp.rawdataseqno"]) - base) % 2**32)
                  for r in data)
    assert len(got) == len(want)
    assert [d for _, d in got] == [d for _, d in want]
    # ... so the connection begins at its own first data byte, not 8 s earlier at the stray segment.
    assert ev["t_ns"].min() == min(t for t, _ in want)
    assert cap.connections.filter(pl.col("conn") == main)["duration_s"].item() < 4


@pytest.mark.skipif(shutil.which("tshark") is None or shutil.which("mergecap") is None,
                    reason="tshark and mergecap are part of the set-up")
def test_connections_in_one_export_are_tsharks_mptcp_streams(tmp_path: Path) -> None:
    # Two connections' packets in one export made the way the hsr study made theirs (no keys, no
    # MP_CAPABLE): the reader must split them as tshark's mptcp.stream does on the capture itself.
    merged = tmp_path / "two.pcap"
    subprocess.run(["mergecap", "-w", str(merged), str(SHARED_TRACES / "fixtures" / "tests_mptcp-v0.pcap"),
                    str(SHARED_TRACES / "fixtures" / "tests_mptcp-v1.pcap")], check=True, capture_output=True)
    export = tmp_path / "client.1.export.csv"
    cmd = ["tshark", "-r", str(merged), "-n", "-Y", "tcp", "-T", "fields", "-E", "header=y", "-E", "separator=,",
           "-E", "occurrence=f", *[a for f in FIELDS for a in ("-e", f)]]
    export.write_bytes(subprocess.run(cmd, capture_output=True, check=True).stdout)
    out = subprocess.run(["tshark", "-r", str(merged), "-2", "-n", "-Y", "tcp", "-T", "fields", "-e", "ip.src",
                          "-e", "tcp.srcport", "-e", "ip.dst", "-e", "tcp.dstport", "-e", "mptcp.stream"],
                         capture_output=True, check=True, text=True).stdout
    tshark: dict[frozenset[str], str] = {}
    for line in csv.reader(io.StringIO(out), delimiter="\t"):
        key = frozenset((f"{line[0]}:{line[1]}", f"{line[2]}:{line[3]}"))
        if line[4]:
            tshark[key] = line[4]
    assert len(set(tshark.values())) == 2

    cap = load([export], use_cache=False)
    ours = {frozenset((r["client"], r["server"])): r["conn"] for r in cap.subflows.iter_rows(named=True)}
    assert set(ours) == set(tshark)

    def partition(m: dict[frozenset[str], object]) -> set[frozenset[frozenset[str]]]:
        return {frozenset(k for k in m if m[k] == v) for v in set(m.values())}

    assert partition(ours) == partition(tshark)
