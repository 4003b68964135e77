"""``workbench ui``: start the Streamlit page (``app.py`` at the top of the checkout).

The upload limit is given to streamlit (``server.maxUploadSize``, enforced by its upload endpoint)
and to the page (``WORKBENCH_MAX_UPLOAD_MB``, checked again when the bytes are written), so a
too-large file is refused with a message either way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["APP", "streamlit_argv", "ui_command"]

APP = Path(__file__).resolve().parents[2] / "app.py"


def streamlit_argv(port: int, max_upload_mb: int, app: Path = APP, address: str = "127.0.0.1") -> list[str]:
    """The command line that serves the page (on this machine only unless another address is given:
    the page reads and runs whatever is uploaded, so it is not exposed by default)."""
    return [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", address,
            "--server.port", str(port),
            "--server.maxUploadSize", str(max_upload_mb), "--browser.gatherUsageStats", "false",
            "--client.toolbarMode", "minimal"]


def ui_command(
    port: Annotated[int, typer.Option(help="port to serve the page on")] = 8501,
    max_upload_mb: Annotated[int, typer.Option(help="largest upload accepted, in MB")] = 1024,
    address: Annotated[str, typer.Option(help="address to listen on (0.0.0.0 for every interface)")] = "127.0.0.1",
) -> None:
    """Serve the Streamlit page: upload or pick a trace, edit paths, replay schedulers, tune, download."""
    if not APP.is_file():
        typer.echo(f"error: {APP}: the page is not there (run from a checkout of the workbench)", err=True)
        raise typer.Exit(2)
    if not 0 < port < 65536:
        typer.echo(f"error: --port must be 1..65535, not {port}", err=True)
        raise typer.Exit(2)
    if max_upload_mb <= 0:
        typer.echo("error: --max-upload-mb must be > 0", err=True)
        raise typer.Exit(2)
    env = os.environ | {"WORKBENCH_MAX_UPLOAD_MB": str(max_upload_mb)}
    try:
        code = subprocess.call(streamlit_argv(port, max_upload_mb, address=address), env=env)
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)
