"""From timelines to the replay engine's PathConfig: values carried exactly, unknowns filled and said."""

from __future__ import annotations

import polars as pl
import pytest
from _paths import SHARED_TRACES

from workbench.errors import InputError
from workbench.replay.paths import PathConfig
from workbench.timeline import (
    DEFAULT_BUFFER_BYTES,
    PathTimeline,
    Timelines,
    fill_unknown,
    read_mahimahi,
    read_ping,
    step_series,
    steps_from_series,
    to_path_configs,
)

TL = SHARED_TRACES / "timelines"


def test_values_carried_exactly() -> None:
    steps = steps_from_series({
        "capacity_down_bps": ([0, 100, 200, 300], [5e6, 5e6, 7e6, 1e6], "measured"),
        "capacity_up_bps": ([0], [2e6], "measured"),
        "owd_down_ns": ([0, 150], [10_000_000, 12_000_000], "measured"),
        "owd_up_ns": ([0], [11_000_000], "estimated"),
        "loss_down": ([0], [0.01], "estimated"),
        "loss_up": ([0], [0.0], "assumed"),
    })
    tl = PathTimeline(name="p", steps=steps, buffer_down_bytes=1000, buffer_down_src="estimated",
                      buffer_up_bytes=2000, buffer_up_src="assumed")
    (cfg,) = to_path_configs(Timelines([tl]))
    assert isinstance(cfg, PathConfig) and cfg.name == "p"
    # Repeated values merged; every step time of the table reproduces its value.
    assert cfg.rate_down_bps.t_ns == (0, 200, 300)
    for t, v in zip(steps["t_ns"].to_list(), steps["capacity_down_bps"].to_list(), strict=True):
        assert cfg.rate_down_bps.at(t) == v
    assert cfg.owd_down_ns.at(149) == 10_000_000 and cfg.owd_down_ns.at(150) == 12_000_000
    assert cfg.rate_up_bps.values == (2e6,) and cfg.owd_up_ns.values == (11_000_000.0,)
    assert cfg.loss_down.values == (0.01,)
    assert (cfg.buffer_down_bytes, cfg.buffer_up_bytes) == (1000, 2000)


def test_fill_unknown_says_what_it_assumed() -> None:
    tl = PathTimeline.constant("lte", capacity_down_bps=10e6, owd_down_ns=40_000_000, src="measured")
    full = fill_unknown(tl)
    s = full.steps
    assert s["capacity_up_bps"].to_list() == [10e6] and s["capacity_up_bps_src"].to_list() == ["assumed"]
    assert s["owd_up_ns"].to_list() == [40_000_000] and s["owd_up_ns_src"].to_list() == ["assumed"]
    assert s["loss_down"].to_list() == [0.0] and s["loss_down_src"].to_list() == ["assumed"]
    assert s["capacity_down_bps_src"].to_list() == ["measured"]  # known values keep their tag
    assert full.buffer_down_bytes == DEFAULT_BUFFER_BYTES and full.buffer_down_src == "assumed"
    text = " ".join(full.notes)
    for what in ("capacity up = capacity down", "owd up = owd down", "buffer down = 150000 B", "loss down = 0"):
        assert what in text
    with pytest.raises(InputError, match="one-way delay unknown"):
        fill_unknown(PathTimeline.constant("x", capacity_down_bps=1e6))
    assert fill_unknown(PathTimeline.constant("x", capacity_down_bps=1e6), default_owd_ns=5).steps["owd_up_ns"][0] == 5


def test_gaps_filled_from_neighbours() -> None:
    steps = steps_from_series({"capacity_down_bps": ([0, 1, 2, 3], [None, 4.0, None, 6.0], "measured"),
                               "owd_down_ns": ([0], [1], "measured")})
    s = fill_unknown(PathTimeline(name="g", steps=steps)).steps
    assert s["capacity_down_bps"].to_list() == [4.0, 4.0, 4.0, 6.0]
    assert s["capacity_down_bps_src"].to_list() == ["assumed", "measured", "assumed", "measured"]


def test_lower_bound_buffer() -> None:
    tl = PathTimeline.constant("x", capacity_down_bps=1e6, owd_down_ns=1, buffer_bytes=20_000, src="estimated",
                               buffer_is_lower_bound=True)
    assert fill_unknown(tl).buffer_down_bytes == DEFAULT_BUFFER_BYTES
    # A lower bound is never replayed as the buffer itself (issue 14): room above it, and said so.
    big = tl.replace(buffer_down_bytes=500_000, buffer_up_bytes=500_000)
    filled = fill_unknown(big)
    assert filled.buffer_down_bytes > 500_000
    assert filled.buffer_down_src == "assumed"
    said = [c for c in filled.caveats if c.quantity == "buffer_down_bytes" and c.kind == "assumed"]
    assert said and f"{filled.buffer_down_bytes} B" in said[0].message and ">= 500000 B" in said[0].message


def test_ping_needs_capacity() -> None:
    ping = read_ping(sorted((TL / "nuwins-ping" / "verizon").glob("*.out"))[0])
    with pytest.raises(InputError, match="capacity unknown"):
        to_path_configs(Timelines([ping]))
    (cfg,) = to_path_configs(Timelines([ping]), default_capacity_bps=20e6)
    assert cfg.rate_down_bps.values == (20e6,)
    # Ping delays per bin become the delay series (RTT / 2, rounded to whole ns).
    assert cfg.owd_down_ns.at(0) == ping.steps["owd_down_ns"][0]


def test_periodic_tiled_for_duration() -> None:
    mm = read_mahimahi(TL / "mahimahi" / "TMobile-UMTS-driving.down")
    assert mm.end_ns is not None
    tls = Timelines([mm])
    (cfg,) = to_path_configs(tls, default_owd_ns=20_000_000, duration_ns=2 * mm.end_ns)
    # The second cycle repeats the first.
    for t in (0, 123_456_789, mm.end_ns // 3):
        assert cfg.rate_down_bps.at(mm.end_ns + t) == cfg.rate_down_bps.at(t)
    (once,) = to_path_configs(tls, default_owd_ns=20_000_000)
    last = float(mm.steps["capacity_down_bps"][-1])
    assert once.rate_down_bps.at(mm.end_ns + 10) == last  # untiled: the last step holds on


def test_step_series_needs_known_values() -> None:
    tl = PathTimeline(name="x", steps=pl.DataFrame({"t_ns": [0]}))
    with pytest.raises(InputError, match="fill_unknown"):
        step_series(tl, "capacity_down_bps")
