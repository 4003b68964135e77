"""tshark CSV exports (traces/hsr-mptcp): every file reads into the PACKETS schema, the per-subflow
files of one connection group together, values equal the raw CSV cells, and bad files give an
InputError naming the file and the line."""

from __future__ import annotations

import csv
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, needs

from workbench.capture._csvexport import group_csv_exports, is_csv_export, read_csv_export
from workbench.capture._tshark import read_tshark
from workbench.capture.schema import PACKETS
from workbench.errors import InputError

HSR = SHARED_TRACES / "hsr-mptcp"
ALL = sorted(HSR.glob("*.csv"))
SAMPLE = ALL[:: max(1, len(ALL) // 10)][:10]
HEADER = ("frame.time_epoch,ip.src,ip.dst,tcp.srcport,tcp.dstport,tcp.seq,tcp.ack,tcp.len,tcp.flags,"
          "tcp.analysis.bytes_in_flight,tcp.analysis.ack_rtt,tcp.options.mptcp.rawdataack,"
          "tcp.options.mptcp.rawdataseqno")
SYN_ROW = "1529184886.287095000,192.168.43.236,118.190.155.212,43441,8000,0,0,0,0x00000002,,,,"
DATA_ROW = ("1529184886.295699000,118.190.155.212,192.168.43.127,8000,47724,1,126,203,0x00000018,203,,"
            "1565767245,1208126471")


def test_all_files_present() -> None:
    assert len(ALL) == 178


@needs(HSR)
@pytest.mark.parametrize("path", SAMPLE, ids=lambda p: p.name)
def test_sample_reads_like_the_raw_cells(path: Path) -> None:
    df = read_csv_export(path)
    assert df.schema == pl.Schema(PACKETS)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert df.height == len(rows)
    assert df["frame"].to_list() == list(range(1, len(rows) + 1))
    # check the first, a middle and the last row, and every row carrying MPTCP values, cell by cell
    picks = {0, len(rows) // 2, len(rows) - 1} | {
        i for i, r in enumerate(rows) if r["tcp.options.mptcp.rawdataseqno"] or r["tcp.options.mptcp.rawdataack"]}
    for i in sorted(p for p in picks if 0 <= p < len(rows)):
        raw, got = rows[i], df.row(i, named=True)
        assert got["t_ns"] == int(Decimal(raw["frame.time_epoch"]) * 1_000_000_000)
        assert (got["src"], got["dst"]) == (raw["ip.src"], raw["ip.dst"])
        assert (got["sport"], got["dport"]) == (int(raw["tcp.srcport"]), int(raw["tcp.dstport"]))
        assert (got["seq"], got["ack"]) == (int(raw["tcp.seq"]), int(raw["tcp.ack"]))
        assert got["payload_len"] == int(raw["tcp.len"])
        assert got["flags"] == int(raw["tcp.flags"], 16)
        dsn, dack = raw["tcp.options.mptcp.rawdataseqno"], raw["tcp.options.mptcp.rawdataack"]
        assert got["dss_dsn"] == (int(dsn) if dsn else None)
        assert got["dss_data_ack"] == (int(dack) if dack else None)
        assert got["mp_subtypes"] == (1 << 2 if (dsn or dack) else 0)
        assert got["dss_dsn8"] == (False if dsn else None)  # all hsr DSNs are 32-bit
        assert got["dss_ack8"] == (False if dack else None)
        assert got["ip_version"] == 4 and got["mp_malformed"] is False
        assert got["win"] is None and got["opt_mss"] is None and got["dss_dll"] is None


def test_all_files_read_quickly() -> None:
    total = 0
    for path in ALL:
        assert is_csv_export(path), path
        df = read_csv_export(path)
        assert df.schema == pl.Schema(PACKETS)
        total += df.height
    assert total == 54934  # data lines of all 178 files (wc -l minus one header line each)


def test_syn_has_relative_sequence_zero() -> None:
    # the exports carry tshark's relative sequence numbers: every SYN has seq 0 (see module docstring)
    df = pl.concat([read_csv_export(p) for p in SAMPLE])
    syn = df.filter((pl.col("flags") & 0x02) != 0)
    assert syn.height > 0 and (syn["seq"] == 0).all()


def test_grouping_pairs_subflows_of_one_connection() -> None:
    groups = group_csv_exports(list(reversed(ALL)))
    assert len(groups) == 89 and all(len(g) == 2 for g in groups)
    for g in groups:
        tokens = {p.name.split(".")[1] for p in g}
        assert len(tokens) == 1
        assert g == sorted(g)
    first = groups[0]
    assert [p.name for p in first] == ["client.1529184872.reno.laptop3.M.D256.wlan12.M3.pcap.csv",
                                       "client.1529184872.reno.laptop3.M.D256.wlan14.U4.pcap.csv"]


def test_grouping_keeps_unpartnered_files_alone(tmp_path: Path) -> None:
    a = tmp_path / "client.1529184872.reno.laptop3.M.D256.wlan12.M3.pcap.csv"
    b = tmp_path / "client.1529184999.reno.laptop3.M.D256.wlan14.U4.pcap.csv"
    c = tmp_path / "export.csv"
    assert group_csv_exports([c, b, a]) == [[a], [b], [c]]


def _write(tmp_path: Path, text: str, name: str = "x.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_header_only_file_is_empty_table(tmp_path: Path) -> None:
    df = read_csv_export(_write(tmp_path, HEADER + "\n"))
    assert df.height == 0 and df.schema == pl.Schema(PACKETS)


def test_large_dsn_is_eight_bytes(tmp_path: Path) -> None:
    big = 18098490017687921147
    row = DATA_ROW.rsplit(",", 1)[0] + f",{big}"
    got = read_csv_export(_write(tmp_path, f"{HEADER}\n{row}\n")).row(0, named=True)
    assert (got["dss_dsn"], got["dss_dsn8"], got["dss_ack8"]) == (big, True, False)
    assert got["dss_flags"] == 0x01 | 0x04 | 0x08


def test_is_csv_export_rejects_other_files(tmp_path: Path) -> None:
    assert not is_csv_export(_write(tmp_path, "t_s,rate_mbps\n0,10\n"))
    assert not is_csv_export(SHARED_TRACES / "fixtures/tests_mptcp-v1.pcap")
    assert not is_csv_export(tmp_path / "missing.csv")


@pytest.mark.parametrize(("text", "words"), [
    ("", "empty file"),
    ("t_s,rate_mbps\n0,10\n", "line 1: not a tshark CSV export"),
    (HEADER.replace(",tcp.flags", "") + "\n", "line 1: missing column(s) tcp.flags"),
    (HEADER.replace("ip.src,ip.dst,", "") + "\n", "line 1: missing column(s) ip.src/ip.dst"),
    (f"{HEADER}\n{SYN_ROW}\n{SYN_ROW.replace('43441', 'port')}\n", "line 3: cannot parse tcp.srcport = 'port'"),
    (f"{HEADER}\n{DATA_ROW}\n{SYN_ROW}\n{SYN_ROW.replace('0x00000002', 'SYN')}\n", "line 4: cannot parse tcp.flags"),
    (f"{HEADER}\n{SYN_ROW.replace('1529184886.287095000', 'yesterday')}\n", "line 2: cannot parse frame.time_epoch"),
    (f"{HEADER}\n{DATA_ROW.replace('1208126471', 'x1208')}\n", "line 2: cannot parse tcp.options.mptcp.rawdataseqno"),
    (f"{HEADER}\n{SYN_ROW}\n{SYN_ROW},extra,cells\n", "line 3: 15 cells where the header has 13"),
    (f"{HEADER}\n{SYN_ROW.replace(',0,0,0,', ',-1,0,0,')}\n", "line 2: cannot parse tcp.seq"),
])
def test_bad_files(tmp_path: Path, text: str, words: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(InputError) as e:
        read_csv_export(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and words in msg, msg


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
@pytest.mark.parametrize("capture", ["fixtures/tests_mptcp-v0.pcap", "fixtures/tests_mptcp-v1.pcap"])
def test_export_made_from_a_capture_agrees_with_the_tshark_reader(tmp_path: Path, capture: str) -> None:
    """Make an export the way the hsr study did (tshark defaults: relative sequence numbers) and check
    the columns it shares with the tshark reader; seq/ack match after making those relative."""
    pcap = SHARED_TRACES / capture
    out = tmp_path / "export.csv"
    cmd = ["tshark", "-r", str(pcap), "-n", "-Y", "tcp", "-T", "fields", "-E", "header=y", "-E", "separator=,",
           "-E", "occurrence=f", *[arg for f in HEADER.split(",") for arg in ("-e", f)]]
    out.write_bytes(subprocess.run(cmd, capture_output=True, check=True).stdout)
    got = read_csv_export(out)
    ref = read_tshark(pcap)
    assert got.height == ref.height
    for col in ["t_ns", "src", "dst", "sport", "dport", "payload_len", "flags", "dss_dsn", "dss_data_ack"]:
        assert got[col].equals(ref[col]), col
    # relative seq = raw seq - ISN of the direction (tshark's per-stream relative numbers)
    isn = (ref.filter((pl.col("flags") & 0x02) != 0)
           .group_by("src", "sport", "dst", "dport").agg(isn=pl.col("seq").first()))
    rel = (ref.with_row_index("i").join(isn, on=["src", "sport", "dst", "dport"], how="left").sort("i")
           .select(((pl.col("seq").cast(pl.Int64) - pl.col("isn").cast(pl.Int64)) % 2**32).alias("rel")))
    assert got["seq"].cast(pl.Int64).equals(rel["rel"], check_names=False)
