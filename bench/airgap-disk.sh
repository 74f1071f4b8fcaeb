#!/usr/bin/env bash
# Airgap disk benchmark: the peak disk an airgap install takes beyond the bundle it was carried
# on, kURL's way (extract the bundle, then install from the extracted folder) against Berth's
# stream (`berth install --bundle`: nothing extracted, each file moved into place), in one run.
#
# Ten add-ons, each with one image: a 16 MiB base layer shared by all and 24 MiB of its own,
# random. The node's root and the extracted bundle sit on a tmpfs of their own, sampled every
# 20 ms; containerd keeps its store elsewhere, the same for both. The figure is the peak use of
# that tmpfs beyond what it held before, against what the install leaves under
# /var/lib/berth/addons.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in containerd ctr python3 tar mount df; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/test.sh first" >&2; exit 1; }
done
cargo build --release --quiet -p berth -p berth-build
berth="$PWD/target/release/berth"
berth_build="$PWD/target/release/berth-build"

work=$(mktemp -d /tmp/berth-bench-airgap-disk.XXXXXX)
containerd_pid=""
cleanup() {
    [ -n "$containerd_pid" ] && kill "$containerd_pid" 2>/dev/null
    sleep 0.3
    umount -R "$work/disk" 2>/dev/null || true
    umount -R "$work" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "generating add-ons, packages and the bundle..." >&2
python3 bench/make-addons.py "$work/repository" 10 24 16
"$berth_build" build "$work/repository/addons" --out "$work/dist" --cache-dir "$work/cache" >/dev/null 2>&1
cp "$work/repository/versions.json" "$work/dist/versions.json"
"$berth_build" bundle --spec "$work/repository/installer.yaml" --dist "$work/dist" \
    --out "$work/bundle.tar.gz" >/dev/null 2>&1
bundle_bytes=$(stat -c %s "$work/bundle.tar.gz")

mkdir -p "$work/containerd"
printf 'version = 2\nroot = "%s/root"\nstate = "%s/state"\n[grpc]\n  address = "%s/containerd.sock"\n' \
    "$work/containerd" "$work/containerd" "$work/containerd" >"$work/containerd/config.toml"
containerd --config "$work/containerd/config.toml" >"$work/containerd/log" 2>&1 &
containerd_pid=$!
export CONTAINERD_ADDRESS="$work/containerd/containerd.sock"
for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done

used() { df --output=used -B1 "$work/disk" | tail -n 1; }
# Runs "$@" on a fresh tmpfs at $work/disk and prints the peak bytes it used beyond the start,
# then what it installed; it returns once its images are removed and the tmpfs unmounted. Called
# in a command substitution, which waits for all of it: read from a process substitution
# (`read … < <(peak_of …)`), the clean-up ran on while the next measurement started, unmounting
# that one's fresh tmpfs under it.
peak_of() {
    mkdir -p "$work/disk"
    mount -t tmpfs -o size=4g tmpfs "$work/disk"
    local before peak sample sampler
    before=$(used)
    # This run's own peak, never the last run's, should no sample exceed its start.
    echo "$before" >"$work/peak"
    (
        peak=0
        while true; do
            sample=$(used)
            [ "$sample" -gt "$peak" ] && peak=$sample && echo "$peak" >"$work/peak"
            sleep 0.02
        done
    ) &
    sampler=$!
    "$@" >"$work/run.log" 2>&1 || { kill "$sampler"; cat "$work/run.log" >&2; exit 1; }
    sleep 0.1
    kill "$sampler"
    wait "$sampler" 2>/dev/null || true
    peak=$(cat "$work/peak")
    installed=$(du -sb "$work/disk/node/var/lib/berth/addons" | cut -f1)
    echo "$((peak - before)) $installed"
    ctr -n k8s.io images ls -q | xargs -r ctr -n k8s.io images rm >/dev/null
    umount -l "$work/disk"
}

extract_and_install() {
    mkdir -p "$work/disk/bundle"
    tar -xzf "$work/bundle.tar.gz" -C "$work/disk/bundle"
    (cd "$work/disk/bundle" && BERTH_ROOT="$work/disk/node" bash install.sh airgap)
}
stream_install() {
    "$berth" install --bundle "$work/bundle.tar.gz" --root "$work/disk/node" --param airgap=1
}

echo "kURL's way: extract, then install..." >&2
measured=$(peak_of extract_and_install)
read -r kurl_peak kurl_installed <<<"$measured"
echo "Berth: the bundle as a stream..." >&2
measured=$(peak_of stream_install)
read -r berth_peak berth_installed <<<"$measured"

ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
mib() { python3 -c "print(f'{$1 / 1048576:.1f}')"; }
echo
printf '%-44s %12s %16s %10s\n' "" "peak MiB" "installed MiB" "ratio"
printf '%-44s %12s %16s %10s\n' "extract, then install.sh airgap (kURL's way)" \
    "$(mib "$kurl_peak")" "$(mib "$kurl_installed")" "$(ratio "$kurl_peak" "$kurl_installed")"
printf '%-44s %12s %16s %10s\n' "berth install --bundle (a stream)" \
    "$(mib "$berth_peak")" "$(mib "$berth_installed")" "$(ratio "$berth_peak" "$berth_installed")"
echo "bundle: $(mib "$bundle_bytes") MiB"
echo "peak disk / installed, streamed: $(ratio "$berth_peak" "$berth_installed") (target <= 1.1; extracted: $(ratio "$kurl_peak" "$kurl_installed"))"
python3 bench/headline.py airgap-disk "Airgap install: peak disk over what it installs" \
    "$(ratio "$berth_peak" "$berth_installed")x ($(mib "$berth_peak") MiB)" \
    "extract then install: $(ratio "$kurl_peak" "$kurl_installed")x ($(mib "$kurl_peak") MiB)" \
    "$(ratio "$berth_peak" "$kurl_peak")" "≤ 1.1x installed"
