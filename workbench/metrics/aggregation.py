"""Bandwidth aggregation benefit of multipath vs. the best single-path TCP.

DRePaS §IV (seed 003) evaluates MPTCP with "bandwidth aggregation benefit B [23]", which "indicates
on a scale of -1 to 1 how beneficial multi-path (here: MPTCP) is compared to single-path transfer
(here: TCP)": B in [-1, 0) if MPTCP < TCP, B = 0 if equal, B in (0, 1] if MPTCP > TCP. The seed text
gives only these ranges and its reference list is cut off; the metric is D. Kaspar's ("Multipath
Aggregation of Heterogeneous Access Networks", PhD thesis, University of Oslo, 2011), whose
definition we implement:

    g      = goodput of the multipath transfer
    c_i    = goodput of single-path TCP over path i, c_max = max_i c_i

    B = (g − c_max) / (Σ_i c_i − c_max)    if g >= c_max
    B = (g − c_max) / c_max                if g <  c_max

So B = 1 is perfect aggregation (g = Σ c_i), B = 0 is "no better than the best path alone", and B = −1
is a stalled transfer (g = 0). The formula is written from the thesis as we know it, not from the
seed text (which omits it); it matches every range the seed states.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["aggregation_benefit"]


def aggregation_benefit(multipath_bps: float, single_path_bps: Sequence[float], *, clip: bool = True) -> float:
    """Kaspar's bandwidth aggregation benefit B (see the module docstring) of a multipath goodput
    ``multipath_bps`` against the single-path TCP goodputs ``single_path_bps`` of each path (any rate
    unit, the same for all).

    Edge cases: when only one path has non-zero single-path goodput (Σ c_i = c_max) and g >= c_max,
    the positive branch is 0/0 or x/0: we return 0 when g == c_max and 1 when g > c_max (all of the
    possible gain was obtained). With ``clip`` (default) the result is clipped to [−1, 1]: measured
    goodput can exceed Σ c_i when single-path runs were unlucky.
    """
    if not single_path_bps:
        raise ValueError("aggregation_benefit needs at least one single-path goodput")
    if multipath_bps < 0 or any(c < 0 for c in single_path_bps):
        raise ValueError("goodputs must be non-negative")
    c_max = max(single_path_bps)
    if c_max <= 0:
        raise ValueError("the best single-path goodput must be positive")
    g = float(multipath_bps)
    if g >= c_max:
        room = sum(single_path_bps) - c_max
        if room <= 0:
            b = 0.0 if g == c_max else 1.0
        else:
            b = (g - c_max) / room
    else:
        b = (g - c_max) / c_max
    return max(-1.0, min(1.0, b)) if clip else b
