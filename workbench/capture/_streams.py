"""TCP streams in a PACKETS table: which packets belong to one TCP connection, who opened it, and
sequence numbers made relative to each direction's initial sequence number.

A stream is a 4-tuple plus a generation: a new pure SYN with a different ISN on the same 4-tuple
starts a new stream (port reuse), a retransmitted SYN does not.
"""

from __future__ import annotations

import polars as pl

from workbench.capture.schema import TCP_FLAGS

__all__ = ["add_stream_columns"]

_SYN = TCP_FLAGS["SYN"]
_ACK = TCP_FLAGS["ACK"]
_U32 = 1 << 32


def _u32_diff(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """(a - b) mod 2^32 for UInt32-valued expressions."""
    return ((a.cast(pl.Int64) - b.cast(pl.Int64)) % _U32).cast(pl.UInt32)


def add_stream_columns(packets: pl.DataFrame) -> pl.DataFrame:
    """Add `stream`, `opener_is_src`, `has_syn`, `rel_seq`, `rel_ack`, `rwnd_bytes` and `is_retrans`.

    `opener_is_src` is True when the packet was sent by the side that sent the pure SYN (or, without a
    handshake in the capture, by the side with the higher port — clients use ephemeral ports).
    """
    df = packets.with_columns(
        ep_src=pl.col("src") + pl.lit("|") + pl.col("sport").cast(pl.String),
        ep_dst=pl.col("dst") + pl.lit("|") + pl.col("dport").cast(pl.String),
        is_pure_syn=((pl.col("flags") & _SYN) != 0) & ((pl.col("flags") & _ACK) == 0),
        is_synack=((pl.col("flags") & _SYN) != 0) & ((pl.col("flags") & _ACK) != 0),
    ).with_columns(
        tuple_key=pl.min_horizontal("ep_src", "ep_dst") + pl.lit("<>") + pl.max_horizontal("ep_src", "ep_dst"),
    )
    # A new generation of a 4-tuple starts at a pure SYN whose ISN differs from the previous pure SYN's.
    syn_seq = pl.when(pl.col("is_pure_syn")).then(pl.col("seq").cast(pl.Int64))
    df = df.with_columns(
        prev_syn_seq=syn_seq.forward_fill().shift(1).over("tuple_key", order_by="frame"),
    ).with_columns(
        new_gen=pl.col("is_pure_syn") & (pl.col("prev_syn_seq").is_null()
                                         | (pl.col("prev_syn_seq") != pl.col("seq").cast(pl.Int64))),
    ).with_columns(
        gen=pl.col("new_gen").cast(pl.UInt32).cum_sum().over("tuple_key", order_by="frame"),
    )
    first_frame = pl.col("frame").min().over("tuple_key", "gen")
    df = df.with_columns(stream=first_frame.rank("dense").cast(pl.UInt32) - 1)

    # Who opened the stream: the sender of the pure SYN, else the receiver of the SYN/ACK, else the
    # endpoint with the higher port (ephemeral ports are high; a guess, reported as a warning upstream).
    opener = (
        pl.when(pl.col("is_pure_syn")).then(pl.col("ep_src"))
        .when(pl.col("is_synack")).then(pl.col("ep_dst"))
        .otherwise(None)
    )
    port_guess = pl.when(pl.col("sport") > pl.col("dport")).then(pl.col("ep_src")).otherwise(pl.col("ep_dst"))
    df = df.with_columns(
        opener_ep=opener.drop_nulls().first().over("stream"),
        has_syn=(pl.col("is_pure_syn") | pl.col("is_synack")).any().over("stream"),
    ).with_columns(
        opener_ep=pl.coalesce("opener_ep", port_guess.first().over("stream")),
    ).with_columns(opener_is_src=pl.col("ep_src") == pl.col("opener_ep"))

    # ISN per direction: the SYN's sequence number; without a SYN, one before the first seen byte, so
    # that the first byte seen is relative 1 as if a SYN had preceded it.
    syn_in_dir = (pl.col("flags") & _SYN) != 0
    isn = pl.coalesce(
        pl.when(syn_in_dir).then(pl.col("seq")).drop_nulls().first(),
        (pl.col("seq").cast(pl.Int64).first() - 1) % _U32,
    )
    df = df.with_columns(isn=isn.over("stream", "opener_is_src", order_by="frame").cast(pl.UInt32))
    other_isn = (
        df.group_by("stream", "opener_is_src")
        .agg(other_isn=pl.col("isn").first())
        .with_columns(opener_is_src=~pl.col("opener_is_src"))
    )
    df = df.join(other_isn, on=["stream", "opener_is_src"], how="left")
    has_ack = (pl.col("flags") & _ACK) != 0
    df = df.with_columns(
        rel_seq=_u32_diff(pl.col("seq"), pl.col("isn")),
        rel_ack=pl.when(has_ack & pl.col("other_isn").is_not_null())
        .then(_u32_diff(pl.col("ack"), pl.col("other_isn")))
        .otherwise(pl.lit(0, pl.UInt32)),
    )

    # Window scaling applies only when both SYN and SYN/ACK carried the option (RFC 7323 §2.2), and
    # never to the SYN segments themselves.
    ws = pl.when(syn_in_dir).then(pl.col("opt_wscale")).drop_nulls().first()
    df = df.with_columns(ws_dir=ws.over("stream", "opener_is_src"))
    df = df.with_columns(ws_both=pl.col("ws_dir").is_not_null().all().over("stream")
                         & (pl.col("opener_is_src").n_unique().over("stream") == 2))
    shift = pl.when(pl.col("ws_both") & ~syn_in_dir).then(pl.col("ws_dir").cast(pl.UInt64)).otherwise(0)
    df = df.with_columns(
        rwnd_bytes=(pl.col("win").cast(pl.UInt64) * (pl.lit(2, pl.UInt64).pow(shift))).cast(pl.UInt64),
    )

    # A retransmission starts below the highest sequence end already seen in its direction. At a
    # receiver that includes a packet filling a hole left by a loss, which is what a retransmission is.
    seq_end = pl.col("rel_seq").cast(pl.Int64) + pl.col("payload_len").cast(pl.Int64)
    prev_max_end = pl.when(pl.col("payload_len") > 0).then(seq_end).cum_max().shift(1)
    df = df.with_columns(
        prev_max_end=prev_max_end.over("stream", "opener_is_src", order_by="frame"),
    ).with_columns(
        is_retrans=(pl.col("payload_len") > 0)
        & pl.col("prev_max_end").is_not_null()
        & (pl.col("rel_seq").cast(pl.Int64) < pl.col("prev_max_end")),
    )
    return df.drop("prev_syn_seq", "new_gen", "gen", "prev_max_end", "other_isn", "ws_dir", "ws_both")
