"""The built-in schedulers against the engine: the full shipped conformance suite (completes transfers,
stays deterministic, leaves the views untouched, ...), their characteristic behaviours; plus the
registry, parameters, layers and user-supplied schedulers."""

from __future__ import annotations

import polars as pl
import pytest

from workbench.errors import InputError
from workbench.replay import AppTrace, Bulk, ConnectionConfig, Finite, PathConfig, run_replay
from workbench.schedulers import (
    ConnOverride,
    ConnView,
    Decision,
    Layer,
    ParamSpec,
    Scheduler,
    SubflowView,
    available,
    clip_to_window,
    get,
    info,
    is_available,
)
from workbench.testing import check_scheduler

MS = 1_000_000
S = 1_000_000_000
BUILTIN = {"minrtt", "minrtt_noor", "upstream", "roundrobin", "redundant"}


def paths(loss: float = 0.0) -> list[PathConfig]:
    return [PathConfig.constant("wifi", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=60_000, loss=loss),
            PathConfig.constant("lte", rate_bps=10e6, owd_ns=40 * MS, buffer_bytes=120_000, loss=loss)]


def bytes_by_path(r) -> dict[str, int]:
    snd = r.events.filter((pl.col("point") == "snd") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    return dict(snd.group_by("path").agg(pl.col("payload_bytes").sum()).iter_rows())


def test_registry_lists_builtins_with_metadata() -> None:
    assert set(available()) >= BUILTIN
    for name in available():
        i = info(name)
        assert i.description and i.source
        assert isinstance(get(name), Scheduler)


def test_registry_errors_are_one_line_input_errors() -> None:
    with pytest.raises(InputError, match="unknown scheduler"):
        get("nope")
    with pytest.raises(InputError, match="no parameter"):
        get("minrtt", lambda_=3)
    with pytest.raises(InputError, match="outside"):
        get("roundrobin", num_segments=0)
    assert get("roundrobin", num_segments="3").num_segments == 3  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_builtin_passes_the_full_conformance_suite(name: str) -> None:
    """The shipped suite (workbench.testing) at full size: lossy transfer delivered exactly once,
    deterministic, read-only decisions, cwnd respected, receive window, path outage. (All registered
    schedulers run it at quick size in test_conformance.py.) Upstream queues 64 KB bursts beyond
    cwnd by design and declares it (``queues_beyond_cwnd``)."""
    assert check_scheduler(name) == []


def test_minrtt_app_limited_uses_only_the_low_rtt_path() -> None:
    writes = [(i * 100 * MS, 5_000) for i in range(20)]
    r = run_replay(paths(), get("minrtt"), workload=AppTrace(writes=writes))
    by = bytes_by_path(r)
    assert by.get("lte", 0) == 0 and by["wifi"] == 100_000


def test_minrtt_opportunistic_retransmission_and_penalization_when_rwnd_limited() -> None:
    cfg = ConnectionConfig(rcv_buf_bytes=150_000)
    slow = [PathConfig.constant("fast", rate_bps=20e6, owd_ns=10 * MS, buffer_bytes=100_000),
            PathConfig.constant("slow", rate_bps=5e6, owd_ns=100 * MS, buffer_bytes=200_000)]
    r = run_replay(slow, get("minrtt"), workload=Bulk(), conn=cfg, duration_ns=5 * S)
    assert r.summary["opportunistic_retransmissions"] > 0 and r.summary["penalizations"] > 0
    reinj = r.events.filter((pl.col("point") == "snd") & pl.col("is_reinject"))
    assert set(reinj["path"].unique().to_list()) == {"fast"}
    r0 = run_replay(slow, get("minrtt_noor"), workload=Bulk(), conn=cfg, duration_ns=5 * S)
    assert r0.summary["opportunistic_retransmissions"] == 0 and r0.summary["penalizations"] == 0
    assert r.delivery_rate_bps > r0.delivery_rate_bps


def test_roundrobin_shares_equal_paths_evenly() -> None:
    eq = [PathConfig.constant(n, rate_bps=10e6, owd_ns=20 * MS, buffer_bytes=60_000) for n in ("a", "b")]
    r = run_replay(eq, get("roundrobin"), workload=Bulk(), duration_ns=4 * S)
    by = bytes_by_path(r)
    assert by["a"] / (by["a"] + by["b"]) == pytest.approx(0.5, abs=0.05)


def test_redundant_sends_every_segment_on_every_path() -> None:
    size = 2_000_000
    eq = [PathConfig.constant(n, rate_bps=10e6, owd_ns=10 * MS, buffer_bytes=60_000) for n in ("a", "b")]
    r = run_replay(eq, get("redundant"), workload=Finite(size_bytes=size))
    snd = r.events.filter((pl.col("point") == "snd") & (pl.col("dir") == "s2c") & (pl.col("payload_bytes") > 0))
    per_path = dict(snd.group_by("path").agg(pl.col("dsn").n_unique()).iter_rows())
    n_segs = -(-size // 1424)
    # a lagging subflow skips what the other got DATA_ACKed first, but nearly all go twice
    assert max(per_path.values()) == n_segs
    assert min(per_path.values()) > 0.9 * n_segs
    assert snd["is_reinject"].sum() > 0.8 * n_segs
    # and the transfer takes as long as on one path
    assert r.summary["last_delivery_ns"] == pytest.approx(size * 8e9 / (10e6 * 1424 / 1514), rel=0.15)


def test_upstream_queues_beyond_cwnd() -> None:
    r = run_replay(paths(), get("upstream"), workload=Bulk(), duration_ns=3 * S)
    sm = r.samples.filter(pl.col("kind") == "ack")
    assert sm["snd_queue_bytes"].max() > 10 * 1424  # bursts sit in subflow queues


class OnlyFirstPath(Scheduler):
    """A user scheduler, not registered: everything on subflow 0 when it has cwnd space."""

    name = "only_first"
    description = "test"
    params = (ParamSpec("burst", 4, 1, 64),)
    burst: int

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        sf = subflows[0]
        if conn.head >= conn.n_segs or not is_available(sf):
            return None
        return Decision(sf.index, -1, self.burst)


class HidePath(Layer):
    """A path-manager layer: the inner scheduler never sees the named path."""

    name = "hide_path"

    def __init__(self, inner: Scheduler, hidden: str) -> None:
        super().__init__(inner)
        self.hidden = hidden

    def usable(self, conn: ConnView, subflows: list[SubflowView]) -> list[SubflowView]:
        return [s for s in subflows if s.name != self.hidden]


def test_user_scheduler_and_layer() -> None:
    r = run_replay(paths(), OnlyFirstPath(burst=2), workload=Finite(size_bytes=300_000))
    assert set(bytes_by_path(r)) == {"wifi"}
    r2 = run_replay(paths(), HidePath(get("minrtt"), "wifi"), workload=Finite(size_bytes=300_000))
    assert set(bytes_by_path(r2)) == {"lte"}
    assert "HidePath(MinRTT(" in r2.scheduler


class CapWindow(Layer):
    """A flow-control layer (RBP-like): the inner scheduler sees at most ``cap`` bytes of window."""

    name = "cap_window"

    def __init__(self, inner: Scheduler, cap: int) -> None:
        super().__init__(inner)
        self.cap = cap

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        narrowed = ConnOverride(conn, wnd_end=min(conn.wnd_end, conn.snd_una + self.cap))
        return clip_to_window(narrowed, self.inner.select(narrowed, self.usable(conn, subflows)))


def test_flow_control_layer_narrows_the_window() -> None:
    one = [PathConfig.constant("p", rate_bps=100e6, owd_ns=20 * MS, buffer_bytes=1_000_000)]
    r = run_replay(one, CapWindow(get("minrtt_noor"), 50_000), workload=Bulk(), duration_ns=3 * S)
    assert r.delivery_rate_bps == pytest.approx(50_000 * 8 / 0.040, rel=0.15)  # cap / RTT
