"""Invariants of the model (the replay engine through `get_backend("model")`) that hold for every
registered scheduler, property-based over random path timelines (issue 13):

- goodput is never above the capacity of the paths (the payload share of the frames the bottlenecks
  can carry: advmss over advmss + per-frame overhead);
- MPTCP-level delivery is exactly once: the data the receiver got covers the stream from DSN 0 without
  a hole, the sender's last DATA_ACK is exactly its end, and a finite transfer delivers exactly its size;
- one path, ample buffers (2 BDP), no random loss: 85-100 % of the capacity once past slow start;
- two stable paths, ample buffers: no scheduler below 90 % of the best single path (plain TCP on
  each path alone), except the ones `NAMED_EXCEPTIONS` names, with why and the numbers measured.

Outage recovery is covered by tests/test_replay_recovery.py. Hypothesis is derandomized and the
examples bounded: the file takes about 2 minutes on one core.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.backends import get_backend
from workbench.experiment import (
    BulkWorkload,
    Experiment,
    FiniteWorkload,
    StepSeries,
    experiment_from_paths,
    stack_profile,
    two_way_path,
)
from workbench.schedulers import available

_MS = 1_000_000
_S = 1_000_000_000
SCHEDULERS = available()
STACK = stack_profile("linux-upstream")
# Payload per frame on the wire: advmss over advmss + IPv4/TCP(timestamps)/DSS/Ethernet overhead
# (StackProfile.frame_overhead_bytes None = 90 bytes, as Linux MPTCP).
PAYLOAD_SHARE = STACK.advmss / (STACK.advmss + 90)

# Schedulers allowed below 90 % of the best single path on stable paths with ample buffers, and why.
# For these the test asserts the floor the mechanism explains instead, so it still fails if they collapse
# further: "n_slowest" = 70 % of (number of paths x the slowest single path), capped at 90 % of the best one.
_HOL_WHY = ("queues data on a subflow beyond its cwnd (upstream Linux's linger-time bursts; OTIAS's planned "
            "queues), so with a 10x rate gap the slow subflow holds the oldest unacknowledged data for hundreds "
            "of ms while the MPTCP send buffer (autotuned, tcp_wmem: 2 x max cwnd x 2304 B per subflow) fills and "
            "a blocked writer waits for a third of it to free (sk_stream_write_space). The real kernel does "
            "the same: rate-x10 in docs/FIDELITY.md (20 + 2 Mbit/s, 10 ms each) gets 10.7 Mbit/s on the kernel "
            "against 19.1 on the fast path alone (0.56 x); the model gives upstream 0.60-0.66 x and OTIAS 0.88 x "
            "there. Floor: half the best single path, below what the kernel's own default scheduler reaches.")

NAMED_EXCEPTIONS: dict[str, dict[str, str]] = {
    "upstream": {"floor": "half_best", "why": "the upstream default scheduler " + _HOL_WHY},
    "otias": {"floor": "half_best", "why": "OTIAS " + _HOL_WHY},
    "daps": {
        "floor": "n_slowest",
        "why": "DAPS hands each subflow its planned share of a schedule period without a cwnd test (Kuhn et "
               "al. 2014; the kau module's mptcp_next_segment): with equal one-way delays every subflow gets "
               "one turn per period, so the slow subflow's queued turns pace the whole connection at 0.75-1.0 "
               "x (n x the slowest path) (hypothesis from the mechanism). Measured: 2.95 Mbit/s against 4.78 on the best single path (5 + 2 "
               "Mbit/s, 5 ms each), 3.68 against 9.56 (10 + 2 Mbit/s, 5 ms each); 2 BDP buffers, 4 s bulk. "
               "Whether the kau module really behaves so (the planned cwnd C_i should differ per path) is "
               "not checked against it here.",
    },
}


def _bdp_bytes(rate_bps: float, owd_ms: float) -> float:
    return rate_bps / 8 * 2 * owd_ms / 1e3


@st.composite
def _path_timeline(draw: st.DrawFn, *, end_s: float) -> dict:
    """Capacity: 1-3 steps of 2-30 Mbit/s (an outage step of rate 0 possible); one-way delay: 1-2
    steps of 5-60 ms; buffer 0.5-4 BDP (at the highest rate and delay)."""
    n = draw(st.integers(1, 3))
    t = sorted({0, *(draw(st.integers(1, int(end_s * 10) - 1)) * 100 * _MS for _ in range(n - 1))})
    rates = [draw(st.sampled_from([0.0, 2e6, 5e6, 10e6, 20e6, 30e6])) if i else
             draw(st.sampled_from([2e6, 5e6, 10e6, 20e6, 30e6])) for i in range(len(t))]
    owd_t = [0, *([draw(st.integers(1, int(end_s * 10) - 1)) * 100 * _MS] if draw(st.booleans()) else [])]
    owds = [draw(st.integers(5, 60)) * _MS for _ in owd_t]
    buf = max(int(draw(st.sampled_from([0.5, 1.0, 2.0, 4.0])) * _bdp_bytes(max(rates), max(owds) / _MS)), 3000)
    return {"rate": StepSeries(tuple(t), tuple(rates)), "owd": StepSeries(tuple(owd_t), tuple(float(x) for x in owds)),
            "buffer_bytes": buf}


def _experiment(paths: list[dict], scheduler: str, workload, *, end_ns: int, direction: str = "down",
                seed: int = 0) -> Experiment:
    specs = [two_way_path(f"p{i + 1}", rate_bps=p["rate"], owd_ns=p["owd"], buffer_bytes=p["buffer_bytes"])
             for i, p in enumerate(paths)]
    return experiment_from_paths(specs, workload=workload, scheduler=scheduler, direction=direction,  # type: ignore[arg-type]
                                 stack=STACK, seed=seed, duration_ns=end_ns)


def _data_rows(events: pl.DataFrame, point: str, direction: str) -> pl.DataFrame:
    d = "s2c" if direction == "down" else "c2s"
    return events.filter((pl.col("point") == point) & (pl.col("dir") == d) & (pl.col("payload_bytes") > 0)
                         & pl.col("dsn").is_not_null())


def _coverage(rcv: pl.DataFrame) -> list[tuple[int, int]]:
    """Union of the received DSN ranges, as sorted disjoint [start, end) intervals."""
    out: list[tuple[int, int]] = []
    for a, n in sorted(zip(rcv["dsn"].to_list(), rcv["payload_bytes"].to_list(), strict=True)):
        b = a + n
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _capacity_bytes(rate: StepSeries, end_ns: int) -> float:
    """Bytes a link of this capacity timeline can carry in [0, end_ns]."""
    total = 0.0
    steps = [(t, v) for t, v in zip(rate.t_ns, rate.values, strict=True) if t < end_ns]
    for (t, v), nxt in zip(steps, [*(s[0] for s in steps[1:]), end_ns], strict=True):
        total += v / 8 * (nxt - t) / 1e9
    return total


def _new_bytes_between(rcv: pl.DataFrame, t0_ns: int, t1_ns: int) -> int:
    """Stream bytes first received in [t0, t1): each segment counts at its first arrival, and a range
    overlapping lower data already counted is clipped, so every byte counts at most once."""
    seg = (rcv.group_by("dsn").agg(pl.col("t_ns").min(), pl.col("payload_bytes").max()).sort("dsn")
           .with_columns((pl.col("dsn") + pl.col("payload_bytes")).alias("end")))
    end = seg["end"].to_numpy().astype(np.int64)
    prev_end = np.concatenate([[0], np.maximum.accumulate(end)[:-1]])
    new = np.clip(end - np.maximum(seg["dsn"].to_numpy().astype(np.int64), prev_end), 0, None)
    t = seg["t_ns"].to_numpy()
    return int(new[(t >= t0_ns) & (t < t1_ns)].sum())


# --- goodput within capacity, exactly-once delivery -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", SCHEDULERS)
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(p1=_path_timeline(end_s=2.5), p2=_path_timeline(end_s=2.5), finite_kb=st.sampled_from([0, 150, 600]),
       upload=st.booleans())
def test_capacity_bound_and_exactly_once(scheduler: str, p1: dict, p2: dict, finite_kb: int, upload: bool) -> None:
    end_ns = int(2.5 * _S)
    direction = "up" if upload else "down"
    wl = FiniteWorkload(finite_kb * 1000) if finite_kb else BulkWorkload(stop_ns=2 * _S)
    run = get_backend("model").run(_experiment([p1, p2], scheduler, wl, end_ns=end_ns, direction=direction))
    ev = run.events
    rcv = _data_rows(ev, "rcv", direction)
    cov = _coverage(rcv)
    acked = _acked(ev, direction)
    # Exactly once: what the sender saw DATA_ACKed was all received, from DSN 0 without a hole ...
    if acked:
        assert cov and cov[0][0] == 0 and cov[0][1] >= acked, f"DATA_ACK {acked} over a hole: {cov[:4]}"
    if finite_kb:
        # ... nothing beyond what was written arrived, and a completed transfer is exactly its size
        assert not cov or cov[-1][1] <= finite_kb * 1000, f"data beyond the {finite_kb} kB written: {cov[-1]}"
        assert acked <= finite_kb * 1000
        if acked == finite_kb * 1000:
            assert cov == [(0, finite_kb * 1000)]
    # Goodput within capacity: stream bytes received over all paths <= what the links could carry.
    link = "down" if direction == "down" else "up"
    cap = sum(_capacity_bytes(run.experiment.link(f"p{i}/{link}").rate_bps, end_ns) for i in (1, 2))
    unique = sum(b - a for a, b in cov)
    assert unique <= cap * PAYLOAD_SHARE + 2 * 1514, \
        f"{scheduler}: {unique} B delivered over links carrying at most {cap * PAYLOAD_SHARE:.0f} B of payload"


def _acked(ev: pl.DataFrame, direction: str) -> int:
    """The highest DATA_ACK the data sender got (ACKs flow the other way)."""
    back = "c2s" if direction == "down" else "s2c"
    a = ev.filter((pl.col("point") == "rcv") & (pl.col("dir") == back) & pl.col("data_ack").is_not_null())["data_ack"]
    return int(a.max()) if a.len() else 0  # type: ignore[arg-type]


# --- one path reaches its capacity ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", SCHEDULERS)
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(rate_mbps=st.sampled_from([5, 10, 20, 40]), owd_ms=st.integers(5, 40))
def test_one_path_reaches_capacity(scheduler: str, rate_mbps: int, owd_ms: int) -> None:
    rate = rate_mbps * 1e6
    p = {"rate": StepSeries.constant(rate), "owd": StepSeries.constant(owd_ms * _MS),
         "buffer_bytes": int(2 * _bdp_bytes(rate, owd_ms))}
    end_ns = 3 * _S
    run = get_backend("model").run(_experiment([p], scheduler, BulkWorkload(), end_ns=end_ns))
    rcv = _data_rows(run.events, "rcv", "down")
    t0, t1 = 1 * _S, end_ns - 100 * _MS   # past slow start; the last 100 ms may be cut mid-frame
    got = _new_bytes_between(rcv, t0, t1)
    util = got * 8 / ((t1 - t0) / 1e9) / (rate * PAYLOAD_SHARE)
    assert 0.85 <= util <= 1.0 + 2 * 1514 * 8 / rate / ((t1 - t0) / 1e9), \
        f"{scheduler}: {100 * util:.1f} % of the payload capacity on one path ({rate_mbps} Mbit/s, {owd_ms} ms)"


# --- no scheduler below the best single path --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", SCHEDULERS)
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(r1=st.sampled_from([5, 10, 20]), r2=st.sampled_from([2, 5, 10, 20]), d1=st.integers(5, 30),
       d2=st.integers(5, 80))
def test_not_below_the_best_single_path(scheduler: str, r1: int, r2: int, d1: int, d2: int) -> None:
    paths = [{"rate": StepSeries.constant(r * 1e6), "owd": StepSeries.constant(d * _MS),
              "buffer_bytes": int(2 * _bdp_bytes(r * 1e6, d))} for r, d in ((r1, d1), (r2, d2))]
    end_ns = 4 * _S
    wl = BulkWorkload(stop_ns=end_ns)
    model = get_backend("model")
    mp = _goodput(model.run(_experiment(paths, scheduler, wl, end_ns=end_ns)), end_ns)
    singles = []
    for p in paths:
        e = _experiment([p], "minrtt", wl, end_ns=end_ns)
        singles.append(_goodput(model.run(dataclasses.replace(e, protocol="tcp")), end_ns))
    best = max(singles)
    floor = NAMED_EXCEPTIONS.get(scheduler, {}).get("floor")
    if floor == "n_slowest":
        need = min(0.7 * len(paths) * min(singles), 0.9 * best)
    elif floor == "half_best":
        need = 0.5 * best
    else:
        need = 0.9 * best
    assert mp >= need, (f"{scheduler}: {mp / 1e6:.2f} Mbit/s < {need / 1e6:.2f} Mbit/s; best single path "
                              f"{best / 1e6:.2f} Mbit/s, slowest {min(singles) / 1e6:.2f} ({r1} Mbit/s {d1} ms, {r2} Mbit/s {d2} ms)")


def _goodput(run, end_ns: int) -> float:
    rcv = _data_rows(run.events, "rcv", "down")
    t0 = 500 * _MS
    return _new_bytes_between(rcv, t0, end_ns) * 8 / ((end_ns - t0) / 1e9)
