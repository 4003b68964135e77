"""A paced UDP probe for measuring the emulation itself: the sender stamps each datagram with a
sequence number and its send time; the receiver records the kernel's receive timestamp. Run as a
script inside a namespace (no workbench imports, so it starts fast):

    python probe.py send --dst 10.0.1.2 --port 9000 --bind 10.0.1.1 --rate-bps 24e6 --size 1400 \
        --t0-ns T --stop-ns S
    python probe.py recv --bind 10.0.1.2 --port 9000 --out recv.bin --until-ns U

The receiver writes one record per datagram: seq (u64), send time (i64 ns), receive time (i64 ns,
kernel SO_TIMESTAMPNS), datagram payload size (u32). Times are CLOCK_REALTIME, the clock tcpdump and
the delay line use. Pacing is by absolute deadlines (no drift); within a millisecond the datagrams
may leave in a small burst, which a saturating probe does not mind.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import struct
import sys
import time

RECORD = struct.Struct("<QqqI")
HEADER = struct.Struct("<Qq")
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def _realtime() -> None:
    """The probe measures the emulation, not this machine's scheduler: run it at real-time priority
    where allowed, so a busy machine does not make it offer less than it should."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))


def send(a: argparse.Namespace) -> int:
    _realtime()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.bind, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    pad = b"\0" * (a.size - HEADER.size)
    # rate schedule: "t_ns:rate_bps,..." or one constant rate
    steps = [(0, float(a.rate_bps))]
    if a.schedule:
        steps = [(int(float(t)), float(r)) for t, r in (x.split(":") for x in a.schedule.split(","))]
    bits = a.size * 8
    while time.time_ns() < a.t0_ns:
        time.sleep(min(0.01, max((a.t0_ns - time.time_ns()) / 1e9, 0)))
    seq, t_next, i = 0, a.t0_ns, 0
    while t_next < a.stop_ns:
        while i + 1 < len(steps) and a.t0_ns + steps[i + 1][0] <= t_next:
            i += 1
        now = time.time_ns()
        if t_next > now + 200_000:
            time.sleep((t_next - now - 100_000) / 1e9)
            continue
        with contextlib.suppress(OSError):  # a full local buffer: the probe just offered less
            s.sendto(HEADER.pack(seq, time.time_ns()) + pad, (a.dst, a.port))
        seq += 1
        t_next += int(bits / steps[i][1] * 1e9)
    print(seq)
    return 0


def recv(a: argparse.Namespace) -> int:
    _realtime()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((a.bind, a.port))
    s.settimeout(0.2)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    out = []
    while time.time_ns() < a.until_ns:
        try:
            data, anc, _, _ = s.recvmsg(65536, 256)
        except TimeoutError:
            continue
        t_rx = time.time_ns()
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                t_rx = sec * 1_000_000_000 + nsec
        seq, t_tx = HEADER.unpack_from(data)
        out.append(RECORD.pack(seq, t_tx, t_rx, len(data)))
    with open(a.out, "wb") as f:
        f.write(b"".join(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="probe")
    sub = ap.add_subparsers(dest="mode", required=True)
    ps = sub.add_parser("send")
    ps.add_argument("--dst", required=True)
    ps.add_argument("--port", type=int, required=True)
    ps.add_argument("--bind", default="0.0.0.0")
    ps.add_argument("--rate-bps", type=float, default=1e6)
    ps.add_argument("--schedule", default="")
    ps.add_argument("--size", type=int, default=1400)
    ps.add_argument("--t0-ns", type=int, required=True)
    ps.add_argument("--stop-ns", type=int, required=True)
    pr = sub.add_parser("recv")
    pr.add_argument("--bind", required=True)
    pr.add_argument("--port", type=int, required=True)
    pr.add_argument("--out", required=True)
    pr.add_argument("--until-ns", type=int, required=True)
    a = ap.parse_args(argv)
    return send(a) if a.mode == "send" else recv(a)


if __name__ == "__main__":
    sys.exit(main())
