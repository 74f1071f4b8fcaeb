#!/usr/bin/env bash
# Bundle benchmark: `berth-build bundle` against kURL's method (every package whole, in one
# tar.gz), in one run: time, bytes, and peak memory (RSS, from /usr/bin/time -v).
#
# Four add-ons, each with one image: a 128 MiB base layer shared by all four and 256 MiB of its
# own, random (incompressible), so Berth's bundle is over 1 GB and kURL's holds the base 4 times.
# Then the same bundle in zstd (`--compression zstd`), against the gzip one.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
for tool in python3 /usr/bin/time tar; do
    command -v "$tool" >/dev/null || { echo "missing $tool (Debian: time, tar, python3)" >&2; exit 1; }
done
cargo build --release --quiet -p berth -p berth-build
berth_build="$PWD/target/release/berth-build"

work=$(mktemp -d /tmp/berth-bench-bundle.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "generating add-ons and packages..." >&2
python3 bench/make-addons.py "$work/repository" 4 256 128
"$berth_build" build "$work/repository/addons" --out "$work/dist" --cache-dir "$work/cache" >/dev/null 2>&1
cp "$work/repository/versions.json" "$work/dist/versions.json"
spec="$work/repository/installer.yaml"

elapsed() { python3 -c "print(f'{$2 - $1:.2f}')"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
max_rss_kib() { sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$1"; }

echo "kURL method (tar czf of the packages)..." >&2
start=$(now)
packages=()
for package in "$work"/dist/*.tar.gz; do packages+=("./${package##*/}"); done
/usr/bin/time -v -o "$work/kurl.time" \
    tar -C "$work/dist" -czf "$work/kurl-bundle.tar.gz" "${packages[@]}" versions.json
kurl_seconds=$(elapsed "$start" "$(now)")
kurl_bytes=$(stat -c %s "$work/kurl-bundle.tar.gz")
kurl_rss=$(max_rss_kib "$work/kurl.time")
rm -f "$work/kurl-bundle.tar.gz"

echo "berth-build bundle..." >&2
start=$(now)
/usr/bin/time -v -o "$work/berth.time" \
    "$berth_build" bundle --spec "$spec" --dist "$work/dist" --out "$work/bundle.tar.gz" >/dev/null 2>&1
berth_seconds=$(elapsed "$start" "$(now)")
berth_bytes=$(stat -c %s "$work/bundle.tar.gz")
berth_rss=$(max_rss_kib "$work/berth.time")

echo "berth-build bundle --compression zstd..." >&2
start=$(now)
/usr/bin/time -v -o "$work/zstd.time" \
    "$berth_build" bundle --spec "$spec" --dist "$work/dist" --out "$work/bundle.tar.zst" \
    --compression zstd >/dev/null 2>&1
zstd_seconds=$(elapsed "$start" "$(now)")
zstd_bytes=$(stat -c %s "$work/bundle.tar.zst")
zstd_rss=$(max_rss_kib "$work/zstd.time")

printf '%-38s %10s %16s %14s\n' "" seconds bytes "peak RSS KiB"
printf '%-38s %10s %16s %14s\n' "kURL method (tar czf of packages)" "$kurl_seconds" "$kurl_bytes" "$kurl_rss"
printf '%-38s %10s %16s %14s\n' "berth-build bundle" "$berth_seconds" "$berth_bytes" "$berth_rss"
printf '%-38s %10s %16s %14s\n' "berth-build bundle, zstd" "$zstd_seconds" "$zstd_bytes" "$zstd_rss"
echo "time ratio Berth/kURL:  $(ratio "$berth_seconds" "$kurl_seconds")"
echo "bytes ratio Berth/kURL: $(ratio "$berth_bytes" "$kurl_bytes")"
echo "zstd against gzip: $(ratio "$zstd_seconds" "$berth_seconds") time, $(ratio "$zstd_bytes" "$berth_bytes") bytes"
python3 bench/headline.py bundle "Airgap bundle over 1 GB" \
    "${berth_seconds} s, ${berth_bytes} B" "kURL's tar czf: ${kurl_seconds} s, ${kurl_bytes} B" \
    "$(ratio "$berth_seconds" "$kurl_seconds") time, $(ratio "$berth_bytes" "$kurl_bytes") bytes" "≤ 0.4 time"
python3 bench/headline.py bundle-zstd "Airgap bundle over 1 GB in zstd" \
    "${zstd_seconds} s, ${zstd_bytes} B" "gzip bundle: ${berth_seconds} s, ${berth_bytes} B" \
    "$(ratio "$zstd_seconds" "$berth_seconds") time, $(ratio "$zstd_bytes" "$berth_bytes") bytes" "< 1"
echo "berth-build bundle peak RSS: $((berth_rss / 1024)) MiB (target < 100 MiB, bundle over 1 GB: $((berth_bytes / 1000000)) MB)"
