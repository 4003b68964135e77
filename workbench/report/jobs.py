"""Input discovery for batch reports: what the user named on the command line, turned into one
`JobSpec` per input (pure data, picklable, the same for local processes and dask workers).

What an input is:

* a capture (pcap/pcapng, by magic number or suffix), optionally with its peer at the other end:
  ``a.pcap+a-server.pcap``; in a folder, ``client.pcap`` + ``server.pcap`` side by side are one input
  (how ``traces/lab/*/`` is laid out);
* tshark CSV exports, one connection = the list of its per-subflow files (`group_csv_exports`); a
  named export brings its partner files from the same folder, as ``workbench inspect`` does;
* saved timelines (parquet / CSV / JSON written by `workbench.timeline.save_timelines`);
* scenario files (YAML/JSON with a top-level ``paths``, `workbench.timeline.read_scenario`);
* a manifest (YAML/JSON list of ``{capture, peer, paths}``, or ``{inputs: [...]}``), expanded into
  capture inputs, file names relative to the manifest;
* rate CSVs (``t_s,rate_mbps``) and mahimahi traces, only when named (in a folder they usually are
  the provenance of a capture beside them, e.g. ``traces/lab/v05/rate2.csv``, so they are skipped);
* a folder of any of these, searched recursively; files of no known kind are skipped and listed.

A named file that does not exist or is of no known kind becomes a job that fails with that one-line
error, so the batch still reports it; discovery itself only raises for bad usage (a bad manifest line
is reported as that manifest's error row).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from workbench.capture._csvexport import group_csv_exports, is_csv_export

__all__ = ["JobSpec", "Skipped", "discover", "sniff"]

Kind = Literal["capture", "csv", "timelines", "scenario", "rate", "mahimahi", "invalid"]

_PCAP_MAGICS = {b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1",
                b"\x0a\x0d\x0d\x0a"}
_CAPTURE_SUFFIXES = {".pcap", ".pcapng", ".cap", ".dmp"}
_STRUCTURED_SUFFIXES = {".yaml", ".yml", ".json"}
_TIMELINE_CSV_MAGIC = "# workbench-timelines"
_RATE_HEADER = re.compile(r"^\s*t(?:ime)?_?\w*\s*[,\t; ]\s*\w*(?:rate|bps|mbit|kbit|throughput)\w*", re.I)
# A structured file bigger than this is not a scenario or manifest we would want to parse when sniffing.
_MAX_SNIFF_STRUCTURED_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class JobSpec:
    """One input of a report. ``files`` are the data files (for a capture: the capture, then its peer
    when ``peer`` is set); ``error`` is set for inputs discovery already knows are bad."""

    id: str                      # unique, file-name safe (the page is ``<id>.html``)
    label: str                   # what the index shows
    kind: Kind
    files: tuple[str, ...]
    peer: str | None = None
    path_names: tuple[tuple[str, str], ...] = ()
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "kind": self.kind, "files": list(self.files),
                "peer": self.peer, "path_names": dict(self.path_names), "error": self.error}


@dataclass(frozen=True)
class Skipped:
    """A file found in a folder that is not an input, and why."""

    path: str
    reason: str


@dataclass
class _Found:
    specs: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)


def _head(path: Path, n: int = 4096) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def _structured(path: Path) -> Any:
    """A parsed YAML/JSON document, or None when it is not one (or too big to be a small config)."""
    try:
        if path.stat().st_size > _MAX_SNIFF_STRUCTURED_BYTES:
            return None
        text = path.read_text()
        return json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError):
        return None


def _is_manifest(doc: Any) -> bool:
    items = doc.get("inputs") if isinstance(doc, dict) else doc
    return isinstance(items, list) and bool(items) and all(isinstance(i, dict) and "capture" in i for i in items)


def _is_mahimahi(path: Path) -> bool:
    lines = _head(path, 2048).decode("ascii", "replace").split()
    return len(lines) >= 2 and all(x.isdigit() for x in lines[:-1])


def _is_timelines_parquet(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, ValueError):
        return False
    return b"workbench.timelines" in meta


def sniff(path: Path) -> str | None:
    """What kind of input a file is: "capture", "csv", "timelines", "scenario", "manifest", "rate",
    "mahimahi", or None (unknown). Cheap: reads the head of the file (whole file for small YAML/JSON)."""
    head = _head(path)
    suffix = path.suffix.lower()
    if head[:4] in _PCAP_MAGICS or suffix in _CAPTURE_SUFFIXES:
        return "capture"
    if suffix in (".parquet", ".pq"):
        return "timelines" if _is_timelines_parquet(path) else None
    if head.startswith(_TIMELINE_CSV_MAGIC.encode()):
        return "timelines"
    if is_csv_export(path):
        return "csv"
    if suffix in _STRUCTURED_SUFFIXES:
        doc = _structured(path)
        if isinstance(doc, dict) and doc.get("format") == "workbench-timelines":
            return "timelines"
        if isinstance(doc, dict) and "paths" in doc:
            return "scenario"
        if _is_manifest(doc):
            return "manifest"
        return None
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    if suffix in (".csv", ".tsv", ".txt", "") and _RATE_HEADER.match(first):
        return "rate"
    if suffix in (".down", ".up") or (suffix == "" and _is_mahimahi(path)):
        return "mahimahi" if _is_mahimahi(path) else None
    return None


def _norm_path_names(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``{"10.0.2.1": "lte"}`` or ``["10.0.2.1=lte"]`` -> sorted pairs."""
    if raw is None:
        return ()
    if isinstance(raw, dict):
        return tuple(sorted((str(k), str(v)) for k, v in raw.items()))
    if isinstance(raw, list):
        out = []
        for s in raw:
            addr, sep, name = str(s).partition("=")
            if not sep:
                raise ValueError(f"{where}: paths entries are ADDRESS=NAME, got {s!r}")
            out.append((addr.strip(), name.strip()))
        return tuple(sorted(out))
    raise ValueError(f"{where}: paths must be a mapping or a list of ADDRESS=NAME")


def _add(found: _Found, kind: Kind, files: Sequence[Path], label: str, *, peer: Path | None = None,
         path_names: tuple[tuple[str, str], ...] = (), error: str | None = None) -> None:
    key = [p.resolve() for p in files] + ([peer.resolve()] if peer else [])
    if error is None and any(k in found.seen for k in key):
        return  # the same file reached twice (named and inside a named folder): one input
    found.seen.update(key)
    found.specs.append({"kind": kind, "files": [str(p) for p in files] + ([str(peer)] if peer else []),
                        "peer": str(peer) if peer else None, "label": label, "path_names": path_names,
                        "error": error})


def _csv_label(group: Sequence[Path]) -> str:
    """A connection's exports by its first file (the others differ only in the subflow's interface)."""
    more = len(group) - 1
    return str(group[0]) + (f" (+{more} subflow export{'s' if more > 1 else ''})" if more else "")


def _expand_manifest(path: Path, found: _Found, path_names: tuple[tuple[str, str], ...]) -> None:
    doc = _structured(path)
    items = doc.get("inputs") if isinstance(doc, dict) else doc
    for i, item in enumerate(items or []):
        where = f"{path} entry {i + 1}"
        cap = path.parent / str(item["capture"])
        peer = path.parent / str(item["peer"]) if item.get("peer") else None
        try:
            names = _norm_path_names(item.get("paths"), where) or path_names
        except ValueError as e:
            _add(found, "invalid", [cap], str(cap), error=str(e))
            continue
        label = str(cap) + (f" + {peer}" if peer else "")
        missing = [p for p in (cap, peer) if p is not None and not p.is_file()]
        if missing:
            _add(found, "invalid", [cap], label, error=f"{missing[0]}: no such file ({where})")
            continue
        _add(found, "capture", [cap], label, peer=peer, path_names=names)


def _named_file(path: Path, found: _Found, path_names: tuple[tuple[str, str], ...]) -> None:
    kind = sniff(path)
    if kind is None:
        _add(found, "invalid", [path], str(path),
             error=f"{path}: not a capture, CSV export, timelines, scenario, manifest, rate or mahimahi file")
    elif kind == "manifest":
        _expand_manifest(path, found, path_names)
    elif kind == "csv":
        siblings = [p for p in path.parent.iterdir() if p.is_file() and p.suffix == path.suffix]
        group = next((g for g in group_csv_exports(siblings) if path in g), [path])
        group = [p for p in group if p == path or is_csv_export(p)]
        _add(found, "csv", group, _csv_label(group), path_names=path_names)
    else:
        _add(found, kind, [path], str(path), path_names=path_names)  # type: ignore[arg-type]


