"""Estimation of path timelines from synthetic PacketEvents with a known schedule.

The generator below is a small packet-level model of one path: the server sends 1514-byte frames
under a Reno-like window; each crosses a propagation delay, then a drop-tail FIFO served at a known capacity
schedule (the lab's layout: the bottleneck is right before the client), optionally after random
loss. Lost packets are retransmitted; the client ACKs every packet cumulatively; ACKs take a fixed
uplink delay. Both ends' rows are emitted (a "pair", with owd_ns), so single-capture views are the
rows of one end. The estimator must recover what the generator was given.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass

import numpy as np
import polars as pl
import pytest

from workbench.capture.schema import PACKET_EVENTS
from workbench.timeline import EstimateOptions, estimate_bins, estimate_timelines, rtt_samples

FRAME = 1514
PAYLOAD = 1448
MS = 1_000_000
S = 1_000_000_000


@dataclass
class Synth:
    events: pl.DataFrame
    n_random_losses: int
    n_overflow_drops: int
    n_sent_first: int


def _step(schedule: list[tuple[int, float]], t: int) -> float:
    v = schedule[0][1]
    for ts, x in schedule:
        if ts <= t:
            v = x
    return v


def synth_path(*, capacity: list[tuple[int, float]], owd_down_ns: int, owd_up_ns: int, buffer_bytes: int,
               paced: list[tuple[int, int, float]] = (), loss: float = 0.0, duration_ns: int = 10 * S,
               seed: int = 1, path: str = "wifi", t0_ns: int = 1_700_000_000 * S) -> Synth:
    """PacketEvents of one path (see the module docstring). ``capacity``: [(t_ns, bit/s)] steps
    relative to the start. The sender is window-limited (Reno-like: +1/cwnd per ACK, halved at most
    once per RTT on loss, slow start first) except in ``paced`` windows [(start_ns, end_ns, bit/s)], where the
    application offers new data only at that rate (so the queue can drain)."""
    rng = random.Random(seed)
    rows: list[dict] = []
    events: list[tuple[int, int, str, int]] = [(0, 0, "wake", 0)]  # (time, tiebreak, kind, seq)
    order = 1
    queue: deque[tuple[int, int]] = deque()  # (departure time, bytes) of packets in the FIFO
    q_bytes, last_dep = 0, 0
    n_rand = n_over = n_first = 0
    deliveries: list[tuple[int, int, int, bool, int, int]] = []  # (t_rcv, seq, t_snd, retrans, TSval, TSecr)
    ts_recent = 0  # TSval of the latest ACK the sender has seen (TCP timestamps, 1 ms clock)
    cwnd, ssthresh, inflight, next_seq, last_cut, next_app = 10.0, float("inf"), 0, 0, -S, 0
    retx_q: deque[int] = deque()
    wake_at = -1

    def pace_at(t: int) -> float | None:
        for a, b, r in paced:
            if a <= t < b:
                return r
        return None

    def send(t: int, seq: int, retx: bool) -> None:
        nonlocal q_bytes, last_dep, n_rand, n_over, order, inflight
        inflight += 1
        tsv, tse = t // MS, ts_recent
        rows.append(_row(t, "s2c", "snd", seq, 0, PAYLOAD, FRAME, retx, None, path, tsv, tse))
        arr = t + owd_down_ns
        while queue and queue[0][0] <= arr:
            q_bytes -= queue.popleft()[1]
        dropped = None
        if loss and not retx and rng.random() < loss:
            n_rand += 1
            dropped = "random"
        elif q_bytes + FRAME > buffer_bytes:
            n_over += 1
            dropped = "overflow"
        if dropped:
            # Detected by duplicate ACKs: about when the next packet's ACK reaches the sender.
            wait = max(last_dep - arr, 0)
            heapq.heappush(events, (arr + wait + owd_up_ns + 2 * MS, order, "lost", seq))
        else:
            start = max(arr, last_dep)
            dep = start + round(FRAME * 8e9 / _step(capacity, start))
            last_dep = dep
            queue.append((dep, FRAME))
            q_bytes += FRAME
            deliveries.append((dep, seq, t, retx, tsv, tse))
            heapq.heappush(events, (dep + owd_up_ns, order, "ack", seq))
        order += 1

    while events:
        t, _, kind, seq = heapq.heappop(events)
        if t >= duration_ns and kind == "wake":
            continue
        if kind == "ack":
            inflight -= 1
            ts_recent = (t - owd_up_ns) // MS
            cwnd += 1 if cwnd < ssthresh else 1 / cwnd  # slow start, then congestion avoidance
        elif kind == "lost":
            inflight -= 1
            retx_q.append(seq)
            if t - last_cut > owd_down_ns + owd_up_ns + 50 * MS:
                ssthresh = cwnd = max(cwnd / 2, 2.0)
                last_cut = t
        # Send what the window (and, when paced, the application) allows, 1 us apart.
        tx = t
        while inflight < cwnd:
            if retx_q:
                send(tx, retx_q.popleft(), True)
            elif tx < duration_ns:
                rate = pace_at(tx)
                if rate is not None:
                    if next_app > tx:
                        if wake_at != next_app:  # one pending wake-up is enough
                            heapq.heappush(events, (next_app, order, "wake", 0))
                            order, wake_at = order + 1, next_app
                        break
                    next_app = max(next_app, tx) + round(FRAME * 8e9 / rate)
                send(tx, next_seq, False)
                next_seq += PAYLOAD
                n_first += 1
            else:
                break
            tx += 1000
    received: set[int] = set()
    cum = 0
    deliveries.sort()
    for t_rcv, s, t_snd, retx, tsv, tse in deliveries:
        rows.append(_row(t_rcv, "s2c", "rcv", s, 0, PAYLOAD, FRAME, retx, t_rcv - t_snd, path, tsv, tse))
        received.add(s)
        while cum in received:
            cum += PAYLOAD
        ack_ts = t_rcv // MS
        rows.append(_row(t_rcv, "c2s", "snd", 0, cum, 0, 66, False, None, path, ack_ts, tsv))
        rows.append(_row(t_rcv + owd_up_ns, "c2s", "rcv", 0, cum, 0, 66, False, owd_up_ns, path, ack_ts, tsv))
    ev = pl.DataFrame(rows, infer_schema_length=None).with_columns(pl.col("t_ns") + t0_ns)
    ev = ev.with_columns(
        conn=pl.lit(0), subflow=pl.lit(0), flags=pl.lit(0x10), rwnd_bytes=pl.lit(1 << 20), dsn=pl.lit(None),
        data_ack=pl.lit(None), data_fin=pl.lit(False), is_reinject=pl.lit(False),
    ).select(list(PACKET_EVENTS)).cast(PACKET_EVENTS).sort("t_ns")  # type: ignore[arg-type]
    return Synth(ev, n_rand, n_over, n_first)


def _row(t: int, d: str, point: str, seq: int, ack: int, payload: int, frame: int, retx: bool,
         owd: int | None, path: str, ts_val: int, ts_ecr: int) -> dict:
    return {"t_ns": t, "path": path, "dir": d, "point": point, "seq": seq + 1, "ack": ack + 1 if ack else 0,
            "payload_bytes": payload, "frame_bytes": frame, "is_retrans": retx, "owd_ns": owd,
            "ts_val": ts_val, "ts_ecr": ts_ecr}


def only(ev: pl.DataFrame, end: str) -> pl.DataFrame:
    """The rows one capture would hold: at the server (data snd, ACK rcv) or the client."""
    if end == "server":
        keep = ((pl.col("dir") == "s2c") & (pl.col("point") == "snd")) | ((pl.col("dir") == "c2s") & (pl.col("point") == "rcv"))
    else:
        keep = ((pl.col("dir") == "s2c") & (pl.col("point") == "rcv")) | ((pl.col("dir") == "c2s") & (pl.col("point") == "snd"))
    return ev.filter(keep).with_columns(owd_ns=pl.lit(None, pl.Int64))


# Window-limited 2 s out of every 3 (the queue fills and overflows), application-paced at half the
# capacity the third second (it drains). 30 Mbit/s, 10 ms / 15 ms base, 50-frame buffer.
CAP = 30e6
BUF = 50 * FRAME


@pytest.fixture(scope="module")
def busy() -> Synth:
    paced = [((sec + 2) * S, (sec + 3) * S, 0.5 * CAP) for sec in range(0, 12, 3)]
    return synth_path(capacity=[(0, CAP)], paced=paced, owd_down_ns=10 * MS, owd_up_ns=15 * MS, buffer_bytes=BUF)


TX_NS = FRAME * 8e9 / CAP  # one frame's transmission time at the bottleneck


@pytest.mark.parametrize("view", ["pair", "server", "client"])
def test_constant_path_recovered(busy: Synth, view: str) -> None:
    ev = busy.events if view == "pair" else only(busy.events, view)
    tl = estimate_timelines(ev)["wifi"]
    s = tl.steps
    measured = s.filter(pl.col("capacity_down_bps_src") == "measured")["capacity_down_bps"]
    assert measured.len() >= 40  # two thirds of ~100 bins are overloaded
    assert abs(measured.median() / CAP - 1) < 0.01
    # Base delay: propagation + one frame time (the estimator cannot tell them apart).
    if view == "pair":
        assert abs(s["owd_down_ns"].median() - (10 * MS + TX_NS)) < 0.2 * MS
        assert abs(s["owd_up_ns"].median() - 15 * MS) < 0.01 * MS
        assert set(s["owd_down_ns_src"].to_list()) == {"measured"}
    else:
        rtt = 25 * MS + TX_NS
        assert abs(s["owd_down_ns"].median() - rtt / 2) < 0.5 * MS
        assert abs(s["owd_up_ns"].median() - rtt / 2) < 0.5 * MS
        assert set(s["owd_down_ns_src"].to_list()) == {"estimated"}
    # Buffer: the queue overflowed (drops), so it is the buffer, within 5 %.
    assert busy.n_overflow_drops > 0
    assert not tl.buffer_is_lower_bound
    assert abs(tl.buffer_down_bytes / BUF - 1) < 0.05
    # Every loss was an overflow: no random loss.
    assert s["loss_down"][0] == 0.0
    # Unknowns stay unknown.
    assert s["capacity_up_bps"].null_count() == s.height
    assert tl.buffer_up_bytes is None
    assert tl.t0_epoch_ns == int(ev["t_ns"].min())  # t = 0 is the capture's first packet


def test_rtt_split_ratio(busy: Synth) -> None:
    ev = only(busy.events, "server")
    tl = estimate_timelines(ev, rtt_split=0.4)["wifi"]
    rtt = 25 * MS + TX_NS
    assert abs(tl.steps["owd_down_ns"].median() - 0.4 * rtt) < 0.5 * MS
    assert abs(tl.steps["owd_up_ns"].median() - 0.6 * rtt) < 0.5 * MS


def test_unsaturated_bins_are_max_filtered(busy: Synth) -> None:
    bins = estimate_bins(busy.events).filter(pl.col("path") == "wifi")
    light = bins.filter(~pl.col("saturated") & (pl.col("delivered_bytes") > 0))
    assert light.height > 10
    # Not filled: known from dispersion or only as a lower bound (a paced sender's spacing is not taken
    # for the bottleneck's: the lower bound from saturated neighbours overrules it).
    assert set(light["capacity_src"].to_list()) <= {"lower_bound", "dispersion"}
    # The max-filter reaches back into saturated neighbours: never below what the bin delivered.
    assert (light["capacity_bps"] >= light["delivery_bps"] - 1).all()
    # Bins in the light phase deliver about half the capacity and are not saturated.
    assert light.filter(pl.col("delivery_bps") < 0.6 * CAP).height > 5


def test_random_loss_without_queue() -> None:
    # Offered 0.6 x capacity: the queue never builds, every loss is random.
    syn = synth_path(capacity=[(0, CAP)], paced=[(0, 10 * S, 0.6 * CAP)], owd_down_ns=20 * MS, owd_up_ns=20 * MS,
                     buffer_bytes=BUF, loss=0.02, seed=7)
    assert syn.n_overflow_drops == 0
    tl = estimate_timelines(syn.events)["wifi"]
    p = syn.n_random_losses / syn.n_sent_first
    est = tl.steps["loss_down"][0]
    assert abs(est - p) < 1e-3
    assert abs(est - 0.02) < 0.005  # binomial: ~15k packets, sd ~ 0.0011
    # No queue ever: the buffer is only known as a lower bound, and small.
    assert tl.buffer_is_lower_bound
    assert tl.buffer_down_bytes < 2 * FRAME
    assert tl.steps.filter(pl.col("capacity_down_bps_src") == "measured").height == 0


def test_time_varying_capacity_tracked() -> None:
    rates = [40e6, 25e6, 10e6, 5e6, 20e6, 35e6, 15e6, 30e6]
    cap = [(i * S, r) for i, r in enumerate(rates)]
    syn = synth_path(capacity=cap, owd_down_ns=40 * MS, owd_up_ns=40 * MS,
                     buffer_bytes=400 * FRAME, duration_ns=8 * S)
    bins = estimate_bins(syn.events, EstimateOptions(bin_ns=100 * MS)).filter(pl.col("saturated"))
    assert bins.height > 60
    t0 = int(syn.events["t_ns"].min())
    expected = np.array([_step(cap, int(t - t0 + 50 * MS)) for t in bins["t_epoch_ns"].to_list()])
    est = bins["capacity_bps"].to_numpy()
    assert np.corrcoef(est, expected)[0, 1] > 0.98
    assert np.median(np.abs(est / expected - 1)) < 0.02


def test_rtt_samples_skip_recovery() -> None:
    # At the sender, ACKs that close a hole filled by a retransmission are not RTT samples: the
    # largest sample is the base RTT plus at most a full queue plus a frame.
    syn = synth_path(capacity=[(0, CAP)], owd_down_ns=10 * MS, owd_up_ns=15 * MS, buffer_bytes=BUF,
                     duration_ns=3 * S)
    s, how = rtt_samples(only(syn.events, "server"), "s2c")
    assert how == "ack-match"
    assert s.height > 1000
    assert s["rtt_ns"].max() <= 25 * MS + (BUF / FRAME + 2) * TX_NS
    assert s["rtt_ns"].min() >= 25 * MS


def test_receiver_side_ts_echo() -> None:
    # A receiver-side capture with TCP timestamps: RTT from TSval of ACKs echoed by later data.
    rows = []
    t_ack = 0
    for i in range(200):
        t_ack = i * 10 * MS
        rows.append({"t_ns": t_ack, "dir": "c2s", "point": "snd", "ts_val": 1000 + i, "ts_ecr": None,
                     "payload_bytes": 0, "frame_bytes": 66})
        # The server answers each ACK with data echoing it: it arrives 30 ms later.
        rows.append({"t_ns": t_ack + 30 * MS, "dir": "s2c", "point": "rcv", "ts_val": 5000 + i, "ts_ecr": 1000 + i,
                     "payload_bytes": PAYLOAD, "frame_bytes": FRAME})
    ev = pl.DataFrame(rows, infer_schema_length=None).with_columns(
        conn=pl.lit(0), subflow=pl.lit(0), path=pl.lit("p"), seq=pl.lit(1), ack=pl.lit(1), flags=pl.lit(0x10),
        rwnd_bytes=pl.lit(1 << 20), dsn=pl.lit(None), data_ack=pl.lit(None), data_fin=pl.lit(False),
        is_retrans=pl.lit(False), is_reinject=pl.lit(False), owd_ns=pl.lit(None),
    ).select(list(PACKET_EVENTS)).cast(PACKET_EVENTS).sort("t_ns")  # type: ignore[arg-type]
    s, how = rtt_samples(ev, "s2c")
    assert how == "ts-echo"
    assert s.height == 200
    assert (s["rtt_ns"] == 30 * MS).all()
    tl = estimate_timelines(ev)["p"]
    assert tl.steps["owd_down_ns"].median() == 15 * MS


def test_receiver_side_without_timestamps(busy: Synth) -> None:
    # A receiver without TCP timestamps (and no handshake in the events): the delay comes from the ACK
    # clock of the flights (median RTT), the buffer stays unknown, capacity is never above the path's,
    # and the caveats say where the delay came from.
    ev = only(busy.events, "client").with_columns(ts_val=pl.lit(None, pl.UInt32), ts_ecr=pl.lit(None, pl.UInt32))
    tl = estimate_timelines(ev)["wifi"]
    s = tl.steps
    rtt = 25 * MS + TX_NS
    assert abs(s["owd_down_ns"].median() - rtt / 2) < 1 * MS
    assert set(s["owd_down_ns_src"].to_list()) == {"estimated"}
    assert tl.buffer_down_bytes is None and not tl.buffer_is_lower_bound
    assert set(s["capacity_down_bps_src"].to_list()) <= {"lower_bound", "dispersion", "estimated"}
    assert s["capacity_down_bps"].max() <= CAP * 1.01
    kinds = {c.kind for c in tl.caveats}
    assert {"delay_handshake", "single_vantage"} <= kinds


def test_primary_path_first_and_two_paths() -> None:
    a = synth_path(capacity=[(0, 10e6)], owd_down_ns=40 * MS, owd_up_ns=40 * MS,
                   buffer_bytes=BUF, duration_ns=3 * S, path="lte")
    b = synth_path(capacity=[(0, CAP)], owd_down_ns=10 * MS, owd_up_ns=10 * MS,
                   buffer_bytes=BUF, duration_ns=3 * S, path="wifi")
    ev = pl.concat([a.events, b.events.with_columns(subflow=pl.lit(1, pl.UInt32))]).sort("t_ns")
    tls = estimate_timelines(ev)
    assert list(tls) == ["lte", "wifi"]  # subflow 0 (the initial one) is on lte
    assert abs(tls["lte"].steps.filter(pl.col("capacity_down_bps_src") == "measured")["capacity_down_bps"].median()
               / 10e6 - 1) < 0.01
    assert abs(tls["wifi"].steps.filter(pl.col("capacity_down_bps_src") == "measured")["capacity_down_bps"].median()
               / CAP - 1) < 0.01
    # Both on one time axis: the earliest event of either path is t = 0.
    assert tls["lte"].t0_epoch_ns == tls["wifi"].t0_epoch_ns == int(ev["t_ns"].min())


def test_bad_input() -> None:
    from workbench.errors import InputError

    with pytest.raises(InputError, match="not PacketEvents"):
        estimate_timelines(pl.DataFrame({"t_ns": [1]}))
    with pytest.raises(InputError, match="no packets"):
        estimate_timelines(pl.DataFrame(schema=PACKET_EVENTS))
    with pytest.raises(ValueError, match="rtt_split"):
        EstimateOptions(rtt_split=1.5)
