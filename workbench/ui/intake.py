"""What a set of uploaded files is: one capture, a capture and its peer, or one connection's CSV
exports; and what is left out.

The capture uploader takes several files (CSV exports come one file per subflow), so dropping a second
file adds it to the list rather than replacing the first. Loading every listed file as one input would
merge unrelated sessions into one fake connection, so the list is read here first:

* CSV exports are partners only when their names carry the same connection-start token (the
  measurement studies' ``client.<start>.…`` naming, `group_csv_exports`); the group holding the newest
  file is used;
* two pcaps are the two ends of one session only when they share an MPTCP key (plain TCP: a
  connection's endpoints); then the newer one is the peer; otherwise the newest capture replaces the
  older ones.

Every decision comes back as one line (`Intake.note`) the page shows next to the uploader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Intake", "plan_upload", "same_session"]


@dataclass(frozen=True)
class Intake:
    """The files to load (``files``: one pcap or one connection's CSV exports), the peer capture, the
    files left out, and the line that says so (empty when the upload is what it looks like)."""

    files: tuple[str, ...]
    peer: str | None
    unused: tuple[str, ...]
    note: str


def _is_csv(path: str) -> bool:
    return path.lower().endswith(".csv")


def _session_ids(path: str) -> set[tuple[object, ...]]:
    """MPTCP keys seen in a capture, or (without any) the endpoint pairs of its TCP connections."""
    import polars as pl

    from workbench.capture import read_packets

    pk = read_packets(path).packets
    keys = pk["mp_sender_key"].drop_nulls().unique().to_list()
    if keys:
        return {("key", int(k)) for k in keys}
    a = pl.col("src") + ":" + pl.col("sport").cast(pl.String)
    b = pl.col("dst") + ":" + pl.col("dport").cast(pl.String)
    pairs = pk.select(lo=pl.min_horizontal(a, b), hi=pl.max_horizontal(a, b)).unique()
    return {("eps", lo, hi) for lo, hi in pairs.iter_rows()}


def same_session(a: str, b: str) -> bool:
    """Whether two captures hold the same session (a capture and its peer): a shared MPTCP key, or
    for plain TCP a shared connection (endpoint pair)."""
    ids_a, ids_b = _session_ids(a), _session_ids(b)
    kinds_a, kinds_b = {i[0] for i in ids_a}, {i[0] for i in ids_b}
    if kinds_a != kinds_b:
        return False
    return bool(ids_a & ids_b)


def plan_upload(files: Sequence[str], names: dict[str, str], peer: str | None = None) -> Intake:
    """Decide what the uploaded ``files`` (in upload order, newest last) are; ``names`` maps each
    stored path to the name the user uploaded it under; ``peer`` is a capture given as the peer."""
    from workbench.capture._csvexport import group_csv_exports

    files = list(files)
    if not files:
        return Intake((), peer, (), "")
    newest = files[-1]
    def shown(fs: Sequence[str]) -> str:
        # Name and size: two uploads are often both called client.pcap.
        return ", ".join(f"{names.get(f, Path(f).name)} ({Path(f).stat().st_size / 1e6:.1f} MB)" for f in fs)

    if _is_csv(newest):
        csvs = [f for f in files if _is_csv(f)]
        # Group by the uploaded names (the stored ones are content hashes), then map back.
        by_name = {names.get(f, Path(f).name): f for f in csvs}
        groups = group_csv_exports([Path(n) for n in by_name])
        mine = next(g for g in groups if names.get(newest, Path(newest).name) in {p.name for p in g})
        used = tuple(by_name[p.name] for p in mine)
        unused = tuple(f for f in files if f not in used)
        parts = []
        if len(used) > 1:
            parts.append(f"{len(used)} CSV exports of one connection (partners by name): {shown(used)}")
        if unused:
            parts.append(f"not used (another connection or capture; one input is analysed at a time): "
                         f"{shown(unused)}")
        if peer is not None:
            parts.append("the peer capture is not used with CSV exports")
        return Intake(used, None, unused, "; ".join(parts))
    caps = [f for f in files if not _is_csv(f)]
    older = [f for f in caps if f != newest]
    if peer is not None or not older:
        unused = tuple(f for f in files if f != newest)
        note = (f"{shown([newest])} replaces {shown(unused)} (one capture is analysed at a time)" if unused else "")
        return Intake((newest,), peer, unused, note)
    partner = older[-1]
    if same_session(partner, newest):
        unused = tuple(f for f in files if f not in (partner, newest))
        note = (f"{shown([partner])} and {shown([newest])} are the two ends of one session: "
                f"{shown([newest])} is used as the peer capture")
        if unused:
            note += f"; not used: {shown(unused)}"
        return Intake((partner,), newest, unused, note)
    unused = tuple(f for f in files if f != newest)
    return Intake((newest,), None, unused,
                  f"the newest upload {shown([newest])} replaces {shown(unused)}: a different session, not its "
                  "peer (one capture is analysed at a time)")
