"""`workbench lab` end to end on the real kernel (issue 12): a scenario with two constant paths and
one with rate and delay traces, each in both directions — four short runs (3 s of data, about 10 s
of wall time each) — plus the backend API (`get_backend("kernel").run(experiment)`) on a finite
upload.

Checked against truths the run does not produce itself: the bytes the receiving application counted
equal the bytes the capture pair shows delivered in order; a finite transfer delivers exactly its
size; no path carries more than its programmed capacity allows; the emulation met its targets per
100 ms bin; every rate and delay change of the traces was applied near its time; the qdisc's drop
count equals the drops the delay line was told about."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests._kernel import require_lab

pytestmark = pytest.mark.slow

MS = 1_000_000
S = 1_000_000_000
PAYLOAD_SHARE = 1424 / 1514   # MPTCP payload per full Ethernet frame (timestamps + DSS)

CONSTANT = """
duration_s: 5
scheduler: upstream
paths:
  - {name: wifi, rate_mbps: 30, owd_ms: 10, buffer_packets: 50}
  - {name: lte, rate_mbps: 10, owd_ms: 40, buffer_packets: 500}
workload: {bulk: {stop_s: 3}}
"""
# rate trace from a CSV file, delay traces as series (both directions of lte change their delay)
TRACES = """
duration_s: 5
scheduler: upstream
paths:
  - {name: wifi, rate_mbps: {file: wifi_rate.csv}, owd_ms: 10, buffer_packets: 60}
  - name: lte
    rate_mbps: 12
    owd_down_ms: [[0, 30], [1.5, 60], [2.5, 20]]
    owd_up_ms: [[0, 30], [1.5, 60], [2.5, 20]]
    buffer_bytes: 300000
