#!/usr/bin/env bash
# Set everything up, then run the main job on the bundled traces.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/workbench inspect traces/lab/c01/client.pcap --peer traces/lab/c01/server.pcap \
  --path 10.0.1.1=wifi --path 10.0.2.1=lte
