#!/usr/bin/env bash
# Set everything up (including what the tests need), then run the whole test suite, slow tests too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check .
.venv/bin/python -m mypy   # the files listed in pyproject.toml [tool.mypy]
exec .venv/bin/python -m pytest -n 2 -q "$@"
