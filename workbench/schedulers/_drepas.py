"""DRePaS, Dynamic Relative Path Scoring (seed 003, Algorithm 2 and §V), as a path-management `Layer`
over any scheduler. No public code exists (docs/MODEL.md §11); this follows the paper.

Every ``score_period`` (100 ms in the paper) each subflow i gets

* ``throughput_i = sinflight_i / srtt_i``, where ``sinflight_i`` is its in-flight data averaged over
  the past ``inflight_window`` (0.5 s; sampled every 10 ms here) — the paper smooths in-flight
  because cumulative ACKs make it jump, and prefers it to cwnd, which says nothing when the
  connection is application-limited;
* ``factor_i = throughput_i / max_k throughput_k`` and ``score_i = 1`` if ``factor_i >=
  mincontribution`` else 0.

An *active* subflow whose scores over the last ``interval`` (3 s) average 0 — it contributed less
than ``mincontribution`` of the best subflow for the whole interval — goes to *probing*: the inner
scheduler no longer sees it (`Layer.usable`), so it gets no new payload. A probing subflow whose
score is 1 again (typically because the best subflow's throughput fell) is active from then on.
Before a subflow has an RTT sample, srtt is ∞ (Algorithm 2's initialisation), i.e. throughput 0.
When nothing is in flight anywhere (idle), scores are not updated.

Probing traffic (§V: "10 packets of 1 KiB" every interval; Table II: "10 KiB data every 3 s"): the
engine cannot send packets without payload, so a probe is modelled as ``probe_segments`` *copies*
of already-sent, not yet DATA_ACKed segments (the oldest ones the probing subflow has not carried),
sent on the probing subflow every ``interval``. That costs the same order of bytes on the wire
(MSS-sized, 14 KiB instead of 10 KiB), keeps the subflow's RTT estimate and ACK clock fresh, puts
no new data behind the slow path (so no head-of-line blocking) and is counted by the engine as
opportunistic retransmission (``summary["opportunistic_retransmissions"]``, ``is_reinject`` rows).
With nothing sent-but-unacked (idle connection) no probe goes out.

``get("drepas", inner="minrtt", inner_params={...}, mincontribution=..., interval_s=...)`` or
``DRePaS(some_scheduler_instance, ...)``. Path-state transitions are reported on the run's observer
channel: ``("path_state", subflow, "active" | "probing")`` rows in ``run.observations``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

from workbench.schedulers._registry import get, register
from workbench.schedulers.base import ConnView, Decision, Layer, ParamSpec, Scheduler, SubflowView

__all__ = ["DRePaS", "drepas_scores"]

ACTIVE = "active"
PROBING = "probing"
_SAMPLE_NS = 10_000_000  # in-flight sampling period for sinflight


def drepas_scores(throughput: list[float], *, mincontribution: float) -> list[int]:
    """Algorithm 2's score loop: 1 where throughput_i / max(throughput) >= mincontribution."""
    best = max(throughput, default=0.0)
    if best <= 0:
        return [1] * len(throughput)
    return [1 if t / best >= mincontribution else 0 for t in throughput]


