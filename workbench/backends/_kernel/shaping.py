"""One direction of one path, as the kernel emulates it: an HTB class whose rate follows the capacity
timeline, a drop-tail FIFO of the stated size (bfifo in bytes or pfifo in packets) under it, and a
one-way delay with random loss in front of it — netem where the kernel has it, else the project's
delay line (native/delayline.c) forwarding frames between the router's two interfaces.

Changes over time: the delay line reads its whole delay/loss schedule at start (it ramps delay
decreases itself, so frames never reorder); rate changes (and netem delay changes) are applied by a
`Scheduler` thread with ``tc ... change`` at each step, and the time each change took effect is
recorded (`AppliedChange`).

Zero capacity: HTB has no rate of zero, and a stand-in of a few kbit/s charges every frame it lets
through as seconds of debt (a 1514-byte frame at 8 kbit/s costs 1.5 s), which keeps the class
blocked up to that long after the capacity came back. With the delay line, an outage is therefore
made by the delay line instead (frames that would reach the bottleneck during it wait there, up to
the buffer's size, and leave when it ends) while the HTB class keeps its last positive rate
(`htb_rate`, `outages`). With netem the stand-in stays, and the run says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.backends._kernel._sys import LineReader, delayline_binary, ns_cmd, run
from workbench.backends._kernel.topology import Lab

__all__ = ["Action", "AppliedChange", "LinkShaper", "Scheduler", "Series", "TcChange", "delayline_counters", "htb_rate",
           "merged_schedule", "outages"]

# A piecewise-constant series as two tuples (start times ns, values): the same shape as the
# experiment's StepSeries, without importing it.
Series = tuple[tuple[int, ...], tuple[float, ...]]

_MIN_RATE_BPS = 8_000  # HTB cannot do 0: an outage is 1 kB/s
_MTU_FRAME_BYTES = 1514


def _rate(bps: float) -> str:
    return f"{max(round(bps), _MIN_RATE_BPS)}bit"


def outages(rate: Series) -> list[tuple[int, int | None]]:
    """[start, end) of every stretch where the capacity is (below HTB's smallest rate, so) zero; end
    None when it lasts to the end of the series."""
    out: list[tuple[int, int | None]] = []
    start: int | None = None
    for t, v in zip(*rate, strict=True):
        if v < _MIN_RATE_BPS and start is None:
            start = t
        elif v >= _MIN_RATE_BPS and start is not None:
            out.append((start, t))
            start = None
    if start is not None:
        out.append((start, None))
    return out


def htb_rate(rate: Series) -> Series:
    """The rate the HTB class follows when the delay line makes the outages: every zero step keeps
    the last positive rate (the first positive one when the series starts at zero; the smallest HTB
    rate when it is never positive)."""
    positive = [v for v in rate[1] if v >= _MIN_RATE_BPS]
    last = positive[0] if positive else float(_MIN_RATE_BPS)
    ts: list[int] = []
    vs: list[float] = []
    for t, v in zip(*rate, strict=True):
        if v >= _MIN_RATE_BPS:
            last = v
        if not vs or vs[-1] != last:
            ts.append(t)
            vs.append(last)
    return tuple(ts), tuple(vs)


def merged_schedule(owd: Series, loss: Series, rate: Series | None = None) -> list[tuple[int, int, float, int]]:
    """(offset_ns, delay_ns, loss, outage 0/1) at every time any series changes: the delay line's input.
    ``rate``: the capacity, whose zero stretches become outages (none without it)."""
    holds = outages(rate) if rate is not None else []
    hold_times = {t for a, b in holds for t in (a, b) if t is not None}
    times = sorted(set(owd[0]) | set(loss[0]) | hold_times | {0})
    out: list[tuple[int, int, float, int]] = []
    for t in times:
        d = _value_at(owd, t)
        p = _value_at(loss, t)
        h = int(any(a <= t and (b is None or t < b) for a, b in holds))
        if not out or (out[-1][1], out[-1][2], out[-1][3]) != (round(d), p, h):
            out.append((t, round(d), p, h))
    return out


def _value_at(s: Series, t_ns: int) -> float:
    import bisect
    i = bisect.bisect_right(s[0], t_ns) - 1
    return s[1][max(i, 0)]


@dataclass(frozen=True)
class TcChange:
    """One ``tc`` batch line to run inside a namespace."""

    ns: str
    line: str


Action = Callable[[], None] | TcChange


@dataclass
class AppliedChange:
    """One change as applied: what, when it was planned and when ``tc`` returned (ns after t0)."""

    link: str
    what: str            # "rate_bps" | "owd_ns" | "endpoint"
    value: float
    planned_ns: int
    applied_ns: int      # when the command returned (the change is in force from then at the latest)
    issued_ns: int       # when the command was started

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class LinkShaper:
    """The emulation of one link (one path, one direction) inside the path's router namespace."""

    lab: Lab
    name: str            # link name, for records
    router_ns: str
    in_dev: str          # where its frames enter the router
    out_dev: str         # where they leave (HTB + FIFO here)
    rate_bps: Series
    owd_ns: Series
    loss: Series
    buffer_bytes: int | None
    buffer_packets: int | None
    use_netem: bool
    seed: int
    proc: subprocess.Popen[Any] | None = None
    counters: dict[str, Any] = field(default_factory=dict)

    @property
    def htb_series(self) -> Series:
        """What the HTB class follows: the capacity itself with netem; with the delay line, the
        capacity with its zero stretches left to the delay line (`htb_rate`)."""
        return self.rate_bps if self.use_netem else htb_rate(self.rate_bps)

    def install(self) -> None:
        """HTB root + one class at the first rate, FIFO (or netem) under it."""
        ns, dev = self.router_ns, self.out_dev
        r0 = _rate(self.htb_series[1][0])
        run(["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"], ns=ns)
        run(["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", r0, "ceil", r0,
             "quantum", str(_MTU_FRAME_BYTES)], ns=ns)
        run(["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *self._fifo()], ns=ns)
        if self.use_netem:
            # delay + loss on an IFB in front of the bridge, so the FIFO above is the only queue
            ifb = f"ifb-{self.out_dev}"
            run(["ip", "link", "add", "name", ifb, "type", "ifb"], ns=ns)
            run(["ip", "link", "set", ifb, "up"], ns=ns)
            run(["tc", "qdisc", "add", "dev", self.in_dev, "handle", "ffff:", "ingress"], ns=ns)
            run(["tc", "filter", "add", "dev", self.in_dev, "parent", "ffff:", "matchall", "action", "mirred",
                 "egress", "redirect", "dev", ifb], ns=ns)
            run(["tc", "qdisc", "add", "dev", ifb, "root", "handle", "1:", *self._netem(0)], ns=ns)

    def _fifo(self) -> list[str]:
        if self.buffer_packets is not None:
            return ["pfifo", "limit", str(max(int(self.buffer_packets), 1))]
        return ["bfifo", "limit", str(max(int(self.buffer_bytes or 150_000), _MTU_FRAME_BYTES))]

    def _netem(self, t_ns: int) -> list[str]:
        d_us = round(_value_at(self.owd_ns, t_ns) / 1000)
        p = _value_at(self.loss, t_ns)
        return ["netem", "delay", f"{d_us}us", "limit", "1000000", *(["loss", f"{100 * p}%"] if p > 0 else [])]

    def start_delay(self, t0_ns: int, workdir: Path) -> None:
        """Start the delay line for this direction (delay-line mode); waits until it is forwarding."""
        if self.use_netem:
            return
        sched = workdir / f"delay-{self.name.replace('/', '-')}.txt"
        sched.write_text("".join(f"{t} {d} {p!r} {h}\n"
                                 for t, d, p, h in merged_schedule(self.owd_ns, self.loss, self.rate_bps)))
        # during an outage at most the bottleneck's buffer waits (in the delay line)
        cap = (["--hold-cap-packets", str(max(int(self.buffer_packets), 1))] if self.buffer_packets is not None
               else ["--hold-cap-bytes", str(max(int(self.buffer_bytes or 150_000), _MTU_FRAME_BYTES))])
        self.proc = self.lab.spawn(self.router_ns, [str(delayline_binary()), "--in", self.in_dev, "--out",
                                                    self.out_dev, "--schedule", str(sched), "--t0-ns",
                                                    str(t0_ns), "--seed", str(self.seed), *cap])
        self._out, self._err = LineReader(self.proc.stdout), LineReader(self.proc.stderr)
        line = self._out.wait_for('"ready"', 10.0)
        if line is None:
            raise RuntimeError(f"the delay line for {self.name} did not start: {self._err.text(wait_s=0)[:300]}")
        self.counters["delayline_start"] = json.loads(line)

    def stop_delay(self) -> None:
        """Stop the delay line and keep its counters (and its delay changes as applied)."""
        if self.proc is None:
            return
        Lab.stop(self.proc)
        self.counters.update(delayline_counters(self._out.text()))
        self.proc = None

    def rate_changes(self) -> list[tuple[int, str, float, TcChange]]:
        """(t_ns, what, value, tc command) for every change after t=0."""
        out = []
        for t, v in zip(*self.htb_series, strict=True):
            if t > 0:
                out.append((t, "rate_bps", v, self._rate_change(v)))
        if self.use_netem:
            for t in sorted(set(self.owd_ns[0]) | set(self.loss[0])):
                if t > 0:
                    out.append((t, "owd_ns", _value_at(self.owd_ns, t), self._netem_change(t)))
        return out

    def _rate_change(self, bps: float) -> TcChange:
        r = _rate(bps)
        return TcChange(self.router_ns, f"class change dev {self.out_dev} parent 1: classid 1:1 htb rate {r} "
                                        f"ceil {r} quantum {_MTU_FRAME_BYTES}")

    def _netem_change(self, t_ns: int) -> TcChange:
        return TcChange(self.router_ns, f"qdisc change dev ifb-{self.out_dev} root handle 1: {' '.join(self._netem(t_ns))}")

    def qdisc_stats(self) -> dict[str, int]:
        """Sent packets/bytes, drops and overlimits of the FIFO under the HTB class (tc -s -j)."""
        p = run(["tc", "-s", "-j", "qdisc", "show", "dev", self.out_dev], ns=self.router_ns, check=False)
        try:
            for q in json.loads(p.stdout or "[]"):
                if q.get("handle") == "10:":
                    return {"fifo_sent_bytes": int(q.get("bytes", 0)), "fifo_sent_packets": int(q.get("packets", 0)),
                            "fifo_drops": int(q.get("drops", 0)), "fifo_backlog_bytes": int(q.get("backlog", 0))}
        except (ValueError, TypeError):
            pass
        return {}


def delayline_counters(stdout: str) -> dict[str, Any]:
    """The delay line's exit line (JSON) as a dict; the applied delay changes as dicts."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{") and '"rx"' in line:
            d = json.loads(line)
            d["changes"] = [{"t_ns": c[0], "owd_ns": c[1], "from_owd_ns": c[2], "ramp_end_ns": c[3]}
                            for c in d.get("changes", [])]
            return d
    return {"error": "the delay line printed no counters"}


class Scheduler(threading.Thread):
    """Applies timed changes (rate steps, netem delay steps, late MPTCP endpoints) at t0 + t and
    records when each took effect. Changes due at the same time go out together: one ``tc -batch``
    per router namespace, all namespaces at once. Runs as a daemon thread; `stop` ends it early."""

    def __init__(self, t0_ns: int, changes: list[tuple[int, str, str, float, Action]]) -> None:
        super().__init__(daemon=True, name="lab-scheduler")
        self.t0_ns = t0_ns
        self.changes = sorted(changes, key=lambda c: c[0])
        self.applied: list[AppliedChange] = []
        self.errors: list[str] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        # Real-time priority for this thread (and the tc processes it starts, which inherit it): on a
        # busy machine a change would otherwise go out tens of ms late.
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        groups: dict[int, list[tuple[int, str, str, float, Action]]] = {}
        for c in self.changes:
            groups.setdefault(c[0], []).append(c)
        for t_ns, group in sorted(groups.items()):
            while True:
                wait_s = (self.t0_ns + t_ns - time.time_ns()) / 1e9
                if wait_s <= 0:
                    break
                if self._stop_event.wait(min(wait_s, 0.5) if wait_s > 0.003 else 0.0005):
                    return
            self._apply(t_ns, group)

    def _apply(self, t_ns: int, group: list[tuple[int, str, str, float, Action]]) -> None:
        issued = time.time_ns()
        by_ns: dict[str, list[tuple[int, str, str, float, Action]]] = {}
        calls = []
        for c in group:
            if isinstance(c[4], TcChange):
                by_ns.setdefault(c[4].ns, []).append(c)
            else:
                calls.append(c)
        procs = [(subprocess.Popen(ns_cmd(ns, ["tc", "-force", "-batch", "-"]), stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), cs)
                 for ns, cs in by_ns.items()]
        for proc, cs in procs:
            _, err = proc.communicate("".join(c[4].line + "\n" for c in cs))  # type: ignore[union-attr]
            done = time.time_ns()
            for _, link, what, value, _a in cs:
                if proc.returncode:
                    self.errors.append(f"{link} {what}={value}: {err.strip()[:200]}")
                else:
                    self.applied.append(AppliedChange(link, what, value, t_ns, done - self.t0_ns, issued - self.t0_ns))
        for _, link, what, value, fn in calls:
            try:
                fn()  # type: ignore[operator]
            except Exception as e:  # recorded, the run is flagged, the other changes go on
                self.errors.append(f"{link} {what}={value}: {e}")
                continue
            self.applied.append(AppliedChange(link, what, value, t_ns, time.time_ns() - self.t0_ns, issued - self.t0_ns))

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)
