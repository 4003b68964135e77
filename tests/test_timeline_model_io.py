"""The PathTimeline model (validation, step merging, views) and lossless parquet / CSV / JSON round trips."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from _paths import SHARED_TRACES

from workbench.errors import InputError
from workbench.timeline import (
    STEPS,
    PathTimeline,
    Timelines,
    load_timelines,
    read_mahimahi,
    read_ping,
    save_timelines,
    steps_from_series,
)

TL = SHARED_TRACES / "timelines"


def mixed() -> PathTimeline:
    """Every provenance tag, nulls, a lower-bound buffer, an origin and notes."""
    steps = steps_from_series({
        "capacity_down_bps": ([0, 100, 250], [10e6, 12.5e6, 1 / 3], "measured"),
        "owd_down_ns": ([50], [20_000_000], "estimated"),
        "loss_down": ([0], [0.0125], "assumed"),
    })
    steps = steps.with_columns(pl.Series("capacity_down_bps_src", ["measured", "measured", "estimated", "measured"])
                               .cast(STEPS["capacity_down_bps_src"]))
    return PathTimeline(name="wifi", steps=steps, kind="capacity", end_ns=400, buffer_down_bytes=75_700,
                        buffer_down_src="estimated", buffer_is_lower_bound=True,
                        t0_epoch_ns=1_795_351_629_389_219_000, source="test", notes=("a", "b, with \"quotes\""))


def test_steps_from_series_merges_change_times() -> None:
    s = steps_from_series({
        "capacity_down_bps": ([0, 100], [1.0, 2.0], "measured"),
        "owd_up_ns": ([50, 150], [7, 9], "assumed"),
    })
    assert s.columns == list(STEPS)
    assert s["t_ns"].to_list() == [0, 50, 100, 150]
    assert s["capacity_down_bps"].to_list() == [1.0, 1.0, 2.0, 2.0]
    assert s["owd_up_ns"].to_list() == [None, 7, 7, 9]  # unknown before its first value
    assert s["owd_up_ns_src"].to_list() == [None, "assumed", "assumed", "assumed"]
    assert s["loss_up"].null_count() == 4


def test_views() -> None:
    tl = mixed()
    assert tl.duration_ns == 400
    assert tl.with_durations()["dur_ns"].to_list() == [50, 50, 150, 150]
    # Time-weighted mean and bytes: (10e6*100 + 12.5e6*150 + (1/3)*150) / 400 ns.
    expected = (10e6 * 100 + 12.5e6 * 150 + (1 / 3) * 150) / 400
    assert tl.mean("capacity_down_bps") == pytest.approx(expected)
    assert tl.total_bytes() == pytest.approx(expected * 400 / 8e9)
    assert tl.mean("capacity_up_bps") is None


@pytest.mark.parametrize(("change", "msg"), [
    ({"steps": pl.DataFrame({"t_ns": [5, 5]})}, "strictly increasing"),
    ({"steps": pl.DataFrame({"t_ns": [0, 9, 3]})}, "strictly increasing"),
    ({"steps": pl.DataFrame({"t_ns": [0, None]})}, "strictly increasing"),
    ({"steps": pl.DataFrame({"t_ns": [None]}, schema={"t_ns": pl.Int64})}, "strictly increasing"),
    ({"end_ns": 250}, "end_ns"),
    ({"periodic": True, "end_ns": None}, "period"),
    ({"kind": "goodput"}, "kind"),
    ({"buffer_up_bytes": 10}, "buffer_up"),
])
def test_validation(change: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        mixed().replace(**change)


def test_validation_of_values() -> None:
    with pytest.raises(ValueError, match="null together"):
        PathTimeline(name="x", steps=pl.DataFrame({"t_ns": [0], "capacity_down_bps": [1.0]}))
    with pytest.raises(ValueError, match="probability"):
        PathTimeline.constant("x", loss_down=1.5)
    with pytest.raises(ValueError, match=">= 0"):
        PathTimeline.constant("x", capacity_down_bps=-1.0)


def test_timelines_container() -> None:
    a, b = mixed(), PathTimeline.constant("lte", capacity_down_bps=1e6)
    tls = Timelines([a, b])
    assert list(tls) == ["wifi", "lte"] and tls.primary is a and len(tls) == 2
    assert Timelines({"x": b}) == Timelines([b])
    with pytest.raises(InputError, match="two paths"):
        Timelines([b, b])
    with pytest.raises(KeyError, match="no path"):
        tls["dsl"]


def sample() -> Timelines:
    mm = read_mahimahi(TL / "mahimahi" / "Verizon-LTE-short.down", TL / "mahimahi" / "Verizon-LTE-short.up")
    ping = read_ping(TL / "nuwins-ping" / "tmobile" / "101755370_ping_102205295.out", name="tmobile")
    const = PathTimeline.constant("lab", capacity_down_bps=30e6, owd_down_ns=10_000_000, buffer_bytes=75_000,
                                  src="assumed", kind="throughput")
    return Timelines([mixed(), mm, ping, const])


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_round_trip(tmp_path: Path, fmt: str) -> None:
    tls = sample()
    path = save_timelines(tls, tmp_path / f"t.{fmt}")
    back = load_timelines(path)
    assert back == tls
    assert list(back) == list(tls)
    for name in tls:  # exact values, dtypes and provenance, not just "equal enough"
        assert back[name].steps.schema == tls[name].steps.schema
        assert back[name].steps.equals(tls[name].steps)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_round_trip_detects_change(tmp_path: Path) -> None:
    tls = sample()
    path = save_timelines(tls, tmp_path / "t.json")
    text = path.read_text().replace('"measured"', '"assumed"', 1)
    path.write_text(text)
    assert load_timelines(path) != tls


@pytest.mark.parametrize(("name", "content", "msg"), [
    ("a.json", '{"x": 1}', "not a workbench timelines file"),
    ("a.json", "{", "cannot read"),
    ("a.csv", "t_ns\n1\n", "metadata comment"),
    ("a.parquet", "junk", "cannot read"),
    ("a.txt", "", "unknown timeline format"),
])
def test_bad_files(tmp_path: Path, name: str, content: str, msg: str) -> None:
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(InputError, match=msg):
        load_timelines(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_timelines(tmp_path / "nope.parquet")
