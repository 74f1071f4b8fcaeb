#!/usr/bin/env bash
# Fleet benchmark: the first node's CPU time and peak memory while many nodes talk to it over
# the real pinned TLS channel on loopback. NODES simulated nodes (5,000), each a root folder of
# its own with 3 installed add-ons, register, then each reports ROUNDS times (3), PARALLEL at a
# time (50), so the reports of a round spread over its time as an interval's would. Prints the
# first node's CPU seconds and peak resident memory, per phase, and the CPU per message.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
command -v python3 >/dev/null || { echo "missing python3: run scripts/test.sh first" >&2; exit 1; }
cargo build --release --quiet -p berth -p berth-build
berth="$PWD/target/release/berth"
berth_build="$PWD/target/release/berth-build"
nodes=${NODES:-5000}
rounds=${ROUNDS:-3}
parallel=${PARALLEL:-50}

work=$(mktemp -d /tmp/berth-bench-nodes.XXXXXX)
server=""
cleanup() {
    [ -z "$server" ] || kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# One node with 3 trivial add-ons installed; every simulated node starts as a copy of it.
repository="$work/repository"
spec="$repository/installer.yaml"
mkdir -p "$repository"
printf 'apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n' >"$spec"
for name in alpha beta gamma; do
    mkdir -p "$repository/addons/$name/1.0.0"
    echo "# no images or assets" >"$repository/addons/$name/1.0.0/Manifest"
    printf 'function %s() { :; }\n' "$name" >"$repository/addons/$name/1.0.0/install.sh"
    printf '  %s:\n    version: 1.0.0\n' "$name" >>"$spec"
done
printf '{"addons": [%s]}\n' \
    '{"name": "alpha", "versions": [{"version": "1.0.0"}]}, {"name": "beta", "versions": [{"version": "1.0.0"}]}, {"name": "gamma", "versions": [{"version": "1.0.0"}]}' \
    >"$repository/versions.json"
"$berth_build" build "$repository/addons" --out "$work/dist" --cache-dir "$work/cache" >/dev/null 2>&1
cp "$repository/versions.json" "$work/dist/versions.json"
"$berth" install --spec "$spec" --dist "$work/dist" --root "$work/template" >/dev/null 2>&1
for n in $(seq "$nodes"); do
    mkdir -p "$work/nodes/n$n"
    cp -r "$work/template/var" "$work/nodes/n$n/"
done

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$berth" fleet serve --root "$work/first" --listen "127.0.0.1:$port" --name first 2>"$work/serve.log" &
server=$!
join="$work/first/var/lib/berth/join.json"
for _ in $(seq 100); do
    grep -q fleet-token "$join" 2>/dev/null && break
    sleep 0.1
done
param() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["params"][sys.argv[2]]["value"])' "$join" "$1"; }
pin=$(param fleet-pin)
token=$(param fleet-token)

# The server's CPU seconds (user + system) and peak resident memory, from /proc.
cpu() { awk -v ticks="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / ticks }' "/proc/$server/stat"; }
peak() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$server/status"; }

export berth pin token port work
start=$(now)
# The commands are for `sh -c`, which expands the exported variables itself.
# shellcheck disable=SC2016
seq "$nodes" | xargs -P "$parallel" -I{} sh -c \
    '"$berth" fleet register --root "$work/nodes/n$1" --first-node "127.0.0.1:$port" --pin "$pin" --token "$token" --name "n$1" >/dev/null' _ {}
registered=$(echo "$(now) - $start" | bc)
cpu_registered=$(cpu)
start=$(now)
for _ in $(seq "$rounds"); do
    # shellcheck disable=SC2016
    seq "$nodes" | xargs -P "$parallel" -I{} sh -c '"$berth" fleet report --root "$work/nodes/n$1" >/dev/null' _ {}
done
reported=$(echo "$(now) - $start" | bc)
cpu_total=$(cpu)

# Every simulated node is listed with its 3 add-ons (the first node, which has none, too), once
# the first node has saved its last batch of reports (a fraction of a second after the last).
for _ in $(seq 50); do
    listed=$("$berth" nodes --json --root "$work/first" | python3 -c 'import json, sys; nodes = json.load(sys.stdin)["items"]; print(sum(len(n["addons"]) == 3 for n in nodes))')
    [ "$listed" -eq "$nodes" ] && break
    sleep 0.1
done
[ "$listed" -eq "$nodes" ] || { echo "expected $nodes nodes with 3 add-ons each, got $listed" >&2; exit 1; }
refused=$(grep -c refused "$work/serve.log" || true)
[ "$refused" -eq 0 ] || { echo "the first node refused $refused messages:" >&2; grep refused "$work/serve.log" | head >&2; exit 1; }

echo "$nodes nodes, $parallel at a time; each registers once, then reports $rounds times (3 add-ons each)"
printf '%-46s %8.2f s wall  %6s s first-node CPU\n' "registrations ($nodes)" "$registered" "$cpu_registered"
printf '%-46s %8.2f s wall  %6.2f s first-node CPU\n' "reports ($((nodes * rounds)))" "$reported" "$(echo "$cpu_total - $cpu_registered" | bc)"
printf '%-46s %8s MiB\n' "first node's peak resident memory" "$(peak)"
printf 'first-node CPU per message: %.2f ms\n' "$(echo "$cpu_total * 1000 / ($nodes * (1 + $rounds))" | bc -l)"
