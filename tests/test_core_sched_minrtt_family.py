"""The compiled ports of minRTT, ECF, BLEST, redundant and round-robin (native/engine/src/sched/{minrtt,
ecf,blest,redundant,roundrobin}.rs) against their Python classes (workbench.schedulers._minrtt, _ecf,
_blest, _redundant, _roundrobin) run in the compiled engine through the plug-in bridge, over random
runs (tests/_engines.py): the same summary, PacketEvents, SAMPLES and observations for the defaults,
non-default values of every parameter and each ``variant``.

ECF and BLEST are minRTT that may decline its subflow and wait for the fast one; on heterogeneous paths
they must also decide differently from minRTT (else the waiting code is never exercised), which
`test_wait_tests_act_on_heterogeneous_paths` checks on fixed two-path runs. Redundant's rare
"already carried: move on" branch gets a fixed run of its own."""

from __future__ import annotations

from typing import Any

import pytest
import workbench_core
from _engines import Scenario, assert_same_run, scenarios
from hypothesis import HealthCheck, given, settings

from workbench.experiment._model import LinkSpec
from workbench.replay import Bulk, ConnectionConfig, Finite, PathConfig, Route, StepSeries
from workbench.replay._core import compiled_spec
from workbench.schedulers import get

MS = 1_000_000

PORTS = ("minrtt", "minrtt_noor", "ecf", "blest", "redundant", "roundrobin")

# Non-default values of every parameter (and every `variant` choice), each case named.
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "minrtt": {
        "default": {},
        "noor": {"opportunistic": False},
        "penalize_first": {"penalize_all": False},
    },
    "minrtt_noor": {
        "default": {},
        "or_penalize_first": {"opportunistic": True, "penalize_all": False},
    },
    "ecf": {
        "default": {},
        "paper": {"variant": "paper"},
        "kernel_beta_high": {"variant": "kernel", "beta": 0.9},
        "paper_beta0_noor": {"variant": "paper", "beta": 0.0, "opportunistic": False, "penalize_all": False},
        "kernel_noor_first_penalty": {"beta": 0.6, "opportunistic": False},
        "paper_penalize_first": {"variant": "paper", "beta": 1.0, "penalize_all": False},
    },
    "blest": {
        "default": {},
        "paper": {"variant": "paper"},
        "paper_lambda1_noor": {"variant": "paper", "lambda_init": 1.0, "opportunistic": False},
        "kernel_wide_lambda": {"lambda_init": 0.7, "lambda_min": 0.5, "lambda_max": 2.5, "lambda_bad": 0.3,
                               "lambda_good": 0.2, "penalize_all": False},
        # lambda_min above lambda_max: min(max(λ, lo), hi) pins λ to hi
        "kernel_inverted_bounds_noor": {"lambda_min": 1.9, "lambda_max": 0.6, "opportunistic": False},
        "paper_fast_moving": {"variant": "paper", "lambda_init": 2.0, "lambda_max": 3.0, "lambda_bad": 0.5,
                              "lambda_good": 0.0},
    },
    "redundant": {"default": {}},
    "roundrobin": {
        "default": {},
        "burst3": {"num_segments": 3},
        "not_cwnd_limited": {"cwnd_limited": False},
        "burst17_not_cwnd_limited": {"num_segments": 17, "cwnd_limited": False},
        "burst64": {"num_segments": 64},
    },
}

CASES = [(name, v) for name in PORTS for v in VARIANTS[name]]

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def sched(name: str, variant: str) -> Any:
    return get(name, **VARIANTS[name][variant])


def test_the_ports_are_compiled_with_their_parameters() -> None:
    assert set(PORTS) <= set(workbench_core.compiled_schedulers())
    for name, v in CASES:
        s = sched(name, v)
        spec = compiled_spec(s)
        assert spec is not None, (name, v)
        assert spec == (name, s.param_values(), [])


@pytest.mark.parametrize(("name", "variant"), CASES)
@SETTINGS
@given(sc=scenarios())
def test_compiled_port_gives_the_bridged_run(name: str, variant: str, sc: Scenario) -> None:
    assert_same_run(sched(name, variant), sc)


