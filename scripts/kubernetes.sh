#!/usr/bin/env bash
# Builds Kubernetes v1.20.2 from Debian bookworm's source package `kubernetes`
# (1.20.5+really1.20.2: the whole upstream tree with vendor/) with Debian's Go, offline, into a
# cache outside the checkout, keyed by the source's digest and this recipe's version: a second
# run finds it and takes seconds. Prints the folder it fills:
#   bin/      kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler
#             kube-proxy (kubelet static: it must start on Debian 11's glibc 2.31), pause
#   images/   OCI archives under kURL's names and tags (k8s.gcr.io/kube-*:v1.20.2, pause:3.2,
#             etcd:3.4.13-0 from Debian's etcd-server), byte for byte the same on a rebuild
#   assets/   the release tarballs kURL's Manifest names, where they can be made here
#   debs/     kubelet and kubectl as host packages, in an apt repository with a suite for
#             Debian 12 (bookworm) and one for Debian 11 (bullseye)
#   UNBUILT   what kURL's Manifest names that this machine cannot build, each with why
# Environment: BERTH_KUBERNETES_CACHE (default ~/.cache/berth/kubernetes).
set -euo pipefail
checkout=$(cd "$(dirname "$0")/.." && pwd)

# Bump when what this script makes changes: the cache key includes it.
recipe=1
version=v1.20.2
source_package=kubernetes
source_version=1.20.5+really1.20.2-1.1+deb12u1
cache=${BERTH_KUBERNETES_CACHE:-$HOME/.cache/berth/kubernetes}
log() { echo "kubernetes.sh: $*" >&2; }

# --- What the build needs from Debian ------------------------------------------------------
# The deb-src entries (bookworm main, updates, security) apt-get source reads.
sources_file=/etc/apt/sources.list.d/berth-kubernetes-src.sources
needs_update=0
if ! apt-cache showsrc "$source_package" 2>/dev/null | grep -qx "Version: $source_version"; then
    cat >"$sources_file" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    needs_update=1
fi
build_packages=(golang-go golang-github-modern-go-reflect2-dev rsync jq make gcc libc6-dev dpkg-dev
    etcd-server etcd-client containernetworking-plugins iptables ipset conntrack apt-utils)
missing=()
for package in "${build_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$package")
done
if [ "$needs_update" = 1 ] || [ "${#missing[@]}" -gt 0 ]; then
    log "installing: ${missing[*]:-(deb-src entries only)}"
    apt-get update -q >&2
    [ "${#missing[@]}" -eq 0 ] ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            "${missing[@]}" >&2
fi

# --- The source, and the key of what is built from it -------------------------------------
mkdir -p "$cache/source"
dsc="$cache/source/${source_package}_${source_version}.dsc"
if [ ! -s "$dsc" ]; then
    log "downloading Debian's source package $source_package $source_version"
    (cd "$cache/source" && apt-get source --download-only "$source_package=$source_version" >&2)
fi
# The .dsc names every file of the source by SHA-256; check them, so a damaged download is
# found here and not as a strange build failure.
awk '/^Checksums-Sha256:/ { on = 1; next } /^[^ ]/ { on = 0 } on { print $1 "  " $3 }' "$dsc" |
    (cd "$cache/source" && sha256sum --check --quiet -) ||
    { log "the source files do not match $dsc: remove $cache/source and run again"; exit 1; }
reflect2_version=$(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev)
go_version=$(go version | awk '{ print $3 }')
# The binaries (the 10-minute part) are keyed by what they are built from; the rest, by that
# and the files that say how it is packaged, so that changing those redoes only the rest.
binaries_key=$( { sha256sum "$dsc" | cut -d' ' -f1; echo "recipe $recipe";
    echo "reflect2 $reflect2_version"; echo "go $go_version"; } | sha256sum | cut -c1-16)
