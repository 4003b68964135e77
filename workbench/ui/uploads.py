"""Uploaded files on disk: a private temporary folder per browser session.

The library reads files by path, so uploads must be written somewhere. They go to a folder made by
`tempfile.mkdtemp` (mode 0700, readable by this user only) under names chosen here
(``capture0-<sha256 prefix>.pcap``, ``peer-<...>.pcapng``): the name the browser sent is only ever shown, never used
as a path, so it cannot escape the folder or collide. A new upload replaces the previous one (its
files are removed), and the folder goes when the session's store is garbage-collected or the
process exits (best effort: a killed process leaves it to the OS's temp cleaner).

No streamlit here: the page hands in ``(name, bytes or file object)`` pairs, so tests drive the same
code the uploader does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from workbench.errors import InputError

__all__ = ["DEFAULT_MAX_UPLOAD_MB", "UploadStore", "UploadedSet", "max_upload_bytes"]

DEFAULT_MAX_UPLOAD_MB = 1024
_CHUNK = 1 << 22
# File magics of what the capture readers take; anything else keeps a neutral suffix and the reader
# says what is wrong with it.
_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ".pcap", b"\xa1\xb2\xc3\xd4": ".pcap", b"\x4d\x3c\xb2\xa1": ".pcap",
    b"\xa1\xb2\x3c\x4d": ".pcap", b"\x0a\x0d\x0d\x0a": ".pcapng",
}

Payload = bytes | bytearray | memoryview | BinaryIO


def max_upload_bytes(env: dict[str, str] | None = None, streamlit_mb: int | None = None) -> int:
    """The upload limit in bytes: ``WORKBENCH_MAX_UPLOAD_MB`` (set by ``workbench ui``), else
    streamlit's ``server.maxUploadSize`` when given, else 1 GB."""
    raw = (env if env is not None else os.environ).get("WORKBENCH_MAX_UPLOAD_MB")
    mb = DEFAULT_MAX_UPLOAD_MB
    if raw:
        try:
            mb = int(raw)
        except ValueError:
            raise InputError(None, f"WORKBENCH_MAX_UPLOAD_MB must be a whole number of MB, not {raw!r}") from None
    elif streamlit_mb:
        mb = int(streamlit_mb)
    if mb <= 0:
        raise InputError(None, "the upload limit must be > 0 MB")
    return mb * 1024 * 1024


@dataclass(frozen=True)
class UploadedSet:
    """One upload as stored: the capture file(s), the optional peer, what the user called them and a
    key over their contents (sha256), so equal uploads share cached work."""

    files: tuple[str, ...]
    peer: str | None
    names: dict[str, str] = field(hash=False, compare=False)   # stored path -> uploaded name
    key: str = ""

    @property
    def label(self) -> str:
        caps = [self.names[f] for f in self.files]
        text = " + ".join(caps)
        return text + (f"  (peer {self.names[self.peer]})" if self.peer else "")


def _size_of(data: Payload) -> int | None:
    if isinstance(data, bytes | bytearray | memoryview):
        return len(data)
    size = getattr(data, "size", None)
    if isinstance(size, int):
        return size
    try:
        pos = data.tell()
        end = data.seek(0, os.SEEK_END)
        data.seek(pos)
        return int(end - pos)
    except (OSError, AttributeError, ValueError):
        return None


def _chunks(data: Payload) -> list[bytes] | BinaryIO:
    if isinstance(data, bytes | bytearray | memoryview):
        mv = memoryview(data)
        return [bytes(mv[i:i + _CHUNK]) for i in range(0, len(mv), _CHUNK)] or [b""]
    if hasattr(data, "seek"):
        data.seek(0)
    return data


