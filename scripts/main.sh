#!/usr/bin/env bash
# Set everything up, then run the main job on the bundled traces: inspect every bundled lab session
# (client capture + server capture) and print connections, subflows, goodput, one-way delay and
# MPTCP out-of-order delay.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for run in traces/lab/*/; do
  .venv/bin/workbench inspect "$run/client.pcap" --peer "$run/server.pcap" \
    --path 10.0.1.1=wifi --path 10.0.2.1=lte
done
