#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine: system packages (tshark, Python venv support),
# a virtualenv in .venv, and the project installed into it (editable, with test extras).
# Re-running is cheap: each step checks whether it is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test_tools="${1:-}"   # "--test" also installs what the test suite needs (headless Chromium)

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# gcc builds the kernel backend's delay line; the engine core is Rust (below).
packages=(tshark python3-venv python3-pip gcc python3-dev)
[ "$want_test_tools" = "--test" ] && packages+=(chromium postgresql)
# the kernel backend (workbench lab): captures at both ends, veth offloads switched off
packages+=(tcpdump ethtool)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_if_needed apt-get update -qq
  sudo_if_needed apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "[setup] Python >= 3.11 is needed; $("$PYTHON" --version) found" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv

# Reinstall only when the dependencies changed.
stamp=".venv/.workbench-installed"
digest=$(sha256sum pyproject.toml | cut -d' ' -f1)
# A checkout from before the engine core was Rust only may still hold mypyc builds of the old Python
# core beside the sources: importable, they would shadow nothing but mislead. Remove them once.
rm -f workbench/replay/{events,link,tcp,mptcp}.cpython-*.so ./*__mypyc.cpython-*.so
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
  echo "[setup] installing the project into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[test]"
  echo "$digest" > "$stamp"
fi

# The kernel backend's delay line (native/delayline.c; this kernel may have no netem), rebuilt when its
# source changes.
dl_bin=.venv/bin/workbench-delayline
dl_stamp=.venv/.workbench-delayline
dl_digest=$(sha256sum native/delayline.c | cut -d' ' -f1)
if [ ! -x "$dl_bin" ] || [ ! -f "$dl_stamp" ] || [ "$(cat "$dl_stamp")" != "$dl_digest" ]; then
  echo "[setup] building the delay line ($dl_bin)"
  gcc -O2 -Wall -Wextra -o "$dl_bin.tmp" native/delayline.c
  mv "$dl_bin.tmp" "$dl_bin"
  echo "$dl_digest" > "$dl_stamp"
fi

# The compiled engine core (native/engine: Rust, PyO3, built by maturin into the module
# `workbench_core`), rebuilt when its sources change. Rust comes from rustup when it is there (this
# machine's ~/.cargo), else from Debian's packages.
core_stamp=.venv/.workbench-core
core_digest=$(cat native/engine/Cargo.toml native/engine/Cargo.lock native/engine/pyproject.toml \
  native/engine/workbench_core.pyi native/engine/src/*.rs | sha256sum | cut -d' ' -f1)
if [ ! -f "$core_stamp" ] || [ "$(cat "$core_stamp")" != "$core_digest" ] \
   || ! .venv/bin/python -c 'import workbench_core' 2>/dev/null; then
  [ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
  if ! command -v cargo >/dev/null; then
    echo "[setup] installing Rust (cargo, rustc) from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    sudo_if_needed apt-get update -qq
    sudo_if_needed apt-get install -y -qq cargo rustc >/dev/null
  fi
  echo "[setup] building the compiled engine core (native/engine, cargo $(cargo --version | cut -d' ' -f2))"
  .venv/bin/python -m pip install -q "maturin>=1.7,<2"
  VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release --locked -q -m native/engine/Cargo.toml
  echo "$core_digest" > "$core_stamp"
fi
