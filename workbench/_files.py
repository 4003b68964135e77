"""Writing files so that nobody ever sees half of one: write beside the target, then rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(target: str | Path, data: bytes | str) -> Path:
    """Write `data` to `target` atomically (same-folder temporary file + rename), with the permissions
    a normal write would give (mkstemp's are private)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
