#!/usr/bin/env bash
# The whole grid on this machine, one report (testgrid-report/index.html and junit.xml):
# - Berth's demo (testgrid/specs/demo.yaml) and kURL's containerd and collectd
#   (testgrid/specs/kurl.yaml) on Debian 11, 12 and 13 VMs booted with QEMU
#   (testgrid/specs/os-debian.yaml), one primary and one secondary, online and airgap, each
#   installed, joined, its secondary rebooted and upgraded;
# - real Kubernetes (testgrid/specs/kubernetes.yaml: one primary; one primary and one worker,
#   online and airgap) on Debian 11 and 12 VMs (testgrid/specs/os-kubernetes.yaml), and three
#   primaries (kubernetes-ha.yaml) on the netns provider, this host's own OS (three emulated
#   VMs at once exceed a 2-core machine).
# Exit 0 when every cell passed, 1 when one failed.
#   scripts/grid.sh [berth-testgrid run option…]    e.g. --accel kvm, --shard 1/3 (VM runs)
# Needs root (debootstrap), and the Debian mirror the first time (images are cached in
# .vm-cache/testgrid; BERTH_DEBIAN_MIRROR names another mirror).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(qemu-system-x86 qemu-utils debootstrap openssh-client docker-registry skopeo runc dpkg-dev)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}" >&2
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The node binary every VM downloads (glibc 2.17, so Debian 11 runs it), and the two others.
scripts/portable.sh >/dev/null
cargo build --release --locked -p berth-build -p berth-testgrid
report=testgrid-report
rm -rf "$report"
mkdir -p "$report/dist"
target/release/berth-build build addons --out "$report/dist/berth" --distro debian-12
target/release/berth-testgrid kurl-dist --out "$report/dist/kurl"
# Kubernetes from Debian's source (cached: seconds once built), and its dist.
artefacts=$(scripts/kubernetes.sh)
target/release/berth-testgrid kubernetes-dist --artefacts "$artefacts" --kurl-registry \
    --out "$report/dist/kubernetes"

status=0
# run NAME DIST OS-SPEC GRID… -- OPTION…: one part of the grid, into $report/NAME.
run() {
    local name=$1 dist=$2 os_spec=$3 grids=()
    shift 3
    while [ "$1" != -- ]; do grids+=("$1"); shift; done
    shift
    target/release/berth-testgrid run "${grids[@]}" --os-spec "$os_spec" \
        --dist "$report/dist/$dist" --out "$report/$name" "$@" || status=$?
    # 1 is a failed cell, which the joined report shows; anything else stops here.
    [ "$status" -le 1 ] || exit "$status"
}
specs=testgrid/specs
run demo berth "$specs/os-debian.yaml" "$specs/demo.yaml" -- "$@"
run kurl kurl "$specs/os-debian.yaml" "$specs/kurl.yaml" -- "$@"
run kubernetes kubernetes "$specs/os-kubernetes.yaml" "$specs/kubernetes.yaml" -- "$@"
run kubernetes-netns kubernetes "$specs/os-netns.yaml" "$specs/kubernetes-ha.yaml" -- --provider netns
target/release/berth-testgrid merge "$report"/{demo,kurl,kubernetes,kubernetes-netns} \
    --out "$report" || status=$?
exit "$status"
