"""Search spaces from declared scheduler parameters, --space / --tune / --param overrides, and the
paste-ready parameter line."""

from __future__ import annotations

import optuna
import pytest

from workbench.errors import InputError
from workbench.schedulers import info
from workbench.tune.space import (
    default_in_space,
    default_params,
    param_line,
    parse_fixed,
    parse_space_override,
    search_space,
    space_key,
    suggest,
    to_distributions,
)


def test_parse_space_override() -> None:
    assert parse_space_override("x=1:10") == ("x", {"low": 1, "high": 10, "log": False})
    assert parse_space_override("x=0.5:8:log") == ("x", {"low": 0.5, "high": 8, "log": True})
    assert parse_space_override("mode=a|b|true") == ("mode", {"choices": ("a", "b", True)})
    for bad in ("x", "x=", "x=1", "x=5:1", "x=0:1:log", "x=a:b", "x=1:2:3:4", "x=only|"):
        with pytest.raises(InputError):
            parse_space_override(bad)


def test_parse_fixed_reads_yaml_scalars() -> None:
    assert parse_fixed(["a=1", "b=0.5", "c=false", "d=text"]) == {"a": 1, "b": 0.5, "c": False, "d": "text"}
    with pytest.raises(InputError):
        parse_fixed(["novalue"])


def test_declared_ranges_become_the_default_space() -> None:
    dims = search_space("stms_a")
    declared = {p.name: p for p in info("stms_a").params}
    assert [d.name for d in dims] == list(declared)   # every STMS-A parameter has a range or choices
    by = {d.name: d for d in dims}
    a = by["adjust_interval_ms"]
    assert (a.kind, a.low, a.high, a.default) == ("float", declared[a.name].low, declared[a.name].high, 0.0)
    assert by["min_burst_segments"].kind == "int"
    assert by["bandwidth"].kind == "categorical"
    # minRTT declares only on/off choices: they are tuned as categorical.
    assert {d.kind for d in search_space("minrtt")} == {"categorical"}
    # "variant" (kernel vs paper) is a model choice: tuned only on request
    assert "variant" not in {d.name for d in search_space("ecf")}
    assert [d.name for d in search_space("ecf", tune=["variant"])] == ["variant"]


def test_tune_space_and_fixed_overrides() -> None:
    dims = search_space("stms_a", tune=["adjust_interval_ms"], overrides=["adjust_interval_ms=5:500:log"])
    assert len(dims) == 1 and dims[0].log and (dims[0].low, dims[0].high) == (5, 500)
    # the default 0 (paper rule) is outside 5..500: it cannot be enqueued as a trial
    assert default_in_space(dims) is None
    dims = search_space("stms_a", fixed={"ewma_weight": 0.3, "bandwidth": "cwnd_srtt"})
    assert "ewma_weight" not in {d.name for d in dims} and "bandwidth" not in {d.name for d in dims}
    assert default_in_space(dims) == {d.name: d.default for d in dims}
    with pytest.raises(InputError, match="no parameter"):
        search_space("stms_a", tune=["nope"])
    with pytest.raises(InputError, match="both fixed"):
        search_space("stms_a", tune=["ewma_weight"], fixed={"ewma_weight": 0.2})
    with pytest.raises(InputError, match="nothing to tune"):
        search_space("redundant")
    # a different space gives a different study key (a resume with another space is refused)
    assert space_key(search_space("stms_a"), {}) != space_key(search_space("stms_a", tune=["ewma_weight"]), {})


def test_suggest_stays_in_space_and_matches_distributions() -> None:
    dims = search_space("stms_a", overrides=["adjust_interval_ms=5:500:log"])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    dist = to_distributions(dims)
    for _ in range(20):
        t = study.ask()
        p = suggest(t, dims)
        for d in dims:
            assert dist[d.name]._contains(dist[d.name].to_internal_repr(p[d.name]))
        study.tell(t, 0.0)


def test_param_line_and_defaults() -> None:
    assert param_line("stms_a", {"adjust_interval_ms": 37.456073, "bandwidth": "cwnd_srtt", "x": True}) == \
        "--scheduler stms_a --param adjust_interval_ms=37.4561 --param bandwidth=cwnd_srtt --param x=true"
    assert default_params("stms_a")["adjust_interval_ms"] == 0.0
