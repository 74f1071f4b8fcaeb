#!/usr/bin/env bash
# Support bundles: (1) the time and size of `berth support-bundle` on a node with 10 add-ons
# installed, its hooks' logs LOG_MIB (4) MiB in all, against `tar czf` of the same Berth
# folders (the least any bundle of them costs, with no host, runtime or journal collected and
# nothing redacted); (2) the first node's peak memory while NODES (50) simulated nodes, each
# with a bundle of about NODE_MIB (8) MiB of incompressible logs, send theirs at once.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
command -v python3 >/dev/null || { echo "missing python3: run scripts/test.sh first" >&2; exit 1; }
cargo build --release --quiet -p berth -p berth-build
berth="$PWD/target/release/berth"
berth_build="$PWD/target/release/berth-build"
nodes=${NODES:-50}
node_mib=${NODE_MIB:-8}
log_mib=${LOG_MIB:-4}

work=$(mktemp -d /tmp/berth-bench-bundle.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# A node with 10 trivial add-ons, each printing a line of logs.
repository="$work/repository"
spec="$repository/installer.yaml"
mkdir -p "$repository"
printf 'apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n' >"$spec"
listed=""
for n in $(seq 10); do
    name="addon$n"
    mkdir -p "$repository/addons/$name/1.0.0"
    echo "# no images or assets" >"$repository/addons/$name/1.0.0/Manifest"
    printf 'function %s() { echo "%s installed"; }\n' "$name" "$name" >"$repository/addons/$name/1.0.0/install.sh"
    printf '  %s:\n    version: 1.0.0\n' "$name" >>"$spec"
    listed="$listed${listed:+, }{\"name\": \"$name\", \"versions\": [{\"version\": \"1.0.0\"}]}"
done
printf '{"addons": [%s]}\n' "$listed" >"$repository/versions.json"
"$berth_build" build "$repository/addons" --out "$work/dist" --cache-dir "$work/cache" >/dev/null 2>&1
cp "$repository/versions.json" "$work/dist/versions.json"
node="$work/node"
"$berth" install --spec "$spec" --dist "$work/dist" --root "$node" >/dev/null 2>&1
# Logs as a node gathers them: text, some of it repeated.
python3 - "$node/var/log/berth/history.log" "$log_mib" <<'PY'
import random, sys
random.seed(1)
with open(sys.argv[1], "w") as out:
    size = 0
    while size < int(sys.argv[2]) << 20:
        line = "%08d hook addon%d step %s took %dms\n" % (size, random.randint(1, 10), random.choice(["preflight", "install", "outro"]), random.randint(1, 9999))
        out.write(line)
        size += len(line)
PY

start=$(now)
"$berth" support-bundle --root "$node" --out "$work/node.tar.gz" >/dev/null 2>"$work/bundle.log"
bundle_seconds=$(echo "$(now) - $start" | bc)
start=$(now)
tar czf "$work/tar.tar.gz" -C "$node" var/lib/berth/state var/lib/berth/installers var/log/berth
tar_seconds=$(echo "$(now) - $start" | bc)
files=$(tar tzf "$work/node.tar.gz" | wc -l)

echo "a node with 10 add-ons and $log_mib MiB of logs"
printf '%-52s %8.2f s %12s bytes  %5d files\n' "berth support-bundle (host, runtime, journal, redacted)" "$bundle_seconds" "$(stat -c %s "$work/node.tar.gz")" "$files"
printf '%-52s %8.2f s %12s bytes\n' "tar czf of Berth's folders alone" "$tar_seconds" "$(stat -c %s "$work/tar.tar.gz")"
printf 'time ratio berth/tar: %.2fx\n' "$(echo "$bundle_seconds / $tar_seconds" | bc -l)"

# The fleet: a first node and NODES simulated nodes (roots of their own on loopback), each with
# NODE_MIB MiB of incompressible logs, running `berth fleet agent`.
first="$work/first"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$berth" fleet serve --root "$first" --listen "127.0.0.1:$port" --name first 2>"$work/serve.log" &
server=$!
pids+=("$server")
join="$first/var/lib/berth/join.json"
for _ in $(seq 100); do
    grep -q fleet-token "$join" 2>/dev/null && break
    sleep 0.1
done
param() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["params"][sys.argv[2]]["value"])' "$join" "$1"; }
pin=$(param fleet-pin)
token=$(param fleet-token)
for n in $(seq "$nodes"); do
    root="$work/nodes/n$n"
    mkdir -p "$root/var/log/berth"
    head -c "$((node_mib << 20))" /dev/urandom | base64 -w 0 | fold -w 100 >"$root/var/log/berth/history.log"
    "$berth" fleet register --root "$root" --first-node "127.0.0.1:$port" --pin "$pin" --token "$token" --name "n$n" >/dev/null
    "$berth" fleet agent --root "$root" --interval 600 >/dev/null 2>&1 &
    pids+=("$!")
done
peak() { awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
before=$(peak "$server")
start=$(now)
/usr/bin/time -f '%M' -o "$work/command.rss" \
    "$berth" support-bundle --root "$first" --nodes all --wait 10m --out "$work/fleet.tar.gz" >/dev/null 2>"$work/fleet.log" ||
    { cat "$work/fleet.log" >&2; exit 1; }
fleet_seconds=$(echo "$(now) - $start" | bc)
collected=$(tar xzOf "$work/fleet.tar.gz" fleet/nodes.json | python3 -c 'import json, sys; print(sum(n["bundle"] == "collected" for n in json.load(sys.stdin)))')
echo
echo "$nodes nodes sending bundles of about $node_mib MiB each ($(stat -c %s "$work/fleet.tar.gz") bytes in the fleet's archive, $collected bundles collected)"
printf '%-52s %8.2f s\n' "berth support-bundle --nodes all" "$fleet_seconds"
printf '%-52s %8s MiB (%s MiB before the request)\n' "first node's server, peak resident memory" "$(peak "$server")" "$before"
printf '%-52s %8.1f MiB\n' "the command that assembles the archive, peak" "$(echo "$(cat "$work/command.rss") / 1024" | bc -l)"
