"""The PathTimeline model: what one network path offered over time, and how we know it.

A `PathTimeline` is piecewise constant over time: a polars table of steps (``STEPS``), where row *i*
holds from ``t_ns[i]`` until ``t_ns[i + 1]`` (the last row until ``end_ns``), with per direction
("down" = server -> client, the usual data direction; "up" = client -> server):

- ``capacity_{down,up}_bps``: bottleneck rate in bit/s (wire bytes incl. headers when estimated from
  captures) — or achieved throughput when the timeline's ``kind`` is ``"throughput"``;
- ``owd_{down,up}_ns``: one-way *base* delay (propagation part, without queueing);
- ``loss_{down,up}``: random (non-congestion) loss probability per packet;

plus a bottleneck buffer size in bytes per direction. A null value means "unknown".

Provenance: every quantity has a companion column ``<quantity>_src`` (per row, so one timeline can mix,
e.g. capacity measured in saturated bins and estimated elsewhere) holding one of ``SOURCES``:
"measured" (read from a file or observed directly; for a capture's capacity: the delivery rate of
a saturated bottleneck), "estimated" (inferred by a model, e.g. owd = RTT / 2, or carried over an
idle stretch), "assumed" (a default filled in because nothing was known), "dispersion" (capacity
from the spacing of back-to-back segments at the receiver, as packet-pair tools measure it),
"lower_bound" (the path delivered at least this; it never filled, and its spacing said nothing),
"outage" (no packet in either direction while data was outstanding: capacity 0). The buffer carries
a tag in ``buffer_{down,up}_src`` ("lower_bound" when the queue never overflowed, so the buffer is
at least this big; ``buffer_is_lower_bound`` says the same).

What a reader of the numbers must know travels with them: ``caveats`` holds one `Caveat` per thing
that limits a quantity (the path, the quantity, a machine-readable ``kind`` and one sentence), e.g. a
single vantage point, a delay taken from the handshake, assumed values, a buffer known only from
below, outages, loss bursts, subflows missing from the capture. ``outages`` lists the spans found
(``t_ns`` axis) and ``loss_counts`` the retransmissions by cause ("overflow", "outage", "burst",
"random").
`Timelines.caveats` collects every path's.

A `Timelines` is the set of paths of one session, ordered: the first path is the primary one (the
initial subflow's path).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, cast

import polars as pl

from workbench.errors import InputError

__all__ = [
    "CAVEAT_KINDS",
    "KINDS",
    "QUANTITIES",
    "SOURCES",
    "STEPS",
    "Caveat",
    "PathTimeline",
    "Timelines",
    "empty_steps",
    "steps_from_series",
]

SOURCES = ["measured", "estimated", "assumed", "dispersion", "lower_bound", "outage"]
Source = Literal["measured", "estimated", "assumed", "dispersion", "lower_bound", "outage"]
KINDS = ["capacity", "throughput"]
Kind = Literal["capacity", "throughput"]

# The value columns of a step table, in order; each has a `<name>_src` provenance column.
QUANTITIES: dict[str, pl.DataType] = {
    "capacity_down_bps": pl.Float64(),
    "capacity_up_bps": pl.Float64(),
    "owd_down_ns": pl.Int64(),
    "owd_up_ns": pl.Int64(),
    "loss_down": pl.Float64(),
    "loss_up": pl.Float64(),
}

_SRC = pl.Enum(SOURCES)

STEPS: dict[str, pl.DataType] = {
    "t_ns": pl.Int64(),
    **QUANTITIES,
    **{f"{q}_src": _SRC for q in QUANTITIES},
}


# What a caveat can be about (``Caveat.kind``); the page and the report may style them by kind.
CAVEAT_KINDS = [
    "single_vantage",     # one capture only: delays, queue, losses seen from one end
    "delay_handshake",    # no TCP timestamps: delay from the handshake RTT (and the ACK clock)
    "delay_unknown",      # no delay sample at all
    "assumed",            # a default was filled in (by `fill_unknown`)
    "capacity_lower_bound",  # bins where the path never filled and dispersion said nothing
    "buffer_lower_bound",  # the queue never overflowed: the buffer is at least the estimate
    "outage",             # spans with no packet while data was outstanding (capacity 0)
    "loss_bursts",        # retransmissions around outages, not replayed as random loss
    "missing_subflows",   # the connection carried bytes on subflows not in the capture
    "no_frame_sizes",     # CSV export without frame lengths: rates in payload bytes
    "throughput",         # achieved throughput replayed as capacity
]


@dataclass(frozen=True)
class Caveat:
    """One thing that limits what a number is worth: on path ``path`` ("" = the whole session), for
    ``quantity`` (a step column such as "capacity_down_bps", or "buffer_down_bytes", "loss_down",
    "owd", "capture"), of ``kind`` (one of `CAVEAT_KINDS`), said in one sentence."""

    path: str
    quantity: str
    kind: str
    message: str

    def __str__(self) -> str:
        where = ", ".join(x for x in (self.path, self.quantity) if x)
        return f"{where}: {self.message}" if where else self.message

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "quantity": self.quantity, "kind": self.kind, "message": self.message}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Caveat:
        return cls(path=str(d.get("path", "")), quantity=str(d.get("quantity", "")), kind=str(d.get("kind", "")),
                   message=str(d.get("message", "")))


def empty_steps() -> pl.DataFrame:
    """An empty step table with the right dtypes."""
    return pl.DataFrame(schema=STEPS)


def steps_from_series(
    series: Mapping[str, tuple[Sequence[int], Sequence[float | int | None], Source]],
) -> pl.DataFrame:
    """Build a step table from independent step series, one per quantity.

    ``series[quantity] = (t_ns, values, source)``; each series is piecewise constant (value i holds
    from t_ns[i]) and they may change at different times: the result has a row at every time any of
    them changes, each quantity carried forward (as-of join) from its own last change. Before a
    series' first change its value is null (unknown); quantities not given are null throughout.
    """
    unknown = set(series) - set(QUANTITIES)
    if unknown:
        raise ValueError(f"unknown quantities {sorted(unknown)}")
    times = sorted({int(t) for t_ns, _, _ in series.values() for t in t_ns})
    if not times:
        raise ValueError("steps_from_series needs at least one step")
    out = pl.DataFrame({"t_ns": times}, schema={"t_ns": pl.Int64()})
    for q, (t_ns, values, src) in series.items():
        if len(t_ns) != len(values):
            raise ValueError(f"{q}: t_ns and values differ in length")
        one = (
            pl.DataFrame({"t_ns": list(t_ns), q: list(values)}, schema={"t_ns": pl.Int64(), q: QUANTITIES[q]},
                         strict=False)
            .sort("t_ns")
            .with_columns(pl.when(pl.col(q).is_not_null()).then(pl.lit(src)).otherwise(None).alias(f"{q}_src"))
        )
        out = out.join_asof(one, on="t_ns", strategy="backward")
    return _conform(out)


def _conform(df: pl.DataFrame) -> pl.DataFrame:
    """Add missing columns as null, cast to STEPS and order columns."""
    cols = []
    for name, dtype in STEPS.items():
        if name in df.columns:
            cols.append(pl.col(name).cast(dtype))
        else:
            cols.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(cols)


@dataclass(frozen=True)
class PathTimeline:
    """What one path offered over time. See the module docstring for the step table.

    ``end_ns``: exclusive end of the last step (None: the last step holds forever). ``periodic``:
    the timeline repeats with period ``end_ns`` (mahimahi traces wrap). ``t0_epoch_ns``: Unix time of
    ``t_ns = 0`` when known (captures, ping logs), so several timelines can be aligned.
    """

    name: str
    steps: pl.DataFrame
    kind: Kind = "capacity"
    end_ns: int | None = None
    buffer_down_bytes: int | None = None
    buffer_up_bytes: int | None = None
    buffer_down_src: Source | None = None
    buffer_up_src: Source | None = None
    buffer_is_lower_bound: bool = False
    periodic: bool = False
    t0_epoch_ns: int | None = None
    source: str = ""
    notes: tuple[str, ...] = field(default=())
    caveats: tuple[Caveat, ...] = field(default=())
    outages: tuple[tuple[int, int], ...] = field(default=())      # (start t_ns, end t_ns)
    loss_counts: tuple[tuple[str, int], ...] = field(default=())  # (cause, retransmissions)

    def __post_init__(self) -> None:
        steps = _conform(self.steps)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "caveats", tuple(
            c if isinstance(c, Caveat) else Caveat.from_dict(c) for c in self.caveats))
        object.__setattr__(self, "outages", tuple((int(a), int(b)) for a, b in self.outages))
        object.__setattr__(self, "loss_counts", tuple((str(k), int(v)) for k, v in
                                                      (self.loss_counts.items() if isinstance(self.loss_counts, Mapping)
                                                       else self.loss_counts)))
        for a, b in self.outages:
            if b <= a:
                raise ValueError(f"{self.name}: an outage must end after it starts")
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, not {self.kind!r}")
        if steps.height == 0:
            raise ValueError(f"{self.name}: a timeline needs at least one step")
        # every check on the steps in one pass (one query, not a few per quantity: timelines are
        # made per replay), then judged in order
        t = pl.col("t_ns")
        bad = steps.select(
            t_ns=t.is_null().any() | (t.diff() <= 0).any(), last_t_ns=t.last(),
            **{f"pair_{q}": (pl.col(q).is_null() != pl.col(f"{q}_src").is_null()).any() for q in QUANTITIES},
            **{f"neg_{q}": (pl.col(q) < 0).any() for q in QUANTITIES},
            **{f"above_one_{q}": (pl.col(q) > 1).any() for q in ("loss_down", "loss_up")},
        ).row(0, named=True)
        if bad["t_ns"]:
            raise ValueError(f"{self.name}: t_ns must be non-null and strictly increasing")
        if self.end_ns is not None and self.end_ns <= int(bad["last_t_ns"]):
            raise ValueError(f"{self.name}: end_ns must be after the last step")
        if self.periodic and self.end_ns is None:
            raise ValueError(f"{self.name}: a periodic timeline needs end_ns (its period)")
        for q in QUANTITIES:
            if bad[f"pair_{q}"]:
                raise ValueError(f"{self.name}: {q} and {q}_src must be null together")
            if bad[f"neg_{q}"]:
                raise ValueError(f"{self.name}: {q} must be >= 0")
        for q in ("loss_down", "loss_up"):
            if bad[f"above_one_{q}"]:
                raise ValueError(f"{self.name}: {q} is a probability, must be <= 1")
        for d in ("down", "up"):
            b, s = getattr(self, f"buffer_{d}_bytes"), getattr(self, f"buffer_{d}_src")
            if (b is None) != (s is None):
                raise ValueError(f"{self.name}: buffer_{d}_bytes and buffer_{d}_src must be set together")
            if b is not None and b < 0:
                raise ValueError(f"{self.name}: buffer_{d}_bytes must be >= 0")

    # -- constructors ------------------------------------------------------------------------------
    @classmethod
    def constant(cls, name: str, *, capacity_down_bps: float | None = None,
                 capacity_up_bps: float | None = None, owd_down_ns: int | None = None,
                 owd_up_ns: int | None = None, loss_down: float | None = None, loss_up: float | None = None,
                 src: Source = "assumed", buffer_bytes: int | None = None, **meta: object) -> PathTimeline:
        """A path whose quantities do not change; every given value is tagged ``src``."""
        vals = {"capacity_down_bps": capacity_down_bps, "capacity_up_bps": capacity_up_bps,
                "owd_down_ns": owd_down_ns, "owd_up_ns": owd_up_ns, "loss_down": loss_down,
                "loss_up": loss_up}
        series = {q: ([0], [v], src) for q, v in vals.items() if v is not None}
        steps = steps_from_series(series) if series else _conform(pl.DataFrame({"t_ns": [0]}))
        if buffer_bytes is not None:
            meta.setdefault("buffer_down_bytes", buffer_bytes)
            meta.setdefault("buffer_up_bytes", buffer_bytes)
            meta.setdefault("buffer_down_src", src)
            meta.setdefault("buffer_up_src", src)
        return cls(name=name, steps=steps, **meta)  # type: ignore[arg-type]

    # -- views -------------------------------------------------------------------------------------
    @property
    def duration_ns(self) -> int | None:
        """Span covered by the steps (``end_ns - t_ns[0]``), None when open-ended."""
        return None if self.end_ns is None else self.end_ns - int(self.steps["t_ns"][0])

    def with_durations(self) -> pl.DataFrame:
        """The step table with ``dur_ns`` (null for an open-ended last step)."""
        nxt = self.steps["t_ns"].shift(-1)
        if self.end_ns is not None:
            nxt = nxt.fill_null(self.end_ns)
        return self.steps.with_columns((nxt - pl.col("t_ns")).alias("dur_ns"))

    def mean(self, quantity: str) -> float | None:
        """Time-weighted mean of a quantity over the known, finite steps (None if nothing known)."""
        df = self.with_durations().filter(pl.col(quantity).is_not_null() & pl.col("dur_ns").is_not_null())
        if df.height == 0:
            return None
        w = df["dur_ns"].cast(pl.Float64)
        return float(cast(float, (df[quantity].cast(pl.Float64) * w).sum()) / cast(float, w.sum()))

    def total_bytes(self, direction: Literal["down", "up"] = "down") -> float:
        """Bytes the path could carry (capacity) or carried (throughput) over its finite steps."""
        df = self.with_durations().drop_nulls(["dur_ns", f"capacity_{direction}_bps"])
        return float((df[f"capacity_{direction}_bps"] * df["dur_ns"].cast(pl.Float64) / 8e9).sum())

    @property
    def loss_classes(self) -> dict[str, int]:
        """Retransmissions by cause ("overflow", "outage", "burst", "random"), as the estimator counted."""
        return dict(self.loss_counts)

    def replace(self, **changes: object) -> PathTimeline:
        """A copy with some fields changed (dataclasses.replace, re-validated)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PathTimeline):
            return NotImplemented
        meta = [f for f in self.__dataclass_fields__ if f != "steps"]
        return (all(getattr(self, f) == getattr(other, f) for f in meta)
                and self.steps.equals(other.steps))

    __hash__ = None  # type: ignore[assignment]


