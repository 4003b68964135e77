"""Ground truth of a lab run: the bottleneck rate that was in force on a path, bin by bin, from the
run's ``results.json`` (``traces/lab/*/``).

The lab's shaper starts each path at ``schedule.initial.pathN.rate_mbps`` at ``schedule.t0_epoch``
and changes it at every ``schedule.events`` entry of kind "rate" that was applied, from the moment
its ``tc`` command returned (``t_applied_epoch``), not when it was planned (``t_s``): that moment is
when the link really changed. A run without a schedule kept its ``configured.pathN.rate_down_mbps``
throughout. Before ``t0_epoch`` the initial rate is taken as in force (the shaper was set up before
the transfer began).

What an estimate from packets is judged against: the time-weighted mean of that step function over
each bin ``[t, t + bin_ns)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["applied_rate_bps"]


def applied_rate_bps(results: Mapping[str, Any], path_no: int, t_epoch_ns: Any, bin_ns: int) -> np.ndarray:
    """Time-weighted rate (bit/s) in force on lab path ``path_no`` (1 = path1) over each bin that
    starts at ``t_epoch_ns`` (Unix ns, array-like) and lasts ``bin_ns``."""
    if bin_ns <= 0:
        raise ValueError(f"bin_ns must be positive, got {bin_ns}")
    sched = results.get("schedule")
    if not sched:
        return np.full(np.size(t_epoch_ns), float(results["configured"][f"path{path_no}"]["rate_down_mbps"]) * 1e6)
    changes = [e for e in sched["events"] if e["path"] == path_no and e["kind"] == "rate" and e["applied"]]
    # Times from t0 in ns: Unix time in ns is beyond what a float holds to the nanosecond.
    t0_ns = round(float(sched["t0_epoch"]) * 1e9)
    at_ns = np.array([0.0, *((float(e["t_applied_epoch"]) - float(sched["t0_epoch"])) * 1e9 for e in changes)])
    rate_mbps = np.array([float(sched["initial"][f"path{path_no}"]["rate_mbps"]),
                          *(float(e["value"]) for e in changes)])
    order = np.argsort(at_ns, kind="stable")
    at_ns, rate_mbps = at_ns[order], rate_mbps[order]
    # The integral of the step function from t0 to each change (Mbit/s x ns); before t0 the first
    # rate holds, so the integral is linear there too (negative).
    area_at_change = np.concatenate([[0.0], np.cumsum(rate_mbps[:-1] * np.diff(at_ns))])

    def area(t_ns: np.ndarray) -> np.ndarray:
        k = np.maximum(np.searchsorted(at_ns, t_ns, side="right") - 1, 0)
        return area_at_change[k] + rate_mbps[k] * (t_ns - at_ns[k])

    # Integers until t0 is subtracted, for the same reason.
    rel = (np.asarray(t_epoch_ns).astype(np.int64) - t0_ns).astype(np.float64)
    return (area(rel + bin_ns) - area(rel)) / bin_ns * 1e6
