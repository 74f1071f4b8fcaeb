# shellcheck shell=bash
# Host package helpers with kURL's names and signatures. A package carries, for each target
# distro, a local repository in `<distro>/archives/`: the .deb files and their Packages index,
# or the .rpm files and their repodata/. These helpers point apt, dnf or yum at that repository
# alone — no network, and the host's own sources untouched — so the host's package manager
# installs the packages and keeps its dependency graph whole.

# The target distro name of this host, as packages name their folders: debian-12, ubuntu-22.04,
# rhel-9 (also for centos, rocky, almalinux), ol-7, amazon-2023.
function host_packages_distro() {
    local os_release="${BERTH_OS_RELEASE:-/etc/os-release}"
    local ID="" VERSION_ID=""
    # shellcheck disable=SC1090
    . "$os_release"
    case "$ID" in
        ubuntu) echo "ubuntu-$VERSION_ID" ;;
        debian) echo "debian-${VERSION_ID%%.*}" ;;
        rhel | centos | rocky | almalinux) echo "rhel-${VERSION_ID%%.*}" ;;
        ol) echo "ol-${VERSION_ID%%.*}" ;;
        amzn) echo "amazon-$VERSION_ID" ;;
        *) echo "$ID-$VERSION_ID" ;;
    esac
}

# install_host_archives DIR PACKAGE…: installs the packages from DIR/<distro>/archives.
function install_host_archives() {
    _berth_install_host_packages "$1" /archives "${@:2}"
}

# install_host_packages DIR PACKAGE…: installs the packages from DIR/<distro>.
function install_host_packages() {
    _berth_install_host_packages "$1" "" "${@:2}"
}

function _berth_install_host_packages() {
    local dir="$1" suffix="$2"
    local packages=("${@:3}")
    local distro
    distro="$(host_packages_distro)"
    local repository="$dir/$distro$suffix"
    if [ ! -d "$repository" ]; then
        local offered
        offered="$(cd "$dir" && for d in */; do [ -d "$d${suffix#/}" ] && printf '%s ' "${d%/}"; done)"
        bail "$dir has no host packages for $distro; it has: ${offered:-none}"
    fi
    if [ "${#packages[@]}" -eq 0 ]; then
        return 0
    fi
    logStep "Installing host packages ${packages[*]} from $repository"
    if [ -f "$repository/Packages" ]; then
        commandExists apt-get || bail "installing host packages on $distro needs apt-get; this host has none"
        _berth_apt_install "$repository" "${packages[@]}"
    elif [ -f "$repository/repodata/repomd.xml" ]; then
        if commandExists dnf; then
            _berth_yum_install dnf "$repository" "${packages[@]}"
        elif commandExists yum; then
            _berth_yum_install yum "$repository" "${packages[@]}"
        else
            bail "installing host packages on $distro needs dnf or yum; this host has neither"
        fi
    else
        bail "$repository holds neither a Packages index nor repodata/: it is not a package repository"
    fi
    logSuccess "Host packages ${packages[*]} installed"
}

# apt with a source list, parts and lists of its own: it reads only the package's repository.
function _berth_apt_install() {
    local repository="$1"
    local work
    work="$(mktemp -d)"
    mkdir -p "$work/lists/partial"
    echo "deb [trusted=yes] file:$repository ./" >"$work/sources.list"
    local options=(
        -o "Dir::Etc::SourceList=$work/sources.list"
        -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$work/lists"
        -o "Dir::Cache::pkgcache="
        -o "Dir::Cache::srcpkgcache="
        -o "APT::Get::List-Cleanup=0"
        -o "Acquire::Languages=none"
    )
    local status=0
    apt-get "${options[@]}" -q update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get \
        "${options[@]}" -q -y --no-install-recommends install "${@:2}" || status=$?
    rm -rf "$work"
    return "$status"
}

# dnf or yum with a configuration of its own: no repository but the package's, a cache of its
# own, weak dependencies off. The release comes from os-release, as the host would give it.
function _berth_yum_install() {
    local manager="$1" repository="$2"
    local os_release="${BERTH_OS_RELEASE:-/etc/os-release}"
    local release
    # shellcheck disable=SC1090
    release="$(. "$os_release" && echo "${VERSION_ID:-}")"
    local work
    work="$(mktemp -d)"
    mkdir -p "$work/repos.d"
    cat >"$work/berth.conf" <<EOF
[main]
reposdir=$work/repos.d
cachedir=$work/cache
keepcache=0
gpgcheck=0
install_weak_deps=False
[berth-local]
name=Berth add-on packages
baseurl=file://$repository
enabled=1
gpgcheck=0
EOF
    local status=0
    "$manager" -c "$work/berth.conf" --releasever="$release" --disablerepo='*' \
        --enablerepo=berth-local -q -y install "${@:3}" || status=$?
    rm -rf "$work"
    return "$status"
}
