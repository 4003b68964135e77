"""Shared helpers for the metrics: connection selection, the data direction, the time origin, and the
byte-range "first cover" computation that the OOO, goodput and application-delay metrics share.

Everything here is a pure function of a PacketEvents table (``workbench.capture.schema.PACKET_EVENTS``);
nothing knows whether the rows came from a capture or a replay.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

import numpy as np
import polars as pl

from workbench.errors import InputError

__all__ = [
    "ACK",
    "INF_NS",
    "SYN",
    "check_columns",
    "data_direction",
    "data_directions",
    "first_cover",
    "ms",
    "opposite",
    "quantile_aggs",
    "select_conn",
    "start_times",
    "with_data_dir",
]

SYN = 0x002
ACK = 0x010

# Sentinel for "never" in time arithmetic (cum_max and max() treat it as larger than any real time);
# converted back to null before anything leaves the metrics package.
INF_NS = 2**62


def check_columns(df: pl.DataFrame, needed: Iterable[str], what: str = "PacketEvents") -> None:
    """Raise `InputError` naming the missing columns, instead of a polars error deep inside a metric."""
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise InputError(None, f"{what} table lacks column(s) {', '.join(missing)}")


def select_conn(df: pl.DataFrame, conn: int | None) -> pl.DataFrame:
    """The rows of connection ``conn`` (all connections when None)."""
    if conn is None:
        return df
    return df.filter(pl.col("conn") == conn)


def ms(expr: pl.Expr) -> pl.Expr:
    """ns -> ms as Float64."""
    return expr.cast(pl.Float64) / 1e6


def opposite(direction: str) -> str:
    return "s2c" if direction == "c2s" else "c2s"


def data_directions(events: pl.DataFrame) -> pl.DataFrame:
    """Per connection, the data direction: the ``dir`` carrying more payload bytes.

    Bytes are counted at one observation point only (the point with more rows of payload in that
    direction would double-count a replay or a capture pair), so we take, per (conn, dir), the maximum
    over points of the payload sum. Ties (including no payload at all) go to ``s2c``, the download
    direction, which is the common case for the captures we study.

    Returns columns ``conn`` (UInt32) and ``data_dir`` (String, "c2s" or "s2c").
    """
    if "data_dir" in events.columns:  # tagged by `with_data_dir`: per connection, already decided
        check_columns(events, ["conn"])
        groups = conn_groups(events["conn"])
        first = groups.order[groups.bounds[:-1]]  # each connection's first row
        return pl.DataFrame([groups.key_series("conn"),
                             take(events, ["data_dir"], first)["data_dir"].cast(pl.String)])
    check_columns(events, ["conn", "dir", "point", "payload_bytes"])
    groups = conn_groups(events["conn"])
    point, n_points = codes(events["point"])
    counted = mask_ne(events["point"], "drop")
    pay = payload(events)
    # bytes[conn, dir, point]: payload sums; per (conn, dir) the best-observed point's sum.
    sums = np.zeros((len(groups.keys), 2, max(n_points, 1)), np.int64)
    for d, name in enumerate(("c2s", "s2c")):
        at = counted & mask_eq(events["dir"], name)
        if len(groups.keys) == 1:
            sums[0, d, :n_points] = [pay[at & (point == p)].sum() for p in range(n_points)]
        else:
            np.add.at(sums[:, d, :], (groups.inv[at], point[at]), pay[at])
    best = sums.max(axis=2)
    up = (best[:, 0] > best[:, 1]).astype(np.int64)
    return pl.DataFrame([groups.key_series("conn"), labels("data_dir", ["s2c", "c2s"], up, literal=True)])


def data_direction(events: pl.DataFrame, conn: int) -> str:
    """The data direction ("c2s" or "s2c") of connection ``conn``: the ``dir`` with more payload bytes
    (counted at one observation point; ties go to "s2c")."""
    dd = data_directions(select_conn(events, conn))
    if dd.height == 0:
        raise InputError(None, f"no events for connection {conn}")
    return str(dd["data_dir"][0])


def with_data_dir(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` plus the columns ``data_dir`` (its connection's data direction) and ``is_data_dir``
    (the row travels in it). A table that has them already is returned as is: a caller deriving many
    metrics from one connection tags it once (each metric function tags what it is given, and deciding
    the direction is a group-by over every row)."""
    if "is_data_dir" in events.columns and "data_dir" in events.columns:
        return events
    dd = data_directions(events)
    c2s, s2c = mask_eq(events["dir"], "c2s"), mask_eq(events["dir"], "s2c")
    if dd.height == 1:  # one connection (what `prepare` tags): a constant
        data_dir: pl.Expr | pl.Series = pl.lit(dd["data_dir"][0], pl.String)
        is_dd = c2s if dd["data_dir"][0] == "c2s" else s2c
    else:
        up = (dd["data_dir"] == "c2s").to_numpy()[conn_groups(events["conn"]).inv]
        data_dir = labels("data_dir", ["s2c", "c2s"], up.astype(np.int64), literal=True)
        is_dd = np.where(up, c2s, s2c)
    # `dir` (as a string) == data_dir: null where dir is.
    return events.with_columns(data_dir.alias("data_dir"),
                               masked_series("is_data_dir", is_dd, events["dir"].is_null().to_numpy()
                                             if events["dir"].null_count() else np.zeros(len(is_dd), bool),
                                             pl.Boolean()))


