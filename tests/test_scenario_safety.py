"""Scenario files are data: safe YAML only, alias bombs and huge sizes refused, referenced files kept
inside the scenario's folder unless the user allows otherwise (`workbench._safe_refs`), all as
one-line errors naming the scenario; `workbench replay --allow-outside-refs` lifts the folder rule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workbench.errors import InputError
from workbench.scenario import load_scenario
from workbench.timeline import read_scenario

WB = [sys.executable, "-c", "from workbench.cli import main; main()"]
RATE = "t_s,rate_mbps\n0,10\n1,20\n"


def _folder(tmp_path: Path) -> tuple[Path, Path]:
    """A scenario folder and, beside it, a rate file outside it."""
    inside = tmp_path / "scen"
    inside.mkdir()
    (inside / "rate.csv").write_text(RATE)
    (tmp_path / "outside.csv").write_text(RATE)
    return inside, tmp_path / "outside.csv"


def _doc(rate_ref: str, **top: object) -> str:
    return yaml.safe_dump({"duration_s": 1, "scheduler": "minrtt", "workload": {"finite": {"bytes": 100000}},
                           "paths": [{"name": "wifi", "rate_mbps": {"file": rate_ref}, "owd_ms": 10,
                                      "buffer_packets": 50}], **top})


def _refused(f: Path, match: str, **kw: object) -> str:
    with pytest.raises(InputError, match=match) as e:
        load_scenario(f, **kw)
    msg = str(e.value)
    assert msg.startswith(str(f)) and "\n" not in msg
    return msg


def test_reference_inside_the_folder_is_read(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    (inside / "sub").mkdir()
    (inside / "sub" / "r.csv").write_text(RATE)
    for ref in ("rate.csv", "sub/r.csv", "sub/../rate.csv", str(inside / "rate.csv")):
        f = inside / "s.yaml"
        f.write_text(_doc(ref))
        sc = load_scenario(f)
        assert sc.paths[0].rate_down_bps.at(1_500_000_000) == 20e6


@pytest.mark.parametrize("ref", ["../outside.csv", "{outside}", "sub/../../outside.csv"])
def test_reference_outside_is_refused_unless_allowed(tmp_path: Path, ref: str) -> None:
    inside, outside = _folder(tmp_path)
    (inside / "sub").mkdir()
    f = inside / "s.yaml"
    f.write_text(_doc(ref.format(outside=outside)))
    _refused(f, "outside the scenario's folder")
    with pytest.raises(InputError, match="outside"):
        read_scenario(f)
    sc = load_scenario(f, allow_outside=True)
    assert sc.paths[0].rate_down_bps.at(1_500_000_000) == 20e6
    assert list(read_scenario(f, allow_outside=True))


def test_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    inside, outside = _folder(tmp_path)
    (inside / "link.csv").symlink_to(outside)
    f = inside / "s.yaml"
    f.write_text(_doc("link.csv"))
    _refused(f, "outside the scenario's folder")


@pytest.mark.parametrize(("ref", "match"), [("/dev/zero", "not a regular file"), (".", "not a regular file"),
                                            ("missing.csv", "not found")])
def test_devices_folders_and_missing_files_are_refused_even_when_allowed(tmp_path: Path, ref: str, match: str) -> None:
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    f.write_text(_doc(ref))
    _refused(f, match, allow_outside=True)


def test_yaml_bomb_is_refused_before_expansion(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
    f = inside / "s.yaml"
    f.write_text("\n".join(lines) + "\n" + _doc("rate.csv"))
    _refused(f, "bomb")


def test_python_tags_are_refused_and_never_run(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    marker = tmp_path / "pwned"
    f = inside / "s.yaml"
    f.write_text(_doc("rate.csv") + f"seed: !!python/object/apply:os.system ['touch {marker}']\n")
    _refused(f, "tag not allowed")
    assert not marker.exists()


@pytest.mark.parametrize(("top", "match"), [
    ({"duration_s": 1e12}, "duration_s"), ({"duration_s": float("nan")}, "finite"),
    ({"workload": {"finite": {"bytes": 10**18}}}, "bytes"), ({"connection": {"rcv_buf_bytes": 2**62}}, "rcv_buf_bytes"),
    ({"seed": None}, "seed"), ({"seed": "x"}, "seed"),
])
def test_huge_or_wrong_sizes_are_refused(tmp_path: Path, top: dict, match: str) -> None:
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    f.write_text(_doc("rate.csv", **top))
    _refused(f, match)


def test_oversized_scenario_file_is_refused(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    f.write_text(_doc("rate.csv") + "# " + "x" * (5 << 20) + "\n")
    _refused(f, "bytes allowed")


def test_scheduler_file_outside_is_refused_and_not_imported(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    marker = tmp_path / "imported"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    f = inside / "s.yaml"
    f.write_text(_doc("rate.csv").replace("scheduler: minrtt", "scheduler: ../evil.py:Evil"))
    _refused(f, "outside the scenario's folder")
    assert not marker.exists()


@pytest.mark.slow
def test_replay_cli_flag(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    f.write_text(_doc("../outside.csv"))
    env = os.environ | {"WORKBENCH_CACHE": str(tmp_path / "cache")}
    refused = subprocess.run([*WB, "replay", str(f)], capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == 2
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--allow-outside-refs" in lines[0] and str(f) in lines[0], refused.stderr
    ok = subprocess.run([*WB, "replay", str(f), "--allow-outside-refs", "--json"], capture_output=True, text=True,
                        env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr
