"""Outages: spans in which a path carried no packet in either direction while data was outstanding.

A path on which nothing arrives for a second while its sender has data in flight is not slow, it is
down (a handover, a tunnel, a radio link failure on a train): its capacity over that span is zero,
not the throughput of the bins around it. What makes a silence an outage rather than an idle path:

- it is long: at least ``min_gap_ns`` (0.8 s: a 1 s outage seen at the receiver may look a little
  shorter, the last packets in flight still arriving after it began) and ``rtt_factor`` round trips,
  so an RTO or two after a loss on a live path does not count;
- data was outstanding across it: the path had carried data before (the handshake's SYN
  retransmissions are not outages), and either the sender's view shows unacknowledged data at its
  start (highest sequence sent beyond the highest acknowledged), or — from the receiver — data
  arrives on the path after it and the connection went on meanwhile (the first segment after it
  repeats data already sent, or other paths delivered data during it).

Not an outage either: a silence in which a sender we can see sent nothing (it was waiting on its own
timer), or one that begins within the threshold after an outage's end (the backed-off retransmission
timer of the recovery).

"Nothing arrives" means no packet received at either end and nothing sent by the data receiver
(which only answers arrivals); the data sender's RTO retransmissions into the void do not break the
silence. The span runs from the last such packet before the silence to the first one after it
(``t_ns`` of the events, absolute).
"""

from __future__ import annotations

import polars as pl

__all__ = ["find_outages"]


def find_outages(conn_events: pl.DataFrame, path: str, data_dir: str, *, rtt_ns: float | None,
                 min_gap_ns: int = 800_000_000, rtt_factor: float = 4.0) -> list[tuple[int, int]]:
    """Outage spans ``(start_ns, end_ns)`` of ``path`` (absolute event time), in order."""
    ev = conn_events
    pev = ev.filter(pl.col("path") == path).sort("t_ns")
    # Silence is judged on what *arrives*: packets received (either direction) and what the data
    # receiver sends (it only answers arrivals). The data sender's own transmissions are not a sign
    # of life: during an outage it keeps retransmitting into the void on its RTO timer.
    alive = pev.filter((pl.col("point") == "rcv") | ((pl.col("dir") != data_dir) & (pl.col("point") == "snd")))
    if alive.height < 2:
        return []
    threshold = max(float(min_gap_ns), rtt_factor * float(rtt_ns or 0))
    t = alive["t_ns"].to_list()
    gaps = [(i, t[i], t[i + 1]) for i in range(len(t) - 1) if t[i + 1] - t[i] >= threshold]
    if not gaps:
        return []
    data = pev.filter((pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
    if data.height == 0:
        return []
    first_data_ns = int(data["t_ns"].min())  # type: ignore[arg-type]
    snd = data.filter(pl.col("point") == "snd")
    acks_rcv = pev.filter((pl.col("dir") != data_dir) & (pl.col("point") == "rcv"))
    other = ev.filter((pl.col("path") != path) & (pl.col("dir") == data_dir) & (pl.col("payload_bytes") > 0))
    end_col = (pl.col("seq").cast(pl.Int64) + pl.col("payload_bytes").cast(pl.Int64))
    out: list[tuple[int, int]] = []
    for _, a, b in gaps:
        if a < first_data_ns:
            continue  # before the path carried data: handshake or join retries, nothing outstanding
        if out and a - out[-1][1] <= threshold:
            # Right after an outage the sender's backed-off retransmission timer can keep the path
            # silent a while longer: that is the outage's aftermath (the replay's TCP backs off the
            # same way), not a second outage of the link.
            continue
        outstanding = False
        if snd.height:
            if snd.filter((pl.col("t_ns") > a) & (pl.col("t_ns") < b)).height == 0:
                continue  # the sender sent nothing into the silence: it was waiting, the link was not down
            # Sender's view: per subflow, anything sent and not yet acknowledged when the silence began.
            sent = (snd.filter(pl.col("t_ns") <= a).group_by("conn", "subflow")
                    .agg(hi=end_col.max(), lo=pl.col("seq").cast(pl.Int64).min()))
            acked = (acks_rcv.filter(pl.col("t_ns") <= a).group_by("conn", "subflow")
                     .agg(ack=pl.col("ack").cast(pl.Int64).max()))
            j = sent.join(acked, on=["conn", "subflow"], how="left").with_columns(pl.col("ack").fill_null(pl.col("lo")))
            outstanding = bool((j["hi"] > j["ack"]).any())
        else:
            after = data.filter(pl.col("t_ns") >= b)
            if after.height:
                first = after.row(0, named=True)
                before = data.filter((pl.col("t_ns") <= a) & (pl.col("conn") == first["conn"])
                                     & (pl.col("subflow") == first["subflow"]))
                hi_before = before.select(end_col.max()).item() if before.height else None
                repeat = bool(first["is_retrans"]) or (hi_before is not None and int(first["seq"]) < int(hi_before))
                others_busy = other.filter((pl.col("t_ns") > a) & (pl.col("t_ns") < b)).height > 0
                outstanding = repeat or others_busy
        if outstanding:
            out.append((int(a), int(b)))
    return out
