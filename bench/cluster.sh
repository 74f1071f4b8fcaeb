#!/usr/bin/env bash
# Cluster benchmark, in one run: from `curl … | bash` to a Ready node, and to a three-node
# cluster Ready (the first node installed, two joined with the printed command), on machines
# of their own (network namespaces), with each step's share of the one-node time (Berth's
# hooks, image loads, kubeadm's wait for the control plane). Kubernetes v1.20.2 comes from
# scripts/kubernetes.sh (built once, then cached). Needs root, containerd and runc:
# scripts/test.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
prepare_cluster_bench
output=$(cargo bench --quiet -p berth --bench cluster | tee /dev/stderr)
read -r one three < <(awk '$1 == "result" { print $2, $3 }' <<<"$output")
python3 bench/headline.py cluster-1 "One node: install.sh (curl, bash) to node Ready" \
    "$one s" "goal: 90 s" "$(awk -v a="$one" 'BEGIN { printf "%.2f", a / 90 }')" "≤ 1"
python3 bench/headline.py cluster-3 "Three nodes: first install to three Ready (1 + 2 joined)" \
    "$three s" "goal: 240 s" "$(awk -v a="$three" 'BEGIN { printf "%.2f", a / 240 }')" "≤ 1"
