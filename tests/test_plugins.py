"""Scheduler specs resolved at the edge (`workbench.plugins`): registered names, ``module:Class`` and
``file.py:Class`` with ``k=v`` parameters typed and range-checked, layers with their inner scheduler,
scenario files going through the same resolver, and one-line errors for every mistake."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from workbench.errors import InputError
from workbench.plugins import (
    coerce_params,
    describe_scheduler,
    load_scheduler_class,
    parse_param_args,
    resolve_scheduler,
    scheduler_catalog,
)
from workbench.scenario import load_scenario
from workbench.schedulers import Layer, MinRTT, RoundRobin, Scheduler, available, get

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "my_scheduler.py"

USER_MODULE = textwrap.dedent('''
    from workbench.schedulers import Decision, ParamSpec, Scheduler, is_available

    class Fixed(Scheduler):
        name = "fixed"
        params = (ParamSpec("path", 0, 0, 7), ParamSpec("gain", 1.5, 0.5, 4.0),
                  ParamSpec("eager", False), ParamSpec("mode", "a", choices=("a", "b")))

        def select(self, conn, subflows):
            sf = subflows[min(self.path, len(subflows) - 1)]
            if conn.head >= conn.n_segs or not is_available(sf):
                return None
            return Decision(sf.index)
''')


def _one_line(e: pytest.ExceptionInfo[InputError]) -> str:
    text = str(e.value)
    assert "\n" not in text and text
    return text


def test_registered_names_with_typed_params() -> None:
    s = resolve_scheduler("MinRTT", ["opportunistic=false", "penalize_all=no"])
    assert isinstance(s, MinRTT) and s.opportunistic is False and s.penalize_all is False
    rr = resolve_scheduler("roundrobin", {"num_segments": "3", "cwnd_limited": "off"})
    assert isinstance(rr, RoundRobin) and rr.num_segments == 3 and rr.cwnd_limited is False
    typed = resolve_scheduler("roundrobin", {"num_segments": 4})  # scenario files: already typed
    assert typed.num_segments == 4
    inst = get("upstream")
    assert resolve_scheduler(inst) is inst


@pytest.mark.parametrize(("spec", "params", "message"), [
    ("nope", [], "unknown scheduler 'nope'; available: "),
    ("minrtt", ["x=1"], "scheduler 'minrtt' has no parameter(s) x; known: opportunistic, penalize_all"),
    ("minrtt", ["opportunistic"], "--param 'opportunistic': expected NAME=VALUE"),
    ("minrtt", ["=1"], "expected NAME=VALUE"),
    ("minrtt", ["opportunistic=1", "opportunistic=0"], "--param opportunistic given twice"),
    ("minrtt", ["opportunistic=maybe"], "not one of [True, False]"),
    ("roundrobin", ["num_segments=0"], "parameter num_segments=0 outside [1, 64]"),
    ("roundrobin", ["num_segments=2.5"], "parameter num_segments='2.5' is not an integer"),
    ("no_such_module_xyz:Sched", [], "'no_such_module_xyz:Sched': no module named 'no_such_module_xyz'"),
    ("json:Nope", [], "'json': has no class 'Nope'"),
    ("json:JSONDecoder", [], "'json': JSONDecoder is not a subclass of workbench.schedulers.Scheduler"),
    ("missing_dir/sched.py:X", [], "missing_dir/sched.py: scheduler file not found"),
    (":X", [], "expected module:Class"),
    ("", [], "empty scheduler name"),
])
def test_mistakes_are_one_line_input_errors(spec: str, params: list[str], message: str) -> None:
    with pytest.raises(InputError) as e:
        resolve_scheduler(spec, params)
    assert message in _one_line(e)


def test_instance_with_params_is_refused() -> None:
    with pytest.raises(InputError, match="not an instance"):
        resolve_scheduler(get("minrtt"), {"opportunistic": False})


def test_file_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "user_sched.py"
    f.write_text(USER_MODULE)
    s = resolve_scheduler(f"{f}:Fixed", ["path=1", "gain=2", "eager=yes", "mode=B"])
    assert (s.path, s.gain, s.eager, s.mode) == (1, 2.0, True, "b")  # type: ignore[attr-defined]
    # the class alone when the file defines exactly one; same class object on a second load
    assert load_scheduler_class(str(f)) is type(s)
    # relative to the current folder, and relative to a base folder (a scenario's)
    monkeypatch.chdir(tmp_path)
    assert load_scheduler_class("user_sched.py:Fixed") is type(s)
    monkeypatch.chdir(ROOT)
    assert load_scheduler_class("user_sched.py:Fixed", base_dir=tmp_path) is type(s)
    with pytest.raises(InputError) as e:
        resolve_scheduler(f"{f}:Fixed", ["gain=9"])
    assert "parameter gain=9.0 outside [0.5, 4.0]" in _one_line(e)
    with pytest.raises(InputError) as e:
        resolve_scheduler(f"{f}:Fixed", ["eager=perhaps"])
    assert "is not a boolean" in _one_line(e)


def test_edited_file_is_reloaded(tmp_path: Path) -> None:
    f = tmp_path / "edit_me.py"
    f.write_text(USER_MODULE)
    first = load_scheduler_class(f"{f}:Fixed")
    f.write_text(USER_MODULE.replace('name = "fixed"', 'name = "fixed2"'))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1_000_000_000))
    second = load_scheduler_class(f"{f}:Fixed")
    assert second is not first and second.name == "fixed2"


def test_broken_user_files_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import nonexistent_dependency_xyz\n")
    with pytest.raises(InputError) as e:
        load_scheduler_class(f"{bad}:X")
    assert "importing it failed: ModuleNotFoundError: No module named 'nonexistent_dependency_xyz'" in _one_line(e)
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def (:\n")
    with pytest.raises(InputError) as e:
        load_scheduler_class(f"{syntax}:X")
    assert "importing it failed: SyntaxError" in _one_line(e)
    two = tmp_path / "two.py"
    two.write_text(USER_MODULE + "\nclass Other(Fixed):\n    name = 'other'\n")
    with pytest.raises(InputError) as e:
        load_scheduler_class(str(two))
    assert "say which class (file.py:Class): Scheduler subclasses defined here: Fixed, Other" in _one_line(e)
    raises = tmp_path / "raises.py"
    raises.write_text(USER_MODULE + "\nclass Raises(Fixed):\n    def __init__(self, **kw):\n"
                                    "        raise RuntimeError('bad\\nstate')\n")
    with pytest.raises(InputError) as e:
        resolve_scheduler(f"{raises}:Raises")
    assert "cannot create scheduler Raises: RuntimeError: bad" in _one_line(e)


def test_module_specs_on_sys_path_and_in_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "userpkg_abc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mine.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_scheduler_class("userpkg_abc.mine:Fixed").name == "fixed"
    # a module beside the user (the console script does not put the current folder on sys.path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "beside_me_abc.py").write_text(USER_MODULE)
    monkeypatch.chdir(other)
    assert load_scheduler_class("beside_me_abc:Fixed").name == "fixed"
    (other / "broken_dep_abc.py").write_text("import not_installed_dep_abc\n")
    with pytest.raises(InputError) as e:
        load_scheduler_class("broken_dep_abc:X")
    assert "importing module 'broken_dep_abc' failed: No module named 'not_installed_dep_abc'" in _one_line(e)


def test_layers_take_their_inner_scheduler() -> None:
    if not {"drepas", "rbp"} <= set(available()):
        pytest.skip("DRePaS/RBP not registered")
    d = resolve_scheduler("drepas", ["inner=roundrobin", "inner.num_segments=2", "probe_segments=5"])
    assert isinstance(d, Layer) and isinstance(d.inner, RoundRobin) and d.inner.num_segments == 2
    r = resolve_scheduler("rbp", {"inner": "minrtt", "inner_params": {"opportunistic": False}})
    assert isinstance(r.inner, MinRTT) and r.inner.opportunistic is False  # type: ignore[attr-defined]
    r2 = resolve_scheduler("rbp", ["inner.opportunistic=false"])  # the layer's default inner, with params
    assert isinstance(r2.inner, MinRTT) and r2.inner.opportunistic is False  # type: ignore[attr-defined]
    user = resolve_scheduler("rbp", [f"inner={EXAMPLE}:MyScheduler", "inner.max_burst=2"])
    assert type(user.inner).__name__ == "MyScheduler" and user.inner.max_burst == 2  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="has no parameter"):
        resolve_scheduler("rbp", ["inner.nope=1"])


def test_parse_and_coerce_helpers() -> None:
    assert parse_param_args(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    assert parse_param_args(None) == {}
    assert coerce_params(RoundRobin, {"num_segments": "8"}) == {"num_segments": 8}


def test_scenario_files_resolve_user_schedulers(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "my_scheduler.py")
    base = "paths:\n  - {name: a, rate_mbps: 10, owd_ms: 10}\n  - {name: b, rate_mbps: 5, owd_ms: 30}\n"
    sc = tmp_path / "s.yaml"
    sc.write_text(base + "scheduler: {name: my_scheduler.py:MyScheduler, params: {max_burst: 2}}\n"
                         "workload: {finite: {bytes: 200000}}\n")
    s = load_scenario(sc)
    assert type(s.scheduler).__name__ == "MyScheduler" and s.scheduler.max_burst == 2
    r = s.run()
    assert r.counters["completed"] and r.counters["delivered_bytes"] == 200_000
    for sched, message in (("nope", "scheduler: unknown scheduler 'nope'"),
                           ("{name: minrtt, params: {x: 1}}", "scheduler: scheduler 'minrtt' has no parameter(s) x"),
                           ("{name: my_scheduler.py:Nope}", "has no class 'Nope'"),
                           ("{name: minrtt, params: [1]}", "expected a name or {name: ..., params: {...}}")):
        sc.write_text(base + f"scheduler: {sched}\n")
        with pytest.raises(InputError) as e:
            load_scenario(sc)
        assert str(sc) in _one_line(e) and message in str(e.value)


def test_catalog_describes_every_registered_scheduler() -> None:
    cat = scheduler_catalog()
    assert [c["name"] for c in cat] == available()
    by = {c["name"]: c for c in cat}
    assert by["roundrobin"]["params"][0] == {"name": "num_segments", "default": 1, "low": 1, "high": 64, "log": True,
                                             "choices": None, "doc": "burst length per subflow and round"}
    assert by["minrtt"]["class"] == "workbench.schedulers._minrtt:MinRTT"
    assert all(c["description"] and c["source"] for c in cat)
    assert describe_scheduler(Scheduler)["queues_beyond_cwnd"] is False