def start_times(events: pl.DataFrame) -> pl.DataFrame:
    """Per connection, the time origin of goodput and completion time: the first observation of a SYN
    (any subflow, any point; the MP_CAPABLE SYN is the earliest) if the table has one, else the first
    observation of a data-direction payload segment. Columns ``conn``, ``start_ns``."""
    ev = with_data_dir(events)
    check_columns(ev, ["t_ns", "flags", "payload_bytes", "point"])
    groups = conn_groups(ev["conn"])
    t = int_array(ev["t_ns"])
    syn_ok, flags = nullable_int(ev["flags"])
    syn = group_min(groups, t, syn_ok & ((flags & SYN) != 0))
    data = group_min(groups, t, true_mask(ev["is_data_dir"]) & (payload(ev) > 0)
                     & mask_ne(ev["point"], "drop"))
    start = np.ma.where(syn.mask, data, syn)  # the SYN's time where there is one
    return pl.DataFrame([groups.key_series("conn"), pl.Series("start_ns", start, ev["t_ns"].dtype)])


def first_cover(intervals: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Which observation first covered each byte of a set of byte ranges.

    ``intervals`` has columns ``conn``, ``row_id`` (unique, and increasing in observation order among
    rows with equal ``t_ns``), ``t_ns``, ``s``, ``e`` (byte range [s, e), Int64, e > s; no nulls).

    The ranges can overlap arbitrarily (a reinjection that re-segments data differently, a retransmission
    that coalesces two segments). We cut the DSN space at every range boundary into elementary pieces;
    every piece is either entirely inside or entirely outside each range, so "who first covered byte x"
    becomes "who first covered piece p": the earliest (t_ns, row_id) over the (row, piece) pairs. A
    range spans as many pieces as there are boundaries inside it (1 for the usual non-overlapping or
    identically re-sent segments), so the pairs are about as many as the rows.

    Returns ``(rows, pieces)``:
      * rows: ``conn``, ``row_id``, ``i0`` (index of the piece starting at s), ``new_bytes`` (bytes
        this row was the first to cover; 0 for a pure duplicate), in the order of ``intervals``;
      * pieces: ``conn``, ``piece``, ``a_ns`` (time of the first covering observation), ``owner`` (its
        row_id), ``piece_start``, ``piece_end``; only pieces that some range covers, sorted by
        (conn, piece). Piece p of a connection spans its p-th and (p+1)-th distinct boundary, so
        uncovered gaps show as ``piece_start`` != previous ``piece_end``.

    In numpy, connection by connection: the same computation as a polars explode / sort / group-by /
    join chain (kept in tests/test_metrics_first_cover.py as the oracle it is checked against), which
    cost a report more than any other metric, for the overhead of its dozen steps more than their work.
    """
    check_columns(intervals, ["conn", "row_id", "t_ns", "s", "e"], "intervals")
    conn_dtype = intervals["conn"].dtype
    conn = intervals["conn"].to_numpy()
    row_id = intervals["row_id"].cast(pl.Int64).to_numpy()
    t_ns = intervals["t_ns"].cast(pl.Int64).to_numpy()
    s = intervals["s"].cast(pl.Int64).to_numpy()
    e = intervals["e"].cast(pl.Int64).to_numpy()
    if (e <= s).any():
        raise ValueError("first_cover: every range needs e > s")
    i0_out = np.zeros(len(s), np.int64)
    new_bytes_out = np.zeros(len(s), np.int64)
    pieces: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for c in np.unique(conn):
        at = np.flatnonzero(conn == c)
        ct, cr = t_ns[at], row_id[at]
        i0, owned, piece, owner, start, end = cover_one(s[at], e[at], ct, cr)
        i0_out[at], new_bytes_out[at] = i0, owned
        pieces.append((int(c), piece, ct[owner], cr[owner], start, end))
    rows_out = pl.DataFrame({"conn": pl.Series(conn, dtype=conn_dtype), "row_id": row_id, "i0": i0_out,
                             "new_bytes": new_bytes_out})
    pieces_out = pl.DataFrame(
        {"conn": pl.Series(np.concatenate([np.full(len(p[1]), p[0]) for p in pieces]) if pieces else [],
                           dtype=conn_dtype),
         **{name: np.concatenate([p[k] for p in pieces]) if pieces else np.zeros(0, np.int64)
            for k, name in enumerate(("piece", "a_ns", "owner", "piece_start", "piece_end"), start=1)}},
        schema_overrides={"piece": pl.Int64, "a_ns": pl.Int64, "owner": pl.Int64, "piece_start": pl.Int64,
                          "piece_end": pl.Int64},
    )
    return rows_out, pieces_out


# ---- numpy building blocks -------------------------------------------------------------------------
# The metrics were first written as chains of eager polars operations; each costs a fixed ~0.1 ms, which
# dominated a report of many small sources. The row-by-row parts (selections, sorts, joins, running
# maxima and sums) are numpy over these helpers; the float aggregations (means, quantiles) stay polars
# expressions over the same rows, so every value is the one the polars formulation gave (its oracles:
# tests/test_metrics_fast_*.py). Three things polars does that the numpy side reproduces, because a
# value depends on them:
#   * its multi-column sort is not stable, and a mean sums in row order: `polars_sort_order`;
#   * it divides a column by a number as a multiplication by the reciprocal: `over_scalar`;
#   * a group-by on a column flagged sorted runs over slices, otherwise by hashing, and the two round a
#     mean differently: the key columns leave flagged as polars left them (``set_sorted`` after a sort
#     by them, `take` for columns carried through).


def int_array(s: pl.Series) -> np.ndarray:
    """A column without nulls as int64 (zero-copy when it is already)."""
    if s.null_count():
        raise InputError(None, f"column {s.name!r} has nulls where the metrics need a value on every row")
    return s.to_numpy().astype(np.int64, copy=False)


def nullable_int(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(valid, values as int64 with 0 where null) of an integer column."""
    if not s.null_count():
        return np.ones(len(s), bool), s.to_numpy().astype(np.int64, copy=False)
    # polars' own kernels: through Arrow (to_arrow, is_valid, fill_null) it took 4x as long
    return s.is_not_null().to_numpy(), s.fill_null(0).to_numpy().astype(np.int64, copy=False)


def nullable_float(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(valid, values as float64 with 0 where null) of a float column."""
    if not s.null_count():
        return np.ones(len(s), bool), s.to_numpy().astype(np.float64, copy=False)
    return s.is_not_null().to_numpy(), s.fill_null(0.0).to_numpy().astype(np.float64, copy=False)


def payload(df: pl.DataFrame) -> np.ndarray:
    """``payload_bytes`` as int64, 0 where null: every metric reads it through ``> 0`` filters and sums,
    which leave a null out as they do a 0."""
    return nullable_int(df["payload_bytes"])[1]


def true_mask(s: pl.Series) -> np.ndarray:
    """Rows where a Boolean column is true (null: no, as in a polars filter)."""
    if not s.null_count():
        return s.to_numpy()
    return s.fill_null(False).to_numpy()


def false_mask(s: pl.Series) -> np.ndarray:
    """Rows where a Boolean column is false (null: no, as ``~col`` in a polars filter)."""
    if not s.null_count():
        return ~s.to_numpy()
    return ~s.fill_null(True).to_numpy()


def _enum_codes(s: pl.Series) -> tuple[np.ndarray, list[str]]:
    """An Enum column's physical codes (NaN where null) and its categories."""
    # the physical column is each row's index into the categories (an Arrow dictionary array would
    # rebuild the categories per call, 15x slower)
    return s.to_physical().to_numpy(), s.dtype.categories.to_list()  # type: ignore[attr-defined]


def mask_eq(s: pl.Series, value: str) -> np.ndarray:
    """Rows where ``s == value`` (null: no)."""
    if isinstance(s.dtype, pl.Enum):
        phys, cats = _enum_codes(s)
        if value not in cats:
            return np.zeros(len(s), bool)
        return phys == cats.index(value)  # null: NaN, never equal
    return (s == value).fill_null(False).to_numpy()


def mask_ne(s: pl.Series, value: str) -> np.ndarray:
    """Rows where ``s != value`` (null: no)."""
    ne = ~mask_eq(s, value)
    return ne & s.is_not_null().to_numpy() if s.null_count() else ne


def codes(s: pl.Series) -> tuple[np.ndarray, int]:
    """(integer code per row, number of codes) of a categorical or String column (a group label per
    distinct value; null its own)."""
    if isinstance(s.dtype, pl.Enum):
        phys, cats = _enum_codes(s)
        return np.where(np.isnan(phys), len(cats), phys).astype(np.int64) if s.null_count() else \
            phys.astype(np.int64), len(cats) + 1
    # Codes in order of first appearance (null last), as Arrow's dictionary encoding numbers them; from
    # polars' own kernels: pyarrow.compute costs a worker ~0.3 s to import and call for the first time.
    first, names = _first_codes(s)
    n = len(names)
    return np.where(first >= 0, first, n), n + 1


def _first_codes(s: pl.Series) -> tuple[np.ndarray, list[str]]:
    """(per row the number of its value in order of first appearance, -1 for null; the values)."""
    as_str = s.cast(pl.String)
    names = as_str.drop_nulls().unique(maintain_order=True)
    # a cast to an Enum of the values numbers them by hashing (a string rank would sort: 10x slower)
    phys = as_str.cast(pl.Enum(names)).to_physical().cast(pl.Int64)
    return phys.fill_null(-1).to_numpy(), names.to_list()


def string_rank(s: pl.Series) -> np.ndarray:
    """Per row, the rank of its value among the distinct values in polars' sort order (nulls first)."""
    first, names = _first_codes(s)
    rank = np.empty(len(names) + 1, np.int64)
    rank[-1] = -1  # null (index -1)
    # Python orders str by code point, which is UTF-8 byte order, polars' order of strings
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return rank[first]


class Groups:
    """Rows grouped by one integer key column: ``keys`` (sorted distinct values), ``inv`` (group of each
    row), ``order`` (row indices stably sorted by group)."""

    def __init__(self, series: pl.Series, keys: np.ndarray, inv: np.ndarray) -> None:
        self.series, self.keys, self.inv = series, keys, inv

    @cached_property
    def order(self) -> np.ndarray:
        return np.argsort(self.inv, kind="stable")

    @cached_property
    def bounds(self) -> np.ndarray:
        """Group g's rows are ``order[bounds[g]:bounds[g + 1]]``."""
        return np.searchsorted(self.inv[self.order], np.arange(len(self.keys) + 1))

    def rows(self, g: int) -> np.ndarray:
        if len(self.keys) == 1:
            return np.arange(len(self.inv))
        return self.order[self.bounds[g]:self.bounds[g + 1]]

    def key_series(self, name: str) -> pl.Series:
        """The keys as a Series flagged sorted (as after polars' sort by them)."""
        return pl.Series(name, self.keys, self.series.dtype).set_sorted()


def conn_groups(series: pl.Series) -> Groups:
    """`Groups` of a key column without nulls (the common single-connection table without a sort)."""
    vals = series.to_numpy()
    if series.null_count():
        raise InputError(None, f"column {series.name!r} has nulls")
    if len(vals) and (vals == vals[0]).all():
        return Groups(series, vals[:1].copy(), np.zeros(len(vals), np.int64))
    keys, inv = np.unique(vals, return_inverse=True)
    return Groups(series, keys, inv.astype(np.int64))


def group_min(groups: Groups, values: np.ndarray, mask: np.ndarray) -> np.ma.MaskedArray:
    """Per group, the minimum of ``values`` over the rows in ``mask`` (masked where none)."""
    if len(groups.keys) == 1:
        v = values[mask]
        return np.ma.masked_array([v.min() if len(v) else 0], [not len(v)], dtype=np.int64)
    out = np.full(len(groups.keys), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, groups.inv[mask], values[mask])
    has = np.zeros(len(groups.keys), bool)
    has[groups.inv[mask]] = True
    return np.ma.masked_array(out, ~has)


def polars_sort_order(keys: dict[str, tuple[np.ndarray, pl.DataType]], *,
                      ties_only_through: np.ndarray | tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """The row order ``DataFrame.sort(*keys)`` gives a table with these key columns (no nulls).

    Polars' multi-column sort is not stable: rows equal in every key come out in an order of its own,
    which later float sums (a mean over rows in table order) can depend on. Where no two rows share
    all keys every correct sort agrees, and numpy's is used; otherwise polars sorts the key columns
    (with their dtypes and in this order: its permutation depends on nothing else). When the caller
    knows the order of tied rows only matters through some columns (``ties_only_through``: one array
    or a tuple of them, codes or values) and they are equal within every run of tied rows, numpy's
    order does as well."""
    cols = [v for v, _ in keys.values()]
    n = len(cols[0])
    order = np.lexsort(cols[::-1])
    if n > 1:
        tied = np.ones(n - 1, bool)
        for c in cols:
            sc = c[order]
            tied &= sc[1:] == sc[:-1]
        if tied.any():
            if ties_only_through is not None:
                through = ties_only_through if isinstance(ties_only_through, tuple) else (ties_only_through,)
                if all((w[1:][tied] == w[:-1][tied]).all() for w in (v[order] for v in through)):
                    return order
            frame = pl.DataFrame([pl.Series(k, v, dt) for k, (v, dt) in keys.items()]).with_row_index("_i")
            return frame.sort(*keys)["_i"].to_numpy().astype(np.int64)
    return order


def first_reach(ack: np.ndarray, t_ns: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each value in ``x``, the first time a cumulative ACK reached it: min t over the ACKs >= x (the
    running maximum of the ACKs in time order first passes x at the earliest of them), INF_NS if none.
    What a forward as-of join of x on the table (running max, first time) gave."""
    if not len(ack):
        return np.full(len(x), INF_NS, np.int64)
    by = np.argsort(ack, kind="stable")
    ack, t_ns = ack[by], t_ns[by]
    from_here = np.minimum.accumulate(t_ns[::-1])[::-1]  # min t over ack[i:]
    i = np.searchsorted(ack, x, "left")
    return np.where(i < len(ack), from_here[np.minimum(i, len(ack) - 1)], INF_NS)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` (which hashes: slower on the long, nearly sorted arrays here)."""
    x = np.sort(x)
    return x[np.r_[True, x[1:] != x[:-1]]] if len(x) else x


def dense_codes(x: np.ndarray) -> np.ndarray:
    """``np.unique(x, return_inverse=True)[1]`` of an integer array, as int64."""
    if not len(x):
        return np.zeros(0, np.int64)
    lo, hi = int(x.min()), int(x.max())
    if hi - lo <= 4 * len(x) + 1024:  # small range (subflows, groups): by table
        present = np.zeros(hi - lo + 1, np.int64)
        present[x - lo] = 1
        return (np.cumsum(present) - 1)[x - lo]
    return np.unique(x, return_inverse=True)[1].reshape(-1).astype(np.int64)


def dense_key(*cols: np.ndarray) -> np.ndarray:
    """One int64 code per distinct combination of the columns' values (codes in sorted order)."""
    if len(cols) == 1 or all((c == c[0]).all() for c in cols[:-1] if len(c)):
        return dense_codes(cols[-1])
    order, run = _sorted_runs(cols)
    out = np.empty(len(order), np.int64)
    out[order] = run
    return out


def run_lengths(*cols: np.ndarray) -> np.ndarray:
    """Per row, how many rows share its values in every column."""
    if not len(cols[0]):
        return np.zeros(0, np.int64)
    order, run = _sorted_runs(cols)
    out = np.empty(len(order), np.int64)
    out[order] = np.bincount(run)[run]
    return out


def _sorted_runs(cols: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(the rows sorted by the columns, first column first; in that order, each row's run: 0, 1, ...
    for each new combination of values). Needs at least one row."""
    order = np.lexsort(cols[::-1])
    new = np.zeros(len(order), bool)
    new[0] = True
    for c in cols:
        sc = c[order]
        new[1:] |= sc[1:] != sc[:-1]
    return order, np.cumsum(new) - 1


def over_scalar(x: np.ndarray, d: float) -> np.ndarray:
    """``x / d`` as polars computes a Float64 column divided by a number: times the reciprocal (which can
    differ from a true division in the last bit), except for a column of one row, which it divides as
    a scalar."""
    return x / d if len(x) == 1 else x * (1.0 / d)


def take(df: pl.DataFrame, cols: list[str], idx: np.ndarray) -> pl.DataFrame:
    """Rows ``idx`` of columns ``cols``: polars' own gather, as its sorts and joins did (a column it
    holds as one repeated value stays one, flagged sorted: group-bys by such a column run on slices,
    and their float sums, a mean, depend on it)."""
    return df.select(cols)[idx]


def masked_series(name: str, values: np.ndarray, null: np.ndarray, dtype: pl.DataType, *,
                  when: bool = False) -> pl.Series:
    """A Series of ``values`` with nulls where ``null``. ``when``: it stands for a polars
    ``when(...).then(...)`` without ``otherwise``, which polars flags sorted when no row takes the
    ``then`` (the column is its null literal)."""
    out = pl.Series(name, np.ma.masked_array(values, null), dtype)
    return out.set_sorted() if when and null.all() else out


def labels(name: str, choices: list[str], which: np.ndarray, *, literal: bool = False) -> pl.Series:
    """A String Series whose row i is ``choices[which[i]]``. ``literal``: it stands for a polars literal
    or a `when` on the rows themselves, which polars flags sorted when it comes out constant."""
    out = pl.Series(name, choices, pl.String)[which]
    return out.set_sorted() if literal and (len(which) < 2 or (which == which[0]).all()) else out


def cover_one(s: np.ndarray, e: np.ndarray, t_ns: np.ndarray, row_id: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`first_cover` of one connection's ranges, as arrays: per row ``i0`` and ``new_bytes``; per covered
    piece (in piece order) ``piece``, ``owner`` (position of the owning row in the input), ``start``,
    ``end``."""
    bounds = sorted_unique(np.concatenate([s, e]))
    i0 = np.searchsorted(bounds, s)
    n_pieces = np.searchsorted(bounds, e) - i0
    # One (row, piece) pair per piece a row spans: the explode.
    pair_row = np.repeat(np.arange(len(s)), n_pieces)
    pair_piece = (np.arange(len(pair_row)) - np.repeat(np.cumsum(n_pieces) - n_pieces, n_pieces)
                  + i0[pair_row])
    # Sorted by (piece, t_ns, row_id), the first pair of each piece is its owner.
    order = np.lexsort((row_id[pair_row], t_ns[pair_row], pair_piece))
    sorted_piece = pair_piece[order]
    first = np.ones(len(order), bool)
    first[1:] = sorted_piece[1:] != sorted_piece[:-1]
    piece, owner = sorted_piece[first], pair_row[order][first]
    start, end = bounds[piece], bounds[piece + 1]
    owned = np.zeros(len(s), np.int64)
    np.add.at(owned, owner, end - start)
    return i0, owned, piece, owner, start, end


def quantile_aggs(col: str, prefix: str, suffix: str = "", scale: float = 1.0, *,
                  with_count: bool = True) -> list[pl.Expr]:
    """Aggregations ``{prefix}{stat}{suffix}`` of ``col`` / ``scale`` for stat in n, min, mean, p50, p95,
    p99, max (percentiles interpolate linearly between order statistics)."""
    c = pl.col(col).cast(pl.Float64) / scale
    out = [
        c.min().alias(f"{prefix}min{suffix}"),
        c.mean().alias(f"{prefix}mean{suffix}"),
        c.quantile(0.5, "linear").alias(f"{prefix}p50{suffix}"),
        c.quantile(0.95, "linear").alias(f"{prefix}p95{suffix}"),
        c.quantile(0.99, "linear").alias(f"{prefix}p99{suffix}"),
        c.max().alias(f"{prefix}max{suffix}"),
    ]
    if with_count:
        out.insert(0, pl.col(col).count().cast(pl.Int64).alias(f"{prefix}n"))
    return out
