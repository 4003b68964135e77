"""Scenario files and the pcap writer (read back with tshark)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from workbench.errors import InputError
from workbench.replay import Finite, PathConfig, run_replay, write_pcap
from workbench.scenario import load_scenario
from workbench.schedulers import MinRTT, get

MS = 1_000_000

YAML = """
duration_s: 3
seed: 4
scheduler: {name: minrtt, params: {opportunistic: false}}
paths:
  - name: wifi
    rate_mbps: 30
    owd_ms: 10
    buffer_packets: 50
    loss: 0.001
  - name: lte
    rate_mbps: {csv: rate.csv}
    owd_down_ms: [[0, 40], [1.5, 60]]
    owd_up_ms: 40
    buffer_bytes: 300000
connection: {cc: olia, rcv_buf_bytes: 2000000}
workload: {finite: {bytes: 1000000}}
"""


def test_load_yaml_scenario_and_run(tmp_path: Path) -> None:
    (tmp_path / "rate.csv").write_text("t_s,rate_mbps\n0,10\n1,5\n2,20\n")
    f = tmp_path / "s.yaml"
    f.write_text(YAML)
    sc = load_scenario(f)
    wifi, lte = sc.paths
    assert wifi.buffer_down_bytes == 50 * 1514 and wifi.loss_down.at(0) == 0.001
    assert lte.rate_down_bps.at(1_500_000_000) == 5e6 and lte.rate_up_bps.at(0) == 10e6
    assert lte.owd_down_ns.at(2_000_000_000) == 60 * MS and lte.owd_up_ns.at(0) == 40 * MS
    assert sc.conn.cc == "olia" and sc.duration_ns == 3_000_000_000 and sc.seed == 4
    assert isinstance(sc.scheduler, MinRTT) and sc.scheduler.opportunistic is False
    r = sc.run()
    assert r.counters["completed"] and r.counters["delivered_bytes"] == 1_000_000


def test_json_scenario_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"paths": [{"name": "a", "rate_kbps": 5000, "owd_us": 20000}],
                             "workload": "bulk", "duration_s": 1}))
    sc = load_scenario(f)
    assert sc.paths[0].rate_down_bps.at(0) == 5e6 and sc.scheduler is None
    assert sc.run(get("roundrobin")).counters["delivered_bytes"] > 0
    bad = {
        "no paths": {"paths": []},
        "missing rate": {"paths": [{"name": "a", "owd_ms": 1}]},
        "unknown setting": {"paths": [{"rate_mbps": 1, "owd_ms": 1}], "connection": {"mss": 1}},
        "unknown scheduler": {"paths": [{"rate_mbps": 1, "owd_ms": 1}], "scheduler": "nope"},
        "loss": {"paths": [{"rate_mbps": 1, "owd_ms": 1, "loss": 2}]},
    }
    for what, d in bad.items():
        f.write_text(json.dumps(d))
        with pytest.raises(InputError) as e:
            load_scenario(f)
        assert str(f) in str(e.value) and "\n" not in str(e.value), what
    f.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_scenario(f)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_pcap_reads_back_with_tshark_and_dsns_match(tmp_path: Path) -> None:
    paths = [PathConfig.constant("a", rate_bps=10e6, owd_ns=10 * MS),
             PathConfig.constant("b", rate_bps=5e6, owd_ns=30 * MS)]
    r = run_replay(paths, get("minrtt"), workload=Finite(size_bytes=300_000))
    out = write_pcap(r, tmp_path / "replay.pcap")
    res = subprocess.run(["tshark", "-r", str(out), "-Y", "tcp.len > 0", "-T", "fields",
                          "-e", "frame.time_epoch", "-e", "ip.dst", "-e", "tcp.len", "-e", "frame.len",
                          "-e", "tcp.options.mptcp.rawdataseqno", "-e", "tcp.options.mptcp.datalvllen"],
                         capture_output=True, text=True, check=True)
    rows = [ln.split("\t") for ln in res.stdout.splitlines() if ln.strip()]
    snd = r.events.filter((pl.col("point") == "snd") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    assert len(rows) == snd.height
    assert [int(x[4]) for x in rows] == snd["dsn"].to_list()
    assert [int(x[2]) for x in rows] == snd["payload_bytes"].to_list()
    assert all(int(x[5]) == int(x[2]) for x in rows)
    assert {x[1] for x in rows} == {"10.0.1.1", "10.0.2.1"}
    assert int(rows[0][3]) == snd["frame_bytes"][0]  # wire size as modelled (90-byte headers)
    t0 = float(rows[0][0])
    assert t0 * 1e9 == pytest.approx(snd["t_ns"][0], abs=1000)
