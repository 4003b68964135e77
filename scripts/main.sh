#!/usr/bin/env bash
# Set everything up, then run the main job on the bundled traces: a batch report (one page per
# capture with its path timelines, observed metrics and every scheduler's replay; index.html,
# metrics.csv/.parquet and manifest.json) in report/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/workbench report traces/ -o report/ --path 10.0.1.1=wifi --path 10.0.2.1=lte "$@"
echo "open report/index.html"
