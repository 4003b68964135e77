"""One vantage point, missing subflows, delay without timestamps (issue 14).

Truth: replays of known paths (tests/_truth.py), seen from both ends or from the client alone, and
hand-built handshakes whose times are known."""

from __future__ import annotations

import polars as pl
import pytest
from _truth import FRAME, MS, S, path, replay_truth

from workbench.timeline import estimate_timelines, fill_unknown
from workbench.timeline._vantage import handshake_rtt_ns, missing_subflow_bytes


@pytest.fixture(scope="module")
def overflowing():
    # Both paths overflow their FIFOs now and then (bulk, small buffers).
    return replay_truth([path("wifi", rate_bps=20e6, owd_ms=10, buffer_bytes=40 * FRAME),
                         path("lte", rate_bps=10e6, owd_ms=30, buffer_bytes=60 * FRAME)], duration_s=8)


def test_single_vantage_is_said_only_for_one_capture(overflowing) -> None:
    pair = estimate_timelines(overflowing.view("pair"))
    client = estimate_timelines(overflowing.view("client"))
    assert "single_vantage" not in {c.kind for c in pair.caveats}
    one = [c for c in client.caveats if c.kind == "single_vantage"]
    assert len(one) == 1 and one[0].path == "" and "client capture only" in one[0].message
    # It travels with the timelines into what the replay is given.
    assert "single_vantage" in {c.kind for c in fill_unknown(client.primary).caveats}


@pytest.mark.parametrize("view", ["pair", "client"])
def test_best_estimate_from_one_end(overflowing, view: str) -> None:
    # Buffers within 25 % (they overflowed), every loss an overflow, delays within 1 ms of what the
    # view can see (the client: RTT / 2 each way).
    tls = estimate_timelines(overflowing.view(view))
    for p in overflowing.paths:
        tl = tls[p.name]
        assert not tl.buffer_is_lower_bound
        assert tl.buffer_down_bytes == pytest.approx(p.buffer_down_bytes, rel=0.25)
        assert tl.loss_classes["random"] == 0 and float(tl.steps["loss_down"][0]) == 0.0
        ser = FRAME * 8e9 / p.rate_down_bps.at(0)
        down, up = p.owd_down_ns.at(0) + ser, p.owd_up_ns.at(0)
        if view == "client":
            down = up = (down + up) / 2
        assert abs(tl.steps["owd_down_ns"].median() - down) < 1 * MS
        assert abs(tl.steps["owd_up_ns"].median() - up) < 1 * MS


def test_missing_subflow_bytes_from_data_acks(overflowing) -> None:
    ev = overflowing.view("client")
    lte_bytes = int(ev.filter((pl.col("path") == "lte") & (pl.col("dir") == "s2c"))
                    .unique(["subflow", "seq"])["payload_bytes"].sum())
    assert missing_subflow_bytes(ev, "s2c") == 0
    wifi_only = ev.filter(pl.col("path") == "wifi")
    missing = missing_subflow_bytes(wifi_only, "s2c")
    # Everything lte carried (less what was still in flight at the end of the capture).
    assert missing == pytest.approx(lte_bytes, rel=0.02)
    c = [c for c in estimate_timelines(wifi_only).caveats if c.kind == "missing_subflows"]
    assert len(c) == 1 and f"at least {missing} bytes" in c[0].message


def _handshake(path_name: str, sf: int, t_syn: int, rtt: int, first_exchange: int | None,
               syn_retries: int = 0) -> list[dict]:
    """Client-side rows of one subflow: SYN (+ retries 1 s apart), SYN/ACK, the client's ACK, and the
    server's first data segment ``first_exchange`` after it."""
    base = {"conn": 0, "subflow": sf, "path": path_name, "seq": 0, "ack": 0, "frame_bytes": None,
            "rwnd_bytes": None, "dsn": None, "data_ack": None, "data_fin": None, "is_retrans": False,
            "is_reinject": False, "ts_val": None, "ts_ecr": None, "owd_ns": None}
    rows = [base | {"t_ns": t_syn + k * S, "dir": "c2s", "point": "snd", "flags": 0x002, "payload_bytes": 0}
            for k in range(syn_retries + 1)]
    t_sa = t_syn + syn_retries * S + rtt
    rows.append(base | {"t_ns": t_sa, "dir": "s2c", "point": "rcv", "flags": 0x012, "payload_bytes": 0})
    rows.append(base | {"t_ns": t_sa + 50_000, "dir": "c2s", "point": "snd", "flags": 0x010, "payload_bytes": 0})
    if first_exchange is not None:
        rows.append(base | {"t_ns": t_sa + 50_000 + first_exchange, "dir": "s2c", "point": "rcv", "flags": 0x010,
                            "payload_bytes": 1228, "seq": 1})
    return rows


def test_handshake_and_first_exchange() -> None:
    rows = [*_handshake("a", 0, 0, 80 * MS, None, syn_retries=1),   # SYN retried: 80 ms, not 1.08 s
            *_handshake("b", 1, 10 * MS, 400 * MS, 45 * MS),         # idle radio: the exchange wins
            *_handshake("b", 2, 20 * MS, 420 * MS, 60 * MS)]         # the path's smallest sample
    ev = pl.DataFrame(rows).with_columns(pl.col("dir").cast(pl.Enum(["c2s", "s2c"])),
                                         pl.col("point").cast(pl.Enum(["snd", "rcv", "drop"])))
    got = handshake_rtt_ns(ev)
    assert got == {"a": 80 * MS, "b": 45 * MS}


@pytest.mark.slow
def test_timeline_table_shows_the_caveats(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from _paths import SHARED_TRACES, require

    lab = SHARED_TRACES / "lab" / "c07"
    require(lab / "client.pcap")
    exe = Path(sys.executable).with_name("workbench")
    p = subprocess.run([str(exe), "timeline", str(lab / "client.pcap"), "-o", str(tmp_path / "t.json")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "caveats" in p.stdout
    assert "single_vantage" in p.stdout and "caveat: capture: one vantage point" in p.stdout
    assert "buffer_lower_bound" in p.stdout  # lte never overflowed in c07
