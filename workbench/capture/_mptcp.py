"""MPTCP connections in a capture: subflows grouped by key -> token (RFC 8684 §3.1: SHA-256 for
version 1, SHA-1 for version 0, RFC 6824), never by addresses; data sequence numbers made relative
to each direction's initial data sequence number (IDSN), 32-bit DSNs expanded to 64 bits.

Token = the most significant 32 bits of the hash of the key, IDSN = its least significant 64 bits;
the first data byte of a direction has DSN IDSN + 1, which is relative DSN 0 here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import polars as pl

from workbench.capture.schema import MPTCP_SUBTYPES

__all__ = ["ConnectionInfo", "SubflowInfo", "assign_connections", "expand_dsn", "idsn_of_key", "split_by_dsn_space",
           "token_of_key"]

_U32 = 1 << 32
_U64 = 1 << 64
_MPC = 1 << MPTCP_SUBTYPES["MP_CAPABLE"]
_JOIN = 1 << MPTCP_SUBTYPES["MP_JOIN"]
_DSS = 1 << MPTCP_SUBTYPES["DSS"]


def _digest(key: int, version: int) -> bytes:
    raw = key.to_bytes(8, "big")
    return hashlib.sha256(raw).digest() if version >= 1 else hashlib.sha1(raw).digest()


def token_of_key(key: int, version: int) -> int:
    """The 32-bit token a peer uses in MP_JOIN to name the connection whose key is `key`."""
    return int.from_bytes(_digest(key, version)[:4], "big")


def idsn_of_key(key: int, version: int) -> int:
    """The initial data sequence number of the direction sent by the owner of `key`."""
    return int.from_bytes(_digest(key, version)[-8:], "big")


@dataclass
class SubflowInfo:
    stream: int
    conn: int
    index: int                 # 0 = initial subflow
    client_ep: str             # "addr|port" of the connection's client side of this subflow
    server_ep: str
    join: bool                 # established with MP_JOIN
    server_initiated: bool     # the join's SYN came from the connection's server side
    fallback: bool = False     # MPTCP negotiated but data flows without DSS mappings
    has_handshake: bool = True


@dataclass
class ConnectionInfo:
    conn: int
    kind: str                  # "mptcp" or "tcp"
    version: int | None = None
    client_key: int | None = None
    server_key: int | None = None
    client_token: int | None = None
    server_token: int | None = None
    streams: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def idsn(self, client_side: bool) -> int | None:
        key = self.client_key if client_side else self.server_key
        if key is None or self.version is None:
            return None
        return idsn_of_key(key, self.version)


def _stream_facts(df: pl.DataFrame) -> pl.DataFrame:
    """One row per stream with what grouping needs: handshake options, keys, tokens, first frame."""
    mpc = (pl.col("mp_subtypes") & _MPC) != 0
    join = (pl.col("mp_subtypes") & _JOIN) != 0
    opener_syn = pl.col("is_pure_syn") & pl.col("opener_is_src")
    return (
        df.group_by("stream")
        .agg(
            first_frame=pl.col("frame").min(),
            opener_ep=pl.col("opener_ep").first(),
            responder_ep=pl.when(pl.col("opener_is_src")).then(pl.col("ep_dst")).otherwise(pl.col("ep_src"))
            .first(),
            has_syn=pl.col("has_syn").first(),
            syn_mpc=(opener_syn & mpc).any(),
            synack_mpc=(pl.col("is_synack") & mpc).any(),
            any_mpc=mpc.any(),
            syn_join=(opener_syn & join).any(),
            join_token=pl.when(opener_syn & join).then(pl.col("mp_join_token")).drop_nulls().first(),
            version=pl.when(mpc).then(pl.col("mp_version")).drop_nulls().max(),
            # Keys: the opener's key is the sender key on its SYN (v0) or third ACK (v0, v1); the
            # responder's is the sender key on the SYN/ACK or the receiver key on the third ACK.
            opener_key=pl.when(mpc & pl.col("opener_is_src")).then(pl.col("mp_sender_key")).drop_nulls().first(),
            responder_key=pl.coalesce(
                pl.when(mpc & ~pl.col("opener_is_src")).then(pl.col("mp_sender_key")).drop_nulls().first(),
                pl.when(mpc & pl.col("opener_is_src")).then(pl.col("mp_receiver_key")).drop_nulls().first(),
            ),
            any_dss=((pl.col("mp_subtypes") & _DSS) != 0).any(),
            data_dss=(((pl.col("mp_subtypes") & _DSS) != 0) & pl.col("dss_dsn").is_not_null()
                      & (pl.col("payload_len") > 0)).any(),
            data_bytes=pl.col("payload_len").sum(),
        )
        .sort("first_frame")
    )


def assign_connections(
    df: pl.DataFrame, *, forced_groups: list[list[int]] | None = None,
) -> tuple[list[ConnectionInfo], dict[int, SubflowInfo], list[str]]:
    """Group streams into connections. Returns connections, stream -> subflow info, and warnings.

    `forced_groups` (lists of stream ids) groups subflows whose handshakes are not in the input, e.g.
    the per-subflow CSV exports of a measurement study, where the files say what belongs together.
    """
    facts = _stream_facts(df).to_dicts()
    warnings: list[str] = []
    conns: list[ConnectionInfo] = []
    subflows: dict[int, SubflowInfo] = {}
    by_token: dict[int, tuple[ConnectionInfo, bool]] = {}  # token -> (conn, token belongs to server)
    forced_of: dict[int, int] = {}
    for gi, group in enumerate(forced_groups or []):
        for s in group:
            forced_of[s] = gi
    forced_conn: dict[int, ConnectionInfo] = {}

    def new_conn(kind: str) -> ConnectionInfo:
        c = ConnectionInfo(conn=len(conns), kind=kind)
        conns.append(c)
        return c

    def add_subflow(c: ConnectionInfo, f: dict, *, join: bool, server_initiated: bool) -> None:
        client_ep, server_ep = f["opener_ep"], f["responder_ep"]
        if server_initiated:
            client_ep, server_ep = server_ep, client_ep
        subflows[f["stream"]] = SubflowInfo(
            stream=f["stream"], conn=c.conn, index=len(c.streams), client_ep=client_ep, server_ep=server_ep,
            join=join, server_initiated=server_initiated, has_handshake=bool(f["has_syn"]),
        )
        c.streams.append(f["stream"])

    pending_joins = []
    for f in facts:
        s = f["stream"]
        if s in forced_of:
            gi = forced_of[s]
            if gi not in forced_conn:
                forced_conn[gi] = new_conn("mptcp" if f["any_dss"] or f["any_mpc"] else "tcp")
            add_subflow(forced_conn[gi], f, join=bool(forced_conn[gi].streams), server_initiated=False)
            continue
        if f["syn_join"]:
            pending_joins.append(f)
            continue
        if f["any_mpc"] and (f["synack_mpc"] or not f["has_syn"] or f["opener_key"] is not None):
            c = new_conn("mptcp")
            c.version = f["version"]
            c.client_key, c.server_key = f["opener_key"], f["responder_key"]
            if c.version is not None:
                if c.client_key is not None:
                    c.client_token = token_of_key(c.client_key, c.version)
                    by_token[c.client_token] = (c, False)
                if c.server_key is not None:
                    c.server_token = token_of_key(c.server_key, c.version)
                    by_token[c.server_token] = (c, True)
            if c.server_key is None or c.client_key is None:
                c.warnings.append("MP_CAPABLE keys incomplete in the capture: DSNs are relative to the "
                                  "lowest DSN seen, and joins cannot be matched by token")
            add_subflow(c, f, join=False, server_initiated=False)
            if not f["data_dss"] and f["data_bytes"] > 0:
                subflows[s].fallback = True
                c.warnings.append(f"subflow {subflows[s].index} fell back to plain TCP (data without DSS)")
            continue
        if f["syn_mpc"] and not f["synack_mpc"] and f["has_syn"]:
            c = new_conn("tcp")
            c.warnings.append("MP_CAPABLE offered but not accepted: plain TCP (fallback)")
            add_subflow(c, f, join=False, server_initiated=False)
            continue
        if f["any_dss"] and not f["has_syn"]:
            c = new_conn("mptcp")
            c.warnings.append("MPTCP subflow without its handshake in the capture: keys unknown, so it "
                              "cannot be grouped with other subflows")
            add_subflow(c, f, join=False, server_initiated=False)
            continue
        c = new_conn("tcp")
        add_subflow(c, f, join=False, server_initiated=False)

    for f in pending_joins:
        found = by_token.get(f["join_token"]) if f["join_token"] is not None else None
        if found is None:
            c = new_conn("mptcp")
            if f["join_token"] is None:
                # A SYN whose MP_JOIN has another form's length (16: the SYN/ACK's) carries no token:
                # damaged or non-conforming, so the subflow stands alone and the user is told.
                c.warnings.append("MP_JOIN on a SYN without a token (malformed option): the subflow "
                                  "cannot be matched to its connection")
            else:
                c.warnings.append(f"MP_JOIN to unknown token {f['join_token']:#010x}: its connection's "
                                  "MP_CAPABLE handshake is not in the capture")
            add_subflow(c, f, join=True, server_initiated=False)
            continue
        c, token_is_server = found
        # A join naming the server's token was opened by the client side, and vice versa.
        add_subflow(c, f, join=True, server_initiated=not token_is_server)
    return conns, subflows, warnings


# How far apart (bytes, mod 2^32) two streams' data sequence numbers may lie and still be one
# connection's, at the least: a subflow joins where the connection's DSNs stand, and every subflow
# carries DATA_ACKs of the whole transfer, so one connection's streams overlap or touch unless much
# data went over subflows the capture does not hold. An unrelated connection's IDSN is random (hash
# of a random key): 1 chance in 128 per space to fall this close.
_DSN_SLACK_BYTES = 16 << 20


@dataclass
class _Span:
    """The 32-bit DSN values one stream shows in one data sequence space, as [lo, hi] with lo taken
    near the first value seen (so a wrap inside the stream does not make the range meaningless)."""

    lo: int
    hi: int


def _spans(df: pl.DataFrame) -> dict[tuple[int, bool], _Span]:
    """(stream, space) -> span. Space True: data sent by the stream's opener (its DSNs, and the
    DATA_ACKs the other side sends for them); False: the other direction."""
    half = 1 << 31
    low32 = pl.col("v").cast(pl.Int128) % _U32
    rows = pl.concat([
        df.filter(pl.col("dss_dsn").is_not_null()).select("stream", "frame", space=pl.col("opener_is_src"),
                                                          v=pl.col("dss_dsn")),
        df.filter(pl.col("dss_data_ack").is_not_null()).select("stream", "frame", space=~pl.col("opener_is_src"),
                                                               v=pl.col("dss_data_ack")),
    ]).with_columns(v=low32.cast(pl.Int64)).sort("frame")
    first = pl.col("v").first()
    off = (pl.col("v") - first + half) % _U32 - half
    agg = rows.group_by("stream", "space").agg(lo=first + off.min(), hi=first + off.max())
    return {(r["stream"], r["space"]): _Span(r["lo"], r["hi"]) for r in agg.iter_rows(named=True)}


def _gap(a: _Span, b: _Span) -> int:
    """Bytes between two spans on the 32-bit circle (0 when they overlap or touch)."""
    half = 1 << 31
    d = (b.lo - a.lo + half) % _U32 - half  # where b starts, from a's start
    return max(0, d - (a.hi - a.lo), -d - (b.hi - b.lo))


def split_by_dsn_space(df: pl.DataFrame) -> tuple[list[list[int]], dict[int, int]]:
    """Streams of a table said to hold one connection (per-subflow CSV exports, whose handshakes and
    keys are absent) in groups that can each be one MPTCP connection by their data sequence numbers.

    Groups, the one with the most data first; and for each stream put apart, its distance in bytes
    from the first group's DSNs. Two streams conflict when, in a data sequence space both show, their
    DSNs and DATA_ACKs lie further apart than any transfer in the table explains (``_DSN_SLACK_BYTES``,
    or twice the bytes the table carries in that space): they cannot share an IDSN. A stream joins the
    first group it conflicts with nowhere; streams without DSS values stay with the first group."""
    streams = df.group_by("stream").agg(data=pl.col("payload_len").sum()).sort(["data", "stream"],
                                                                              descending=[True, False])
    order = [int(s) for s in streams["stream"]]
    if len(order) < 2:
        return [order], {}
    spans = _spans(df)
    carried = df.filter(pl.col("dss_dsn").is_not_null()).group_by("opener_is_src").agg(pl.col("payload_len").sum())
    slack = {bool(r[0]): max(_DSN_SLACK_BYTES, 2 * int(r[1])) for r in carried.iter_rows()}

    def gap(a: int, b: int) -> int:
        """The largest gap between a and b over the spaces both show, where it is beyond the slack."""
        worst = 0
        for space in (True, False):
            sa, sb = spans.get((a, space)), spans.get((b, space))
            if sa is not None and sb is not None:
                g = _gap(sa, sb)
                if g > slack.get(space, _DSN_SLACK_BYTES):
                    worst = max(worst, g)
        return worst

    groups: list[list[int]] = []
    silent = []
    for s in order:
        if not any((s, space) in spans for space in (True, False)):
            silent.append(s)
            continue
        for g in groups:
            if all(gap(s, m) == 0 for m in g):
                g.append(s)
                break
        else:
            groups.append([s])
    if not groups:
        return [sorted(order)], {}
    groups[0] += silent
    apart = {s: max(gap(s, m) for m in groups[0]) for g in groups[1:] for s in g}
    return [sorted(g) for g in groups], apart


def expand_dsn(raw: pl.Expr, is_8: pl.Expr, base: pl.Expr) -> pl.Expr:
    """Relative 64-bit DSN from a raw 4- or 8-byte DSN and the direction's base (IDSN + 1).

    A 4-byte DSN holds the low 32 bits (RFC 8684 §3.3.1); within one connection direction the
    relative value is taken mod 2^32 and unwrapped by the caller where transfers exceed 4 GiB.
    """
    full = ((raw.cast(pl.Int128) - base.cast(pl.Int128)) % _U64).cast(pl.UInt64)
    low = ((raw.cast(pl.Int64) - (base % _U32).cast(pl.Int64)) % _U32).cast(pl.UInt64)
    return pl.when(is_8).then(full).otherwise(low)
