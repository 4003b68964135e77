"""Kaspar's bandwidth aggregation benefit B (DRePaS §IV), at its boundaries and in between."""

from __future__ import annotations

import pytest

from workbench.metrics import aggregation_benefit

# Single-path goodputs 6 and 4 (Mbit/s): c_max = 6, sum = 10.
SINGLE = [6.0, 4.0]


def test_boundaries() -> None:
    assert aggregation_benefit(10.0, SINGLE) == 1.0   # perfect aggregation: g = sum c_i
    assert aggregation_benefit(6.0, SINGLE) == 0.0    # as good as the best path alone
    assert aggregation_benefit(0.0, SINGLE) == -1.0   # stalled multipath transfer


def test_between_boundaries() -> None:
    # Above the best path: (8 - 6) / (10 - 6) = 0.5. Below: (3 - 6) / 6 = -0.5.
    assert aggregation_benefit(8.0, SINGLE) == pytest.approx(0.5)
    assert aggregation_benefit(3.0, SINGLE) == pytest.approx(-0.5)
    # The two branches use different denominators: 5 is 1/6 below c_max, 7 is 1/4 of the way up.
    assert aggregation_benefit(5.0, SINGLE) == pytest.approx(-1 / 6)
    assert aggregation_benefit(7.0, SINGLE) == pytest.approx(0.25)
    # Three paths: c = 5, 3, 2 -> g = 7: (7 - 5) / (10 - 5) = 0.4.
    assert aggregation_benefit(7.0, [5.0, 3.0, 2.0]) == pytest.approx(0.4)


def test_clip_and_degenerate_cases() -> None:
    assert aggregation_benefit(12.0, SINGLE) == 1.0
    assert aggregation_benefit(12.0, SINGLE, clip=False) == pytest.approx(1.5)
    # Only one usable path: nothing to aggregate; equal -> 0, more -> 1, less -> negative branch.
    assert aggregation_benefit(5.0, [5.0, 0.0]) == 0.0
    assert aggregation_benefit(5.5, [5.0]) == 1.0
    assert aggregation_benefit(2.5, [5.0]) == pytest.approx(-0.5)
    with pytest.raises(ValueError):
        aggregation_benefit(1.0, [])
    with pytest.raises(ValueError):
        aggregation_benefit(1.0, [0.0, 0.0])
    with pytest.raises(ValueError):
        aggregation_benefit(-1.0, SINGLE)
