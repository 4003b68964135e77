"""The Rust core's own unit tests (native/engine, `cargo test --no-default-features`: the event list,
the lazy timer, MT19937 against the reference generator's outputs, step series, the link, the receive
side), run here so that CI runs them; cargo is installed by scripts/setup.sh."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "native" / "engine"


def _cargo() -> str:
    found = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    assert Path(found).exists(), "cargo not found: scripts/setup.sh installs it"
    return found


def test_cargo_unit_tests_pass() -> None:
    env = dict(os.environ, CARGO_TARGET_DIR=str(ENGINE / "target" / "cargo-test"))
    out = subprocess.run([_cargo(), "test", "--no-default-features", "--locked", "-q"], cwd=ENGINE, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    passed = sum(int(line.split()[3]) for line in out.stdout.splitlines()
                 if line.startswith("test result: ok."))
    assert passed >= 10, out.stdout
