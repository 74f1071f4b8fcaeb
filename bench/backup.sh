#!/usr/bin/env bash
# Backup benchmark, in one run: `berth backup` on the control-plane node of a one-node cluster
# with the suite's largest add-on set, against `etcdctl snapshot save` and a tar of
# /etc/kubernetes by hand; each three times, medians compared. Kubernetes v1.20.2 comes from
# scripts/kubernetes.sh (built once, then cached). Needs root, containerd, runc and etcdctl:
# scripts/test.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
prepare_cluster_bench etcdctl
output=$(cargo bench --quiet -p berth --bench backup | tee /dev/stderr)
read -r berth baseline berth_bytes baseline_bytes < <(awk '$1 == "result" { print $2, $3, $4, $5 }' <<<"$output")
python3 bench/headline.py backup "Backup of a control-plane node (5 add-ons): berth backup vs etcdctl + tar" \
    "$berth s, $berth_bytes B" "$baseline s, $baseline_bytes B" \
    "$(awk -v a="$berth" -v b="$baseline" 'BEGIN { printf "%.2f", a / b }')" "≤ 2"
