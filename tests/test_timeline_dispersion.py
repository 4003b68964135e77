"""Capacity where a path never filled: packet dispersion (issue 14).

Truth: arrival trains built here with a known spacing, and replays of known paths with the engine
(tests/_truth.py) — a cellular-like path with a 3 MB buffer that a short download never fills, and a
path with random loss whose sender never has more than a few segments in flight."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from _truth import FRAME, MS, S, path, rate_at, replay_truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.timeline import estimate_bins, estimate_timelines, fill_unknown
from workbench.timeline._dispersion import dispersion_bins


def _trains(rate_bps: float, *, n_trains: int, train_len: int, idle_ns: int, frame: int = FRAME,
            coalesce: bool = False) -> pl.DataFrame:
    """Trains of back-to-back frames at ``rate_bps`` separated by idle time (optionally delivered in
    batches of 4 frames 1 us apart, as a batching receiver timestamps them)."""
    gap = frame * 8e9 / rate_bps
    t, now = [], 0.0
    for _ in range(n_trains):
        for k in range(train_len):
            t.append(now + k * gap)
        now += train_len * gap + idle_ns
    ts = np.array(t)
    if coalesce:
        ts = np.array([ts[i - i % 4] + (i % 4) * 1_000 for i in range(ts.size)])
    return pl.DataFrame({"t_ns": ts.astype(np.int64), "wire_bytes": np.full(ts.size, frame, dtype=np.int64)})


@pytest.mark.parametrize("rate_mbps", [2.0, 10.0, 48.0, 300.0])
def test_trains_give_the_bottleneck_rate(rate_mbps: float) -> None:
    # Slow-start-like trains of 3 back-to-back frames, then silence: the path is far from full.
    a = _trains(rate_mbps * 1e6, n_trains=40, train_len=3, idle_ns=20 * MS)
    bins = dispersion_bins(a, t0_ns=0, bin_ns=10**9, n_bins=1)
    assert bins["disp_bps"][0] == pytest.approx(rate_mbps * 1e6, rel=0.02)
    # What was delivered is far below: a max-filter would have said a fraction of it.
    delivered_bps = a["wire_bytes"].sum() * 8e9 / (a["t_ns"].max() - a["t_ns"].min())
    assert delivered_bps < 0.5 * rate_mbps * 1e6


def test_ack_clocked_multiples_do_not_win() -> None:
    # As many gaps at 2x and 3x the transmission time as at 1x (an ACK clock releasing three segments
    # at a time at each spacing): the fastest dense band is the bottleneck's rate.
    gap = FRAME * 8e9 / 10e6
    gaps = np.tile([gap, gap, 2 * gap, 2 * gap, 3 * gap, 3 * gap, 40 * MS], 30)
    t = np.concatenate([[0], np.cumsum(gaps)]).astype(np.int64)
    a = pl.DataFrame({"t_ns": t, "wire_bytes": np.full(t.size, FRAME, dtype=np.int64)})
    est = dispersion_bins(a, t0_ns=0, bin_ns=10 * S, n_bins=1)["disp_bps"][0]
    assert est == pytest.approx(10e6, rel=0.02)


def test_coalesced_receiver_gives_no_estimate() -> None:
    a = _trains(10e6, n_trains=40, train_len=8, idle_ns=20 * MS, coalesce=True)
    assert dispersion_bins(a, t0_ns=0, bin_ns=10**9, n_bins=1)["disp_bps"][0] is None


@pytest.fixture(scope="module")
def unsaturated():
    # lte: 10 Mbit/s with a 3 MB buffer; a 3 MB download never fills it (the 1.2 / 2.0 / 4.1 /
    # 7.0 Mbit/s slow-start ramp). wifi: 20 Mbit/s, 60-frame FIFO.
    return replay_truth([path("wifi", rate_bps=20e6, owd_ms=10, buffer_bytes=60 * FRAME),
                         path("lte", rate_bps=10e6, owd_ms=40, buffer_bytes=3_000_000)],
                        size_bytes=3_000_000, duration_s=20)


@pytest.mark.parametrize("view", ["pair", "client", "client-nots"])
def test_unsaturated_path_bin_by_bin(unsaturated, view: str) -> None:
    bins = estimate_bins(unsaturated.view(view))
    lte = unsaturated.paths[1]
    b = bins.filter(pl.col("path") == "lte")
    truth = np.array([rate_at(lte, int(t) + 50 * MS) for t in b["t_epoch_ns"].to_list()])
    est, src = b["capacity_bps"].to_numpy(), b["capacity_src"].to_list()
    disp = np.array([s == "dispersion" for s in src])
    meas = np.array([s == "measured" for s in src])
    assert disp.sum() >= 3, src
    # Within 15 % from dispersion, 5 % where saturated, every such bin.
    assert np.all(np.abs(est[disp] / truth[disp] - 1) <= 0.15)
    assert np.all(np.abs(est[meas] / truth[meas] - 1) <= 0.05)
    # Every bin says how it is known.
    assert set(src) <= {"measured", "dispersion", "lower_bound", "estimated", "outage"}
    # Not the slow-start throughput: the delivery in the dispersion bins was well below capacity.
    assert b.filter(pl.Series(disp))["delivery_bps"].min() < 0.8 * 10e6


def test_unsaturated_buffer_is_a_lower_bound_and_not_replayed_as_one(unsaturated) -> None:
    tl = estimate_timelines(unsaturated.view("pair"))["lte"]
    assert tl.buffer_is_lower_bound and tl.buffer_down_src == "lower_bound"
    assert tl.buffer_down_bytes < 3_000_000
    assert "buffer_lower_bound" in {c.kind for c in tl.caveats}
    filled = fill_unknown(tl)
    assert filled.buffer_down_bytes >= 2 * tl.buffer_down_bytes
    assert any(c.kind == "assumed" and c.quantity == "buffer_down_bytes" for c in filled.caveats)


@pytest.mark.parametrize("view", ["pair", "client"])
def test_random_loss_path_capacity_from_dispersion(view: str) -> None:
    # 1 % random loss: CUBIC never gets near 10 Mbit/s, the path is never full.
    tr = replay_truth([path("wifi", rate_bps=20e6, owd_ms=10, buffer_bytes=60 * FRAME),
                       path("lte", rate_bps=10e6, owd_ms=40, buffer_bytes=200 * FRAME, loss=0.01)], duration_s=6)
    b = estimate_bins(tr.view(view)).filter((pl.col("path") == "lte") & (pl.col("capacity_src") == "dispersion"))
    assert b.height >= 20
    assert float(np.median(np.abs(b["capacity_bps"].to_numpy() / 10e6 - 1))) <= 0.05
    assert float(b["delivery_bps"].median()) < 0.5 * 10e6  # far from full


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rate_mbps=st.floats(2, 60), owd_ms=st.floats(5, 80), size_kb=st.integers(300, 3000), seed=st.integers(0, 99))
def test_estimated_capacity_never_far_above_the_path(rate_mbps: float, owd_ms: float, size_kb: int, seed: int) -> None:
    # Invariant over random single-path downloads: where the estimate claims to know the capacity
    # (saturated or dispersion), it is never more than 5 % / 15 % above the path's.
    tr = replay_truth([path("p", rate_bps=rate_mbps * 1e6, owd_ms=owd_ms, buffer_bytes=2_000_000)],
                      size_bytes=size_kb * 1000, duration_s=30, seed=seed)
    b = estimate_bins(tr.view("client"))
    for src, tol in (("measured", 0.05), ("dispersion", 0.15)):
        est = b.filter(pl.col("capacity_src") == src)["capacity_bps"]
        if est.len():
            assert float(est.max()) <= (1 + tol) * rate_mbps * 1e6, (src, float(est.max()))
