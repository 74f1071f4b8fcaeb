#!/usr/bin/env bash
# serve under load, before and after the hardening: requests per second for rendering an
# installer's script, for posting a spec, and for streaming its airgap bundle, with the
# server's peak RSS; then the time one hostile post (200 KB of nested brackets) holds it.
# "Before" is the revision BEFORE (default f768ae0, the last one without the hardening), built
# from a git worktree; "after" is this checkout. Loopback only; every load is bounded in count
# (ab -n) and every request in time. Needs ab (apache2-utils) and curl: run scripts/test.sh
# first. KEEP=1 keeps the work folder.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in ab curl git; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/test.sh first" >&2; exit 1; }
done
before=${BEFORE:-f768ae0}
renders=${RENDERS:-2000}
posts=${POSTS:-500}
bundles=${BUNDLES:-20}

work=$(mktemp -d /tmp/berth-bench-serve.XXXXXX)
server_pid=""
cleanup() {
    [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
    git worktree remove --force "$work/before-tree" 2>/dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

echo "building this checkout and $before (release)..." >&2
# Both trees build in this checkout's target folder, so only the workspace's own crates build
# twice, not every dependency; their artifacts go first each time, since the two trees' crates
# share names and versions.
target="$PWD/target"
workspace_crates=(-p berth-formats -p berth -p berth-build)
cargo clean --release --quiet "${workspace_crates[@]}"
cargo build --release --quiet -p berth -p berth-build
mkdir -p "$work/after" "$work/before"
cp target/release/berth target/release/berth-build "$work/after/"
git worktree add --quiet --detach "$work/before-tree" "$before"
(cd "$work/before-tree" && CARGO_TARGET_DIR="$target" cargo clean --release --quiet "${workspace_crates[@]}" &&
    CARGO_TARGET_DIR="$target" cargo build --release --quiet -p berth -p berth-build)
cp target/release/berth target/release/berth-build "$work/before/"
cargo clean --release --quiet "${workspace_crates[@]}"

echo "building the demo and hello packages..." >&2
mkdir -p "$work/repo/addons"
cp -r addons/demo addons/hello "$work/repo/addons/"
"$work/after/berth-build" build "$work/repo" --out "$work/dist" >/dev/null 2>&1
spec="$work/spec.yaml"
printf 'apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  hello: {version: latest}\n  demo: {version: 1.0.0, port: 8080}\n' >"$spec"
python3 -c 'print("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec: " + "[" * 100000 + "]" * 100000)' >"$work/nested.yaml"

# ab's "Requests per second" for one load.
rate() { sed -n 's/^Requests per second: *\([0-9.]*\).*/\1/p' "$1"; }

declare -A figures
for side in before after; do
    port=$((18900 + RANDOM % 500))
    extra=()
    [ "$side" = before ] || extra=(--installers "$work/installers-$side")
    "$work/$side/berth-build" serve --dist "$work/dist" --listen "127.0.0.1:$port" \
        --berth "$work/$side/berth" "${extra[@]}" >"$work/serve-$side.log" 2>&1 &
    server_pid=$!
    url="http://127.0.0.1:$port"
    for _ in $(seq 100); do curl -fsS -o /dev/null "$url/versions.json" 2>/dev/null && break; sleep 0.1; done
    id_url=$(curl -fsS --data-binary @"$spec" "$url/installer")
    id=${id_url##*/}

    ab -q -n "$renders" -c 8 "$url/$id" >"$work/render-$side.txt" 2>&1
    figures[render-$side]=$(rate "$work/render-$side.txt")
    ab -q -n "$posts" -c 4 -p "$spec" -T application/yaml "$url/installer" >"$work/post-$side.txt" 2>&1
    figures[post-$side]=$(rate "$work/post-$side.txt")
    ab -q -n "$bundles" -c 2 "$url/bundle/$id.tar.gz" >"$work/bundle-$side.txt" 2>&1
    figures[bundle-$side]=$(rate "$work/bundle-$side.txt")
    figures[bundle-bytes-$side]=$(sed -n 's/^Document Length: *\([0-9]*\).*/\1/p' "$work/bundle-$side.txt")
    # One hostile post, bounded at 120 s: how long it holds the server.
    started=$(date +%s.%N)
    curl -sS -m 120 -o /dev/null --data-binary @"$work/nested.yaml" "$url/installer" 2>/dev/null || true
    figures[nested-$side]=$(printf '%.3f' "$(echo "$(date +%s.%N) - $started" | bc)")
    figures[rss-$side]=$(awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status")
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
done

ratio() { echo "scale=4; $1 / $2" | bc; }
printf '%-34s %14s %14s %8s\n' "" "before ($before)" "after" "after/before"
for row in render post bundle; do
    printf '%-34s %14s %14s %8s\n' "$row: requests/s" "${figures[$row-before]}" "${figures[$row-after]}" \
        "$(ratio "${figures[$row-after]}" "${figures[$row-before]}")"
done
printf '%-34s %14s %14s\n' "bundle: bytes each" "${figures[bundle-bytes-before]}" "${figures[bundle-bytes-after]}"
printf '%-34s %14s %14s %8s\n' "one nested post: seconds held" "${figures[nested-before]}" "${figures[nested-after]}" \
    "$(ratio "${figures[nested-after]}" "${figures[nested-before]}")"
printf '%-34s %14s %14s %8s\n' "server peak RSS: KiB" "${figures[rss-before]}" "${figures[rss-after]}" \
    "$(ratio "${figures[rss-after]}" "${figures[rss-before]}")"
