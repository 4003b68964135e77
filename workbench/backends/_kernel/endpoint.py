"""The two ends of a lab transfer, on real MPTCP sockets (``socket(AF_INET, SOCK_STREAM,
IPPROTO_MPTCP)``). Run as a script inside a namespace (no workbench imports, so it starts fast):

    python endpoint.py server --port 5201 --role send --cc cubic
    python endpoint.py client --connect 10.0.1.2 --bind 10.0.1.1 --port 5201 --role recv --cc cubic

Each prints ``{"ready": true}`` once its socket exists and then reads one line from stdin, ``GO t0_ns
stop_at_ns deadline_ns`` (``-`` for no stop time), so the clock starts only when both programs are up
however long Python took to start. The client opens the connection at t0 (the experiment's time zero); the kernel path manager adds the
other subflows from its endpoints. The sending side (``--role send``) writes until ``--stop-at-ns``
(bulk) or until ``--size`` bytes are written (finite), then shuts its side down; the receiving side
reads to end of stream. Congestion control is set per socket (TCP_CONGESTION; the MPTCP socket
passes it to every subflow). Each prints one JSON line at exit: bytes moved and when things happened
(CLOCK_REALTIME ns).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import time

IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)
CHUNK = 64 * 1024


def _socket(a: argparse.Namespace) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
    if a.cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, a.cc.encode())
    if a.sndbuf:  # the kernel doubles what it is given; FORCE: past net.core.wmem_max (we are root)
        s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_SNDBUFFORCE", 32), a.sndbuf // 2)
    if a.rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    return s


def _send(s: socket.socket, a: argparse.Namespace, rec: dict) -> None:
    buf = memoryview(b"\x5a" * CHUNK)
    sent = 0
    s.settimeout(0.05)  # wake up to look at the clock even when the send buffer is full
    while True:
        if a.size is not None and sent >= a.size:
            break
        if a.stop_at_ns is not None and time.time_ns() >= a.stop_at_ns:
            break
        if time.time_ns() >= a.deadline_ns:
            rec["deadline_hit"] = True
            break
        n = CHUNK if a.size is None else min(CHUNK, a.size - sent)
        try:
            sent += s.send(buf[:n])
        except TimeoutError:
            continue
    rec["t_last_write_ns"] = time.time_ns()
    rec["bytes_sent"] = sent
    s.settimeout(max((a.deadline_ns - time.time_ns()) / 1e9, 0.1))
    s.shutdown(socket.SHUT_WR)
    # wait for the peer to close: then every byte was delivered
    try:
        while s.recv(CHUNK):
            pass
        rec["t_peer_eof_ns"] = time.time_ns()
    except TimeoutError:
        rec["deadline_hit"] = True


def _recv(s: socket.socket, a: argparse.Namespace, rec: dict) -> None:
    got, first = 0, None
    s.settimeout(max((a.deadline_ns - time.time_ns()) / 1e9, 0.1))
    try:
        while True:
            b = s.recv(1 << 18)
            if not b:
                break
            if first is None:
                first = time.time_ns()
            got += len(b)
        rec["t_eof_ns"] = time.time_ns()
    except TimeoutError:
        rec["deadline_hit"] = True
    rec["bytes_received"] = got
    rec["t_first_byte_ns"] = first


def _mptcp_subflows(s: socket.socket) -> int | None:
    """Subflows of the connection now (MPTCP_INFO: mptcpi_subflows is the first byte)."""
    try:
        info = s.getsockopt(284, 1, 64)  # SOL_MPTCP, MPTCP_INFO
        return info[0] if info else None
    except OSError:
        return None


def _go(a: argparse.Namespace) -> None:
    """Wait for ``GO t0 stop_at deadline`` on stdin."""
    print(json.dumps({"ready": True}), flush=True)
    words = sys.stdin.readline().split()
    if len(words) != 4 or words[0] != "GO":
        raise OSError(f"expected 'GO t0 stop_at deadline' on stdin, got {words!r}")
    a.t0_ns, a.deadline_ns = int(words[1]), int(words[3])
    a.stop_at_ns = None if words[2] == "-" else int(words[2])


def server(a: argparse.Namespace) -> dict:
    ls = _socket(a)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.bind, a.port))
    ls.listen(4)
    _go(a)
    ls.settimeout(max((a.deadline_ns - time.time_ns()) / 1e9, 0.1))
    rec: dict = {"role": a.role, "side": "server"}
    try:
        s, peer = ls.accept()
    except TimeoutError:
        rec["error"] = "no connection came"
        return rec
    rec["t_accept_ns"] = time.time_ns()
    rec["peer"] = peer[0]
    if a.cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, a.cc.encode())
    rec["cc"] = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    (_send if a.role == "send" else _recv)(s, a, rec)
    rec["subflows_at_end"] = _mptcp_subflows(s)
    s.close()
    return rec


def client(a: argparse.Namespace) -> dict:
    s = _socket(a)
    s.bind((a.bind, 0))
    _go(a)
    # connect on time even on a busy machine: real-time priority for the wait only (the transfer
    # itself runs as an ordinary application)
    try:
        old = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
    except (OSError, AttributeError):
        old = None
    while (left := a.t0_ns - time.time_ns()) > 0:
        time.sleep(min(left / 1e9, 0.05) if left > 2_000_000 else 0)
    rec: dict = {"role": a.role, "side": "client", "t_connect_ns": time.time_ns()}
    if old is not None:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, *old)
    s.settimeout(max((a.deadline_ns - time.time_ns()) / 1e9, 0.1))
    s.connect((a.connect, a.port))
    rec["t_established_ns"] = time.time_ns()
    rec["cc"] = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    (_send if a.role == "send" else _recv)(s, a, rec)
    rec["subflows_at_end"] = _mptcp_subflows(s)
    s.close()
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="endpoint")
    ap.add_argument("side", choices=["server", "client"])
    ap.add_argument("--bind", default="0.0.0.0")
    ap.add_argument("--connect", default="")
    ap.add_argument("--port", type=int, default=5201)
    ap.add_argument("--role", choices=["send", "recv"], required=True)
    ap.add_argument("--cc", default="")
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--sndbuf", type=int, default=0)
    ap.add_argument("--rcvbuf", type=int, default=0)
    ap.add_argument("--label", default="", help="names the run (its folder), for ps and clean-up checks")
    a = ap.parse_args(argv)
    try:
        rec = server(a) if a.side == "server" else client(a)
    except OSError as e:
        rec = {"side": a.side, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(rec), flush=True)
    return 0 if "error" not in rec else 1


if __name__ == "__main__":
    sys.exit(main())
