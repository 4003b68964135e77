"""From a PACKETS table to PacketEvents: connections and subflows resolved, directions named from the
connection's client, paths labelled, sequence and data sequence numbers made relative, and each
row's observation point (sender or receiver side) inferred from where the capture was taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from workbench.capture._mptcp import (
    ConnectionInfo,
    SubflowInfo,
    assign_connections,
    expand_dsn,
    split_by_dsn_space,
)
from workbench.capture._streams import add_stream_columns
from workbench.capture.schema import MPTCP_SUBTYPES, PACKET_EVENTS, TCP_FLAGS

__all__ = ["Analysis", "analyze"]

_U32 = 1 << 32
_MPC = 1 << MPTCP_SUBTYPES["MP_CAPABLE"]
_SYN = TCP_FLAGS["SYN"]


@dataclass
class Analysis:
    """PacketEvents of one capture plus what was learnt on the way."""

    events: pl.DataFrame
    connections: list[ConnectionInfo]
    subflows: dict[int, SubflowInfo]          # by stream id
    vantage: dict[int, str]                   # conn -> "client" | "server"
    warnings: list[str] = field(default_factory=list)


def _subflow_table(subflows: dict[int, SubflowInfo], path_names: dict[str, str]) -> pl.DataFrame:
    rows = []
    for sf in subflows.values():
        client_addr = sf.client_ep.rsplit("|", 1)[0]
        rows.append({"stream": sf.stream, "conn": sf.conn, "subflow": sf.index, "client_ep": sf.client_ep,
                     "path": path_names.get(client_addr, client_addr)})
    return pl.DataFrame(rows, schema={"stream": pl.UInt32, "conn": pl.UInt32, "subflow": pl.UInt32,
                                      "client_ep": pl.String, "path": pl.String})


def _dsn_bases(df: pl.DataFrame, conns: list[ConnectionInfo]) -> pl.DataFrame:
    """Base (IDSN + 1) per (conn, dir). From the keys when the handshake was captured, otherwise the
    lowest DSN seen in that direction (so relative DSNs start at 0 at the first byte seen)."""
    rows = []
    for c in conns:
        for d, client_side in (("c2s", True), ("s2c", False)):
            idsn = c.idsn(client_side)
            rows.append({"conn": c.conn, "dir": d, "base": None if idsn is None else idsn + 1})
    bases = pl.DataFrame(rows, schema={"conn": pl.UInt32, "dir": pl.String, "base": pl.Int128})
    # Fallback base: the lowest raw DSN, 32-bit raw values measured from the first one seen so that
    # a wrap inside the capture does not make the minimum meaningless.
    seen = (
        df.filter(pl.col("dss_dsn").is_not_null())
        .group_by("conn", "dir")
        .agg(
            first_raw=pl.col("dss_dsn").first(),
            min_off=((pl.col("dss_dsn").cast(pl.Int128) - pl.col("dss_dsn").first().cast(pl.Int128)
                      + (1 << 31)) % _U32 - (1 << 31)).min(),
            any8=pl.col("dss_dsn8").any(),
            min8=pl.col("dss_dsn").min(),
        )
        .with_columns(
            seen_base=pl.when(pl.col("any8")).then(pl.col("min8").cast(pl.Int128))
            .otherwise(pl.col("first_raw").cast(pl.Int128) + pl.col("min_off")),
        )
        .select("conn", pl.col("dir").cast(pl.String), "seen_base")
    )
    return (
        bases.join(seen, on=["conn", "dir"], how="left")
        .with_columns(base=pl.coalesce("base", "seen_base"))
        .select("conn", "dir", "base")
    )


def _note_apart(conns: list[ConnectionInfo], subflows: dict[int, SubflowInfo], main_stream: int,
                apart: dict[int, int]) -> None:
    """Say why streams of one connection's exports became connections of their own
    (`split_by_dsn_space`): one warning on each such connection."""
    main = subflows[main_stream].conn
    gap: dict[int, int] = {}
    for stream, g in apart.items():
        c = subflows[stream].conn
        gap[c] = max(gap.get(c, 0), g)
    for c, g in sorted(gap.items()):
        conns[c].warnings.append(
            f"given as part of connection {main}, but its data sequence numbers lie {g} bytes from that "
            "connection's: another MPTCP connection (such as the end of an earlier one still in the capture), "
            "kept apart")


def _infer_vantage(df: pl.DataFrame, conns: list[ConnectionInfo],
                   subflows: dict[int, SubflowInfo]) -> tuple[dict[int, str], list[str]]:
    """Was the capture taken at the client or at the server? At the client the SYN -> SYN/ACK gap is a
    full round trip and SYN/ACK -> ACK is immediate; at the server it is the other way round. Without a
    handshake, TCP timestamps tell: our own packets are echoed a round trip later, the peer's at once."""
    vantage: dict[int, str] = {}
    warnings: list[str] = []
    hs = (
        df.filter(pl.col("subflow") == 0)
        .group_by("conn")
        .agg(
            t_syn=pl.col("t_ns").filter(pl.col("is_pure_syn")).min(),
            t_synack=pl.col("t_ns").filter(pl.col("is_synack")).min(),
        )
    )
    t_ack = (
        df.filter((pl.col("subflow") == 0) & (pl.col("dir") == "c2s") & ((pl.col("flags") & _SYN) == 0))
        .join(hs, on="conn")
        .filter(pl.col("t_ns") >= pl.col("t_synack"))
        .group_by("conn")
        .agg(t_ack=pl.col("t_ns").min())
    )
    hs = hs.join(t_ack, on="conn", how="left")
    echo = _ts_echo_delays(df)
    for c in conns:
        row = hs.filter(pl.col("conn") == c.conn).to_dicts()
        r = row[0] if row else {}
        if r.get("t_syn") is not None and r.get("t_synack") is not None and r.get("t_ack") is not None:
            vantage[c.conn] = "client" if (r["t_synack"] - r["t_syn"]) >= (r["t_ack"] - r["t_synack"]) else "server"
            continue
        e = echo.get(c.conn, {})
        if "c2s" in e and "s2c" in e:
            vantage[c.conn] = "client" if e["c2s"] >= e["s2c"] else "server"
            continue
        vantage[c.conn] = "client"
        warnings.append(f"connection {c.conn}: cannot tell whether the capture was taken at the client or "
                        "the server (no handshake, no TCP timestamps); assuming the client")
    return vantage, warnings