workload: {bulk: {stop_s: 3}}
"""
WIFI_RATE = [(0.0, 20.0), (0.8, 8.0), (1.6, 25.0), (2.4, 15.0)]
EXE = str(Path(sys.executable).with_name("workbench"))


def _scenario(tmp: Path, kind: str) -> Path:
    if kind == "traces":
        (tmp / "wifi_rate.csv").write_text("t_s,rate_mbps\n" + "".join(f"{t},{r}\n" for t, r in WIFI_RATE))
    f = tmp / f"{kind}.yaml"
    f.write_text(CONSTANT if kind == "constant" else TRACES)
    return f


def _mean_rate(series: list[tuple[float, float]], t_end_s: float) -> float:
    total = 0.0
    for i, (t, r) in enumerate(series):
        nxt = series[i + 1][0] if i + 1 < len(series) else t_end_s
        total += r * max(min(nxt, t_end_s) - t, 0)
    return total / t_end_s


@pytest.mark.exclusive  # the kernel's join timing held to 3 ms: alone on the machine (under a parallel run the
# path manager's MP_JOIN was seen 27-50 ms late, twice in CI while other work shared the two cores)
@pytest.mark.parametrize("kind", ["constant", "traces"])
@pytest.mark.parametrize("direction", ["down", "up"])
def test_workbench_lab(kind: str, direction: str, tmp_path: Path) -> None:
    require_lab()
    sc = _scenario(tmp_path, kind)
    out = tmp_path / "out"
    p = subprocess.run([EXE, "lab", str(sc), "-o", str(out), "--direction", direction], capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 0, p.stderr + p.stdout
    print(p.stdout)
    assert {"client.pcap", "server.pcap", "packet_events.parquet", "accuracy_rate.parquet",
            "accuracy_delay.parquet", "run.json"} <= {f.name for f in out.iterdir()}
    doc = json.loads((out / "run.json").read_text())
    run, m, acc = doc["run"], doc["metrics"], doc["accuracy"]
    print(f"{kind} {direction}: wall {run['wall_s']} s, accuracy {acc}, warnings {doc['warnings']}")
    # the emulation hit its targets, and said how well
    assert doc["emulation_ok"] and acc["rate_bins"] >= 5 and acc["delay_bins"] >= 10, acc
    assert acc["rate_err_p50"] <= 0.02 and acc["delay_err_p50_ms"] <= 0.5
    # the data went the asked way, and the receiving application got exactly what the captures show
    assert m["data_dir"] == ("s2c" if direction == "down" else "c2s")
    receiver = run["endpoints"]["client" if direction == "down" else "server"]
    sender = run["endpoints"]["server" if direction == "down" else "client"]
    assert receiver["bytes_received"] == sender["bytes_sent"] == m["delivered_bytes"] > 1_000_000
    assert not receiver.get("deadline_hit") and not sender.get("error")
    # both paths carried data: the kernel path manager joined lte early
    joins = {s["path"]: s for s in run["subflows"]}
    assert set(joins) == {"wifi", "lte"} and joins["lte"]["join"] and 0 < joins["lte"]["start_ns"] < 1 * S
    assert m["bytes_wifi"] > 0 and m["bytes_lte"] > 0
    # no more than the programmed capacity (payload share of it) over the 3 s of writing
    wifi = [(0.0, 30.0)] if kind == "constant" else WIFI_RATE
    lte = 10.0 if kind == "constant" else 12.0
    end_s = (m["completion_s"] or 3.0) if m.get("completion_s") else 3.0
    cap_mbps = (_mean_rate(wifi, end_s) + lte) * PAYLOAD_SHARE
    assert 0.5 * cap_mbps <= m["goodput_mbps"] <= 1.03 * cap_mbps, (m["goodput_mbps"], cap_mbps)
    # drops: the FIFO's own count = what the delay line was refused
    for name, lk in run["emulation"]["links"].items():
        if run["delay_mode"] == "delayline":
            assert lk["fifo_drops"] == lk["qdisc_drops"], (name, lk)
    if kind == "traces":
        applied = [(c["link"], c["planned_ns"], c["applied_ns"]) for c in run["emulation"]["applied"]]
        planned = {(f"wifi/{d}", int(t * S)) for t, _ in WIFI_RATE[1:] for d in ("down", "up")}
        assert {(lk, t) for lk, t, _ in applied} == planned
        assert all(a - t < 300 * MS for _, t, a in applied), applied
        if run["delay_mode"] == "delayline":
            t0 = run["t0_ns"]
            for d in ("down", "up"):
                ch = run["emulation"]["links"][f"lte/{d}"]["changes"]
                assert [(c["t_ns"] - t0, c["owd_ns"]) for c in ch] == [(int(1.5 * S), 60 * MS), (int(2.5 * S), 20 * MS)]
    ev = pl.read_parquet(out / "packet_events.parquet")
    rcv = ev.filter(pl.col("point") == "rcv")
    assert rcv.height and rcv["owd_ns"].null_count() == 0
    # The path manager opens the join once the connection is fully established at the client: with the
    # server's first packet after the handshake, one wifi round trip (2 x 10 ms) after the SYN-ACK. The
    # model sends its join exactly then (linux-upstream's join_when_established; its own test pins that).
    syn, ack = 0x002, 0x010
    client = ev.filter(pl.col("point") == "rcv")  # packets for the client arrive there (s2c rows)
    synack = int(client.filter((pl.col("path") == "wifi") & (pl.col("dir") == "s2c")
                               & ((pl.col("flags") & (syn | ack)) == syn | ack))["t_ns"].min())  # type: ignore[arg-type]
    first_after = int(client.filter((pl.col("path") == "wifi") & (pl.col("dir") == "s2c") & (pl.col("t_ns") > synack)
                                    & ((pl.col("flags") & syn) == 0))["t_ns"].min())  # type: ignore[arg-type]
    join = int(ev.filter((pl.col("path") == "lte") & (pl.col("point") == "snd") & (pl.col("dir") == "c2s")
                         & ((pl.col("flags") & (syn | ack)) == syn))["t_ns"].min())  # type: ignore[arg-type]
    # One round trip, not none (a join at the SYN-ACK) and not two: under 1.5 round trips. Above the 20 ms
    # sit the delay line's lateness on two passes and both hosts' processing, which passed the old bound of
    # 23 ms in 4 of 32 runs on a slow day (23.1-23.4 ms where printed).
    assert 0 <= join - first_after <= 1 * MS, (synack, first_after, join)
    assert 20 * MS <= join - synack < 30 * MS, (synack, join)


def test_backend_api_finite_upload(tmp_path: Path) -> None:
    """What compare/report call: get_backend("kernel").run(experiment) -> Run with PacketEvents."""
    require_lab()
    from workbench.backends import get_backend
    from workbench.experiment import FiniteWorkload, experiment_from_paths, two_way_path
    from workbench.metrics import summarize

    e = experiment_from_paths([two_way_path("wifi", rate_bps=20e6, owd_ns=10 * MS, buffer_packets=100),
                               two_way_path("lte", rate_bps=10e6, owd_ns=30 * MS, buffer_bytes=200_000)],
                              workload=FiniteWorkload(2_000_000), direction="up", duration_ns=10 * S)
    run = get_backend("kernel").run(e, workdir=tmp_path / "w")
    assert run.backend == "kernel" and run.counters["emulation_ok"], run.warnings
    m = summarize(run.events)
    assert m["data_dir"] == "c2s" and m["delivered_bytes"] == 2_000_000
    assert Path(run.provenance["client_pcap"]).is_file() and Path(run.provenance["server_pcap"]).is_file()
    assert run.events["t_ns"].min() >= 0  # times from the run's time zero, like the model's
