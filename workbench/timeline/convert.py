"""From PathTimelines to what the replay engine consumes (`workbench.replay.paths.PathConfig`).

The engine needs every quantity known at every time; timelines may not know some (a ping log has no
capacity, a capture says nothing about the uplink's capacity). `fill_unknown` fills the gaps and
tags each filled value "assumed", writing what it did into ``notes`` so a report can show it:

- a gap inside a known series: the last known value holds (the first known one before it starts);
- capacity up entirely unknown: the downlink's (symmetric path assumed);
- one delay direction unknown: the other direction's; both unknown: ``default_owd_ns`` (else error);
- capacity down unknown: the uplink's when that is known (an upload), else ``default_capacity_bps``
  (else error: there is nothing sensible to replay);
- loss unknown: ``default_loss`` (0);
- buffer unknown: ``default_buffer_bytes`` (150 000 B, PathConfig's default);
- a buffer known only as a lower bound (the queue never overflowed in the capture) is *not* replayed
  as the buffer: the capture says no packet was dropped at that queue, and a replay with a buffer
  that small would drop where the real one did not. It becomes max(``LOWER_BOUND_FACTOR`` x bound,
  default) — room for the replay's queue to grow as far as the capture's did and further, so the
  replay does not invent overflows — tagged "assumed" and said so.

Every filled value also becomes a `Caveat` (kind "assumed", its path and quantity) in ``caveats``, so
the CLI, the report and the page can show it next to the number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from workbench.errors import InputError
from workbench.timeline.model import Caveat, PathTimeline, Timelines
from workbench.timeline.transforms import tile

if TYPE_CHECKING:
    from workbench.replay.paths import PathConfig, StepSeries

# workbench.replay is imported inside the functions: importing the package loads the whole engine,
# and the engine's scenario loader may import workbench.timeline (an import cycle at load time).

__all__ = ["DEFAULT_BUFFER_BYTES", "LOWER_BOUND_FACTOR", "fill_unknown", "step_series", "to_path_configs"]

DEFAULT_BUFFER_BYTES = 150_000
LOWER_BOUND_FACTOR = 4


def _fill_col(steps: pl.DataFrame, col: str) -> pl.DataFrame:
    """Forward- then backward-fill nulls of one quantity, tagging filled rows "assumed"."""
    was_null = steps[col].is_null()
    filled = steps.with_columns(pl.col(col).forward_fill().backward_fill())
    return filled.with_columns(
        pl.when(was_null & pl.col(col).is_not_null()).then(pl.lit("assumed")).otherwise(pl.col(f"{col}_src").cast(pl.String))
        .cast(steps.schema[f"{col}_src"]).alias(f"{col}_src"))


def _set_col(steps: pl.DataFrame, col: str, values: pl.Expr) -> pl.DataFrame:
    return steps.with_columns(values.cast(steps.schema[col]).alias(col),
                              pl.lit("assumed").cast(steps.schema[f"{col}_src"]).alias(f"{col}_src"))


def fill_unknown(tl: PathTimeline, *, default_buffer_bytes: int = DEFAULT_BUFFER_BYTES,
                 default_owd_ns: int | None = None, default_capacity_bps: float | None = None,
                 default_loss: float = 0.0) -> PathTimeline:
    """A timeline with every quantity known at every step; see the module docstring for the rules."""
    s = tl.steps
    notes = list(tl.notes)
    caveats = list(tl.caveats)

    def assumed(quantity: str, text: str) -> None:
        notes.append(f"assumed: {text}")
        caveats.append(Caveat(tl.name, quantity, "assumed", f"assumed: {text}"))

    for col in s.columns:
        if col == "t_ns" or col.endswith("_src"):
            continue
        n_null = s[col].null_count()
        if 0 < n_null < s.height:
            s = _fill_col(s, col)
            notes.append(f"assumed: {n_null} unknown steps of {col} filled from neighbouring steps")
    if s["capacity_down_bps"].null_count() == s.height and s["capacity_up_bps"].null_count() < s.height:
        # an upload: the capture measured the uplink; the downlink (ACKs only) is taken as symmetric
        s = _set_col(s, "capacity_down_bps", pl.col("capacity_up_bps"))
        assumed("capacity_down_bps", "capacity down = capacity up (symmetric; the capture carried data up)")
    if s["capacity_down_bps"].null_count() == s.height:
        if default_capacity_bps is None:
            raise InputError(None, f"path {tl.name}: capacity unknown (give a rate trace or a default capacity)")
        s = _set_col(s, "capacity_down_bps", pl.lit(float(default_capacity_bps)))
        assumed("capacity_down_bps", f"capacity down = {default_capacity_bps:g} bit/s (default)")
    if s["capacity_up_bps"].null_count() == s.height:
        s = _set_col(s, "capacity_up_bps", pl.col("capacity_down_bps"))
        notes.append("assumed: capacity up = capacity down (symmetric)")
    for d, other in (("down", "up"), ("up", "down")):
        if s[f"owd_{d}_ns"].null_count() == s.height and s[f"owd_{other}_ns"].null_count() == 0:
            s = _set_col(s, f"owd_{d}_ns", pl.col(f"owd_{other}_ns"))
            notes.append(f"assumed: owd {d} = owd {other} (symmetric)")
    for d in ("down", "up"):
        if s[f"owd_{d}_ns"].null_count() == s.height:
            if default_owd_ns is None:
                raise InputError(None, f"path {tl.name}: one-way delay unknown (give a delay or a default, "
                                       "e.g. --default-owd 20ms)")
            s = _set_col(s, f"owd_{d}_ns", pl.lit(int(default_owd_ns)))
            assumed(f"owd_{d}_ns", f"owd {d} = {default_owd_ns / 1e6:g} ms (default: nothing in the input says)")
        if s[f"loss_{d}"].null_count() == s.height:
            s = _set_col(s, f"loss_{d}", pl.lit(float(default_loss)))
            notes.append(f"assumed: loss {d} = {default_loss:g} (default)")
    changes: dict[str, object] = {}
    for d in ("down", "up"):
        b = getattr(tl, f"buffer_{d}_bytes")
        lower = tl.buffer_is_lower_bound or getattr(tl, f"buffer_{d}_src") == "lower_bound"
        if b is None:
            changes[f"buffer_{d}_bytes"] = default_buffer_bytes
            changes[f"buffer_{d}_src"] = "assumed"
            notes.append(f"assumed: buffer {d} = {default_buffer_bytes} B (default)")
            if d == "down":
                caveats.append(Caveat(tl.name, "buffer_down_bytes", "assumed",
                                      f"assumed: buffer down = {default_buffer_bytes} B (default: unknown)"))
        elif lower:
            used = max(LOWER_BOUND_FACTOR * b, default_buffer_bytes)
            changes[f"buffer_{d}_bytes"] = used
            changes[f"buffer_{d}_src"] = "assumed"
            assumed(f"buffer_{d}_bytes", f"buffer {d} = {used} B replayed: the capture shows only that it is "
                                         f">= {b} B (no overflow), so not that bound but max({LOWER_BOUND_FACTOR} x "
                                         f"bound, {default_buffer_bytes} B), leaving the replay's queue room")
    if tl.kind == "throughput":
        notes.append("throughput replayed as if it were capacity: a flow could get more than was recorded")
        caveats.append(Caveat(tl.name, "capacity_down_bps", "throughput",
                              "achieved throughput replayed as if it were capacity"))
    return tl.replace(steps=s, notes=tuple(dict.fromkeys(notes)), caveats=tuple(dict.fromkeys(caveats)), **changes)


def step_series(tl: PathTimeline, quantity: str) -> StepSeries:
    """One quantity of a fully known timeline as a StepSeries, repeated values merged."""
    from workbench.replay.paths import StepSeries

    df = tl.steps.select("t_ns", quantity)
    if df[quantity].null_count():
        raise InputError(None, f"path {tl.name}: {quantity} has unknown steps (use fill_unknown)")
    changed = df.filter((pl.int_range(pl.len()) == 0) | (pl.col(quantity) != pl.col(quantity).shift(1)))
    return StepSeries(tuple(int(t) for t in changed["t_ns"]), tuple(float(v) for v in changed[quantity]))


def to_path_configs(timelines: Timelines, *, duration_ns: int | None = None,
                    default_buffer_bytes: int = DEFAULT_BUFFER_BYTES, default_owd_ns: int | None = None,
                    default_capacity_bps: float | None = None, default_loss: float = 0.0,
                    ) -> list[PathConfig]:
    """PathConfigs for the replay engine, primary path first.

    Unknowns are filled by `fill_unknown` (call it yourself to see the notes). Periodic timelines
    (mahimahi) are tiled to cover ``duration_ns`` when given; otherwise, like every timeline, their
    last step holds on after their end (StepSeries semantics).
    """
    from workbench.replay.paths import PathConfig

    out = []
    for tl in timelines.values():
        full = fill_unknown(tl, default_buffer_bytes=default_buffer_bytes, default_owd_ns=default_owd_ns,
                            default_capacity_bps=default_capacity_bps, default_loss=default_loss)
        if duration_ns is not None and full.periodic:
            full = tile(full, duration_ns)
        assert full.buffer_down_bytes is not None and full.buffer_up_bytes is not None
        out.append(PathConfig(
            name=tl.name,
            rate_down_bps=step_series(full, "capacity_down_bps"),
            rate_up_bps=step_series(full, "capacity_up_bps"),
            owd_down_ns=_int_series(step_series(full, "owd_down_ns")),
            owd_up_ns=_int_series(step_series(full, "owd_up_ns")),
            loss_down=step_series(full, "loss_down"),
            loss_up=step_series(full, "loss_up"),
            buffer_down_bytes=int(full.buffer_down_bytes),
            buffer_up_bytes=int(full.buffer_up_bytes),
        ))
    return out


def _int_series(s: StepSeries) -> StepSeries:
    # Delays are integer ns in the engine; StepSeries stores floats, so keep them whole.
    return type(s)(s.t_ns, tuple(float(round(v)) for v in s.values))

