"""The compiled engine (issue 17) against the Python engine over random runs (tests/_engines.py):
every counter, every PacketEvents and SAMPLES row and every observation the same, for each scheduler
with a compiled port. A difference is a bug in the port (or an unported mechanism), never noise: both
engines are deterministic and draw the same random numbers from the same streams."""

from __future__ import annotations

import pytest
import workbench_core
from _engines import assert_same_run, scenarios
from hypothesis import HealthCheck, given, settings

from workbench.schedulers import get

COMPILED = sorted(workbench_core.compiled_schedulers())


def test_the_compiled_engine_has_ports() -> None:
    assert {"minrtt", "minrtt_noor"} <= set(COMPILED)


@pytest.mark.parametrize("name", COMPILED)
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_compiled_engine_gives_the_python_run(name: str, sc) -> None:  # type: ignore[no-untyped-def]
    assert_same_run(get(name), sc)
