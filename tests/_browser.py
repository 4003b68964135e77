"""Headless Chromium for the browser tests: Debian's chromium (Playwright cannot download its own
here), started with the flags this machine needs (no sandbox as root; no background networking,
whose connections the closed network refuses)."""

from __future__ import annotations

import socket
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
