"""The scheduler seam: what a scheduler sees, what it may decide, and how it declares its knobs.

A scheduler is a small object whose ``select(conn, subflows)`` is called by the connection's send
loop (``mptcp_write_xmit``) whenever something may have changed (an ACK, a DATA_ACK, new application
data, a timer). Each call returns one `Decision` — hand meta segment(s) to one subflow — or ``None``
(nothing now / wait). The loop calls ``select`` again after every applied decision until it gets
``None`` or a decision that changes nothing, so a decision is "the next step", not a whole plan.

What a decision can express (enough for the seed-paper schedulers):

* ``Decision(sf)`` / ``Decision(sf, count=n)``: the next ``n`` unsent segments from the send head,
  in order (minRTT hands up to the free cwnd in one go, upstream "burst" up to 64 KB).
* ``Decision(sf, seg=i)``: meta segment ``i`` specifically — an unsent one ahead of the head (STMS
  sends the slow path's data from the far end of the unsent range), the head of the reinjection
  queue, or an already-sent one as a copy (opportunistic retransmission, redundant schedulers).
* Queueing beyond cwnd is allowed: the subflow sends its queue as cwnd opens (OTIAS, DAPS, upstream).
  Waiting is ``None``; a scheduler that must wake at a time of its choosing calls
  ``conn.wake_at(t_ns)`` and gets ``on_timer``.

Views: `SubflowView` and `ConnView` are protocols of read-only attributes. For speed (a scheduler is
consulted about twice per ACK) the engine passes its live subflow and connection objects, whose
view attributes are plain slots kept current, not copies: a scheduler must treat them as read-only
(the conformance tests check that a decision loop leaves engine state unchanged). Mutations a kernel
scheduler really performs go through explicit calls on the connection view (``penalize`` for
minRTT's penalization, ``drop_reinject``, ``wake_at``).

Layers: a path manager or flow-control policy that wraps any scheduler (DRePaS gating paths, RBP
splitting the receive window) subclasses `Layer`; by default it delegates everything to the inner
scheduler. A path manager overrides ``usable`` (the subflows the inner scheduler may see now); a
flow-control layer overrides ``select`` to show the inner scheduler a `ConnOverride` (e.g. a smaller
``wnd_end``) and passes the answer through `clip_to_window`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

from workbench.errors import InputError

__all__ = [
    "CA_LOSS",
    "CA_OPEN",
    "CA_RECOVERY",
    "ConnOverride",
    "ConnView",
    "Decision",
    "Layer",
    "ParamSpec",
    "Scheduler",
    "SubflowView",
    "clip_to_window",
    "is_available",
    "is_def_unavailable",
]


# Linux TCP_CA_* congestion states as SubflowView.ca_state reports them
CA_OPEN = 0
CA_RECOVERY = 3
CA_LOSS = 4


class Decision(NamedTuple):
    """Give subflow ``subflow`` (its ``index``) the segment ``seg`` (a meta segment index), or, with
    ``seg = -1``, up to ``count`` segments from the unsent head in order. The engine reads it as a
    tuple, so a hot-path scheduler may return the plain tuple ``(subflow, seg, count)``."""

    subflow: int
    seg: int = -1
    count: int = 1  # type: ignore[assignment]  # shadows tuple.count; the name is public API


@dataclass(frozen=True)
class ParamSpec:
    """A tunable parameter: default and search range (``log`` = sample on a log scale)."""

    name: str
    default: float | int | str | bool
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None
    doc: str = ""

    def check(self, value: Any) -> Any:
        if self.choices is not None:
            if value not in self.choices:
                raise InputError(None, f"parameter {self.name}={value!r} not one of {list(self.choices)}")
            return value
        if isinstance(self.default, bool):
            return bool(value)
        if isinstance(self.default, int | float):
            try:
                v = type(self.default)(value)
            except (TypeError, ValueError):
                raise InputError(None, f"parameter {self.name}={value!r} is not a number") from None
            if isinstance(v, float) and not math.isfinite(v):
                raise InputError(None, f"parameter {self.name}={value!r} is not finite")
            if (self.low is not None and v < self.low) or (self.high is not None and v > self.high):
                raise InputError(None, f"parameter {self.name}={v} outside [{self.low}, {self.high}]")
            return v
        return value


class SubflowView(Protocol):
    """What a scheduler may read about one subflow (sender side). Times in ns, sizes as named."""

    index: int               # position in the connection's subflow list (use it in Decision)
    name: str                # path name
    @property
    def established(self) -> bool: ...
    @property
    def pf(self) -> bool: ...                     # "potentially failed" after an RTO (Linux tp->pf)
    @property
    def backup(self) -> bool: ...
    @property
    def stale(self) -> bool: ...                  # upstream: no ACK over stale_loss_cnt MPTCP timer periods
    @property
    def srtt_ns(self) -> int: ...                 # 0 before the first sample
    @property
    def srtt_us8(self) -> int: ...                # Linux srtt_us (x8), for code-faithful maths
    @property
    def rttvar_ns(self) -> int: ...               # Linux rttvar (floored near rto_min)
    @property
    def min_rtt_ns(self) -> int: ...
    @property
    def rto_ns(self) -> int: ...
    @property
    def cwnd(self) -> int: ...                    # segments
    @property
    def ssthresh(self) -> int: ...
    @property
    def in_slow_start(self) -> bool: ...
    @property
    def ca_state(self) -> int: ...                # CA_OPEN / CA_RECOVERY / CA_LOSS
    @property
    def packets_out(self) -> int: ...
    @property
    def in_flight(self) -> int: ...               # Linux packets_in_flight
    @property
    def queued(self) -> int: ...                  # segments queued on the subflow, not yet sent
    @property
    def queued_bytes(self) -> int: ...
    @property
    def unacked_bytes(self) -> int: ...           # write_seq - snd_una (in flight + queued)
    @property
    def mss(self) -> int: ...
    @property
    def rate_bps(self) -> float: ...              # delivery rate over the last ~srtt
    @property
    def pacing_rate_bps(self) -> float: ...       # Linux sk_pacing_rate model (§0.3)
    @property
    def sndbuf_segments(self) -> int: ...         # autotuned subflow send buffer (upstream)
    @property
    def last_ack_ns(self) -> int: ...
    def carried(self, seg: int) -> bool: ...      # did this subflow already carry meta segment seg?


class ConnView(Protocol):
    """What a scheduler may read about the connection, plus the few actions kernels take."""

    @property
    def now_ns(self) -> int: ...
    @property
    def mss(self) -> int: ...
    @property
    def snd_una(self) -> int: ...                 # DATA_ACKed bytes (relative DSN)
    @property
    def write_seq(self) -> int: ...               # bytes the application has written
    @property
    def wnd_end(self) -> int: ...                 # right edge of the peer's advertised window (DSN)
    @property
    def send_buf_bytes(self) -> int: ...          # send-buffer limit
    @property
    def send_buffer_full(self) -> bool: ...       # app wants to write but the buffer is full
    @property
    def unsent_bytes(self) -> int: ...
    @property
    def head(self) -> int: ...                    # lowest unsent meta segment index (n_segs if none)
    @property
    def n_segs(self) -> int: ...                  # meta segments created so far (unsent ones included)
    @property
    def oldest_unacked(self) -> int: ...          # lowest sent-but-not-DATA_ACKed segment, -1 if none
    @property
    def reinject_head(self) -> int: ...           # head of the reinjection queue, -1 if empty
    @property
    def recovery(self) -> bool: ...               # upstream msk->recovery: pending data being re-sent
    @property
    def reinject_queue(self) -> tuple[int, ...]: ...
    @property
    def rcv_ooo_bytes(self) -> int: ...           # receiver's connection-level OOO queue (oracle)
    def seg_dsn(self, seg: int) -> int: ...
    def seg_len(self, seg: int) -> int: ...
    def seg_path_mask(self, seg: int) -> int: ...  # bit (1 << subflow index) per carrier
    def seg_sent(self, seg: int) -> bool: ...
    def window_allows(self, seg: int) -> bool: ...  # meta_snd_wnd_test for that segment
    def nth_unsent(self, n: int) -> int: ...        # index of the n-th (0-based) unsent segment, n_segs if none
    def seg_at_dsn(self, dsn: int) -> int: ...      # segment starting at byte dsn (first one at or above it)
    def penalize(self, subflow: int) -> None: ...   # halve cwnd (and ssthresh out of slow start)
    def drop_reinject(self, seg: int) -> int: ...  # 1 if it was queued for reinjection
    def wake_at(self, t_ns: int) -> None: ...


def is_def_unavailable(sf: SubflowView) -> bool:
    """mptcp_is_def_unavailable: not established or potentially failed."""
    return not sf.established or sf.pf


def is_available(sf: SubflowView, *, cwnd_test: bool = True, strict_queue: bool = True) -> bool:
    """Out-of-tree ``mptcp_is_available`` (§0.2): usable now, with room in cwnd net of queued data.

    ``strict_queue`` selects the v0.95 ``>=`` queued-bytes test (True) or the older ``>`` one.
    """
    if not sf.established or sf.pf:
        return False
    if sf.ca_state == CA_LOSS:
        return False
    if not cwnd_test:
        return True
    inflight = sf.in_flight
    cwnd = sf.cwnd
    if inflight >= cwnd:
        return False
    space = (cwnd - inflight) * sf.mss
    q = sf.queued_bytes
    return q < space if strict_queue else q <= space


def lowest_rtt_available(subflows: list[SubflowView]) -> SubflowView | None:
    """The available subflow (cwnd room, see `is_available`) with the lowest srtt that has an RTT
    sample yet; the first one listed wins a tie. None if there is none."""
    best = None
    for sf in subflows:
        if is_available(sf) and sf.srtt_us8 and (best is None or sf.srtt_us8 < best.srtt_us8):
            best = sf
    return best


class Scheduler:
    """Base class. Subclasses set the class attributes and implement `select`.

    Engine-facing flavour knobs (kernel family the scheduler belongs to):
    ``reinject_on_subflow_rto`` (out-of-tree: copy the subflow's queue to the reinjection queue on a
    subflow RTO; upstream: no), ``meta_rto_factor`` (out-of-tree meta RTO = 2 × max subflow RTO) and
    ``meta_retrans``: "oldest-segment" (out-of-tree: the meta RTO, backed off exponentially, puts the
    oldest unacknowledged segment up for reinjection) or "upstream" (net/mptcp: the MPTCP retransmit
    timer runs at TCP_RTO_MIN or the longest pending timer of a subflow still making progress, puts the
    head data fragment (up to 32 KB) up for reinjection, and marks a subflow stale after
    stale_loss_cnt periods without an ACK, re-sending everything unacknowledged elsewhere).
    """

    name: ClassVar[str] = "base"
    description: ClassVar[str] = ""
    source: ClassVar[str] = ""
    params: ClassVar[tuple[ParamSpec, ...]] = ()
    reinject_on_subflow_rto: ClassVar[bool] = True
    meta_rto_factor: ClassVar[float] = 2.0
    meta_retrans: ClassVar[str] = "oldest-segment"
    # Whether it hands subflows more data than their cwnd has room for (queued on the subflow, sent
    # as the cwnd opens: upstream Linux, DAPS, OTIAS). The conformance suite holds the others to cwnd.
    queues_beyond_cwnd: ClassVar[bool] = False

    def __init__(self, **values: Any) -> None:
        specs = {p.name: p for p in self.params}
        unknown = set(values) - set(specs)
        if unknown:
            raise InputError(None, f"scheduler {self.name!r} has no parameter(s) {sorted(unknown)}; "
                                   f"known: {sorted(specs)}")
        for p in self.params:
            setattr(self, p.name, p.check(values[p.name]) if p.name in values else p.default)

    def param_values(self) -> dict[str, Any]:
        return {p.name: getattr(self, p.name) for p in self.params}

    def fresh(self) -> Scheduler:
        """A copy with the same parameters and no run state (each run gets its own)."""
        return copy.deepcopy(self)

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        """Called once before the first `select`."""

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | tuple[int, int, int] | None:
        raise NotImplementedError

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        """An ACK arrived on ``sf`` (after the subflow processed it)."""

    def on_loss(self, conn: ConnView, sf: SubflowView, kind: str, now_ns: int) -> None:
        """``sf`` entered fast recovery (``kind="fast"``) or had an RTO (``"rto"``)."""

    def on_timer(self, conn: ConnView, now_ns: int) -> None:
        """A time requested with ``conn.wake_at`` has come."""

    def on_applied(self, conn: ConnView, decision: Decision | tuple[int, int, int], n_segments: int) -> None:
        """The engine applied ``decision`` to ``n_segments`` segments (0: refused — the subflow was
        not established, the window did not allow it, or the segment was already DATA_ACKed).
        Called after every decision, before the next `select`, for schedulers that override it."""

    # ------------------------------------------------------------------ observations
    # The run's observer channel: what a scheduler wants to report about its own reasoning (STMS's
    # gap, DRePaS's path states) goes into the run's `observations`, not into shared lists.
    _observer: Any = None

    def bind_observer(self, observer: Any) -> None:
        """The engine binds ``observer(t_ns, kind, subflow, value)`` before the run starts."""
        self._observer = observer

    def observe(self, t_ns: int, kind: str, subflow: int, value: Any) -> None:
        """Report an observation (no cost when nobody records them)."""
        obs = self._observer
        if obs is not None:
            obs(t_ns, kind, subflow, value)

    def __repr__(self) -> str:
        kv = ", ".join(f"{k}={v!r}" for k, v in self.param_values().items())
        return f"{type(self).__name__}({kv})"


class ConnOverride:
    """A `ConnView` with some attributes replaced, for layers that show the inner scheduler a
    different connection (RBP: a smaller receive window per path). Everything not overridden reads
    through to the real connection. The engine still enforces the real window, so a layer can only
    narrow it."""

    def __init__(self, conn: ConnView, **overrides: Any) -> None:
        self._conn = conn
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def window_allows(self, seg: int) -> bool:
        if "wnd_end" not in self.__dict__:
            return self._conn.window_allows(seg)
        c = self._conn
        return c.seg_dsn(seg) + min(c.seg_len(seg), c.mss) <= self.__dict__["wnd_end"]


def clip_to_window(conn: ConnView, d: Decision | tuple[int, int, int] | None) -> Decision | None:
    """Shorten a ``count`` decision to the segments from the head that pass ``conn.window_allows``
    (for layers that narrow the window: the engine only checks the real one)."""
    if d is None:
        return None
    sub, seg, count = d
    if seg >= 0:
        return Decision(sub, seg, count) if conn.window_allows(seg) or conn.seg_sent(seg) else None
    n = 0
    i = conn.head
    while n < count and i < conn.n_segs and conn.window_allows(i):
        n += 1
        i += 1
    return Decision(sub, -1, n) if n else None


class Layer(Scheduler):
    """A policy wrapped around any scheduler (path manager, flow control). Delegates by default."""

    name: ClassVar[str] = "layer"

    def __init__(self, inner: Scheduler, **values: Any) -> None:
        super().__init__(**values)
        self.inner = inner

    @property
    def reinject_on_subflow_rto(self) -> bool:  # type: ignore[override]
        return self.inner.reinject_on_subflow_rto

    @property
    def meta_rto_factor(self) -> float:  # type: ignore[override]
        return self.inner.meta_rto_factor

    @property
    def queues_beyond_cwnd(self) -> bool:  # type: ignore[override]
        return self.inner.queues_beyond_cwnd

    @property
    def meta_retrans(self) -> str:  # type: ignore[override]
        return self.inner.meta_retrans

    def usable(self, conn: ConnView, subflows: list[SubflowView]) -> list[SubflowView]:
        """The subflows the inner scheduler may use now (path-manager gating). All by default."""
        return subflows

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self.inner.on_start(conn, subflows)

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | tuple[int, int, int] | None:
        return self.inner.select(conn, self.usable(conn, subflows))

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        self.inner.on_ack(conn, sf, now_ns)

    def on_loss(self, conn: ConnView, sf: SubflowView, kind: str, now_ns: int) -> None:
        self.inner.on_loss(conn, sf, kind, now_ns)

    def on_timer(self, conn: ConnView, now_ns: int) -> None:
        self.inner.on_timer(conn, now_ns)

    def on_applied(self, conn: ConnView, decision: Decision | tuple[int, int, int], n_segments: int) -> None:
        self.inner.on_applied(conn, decision, n_segments)

    def bind_observer(self, observer: Any) -> None:
        super().bind_observer(observer)
        self.inner.bind_observer(observer)

    def __repr__(self) -> str:
        kv = ", ".join(f"{k}={v!r}" for k, v in self.param_values().items())
        return f"{type(self).__name__}({self.inner!r}{', ' if kv else ''}{kv})"
