"""The public way in: one capture (optionally its peer at the other end), or one connection's
per-subflow CSV exports, loaded into PacketEvents with connection and subflow tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from workbench.capture._analysis_cache import analysis_key, read_analysis, write_analysis
from workbench.capture._analyze import Analysis, analyze
from workbench.capture._memory import check_fits
from workbench.capture._pair import merge_pair
from workbench.capture._read import content_hash, read_packets
from workbench.capture.schema import PACKETS
from workbench.errors import InputError

__all__ = ["Capture", "load", "parse_path_names"]


@dataclass
class Capture:
    """A loaded capture: PacketEvents plus connection and subflow tables and what to warn about."""

    source: str
    events: pl.DataFrame
    connections: pl.DataFrame
    subflows: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    reader: str = "native"
    content_hashes: list[str] = field(default_factory=list)
    peer: str | None = None

    def connection(self, conn: int) -> pl.DataFrame:
        """The events of one connection."""
        if conn not in self.connections["conn"].to_list():
            raise InputError(self.source, f"no connection {conn} (it has {self.connections.height})")
        return self.events.filter(pl.col("conn") == conn)

    @property
    def main_connection(self) -> int:
        """The MPTCP connection that carried the most data (else the busiest TCP connection)."""
        if self.connections.is_empty():
            raise InputError(self.source, "no TCP connection in the capture")
        # Ties go to the lowest conn: a polars sort keeps no order among equal keys unless told.
        ranked = self.connections.sort(["is_mptcp", "bytes", "conn"], descending=[True, True, False])
        return int(ranked["conn"][0])


def parse_path_names(specs: Sequence[str]) -> dict[str, str]:
    """`["10.0.2.1=lte", ...]` -> {"10.0.2.1": "lte"}."""
    out = {}
    for spec in specs:
        addr, sep, name = spec.partition("=")
        if not sep or not addr.strip() or not name.strip():
            raise InputError(None, f"--path wants ADDRESS=NAME, got {spec!r}")
        out[addr.strip()] = name.strip()
    return out


def _read_one(path: Path, reader: str, use_cache: bool, digests: Mapping[Path, str]
              ) -> tuple[pl.DataFrame, str, str, list[str]]:
    r = read_packets(path, reader=reader, use_cache=use_cache, digest=digests.get(path))
    if r.packets.is_empty():
        raise InputError(path, "no TCP packets in the capture")
    return r.packets, r.reader, r.content_hash, [f"{path.name}: {n}" for n in r.notes]


def _read_csv_group(paths: Sequence[Path], use_cache: bool, digests: Mapping[Path, str]
                    ) -> tuple[pl.DataFrame, list[str]]:
    """Per-subflow CSV exports of one connection: one table, frames renumbered in time order."""
    tables, hashes = [], []
    for i, p in enumerate(paths):
        r = read_packets(p, use_cache=use_cache, digest=digests.get(p))
        tables.append(r.packets.with_columns(file_index=pl.lit(i)))
        hashes.append(r.content_hash)
    both = pl.concat(tables).sort("t_ns", "file_index", "frame")
    both = both.with_columns(frame=pl.int_range(1, both.height + 1, dtype=pl.UInt32))
    return both.drop("file_index").select(list(PACKETS)), hashes


def load(
    source: str | Path | Sequence[str | Path],
    *,
    peer: str | Path | None = None,
    path_names: dict[str, str] | None = None,
    reader: str = "auto",
    use_cache: bool = True,
    digests: Mapping[Path, str] | None = None,
) -> Capture:
    """Load a capture (pcap/pcapng, or a list of one connection's per-subflow tshark CSV exports),
    optionally with `peer`, a capture of the same session taken at the other end. ``digests``: the
    files' `content_hash` where the caller has it already (a report's manifest), else each is read."""
    path_names = path_names or {}
    # Refused before anything is read when the machine could not hold the analysis.
    inputs = [Path(source)] if isinstance(source, (str, Path)) else [Path(p) for p in source]
    files = inputs + ([Path(peer)] if peer is not None else [])
    check_fits(files)
    # Looked at before (`_analysis_cache`); files that are not there are left to the reader's errors.
    key, hashes = None, {}
    if use_cache and inputs and all(p.is_file() for p in files):
        given = digests or {}
        hashes = {p: given.get(p) or content_hash(p) for p in files}  # the key's, and the parse cache's on a miss
        key = analysis_key(inputs, peer=None if peer is None else Path(peer), path_names=path_names, reader=reader,
                           one_connection=not isinstance(source, (str, Path)), digests=hashes)
        hit = read_analysis(key)
        if hit is not None:
            return hit
    capture = _analyzed(source, peer, path_names, reader, use_cache, hashes)
    if key is not None:
        write_analysis(key, capture)
    return capture


def _analyzed(source: str | Path | Sequence[str | Path], peer: str | Path | None, path_names: dict[str, str],
              reader: str, use_cache: bool, digests: Mapping[Path, str]) -> Capture:
    if isinstance(source, (str, Path)):
        src_path = Path(source)
        packets, used, digest, notes = _read_one(src_path, reader, use_cache, digests)
        hashes = [digest]
        analysis = analyze(packets, path_names=path_names)
        name = str(src_path)
    else:
        paths = [Path(p) for p in source]
        if not paths:
            raise InputError(None, "no input files")
        packets, hashes = _read_csv_group(paths, use_cache, digests)
        used, notes = "csv", []
        # The streams of the files are subflows of one connection (the files say so, not the keys),
        # except a stream whose data sequence numbers are another connection's (`split_by_dsn_space`).
        analysis = analyze(packets, path_names=path_names, one_connection=True)
        name = " + ".join(str(p) for p in paths)
    warnings = notes + analysis.warnings
    events = analysis.events
    peer_name = None
    if peer is not None:
        peer_path = Path(peer)
        p_packets, _, p_digest, p_notes = _read_one(peer_path, reader, use_cache, digests)
        hashes.append(p_digest)
        peer_analysis = analyze(p_packets, path_names=path_names)
        events, pair_warnings = merge_pair(analysis, peer_analysis, first_name=name, second_name=str(peer_path))
        warnings += p_notes + pair_warnings
        peer_name = str(peer_path)
    connections, subflows = _tables(analysis)
    return Capture(source=name, events=events, connections=connections, subflows=subflows, warnings=warnings,
                   reader=used, content_hashes=hashes, peer=peer_name)


def _tables(analysis: Analysis) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Connection and subflow summary tables (counts, bytes, duration; metrics add the rest)."""
    conn_rows = []
    for c in analysis.connections:
        conn_rows.append({
            "conn": c.conn, "kind": c.kind, "is_mptcp": c.kind == "mptcp", "version": c.version,
            "vantage": analysis.vantage.get(c.conn, "client"),
            "client_key": c.client_key, "server_key": c.server_key,
            "client_token": c.client_token, "server_token": c.server_token,
        })
    conns = pl.DataFrame(conn_rows, schema={
        "conn": pl.UInt32, "kind": pl.String, "is_mptcp": pl.Boolean, "version": pl.UInt8, "vantage": pl.String,
        "client_key": pl.UInt64, "server_key": pl.UInt64, "client_token": pl.UInt32, "server_token": pl.UInt32})
    sf_rows = [{"conn": sf.conn, "subflow": sf.index, "client": sf.client_ep.replace("|", ":"),
                "server": sf.server_ep.replace("|", ":"), "join": sf.join, "server_initiated": sf.server_initiated,
                "fallback": sf.fallback, "handshake": sf.has_handshake} for sf in analysis.subflows.values()]
    sfs = pl.DataFrame(sf_rows, schema={"conn": pl.UInt32, "subflow": pl.UInt32, "client": pl.String,
                                        "server": pl.String, "join": pl.Boolean, "server_initiated": pl.Boolean,
                                        "fallback": pl.Boolean, "handshake": pl.Boolean})
    # Counted on the first capture alone: in a pair the peer's rows repeat the same packets.
    per_sf = analysis.events.group_by("conn", "subflow").agg(
        path=pl.col("path").first(),
        packets=pl.len(),
        bytes=pl.col("payload_bytes").sum(),
        bytes_s2c=pl.col("payload_bytes").filter(pl.col("dir") == "s2c").sum(),
        bytes_c2s=pl.col("payload_bytes").filter(pl.col("dir") == "c2s").sum(),
        start_ns=pl.col("t_ns").min(), end_ns=pl.col("t_ns").max(),
    )
    sfs = sfs.join(per_sf, on=["conn", "subflow"], how="left").with_columns(
        duration_s=(pl.col("end_ns") - pl.col("start_ns")) / 1e9,
    ).sort("conn", "subflow")
    per_conn = sfs.group_by("conn").agg(
        subflows=pl.len(), packets=pl.col("packets").sum(), bytes=pl.col("bytes").sum(),
        bytes_s2c=pl.col("bytes_s2c").sum(), bytes_c2s=pl.col("bytes_c2s").sum(),
        start_ns=pl.col("start_ns").min(), end_ns=pl.col("end_ns").max(),
    )
    conns = conns.join(per_conn, on="conn", how="left").with_columns(
        duration_s=(pl.col("end_ns") - pl.col("start_ns")) / 1e9,
        data_dir=pl.when(pl.col("bytes_s2c") >= pl.col("bytes_c2s")).then(pl.lit("s2c")).otherwise(pl.lit("c2s")),
    ).sort("conn")
    return conns, sfs