def _ts_echo_delays(df: pl.DataFrame) -> dict[int, dict[str, float]]:
    """Median time from a TSval's first appearance to its first echo in the other direction, per
    (conn, dir of the original packet)."""
    sent = (
        df.filter(pl.col("opt_ts_val").is_not_null())
        .group_by("conn", "subflow", "dir", "opt_ts_val")
        .agg(t_val=pl.col("t_ns").min())
    )
    echoed = (
        df.filter(pl.col("opt_ts_ecr").is_not_null() & (pl.col("opt_ts_ecr") != 0))
        .group_by("conn", "subflow", "dir", "opt_ts_ecr")
        .agg(t_ecr=pl.col("t_ns").min())
        .with_columns(dir=pl.when(pl.col("dir") == "c2s").then(pl.lit("s2c")).otherwise(pl.lit("c2s")))
        .rename({"opt_ts_ecr": "opt_ts_val"})
    )
    joined = (
        sent.with_columns(pl.col("dir").cast(pl.String))
        .join(echoed, on=["conn", "subflow", "dir", "opt_ts_val"])
        .filter(pl.col("t_ecr") >= pl.col("t_val"))
        .group_by("conn", "dir")
        .agg(delay=(pl.col("t_ecr") - pl.col("t_val")).median())
    )
    out: dict[int, dict[str, float]] = {}
    for r in joined.to_dicts():
        out.setdefault(r["conn"], {})[r["dir"]] = r["delay"]
    return out


