"""Importers on every real file of the shared traces' timelines/ (docs/DATA.md) (and the lab's rate CSVs), checked
against what the files themselves say: line counts, byte sums, column values, ping statistics."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES, needs

from workbench.errors import InputError
from workbench.timeline import (
    mahimahi_bins,
    parse_ping_log,
    read_5gophers,
    read_mahimahi,
    read_multipath_csv,
    read_oboe,
    read_ping,
    read_rate_csv,
)
from workbench.timeline.importers import parse_rate_unit, parse_time_unit

SHARED = SHARED_TRACES
TL = SHARED / "timelines"
pytestmark = needs(TL, SHARED / "lab")

MAHIMAHI = sorted(p for p in (TL / "mahimahi").glob("*") if p.suffix in (".up", ".down"))
OBOE = sorted((TL / "oboe").glob("*.txt"))
PINGS = sorted((TL / "nuwins-ping").glob("*/*.out"))
GOPHERS = sorted((TL / "5gophers").glob("*trace*.csv"))


def ms_lines(p: Path) -> list[int]:
    return [int(x) for x in p.read_text().split()]


# -- mahimahi -------------------------------------------------------------------------------------

def test_every_mahimahi_file_found() -> None:
    assert len(MAHIMAHI) == 7  # ATT, TMobile-LTE and Verizon up + down, TMobile-UMTS down


@pytest.mark.parametrize("path", MAHIMAHI, ids=lambda p: p.name)
def test_mahimahi_byte_accounting(path: Path) -> None:
    ms = ms_lines(path)
    period = ms[-1]
    bins = mahimahi_bins(path)
    # Every line is one 1500-byte opportunity, once per period.
    assert bins["opportunities"].sum() == len(ms)
    assert bins["bytes"].sum() == 1500 * len(ms)
    assert bins["dur_ns"].sum() == period * 1_000_000
    # Per bin, counted independently (ms T of one cycle is ms 0 of the next).
    counts = Counter((m % period) // 100 for m in ms)
    assert bins["opportunities"].to_list() == [counts.get(i, 0) for i in range(bins.height)]
    tl = read_mahimahi(path if path.suffix == ".down" else None, path if path.suffix == ".up" else None)
    d = "down" if path.suffix == ".down" else "up"
    assert tl.kind == "capacity" and tl.periodic and tl.end_ns == period * 1_000_000
    assert math.isclose(tl.total_bytes(d), 1500 * len(ms), rel_tol=1e-12)
    assert set(tl.steps[f"capacity_{d}_bps_src"].to_list()) == {"measured"}
    assert tl.steps["owd_down_ns"].null_count() == tl.steps.height  # a mahimahi trace has no delay
    # Mean capacity = bytes per period.
    assert math.isclose(tl.mean(f"capacity_{d}_bps"), 1500 * 8 * len(ms) / (period / 1000), rel_tol=1e-9)


def test_mahimahi_up_and_down_with_different_periods() -> None:
    down, up = TL / "mahimahi" / "TMobile-LTE-short.down", TL / "mahimahi" / "TMobile-LTE-short.up"
    md, mu = ms_lines(down), ms_lines(up)
    assert md[-1] < mu[-1]  # 139986 vs 140000 ms
    tl = read_mahimahi(down, up)
    assert tl.end_ns == mu[-1] * 1_000_000
    assert math.isclose(tl.total_bytes("up"), 1500 * len(mu), rel_tol=1e-12)
    # The shorter down trace wraps: the extra 14 ms hold its first 14 ms again.
    extra = sum(1 for m in md if m % md[-1] < mu[-1] - md[-1])
    assert math.isclose(tl.total_bytes("down"), 1500 * (len(md) + extra), rel_tol=1e-12)
    assert any("periods differ" in n for n in tl.notes)


def test_mahimahi_closed_forms(tmp_path: Path) -> None:
    one = tmp_path / "one.down"
    one.write_text("1\n")
    tl = read_mahimahi(one)
    assert tl.steps["capacity_down_bps"].to_list() == [12e6]  # one packet per ms, the README's example
    f = tmp_path / "f.down"
    f.write_text("0\n0\n5\n10\n")  # period 10 ms; ms 10 folds onto ms 0 -> 3 packets at 0, 1 at 5
    b = mahimahi_bins(f, bin_ns=5_000_000)
    assert b["opportunities"].to_list() == [3, 1]
    assert b["capacity_bps"].to_list() == [3 * 12000 / 0.005, 12000 / 0.005]
    # A bin that does not divide the period: the last bin is shorter and its rate uses its width.
    b = mahimahi_bins(f, bin_ns=4_000_000)
    assert b["dur_ns"].to_list() == [4_000_000, 4_000_000, 2_000_000]
    assert b["capacity_bps"][2] == 0.0 and b["capacity_bps"][1] == 12000 / 0.004


@pytest.mark.parametrize(("text", "msg"), [("", "empty"), ("1\nx\n", "not an integer"), ("5\n3\n", "decrease"),
                                           ("0\n0\n", "period")])
def test_mahimahi_bad_files(tmp_path: Path, text: str, msg: str) -> None:
    f = tmp_path / "bad.down"
    f.write_text(text)
    with pytest.raises(InputError, match=msg):
        read_mahimahi(f)


def test_mahimahi_matches_lab_v05_schedule() -> None:
    # v05 applied TMobile-LTE-short.down 121..129 s in 100 ms bins, clamped to [1, 60] Mbit/s.
    tl = read_mahimahi(TL / "mahimahi" / "TMobile-LTE-short.down")
    cut = tl.steps.filter((pl.col("t_ns") >= 121 * 10**9) & (pl.col("t_ns") < 129 * 10**9))
    ours = [min(max(v / 1e6, 1.0), 60.0) for v in cut["capacity_down_bps"].to_list()]
    lab = pl.read_csv(SHARED / "lab" / "v05" / "rate2.csv")["rate_mbps"].to_list()
    assert len(ours) == len(lab) == 80
    assert all(abs(a - b) < 1e-6 for a, b in zip(ours, lab, strict=True))


# -- t,rate files ---------------------------------------------------------------------------------

def test_every_oboe_file_found() -> None:
    assert len(OBOE) == 20


@pytest.mark.parametrize("path", OBOE, ids=lambda p: p.name)
def test_oboe(path: Path) -> None:
    rows = [ln.split("\t") for ln in path.read_text().splitlines() if ln.strip()]
    tl = read_oboe(path)
    assert tl.kind == "throughput"
    assert tl.steps.height == len(rows)
    assert tl.steps["t_ns"].to_list() == [round(float(t) * 1e9) for t, _ in rows]
    assert tl.steps["capacity_down_bps"].to_list() == [float(r) * 1e6 for _, r in rows]
    assert tl.end_ns is None  # the last sample holds on
    assert "throughput" in tl.notes[0]


@pytest.mark.parametrize(("run", "file", "key"), [("v01", "rate1.csv", "path1"), ("v01", "rate2.csv", "path2"),
                                                  ("v05", "rate2.csv", "path2")])
def test_lab_rate_csv(run: str, file: str, key: str) -> None:
    res = json.loads((SHARED / "lab" / run / "results.json").read_text())
    tr = res["configured"][key]["rate_trace"]
    tl = read_rate_csv(SHARED / "lab" / run / file, kind="capacity")  # units from the header t_s,rate_mbps
    v = tl.steps["capacity_down_bps"]
    assert tl.steps.height == tr["n_rows"]
    assert tl.steps["t_ns"][-1] == round(tr["t_last_s"] * 1e9)
    assert math.isclose(v.min(), tr["min"] * 1e6) and math.isclose(v.max(), tr["max"] * 1e6)
    assert v[0] == tr["initial"] * 1e6
    assert abs(v.mean() / 1e6 - tr["mean"]) < 1e-3  # samples evenly spaced: plain mean
    # The schedule the lab applied: initial value, then one event per change (repeats need none).
    sched = [res["schedule"]["initial"][key]["rate_mbps"]] + [
        e["value"] for e in res["schedule"]["events"] if e["path"] == int(key[-1]) and e["kind"] == "rate"]
    values = [x / 1e6 for x in v.to_list()]
    changes = [x for i, x in enumerate(values) if i == 0 or x != values[i - 1]]
    assert changes == sched


def test_rate_csv_units(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("0 500\n250 1500\n")
    with pytest.raises(InputError, match="units not declared"):
        read_rate_csv(f, kind="capacity")
    tl = read_rate_csv(f, kind="capacity", t_unit="ms", rate_unit="kbit/s", direction="up")
    assert tl.steps["t_ns"].to_list() == [0, 250_000_000]
    assert tl.steps["capacity_up_bps"].to_list() == [500e3, 1.5e6]
    g = tmp_path / "g.csv"
    g.write_text("time_ms,rate (MB/s)\n0,1\n10,2\n")
    tl = read_rate_csv(g, kind="throughput")
    assert tl.steps["capacity_down_bps"].to_list() == [8e6, 16e6]
    assert parse_rate_unit("Mbps") == 1e6 and parse_rate_unit("kB/s") == 8e3 and parse_time_unit("us") == 1e3
    bad = tmp_path / "b.csv"
    bad.write_text("t_s,rate_mbps\n1,2\n1,3\n")
    with pytest.raises(InputError, match="increasing"):
        read_rate_csv(bad, kind="capacity")


# -- multi-path CSV (5Gophers) -------------------------------------------------------------------

def test_every_5gophers_trace_found() -> None:
    assert [p.name for p in GOPHERS] == ["car-driving-trace-1.csv", "car-driving-trace-2.csv", "walking-trace.csv"]


@pytest.mark.parametrize("path", GOPHERS, ids=lambda p: p.name)
def test_5gophers(path: Path) -> None:
    df = pl.read_csv(path)
    cols = [c for c in df.columns if c.endswith("throughput_mbps")]
    tls = read_5gophers(path)
    expected_names = [c.removesuffix("_throughput_mbps") for c in cols] if len(cols) > 1 else [path.stem]
    assert list(tls) == expected_names
    seq = df["seq_num"].to_list()
    span = max(seq) - min(seq) + 1
    for name, col in zip(expected_names, cols, strict=True):
        tl = tls[name]
        assert tl.kind == "throughput"
        s = tl.steps
        assert s.height == span  # one step per second, gaps included
        assert s["capacity_down_bps"].null_count() == span - df.height  # missing seconds are unknown
        by_t = dict(zip(s["t_ns"].to_list(), s["capacity_down_bps"].to_list(), strict=True))
        for q, v in zip(seq, df[col].to_list(), strict=True):
            assert by_t[q * 10**9] == v * 1e6
        assert tl.end_ns == (max(seq) + 1) * 10**9
    n_conn = df["num_tcp_conn"].unique().to_list()
    assert f"{n_conn[0]} parallel TCP connections" in " ".join(tls[expected_names[0]].notes)
    if "radio_type" in df.columns:
        c = Counter(df["radio_type"].to_list())
        note = tls[expected_names[0]].notes[-1]
        assert f"4G {c['4G']} s" in note and f"5G {c['5G']} s" in note


def test_multipath_csv_generic(tmp_path: Path) -> None:
    f = tmp_path / "m.csv"
    f.write_text("t_ms,wifi_mbps,lte_kbps\n0,10,500\n500,20,1500\n")
    tls = read_multipath_csv(f, kind="capacity", time_column="t_ms", t_unit="ms")
    assert list(tls) == ["wifi", "lte"]
    assert tls["wifi"].steps["capacity_down_bps"].to_list() == [10e6, 20e6]
    assert tls["lte"].steps["capacity_down_bps"].to_list() == [500e3, 1.5e6]
    assert tls["lte"].steps["t_ns"].to_list() == [0, 500_000_000]
    with pytest.raises(InputError, match="no rate columns"):
        read_multipath_csv(TL / "5gophers" / "rtt-samples.csv", kind="throughput", index_column="rtt_ms",
                           step_ns=1)


@pytest.mark.parametrize("columns", [{"time_column": "t_ms", "t_unit": "ms"}, {"index_column": "t_ms", "step_ns": 1}])
def test_multipath_csv_header_only(tmp_path: Path, columns: dict) -> None:
    # a header and no rows: one clear error naming the file (an index column once failed with a TypeError)
    f = tmp_path / "empty.csv"
    f.write_text("t_ms,wifi_mbps\n")
    with pytest.raises(InputError, match="no data rows") as e:
        read_multipath_csv(f, kind="capacity", **columns)
    assert "empty.csv" in str(e.value)


# -- ping logs ------------------------------------------------------------------------------------

def test_every_ping_log_found() -> None:
    assert len(PINGS) == 9


@pytest.mark.parametrize("path", PINGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_ping_log(path: Path) -> None:
    text = path.read_text()
    stats = re.search(r"(\d+) packets transmitted, (\d+) received", text)
    assert stats
    tx, rx = int(stats.group(1)), int(stats.group(2))
    rtt_min = float(re.search(r"rtt min/avg/max/mdev = ([\d.]+)/", text).group(1))
    start_ms = int(re.search(r"Start time: (\d+)", text).group(1))
    log = parse_ping_log(path)
    assert log.requests.height == tx
    assert log.requests["rtt_ns"].null_count() == tx - rx  # missing icmp_seq = lost
    assert log.duplicates == text.count("(DUP!)")
    assert abs(log.t0_epoch_ns / 1e6 - start_ms) < 1000  # local stamps converted to Unix time
    tl = read_ping(path)
    s = tl.steps
    assert s["capacity_down_bps"].null_count() == s.height  # ping knows nothing of capacity
    assert set(s["owd_down_ns_src"].drop_nulls().to_list()) == {"estimated"}
    # owd = min RTT / 2 per bin: the smallest bin is half the log's own minimum, as printed per reply
    # (ping prints times >= 10 ms truncated to 0.1 ms; its statistics line keeps microseconds).
    assert 0 <= rtt_min - s["owd_down_ns"].min() * 2 / 1e6 < 0.1
    # Loss per bin: lost / sent; summed over bins it is the log's loss count.
    sent = log.requests.with_columns(b=pl.col("send_ns") // 10**9).group_by("b").agg(
        n=pl.len(), lost=pl.col("rtt_ns").null_count()).sort("b")
    p_rt = [lo / n for lo, n in zip(sent["lost"], sent["n"], strict=True)]
    assert s["loss_down"].to_list() == pytest.approx([1 - math.sqrt(1 - p) for p in p_rt])
    assert sum(lo for lo in sent["lost"]) == tx - rx


def test_ping_split_and_epoch_stamps(tmp_path: Path) -> None:
    f = tmp_path / "p.out"
    f.write_text(
        "[1700000000.100000] 64 bytes from 1.2.3.4: icmp_seq=1 ttl=50 time=100 ms\n"
        "[1700000000.400000] 64 bytes from 1.2.3.4: icmp_seq=3 ttl=50 time=200 ms\n"
        "[1700000000.450000] 64 bytes from 1.2.3.4: icmp_seq=3 ttl=50 time=250 ms (DUP!)\n"
        "3 packets transmitted, 2 received, 33% packet loss\n")
    log = parse_ping_log(f)
    assert log.t0_epoch_ns == 1_700_000_000_000_000_000  # sent = 0.1 s - 100 ms
    assert log.requests["send_ns"].to_list() == [0, 100_000_000, 200_000_000]  # seq 2 interpolated
    tl = read_ping(f, rtt_split=0.25)
    assert tl.steps["owd_down_ns"].to_list() == [25_000_000]
    assert tl.steps["owd_up_ns"].to_list() == [75_000_000]
    assert tl.steps["loss_down"][0] == pytest.approx(1 - math.sqrt(2 / 3))
    empty = tmp_path / "e.out"
    empty.write_text("PING x\n")
    with pytest.raises(InputError, match="no timestamped ping replies"):
        read_ping(empty)
