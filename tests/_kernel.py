"""Shared by the kernel-backend tests: whether this machine can run a lab (root, MPTCP, tools, the
delay line), skipping on a developer machine without them and FAILING in CI, where root and
namespaces are there and a skip would hide that the kernel tests went away."""

from __future__ import annotations

import subprocess

import pytest

from tests._paths import in_ci

__all__ = ["lab_namespaces", "require_lab"]


def require_lab() -> None:
    from workbench.backends._kernel import LabUnavailable, check_environment

    try:
        check_environment()
    except LabUnavailable as e:
        if in_ci():
            pytest.fail(f"kernel tests cannot run in CI: {e}")
        pytest.skip(str(e))


def lab_namespaces(pid: int | None = None) -> list[str]:
    """Network namespaces made by lab runs (of process ``pid`` when given)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    prefix = "wbk-" if pid is None else f"wbk-{pid}-"
    return [n for n in names if n.startswith(prefix)]
