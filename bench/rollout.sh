#!/usr/bin/env bash
# Rollout benchmark, in one run:
# 1. the wall time of a rollout of demo 1.0.0 -> 2.0.0 across six hosts (network namespaces,
#    each with its own containerd, as the rollout test builds them, agents at their default
#    settings) with strategy All, with maxConcurrency 1 (serial, as kURL's successor upgrades
#    remote nodes) and with maxConcurrency 3, and each one's ratio to six times one node's own
#    upgrade and to the serial time;
# 2. the first node's CPU time and peak memory while 5,000 simulated nodes register and report
#    over the fleet channel (bench/nodes.sh).
# Needs root (network namespaces), containerd and runc: scripts/test.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in containerd runc ctr ip nsenter; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/test.sh first" >&2; exit 1; }
done
echo "== a rollout across six hosts, by strategy"
cargo bench --quiet -p berth --bench rollout
echo
echo "== the first node while 5,000 nodes report"
bench/nodes.sh
