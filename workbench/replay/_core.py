"""The edge of the compiled engine (issue 17, native/engine: `workbench_core.run_model`): resolves a
run's Python objects into the plain values the Rust core takes (link timelines and each link's
random stream, routes, connection settings, the handshake plan, the scheduler, the workload) and
hands back what it returns.

The scheduler goes to Rust by registered name and parameters when it (every layer of it) has a
compiled port (`compiled_spec`); any other `Scheduler` (a user's own class, a subclass, a built-in
not ported yet, a layer over one) is handed over as the Python object and runs inside the compiled
engine through its plug-in bridge (native/engine/src/py_sched.rs: the scheduler is called with the
GIL at every decision and shown live views of the engine; `scheduler_arg`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.replay.network import link_rng
from workbench.replay.recorder import HandshakeRow
from workbench.schedulers.base import Layer, Scheduler

if TYPE_CHECKING:
    from workbench.experiment._model import LinkSpec
    from workbench.replay.config import ConnectionConfig
    from workbench.replay.network import Route

__all__ = ["ColumnRecorder", "compiled_spec", "core", "run_compiled", "scheduler_arg"]

SchedSpec = tuple[str, dict[str, Any], list[Any]]


def core() -> Any:
    """The compiled module (built by scripts/setup.sh); ImportError with what to do where it is not."""
    try:
        import workbench_core
    except ImportError as e:
        raise ImportError("the compiled replay engine (workbench_core) is not built: run "
                          "`bash scripts/setup.sh` (it builds native/engine with maturin)") from e
    return workbench_core


def compiled_spec(sched: Scheduler) -> SchedSpec | None:
    """``(name, params, [inner])`` of a registered built-in scheduler (or layer over one) the
    compiled engine runs; None for anything else (a subclass, a user's own class)."""
    from workbench.schedulers._registry import _REGISTRY
    names = set(core().compiled_schedulers())
    if sched.name not in names or _REGISTRY.get(sched.name) is not type(sched):
        return None
    inner: list[Any] = []
    if isinstance(sched, Layer):
        spec = compiled_spec(sched.inner)
        if spec is None:
            return None
        inner = [spec]
    return (sched.name, dict(sched.param_values()), inner)


def scheduler_arg(sched: Scheduler, *, bridge: bool = False) -> SchedSpec | Scheduler:
    """What `workbench_core.run_model` takes as ``scheduler``: the `compiled_spec` of a scheduler with a
    compiled port, else (or with ``bridge=True``, for tests and benchmarks) the object itself, run
    through the plug-in bridge."""
    if not bridge:
        spec = compiled_spec(sched)
        if spec is not None:
            return spec
    return sched


class ColumnRecorder:
    """A compiled run's recorder: one dict of columns per row kind (Arrow-backed, see
    native/engine/src/py_arrow.rs), the handshake rows and the scheduler's observations."""

    __slots__ = ("ack", "drop", "handshake", "observations", "rcv", "samples", "snd")

    def __init__(self, cols: dict[str, Any], handshake: list[HandshakeRow]) -> None:
        self.snd: dict[str, Any] = cols["snd"]
        self.rcv: dict[str, Any] = cols["rcv"]
        self.drop: dict[str, Any] = cols["drop"]
        self.ack: dict[str, Any] = cols["ack"]
        self.samples: dict[str, Any] = cols["samples"]
        self.observations: list[tuple[int, str, int, Any]] = list(cols["observations"])
        self.handshake = handshake


def _series_args(s: Any) -> tuple[list[int], list[float]]:
    return [int(t) for t in s.t_ns], [float(v) for v in s.values]


def run_compiled(links: Sequence[LinkSpec], routes: Sequence[Route], spec: SchedSpec | Scheduler,
                 wl_spec: tuple[Any, ...],
                 *, cfg: ConnectionConfig, seed: int, until_ns: int, record: bool,
                 setup: list[tuple[str, int, int, int]], ts_ack_ns: list[int | None], drs_t_ns: int
                 ) -> dict[str, Any]:
    """Run one replay in the compiled engine; returns its counters (and "recorder" columns). ``spec``:
    see `scheduler_arg` (an exception a bridged scheduler raises comes out of here as it was raised)."""
    wb = core()
    link_args = []
    for s in links:
        rt, rv = _series_args(s.rate_bps)
        ot, ov = _series_args(s.owd_ns)
        lt, lv = _series_args(s.loss)
        state = link_rng(seed, s.name).getstate()[1]
        link_args.append((s.name, rt, rv, ot, ov, lt, lv, s.buffer_size_bytes, list(state)))
    conn = {
        "mss_bytes": cfg.mss_bytes, "header_bytes": cfg.header_bytes, "ack_bytes": cfg.ack_bytes,
        "send_buf_bytes": cfg.send_buf_bytes, "rcv_buf_bytes": cfg.rcv_buf_bytes, "init_cwnd": cfg.init_cwnd,
        "rto_min_ns": cfg.rto_min_ns, "delayed_ack": cfg.delayed_ack, "delack_ns": cfg.delack_ns,
        "quickack_on_meta_ooo": cfg.quickack_on_meta_ooo, "reinject_on_subflow_rto": cfg.reinject_on_subflow_rto,
        "handshake": cfg.handshake, "sample_interval_ns": cfg.sample_interval_ns,
        "rcv_wnd_init_bytes": cfg.rcv_wnd_init_bytes, "rcv_buf_init_bytes": cfg.rcv_buf_init_bytes,
        "rcv_space_init_bytes": cfg.rcv_space_init_bytes, "tcp_mss_bytes": cfg.tcp_mss_bytes,
    }
    out: dict[str, Any] = wb.run_model(
        links=link_args, routes=[(r.path, list(r.data), list(r.ack), r.backup) for r in routes], conn=conn,
        cc_name=cfg.cc, hystart=cfg.hystart, scheduler=spec, workload_spec=wl_spec, setup=setup,
        ts_ack_ns=ts_ack_ns, drs_t_ns=drs_t_ns, until_ns=until_ns, record=record)
    return out
