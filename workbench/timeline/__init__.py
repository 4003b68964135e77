"""Path timelines: what each network path offered over time (capacity, one-way delay, loss, buffer),
and how we know it (measured / estimated / assumed).

- model: `PathTimeline` (a polars step table + buffer + provenance + caveats, outages, loss causes),
  `Timelines` (a session's paths), `Caveat` (what limits a number: path, quantity, kind, message).
- estimate: timelines from PacketEvents (one capture or a client + server pair).
- importers: mahimahi, `t,rate` files (Oboe, lab), multi-path CSV (5Gophers), ping logs, scenario files.
- transforms: what-if edits (scale rate, add delay, set buffer/loss, cut a window, swap primary).
- io: parquet / CSV / JSON save and load. convert: `to_path_configs` for the replay engine.
- figure (plotly, imported lazily): `timeline_figure`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.timeline.convert import (
    DEFAULT_BUFFER_BYTES,
    LOWER_BOUND_FACTOR,
    fill_unknown,
    step_series,
    to_path_configs,
)
from workbench.timeline.estimate import EstimateOptions, estimate_bins, estimate_timelines, rtt_samples
from workbench.timeline.importers import (
    mahimahi_bins,
    parse_ping_log,
    read_5gophers,
    read_mahimahi,
    read_multipath_csv,
    read_oboe,
    read_ping,
    read_rate_csv,
)
from workbench.timeline.importers.scenario import read_scenario, scenario_timelines
from workbench.timeline.io import load_timelines, save_timelines
from workbench.timeline.model import (
    CAVEAT_KINDS,
    KINDS,
    QUANTITIES,
    SOURCES,
    STEPS,
    Caveat,
    PathTimeline,
    Timelines,
    steps_from_series,
)
from workbench.timeline.open import open_timelines, sniff_timeline_input
from workbench.timeline.transforms import (
    add_delay,
    align,
    cut,
    scale_rate,
    set_buffer,
    set_loss,
    shift,
    swap_primary,
    tile,
)

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = [
    "CAVEAT_KINDS",
    "DEFAULT_BUFFER_BYTES",
    "KINDS",
    "LOWER_BOUND_FACTOR",
    "QUANTITIES",
    "SOURCES",
    "STEPS",
    "Caveat",
    "EstimateOptions",
    "PathTimeline",
    "Timelines",
    "add_delay",
    "align",
    "cut",
    "estimate_bins",
    "estimate_timelines",
    "fill_unknown",
    "load_timelines",
    "mahimahi_bins",
    "open_timelines",
    "parse_ping_log",
    "read_5gophers",
    "read_mahimahi",
    "read_multipath_csv",
    "read_oboe",
    "read_ping",
    "read_rate_csv",
    "read_scenario",
    "rtt_samples",
    "save_timelines",
    "scale_rate",
    "scenario_timelines",
    "set_buffer",
    "set_loss",
    "shift",
    "sniff_timeline_input",
    "step_series",
    "steps_from_series",
    "swap_primary",
    "tile",
    "timeline_figure",
    "to_path_configs",
]


def timeline_figure(timelines: Any, **kw: Any) -> go.Figure:
    """Capacity, delay and loss of each path over time (plotly; see `workbench.timeline.figure`)."""
    # plotly is imported only when a figure is asked for.
    from workbench.timeline.figure import timeline_figure as _fig

    return _fig(timelines, **kw)
