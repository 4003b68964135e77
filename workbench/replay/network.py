"""The network of one run: the links (one direction of one bottleneck each) and the routes of the
subflows through them. As in htsim, a packet carries what routes it: its first field is the subflow
index (``sf`` of the packet records in workbench.replay.tcp), and a link hands each arriving packet to
that subflow's next hop (the next link's ``send``) or, at the end of the route, to the subflow's
receiver or sender. A link crossed by one subflow only (the common case: a dedicated bottleneck per
path) calls that continuation directly; a shared one looks it up by ``sf`` (``Link.deliver_by_subflow``).

Random loss on each link draws from its own stream, derived from (seed, link name) (`link_rng`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.experiment._model import LinkSpec
from workbench.replay.events import EventLoop
from workbench.replay.link import Link
from workbench.replay.tcp import AckPkt, DataPkt

__all__ = ["Route", "build_links", "link_rng", "route_owd_ns", "wire"]


@dataclass(frozen=True)
class Route:
    """One subflow's way through the network: its path's name, the links its data cross in order and
    the links its ACKs cross in order."""

    path: str
    data: tuple[str, ...]
    ack: tuple[str, ...]
    backup: bool = False


def link_rng(seed: int, link_name: str) -> random.Random:
    """The random stream of one link: derived from (seed, link name), stable across processes
    (a str seed goes through SHA-512, not Python's salted hash)."""
    return random.Random(f"{seed}/{link_name}")


def build_links(loop: EventLoop, specs: Sequence[LinkSpec], *, seed: int) -> dict[str, Link]:
    return {s.name: Link(loop, name=s.name, rate_bps=s.rate_bps, owd_ns=s.owd_ns, loss=s.loss,
                         buffer_bytes=s.buffer_size_bytes, rng=link_rng(seed, s.name),
                         deliver=None)  # type: ignore[arg-type]
            for s in specs}


def route_owd_ns(specs: dict[str, LinkSpec], route: tuple[str, ...], t_ns: int) -> int:
    """Propagation delay along ``route`` for a packet leaving at ``t_ns`` (queueing excluded)."""
    t = t_ns
    for name in route:
        t += int(specs[name].owd_ns.at(t))
    return t - t_ns


def _forward_data(nxt: Link, header_bytes: int) -> Callable[[Any], None]:
    send = nxt.send

    def forward(pkt: DataPkt) -> None:
        send(pkt, pkt.plen + header_bytes)
    return forward


def _forward_ack(nxt: Link, ack_bytes: int) -> Callable[[Any], None]:
    send = nxt.send

    def forward(pkt: AckPkt) -> None:
        send(pkt, ack_bytes + (12 if pkt.sack != -1 else 0))  # a SACK block (or DSACK, -2) adds 12 B, as at the first hop
    return forward


def wire(links: dict[str, Link], routes: Sequence[Route], *, data_ends: Sequence[Callable[[Any], None]],
         ack_ends: Sequence[Callable[[Any], None]], data_header_bytes: int, ack_bytes: int,
         on_data_drop: Callable[[Any, int, int], None] | None = None,
         on_ack_drop: Callable[[Any, int, int], None] | None = None) -> None:
    """Set every link's ``deliver``: the next hop of each subflow crossing it, or the route's end
    (``data_ends[k]`` = subflow k's receiver, ``ack_ends[k]`` = its sender). A link carries data or
    ACKs, never both, so its drop callback knows which kind of packet it lost."""
    table: dict[str, dict[int, Callable[[Any], None]]] = {name: {} for name in links}
    roles: dict[str, set[str]] = {name: set() for name in links}
    for k, r in enumerate(routes):
        for kind, hops, end in (("data", r.data, data_ends[k]), ("ack", r.ack, ack_ends[k])):
            for i, name in enumerate(hops):
                roles[name].add(kind)
                if len(roles[name]) > 1:
                    raise ValueError(f"link {name} would carry data and ACKs: give each direction its own link")
                if k in table[name]:
                    raise ValueError(f"route of subflow {k} crosses link {name} twice")
                if i + 1 < len(hops):
                    nxt = links[hops[i + 1]]
                    table[name][k] = (_forward_data(nxt, data_header_bytes) if kind == "data"
                                      else _forward_ack(nxt, ack_bytes))
                else:
                    table[name][k] = end
    for name, t in table.items():
        if t:
            if len(t) == 1:
                links[name].deliver = next(iter(t.values()))
            else:
                links[name].deliver_by_subflow = [t.get(k) for k in range(max(t) + 1)]
            links[name].on_drop = on_data_drop if "data" in roles[name] else on_ack_drop