def _folder(root: Path, found: _Found, path_names: tuple[tuple[str, str], ...], exclude: Sequence[Path]) -> None:
    def excluded(p: Path) -> bool:
        rp = p.resolve()
        return any(rp.is_relative_to(x) for x in exclude)

    files = sorted((p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".") and not excluded(p)),
                   key=lambda p: (str(p.parent), p.name))
    by_dir: dict[Path, list[Path]] = {}
    for p in files:
        by_dir.setdefault(p.parent, []).append(p)
    for d, in_dir in by_dir.items():
        kinds = {p: sniff(p) for p in in_dir}
        caps = {p.stem.lower(): p for p, k in kinds.items() if k == "capture"}
        pair = ("client" in caps and "server" in caps)
        csvs = [p for p, k in kinds.items() if k == "csv"]
        for group in group_csv_exports(csvs):
            _add(found, "csv", group, _csv_label(group), path_names=path_names)
        for p, k in kinds.items():
            if k == "capture":
                if pair and p == caps["server"]:
                    continue
                if pair and p == caps["client"]:
                    _add(found, "capture", [p], str(d), peer=caps["server"], path_names=path_names)
                else:
                    _add(found, "capture", [p], str(p), path_names=path_names)
            elif k in ("timelines", "scenario"):
                _add(found, k, [p], str(p), path_names=path_names)  # type: ignore[arg-type]
            elif k == "manifest":
                _expand_manifest(p, found, path_names)
            elif k in ("rate", "mahimahi"):
                found.skipped.append(Skipped(str(p), f"{k} trace: name it explicitly to replay it as one path"))
            elif k is None:
                found.skipped.append(Skipped(str(p), "not an input kind the report knows"))


def _slug(label: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", label.replace("/", "_")).strip("._")
    # The whole name (a page named after the end of its label, "phant_...", was unreadable); only a
    # name too long for a file system (255 bytes with ".html") is shortened, in the middle.
    s = s or "input"
    if len(s) > 200:
        s = f"{s[:120]}~{hashlib.sha256(s.encode()).hexdigest()[:8]}~{s[-60:]}"
    return s.lstrip("._-") or "input"


def discover(inputs: Iterable[str | Path], *, path_names: dict[str, str] | None = None,
             exclude: Sequence[str | Path] = ()) -> tuple[list[JobSpec], list[Skipped]]:
    """One `JobSpec` per input found in ``inputs`` (files, ``capture+peer`` pairs, folders), in the
    order given (folders: sorted by path), and the folder files that were skipped. Folders under
    ``exclude`` are not searched (the report's own output folder, when it lies inside an input)."""
    excl = [Path(x).resolve() for x in exclude]
    names = tuple(sorted((path_names or {}).items()))
    found = _Found()
    for raw in inputs:
        text = str(raw)
        if "+" in text and not Path(text).exists():
            first, _, second = text.partition("+")
            cap, peer = Path(first), Path(second)
            missing = [p for p in (cap, peer) if not p.is_file()]
            if missing:
                _add(found, "invalid", [cap], text, error=f"{missing[0]}: no such file")
            else:
                _add(found, "capture", [cap], f"{cap} + {peer}", peer=peer, path_names=names)
            continue
        path = Path(text)
        if path.is_dir():
            _folder(path, found, names, excl)
        elif path.is_file():
            _named_file(path, found, names)
        else:
            _add(found, "invalid", [path], text, error=f"{path}: no such file or folder")
    jobs: list[JobSpec] = []
    used: set[str] = set()
    for s in found.specs:
        base = _slug(s["label"])
        slug, n = base, 2
        while slug.lower() in used or slug.lower() in ("index", "assets", "manifest", "metrics"):
            slug, n = f"{base}-{n}", n + 1
        used.add(slug.lower())
        files = s["files"][:-1] if s["peer"] else s["files"]
        jobs.append(JobSpec(id=slug, label=s["label"], kind=s["kind"], files=tuple(files), peer=s["peer"],
                            path_names=s["path_names"], error=s["error"]))
    return jobs, found.skipped