class Timelines(Mapping[str, PathTimeline]):
    """The paths of one session, name -> PathTimeline, in order; the first is the primary path."""

    def __init__(self, paths: Iterable[PathTimeline] | Mapping[str, PathTimeline] = ()) -> None:
        items = list(paths.values()) if isinstance(paths, Mapping) else list(paths)
        self._paths: dict[str, PathTimeline] = {}
        for p in items:
            if not isinstance(p, PathTimeline):
                raise TypeError(f"Timelines holds PathTimeline objects, not {type(p).__name__}")
            if p.name in self._paths:
                raise InputError(None, f"two paths are named {p.name!r}")
            self._paths[p.name] = p

    def __getitem__(self, name: str) -> PathTimeline:
        try:
            return self._paths[name]
        except KeyError:
            raise KeyError(f"no path {name!r}; paths are {list(self._paths)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Timelines):
            return NotImplemented
        return list(self._paths) == list(other._paths) and all(
            self._paths[k] == other._paths[k] for k in self._paths)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Timelines({', '.join(f'{k}: {v.kind}' for k, v in self._paths.items())})"

    @property
    def caveats(self) -> list[Caveat]:
        """Every path's caveats, paths in order, each once."""
        return list(dict.fromkeys(c for tl in self._paths.values() for c in tl.caveats))

    @property
    def primary(self) -> PathTimeline:
        """The first path (carries the initial subflow)."""
        if not self._paths:
            raise InputError(None, "no paths")
        return next(iter(self._paths.values()))
