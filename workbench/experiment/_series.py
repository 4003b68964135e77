"""Piecewise-constant series over time (capacity, delay, loss): the one time-series type of an
`Experiment`. Plain Python, frozen, so an experiment is a value that any backend can read."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = ["StepSeries"]


@dataclass(frozen=True)
class StepSeries:
    """``values[i]`` holds from ``t_ns[i]`` until ``t_ns[i + 1]``; the last value holds forever and the
    first also holds before ``t_ns[0]``. ``t_ns`` is strictly increasing."""

    t_ns: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.t_ns or len(self.t_ns) != len(self.values):
            raise ValueError("StepSeries needs equally long, non-empty t_ns and values")
        if any(b <= a for a, b in zip(self.t_ns, self.t_ns[1:], strict=False)):
            raise ValueError("StepSeries t_ns must be strictly increasing")

    @classmethod
    def constant(cls, value: float) -> StepSeries:
        return cls((0,), (float(value),))

    def at(self, t_ns: int) -> float:
        """The value in force at time ``t_ns``."""
        i = bisect.bisect_right(self.t_ns, t_ns) - 1
        return self.values[max(i, 0)]

    def index_at(self, t_ns: int) -> int:
        """Index of the step in force at ``t_ns`` (0 before the first change)."""
        return max(bisect.bisect_right(self.t_ns, t_ns) - 1, 0)

    @property
    def is_constant(self) -> bool:
        return len(set(self.values)) == 1

    def steps(self, until_ns: int | None = None) -> list[tuple[int, float]]:
        """``(t_ns, value)`` of every change (first one at t=0), up to ``until_ns``."""
        out = [(max(t, 0), v) for t, v in zip(self.t_ns, self.values, strict=True)
               if until_ns is None or t < until_ns]
        return out or [(0, self.values[0])]
