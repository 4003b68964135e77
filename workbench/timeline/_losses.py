"""Telling losses apart: queue overflow, bursts around an outage, other bursts, random loss.

Every retransmitted data segment of a path is put in one class, in this order:

- "outage": sent from ``around_ns`` before an outage began (a radio link fading before it drops: the
  losses come first) until ``around_ns`` after it ended (the RTO retransmissions into the void and
  the recovery of everything that was in flight). They are the outage's doing; the outage itself
  (zero capacity) is what the replay gets, not an independent loss rate.
- "overflow": a bin within the look-back before it had the queue near full (its queued bytes at
  least ``overflow_fraction`` of the buffer estimate): a drop-tail overflow, which the replay
  reproduces from the buffer size.
- "burst": at least ``burst_min`` of the remaining retransmissions each within a window of the one
  before — losses that came together (a fade, a handover) and are not independent; they are not
  turned into a loss probability either (which would spread them over the whole path). The window
  is ``burst_ns`` or a tenth of the mean spacing of those retransmissions over ``span_ns`` (the
  path's data span), whichever is shorter: independent losses at a high rate also fall close to each
  other now and then, only a cluster far denser than their average is a burst.
- "random": the rest; only these make the path's random loss probability.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = ["classify_retransmissions"]


def classify_retransmissions(retx_ns: Sequence[int], *, hot_bin_starts_ns: Sequence[int], bin_ns: int,
                             lookback_ns: int, outages: Sequence[tuple[int, int]], around_ns: int,
                             burst_ns: int = 200_000_000, burst_min: int = 3, span_ns: int | None = None,
                             ) -> dict[str, int]:
    """Counts per class ("overflow", "outage", "burst", "random") of retransmissions sent at
    ``retx_ns`` (absolute ns); ``hot_bin_starts_ns``: sorted start times of the bins whose queue was
    near full."""
    counts = {"overflow": 0, "outage": 0, "burst": 0, "random": 0}
    hot = list(hot_bin_starts_ns)
    rest: list[int] = []
    for tr in sorted(retx_ns):
        if any(a - around_ns <= tr <= b + around_ns for a, b in outages):
            counts["outage"] += 1
            continue
        i = bisect.bisect_right(hot, tr)
        # A hot bin that started within the look-back before the retransmission explains it.
        if i and hot[i - 1] >= tr - lookback_ns - bin_ns:
            counts["overflow"] += 1
        else:
            rest.append(tr)
    # Clusters: a run of retransmissions each within the window of the previous one.
    window = burst_ns if span_ns is None or not rest else min(burst_ns, 0.1 * span_ns / len(rest))
    run: list[int] = []
    for t in [*rest, None]:  # None: the end marker
        if t is not None and run and t - run[-1] <= window:
            run.append(t)
            continue
        if run:
            counts["burst" if len(run) >= burst_min else "random"] += len(run)
        run = [t] if t is not None else []
    return counts
