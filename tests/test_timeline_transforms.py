"""What-if transforms: pure, and exact against closed forms (byte totals, shifted delays)."""

from __future__ import annotations

import math

import polars as pl
import pytest
from _paths import SHARED_TRACES

from workbench.errors import InputError
from workbench.timeline import (
    PathTimeline,
    Timelines,
    add_delay,
    align,
    cut,
    mahimahi_bins,
    read_mahimahi,
    read_ping,
    scale_rate,
    set_buffer,
    set_loss,
    shift,
    swap_primary,
    tile,
)

TL = SHARED_TRACES / "timelines"
MM = TL / "mahimahi" / "Verizon-LTE-short.down"


@pytest.fixture(scope="module")
def mm() -> PathTimeline:
    return read_mahimahi(MM)


@pytest.fixture(scope="module")
def pair() -> Timelines:
    wifi = PathTimeline.constant("wifi", capacity_down_bps=30e6, owd_down_ns=10_000_000, owd_up_ns=10_000_000,
                                 src="measured", buffer_bytes=75_000)
    lte = PathTimeline.constant("lte", capacity_down_bps=10e6, owd_down_ns=40_000_000, src="measured")
    return Timelines([wifi, lte])


def test_scale_rate(mm: PathTimeline) -> None:
    before = mm.steps.clone()
    half = scale_rate(mm, 0.5)
    assert math.isclose(half.total_bytes(), mm.total_bytes() / 2, rel_tol=1e-12)
    assert mm.steps.equals(before)  # pure: the input is untouched
    assert half.steps["capacity_down_bps_src"].equals(mm.steps["capacity_down_bps_src"])
    assert "what-if: rate x 0.5" in half.notes[-1]
    up_only = scale_rate(mm, 3.0, direction="up")
    assert up_only.steps["capacity_down_bps"].equals(mm.steps["capacity_down_bps"])
    with pytest.raises(ValueError):
        scale_rate(mm, -1.0)


def test_add_delay_and_paths_selection(pair: Timelines) -> None:
    out = add_delay(pair, 5_000_000, paths="wifi")
    assert out["wifi"].steps["owd_down_ns"].to_list() == [15_000_000]
    assert out["wifi"].steps["owd_up_ns"].to_list() == [15_000_000]
    assert out["lte"] == pair["lte"]  # other paths untouched
    down = add_delay(pair, 1_000_000, direction="down")
    assert down["lte"].steps["owd_down_ns"].to_list() == [41_000_000]
    assert down["lte"].steps["owd_up_ns"].null_count() == 1  # unknown stays unknown
    with pytest.raises(InputError, match="negative"):
        add_delay(pair, -20_000_000, paths="wifi")
    with pytest.raises(InputError, match="no path"):
        add_delay(pair, 1, paths="dsl")


def test_set_buffer_and_loss(pair: Timelines) -> None:
    b = set_buffer(pair, 1_000_000)
    assert all(tl.buffer_down_bytes == tl.buffer_up_bytes == 1_000_000 for tl in b.values())
    assert all(tl.buffer_down_src == "assumed" for tl in b.values())
    lo = set_loss(pair, 0.01, paths=["lte"])
    assert lo["lte"].steps["loss_down"].to_list() == [0.01]
    assert lo["lte"].steps["loss_down_src"].to_list() == ["assumed"]
    assert lo["wifi"].steps["loss_down"].null_count() == 1


def test_cut_bytes_match_bins(mm: PathTimeline) -> None:
    bins = mahimahi_bins(MM)
    w = cut(mm, 10 * 10**9, 20 * 10**9)
    expect = bins.filter((pl.col("t_ns") >= 10 * 10**9) & (pl.col("t_ns") < 20 * 10**9))["bytes"].sum()
    assert math.isclose(w.total_bytes(), expect, rel_tol=1e-12)
    assert w.steps["t_ns"][0] == 0 and w.end_ns == 10 * 10**9 and not w.periodic
    # A window starting inside a step: that step's value holds from the window's start.
    v = cut(mm, 10_050_000_000, 10_300_000_000)
    assert v.steps["t_ns"].to_list() == [0, 50_000_000, 150_000_000]
    assert v.steps["capacity_down_bps"][0] == bins["capacity_bps"][100]
    # Without rebasing, times stay where they were.
    r = cut(mm, 10 * 10**9, 11 * 10**9, rebase=False)
    assert r.steps["t_ns"][0] == 10 * 10**9 and r.end_ns == 11 * 10**9


def test_cut_across_the_wrap(mm: PathTimeline) -> None:
    bins = mahimahi_bins(MM)
    end = mm.end_ns
    assert end is not None and end % 100_000_000 == 0
    w = cut(mm, end - 10**9, end + 10**9)  # last second, then the first again
    expect = bins["bytes"].tail(10).sum() + bins["bytes"].head(10).sum()
    assert math.isclose(w.total_bytes(), expect, rel_tol=1e-12)


def test_tile(mm: PathTimeline) -> None:
    assert mm.end_ns is not None
    t = tile(mm, 3 * mm.end_ns - 1)
    assert t.end_ns == 3 * mm.end_ns and not t.periodic
    assert math.isclose(t.total_bytes(), 3 * mm.total_bytes(), rel_tol=1e-12)
    const = PathTimeline.constant("c", capacity_down_bps=1.0)
    assert tile(const, 10) is const  # not periodic: unchanged


def test_shift_and_align() -> None:
    logs = sorted((TL / "nuwins-ping").glob("*/*.out"))[:3:1]
    tls = Timelines([read_ping(p, name=f"{p.parent.name}{i}") for i, p in enumerate(logs)])
    al = align(tls)
    base = min(tl.t0_epoch_ns for tl in tls.values())
    for name, tl in tls.items():
        dt = tl.t0_epoch_ns - base
        assert al[name].t0_epoch_ns == base
        assert al[name].steps["t_ns"][0] == tl.steps["t_ns"][0] + dt
        assert al[name].end_ns == tl.end_ns + dt
    s = shift(tls, 5)
    assert all(s[n].steps["t_ns"][0] == tls[n].steps["t_ns"][0] + 5 for n in tls)
    with pytest.raises(InputError, match="no absolute time"):
        align(Timelines([PathTimeline.constant("c", capacity_down_bps=1.0)]))


def test_swap_primary(pair: Timelines) -> None:
    sw = swap_primary(pair, "lte")
    assert list(sw) == ["lte", "wifi"] and sw.primary is pair["lte"]
    assert list(pair) == ["wifi", "lte"]
    with pytest.raises(InputError):
        swap_primary(pair, "dsl")
