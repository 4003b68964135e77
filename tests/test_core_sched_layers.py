"""The compiled ports of the two scheduler layers (native/engine/src/sched/{drepas,rbp}.rs) against
their Python classes (workbench.schedulers._drepas, _rbp, with the inner scheduler's Python class) run
in the compiled engine through the plug-in bridge, over random runs (tests/_engines.py): the same
summary, PacketEvents, SAMPLES and observations (DRePaS's path-state rows) for every parameter
variant, over minRTT and over every other scheduler the compiled engine runs, and nested.

A layer wraps any scheduler, so each layer is run over every non-layer name in
`workbench_core.compiled_schedulers()`: a port added later is held to its Python class under both
layers too. Fixed runs show the mechanisms act (DRePaS probes and brings a path back, RBP changes the
run) and that the port acts the same."""

from __future__ import annotations

from typing import Any

import pytest
import workbench_core
from _engines import Scenario, assert_same_results, assert_same_run, run_both, scenarios
from hypothesis import HealthCheck, given, settings

from workbench.replay import Bulk, ConnectionConfig, PathConfig, ReplayResult, StepSeries
from workbench.replay._core import compiled_spec
from workbench.schedulers import Layer, Scheduler, get

MS = 1_000_000
S = 1_000_000_000

COMPILED = sorted(workbench_core.compiled_schedulers())
LAYERS = ("drepas", "rbp")
INNER = [n for n in COMPILED if not isinstance(get(n), Layer)]

# Non-default values of every parameter. DRePaS's default interval (3 s of zero scores) is about as
# long as a random run, so most variants shorten it to reach probing, probes and the way back.
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "drepas": {
        "default": {},
        "fast_probing": {"mincontribution": 0.5, "interval_s": 0.3},
        "fine": {"mincontribution": 0.3, "interval_s": 0.5, "score_period_ms": 10.0, "inflight_window_s": 0.05,
                 "probe_segments": 100},
        # one score per interval (round(0.3) = 0 -> 1), a 5 s in-flight average, no probes
        "coarse": {"mincontribution": 0.5, "interval_s": 0.3, "score_period_ms": 1000.0, "inflight_window_s": 5.0,
                   "probe_segments": 0},
        "lenient": {"mincontribution": 0.01, "interval_s": 20.0, "probe_segments": 1},
    },
    "rbp": {
        "default": {},
        "beta_min": {"beta": 1 / 256},
        "beta_one": {"beta": 1.0},
        "beta_quarter": {"beta": 0.25},
    },
}
# the variant each layer runs with over every compiled inner scheduler (the one that acts most)
ACTIVE = {"drepas": "fast_probing", "rbp": "beta_quarter"}

SETTINGS = settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def layer(name: str, inner: Scheduler | str, variant: str) -> Scheduler:
    return get(name, inner=inner, **VARIANTS[name][variant])


def test_both_layers_are_compiled_over_minrtt() -> None:
    assert {"drepas", "rbp", "minrtt", "minrtt_noor"} <= set(COMPILED)
    assert {"minrtt", "minrtt_noor"} <= set(INNER)
    for name in LAYERS:  # the Python edge sends (name, params, [inner spec])
        spec = compiled_spec(layer(name, "minrtt_noor", ACTIVE[name]))
        assert spec == (name, {**get(name).param_values(), **VARIANTS[name][ACTIVE[name]]},
                        [("minrtt_noor", {"opportunistic": False, "penalize_all": True}, [])]), spec


@pytest.mark.parametrize("inner", ["minrtt", "minrtt_noor"])
@pytest.mark.parametrize(("name", "variant"), [(n, v) for n in LAYERS for v in VARIANTS[n]])
@SETTINGS
@given(sc=scenarios())
def test_layer_variants_give_the_bridged_run(name: str, variant: str, inner: str, sc: Scenario) -> None:
    assert_same_run(layer(name, inner, variant), sc)


@pytest.mark.parametrize("inner", INNER)
@pytest.mark.parametrize("name", LAYERS)
@SETTINGS
@given(sc=scenarios())
def test_layers_over_every_compiled_scheduler(name: str, inner: str, sc: Scenario) -> None:
    assert_same_run(layer(name, inner, ACTIVE[name]), sc)


@pytest.mark.parametrize("nested", ["rbp(drepas(minrtt))", "drepas(rbp(minrtt_noor))"])
@SETTINGS
@given(sc=scenarios())
def test_nested_layers_give_the_bridged_run(nested: str, sc: Scenario) -> None:
    outer, middle, inner = nested.rstrip(")").split("(")
    assert_same_run(layer(outer, layer(middle, inner, ACTIVE[middle]), ACTIVE[outer]), sc)


# --------------------------------------------------------------------------- the mechanisms act
def _wlan_2g() -> list[PathConfig]:
    """A fast WLAN and a bufferbloated 2G path (DRePaS's §V set-up, shortened)."""
    wlan = PathConfig(name="wlan", rate_down_bps=StepSeries((0, 2 * S), (10e6, 0.3e6)),
                      rate_up_bps=StepSeries.constant(10e6), owd_down_ns=StepSeries.constant(25 * MS),
                      owd_up_ns=StepSeries.constant(25 * MS), loss_down=StepSeries.constant(0.001),
                      buffer_down_bytes=60_000, buffer_up_bytes=60_000)
    g2 = PathConfig.constant("2g", rate_bps=200e3, owd_ns=150 * MS, buffer_bytes=40_000)
    return [wlan, g2]


def _scenario(sched: Scheduler) -> tuple[ReplayResult, ReplayResult]:
    """(bridged, port) runs of ``sched`` over the WLAN + 2G set-up, 4 s of bulk download."""
    cfg = ConnectionConfig(send_buf_bytes=1 << 20, rcv_buf_bytes=2 << 20)
    sc = Scenario(paths=tuple(_wlan_2g()), links=(), routes=(), conn=cfg, workload=Bulk(), duration_ns=4 * S, seed=1,
                  direction="down")
    return run_both(sched, sc)


@pytest.mark.parametrize("inner", ["minrtt", "minrtt_noor"])
def test_drepas_probes_and_comes_back_the_same_in_the_port(inner: str) -> None:
    """The 2G path goes probing, carries probe copies, and is active again once the WLAN drops to
    0.3 Mbit/s (at 2 s): the same transitions at the same times, the same packets."""
    py, rs = _scenario(layer("drepas", inner, "fast_probing"))
    states = [(t, i, v) for t, kind, i, v in py.observations if kind == "path_state"]
    assert [v for _, i, v in states if i == 1][:2] == ["probing", "active"], states
    assert py.summary["opportunistic_retransmissions"] > 0  # the probes
    assert_same_results(py, rs)


@pytest.mark.parametrize("inner", ["minrtt", "minrtt_noor"])
def test_rbp_changes_the_run_and_the_port_agrees(inner: str) -> None:
    """RBP's gating and per-decision cuts act on this set-up (its run is not the bare scheduler's),
    and the compiled port makes the same decisions."""
    py, rs = _scenario(layer("rbp", inner, "default"))
    bare, _ = _scenario(get(inner))
    assert not bare.events.equals(py.events)
    assert_same_results(py, rs)