def analyze(
    packets: pl.DataFrame,
    *,
    path_names: dict[str, str] | None = None,
    one_connection: bool = False,
    vantage: dict[int, str] | None = None,
) -> Analysis:
    """Resolve a PACKETS table into PacketEvents.

    `path_names` maps a client address to a path label (`{"10.0.2.1": "lte"}`); unnamed paths are
    labelled by the client address. `one_connection` makes every TCP stream a subflow of one
    connection, for inputs that say so themselves (one connection's per-subflow CSV exports, whose
    handshakes and keys are absent), but for streams whose data sequence numbers cannot be that
    connection's: those become connections of their own, with a warning. `vantage` overrides the
    inferred capture point.
    """
    df = add_stream_columns(packets)
    groups, apart = split_by_dsn_space(df) if one_connection else (None, {})
    conns, subflows, warnings = assign_connections(df, forced_groups=groups)
    if groups and apart:
        _note_apart(conns, subflows, groups[0][0], apart)
    sf_table = _subflow_table(subflows, path_names or {})
    df = df.join(sf_table, on="stream", how="left")
    # Directions are named from the connection's client, also on subflows the server opened.
    df = df.with_columns(dir=pl.when(pl.col("ep_src") == pl.col("client_ep")).then(pl.lit("c2s"))
                         .otherwise(pl.lit("s2c")))

    # DSS mappings cover a range of subflow bytes and are repeated or sent once for many segments:
    # carry the last mapping forward within the subflow direction and place each segment inside it.
    bases = _dsn_bases(df, conns)
    df = df.join(bases, on=["conn", "dir"], how="left")
    other = bases.rename({"base": "ack_base"}).with_columns(
        dir=pl.when(pl.col("dir") == "c2s").then(pl.lit("s2c")).otherwise(pl.lit("c2s")))
    df = df.join(other, on=["conn", "dir"], how="left")
    mpc_data = (((pl.col("mp_subtypes") & _MPC) != 0) & (pl.col("payload_len") > 0)
                & pl.col("dss_dsn").is_null() & (pl.col("mp_version") == 1))
    df = df.with_columns(
        map_dsn=pl.when(pl.col("dss_dsn").is_not_null())
        .then(expand_dsn(pl.col("dss_dsn"), pl.col("dss_dsn8"), pl.col("base")))
        .when(mpc_data).then(pl.lit(0, pl.UInt64)),  # RFC 8684 §3.1: data on the MP_CAPABLE ACK starts at IDSN+1
        map_8=pl.when(pl.col("dss_dsn").is_not_null()).then(pl.col("dss_dsn8")).when(mpc_data).then(True),
        # Exports that keep the DSN but not the subflow sequence number or length (tshark CSVs of
        # measurement studies): the mapping is taken to be the packet itself, as Linux sends it.
        map_ssn=pl.when(pl.col("dss_dsn").is_not_null()).then(pl.coalesce("dss_ssn", "rel_seq"))
        .when(mpc_data).then(pl.lit(1, pl.UInt32)),
        # The MP_CAPABLE data-level length can span later segments (a v1 client's first write split
        # over several packets): the implicit mapping holds until the next DSS mapping (0 = open).
        map_dll=pl.when(pl.col("dss_dsn").is_not_null())
        .then(pl.coalesce("dss_dll", pl.col("payload_len").cast(pl.UInt16)))
        .when(mpc_data).then(pl.lit(0, pl.UInt16)),
    )
    df = _place_in_mappings(df)
    df = df.with_columns(
        data_ack=pl.when(pl.col("dss_data_ack").is_not_null() & pl.col("ack_base").is_not_null())
        .then(expand_dsn(pl.col("dss_data_ack"), pl.col("dss_ack8"), pl.col("ack_base"))),
    )
    df = _unwrap_32bit(df)

    # A relative DSN this far from its base is corruption (no transfer reaches 2^62 bytes): drop it so
    # that metrics can count bytes in signed 64-bit arithmetic.
    absurd = 1 << 62
    n_absurd = df.filter((pl.col("dsn") >= absurd) | (pl.col("data_ack") >= absurd)).height
    if n_absurd:
        warnings.append(f"{n_absurd} packets carry data sequence numbers outside their connection's data "
                        "sequence space (corrupt options?); their DSN/DATA_ACK is ignored")
        df = df.with_columns(
            dsn=pl.when(pl.col("dsn") < absurd).then(pl.col("dsn")),
            data_ack=pl.when(pl.col("data_ack") < absurd).then(pl.col("data_ack")),
        )
    df = _mark_reinjections(df)

    inferred, vwarn = _infer_vantage(df, conns, subflows)
    warnings += vwarn
    if vantage:
        inferred.update(vantage)
    vt = pl.DataFrame({"conn": list(inferred), "at_client": [v == "client" for v in inferred.values()]},
                      schema={"conn": pl.UInt32, "at_client": pl.Boolean})
    df = df.join(vt, on="conn", how="left").with_columns(
        point=pl.when((pl.col("dir") == "c2s") == pl.col("at_client")).then(pl.lit("snd")).otherwise(pl.lit("rcv")),
    )
    events = df.sort("frame").select(
        pl.col("t_ns"), pl.col("conn"), pl.col("subflow"), pl.col("path"),
        pl.col("dir").cast(PACKET_EVENTS["dir"]), pl.col("point").cast(PACKET_EVENTS["point"]),
        seq=pl.col("rel_seq"), ack=pl.col("rel_ack"), flags=pl.col("flags"),
        payload_bytes=pl.col("payload_len"), frame_bytes=pl.col("frame_len"), rwnd_bytes=pl.col("rwnd_bytes"),
        dsn=pl.col("dsn"), data_ack=pl.col("data_ack"),
        data_fin=pl.col("dss_data_fin").fill_null(False), is_retrans=pl.col("is_retrans"),
        is_reinject=pl.col("is_reinject"), ts_val=pl.col("opt_ts_val"), ts_ecr=pl.col("opt_ts_ecr"),
        owd_ns=pl.lit(None, pl.Int64),
    ).cast(PACKET_EVENTS)  # type: ignore[arg-type]
    for c in conns:
        warnings += [f"connection {c.conn}: {w}" for w in c.warnings]
    return Analysis(events=events, connections=conns, subflows=subflows, vantage=inferred, warnings=warnings)


