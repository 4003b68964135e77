"""Two captures of one session, one at each end: connections matched by their MPTCP keys (plain TCP
by addresses), packets matched by subflow, direction and sequence numbers, and the one-way delay of
each packet set on its receiver-side row.
"""

from __future__ import annotations

from typing import Literal, cast

import polars as pl

from workbench.capture._analyze import Analysis
from workbench.capture.schema import PACKET_EVENTS
from workbench.errors import InputError

__all__ = ["merge_pair"]


def _conn_keys(a: Analysis) -> dict[tuple, int]:
    """A session-independent identity per connection: the key pair for MPTCP, endpoints for TCP."""
    out: dict[tuple, int] = {}
    for c in a.connections:
        if c.client_key is not None and c.server_key is not None:
            out[("keys", c.client_key, c.server_key)] = c.conn
        else:
            first = next(sf for sf in a.subflows.values() if sf.conn == c.conn and sf.index == 0)
            out[("eps", first.client_ep, first.server_ep)] = c.conn
    return out


def _subflow_keys(a: Analysis) -> pl.DataFrame:
    return pl.DataFrame(
        [{"conn": sf.conn, "subflow": sf.index, "eps": sf.client_ep + ">" + sf.server_ep} for sf in a.subflows.values()],
        schema={"conn": pl.UInt32, "subflow": pl.UInt32, "eps": pl.String},
    )


def merge_pair(first: Analysis, second: Analysis, *, first_name: str, second_name: str
               ) -> tuple[pl.DataFrame, list[str]]:
    """PacketEvents holding both captures' observations, numbered as in `first`, with `owd_ns` on
    every receiver-side row that was matched to its sender-side row."""
    keys1, keys2 = _conn_keys(first), _conn_keys(second)
    common = [k for k in keys1 if k in keys2]
    if not common:
        raise InputError(second_name, f"not a capture of the same session as {first_name} "
                         "(no MPTCP keys or TCP endpoints in common)")
    warnings: list[str] = []
    conn_map = pl.DataFrame({"conn2": [keys2[k] for k in common], "conn": [keys1[k] for k in common]},
                            schema={"conn2": pl.UInt32, "conn": pl.UInt32})
    for k in common:
        c1, c2 = keys1[k], keys2[k]
        if first.vantage.get(c1) == second.vantage.get(c2):
            warnings.append(f"connection {c1}: both captures look taken at the {first.vantage[c1]} side")
    # Subflows of the second capture renumbered to the first's numbering, by their endpoints.
    sf1 = _subflow_keys(first).rename({"subflow": "subflow"})
    sf2 = _subflow_keys(second).rename({"conn": "conn2", "subflow": "subflow2"})
    sf_map = sf2.join(conn_map, on="conn2").join(sf1, on=["conn", "eps"], how="left")
    unmatched = sf_map.filter(pl.col("subflow").is_null()).height
    if unmatched:
        warnings.append(f"{unmatched} subflows of {second_name} have no counterpart in {first_name}")
    ev1 = first.events.filter(pl.col("conn").is_in(conn_map["conn"].implode()))
    ev2 = (
        second.events.rename({"conn": "conn2", "subflow": "subflow2"})
        .join(sf_map.filter(pl.col("subflow").is_not_null()).select("conn2", "subflow2", "conn", "subflow"),
              on=["conn2", "subflow2"])
        .drop("conn2", "subflow2", "path")
        .join(ev1.select("conn", "subflow", "path").unique(), on=["conn", "subflow"], how="left")
    )
    both = pl.concat([ev1, ev2.select(ev1.columns).cast(PACKET_EVENTS)])  # type: ignore[arg-type]
    events, match_warnings = _match_owd(both)
    return events, warnings + match_warnings


def _match_owd(events: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """Set owd_ns on rcv rows by finding the send of the same segment: same subflow, direction, seq,
    ack, length, TSval and window. When both ends saw a segment equally often, the k-th copy received
    is paired with the k-th sent; otherwise (losses) with the latest send before the arrival. A segment
    that offloads split or merged differently at the two ends is matched by its first byte alone; when
    the clocks disagree, to the first send after the arrival."""
    # TSval and window tell apart duplicate ACKs that share seq/ack; a missing option is keyed as 0.
    key = ["conn", "subflow", "dir", "seq", "ack", "payload_bytes", "tsv", "rwnd_bytes"]
    ev = events.with_row_index("row").with_columns(tsv=pl.col("ts_val").fill_null(0))
    nth = pl.int_range(pl.len()).over(key, order_by="t_ns").alias("nth")
    copies = pl.len().over(key).alias("copies")
    snd = ev.filter(pl.col("point") == "snd").select(*key, t_snd=pl.col("t_ns"), nth=nth, copies=copies)
    rcv = ev.filter(pl.col("point") == "rcv").select("row", *key, "t_ns", nth=nth, copies=copies)
    by_rank = rcv.join(snd, on=[*key, "nth", "copies"], how="inner").select("row", "t_ns", "t_snd")
    rest = rcv.join(by_rank, on="row", how="anti").drop("nth", "copies").sort("t_ns")
    snd = snd.drop("nth", "copies").sort("t_snd")
    found = [by_rank]
    seq_key = ["conn", "subflow", "dir", "seq"]
    for right, by, strategy in ((snd, key, "backward"),
                                (snd.filter(pl.col("payload_bytes") > 0).select(*seq_key, "t_snd"), seq_key, "backward"),
                                (snd, key, "forward")):
        if rest.is_empty():
            break
        m = rest.join_asof(right.select(*by, "t_snd"), left_on="t_ns", right_on="t_snd", by=by,
                           strategy=cast('Literal["backward", "forward"]', strategy), check_sortedness=False)
        found.append(m.filter(pl.col("t_snd").is_not_null()).select("row", "t_ns", "t_snd"))
        rest = m.filter(pl.col("t_snd").is_null()).drop("t_snd")
    m = pl.concat(found)
    owd = m.select("row", owd=(pl.col("t_ns") - pl.col("t_snd")))
    out = (ev.join(owd, on="row", how="left").with_columns(owd_ns=pl.coalesce("owd", "owd_ns"))
           .drop("row", "owd", "tsv"))
    warnings = []
    n_rcv = rcv.height
    n_matched = owd.filter(pl.col("owd").is_not_null()).height
    if n_rcv and n_matched < 0.95 * n_rcv:
        warnings.append(f"only {n_matched} of {n_rcv} received packets matched a sent packet in the other capture")
    neg = out.filter(pl.col("owd_ns") < 0)
    if neg.height > 0.01 * max(n_matched, 1):
        by_dir = (out.filter(pl.col("owd_ns").is_not_null()).group_by("dir")
                  .agg(pl.col("owd_ns").min()).sort("dir").to_dicts())
        mins = {r["dir"]: r["owd_ns"] for r in by_dir}
        if "c2s" in mins and "s2c" in mins:
            offset_ms = (mins["s2c"] - mins["c2s"]) / 2e6
            warnings.append(f"the two captures' clocks differ (negative one-way delays); if the paths are "
                            f"symmetric the client clock is {offset_ms:+.3f} ms off the server's")
        else:
            warnings.append("the two captures' clocks differ (negative one-way delays)")
    return out.sort("t_ns", maintain_order=True), warnings
