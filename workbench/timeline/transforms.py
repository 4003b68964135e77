"""What-if transforms on path timelines: pure functions that return new timelines.

Each takes a `PathTimeline` or a `Timelines` (then ``paths=`` picks which paths change; default all)
and returns the same type. Changed values keep their provenance tag (a scaled measurement is still
rooted in a measurement) and the timeline's ``notes`` record the what-if, so a report can say
"capacity measured, x 0.5 (what-if)". Set values (`set_buffer`, `set_loss`) are tagged "assumed".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

import polars as pl

from workbench.errors import InputError
from workbench.timeline.model import PathTimeline, Timelines

__all__ = [
    "add_delay",
    "align",
    "cut",
    "scale_rate",
    "set_buffer",
    "set_loss",
    "shift",
    "swap_primary",
    "tile",
]

Direction = Literal["down", "up", "both"]
T = TypeVar("T", PathTimeline, Timelines)


def _dirs(direction: Direction) -> tuple[str, ...]:
    if direction not in ("down", "up", "both"):
        raise ValueError(f"direction must be 'down', 'up' or 'both', not {direction!r}")
    return ("down", "up") if direction == "both" else (direction,)


def _apply(x: T, fn: Callable[[PathTimeline], PathTimeline], paths: str | Sequence[str] | None) -> T:
    if isinstance(x, PathTimeline):
        return fn(x)
    names = [paths] if isinstance(paths, str) else (list(x) if paths is None else list(paths))
    for n in names:
        if n not in x:
            raise InputError(None, f"no path {n!r}; paths are {list(x)}")
    return Timelines([fn(tl) if name in names else tl for name, tl in x.items()])


def _note(tl: PathTimeline, note: str) -> tuple[str, ...]:
    return (*tl.notes, f"what-if: {note}")


def scale_rate(x: T, factor: float, *, direction: Direction = "both",
               paths: str | Sequence[str] | None = None) -> T:
    """Multiply capacity (or throughput) by ``factor`` (>= 0)."""
    if factor < 0:
        raise ValueError("factor must be >= 0")
    cols = [f"capacity_{d}_bps" for d in _dirs(direction)]

    def fn(tl: PathTimeline) -> PathTimeline:
        steps = tl.steps.with_columns(pl.col(c) * factor for c in cols)
        return tl.replace(steps=steps, notes=_note(tl, f"rate x {factor:g} ({direction})"))
    return _apply(x, fn, paths)


def add_delay(x: T, delay_ns: int, *, direction: Direction = "both",
              paths: str | Sequence[str] | None = None) -> T:
    """Add ``delay_ns`` (may be negative; the result must stay >= 0) to the one-way delay. Unknown
    delays stay unknown."""
    cols = [f"owd_{d}_ns" for d in _dirs(direction)]

    def fn(tl: PathTimeline) -> PathTimeline:
        steps = tl.steps.with_columns(pl.col(c) + int(delay_ns) for c in cols)
        if any((steps[c].drop_nulls() < 0).any() for c in cols):
            raise InputError(None, f"{tl.name}: adding {delay_ns} ns makes a one-way delay negative")
        return tl.replace(steps=steps, notes=_note(tl, f"owd {delay_ns / 1e6:+g} ms ({direction})"))
    return _apply(x, fn, paths)


def set_buffer(x: T, buffer_bytes: int, *, direction: Direction = "both",
               paths: str | Sequence[str] | None = None) -> T:
    """Set the bottleneck buffer (bytes), tagged "assumed"."""
    if buffer_bytes < 0:
        raise ValueError("buffer_bytes must be >= 0")

    def fn(tl: PathTimeline) -> PathTimeline:
        changes: dict[str, object] = {}
        for d in _dirs(direction):
            changes[f"buffer_{d}_bytes"] = int(buffer_bytes)
            changes[f"buffer_{d}_src"] = "assumed"
        if direction == "both" or (tl.buffer_down_bytes is None or tl.buffer_up_bytes is None):
            changes["buffer_is_lower_bound"] = False
        return tl.replace(**changes, notes=_note(tl, f"buffer = {buffer_bytes} B ({direction})"))
    return _apply(x, fn, paths)


def set_loss(x: T, loss: float, *, direction: Direction = "down",
             paths: str | Sequence[str] | None = None) -> T:
    """Set the random loss probability everywhere, tagged "assumed"."""
    if not 0 <= loss <= 1:
        raise ValueError("loss must be in [0, 1]")
    cols = [f"loss_{d}" for d in _dirs(direction)]

    def fn(tl: PathTimeline) -> PathTimeline:
        steps = tl.steps.with_columns(
            *(pl.lit(float(loss)).alias(c) for c in cols),
            *(pl.lit("assumed").alias(f"{c}_src") for c in cols))
        return tl.replace(steps=steps, notes=_note(tl, f"loss = {loss:g} ({direction})"))
    return _apply(x, fn, paths)


def tile(x: T, duration_ns: int, *, paths: str | Sequence[str] | None = None) -> T:
    """Repeat a periodic timeline until it covers [t_ns[0], t_ns[0] + duration_ns); the result is no
    longer periodic. Non-periodic timelines are returned unchanged."""

    def fn(tl: PathTimeline) -> PathTimeline:
        if not tl.periodic:
            return tl
        assert tl.end_ns is not None
        start = int(tl.steps["t_ns"][0])
        period = tl.end_ns - start
        reps = max(1, -(-int(duration_ns) // period))
        steps = pl.concat([tl.steps.with_columns(pl.col("t_ns") + k * period) for k in range(reps)])
        return tl.replace(steps=steps, end_ns=start + reps * period, periodic=False,
                          notes=(*tl.notes, f"tiled {reps} x {period / 1e9:g} s"))
    return _apply(x, fn, paths)


def cut(x: T, start_ns: int, end_ns: int | None = None, *, rebase: bool = True,
        paths: str | Sequence[str] | None = None) -> T:
    """Keep [start_ns, end_ns): the step in force at ``start_ns`` starts the result. With ``rebase``
    (default) times are shifted so ``start_ns`` becomes 0 (and ``t0_epoch_ns`` follows). A periodic
    timeline is tiled first when the window reaches past its end."""
    if end_ns is not None and end_ns <= start_ns:
        raise ValueError("end_ns must be after start_ns")

    def fn(tl: PathTimeline) -> PathTimeline:
        if tl.periodic and (end_ns is None or end_ns > (tl.end_ns or 0)):
            if end_ns is None:
                raise ValueError(f"{tl.name}: cutting a periodic timeline needs end_ns")
            tl = tile(tl, end_ns - int(tl.steps["t_ns"][0]))
        s = tl.steps
        before = s.filter(pl.col("t_ns") <= start_ns).tail(1).with_columns(pl.lit(start_ns, pl.Int64).alias("t_ns"))
        inside = s.filter((pl.col("t_ns") > start_ns) & (pl.lit(True) if end_ns is None else pl.col("t_ns") < end_ns))
        steps = pl.concat([before, inside])
        if steps.height == 0:
            raise InputError(None, f"{tl.name}: nothing in the window starting at {start_ns} ns")
        new_end = tl.end_ns if end_ns is None else (end_ns if tl.end_ns is None else min(end_ns, tl.end_ns))
        if new_end is not None and new_end <= int(steps["t_ns"][0]):
            raise InputError(None, f"{tl.name}: the window starts after the timeline ends")
        offset = start_ns if rebase else 0
        t0 = None if tl.t0_epoch_ns is None else tl.t0_epoch_ns + offset
        return tl.replace(steps=steps.with_columns(pl.col("t_ns") - offset),
                          end_ns=None if new_end is None else new_end - offset, periodic=False, t0_epoch_ns=t0,
                          notes=_note(tl, f"cut [{start_ns / 1e9:g} s, "
                                          f"{'end' if end_ns is None else f'{end_ns / 1e9:g} s'})"))
    return _apply(x, fn, paths)


def shift(x: T, dt_ns: int, *, paths: str | Sequence[str] | None = None) -> T:
    """Move a timeline later by ``dt_ns`` (earlier if negative); ``t0_epoch_ns`` is unchanged, so
    the absolute times of the steps move."""

    def fn(tl: PathTimeline) -> PathTimeline:
        return tl.replace(steps=tl.steps.with_columns(pl.col("t_ns") + int(dt_ns)),
                          end_ns=None if tl.end_ns is None else tl.end_ns + int(dt_ns))
    return _apply(x, fn, paths)


def align(timelines: Timelines) -> Timelines:
    """Put timelines recorded at different times (each with ``t0_epoch_ns``) on one time axis: the
    earliest origin becomes every path's ``t0_epoch_ns`` and the others' steps move accordingly."""
    t0s = {n: tl.t0_epoch_ns for n, tl in timelines.items()}
    if any(t is None for t in t0s.values()):
        missing = [n for n, t in t0s.items() if t is None]
        raise InputError(None, f"cannot align: paths {missing} have no absolute time (t0_epoch_ns)")
    base = min(t for t in t0s.values() if t is not None)
    out = []
    for n, tl in timelines.items():
        dt = (t0s[n] or 0) - base
        moved = tl.replace(steps=tl.steps.with_columns(pl.col("t_ns") + dt),
                           end_ns=None if tl.end_ns is None else tl.end_ns + dt, t0_epoch_ns=base)
        out.append(moved)
    return Timelines(out)


def swap_primary(timelines: Timelines, name: str) -> Timelines:
    """Make ``name`` the primary path (first: it carries the initial subflow); others keep their order."""
    if name not in timelines:
        raise InputError(None, f"no path {name!r}; paths are {list(timelines)}")
    return Timelines([timelines[name], *(tl for n, tl in timelines.items() if n != name)])