class UploadStore:
    """A private folder for one session's uploads; see the module docstring."""

    def __init__(self, max_bytes: int, parent: str | None = None) -> None:
        self.max_bytes = max_bytes
        self.root = Path(tempfile.mkdtemp(prefix="workbench-ui-", dir=parent))
        os.chmod(self.root, 0o700)   # mkdtemp already does; said again because the contract relies on it
        self._current: UploadedSet | None = None
        # Removal when the session (which holds the store) goes away, or at interpreter exit.
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.root), True)

    @property
    def current(self) -> UploadedSet | None:
        return self._current

    def scratch(self, name: str) -> Path:
        """A path inside the private folder for derived files (saved timelines, tuning studies)."""
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            raise ValueError(f"not a plain file name: {name!r}")
        return self.root / name

    def _write(self, data: Payload, stem: str, shown: str) -> tuple[Path, str]:
        size = _size_of(data)
        if size is not None and size > self.max_bytes:
            raise InputError(shown, f"{size / 1e6:.1f} MB is over the upload limit of {self.max_bytes / 1e6:.0f} MB")
        tmp = self.root / f".{stem}.part"
        h = hashlib.sha256()
        written = 0
        head = b""
        with open(tmp, "wb", opener=lambda p, f: os.open(p, f, 0o600)) as out:
            src = _chunks(data)
            it = iter(src) if isinstance(src, list) else iter(lambda: src.read(_CHUNK), b"")
            for chunk in it:
                if not chunk:
                    continue
                written += len(chunk)
                if written > self.max_bytes:
                    out.close()
                    tmp.unlink(missing_ok=True)
                    raise InputError(shown, f"over the upload limit of {self.max_bytes / 1e6:.0f} MB")
                if len(head) < 4:
                    head += chunk[: 4 - len(head)]
                h.update(chunk)
                out.write(chunk)
        if written == 0:
            tmp.unlink(missing_ok=True)
            raise InputError(shown, "empty file")
        suffix = _MAGICS.get(head[:4]) or (".csv" if shown.lower().endswith(".csv") else ".bin")
        # Named by role and content: the same bytes get the same name in every session, so messages
        # of cached work (which name the file) read the same and map back to the uploaded name.
        digest = h.hexdigest()
        final = self.root / f"{stem}-{digest[:12]}{suffix}"
        tmp.replace(final)
        return final, digest

    def accept(self, captures: Sequence[tuple[str, Payload]], peer: tuple[str, Payload] | None = None
               ) -> UploadedSet:
        """Store one upload (replacing the previous one) and return it. ``captures`` is one pcap/pcapng
        or several CSV exports of one connection; ``peer`` the capture from the other end."""
        if not captures:
            raise InputError(None, "no file uploaded")
        if peer is not None and len(captures) > 1:
            raise InputError(None, "a peer capture goes with one capture, not with several CSV exports")
        written: list[Path] = []
        names: dict[str, str] = {}
        digests: list[str] = []
        try:
            for i, (name, data) in enumerate(captures):
                p, d = self._write(data, f"capture{i}", _display(name))
                written.append(p)
                names[str(p)] = _display(name)
                digests.append(d)
            peer_path = None
            if peer is not None:
                p, d = self._write(peer[1], "peer", _display(peer[0]))
                written.append(p)
                peer_path = str(p)
                names[peer_path] = _display(peer[0])
                digests.append("peer:" + d)
        except BaseException:
            current = set(self._current.names) if self._current is not None else set()
            for p in written:
                if str(p) not in current:
                    p.unlink(missing_ok=True)
            raise
        files = tuple(str(p) for p in written if str(p) != peer_path)
        key = hashlib.sha256("\n".join(digests).encode()).hexdigest()
        new = UploadedSet(files=files, peer=peer_path, names=names, key=key)
        self._drop(self._current, keep=new)
        self._current = new
        return new

    def _drop(self, old: UploadedSet | None, keep: UploadedSet | None = None) -> None:
        if old is None:
            return
        kept = set(keep.names) if keep is not None else set()
        for f in [*old.files, *([old.peer] if old.peer else [])]:
            if f not in kept:
                Path(f).unlink(missing_ok=True)

    def clear(self) -> None:
        """Forget and remove the current upload."""
        self._drop(self._current)
        self._current = None

    def close(self) -> None:
        """Remove the whole folder now."""
        self._current = None
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive


def _display(name: str) -> str:
    """The uploaded name for messages: its last component, printable, at most 120 characters."""
    base = str(name).replace("\\", "/").rsplit("/", 1)[-1]
    clean = "".join(c if c.isprintable() else "?" for c in base).strip() or "upload"
    return clean[:120]
