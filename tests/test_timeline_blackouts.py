"""Outages: no packet arriving on a path while data is outstanding -> capacity 0 over that span, and
the retransmissions around it are a burst, not random loss (issue 14).

Truth: replays of a path whose capacity drops to zero for a known span (tests/_truth.py)."""

from __future__ import annotations

import polars as pl
import pytest
from _truth import FRAME, MS, S, path, replay_truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.replay import StepSeries
from workbench.timeline import (
    estimate_bins,
    estimate_timelines,
    load_timelines,
    save_timelines,
    to_path_configs,
)
from workbench.timeline._outages import find_outages


def _blackout(start_s: float, length_s: float, *, seed: int = 1, duration_s: float = 7.0):
    lte_rate = StepSeries((0, round(start_s * S), round((start_s + length_s) * S)), (10e6, 0.0, 10e6))
    return replay_truth([path("wifi", rate_bps=20e6, owd_ms=10, buffer_bytes=60 * FRAME),
                         path("lte", rate_bps=lte_rate, owd_ms=40, buffer_bytes=100 * FRAME)],
                        duration_s=duration_s, seed=seed)


@pytest.fixture(scope="module")
def blackout():
    return _blackout(2.0, 2.0)


@pytest.mark.parametrize("view", ["pair", "client", "client-nots"])
def test_outage_found_and_zero(blackout, view: str) -> None:
    tls = estimate_timelines(blackout.view(view))
    lte, wifi = tls["lte"], tls["wifi"]
    assert wifi.outages == ()
    assert len(lte.outages) == 1
    t0 = lte.t0_epoch_ns
    a, e = (x + t0 for x in lte.outages[0])
    # The capacity timeline's outage is the bottleneck's: from the last data arrival before the silence
    # to the first after it, each less the one-way delay — within a few ms of when it really stopped
    # and started (the client alone has only RTT / 2 for the one-way delay: still within 5 ms here).
    assert abs(a - 2 * S) <= 5 * MS
    assert abs(e - 4 * S) <= 5 * MS
    # Capacity 0 over the span, tagged "outage"; bins of the outage too.
    s = lte.steps
    inside = s.filter((pl.col("t_ns") >= a - t0) & (pl.col("t_ns") < e - t0))
    assert inside.height >= 1
    assert (inside["capacity_down_bps"] == 0).all()
    assert set(inside["capacity_down_bps_src"].to_list()) == {"outage"}
    after = s.filter(pl.col("t_ns") >= e - t0)
    assert float(after["capacity_down_bps"][0]) > 5e6  # back at the path's rate right after
    bins = estimate_bins(blackout.view(view)).filter(pl.col("path") == "lte")
    assert bins.filter(pl.col("outage"))["capacity_bps"].max() == 0
    # The retransmissions around it are the outage's, not random loss.
    assert lte.loss_classes["outage"] > 0
    assert lte.loss_classes["random"] == 0
    assert float(s["loss_down"][0]) == 0.0
    kinds = {c.kind for c in lte.caveats}
    assert {"outage", "loss_bursts"} <= kinds


def test_outage_survives_save_and_replay(blackout, tmp_path) -> None:
    tls = estimate_timelines(blackout.view("client"))
    f = save_timelines(tls, tmp_path / "t.json")
    back = load_timelines(f)
    assert back["lte"].outages == tls["lte"].outages
    assert [c.kind for c in back.caveats] == [c.kind for c in tls.caveats]
    (_wifi, lte) = to_path_configs(back)
    a, e = tls["lte"].outages[0]
    assert lte.rate_down_bps.at((a + e) // 2) == 0.0


def test_silence_without_outstanding_data_is_not_an_outage() -> None:
    # A finished download, then 3 s of nothing, then a FIN: idle, not an outage.
    tr = replay_truth([path("p", rate_bps=10e6, owd_ms=20, buffer_bytes=60 * FRAME)], size_bytes=200_000,
                      duration_s=3)
    ev = tr.view("client")
    last = int(ev["t_ns"].max())
    fin = ev.filter(pl.col("dir") == "c2s").tail(1).with_columns(t_ns=pl.lit(last + 3 * S), flags=pl.lit(0x11, pl.UInt16))
    ev = pl.concat([ev, fin])
    assert find_outages(ev, "p", "s2c", rtt_ns=40 * MS) == []
    assert estimate_timelines(ev)["p"].outages == ()


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start_s=st.floats(1.0, 3.0), length_s=st.floats(1.0, 3.0), seed=st.integers(0, 50))
def test_every_long_outage_is_found(start_s: float, length_s: float, seed: int) -> None:
    # Invariant: an outage of >= 1 s with data outstanding is always found, from the client alone.
    tr = _blackout(start_s, length_s, seed=seed, duration_s=start_s + length_s + 2.5)
    lte = estimate_timelines(tr.view("client"))["lte"]
    assert len(lte.outages) == 1
    a, e = (x + lte.t0_epoch_ns for x in lte.outages[0])
    assert abs(a - start_s * S) <= 20 * MS and abs(e - (start_s + length_s) * S) <= 20 * MS