binaries_dir="$cache/binaries-$version-$binaries_key"
key=$( { echo "$binaries_key"; cd "$checkout" && sha256sum scripts/kubernetes.sh scripts/kubernetes/*.py \
    scripts/kubernetes/crictl/main.go scripts/kubernetes/cluster-dns/main.go scripts/kubernetes/kubelet.service \
    scripts/kubernetes/10-kubeadm.conf; } | sha256sum | cut -c1-16)
out="$cache/$version-$key"
if [ -e "$out/COMPLETE" ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$binaries_dir" "$out/bin" "$out/images" "$out/assets" "$out/debs"
work="$cache/work"
export GOCACHE="$cache/go-build"

# A fixed date (the Debian changelog's) for everything stamped with one: the binaries' build
# date, image creation times, tar entries.
SOURCE_DATE_EPOCH=$(cd "$cache/source" && tar xJf "${source_package}_${source_version}.debian.tar.xz" \
    -O debian/changelog | dpkg-parsechangelog -l- -STimestamp)
export SOURCE_DATE_EPOCH

# --- Binaries ---------------------------------------------------------------------------------
tree="$work/kubernetes-1.20.2"
# tree_make WHAT STATIC: the tree's make rules for the packages WHAT, with GOPATH laid out as
# Debian's debian/rules does and the version stamped as upstream's release; the programs in
# STATIC (which the rules would link with cgo) are linked statically.
tree_make() {
    (
        cd "$tree/.go/src/k8s.io/kubernetes"
        GOPATH="$tree/.go" KUBE_GIT_VERSION=$version KUBE_GIT_MAJOR=1 KUBE_GIT_MINOR=20 \
            KUBE_GIT_TREE_STATE=clean KUBE_GIT_COMMIT=faecb196815e248d3ecfb03c680a4507229c2a56 \
            KUBE_STATIC_OVERRIDES=$2 make WHAT="$1" >&2
    )
}
binaries=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
have_binaries=1
for binary in "${binaries[@]}"; do [ -x "$binaries_dir/$binary" ] || have_binaries=0; done
# unpack_tree: the source tree in $work, with Debian's patches and the fixes below.
unpack_tree() {
    rm -rf "$work" && mkdir -p "$work"
    log "unpacking the source (with Debian's patches)"
    (cd "$work" && dpkg-source --no-check -x "$dsc" kubernetes-1.20.2 >&2)
    # Go 1.19 and the vendored modern-go/reflect2 v1.0.1 make kubeadm panic in json-iterator
    # ("unexpected fault address"): use Debian's 1.0.2, as Debian builds its Go packages.
    rm -rf "$tree/vendor/github.com/modern-go/reflect2"
    cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$tree/vendor/github.com/modern-go/"
    sed -i 's#github.com/modern-go/reflect2 v1.0.1#github.com/modern-go/reflect2 v1.0.2#' \
        "$tree/go.mod" "$tree/vendor/modules.txt"
    # The tree's make rules build with GOPATH set up as Debian's debian/rules does.
    mkdir -p "$tree/.go/src/k8s.io" && ln -sfn ../../.. "$tree/.go/src/k8s.io/kubernetes"
}
if [ "$have_binaries" = 0 ]; then
    unpack_tree
    log "building ${binaries[*]} (about 10 minutes on 2 cores the first time)"
    tree_make "${binaries[*]/#/cmd/}" kubelet
    for binary in "${binaries[@]}"; do
        install -m 0755 "$tree/_output/local/bin/linux/amd64/$binary" "$binaries_dir/$binary"
    done
fi
for binary in "${binaries[@]}"; do
    ln -f "$binaries_dir/$binary" "$out/bin/$binary"
done
"$out/bin/kubeadm" version -o short | grep -qx "$version" ||
    { log "kubeadm says $("$out/bin/kubeadm" version -o short), not $version"; exit 1; }

# crictl: kubeadm calls it (info, pods, stopp, rmp, pull, inspecti) and kURL's scripts do.
# cri-tools' source is not in any package source this machine reaches, so the subset those
# callers use is built from the tree's own CRI client (scripts/kubernetes/crictl).
if [ ! -x "$out/bin/crictl" ]; then
    [ -d "$tree/.go" ] || unpack_tree
    mkdir -p "$tree/cmd/crictl"
    cp "$checkout/scripts/kubernetes/crictl/main.go" "$tree/cmd/crictl/main.go"
    tree_make cmd/crictl crictl
    install -m 0755 "$tree/_output/local/bin/linux/amd64/crictl" "$out/bin/crictl"
fi
# cluster-dns: the cluster's DNS under a name of its own, since CoreDNS cannot be built here
# (scripts/kubernetes/cluster-dns), from the tree's vendored client-go and miekg/dns.
if [ ! -x "$out/bin/cluster-dns" ]; then
    [ -d "$tree/.go" ] || unpack_tree
    mkdir -p "$tree/cmd/cluster-dns"
    cp "$checkout/scripts/kubernetes/cluster-dns/main.go" "$tree/cmd/cluster-dns/main.go"
    tree_make cmd/cluster-dns cluster-dns
    install -m 0755 "$tree/_output/local/bin/linux/amd64/cluster-dns" "$out/bin/cluster-dns"
fi
# pause: the tree's own program, static, as upstream's pause image carries it.
if [ ! -x "$out/bin/pause" ]; then
    mkdir -p "$work"
    tar xzf "$cache/source/${source_package}_${source_version%-*}.orig.tar.gz" -O \
        kubernetes-1.20.2/build/pause/linux/pause.c >"$work/pause.c"
    gcc -static -Os -DVERSION=3.2 -o "$out/bin/pause" "$work/pause.c"
    strip "$out/bin/pause"
fi

# --- Debian packages the images and the apt repository take --------------------------------
debs="$work/debs"
mkdir -p "$debs"
# deb_file PACKAGE: the .deb of PACKAGE in $debs, downloaded at the version apt offers now.
deb_file() {
    local file
    file=$(find "$debs" -name "${1}_*.deb" | head -1)
    if [ -z "$file" ]; then
        (cd "$debs" && apt-get download -q "$1" >&2)
        file=$(find "$debs" -name "${1}_*.deb" | head -1)
    fi
    echo "$file"
}
# extract ROOTFS PACKAGE...: the packages' files in ROOTFS, as dpkg would place them.
extract() {
    local rootfs=$1 package
    shift
    for package in "$@"; do
        dpkg-deb -x "$(deb_file "$package")" "$rootfs"
    done
}

# --- Images under kURL's names ----------------------------------------------------------------
image() { python3 "$checkout/scripts/kubernetes/oci-image.py" "$@"; }
images="$out/images"
rootfs="$work/rootfs"
# new_root: an empty image root with /usr/local/bin, where kubeadm's manifests call programs.
new_root() {
    rm -rf "$rootfs" && mkdir -p "$rootfs/usr/local/bin" "$rootfs/tmp" && chmod 1777 "$rootfs/tmp"
}
for component in kube-apiserver kube-controller-manager kube-scheduler; do
    [ -s "$images/$component.tar" ] && continue
    new_root
    cp "$out/bin/$component" "$rootfs/usr/local/bin/"
    image "$rootfs" "k8s.gcr.io/$component:$version" "$images/$component.tar"
done
if [ ! -s "$images/cluster-dns.tar" ]; then
    new_root
    cp "$out/bin/cluster-dns" "$rootfs/usr/local/bin/"
    image "$rootfs" "docker.io/berth/cluster-dns:1.0.0" "$images/cluster-dns.tar" \
        --entrypoint '["/usr/local/bin/cluster-dns"]'
fi
if [ ! -s "$images/pause.tar" ]; then
    rm -rf "$rootfs" && mkdir -p "$rootfs"
    cp "$out/bin/pause" "$rootfs/pause"
    image "$rootfs" "k8s.gcr.io/pause:3.2" "$images/pause.tar" --entrypoint '["/pause"]'
fi
# kube-proxy runs iptables, ipset and conntrack: Debian's, with the libraries they load, and
# netbase's /etc/protocols, where ipset reads what `tcp` in `10.96.0.1,tcp:443` is (without it
# every entry of kube-proxy's sets fails, the node's own connections to a Service are not
# masqueraded, and a Service whose pods run on other nodes does not answer the node).
# iptables is the nft variant, as on Debian 11 and 12 hosts, whose kubelet writes its own
# rules through the host's iptables (nft by default there).
if [ ! -s "$images/kube-proxy.tar" ]; then
    new_root
    cp "$out/bin/kube-proxy" "$rootfs/usr/local/bin/"
    extract "$rootfs" libc6 iptables libip4tc2 libip6tc2 libxtables12 libnftnl11 libmnl0 \
        libnetfilter-conntrack3 libnfnetlink0 ipset libipset13 conntrack \
        libnetfilter-cthelper0 libnetfilter-queue1 netbase
    grep -qE '^tcp[[:space:]]+6[[:space:]]' "$rootfs/etc/protocols" ||
        { log "kube-proxy's image: /etc/protocols does not name tcp"; exit 1; }
    for name in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
        ln -sfn xtables-nft-multi "$rootfs/usr/sbin/$name"
    done
    rm -rf "$rootfs/usr/share/doc" "$rootfs/usr/share/man" "$rootfs/usr/share/lintian"
    for check in "/usr/sbin/iptables -V" "/usr/sbin/ipset version" "/usr/sbin/conntrack -V"; do
        # shellcheck disable=SC2086 # the check is a command line
        chroot "$rootfs" $check >/dev/null ||
            { log "kube-proxy's image: '$check' does not run inside it"; exit 1; }
    done
    image "$rootfs" "k8s.gcr.io/kube-proxy:$version" "$images/kube-proxy.tar"
fi
# etcd: kURL names etcd 3.4.13-0; Debian's etcd-server is 3.4.23 of the same minor, which
# kubeadm v1.20 drives with the same flags. The image keeps kURL's name and says what it holds.
if [ ! -s "$images/etcd.tar" ]; then
    new_root
    extract "$rootfs" libc6 etcd-server etcd-client
    mv "$rootfs/usr/bin/etcd" "$rootfs/usr/bin/etcdctl" "$rootfs/usr/local/bin/"
    rm -rf "${rootfs:?}/usr/share" "$rootfs/etc/default" "$rootfs/lib/systemd" "${rootfs:?}/usr/bin"
    chroot "$rootfs" /usr/local/bin/etcd --version >/dev/null ||
        { log "etcd's image: etcd does not run inside it"; exit 1; }
    image "$rootfs" "k8s.gcr.io/etcd:3.4.13-0" "$images/etcd.tar" \
        --env "BERTH_ETCD_VERSION=$(dpkg-deb -f "$(deb_file etcd-server)" Version)"
fi

# --- Release assets, as the URLs of kURL's Manifest name them ----------------------------------
assets="$out/assets"
install -m 0755 "$out/bin/kubeadm" "$assets/kubeadm"
# crictl's release tarball holds the one program at its root.
rm -rf "$work/crictl" && mkdir -p "$work/crictl" && install -m 0755 "$out/bin/crictl" "$work/crictl/"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$work/crictl" -cf - crictl | gzip -n >"$assets/crictl-v1.20.0-linux-amd64.tar.gz"

# --- kubelet and kubectl as host packages, in an apt repository ------------------------------
# As upstream's apt repository ships them: kubelet with its systemd unit and kubeadm's drop-in;
# kubernetes-cni (here the CNI plugins at /opt/cni/bin, where the kubelet and containerd look,
# from Debian's containernetworking-plugins); kubectl (Debian's kubernetes-client, which is
# v1.20.2 itself in bookworm and bullseye). The repository holds their dependency closure too,
# and containerd's and runc's (which the containerd add-on installs), so a build that resolves
# them from it alone, as from a private mirror, finds everything. It has two suites: bookworm
# (Debian 12) and bullseye (Debian 11), each with its own closure (pool/<suite>) beside the two
# packages made here (pool/all: the kubelet is static, and kubernetes-cni holds links only).
repository="$out/debs"
pool="$repository/pool"
rm -rf "$repository"
mkdir -p "$pool/all"
package_root="$work/package"
# make_deb NAME VERSION DEPENDS DESCRIPTION: a .deb of $package_root, reproducibly.
make_deb() {
    mkdir -p "$package_root/DEBIAN"
    printf '%s\n' "Package: $1" "Version: $2" "Architecture: amd64" \
        "Maintainer: Berth <berth@localhost>" "Depends: $3" "Section: admin" \
        "Priority: optional" "Description: $4" >"$package_root/DEBIAN/control"
    find "$package_root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    dpkg-deb --root-owner-group -Zxz --build "$package_root" "$pool/all/${1}_${2}_amd64.deb" >/dev/null
    rm -rf "$package_root"
}
rm -rf "$package_root"
mkdir -p "$package_root/usr/bin" "$package_root/lib/systemd/system/kubelet.service.d"
install -m 0755 "$out/bin/kubelet" "$package_root/usr/bin/kubelet"
install -m 0644 "$checkout/scripts/kubernetes/kubelet.service" \
    "$package_root/lib/systemd/system/kubelet.service"
install -m 0644 "$checkout/scripts/kubernetes/10-kubeadm.conf" \
    "$package_root/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
make_deb kubelet 1.20.2-00 \
    "iptables (>= 1.4.21), kubernetes-cni (>= 0.8.7), iproute2, socat, util-linux, mount, ebtables, ethtool, conntrack" \
    "Kubernetes node agent v1.20.2, built from Debian's kubernetes source package"
mkdir -p "$package_root/opt/cni/bin"
for plugin in /usr/lib/cni/*; do
    ln -s "$plugin" "$package_root/opt/cni/bin/$(basename "$plugin")"
done
make_deb kubernetes-cni 0.8.7-00 "containernetworking-plugins" \
    "CNI plugins where the kubelet and containerd look (/opt/cni/bin), from Debian's containernetworking-plugins"

# suite SUITE APT-OPTION...: pool/SUITE gets everything the packages above, kubectl, containerd
# and runc need from SUITE (apt with APT-OPTIONs reads it), and dists/SUITE indexes it with
# pool/all.
suite() {
    local name=$1 package
    shift
    local closure available=()
    mapfile -t closure < <(apt-cache "$@" depends --recurse --no-recommends --no-suggests \
        --no-conflicts --no-breaks --no-replaces --no-enhances iptables iproute2 socat util-linux \
        mount ebtables ethtool conntrack containernetworking-plugins kubernetes-client containerd \
        runc | grep -E '^[a-z0-9]' | sort -u)
    for package in "${closure[@]}"; do
        apt-cache "$@" show --no-all-versions "$package" >/dev/null 2>&1 && available+=("$package")
    done
    mkdir -p "$pool/$name"
    (cd "$pool/$name" && apt-get "$@" download -q "${available[@]}" >&2)
    (
        cd "$repository"
        mkdir -p "dists/$name/main/binary-amd64"
        # (A second path would be read as an override file: one run each.)
        { apt-ftparchive packages pool/all && apt-ftparchive packages "pool/$name"; } \
            >"dists/$name/main/binary-amd64/Packages"
        gzip -n -k -f "dists/$name/main/binary-amd64/Packages"
        apt-ftparchive -o "APT::FTPArchive::Release::Suite=$name" \
            -o "APT::FTPArchive::Release::Codename=$name" \
            -o APT::FTPArchive::Release::Components=main \
            -o APT::FTPArchive::Release::Architectures=amd64 release "dists/$name" >Release.new
        mv Release.new "dists/$name/Release"
        # Unsigned, as a private mirror often is: a build reads it with no keyring.
        cp "dists/$name/Release" "dists/$name/InRelease"
    )
}
# bookworm is this machine's own; bullseye is read through apt settings of its own.
suite bookworm
bullseye_apt="$cache/apt-bullseye"
mkdir -p "$bullseye_apt/lists/partial" "$bullseye_apt/archives/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
printf '%s\n' \
    "deb [signed-by=$keyring] http://deb.debian.org/debian bullseye main" \
    "deb [signed-by=$keyring] http://deb.debian.org/debian bullseye-updates main" \
    "deb [signed-by=$keyring] http://deb.debian.org/debian-security bullseye-security main" \
    >"$bullseye_apt/sources.list"
: >"$bullseye_apt/status"
bullseye=(-o "Dir::Etc::SourceList=$bullseye_apt/sources.list" -o "Dir::Etc::SourceParts=$bullseye_apt/none"
    -o "Dir::State::Lists=$bullseye_apt/lists" -o "Dir::State::status=$bullseye_apt/status"
    -o "Dir::Cache::archives=$bullseye_apt/archives" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
    -o APT::Architecture=amd64)
apt-get "${bullseye[@]}" update -q >&2
suite bullseye "${bullseye[@]}"

# --- What kURL's packages/kubernetes/1.20.2/Manifest names that is not made here -------------
printf '%s\n' \
    "k8s.gcr.io/coredns:1.7.0: CoreDNS v1.7.0's source has no vendor/ and its modules are in no package source this machine reaches; the cluster's DNS is cluster-dns (docker.io/berth/cluster-dns:1.0.0, from scripts/kubernetes/cluster-dns), deployed by the kubernetes hooks when the package names it" \
    "kustomize-v2.0.3, kustomize-v3.5.4.tar.gz: kustomize's releases are in no package source this machine reaches; kubectl's own kustomize (kubectl kustomize) serves" \
    "crictl-v1.20.0-linux-amd64.tar.gz: cri-tools' source is not reachable here; the asset holds the crictl subset kubeadm and kURL's scripts call, built from the Kubernetes tree's CRI client" \
    "k8s.gcr.io/etcd:3.4.13-0: holds Debian's etcd 3.4.23 (the same minor) under kURL's name" \
    >"$out/UNBUILT"
touch "$out/COMPLETE"
# Earlier builds of the rest go; the binaries they share stay.
find "$cache" -maxdepth 1 -name "$version-*" ! -path "$out" -exec rm -rf {} +
log "built $(find "$out/bin" -type f -printf '%f ')"
echo "$out"
