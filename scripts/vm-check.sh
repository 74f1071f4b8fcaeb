#!/usr/bin/env bash
# Boots a Debian VM (QEMU, software emulation) and has the portable node binary install the
# `hello` add-on, report status, and join a second Berth root there, as a node would; fails
# unless all four steps succeed. SUITE is a Debian release deb.debian.org serves (bullseye,
# the oldest, glibc 2.31; bookworm; trixie); default bullseye.
#   scripts/vm-check.sh [SUITE]
# The VM's root is made by debootstrap (cached in .vm-cache/SUITE-root); it has no network
# route out and runs its check once at boot, writing to its serial console, then powers off.
# Needs root, debootstrap and qemu-system-x86 (installed when missing), and the portable
# binary (scripts/portable.sh builds it when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:-bullseye}
mirror=${BERTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache="$PWD/.vm-cache"
root="$cache/$suite-root"

for tool in debootstrap:debootstrap qemu-system-x86_64:qemu-system-x86 mkfs.ext4:e2fsprogs; do
    command -v "${tool%%:*}" >/dev/null 2>&1 ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${tool#*:}" >&2
done
berth=target/x86_64-unknown-linux-gnu/release/berth
[ -x "$berth" ] || berth=$(scripts/portable.sh)
if [ ! -e "$root/boot" ] || ! ls "$root"/boot/vmlinuz-* >/dev/null 2>&1; then
    rm -rf "$root"
    mkdir -p "$cache"
    # A root debootstrap did not finish is not kept (one cut short is redone next time too:
    # it has no kernel).
    debootstrap --variant=minbase --include=systemd-sysv,udev,dbus,iproute2,linux-image-cloud-amd64,initramfs-tools \
        "$suite" "$root" "$mirror" >&2 || {
        rm -rf "$root"
        echo "vm-check: debootstrap could not make a $suite root from $mirror" >&2
        exit 1
    }
fi

work=$(mktemp -d /tmp/berth-vm.XXXXXX)
trap '[ -f "$work/vm.pid" ] && kill "$(cat "$work/vm.pid")" 2>/dev/null; rm -rf "$work"' EXIT
# What the VM gets: a dist of the hello add-on built by berth-build, a spec, the binary.
cargo build --release --locked -p berth-build --bin berth-build >&2
mkdir -p "$work/repository/addons"
cp -r addons/hello "$work/repository/addons/"
target/release/berth-build build "$work/repository/addons" --out "$work/dist" >&2
printf 'apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  hello: {version: 1.0.0}\n' >"$work/spec.yaml"
cp -a "$root" "$work/root"
vm="$work/root"
echo "/dev/vda / ext4 rw 0 1" >"$vm/etc/fstab"
: >"$vm/etc/machine-id"
ln -sf /dev/null "$vm/etc/systemd/system/systemd-firstboot.service"
install -m 0755 "$berth" "$vm/usr/local/bin/berth"
mkdir -p "$vm/root/berth" "$vm/etc/systemd/system/multi-user.target.wants"
cp -r "$work/dist" "$work/spec.yaml" "$vm/root/berth/"
cat >"$vm/root/berth-check.sh" <<'EOF'
#!/bin/bash
exec >/dev/ttyS0 2>&1
echo "BERTH-CHECK: $(ldd --version | head -n 1)"
cd /root/berth || exit 1
berth install --spec spec.yaml --dist dist && echo "BERTH-CHECK: install ok"
berth status && echo "BERTH-CHECK: status ok"
params=$(berth join-command --airgap | sed 's/.*bash -s airgap//')
# shellcheck disable=SC2086 # the join command's words, as it printed them
BERTH_ROOT=/var/tmp/node2 berth join --spec spec.yaml --dist dist $params && echo "BERTH-CHECK: join ok"
BERTH_ROOT=/var/tmp/node2 berth status && echo "BERTH-CHECK: join status ok"
echo "BERTH-CHECK: end"
systemctl poweroff
EOF
printf '[Unit]\nAfter=multi-user.target\n[Service]\nType=oneshot\nExecStart=/bin/bash /root/berth-check.sh\n[Install]\nWantedBy=multi-user.target\n' \
    >"$vm/etc/systemd/system/berth-check.service"
ln -sf /etc/systemd/system/berth-check.service "$vm/etc/systemd/system/multi-user.target.wants/"
mkfs.ext4 -q -d "$vm" "$work/disk.raw" 2G
# Two CPUs and 4.5 GiB: the built-in host preflights fail a node with less.
kernel=$(ls "$vm"/boot/vmlinuz-*)
initrd=$(ls "$vm"/boot/initrd.img-*)
qemu-system-x86_64 -accel tcg -M pc -cpu max -smp 2 -m 4608 -display none \
    -serial "file:$work/serial" -pidfile "$work/vm.pid" -daemonize \
    -kernel "$kernel" -initrd "$initrd" \
    -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.hostname=berth-$suite" \
    -drive "file=$work/disk.raw,if=virtio,format=raw,cache=unsafe" \
    -netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0
for _ in $(seq 600); do
    grep -aq "BERTH-CHECK: end" "$work/serial" 2>/dev/null && break
    sleep 1
done
sed -n '/BERTH-CHECK: /p' "$work/serial" | tr -d '\r'
for step in "install ok" "status ok" "join ok" "join status ok"; do
    if ! grep -aq "BERTH-CHECK: $step" "$work/serial"; then
        echo "vm-check ($suite): the step '$step' did not succeed; the VM's console:" >&2
        tail -n 80 "$work/serial" >&2
        exit 1
    fi
done
echo "vm-check ($suite): the portable berth installs, reports status and joins"
