"""Scenario files are data: safe YAML only, alias bombs and huge sizes refused, referenced files kept
inside the scenario's folder unless the user allows otherwise (`workbench._safe_refs`), unknown
top-level keys refused with the closest valid one, all as one-line errors naming the scenario;
``--allow-outside-refs`` lifts the folder rule, the same on `replay`, `timeline` and `report`."""

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


def _wb(*args: str | Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"WORKBENCH_CACHE": str(tmp_path / "cache")}
    return subprocess.run([*WB, *map(str, args)], capture_output=True, text=True, env=env, timeout=300)


def test_timeline_cli_flag(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    f.write_text(_doc("../outside.csv"))
    out = tmp_path / "paths.json"
    refused = _wb("timeline", f, "-o", out, tmp_path=tmp_path)
    assert refused.returncode == 2
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--allow-outside-refs" in lines[0] and str(f) in lines[0], refused.stderr
    assert not out.exists()
    ok = _wb("timeline", f, "-o", out, "--allow-outside-refs", tmp_path=tmp_path)
    assert ok.returncode == 0, ok.stderr
    from workbench.timeline import load_timelines

    wifi = load_timelines(out)["wifi"]  # the outside file's rates: 10 then 20 Mbit/s
    assert wifi.steps["capacity_down_bps"].to_list() == [10e6, 20e6]


@pytest.mark.slow
def test_report_cli_flag(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    f.write_text(_doc("../outside.csv"))
    args = ["-s", "minrtt", "--no-baselines", "--jobs", "1", "--no-progress"]
    refused = _wb("report", f, "-o", tmp_path / "r1", *args, tmp_path=tmp_path)
    assert refused.returncode == 1  # the report's code for "some inputs failed"
    errors = [ln for ln in refused.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "--allow-outside-refs" in errors[0] and str(f) in errors[0], refused.stderr
    ok = _wb("report", f, "-o", tmp_path / "r2", *args, "--allow-outside-refs", tmp_path=tmp_path)
    assert ok.returncode == 0, ok.stderr
    import json

    manifest = json.loads((tmp_path / "r2" / "manifest.json").read_text())
    assert manifest["settings"]["allow_outside_refs"] is True
    assert "--allow-outside-refs" in manifest["command_line"]  # the recorded command reproduces the report


@pytest.mark.parametrize(("key", "hint"), [("schedular", "did you mean 'scheduler'?"),
                                           ("path", "did you mean 'paths'?"),
                                           ("duration", "did you mean 'duration_s'?"),
                                           ("colour", "valid keys: paths, scheduler, workload")])
def test_unknown_top_level_key_is_refused_with_the_closest_valid_key(tmp_path: Path, key: str, hint: str) -> None:
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    f.write_text(_doc("rate.csv", **{key: 1}))
    msg = _refused(f, "unknown top-level key")
    assert f"{key!r}" in msg and hint in msg, msg
    with pytest.raises(InputError) as e:
        read_scenario(f)  # the timeline reader takes the same format
    assert str(e.value) == msg
    from workbench.scenario import scenario_from_dict

    with pytest.raises(InputError, match=f"dict: unknown top-level key {key!r}"):
        scenario_from_dict(yaml.safe_load(f.read_text()), source="dict", base_dir=inside)


def test_a_misspelt_key_replaces_nothing_silently(tmp_path: Path) -> None:
    # `path:` for `paths:` used to be a scenario whose real paths were ignored; now it names the fix.
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    doc = yaml.safe_load(_doc("rate.csv"))
    f.write_text(yaml.safe_dump(doc | {"path": doc["paths"]}))
    _refused(f, r"unknown top-level key 'path' \(did you mean 'paths'\?\)")


@pytest.mark.slow
def test_replay_cli_refuses_an_unknown_key_in_one_line(tmp_path: Path) -> None:
    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    f.write_text(_doc("rate.csv").replace("scheduler: minrtt", "schedular: minrtt"))
    r = _wb("replay", f, "--scheduler", "minrtt", tmp_path=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"error: {f}: unknown top-level key 'schedular' (did you mean 'scheduler'?)\n"


def test_every_valid_key_is_read(tmp_path: Path) -> None:
    from workbench._safe_refs import SCENARIO_KEYS

    inside, _ = _folder(tmp_path)
    f = inside / "s.yaml"
    doc = yaml.safe_load(_doc("rate.csv")) | {
        "seed": 7, "direction": "up", "stack": {"congestion_control": "reno"},
        "shared": [{"name": "core", "rate_mbps": 5, "owd_ms": 1, "buffer_packets": 20}],
        "subflows": ["wifi", {"path": "wifi", "join_after_ms": 5}]}
    assert set(doc) == set(SCENARIO_KEYS) - {"connection"}  # connection: the older name of stack
    f.write_text(yaml.safe_dump(doc))
    sc = load_scenario(f)
    assert (sc.seed, sc.direction, sc.stack.congestion_control, sc.duration_ns) == (7, "up", "reno", 10**9)
    assert [p.name for p in sc.shared] == ["core"] and sc.subflows is not None and len(sc.subflows) == 2
    f.write_text(yaml.safe_dump({k: v for k, v in doc.items() if k != "stack"} | {"connection": {"cc": "reno"}}))
    assert load_scenario(f).stack.congestion_control == "reno"


@pytest.mark.parametrize("doc", ["README.md", "workbench/scenario.py"])
def test_documented_scenarios_load(tmp_path: Path, doc: str) -> None:
    import re

    text = (Path(__file__).resolve().parents[1] / doc).read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert blocks
    for i, block in enumerate(blocks):
        f = tmp_path / f"doc{i}.yaml"
        f.write_text(block)
        (tmp_path / "lte_rate.csv").write_text(RATE)
        assert load_scenario(f).paths


def test_the_flag_means_the_same_on_every_command() -> None:
    import typer

    from workbench._safe_refs import ALLOW_OUTSIDE_REFS_HELP
    from workbench.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in ("replay", "timeline", "report"):
        (flag,) = [p for p in commands[name].params if p.name == "allow_outside_refs"]
        assert flag.opts == ["--allow-outside-refs"] and flag.default is False, name
        assert flag.help == ALLOW_OUTSIDE_REFS_HELP, name
