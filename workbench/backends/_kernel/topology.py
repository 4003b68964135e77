"""The lab network: a client and a server namespace joined by one router namespace per path.

```
client ns                 router ns (path i)                server ns
  p<i> 10.0.i.1  <-veth->  c  [delay line / netem, HTB]  s  <-veth->  p<i> 10.0.i.2
```

Every path is one Ethernet segment from the hosts' point of view: the router forwards frames between
its two interfaces (the delay line, or a bridge where netem does the delay) and shapes them on the
way out (HTB + FIFO on ``c`` for the downlink, on ``s`` for the uplink). The client reaches the
server's first-path address through every path (source routing per client address), the way a phone
reaches one server over WiFi and LTE; the kernel path manager opens one subflow per client endpoint.

Names carry the process id and a random tag (``wbk-<pid>-<tag>-c``), so concurrent runs never
collide; a `Lab` removes its namespaces (and with them every veth and qdisc) and stops every process
it started on close, and `close_all` runs at exit. `sweep_stale` removes what a killed run left.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from workbench.backends._kernel._sys import ns_cmd, run

__all__ = ["Lab", "PathNet", "close_all", "sweep_stale"]

_PREFIX = "wbk"
_ACTIVE: set[Lab] = set()
_LOCK = threading.Lock()


@dataclass(frozen=True)
class PathNet:
    """Addresses and interface names of one path (index from 1)."""

    name: str
    index: int
    router_ns: str

    @property
    def host_if(self) -> str:          # in the client and in the server namespace
        return f"p{self.index}"

    @property
    def client_addr(self) -> str:
        return f"10.0.{self.index}.1"

    @property
    def server_addr(self) -> str:
        return f"10.0.{self.index}.2"

    router_client_if = "c"             # router side towards the client: downlink egress
    router_server_if = "s"             # router side towards the server: uplink egress


@dataclass
class Lab:
    """Namespaces, links and processes of one run. Use as a context manager (or call `close`)."""

    path_names: Sequence[str]
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    closed: bool = False

    def __post_init__(self) -> None:
        if not 1 <= len(self.path_names) <= 200:
            raise ValueError("a lab has 1..200 paths")
        base = f"{_PREFIX}-{os.getpid()}-{self.tag}"
        self.client_ns, self.server_ns = f"{base}-c", f"{base}-s"
        self.paths = [PathNet(n, i + 1, f"{base}-r{i + 1}") for i, n in enumerate(self.path_names)]

    def __hash__(self) -> int:
        return id(self)

    @property
    def namespaces(self) -> list[str]:
        return [self.client_ns, self.server_ns, *(p.router_ns for p in self.paths)]

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- building -------------------------------------------------------------------------------
    def build(self, *, bridge_routers: bool = False) -> None:
        """Create the namespaces and links. ``bridge_routers``: the routers forward through a Linux
        bridge (netem mode) instead of the delay line."""
        with _LOCK:
            _ACTIVE.add(self)
        for ns in self.namespaces:
            run(["ip", "netns", "add", ns])
            self.created.append(ns)
            # no IPv6 (no router solicitations or DAD chatter in the captures), no reverse-path
            # filter (replies to the first-path address arrive on every path)
            run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                 "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"], ns=ns)
            run(["ip", "link", "set", "lo", "up"], ns=ns)
        for p in self.paths:
            run(["ip", "link", "add", "name", p.host_if, "netns", self.client_ns, "type", "veth",
                 "peer", "name", p.router_client_if, "netns", p.router_ns])
            run(["ip", "link", "add", "name", p.host_if, "netns", self.server_ns, "type", "veth",
                 "peer", "name", p.router_server_if, "netns", p.router_ns])
            for ns, dev in ((self.client_ns, p.host_if), (self.server_ns, p.host_if),
                            (p.router_ns, p.router_client_if), (p.router_ns, p.router_server_if)):
                # Real 1500-byte frames on the wire: no segmentation offload, no checksum offload
                # (a frame copied by the delay line must carry a complete checksum).
                run(["ethtool", "-K", dev, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off"],
                    ns=ns, check=False)
            batch_c = [f"addr add {p.client_addr}/24 dev {p.host_if}", f"link set {p.host_if} up",
                       f"rule add from {p.client_addr} table {100 + p.index}",
                       f"route add default dev {p.host_if} table {100 + p.index}"]
            run(["ip", "-batch", "-"], ns=self.client_ns, input="\n".join(batch_c) + "\n")
            run(["ip", "-batch", "-"], ns=self.server_ns,
                input=f"addr add {p.server_addr}/24 dev {p.host_if}\nlink set {p.host_if} up\n")
            batch_r = [f"link set {p.router_client_if} promisc on up", f"link set {p.router_server_if} promisc on up"]
            if bridge_routers:
                batch_r += ["link add name br0 type bridge", f"link set {p.router_client_if} master br0",
                            f"link set {p.router_server_if} master br0", "link set br0 up"]
            run(["ip", "-batch", "-"], ns=p.router_ns, input="\n".join(batch_r) + "\n")

        self._static_neighbours()

    def _static_neighbours(self) -> None:
        """Permanent ARP entries at both ends: an ARP exchange would otherwise cross the emulated
        path (delay and all) before the first SYN, which no real access network does."""
        macs = {}
        for ns in (self.client_ns, self.server_ns):
            links = json.loads(run(["ip", "-j", "link", "show"], ns=ns).stdout)
            macs[ns] = {lk["ifname"]: lk.get("address") for lk in links}
        batch_c, batch_s = [], []
        for p in self.paths:
            server_mac, client_mac = macs[self.server_ns][p.host_if], macs[self.client_ns][p.host_if]
            # the client reaches every server address through every path (source routing)
            batch_c += [f"neigh replace {q.server_addr} lladdr {server_mac} dev {p.host_if} nud permanent"
                        for q in self.paths]
            batch_s.append(f"neigh replace {p.client_addr} lladdr {client_mac} dev {p.host_if} nud permanent")
        run(["ip", "-batch", "-"], ns=self.client_ns, input="\n".join(batch_c) + "\n")
        run(["ip", "-batch", "-"], ns=self.server_ns, input="\n".join(batch_s) + "\n")

    def configure_mptcp(self, *, initial: int, endpoints: Sequence[tuple[int, bool]], max_subflows: int = 8) -> None:
        """MPTCP on at both ends; the client's kernel path manager gets a subflow endpoint per
        ``(path index, backup)``; the server announces nothing and accepts joins."""
        for ns in (self.client_ns, self.server_ns):
            run(["sysctl", "-q", "-w", "net.mptcp.enabled=1"], ns=ns)
            run(["ip", "mptcp", "endpoint", "flush"], ns=ns)
        run(["ip", "mptcp", "limits", "set", "subflow", str(max_subflows), "add_addr_accepted", "0"],
            ns=self.client_ns)
        run(["ip", "mptcp", "limits", "set", "subflow", str(max_subflows), "add_addr_accepted", "0"],
            ns=self.server_ns)
        for idx, backup in endpoints:
            self.add_endpoint(idx, backup=backup)
        del initial  # the initial subflow is the socket's own address: no endpoint for it

    def add_endpoint(self, index: int, *, backup: bool = False) -> None:
        p = self.paths[index - 1]
        run(["ip", "mptcp", "endpoint", "add", p.client_addr, "dev", p.host_if, "subflow",
             *(["backup"] if backup else [])], ns=self.client_ns)

    def set_stack(self, *, tcp_rmem: Sequence[int], tcp_wmem: Sequence[int], extra: dict[str, str] | None = None,
                  route_options: dict[str, str] | None = None) -> None:
        """Per-namespace socket buffer limits (net.ipv4.tcp_rmem/wmem are per namespace), any other
        kernel-named sysctl, and per-route options (initcwnd, rto_min, quickack), at both ends."""
        settings = [f"net.ipv4.tcp_rmem={' '.join(map(str, tcp_rmem))}",
                    f"net.ipv4.tcp_wmem={' '.join(map(str, tcp_wmem))}",
                    "net.ipv4.tcp_no_metrics_save=1"]
        settings += [f"{k}={v}" for k, v in (extra or {}).items()]
        for ns in (self.client_ns, self.server_ns):
            run(["sysctl", "-q", "-w", *settings], ns=ns)
        opts = [w for kv in (route_options or {}).items() for w in kv]
        if opts:
            for p in self.paths:
                subnet = f"10.0.{p.index}.0/24"
                for ns in (self.client_ns, self.server_ns):
                    run(["ip", "route", "change", subnet, "dev", p.host_if, "proto", "kernel", "scope", "link",
                         *opts], ns=ns)
                run(["ip", "route", "change", "default", "dev", p.host_if, "table", str(100 + p.index), *opts],
                    ns=self.client_ns)

    # -- processes ------------------------------------------------------------------------------
    def spawn(self, ns: str, args: Sequence[str], *, stdout: IO[Any] | int | None = subprocess.PIPE,
              stderr: IO[Any] | int | None = subprocess.PIPE, stdin: IO[Any] | int | None = subprocess.DEVNULL,
              ) -> subprocess.Popen[Any]:
        """Start a process inside ``ns``; it is stopped at `close` at the latest. Its own session, so a
        Ctrl-C at the terminal reaches us first and we stop it in order (captures flushed)."""
        proc = subprocess.Popen(ns_cmd(ns, args), stdout=stdout, stderr=stderr, stdin=stdin,
                                start_new_session=True, text=True)
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[Any], *, sig: int = signal.SIGTERM, timeout_s: float = 5.0) -> None:
        if proc.poll() is None:
            try:
                proc.send_signal(sig)
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        """Stop every process started here, then delete the namespaces (their veths and qdiscs go
        with them). Safe to call twice, from atexit or after an error."""
        if self.closed:
            return
        self.closed = True
        for proc in reversed(self.procs):
            self.stop(proc, timeout_s=3.0)
            for f in (proc.stdout, proc.stderr):
                if f is not None:
                    f.close()
        for ns in reversed(self.created):
            _kill_ns_leftovers(ns)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        with _LOCK:
            _ACTIVE.discard(self)

    def exists(self) -> list[str]:
        """Which of this lab's namespaces still exist (for tests of the clean-up)."""
        names = set(_netns_names())
        return [ns for ns in self.namespaces if ns in names]


def _netns_names() -> list[str]:
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _kill_ns_leftovers(ns: str) -> None:
    """Processes still inside one of our namespaces (children of what we started) are stopped by id."""
    p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    for pid in p.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    if p.stdout.strip():
        time.sleep(0.05)


def sweep_stale() -> list[str]:
    """Delete the namespaces of lab runs whose process is gone (a run killed with SIGKILL cannot
    clean up after itself). Returns the names removed."""
    removed = []
    for ns in _netns_names():
        m = re.fullmatch(rf"{_PREFIX}-(\d+)-[0-9a-f]+-(c|s|r\d+)", ns)
        if not m or Path(f"/proc/{m.group(1)}").exists():
            continue
        _kill_ns_leftovers(ns)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        removed.append(ns)
    return removed


def close_all() -> None:
    """Close every lab of this process (atexit, signal handlers)."""
    with _LOCK:
        labs = list(_ACTIVE)
    for lab in labs:
        lab.close()


atexit.register(close_all)
