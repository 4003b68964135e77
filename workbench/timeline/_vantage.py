"""What one capture can and cannot see: delay without TCP timestamps, and bytes carried elsewhere.

Delay without timestamps (a receiver-side capture, or a CSV export without the TS columns):

- handshake RTT: at the client, SYN sent -> SYN/ACK received (the last SYN before the SYN/ACK, so a
  retransmitted SYN does not count its timeout); at the server, SYN/ACK sent -> the ACK of it. On
  cellular paths it includes the radio's wake-up (on the high-speed-rail exports 340-450 ms where the
  path's RTT was 30-110 ms), so the first exchange after it is timed too: the client's first packet
  after the SYN/ACK -> the server's first data segment (one RTT plus the server's reaction). Both
  are upper bounds of the RTT; the smaller one is taken, per subflow, then per path.
- ACK clock at the receiver: TCP sends in flights — every segment of flight k+1 is released by an
  ACK of flight k. The first ACK the receiver sends after flight k's first segment arrived triggers
  flight k+1 at the sender, so (first arrival of flight k+1) - (that ACK) is one RTT plus the sender's
  reaction. Flights are told apart by a silence of at least ``flight_gap_fraction`` of the handshake
  RTT and ``flight_gap_factor`` times the typical inter-arrival time, and only slow start's first
  ``max_flights`` flights before any repeated segment count (later the flights run into each other).

Missing subflows: the DATA_ACKs the client sent (or the DSNs it received) span the connection's data
sequence space; when they reach further than the payload carried by the subflows in the capture, the
rest went over subflows that are not in it (a CSV export with one partner file missing, a capture on
one interface only).
"""

from __future__ import annotations

import numpy as np
import polars as pl

__all__ = ["ack_clock_rtt_samples", "handshake_rtt_ns", "missing_subflow_bytes"]

_SYN, _ACK = 0x002, 0x010


def handshake_rtt_ns(conn_events: pl.DataFrame) -> dict[str, int]:
    """Per path, the smallest handshake RTT of its subflows (ns); paths without one are absent."""
    ev = conn_events.sort("t_ns")
    syn = (pl.col("flags").cast(pl.Int64) & _SYN) != 0
    ack = (pl.col("flags").cast(pl.Int64) & _ACK) != 0
    out: dict[str, int] = {}
    for (path, _conn, _sf), g in ev.group_by("path", "conn", "subflow", maintain_order=True):
        samples: list[int] = []
        syns = g.filter(syn & ~ack & (pl.col("dir") == "c2s") & (pl.col("point") == "snd"))["t_ns"].to_list()
        synacks_rcv = g.filter(syn & ack & (pl.col("dir") == "s2c") & (pl.col("point") == "rcv"))["t_ns"].to_list()
        if syns and synacks_rcv:
            sa = synacks_rcv[0]
            before = [t for t in syns if t <= sa]
            if before:
                samples.append(sa - before[-1])
            # First exchange after the handshake: the client's first packet after the SYN/ACK (the
            # ACK that completes it, or the request) -> the first data segment from the server. The
            # server cannot send before it has that ACK (MP_JOIN: its HMAC), so this is one RTT plus
            # the server's reaction — and, unlike the handshake, after a cellular radio has woken up
            # (the handshake of an idle radio can take 4x the path's RTT).
            first_c2s = g.filter(~syn & (pl.col("dir") == "c2s") & (pl.col("point") == "snd")
                                 & (pl.col("t_ns") >= sa))["t_ns"]
            if first_c2s.len():
                t_c = int(first_c2s[0])
                data = g.filter((pl.col("dir") == "s2c") & (pl.col("point") == "rcv") & (pl.col("payload_bytes") > 0)
                                & (pl.col("t_ns") > t_c))["t_ns"]
                if data.len():
                    samples.append(int(data[0]) - t_c)
        synacks_snd = g.filter(syn & ack & (pl.col("dir") == "s2c") & (pl.col("point") == "snd"))["t_ns"].to_list()
        if synacks_snd:
            sa = synacks_snd[-1]
            acks = g.filter(~syn & ack & (pl.col("dir") == "c2s") & (pl.col("point") == "rcv")
                            & (pl.col("t_ns") >= sa))["t_ns"]
            if acks.len():
                samples.append(int(acks[0]) - sa)
        samples = [s for s in samples if s > 0]
        if samples:
            p = str(path)
            out[p] = min(out.get(p, min(samples)), min(samples))
    return out


