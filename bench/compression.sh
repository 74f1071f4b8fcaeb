#!/usr/bin/env bash
# Compression benchmark: packages in zstd against gzip, in one run.
#
# The install bench's 10 add-ons (one image each: a 16 MiB base layer shared by all and 8 MiB
# of its own, random, as compressed layers are) built with `--compression gzip` and with
# `--compression zstd`, from one warm blob cache: build time and bytes. Then `berth install` of
# each dist on a fresh private containerd (RUNS times, the median). Then the same for an add-on
# of real programs (this machine's containerd and ctr), which compress. Then kURL's add-ons as
# the tests build them (`berth-testgrid kurl-dist`: the fixtures' Manifests and files, through
# loopback stand-ins for their images and downloads): bytes in each format.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
for tool in containerd ctr python3 docker-registry skopeo runc dpkg-deb bc; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/test.sh first" >&2; exit 1; }
done
cargo build --release --quiet -p berth -p berth-build -p berth-testgrid
berth="$PWD/target/release/berth"
berth_build="$PWD/target/release/berth-build"
testgrid="$PWD/target/release/berth-testgrid"
runs=${RUNS:-3}

make_work compression

bytes() { cat "$@" | wc -c; }
declare -A suffix=([gzip]=.tar.gz [zstd]=.tar.zst)

python3 bench/make-addons.py "$work/repository" 10 8
# The blob cache warmed once, so both builds only write packages.
"$berth_build" build "$work/repository/addons" --out "$work/warm" --cache-dir "$work/cache" >/dev/null 2>&1
declare -A build_time size
for format in gzip zstd; do
    start=$EPOCHREALTIME
    "$berth_build" build "$work/repository/addons" --out "$work/$format" --cache-dir "$work/cache" \
        --compression "$format" --no-sbom >/dev/null 2>&1
    build_time[$format]=$(echo "$EPOCHREALTIME - $start" | bc)
    size[$format]=$(bytes "$work/$format"/*"${suffix[$format]}")
done
spec="$work/repository/installer.yaml"

declare -A install_times
for run in $(seq "$runs"); do
    for format in gzip zstd; do
        start_containerd "$work/$format-$run/containerd"
        start=$EPOCHREALTIME
        "$berth" install --spec "$spec" --dist "$work/$format" --root "$work/$format-$run/node" >/dev/null 2>&1
        install_times[$format]+="$(echo "$EPOCHREALTIME - $start" | bc) "
    done
done
# shellcheck disable=SC2086 # the times are words
gzip_install=$(median ${install_times[gzip]})
# shellcheck disable=SC2086
zstd_install=$(median ${install_times[zstd]})

# An add-on of real programs, as kURL's Kubernetes package ships kubeadm, kubelet and kubectl:
# this machine's containerd and ctr (68 MiB), which compress.
programs="$work/programs/addons/programs/1.0.0"
mkdir -p "$programs/bin"
cp "$(command -v containerd)" "$(command -v ctr)" "$programs/bin/"
echo 'function programs() { :; }' >"$programs/install.sh"
echo "# the programs are the folder's own files" >"$programs/Manifest"
printf 'apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  programs: {version: 1.0.0}\n' \
    >"$work/programs/installer.yaml"
declare -A programs_build programs_size programs_times
for format in gzip zstd; do
    start=$EPOCHREALTIME
    "$berth_build" build "$work/programs/addons" --out "$work/programs-$format" \
        --cache-dir "$work/cache" --compression "$format" --no-sbom >/dev/null 2>&1
    programs_build[$format]=$(echo "$EPOCHREALTIME - $start" | bc)
    programs_size[$format]=$(bytes "$work/programs-$format"/*"${suffix[$format]}")
done
for run in $(seq "$runs"); do
    for format in gzip zstd; do
        start=$EPOCHREALTIME
        "$berth" install --spec "$work/programs/installer.yaml" --dist "$work/programs-$format" \
            --root "$work/programs-$format-$run" >/dev/null 2>&1
        programs_times[$format]+="$(echo "$EPOCHREALTIME - $start" | bc) "
    done
done
# shellcheck disable=SC2086
gzip_programs=$(median ${programs_times[gzip]})
# shellcheck disable=SC2086
zstd_programs=$(median ${programs_times[zstd]})

echo "kURL's add-ons as the tests build them..." >&2
declare -A kurl_size
for format in gzip zstd; do
    "$testgrid" kurl-dist --out "$work/kurl-$format" --compression "$format" >/dev/null 2>&1
    kurl_size[$format]=$(bytes "$work/kurl-$format"/*"${suffix[$format]}")
done
kurl_count=$(find "$work/kurl-zstd" -name '*.tar.zst' | wc -l)

ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }
echo "runs: $runs (median shown; 10 add-ons: gzip ${install_times[gzip]}/ zstd ${install_times[zstd]}; programs: gzip ${programs_times[gzip]}/ zstd ${programs_times[zstd]})"
printf '%-58s %14s %14s %6s\n' "" gzip zstd ratio
printf '%-58s %12.3f s %12.3f s %6s\n' "build, 10 packages (warm cache, no BOM)" \
    "${build_time[gzip]}" "${build_time[zstd]}" "$(ratio "${build_time[zstd]}" "${build_time[gzip]}")"
printf '%-58s %14s %14s %6s\n' "bytes, 10 bench packages" "${size[gzip]}" "${size[zstd]}" \
    "$(ratio "${size[zstd]}" "${size[gzip]}")"
printf '%-58s %12.3f s %12.3f s %6s\n' "berth install, fresh node" "$gzip_install" "$zstd_install" \
    "$(ratio "$zstd_install" "$gzip_install")"
printf '%-58s %12.3f s %12.3f s %6s\n' "build, an add-on of 68 MiB of programs" \
    "${programs_build[gzip]}" "${programs_build[zstd]}" \
    "$(ratio "${programs_build[zstd]}" "${programs_build[gzip]}")"
printf '%-58s %14s %14s %6s\n' "bytes, the add-on of programs" "${programs_size[gzip]}" \
    "${programs_size[zstd]}" "$(ratio "${programs_size[zstd]}" "${programs_size[gzip]}")"
printf '%-58s %12.3f s %12.3f s %6s\n' "berth install, the add-on of programs" "$gzip_programs" \
    "$zstd_programs" "$(ratio "$zstd_programs" "$gzip_programs")"
printf '%-58s %14s %14s %6s\n' "bytes, kURL's add-ons as the tests build them ($kurl_count)" \
    "${kurl_size[gzip]}" "${kurl_size[zstd]}" "$(ratio "${kurl_size[zstd]}" "${kurl_size[gzip]}")"

python3 bench/headline.py zstd "Package build in zstd, 10 add-ons of 24 MiB (warm cache)" \
    "$(printf '%.3f s' "${build_time[zstd]}")" "$(printf 'gzip %.3f s' "${build_time[gzip]}")" \
    "$(ratio "${build_time[zstd]}" "${build_time[gzip]}")" "< 1"
python3 bench/headline.py zstd-install "Install of 68 MiB of programs from a zstd package" \
    "$(printf '%.3f s' "$zstd_programs")" "$(printf 'gzip %.3f s' "$gzip_programs")" \
    "$(ratio "$zstd_programs" "$gzip_programs")" "< 1"
