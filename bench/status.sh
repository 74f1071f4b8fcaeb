#!/usr/bin/env bash
# Status benchmark: `berth status` on a node of 10 add-ons, each with a health.yaml of 3 local
# components (its own HTTP server's port, its answer, and its process by pid file), all
# healthy; against the target of 0.5 s. Every component is probed live on every call.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
command -v python3 >/dev/null || { echo "missing python3: run scripts/test.sh first" >&2; exit 1; }
cargo build --release --quiet -p berth -p berth-build
berth="$PWD/target/release/berth"
berth_build="$PWD/target/release/berth-build"
runs=${RUNS:-10}
count=10

work=$(mktemp -d /tmp/berth-bench-status.XXXXXX)
servers=()
cleanup() {
    for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

repository="$work/repository"
spec="$repository/installer.yaml"
mkdir -p "$repository"
printf 'apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n' >"$spec"
names=()
for n in $(seq "$count"); do
    name="service$n"
    names+=("$name")
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    folder="$repository/addons/$name/1.0.0"
    mkdir -p "$folder" "$work/run"
    python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/run" >/dev/null 2>&1 &
    servers+=($!)
    echo "$!" >"$work/run/$name.pid"
    echo "# no images or assets" >"$folder/Manifest"
    printf 'function %s() { :; }\n' "$name" >"$folder/install.sh"
    cat >"$folder/health.yaml" <<YAML
components:
  - name: port
    tcp: {address: "127.0.0.1:$port"}
  - name: answers
    http: {url: "http://127.0.0.1:$port/", status: 200}
  - name: process
    process: {pidFile: "$work/run/$name.pid"}
YAML
    printf '  %s:\n    version: 1.0.0\n' "$name" >>"$spec"
done
python3 - "$repository/versions.json" "${names[@]}" <<'PYTHON'
import json, sys
names = sys.argv[2:]
json.dump({"addons": [{"name": n, "versions": [{"version": "1.0.0"}]} for n in names]},
          open(sys.argv[1], "w"), indent=2)
PYTHON
"$berth_build" build "$repository/addons" --out "$work/dist" --cache-dir "$work/cache" >/dev/null 2>&1
cp "$repository/versions.json" "$work/dist/versions.json"
"$berth" install --spec "$spec" --dist "$work/dist" --root "$work/node" --health-timeout 30 >/dev/null 2>&1

times=()
for _ in $(seq "$runs"); do
    start=$(now)
    "$berth" status --root "$work/node" >"$work/status.txt"
    times+=("$(echo "$(now) - $start" | bc)")
done
available=$(grep -c '^service[0-9]* .* True  *False ' "$work/status.txt" || true)
[ "$available" -eq "$count" ] || { echo "expected $count Available add-ons:" >&2; cat "$work/status.txt" >&2; exit 1; }
status=$(median "${times[@]}")
echo "runs: $runs (median shown; all: ${times[*]})"
printf '%-60s %8.3f s\n' "berth status, $count add-ons x 3 components, all probed" "$status"
printf 'ratio to the 0.5 s target: %.2f (target <= 1)\n' "$(echo "$status / 0.5" | bc -l)"
