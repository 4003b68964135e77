#!/usr/bin/env bash
# Set everything up (including what the tests need), then run the whole test suite, slow tests too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check .
.venv/bin/python -m mypy   # the whole package (pyproject.toml [tool.mypy])
# Two workers for everything but the real-kernel measurements held to tolerances, which then run
# alone: under a parallel run the kernel's own spread widens (emulation timing, endpoint scheduling).
rc=0
.venv/bin/python -m pytest -n 2 -q -m "not exclusive" "$@" || rc=$?
rc_alone=0
.venv/bin/python -m pytest -q -m exclusive "$@" || rc_alone=$?
[ "$rc" -eq 5 ] && rc=0              # 5: nothing selected (a -k filter that matches only one part)
[ "$rc_alone" -eq 5 ] && rc_alone=0
exit $(( rc != 0 ? rc : rc_alone ))
