#!/usr/bin/env bash
# Installs what the tests need (idempotently) and runs the whole suite.
# The tests start real servers on loopback: docker-registry, containerd + runc, buildah, skopeo.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(docker-registry containerd runc buildah skopeo busybox-static apache2-utils)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "installing: ${missing[*]}" >&2
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast "$@"
else
    cargo test --workspace --no-fail-fast "$@"
fi
