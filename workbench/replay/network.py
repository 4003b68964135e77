"""The network of one run: the links (one direction of one bottleneck each, `LinkSpec`) and the
routes of the subflows through them (`Route`). As in htsim, a packet carries what routes it: the
compiled engine (native/engine/src/engine.rs) hands each packet a link delivers to its subflow's next
hop or, at the end of the route, to the subflow's receiver or sender. Subflows may share a link (a
common bottleneck); a link carries data or ACKs, never both.

Random loss on each link draws from its own stream, derived from (seed, link name) (`link_rng`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.experiment._model import LinkSpec

__all__ = ["Route", "link_rng", "route_owd_ns"]


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


def route_owd_ns(specs: dict[str, LinkSpec], route: tuple[str, ...], t_ns: int) -> int:
    """Propagation delay along ``route`` for a packet leaving at ``t_ns`` (queueing excluded)."""
    t = t_ns
    for name in route:
        t += int(specs[name].owd_ns.at(t))
    return t - t_ns