def _mark_reinjections(df: pl.DataFrame) -> pl.DataFrame:
    """`is_reinject`: part of the segment's DSN range was seen earlier on another subflow of the
    connection (what Wireshark's mptcp.reinjection_of marks).

    Per subflow, the first copies of its segments cover disjoint DSN ranges. For a segment s and
    another subflow b, the only first copy of b that can overlap s without a fully contained one
    overlapping too is the one with the largest start at or below s's last byte, so one as-of join
    per (subflow, other subflow) decides it.
    """
    seg = df.filter(pl.col("dsn").is_not_null() & (pl.col("payload_len") > 0)).select(
        "frame", "conn", "dir", "subflow", "t_ns", lo=pl.col("dsn").cast(pl.Int64),
        hi=pl.col("dsn").cast(pl.Int64) + pl.col("payload_len").cast(pl.Int64))
    if seg.is_empty():
        return df.with_columns(is_reinject=pl.lit(False))
    firsts = seg.sort("t_ns").unique(subset=["conn", "dir", "subflow", "lo"], keep="first")
    hits = []
    for other in seg["subflow"].unique().to_list():
        theirs = (firsts.filter(pl.col("subflow") == other)
                  .select("conn", "dir", o_lo="lo", o_hi="hi", o_t="t_ns").sort("o_lo"))
        mine = seg.filter(pl.col("subflow") != other).with_columns(last=pl.col("hi") - 1).sort("last")
        m = mine.join_asof(theirs, left_on="last", right_on="o_lo", by=["conn", "dir"], strategy="backward",
                           check_sortedness=False)
        hits.append(m.filter((pl.col("o_hi") > pl.col("lo")) & (pl.col("o_t") < pl.col("t_ns"))).select("frame"))
    reinjected = pl.concat(hits).unique()
    return df.with_columns(is_reinject=pl.col("frame").is_in(reinjected["frame"].implode()))


