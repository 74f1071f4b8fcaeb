#!/usr/bin/env bash
# The whole grid on this machine: Berth's demo (testgrid/specs/demo.yaml) and kURL's
# containerd and collectd (testgrid/specs/kurl.yaml) on Debian 11, 12 and 13 VMs booted with
# QEMU (testgrid/specs/os-debian.yaml), one primary and one secondary, online and airgap, each
# installed, joined, its secondary rebooted and upgraded. The report: testgrid-report/index.html
# and testgrid-report/junit.xml. Exit 0 when every cell passed, 1 when one failed.
#   scripts/grid.sh [berth-testgrid run option…]    e.g. --accel kvm, --shard 1/3
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

status=0
for grid in demo:berth kurl:kurl; do
    target/release/berth-testgrid run "testgrid/specs/${grid%%:*}.yaml" \
        --os-spec testgrid/specs/os-debian.yaml --dist "$report/dist/${grid#*:}" \
        --out "$report/${grid%%:*}" "$@" || status=$?
    # 1 is a failed cell, which the joined report shows; anything else stops here.
    [ "$status" -le 1 ] || exit "$status"
done
target/release/berth-testgrid merge "$report/demo" "$report/kurl" --out "$report" || status=$?
exit "$status"