def ack_clock_rtt_samples(path_events: pl.DataFrame, data_dir: str, *, handshake_ns: int | None,
                          flight_gap_fraction: float = 0.25, flight_gap_factor: float = 8.0,
                          max_flights: int = 6) -> pl.DataFrame:
    """``t_ns, rtt_ns`` from the flight structure seen at the receiver (see the module docstring)."""
    empty = pl.DataFrame(schema={"t_ns": pl.Int64(), "rtt_ns": pl.Int64()})
    ack_dir = "c2s" if data_dir == "s2c" else "s2c"
    data = path_events.filter((pl.col("dir") == data_dir) & (pl.col("point") == "rcv")
                              & (pl.col("payload_bytes") > 0)).sort("t_ns")
    acks = path_events.filter((pl.col("dir") == ack_dir) & (pl.col("point") == "snd")).sort("t_ns")
    if data.height < 4 or acks.height == 0:
        return empty
    # Slow start only: there flights are clean (each a burst, then silence until its ACKs return);
    # after the first loss (a repeated segment) or past ``max_flights`` they run into each other.
    repeat = data["is_retrans"].fill_null(False).to_numpy()
    if repeat.any():
        data = data.head(int(np.argmax(repeat)))
    t = data["t_ns"].to_numpy()
    if t.size < 4:
        return empty
    gaps = np.diff(t)
    typical = float(np.median(gaps)) if gaps.size else 0.0
    threshold = max(flight_gap_factor * typical, flight_gap_fraction * float(handshake_ns or 0), 1e6)
    starts = np.concatenate([[0], np.nonzero(gaps >= threshold)[0] + 1])[:max_flights + 1]
    ta = acks["t_ns"].to_numpy()
    t_out: list[int] = []
    r_out: list[int] = []
    for k in range(len(starts) - 1):
        f_k, f_next = t[starts[k]], t[starts[k + 1]]
        i = int(np.searchsorted(ta, f_k, side="left"))
        if i < ta.size and ta[i] < f_next:
            t_out.append(int(f_next))
            r_out.append(int(f_next - ta[i]))
    if not t_out:
        return empty
    return pl.DataFrame({"t_ns": t_out, "rtt_ns": r_out}, schema={"t_ns": pl.Int64(), "rtt_ns": pl.Int64()})


def missing_subflow_bytes(conn_events: pl.DataFrame, data_dir: str) -> int:
    """Bytes of the connection's data sequence space beyond what its captured subflows carried
    (0 when nothing is missing or the capture has no DSS information)."""
    ack_dir = "c2s" if data_dir == "s2c" else "s2c"
    data = conn_events.filter((pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
    if data.height == 0:
        return 0
    dsn = data.filter(pl.col("dsn").is_not_null())
    if dsn.height == 0:
        return 0
    # Subflows in one data sequence space: the busiest subflow's, +-1 GiB (a stray subflow of another
    # connection grouped with this one, e.g. the tail of the previous download, is left out).
    per = (dsn.group_by("subflow").agg(lo=pl.col("dsn").cast(pl.Int64).min(),
                                       hi=(pl.col("dsn").cast(pl.Int64) + pl.col("payload_bytes")).max(),
                                       n=pl.col("payload_bytes").sum())
           .sort(["n", "subflow"], descending=[True, False]))  # ties: the lowest subflow (group order is random)
    ref_lo, ref_hi = int(per["lo"][0]), int(per["hi"][0])
    per = per.filter((pl.col("lo") >= ref_lo - (1 << 30)) & (pl.col("hi") <= ref_hi + (1 << 30)))
    carrying = per.select("subflow")
    data = data.join(carrying, on="subflow")
    carried = int(data.unique(["subflow", "seq"])["payload_bytes"].cast(pl.Int64).sum())
    low = int(per["lo"].min())  # type: ignore[arg-type]
    high = int(per["hi"].max())  # type: ignore[arg-type]
    # DATA_ACKs only from those subflows, and only within this connection's sequence space.
    dack = (conn_events.filter((pl.col("dir") == ack_dir) & pl.col("data_ack").is_not_null())
            .join(carrying, on="subflow")["data_ack"].cast(pl.Int64))
    dack = dack.filter((dack >= low) & (dack <= low + (1 << 31)))
    if dack.len():
        high = max(high, int(dack.max()))  # type: ignore[arg-type]
    span = high - low
    if span <= 0:
        return 0
    # Data sequence space counts one byte for the DATA_FIN; allow a little slack.
    missing = span - carried
    return missing if missing > max(4096, 0.02 * span) else 0
