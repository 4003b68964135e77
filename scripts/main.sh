#!/usr/bin/env bash
# Set everything up, then run the main job: a batch report (one page per input with its capture views,
# path timelines, observed metrics and every scheduler's replay; index.html, tidy metrics.csv/.parquet,
# metrics_wide.csv and manifest.json) in report/, over traces that show what the tool is for:
#   * the bundled lab runs (traces/lab: real Linux MPTCP over two emulated paths, client + server
#     captures, c07 a finite transfer, v05 with an LTE capacity trace whose ground truth rate2.csv
#     is drawn over the capture);
#   * real tshark CSV exports of MPTCP downloads over two WiFi links from the hsr-mptcp study (three
#     connections: reno, olia, lia), when the shared traces are beside the checkout (they are not
#     redistributable, so not bundled).
# Not the parser fixtures in traces/fixtures: a few hundred bytes of protocol samples say nothing about
# schedulers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
inputs=(traces/lab)
HSR=../shared/traces/hsr-mptcp
for c in 1529184925.reno 1529184937.olia 1529184955.lia; do
    f="$HSR/client.$c.laptop3.M.D1024.wlan12.M3.pcap.csv"   # naming one export brings its partner
    if [ -f "$f" ]; then inputs+=("$f"); fi
done
.venv/bin/workbench report "${inputs[@]}" -o report/ --path 10.0.1.1=wifi --path 10.0.2.1=lte "$@"
echo "open report/index.html"
