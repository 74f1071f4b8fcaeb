#!/usr/bin/env bash
# Host preflight benchmark: `berth preflight` of Berth's built-in set plus every host-preflight
# file of kURL's add-ons (the shared fixtures, 92 files), without filesystemPerformance; then
# the built-in filesystemPerformance check alone, against its own stated bound (its timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
fixtures=../shared/fixtures/kurl-host-preflights
[ -d "$fixtures" ] || { echo "missing $fixtures" >&2; exit 1; }
cargo build --release --quiet -p berth
berth="$PWD/target/release/berth"
runs=${RUNS:-5}

now() { date +%s%N; }
best=""
for _ in $(seq "$runs"); do
    start=$(now)
    "$berth" preflight --skip-filesystem-performance preflight/builtin/host-preflights.yaml \
        "$fixtures"/*.yaml >/dev/null 2>&1 || true
    elapsed=$(( ($(now) - start) / 1000000 ))
    if [ -z "$best" ] || [ "$elapsed" -lt "$best" ]; then best=$elapsed; fi
done
count=$(find "$fixtures" -name '*.yaml' | wc -l)
echo "built-in + $count kURL files, no filesystemPerformance: best of $runs: ${best} ms"

# filesystemPerformance as kURL's built-in set writes it (22Mi, 2m timeout, background load).
work=$(mktemp -d /tmp/berth-bench-preflight.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/fs.yaml" <<YAML
apiVersion: troubleshoot.sh/v1beta2
kind: HostPreflight
spec:
  collectors:
    - filesystemPerformance:
        collectorName: fs
        directory: $work/etcd
        timeout: 2m
        fileSize: 22Mi
        enableBackgroundIOPS: true
        backgroundIOPSWarmupSeconds: 10
        backgroundWriteIOPS: 300
        backgroundWriteIOPSJobs: 6
        backgroundReadIOPS: 50
        backgroundReadIOPSJobs: 1
  analyzers:
    - filesystemPerformance:
        collectorName: fs
        outcomes:
          - pass:
              when: p99 < 10ms
              message: "p99 {{ .P99 }}"
          - warn:
              message: "p99 {{ .P99 }}"
YAML
start=$(now)
result=$("$berth" preflight "$work/fs.yaml" 2>/dev/null | tail -1 || true)
elapsed=$(( ($(now) - start) / 1000000 ))
echo "filesystemPerformance (bound: 2m timeout): ${elapsed} ms; $result"