def _place_in_mappings(df: pl.DataFrame) -> pl.DataFrame:
    """DSN of each data segment from the DSS mapping whose subflow range [ssn, ssn + length) holds it.

    A mapping is sent once or repeated on the segments it covers, and a retransmission can fall in an
    older mapping than the last one seen, so the lookup is by range, not by recency: the mapping with
    the largest start at or below the segment's relative sequence number, if it reaches that far. A
    subflow range maps to one DSN range only (RFC 8684 §3.3.1), so repeated mappings agree.
    """
    maps = (
        df.filter(pl.col("map_dsn").is_not_null())
        .select("stream", "dir", map_start=pl.col("map_ssn").cast(pl.Int64), map_dsn=pl.col("map_dsn"),
                map_8=pl.col("map_8"), map_dll=pl.col("map_dll"))
        .unique(subset=["stream", "dir", "map_start"], keep="first", maintain_order=True)
        .sort("map_start")
    )
    data = (
        df.filter(pl.col("payload_len") > 0)
        .select("frame", "stream", "dir", seq64=pl.col("rel_seq").cast(pl.Int64))
        .sort("seq64")
        .join_asof(maps, left_on="seq64", right_on="map_start", by=["stream", "dir"], strategy="backward",
                   check_sortedness=False)
    )
    offset = pl.col("seq64") - pl.col("map_start")
    in_map = pl.col("map_dsn").is_not_null() & ((pl.col("map_dll") == 0) | (offset < pl.col("map_dll").cast(pl.Int64)))
    dsn_raw = pl.col("map_dsn").cast(pl.Int128) + offset
    placed = data.select(
        "frame",
        dsn=pl.when(in_map).then(pl.when(pl.col("map_8")).then(dsn_raw % (1 << 64)).otherwise(dsn_raw % _U32))
        .cast(pl.UInt64),
        dsn_map8=pl.col("map_8"),
    )
    return df.drop("map_8").join(placed, on="frame", how="left").rename({"dsn_map8": "map_8"})


def _unwrap_32bit(df: pl.DataFrame) -> pl.DataFrame:
    """Relative DSNs from 4-byte mappings are mod 2^32: count wraps in time order per connection
    direction so transfers above 4 GiB keep increasing 64-bit DSNs."""
    half = 1 << 31
    needs = df.filter(pl.col("dsn").is_not_null() & ~pl.col("map_8").fill_null(True))
    if needs.is_empty():
        return df
    step = (pl.col("dsn").cast(pl.Int64) - pl.col("dsn").cast(pl.Int64).shift(1)).fill_null(0)
    wraps = ((step < -half).cast(pl.Int64) - (step > half).cast(pl.Int64)).cum_sum()
    fixed = (
        needs.sort("frame")
        .with_columns(wraps=wraps.over("conn", "dir", order_by="frame"))
        .select("frame", dsn_fixed=(pl.col("dsn").cast(pl.Int64) + pl.col("wraps") * _U32).clip(0).cast(pl.UInt64))
    )
    return df.join(fixed, on="frame", how="left").with_columns(dsn=pl.coalesce("dsn_fixed", "dsn")).drop("dsn_fixed")
