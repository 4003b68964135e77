"""The kernel's own TCP state in a lab run (`workbench.backends._kernel.tcpprobe`): tcp_probe rows
parsed exactly, mapped to the capture's subflows by address and port (other sockets left out), and on a
real run: SAMPLES for every path of the data sender, their clock the capture's (each row within a
millisecond of the ACK the capture saw arrive), the RTT the kernel smoothed within the path's base RTT
and its queue, and the raw table in the run's folder."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests._kernel import require_lab
from workbench.backends._kernel.tcpprobe import _parse, probe_samples
from workbench.capture.schema import SAMPLES

LINES = """\
# tracer: nop
          <idle>-0       [001] ..s2.   100.000123: tcp_probe: family=AF_INET src=10.0.1.2:5201 dest=10.0.1.1:40001 mark=0x0 data_len=0 snd_nxt=0x10 snd_una=0x8 snd_cwnd=12 ssthresh=2147483647 snd_wnd=64256 srtt=20500 rcv_wnd=65160 sock_cookie=1 skbaddr=0 skaddr=0
          <idle>-0       [000] ..s2.   100.000200: tcp_probe: family=AF_INET src=10.0.1.1:40001 dest=10.0.1.2:5201 mark=0x0 data_len=1424 snd_nxt=0x1 snd_una=0x1 snd_cwnd=10 ssthresh=2147483647 snd_wnd=65535 srtt=21000 rcv_wnd=70000 sock_cookie=2 skbaddr=0 skaddr=0
          <idle>-0       [000] ..s2.   100.000300: tcp_probe: family=AF_INET src=10.0.2.2:5201 dest=10.0.2.1:40002 mark=0x0 data_len=0 snd_nxt=0xffffffff snd_una=0xfffffff0 snd_cwnd=20 ssthresh=14 snd_wnd=64256 srtt=60100 rcv_wnd=65160 sock_cookie=3 skbaddr=0 skaddr=0
          <idle>-0       [000] ..s2.   100.000400: tcp_probe: family=AF_INET src=10.0.1.2:5201 dest=10.0.1.1:49999 mark=0x0 data_len=0 snd_nxt=0x1 snd_una=0x1 snd_cwnd=10 ssthresh=7 snd_wnd=1 srtt=1 rcv_wnd=1 sock_cookie=4 skbaddr=0 skaddr=0
          <idle>-0       [000] ..s2.   100.000500: tcp_probe: family=AF_INET src=10.0.1.2:5201 truncated
"""
SUBFLOWS = pl.DataFrame({"subflow": [0, 1], "client": ["10.0.1.1:40001", "10.0.2.1:40002"],
                         "server": ["10.0.1.2:5201", "10.0.2.2:5201"], "path": ["p1", "p2"]})


def test_rows_parse_exactly_and_map_to_the_capture_subflows() -> None:
    rows = _parse(LINES, mono_to_wall_ns=5_000)
    assert rows.height == 4  # the truncated line is skipped, not guessed
    assert rows["t_ns"].to_list() == [100_000_123_000 + 5_000, 100_000_200_000 + 5_000,
                                      100_000_300_000 + 5_000, 100_000_400_000 + 5_000]
    assert rows["snd_nxt"][2] == 0xFFFFFFFF and rows["current_ssthresh_segments"][2] == 14
    samples, raw = probe_samples(rows, SUBFLOWS, t0_ns=100_000_000_000, sender="server")
    assert dict(samples.schema) == SAMPLES
    # the server's two sockets of this capture; the client's socket goes to the raw table only, and the
    # socket on port 49999 (another connection, another lab run) nowhere
    assert samples["path"].to_list() == ["p1", "p2"]
    assert samples["cwnd_segments"].to_list() == [12.0, 20.0]
    assert samples["srtt_ns"].to_list() == [20_500_000, 60_100_000]
    assert samples["t_ns"].to_list() == [128_000, 305_000]
    assert samples["inflight_segments"].null_count() == 2  # not approximated
    assert sorted(zip(raw["side"], raw["path"], strict=True)) == [("client", "p1"), ("server", "p1"), ("server", "p2")]
    up, _ = probe_samples(rows, SUBFLOWS, t0_ns=0, sender="client")
    assert up["cwnd_segments"].to_list() == [10.0]


@pytest.mark.slow
def test_a_lab_run_records_the_kernels_cwnd_and_rtt(tmp_path: Path) -> None:
    require_lab()
    from workbench.backends import get_backend
    from workbench.experiment import BulkWorkload, experiment_from_paths, two_way_path

    owd_ms = {"wifi": 10, "lte": 30}
    e = experiment_from_paths(
        [two_way_path("wifi", rate_bps=20e6, owd_ns=owd_ms["wifi"] * 1e6, buffer_packets=40),
         two_way_path("lte", rate_bps=8e6, owd_ns=owd_ms["lte"] * 1e6, buffer_packets=40)],
        workload=BulkWorkload(stop_ns=2_000_000_000), scheduler="upstream", duration_ns=3_000_000_000)
    run = get_backend("kernel").run(e, workdir=tmp_path / "lab")
    assert run.provenance["kernel_state"] == "recorded"
    s = run.samples
    assert s is not None and dict(s.schema) == SAMPLES
    for path, owd in owd_ms.items():
        mine = s.filter(pl.col("path") == path)
        assert mine.height >= 200, path  # one row per ACK the server's subflow received
        srtt_ms = mine["srtt_ns"].median() / 1e6  # type: ignore[operator]
        # base RTT .. base RTT + a full 40-packet queue (1514-byte frames) + 5 ms of host time
        queue_ms = 40 * 1514 * 8 / (20e6 if path == "wifi" else 8e6) * 1e3
        assert 2 * owd <= srtt_ms <= 2 * owd + queue_ms + 5, (path, srtt_ms)
        assert mine["cwnd_segments"].min() >= 1 and mine["cwnd_segments"].max() > 10  # type: ignore[operator]
        # the probe's clock is the capture's: each row within 1 ms of an ACK the server's capture saw
        acks = (run.events.filter((pl.col("point") == "rcv") & (pl.col("dir") == "c2s") & (pl.col("path") == path))
                .select(pl.col("t_ns").alias("t_ack")).sort("t_ack"))
        near = mine.select("t_ns").sort("t_ns").join_asof(acks, left_on="t_ns", right_on="t_ack", strategy="nearest")
        off_us = ((near["t_ns"] - near["t_ack"]).abs() / 1e3)
        assert off_us.median() < 1000, (path, off_us.median())  # type: ignore[operator]
    raw = pl.read_parquet(tmp_path / "lab" / "tcp_probe.parquet")
    assert set(raw["side"]) == {"client", "server"} and set(raw["path"]) == set(owd_ms)


def test_instances_of_dead_runs_are_swept() -> None:
    """A lab run killed before its cleanup leaves a tracefs instance (its buffers); the next run removes it,
    and leaves the instances of live processes alone."""
    require_lab()
    import os

    from workbench.backends._kernel.tcpprobe import _tracefs, sweep_stale_instances

    root = _tracefs()
    assert root is not None, "tracefs is needed for the kernel's state"
    gone = root / "instances" / "workbench-999999999-deadbeef"  # no such process
    live = root / "instances" / f"workbench-{os.getpid()}-alive000"
    gone.mkdir()
    live.mkdir()
    try:
        assert sweep_stale_instances() >= 1
        assert not gone.exists() and live.exists()
    finally:
        for d in (gone, live):
            if d.exists():
                d.rmdir()
