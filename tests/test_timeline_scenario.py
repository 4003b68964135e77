"""Per-path scenario files (YAML / JSON) -> timelines, including referenced rate and mahimahi traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from _paths import SHARED_TRACES

from workbench.errors import InputError
from workbench.timeline import read_mahimahi, read_scenario, to_path_configs

SHARED = SHARED_TRACES

DOC = {
    "paths": [
        {"name": "wifi", "rate_mbps": 30, "owd_ms": 10, "buffer_packets": 50, "loss": 0.01},
        {"name": "lte", "rate": {"file": str(SHARED / "lab" / "v01" / "rate2.csv")}, "rate_up_mbps": 5,
         "owd_down": [[0, 40], [2.5, 60]], "owd_up_ms": 40, "buffer_bytes": 600_000},
    ]
}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_scenario(tmp_path: Path, suffix: str) -> None:
    f = tmp_path / f"s{suffix}"
    f.write_text(json.dumps(DOC) if suffix == ".json" else yaml.safe_dump(DOC))
    tls = read_scenario(f, allow_outside=True)  # the rate file is the shared lab trace, outside tmp_path
    assert list(tls) == ["wifi", "lte"]
    wifi, lte = tls["wifi"], tls["lte"]
    s = wifi.steps
    assert s["capacity_down_bps"].to_list() == [30e6] and s["capacity_up_bps"].to_list() == [30e6]
    assert s["owd_down_ns"].to_list() == [10_000_000] and s["owd_up_ns"].to_list() == [10_000_000]
    assert s["loss_down"].to_list() == [0.01] and s["loss_up"].null_count() == 1
    assert set(s["capacity_down_bps_src"].to_list()) == {"assumed"}
    assert wifi.buffer_down_bytes == 50 * 1514 and wifi.buffer_down_src == "assumed"
    # lte: rate from the lab file (measured), delay steps at 2.5 s.
    rates = [float(x.split(",")[1]) * 1e6 for x in (SHARED / "lab" / "v01" / "rate2.csv").read_text().split()[1:]]
    down = lte.steps.drop_nulls("capacity_down_bps")
    assert [down.filter(down["t_ns"] == i * 10**9)["capacity_down_bps"][0] for i in range(8)] == rates
    assert set(lte.steps["capacity_down_bps_src"].to_list()) == {"measured"}
    assert lte.steps["capacity_up_bps"].unique().to_list() == [5e6]
    cfg = to_path_configs(tls)[1]
    assert cfg.owd_down_ns.at(2_499_999_999) == 40e6 and cfg.owd_down_ns.at(2_500_000_000) == 60e6
    assert cfg.rate_down_bps.at(3_500_000_000) == rates[3]
    assert cfg.buffer_down_bytes == 600_000


def test_scenario_mahimahi_reference(tmp_path: Path) -> None:
    trace = SHARED / "timelines" / "mahimahi" / "Verizon-LTE-short.down"
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump({"paths": {"cell": {"rate": {"mahimahi": str(trace)}, "owd_ms": 30}}}))
    (cell,) = read_scenario(f, allow_outside=True).values()  # the shared trace is outside tmp_path
    direct = read_mahimahi(trace)
    assert cell.periodic and cell.end_ns == direct.end_ns
    assert math.isclose(cell.total_bytes("down"), direct.total_bytes("down"), rel_tol=1e-12)
    assert math.isclose(cell.total_bytes("up"), direct.total_bytes("down"), rel_tol=1e-12)  # symmetric


@pytest.mark.parametrize(("doc", "msg"), [
    ({"paths": [{"name": "a", "owd_ms": 1}]}, "no rate"),
    ({"paths": [{"name": "a", "rate_mbps": 1, "colour": "red"}]}, "unknown keys"),
    ({"paths": [{"name": "a", "rate_mbps": 1, "loss": 2}]}, "probability"),
    ({"paths": [{"name": "a", "rate_mbps": 1, "owd_down": [[1, 5], [0, 6]]}]}, "increase"),
    ({"paths": [{"rate_mbps": 1}]}, "needs a name"),
    ({"nothing": 1}, "paths"),
])
def test_scenario_errors(tmp_path: Path, doc: dict, msg: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match=msg) as e:
        read_scenario(f)
    assert str(f) in str(e.value)  # the message names the file


def test_scenario_not_yaml(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("paths: [\n")
    with pytest.raises(InputError, match="not a valid scenario"):
        read_scenario(f)