@register
class DRePaS(Layer):
    name: ClassVar[str] = "drepas"
    description: ClassVar[str] = ("DRePaS path manager: a subflow below mincontribution of the best "
                                  "subflow's throughput for a whole interval only probes")
    source: ClassVar[str] = ("Ferlin, Dreibholz, Alay: Multi-path transport over heterogeneous wireless "
                             "networks: does it really pay off? (DRePaS), IEEE GLOBECOM 2014, Alg. 2")
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("mincontribution", 0.1, 0.01, 0.5, log=True,
                  doc="least throughput relative to the best subflow that keeps a subflow active"),
        ParamSpec("interval_s", 3.0, 0.3, 20.0, log=True,
                  doc="scores must average 0 over this long before a subflow goes to probing; "
                      "also the probe period"),
        ParamSpec("score_period_ms", 100.0, 10.0, 1000.0, log=True,
                  doc="how often throughput and scores are computed (paper: 100 ms)"),
        ParamSpec("inflight_window_s", 0.5, 0.05, 5.0, log=True,
                  doc="averaging window of the smoothed in-flight data (paper: 0.5 s)"),
        ParamSpec("probe_segments", 10, 0, 100,
                  doc="probe copies sent on a probing subflow every interval (paper: 10 x 1 KiB)"),
    )
    mincontribution: float
    interval_s: float
    score_period_ms: float
    inflight_window_s: float
    probe_segments: int

    def __init__(self, inner: Scheduler | str = "minrtt", *, inner_params: dict[str, Any] | None = None,
                 **values: Any) -> None:
        if isinstance(inner, str):
            inner = get(inner, **(inner_params or {}))
        elif inner_params:
            raise TypeError("inner_params only go with an inner scheduler given by name")
        super().__init__(inner, **values)
        self._subflows: list[SubflowView] = []
        self._state: dict[int, str] = {}
        self._inflight: dict[int, deque[int]] = {}   # in-flight bytes samples, newest last
        self._scores: dict[int, deque[int]] = {}     # score history over one interval
        self._next_sample_ns = 0
        self._next_score_ns = 0
        self._next_probe_ns: dict[int, int] = {}
        self._probe_left: dict[int, int] = {}
        self.n_probes = 0

    # ------------------------------------------------------------------ scoring
    def state(self, index: int) -> str:
        return self._state.get(index, ACTIVE)

    def on_start(self, conn: ConnView, subflows: list[SubflowView]) -> None:
        self._subflows = subflows
        n_samples = max(1, round(self.inflight_window_s * 1e9 / _SAMPLE_NS))
        n_scores = max(1, round(self.interval_s * 1e3 / self.score_period_ms))
        for s in subflows:
            self._state[s.index] = ACTIVE
            self._inflight[s.index] = deque(maxlen=n_samples)
            self._scores[s.index] = deque(maxlen=n_scores)
        self.inner.on_start(conn, subflows)

    def _tick(self, now: int) -> None:
        """Catch up on the periodic sampling and scoring (done lazily, on every call)."""
        if now < self._next_sample_ns:
            return
        period = int(self.score_period_ms * 1e6)
        while self._next_sample_ns <= now:
            # one in-flight sample per 10 ms (the current value also stands for missed ticks)
            for s in self._subflows:
                self._inflight[s.index].append(s.in_flight * s.mss if s.established else 0)
            t = self._next_sample_ns
            self._next_sample_ns += _SAMPLE_NS
            if t >= self._next_score_ns:
                self._score(t)
                self._next_score_ns = t + period

    def _score(self, now: int) -> None:
        subs = self._subflows
        thr = []
        for s in subs:
            q = self._inflight[s.index]
            sinflight = sum(q) / len(q) if q else 0.0
            srtt = s.srtt_ns
            thr.append(sinflight / (srtt / 1e9) if srtt > 0 and s.established else 0.0)
        if max(thr, default=0.0) <= 0:
            return  # idle: nothing to compare
        scores = drepas_scores(thr, mincontribution=self.mincontribution)
        for s, sc in zip(subs, scores, strict=True):
            if not s.established:
                continue
            hist = self._scores[s.index]
            hist.append(sc)
            st = self._state[s.index]
            if st == ACTIVE:
                if len(hist) == hist.maxlen and not any(hist):
                    self._set(s.index, PROBING, now)
            elif sc == 1:
                self._set(s.index, ACTIVE, now)

    def _set(self, index: int, state: str, now: int) -> None:
        self._state[index] = state
        if state == PROBING:
            self._next_probe_ns[index] = now  # first probe right away, then every interval
            self._probe_left[index] = 0
        else:
            self._scores[index].clear()  # a fresh interval before it can be suspended again
        self.observe(now, "path_state", index, state)

    # ------------------------------------------------------------------ Layer
    def usable(self, conn: ConnView, subflows: list[SubflowView]) -> list[SubflowView]:
        st = self._state
        out = [s for s in subflows if st.get(s.index, ACTIVE) == ACTIVE]
        return out if out else subflows

    def _probe(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        now = conn.now_ns
        for s in subflows:
            i = s.index
            if self._state.get(i) != PROBING or not s.established:
                continue
            if now >= self._next_probe_ns.get(i, 0):
                self._probe_left[i] = self.probe_segments
                self._next_probe_ns[i] = now + int(self.interval_s * 1e9)
            if self._probe_left.get(i, 0) <= 0:
                continue
            seg = conn.oldest_unacked
            if seg < 0:
                continue
            # the oldest sent, not yet DATA_ACKed segments this subflow has not carried
            end = min(conn.n_segs, seg + 4 * self.probe_segments + 64)
            while seg < end and (not conn.seg_sent(seg) or (conn.seg_path_mask(seg) >> i) & 1):
                seg += 1
            if seg >= end:
                continue
            self._probe_left[i] -= 1
            self.n_probes += 1
            return Decision(i, seg)
        return None

    def select(self, conn: ConnView, subflows: list[SubflowView]) -> Decision | None:
        self._tick(conn.now_ns)
        probe = self._probe(conn, subflows)
        if probe is not None:
            return probe
        d = self.inner.select(conn, self.usable(conn, subflows))
        return None if d is None else Decision(*d)

    def on_ack(self, conn: ConnView, sf: SubflowView, now_ns: int) -> None:
        self._tick(now_ns)
        self.inner.on_ack(conn, sf, now_ns)