def _heterogeneous(fast: tuple[float, int], slow: tuple[float, int], rcv_buf_bytes: int, size_bytes: int) -> Scenario:
    """A fast, short path and a slow, long one ((rate_bps, one-way delay ms) each), one finite transfer."""
    def path(name: str, rate_bps: float, owd_ms: int) -> PathConfig:
        c = StepSeries.constant
        return PathConfig(name=name, rate_down_bps=c(rate_bps), rate_up_bps=c(rate_bps), owd_down_ns=c(owd_ms * MS),
                          owd_up_ns=c(owd_ms * MS), loss_down=c(0.0), loss_up=c(0.0), buffer_down_bytes=100_000,
                          buffer_up_bytes=100_000)
    return Scenario(paths=(path("fast", *fast), path("slow", *slow)), links=(), routes=(),
                    conn=ConnectionConfig(rcv_buf_bytes=rcv_buf_bytes), workload=Finite(size_bytes=size_bytes),
                    duration_ns=3000 * MS, seed=7, direction="down")


# ECF declines the slow path of a 10x slower, 12x longer pair with a large window; BLEST the slow path
# of an 8x longer pair with a window the slow path would block
ECF_PATHS = _heterogeneous((30e6, 5), (3e6, 60), 6_000_000, 2_000_000)
BLEST_PATHS = _heterogeneous((20e6, 10), (2e6, 80), 128_000, 1_500_000)


@pytest.mark.parametrize(("name", "variant", "sc"), [("ecf", "default", ECF_PATHS), ("ecf", "paper", ECF_PATHS),
                                                     ("blest", "default", BLEST_PATHS),
                                                     ("blest", "paper", BLEST_PATHS)])
def test_wait_tests_act_on_heterogeneous_paths(name: str, variant: str, sc: Scenario) -> None:
    """The wait test declines the slow path at times: fewer segments go there than under minRTT, and the
    compiled port gives the bridged Python class's run."""
    ours = assert_same_run(sched(name, variant), sc)
    base = assert_same_run(get("minrtt"), sc)
    a = ours.summary["per_path"]["slow"]["sent_packets"]
    b = base.summary["per_path"]["slow"]["sent_packets"]
    assert a < b, (a, b)


def test_redundant_moves_past_a_segment_it_already_carried() -> None:
    """Three subflows over a 0.5 Mbit/s shared bottleneck: subflow RTOs put segments up for reinjection,
    a lagging subflow takes one ahead of its own pointer and must later step over it (the rare
    "already carried: move on" branch, which random runs seldom reach; leaving it out changes this run)."""
    def link(name: str, rate_bps: float, owd_ms: float, buffer_bytes: int) -> LinkSpec:
        c = StepSeries.constant
        return LinkSpec(name, rate_bps=c(rate_bps), owd_ns=c(owd_ms * MS), loss=c(0.0), buffer_bytes=buffer_bytes)

    links = (link("core", 5e5, 1, 8000), link("p0/down", 27e6, 20, 4000), link("p0/up", 1e6, 1.5, 2000),
             link("p1/down", 1e6, 1, 4000), link("p1/up", 1e6, 1, 2000), link("p2/down", 1e6, 4, 131_073),
             link("p2/up", 33e6, 1, 4647))
    routes = tuple(Route(f"p{i}", data=(f"p{i}/down", "core"), ack=(f"p{i}/up",)) for i in range(3))
    conn = ConnectionConfig(send_buf_bytes=4 * 1024 * 1024, rcv_buf_bytes=30_000, cc="reno", hystart=True, init_cwnd=10,
                            rto_min_ns=50 * MS, delayed_ack=False, quickack_on_meta_ooo=True,
                            reinject_on_subflow_rto=True, rcv_buf_init_bytes=131_072)
    sc = Scenario(paths=(), links=links, routes=routes, conn=conn, workload=Bulk(), duration_ns=1500 * MS, seed=1,
                  direction="down")
    assert_same_run(get("redundant"), sc)
