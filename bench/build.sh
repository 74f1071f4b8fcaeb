#!/usr/bin/env bash
# Build benchmark: berth-build package against kURL's method done daemonless, in one run.
#
# An add-on of 6 images (a 30 MiB base layer shared by all, a 10 MiB one shared by three, and
# 17 MiB unique to each: 142 MiB of distinct incompressible content) sits in a local registry.
# kURL's method: `skopeo copy docker://… docker-archive:` per image, gzip each archive, then
# `tar cz` of the add-on folder. Berth: `berth-build package` with a cold cache. Then the cost
# of a signed build (bills of materials inside and beside, provenance, signatures) against the
# unsigned package without a bill of materials (`--no-sbom`), both from a warm cache.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
for tool in docker-registry skopeo python3 gzip; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/test.sh first" >&2; exit 1; }
done
cargo build --release --quiet -p berth-build
berth_build="$PWD/target/release/berth-build"

work=$(mktemp -d /tmp/berth-bench-build.XXXXXX)
registry_pid=""
cleanup() { [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/registry.yml" <<YAML
version: 0.1
log: { level: error }
storage: { filesystem: { rootdirectory: $work/registry } }
http: { addr: 127.0.0.1:$port }
YAML
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done

echo "generating images..." >&2
python3 bench/make-images.py "$work/layouts"
mkdir -p "$work/repo/addons/bench/1.0.0"
echo 'function bench() { :; }' > "$work/repo/addons/bench/1.0.0/install.sh"
for n in 1 2 3 4 5 6; do
    skopeo --insecure-policy copy --quiet --dest-tls-verify=false \
        "oci:$work/layouts/img$n:1" "docker://127.0.0.1:$port/bench/img$n:1"
    echo "image img$n 127.0.0.1:$port/bench/img$n:1" >> "$work/repo/addons/bench/1.0.0/Manifest"
done

elapsed() { python3 -c "print(f'{$2 - $1:.2f}')"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }

echo "kURL method..." >&2
start=$(now)
mkdir -p "$work/kurl/addons/bench/1.0.0/images"
cp "$work/repo/addons/bench/1.0.0/"* "$work/kurl/addons/bench/1.0.0/"
for n in 1 2 3 4 5 6; do
    archive="$work/kurl/addons/bench/1.0.0/images/img$n.tar"
    skopeo --insecure-policy copy --quiet --src-tls-verify=false \
        "docker://127.0.0.1:$port/bench/img$n:1" "docker-archive:$archive:bench/img$n:1"
    gzip "$archive"
done
tar -C "$work/kurl" -czf "$work/kurl.tar.gz" addons
kurl_seconds=$(elapsed "$start" "$(now)")
kurl_bytes=$(stat -c %s "$work/kurl.tar.gz")

echo "berth-build package, cold cache..." >&2
start=$(now)
"$berth_build" package "$work/repo/addons/bench/1.0.0" --out "$work/berth" --cache-dir "$work/cache"
berth_seconds=$(elapsed "$start" "$(now)")
berth_bytes=$(stat -c %s "$work/berth/bench-1.0.0.tar.gz")

echo "berth-build package, warm cache..." >&2
start=$(now)
"$berth_build" package "$work/repo/addons/bench/1.0.0" --out "$work/berth-warm" --cache-dir "$work/cache" >/dev/null
warm_seconds=$(elapsed "$start" "$(now)")
cmp -s "$work/berth/bench-1.0.0.tar.gz" "$work/berth-warm/bench-1.0.0.tar.gz" && same=yes || same=NO

echo "berth-build package --no-sbom, warm cache..." >&2
start=$(now)
"$berth_build" package "$work/repo/addons/bench/1.0.0" --out "$work/berth-bare" --cache-dir "$work/cache" --no-sbom >/dev/null
bare_seconds=$(elapsed "$start" "$(now)")

echo "berth-build build --force --signing-key (bill of materials, provenance, signatures), warm cache..." >&2
"$berth_build" keygen "$work/vendor" >/dev/null 2>&1
start=$(now)
"$berth_build" build "$work/repo/addons" --out "$work/berth-signed" --cache-dir "$work/cache" --force --signing-key "$work/vendor.key" >/dev/null 2>&1
signed_seconds=$(elapsed "$start" "$(now)")
cmp -s "$work/berth/bench-1.0.0.tar.gz" "$work/berth-signed/bench-1.0.0.tar.gz" && signed_same=yes || signed_same=NO

echo "berth-build build, unchanged inputs..." >&2
"$berth_build" build "$work/repo/addons" --out "$work/berth" --cache-dir "$work/cache" >/dev/null
start=$(now)
"$berth_build" build "$work/repo/addons" --out "$work/berth" --cache-dir "$work/cache" >/dev/null
rebuild_seconds=$(elapsed "$start" "$(now)")

echo
printf '%-38s %10s %14s\n' "" "seconds" "bytes"
printf '%-38s %10s %14s\n' "kURL method (skopeo+gzip+tar cz)" "$kurl_seconds" "$kurl_bytes"
printf '%-38s %10s %14s\n' "berth-build package (cold cache)" "$berth_seconds" "$berth_bytes"
printf '%-38s %10s %14s\n' "berth-build package (warm cache)" "$warm_seconds" "same bytes: $same"
printf '%-38s %10s\n' "berth-build package --no-sbom (warm)" "$bare_seconds"
printf '%-38s %10s %14s\n' "berth-build build, signed (warm)" "$signed_seconds" "same bytes: $signed_same"
printf '%-38s %10s\n' "berth-build build (inputs unchanged)" "$rebuild_seconds"
echo
echo "time ratio berth/kURL:  $(ratio "$berth_seconds" "$kurl_seconds")   (target <= 0.5)"
echo "bytes ratio berth/kURL: $(ratio "$berth_bytes" "$kurl_bytes")   (target <= 0.6)"
echo "rebuild with unchanged inputs: ${rebuild_seconds}s   (target < 1)"
echo "bill of materials inside the package: $(ratio "$warm_seconds" "$bare_seconds")x the package without one (warm cache)"
echo "signing, bills of materials and provenance: $(ratio "$signed_seconds" "$bare_seconds")x the unsigned package without one (warm cache)   (target <= 1.1)"
python3 bench/headline.py build "Package build, 6 images (142 MiB distinct), cold cache" \
    "${berth_seconds} s, ${berth_bytes} B" "kURL's skopeo+gzip+tar: ${kurl_seconds} s, ${kurl_bytes} B" \
    "$(ratio "$berth_seconds" "$kurl_seconds") time, $(ratio "$berth_bytes" "$kurl_bytes") bytes" "≤ 0.5, ≤ 0.6"
python3 bench/headline.py signed "Signed build with bills of materials and provenance" \
    "${signed_seconds} s" "unsigned, no bill of materials: ${bare_seconds} s" \
    "$(ratio "$signed_seconds" "$bare_seconds")" "≤ 1.1"
