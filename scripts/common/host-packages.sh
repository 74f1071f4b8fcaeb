# shellcheck shell=bash
# Host package helpers with kURL's names and signatures: installing an add-on's .deb and .rpm
# files for this host's distro, kURL's distro predicates, and online installs of one package.

# An add-on carries its packages per distro in DIR/<distro>[/archives]/, in one of two forms:
#  - Berth's local repositories (what Berth's builder writes): the files and their index, a
#    Packages file or repodata/. apt, dnf or yum is pointed at that repository alone, with a
#    configuration of its own: no network, the host's own sources untouched, and the host's
#    package manager resolves the dependencies.
#  - kURL's folders: a flat folder of .deb files (installed all together with dpkg, as kURL
#    does), or .rpm files with repodata/ (installed as above) or without (a local install).
# The folder is the one kURL picks from LSB_DIST and DIST_VERSION (ubuntu-22.04, rhel-8, ol-8
# with a fallback to rhel-8, rhel-9 for RHEL 10, rhel-7[-force] for Amazon Linux 2…), or, when it
# is a Berth repository, the one host_packages_distro names (debian-12, rhel-10, amazon-2).
# A distro with no folder installs nothing, as in kURL: the log says so and the hook goes on.

# host_packages_distro: prints the distro folder name Berth's builder gives this host:
# debian-12, ubuntu-22.04, rhel-9 (also for centos, rocky, almalinux), ol-8, amazon-2023.
# From the distro detectLsbDist found as the library was sourced (LSB_DIST, DIST_VERSION…).
function host_packages_distro() {
    case "${LSB_DIST:-}" in
        ubuntu) echo "ubuntu-${DIST_VERSION:-}" ;;
        debian) echo "debian-${DIST_VERSION_MAJOR:-}" ;;
        rhel | centos | rocky | almalinux) echo "rhel-${DIST_VERSION_MAJOR:-}" ;;
        ol) echo "ol-${DIST_VERSION_MAJOR:-}" ;;
        amzn) echo "amazon-${DIST_VERSION:-}" ;;
        *) echo "${LSB_DIST:-}-${DIST_VERSION:-}" ;;
    esac
}

# is_rhel_9_variant: whether the host is RHEL 9 or 10 or a rebuild (centos, ol, rocky, almalinux).
function is_rhel_9_variant() {
    if [ "${DIST_VERSION_MAJOR:-}" != "9" ] && [ "${DIST_VERSION_MAJOR:-}" != "10" ]; then
        return 1
    fi
    case "${LSB_DIST:-}" in
        centos | rhel | ol | rocky | almalinux) return 0 ;;
    esac
    return 1
}

# is_amazon_2023: whether the host is Amazon Linux 2023.
function is_amazon_2023() {
    [ "${LSB_DIST:-}" = "amzn" ] && [ "${DIST_VERSION_MAJOR:-}" = "2023" ]
}

# is_ubuntu_2404: whether the host is Ubuntu 24.04.
function is_ubuntu_2404() {
    [ "${LSB_DIST:-}" = "ubuntu" ] && [ "${DIST_VERSION_MAJOR:-}" = "24" ]
}

# is_ubuntu_2604: whether the host is Ubuntu 26.04.
function is_ubuntu_2604() {
    [ "${LSB_DIST:-}" = "ubuntu" ] && [ "${DIST_VERSION_MAJOR:-}" = "26" ]
}

# host_packages_shipped: whether kURL ships host packages for this distro: not for the RHEL 9
# family, Amazon Linux 2023, Ubuntu 24.04 and 26.04, whose own repositories provide them.
function host_packages_shipped() {
    if is_rhel_9_variant || is_amazon_2023 || is_ubuntu_2404 || is_ubuntu_2604; then
        return 1
    fi
    return 0
}

# use_os_containerd: whether containerd comes from the distro rather than the add-on (Amazon
# Linux 2023, Ubuntu 24.04 and 26.04).
function use_os_containerd() {
    ! host_packages_shipped && ! is_rhel_9_variant
}

# install_host_archives DIR PACKAGE…: installs the packages from DIR/<distro>/archives.
function install_host_archives() {
    _install_host_packages "$1" /archives "${@:2}"
}

# install_host_packages DIR PACKAGE…: installs the packages from DIR/<distro>.
function install_host_packages() {
    _install_host_packages "$1" "" "${@:2}"
}

# rpm_force_install_host_archives DIR PACKAGE…: force-installs DIR/rhel-7-force/archives/*.rpm.
function rpm_force_install_host_archives() {
    _rpm_force_install_host_packages "$1" /archives "${@:2}"
}

# rpm_force_install_host_packages DIR PACKAGE…: force-installs DIR/rhel-7-force/*.rpm.
function rpm_force_install_host_packages() {
    _rpm_force_install_host_packages "$1" "" "${@:2}"
}

# dpkg_install_host_archives DIR PACKAGE…: installs DIR/ubuntu-<version>/archives with dpkg
# (whatever LSB_DIST is; callers check it).
function dpkg_install_host_archives() {
    _dpkg_install_host_packages "$1" /archives "${@:2}"
}

# dpkg_install_host_packages DIR PACKAGE…: installs DIR/ubuntu-<version> with dpkg.
function dpkg_install_host_packages() {
    _dpkg_install_host_packages "$1" "" "${@:2}"
}

# __berth_yum_installer DIR PREFIX PACKAGE…: kURL's choice between its EL9 (9, 10, Amazon 2023)
# and EL7/EL8 installs, by DIST_VERSION_MAJOR alone.
function __berth_yum_installer() {
    case "${DIST_VERSION_MAJOR:-}" in
        9 | 10 | 2023) _yum_install_host_packages_el9 "$@" ;;
        *) _yum_install_host_packages "$@" ;;
    esac
}

# yum_install_host_archives DIR PACKAGE…: installs the packages from DIR/<rhel folder>/archives
# with yum or dnf (whatever LSB_DIST is; callers check it).
function yum_install_host_archives() {
    __berth_yum_installer "$1" /archives "${@:2}"
}

# yum_install_host_packages DIR PACKAGE…: installs the packages from DIR/<rhel folder>.
function yum_install_host_packages() {
    __berth_yum_installer "$1" "" "${@:2}"
}

# _install_host_packages DIR PREFIX PACKAGE…: installs the packages from this distro's folder
# of DIR (PREFIX: "" or /archives): Berth's repository when there is one, else as kURL does by
# LSB_DIST; bails on a distro neither knows. Skipped with SKIP_SYSTEM_PACKAGE_INSTALL=1.
function _install_host_packages() {
    local dir="$1" prefix="$2"
    local packages=("${@:3}")
    if __berth_host_packages_skipped "${packages[@]}"; then
        return 0
    fi
    local own
    own="$dir/$(host_packages_distro)$prefix"
    if __berth_host_packages_indexed "$own"; then
        __berth_install_from_repository "$own" "${packages[@]}"
        return
    fi
    case "${LSB_DIST:-}" in
        ubuntu | debian)
            _dpkg_install_host_packages "$dir" "$prefix" "${packages[@]}"
            ;;
        centos | rhel | ol | rocky | almalinux | amzn)
            # Amazon Linux 2 takes kURL's forced rpm install when the package ships one.
            if [ "$LSB_DIST" = "amzn" ] && ! is_amazon_2023 &&
                __berth_has_files "$(__berth_realpath "$dir")/rhel-7-force$prefix" rpm; then
                _rpm_force_install_host_packages "$dir" "$prefix" "${packages[@]}"
            else
                __berth_yum_installer "$dir" "$prefix" "${packages[@]}"
            fi
            ;;
        *)
            bail "Host package install is not supported on ${LSB_DIST:-this distro} ${DIST_VERSION:-}"
            ;;
    esac
}

# __berth_host_packages_present FOLDER EXTENSION PACKAGE…: whether FOLDER holds *.EXTENSION
# files; when not, says the packages are missing there (and the caller goes on, as kURL does).
function __berth_host_packages_present() {
    local folder="$1" extension="$2"
    if __berth_has_files "$folder" "$extension"; then
        return 0
    fi
    __berth_host_packages_missing "$folder" "${@:3}"
    return 1
}

# __berth_host_packages_skipped PACKAGE…: with SKIP_SYSTEM_PACKAGE_INSTALL=1, says the packages
# are not installed (kURL's message) and succeeds; fails otherwise.
function __berth_host_packages_skipped() {
    if [ "${SKIP_SYSTEM_PACKAGE_INSTALL:-}" != "1" ]; then
        return 1
    fi
    logStep "Skipping installation of host packages: ${*//%/%%}"
}

# __berth_realpath PATH: prints PATH made absolute, whether or not it exists.
function __berth_realpath() {
    realpath -m "$1" 2>/dev/null || echo "$1"
}

# __berth_has_files FOLDER EXTENSION: whether FOLDER holds a *.EXTENSION file.
function __berth_has_files() {
    local file
    for file in "$1"/*."$2"; do
        [ -e "$file" ] && return 0
    done
    return 1
}

# __berth_host_packages_indexed FOLDER: whether FOLDER is a package repository: a Packages
# index (apt) or repodata/repomd.xml (dnf, yum).
function __berth_host_packages_indexed() {
    [ -f "$1/Packages" ] || [ -f "$1/repodata/repomd.xml" ]
}

# __berth_host_packages_missing FOLDER PACKAGE…: says FOLDER holds no packages (kURL's line on
# stdout, then which distro folders the add-on has) and succeeds: the install goes on.
function __berth_host_packages_missing() {
    local folder="$1"
    shift
    echo "Will not install host packages $*, no packages found."
    local parent distro_folder prefix="" offered=""
    parent="$(dirname "$folder")"
    distro_folder="$(basename "$folder")"
    if [ "$distro_folder" = "archives" ]; then
        prefix="archives"
        distro_folder="$(basename "$parent")"
        parent="$(dirname "$parent")"
    fi
    local candidate
    for candidate in "$parent"/*/; do
        candidate="${candidate%/}"
        if [ -d "$candidate/$prefix" ] && [ "$(basename "$candidate")" != "$distro_folder" ]; then
            offered="$offered $(basename "$candidate")"
        fi
    done
    local message
    if [ -d "$folder" ]; then
        message="$folder holds no packages; the install goes on without them"
    else
        offered="${offered# }"
        message="$parent has no host packages for $distro_folder; it has: ${offered:-none}"
    fi
    logWarn "${message//%/%%}"
}

# __berth_install_from_repository REPOSITORY PACKAGE…: installs the packages from the local
# repository with apt (a Packages index) or dnf/yum (repodata/), reading no other source.
function __berth_install_from_repository() {
    local repository="$1"
    local packages=("${@:2}")
    if [ "${#packages[@]}" -eq 0 ]; then
        return 0
    fi
    logStep "Installing host packages ${packages[*]//%/%%} from ${repository//%/%%}"
    if [ -f "$repository/Packages" ]; then
        commandExists apt-get || bail "installing host packages from $repository needs apt-get; this host has none"
        __berth_apt_install "$repository" "${packages[@]}"
    else
        local manager
        manager="$(__berth_yum_manager)" || bail "installing host packages from $repository needs dnf or yum; this host has neither"
        __berth_yum_install "$manager" "$repository" "${packages[@]}"
    fi
    logSuccess "Host packages ${packages[*]//%/%%} installed"
}

# __berth_apt_install REPOSITORY PACKAGE…: apt with a source list, parts and lists of its own:
# it reads only the package's repository.
function __berth_apt_install() {
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

# __berth_yum_manager: prints dnf, else yum; fails when the host has neither.
function __berth_yum_manager() {
    if commandExists dnf; then
        echo dnf
    elif commandExists yum; then
        echo yum
    else
        return 1
    fi
}

# __berth_yum_install MANAGER FOLDER PACKAGE…: installs PACKAGE… from the repository FOLDER;
# with dnf, containerd.io and docker-ce may replace the distro's packages (kURL's --allowerasing).
function __berth_yum_install() {
    local manager="$1" folder="$2"
    local packages=("${@:3}") options=()
    if [ "$manager" = "dnf" ] && [[ " ${packages[*]} " == *" containerd.io "* || " ${packages[*]} " == *" docker-ce "* ]]; then
        options+=(--allowerasing)
    fi
    __berth_yum_run "$manager" "$folder" "${options[@]+"${options[@]}"}" -y install "${packages[@]}"
}

# __berth_yum_run MANAGER REPOSITORY ARG…: runs dnf or yum with a configuration of its own: no
# repository but REPOSITORY (none when empty), a cache of its own, weak dependencies off, and
# kURL's amazon-id and subscription-manager plugins off. The release comes from os-release, as
# the host would give it.
function __berth_yum_run() {
    local manager="$1" repository="$2"
    shift 2
    local os_release="${BERTH_OS_RELEASE:-/etc/os-release}"
    # shellcheck disable=SC2034 # __berth_os_release sets both; only the version is read here
    local os_id os_version_id
    __berth_os_release "$os_release"
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
EOF
    local select=(--disablerepo='*')
    if [ -n "$repository" ]; then
        cat >>"$work/berth.conf" <<EOF
[berth-local]
name=Berth add-on packages
baseurl=file://$repository
enabled=1
gpgcheck=0
EOF
        select+=(--enablerepo=berth-local)
    fi
    local status=0
    "$manager" -c "$work/berth.conf" --releasever="$os_version_id" "${select[@]}" \
        --disableplugin=amazon-id,subscription-manager -q "$@" || status=$?
    rm -rf "$work"
    return "$status"
}

# _dpkg_install_host_packages DIR PREFIX PACKAGE…: installs DIR/ubuntu-<DIST_VERSION>PREFIX
# (debian-<major> on Debian): a Berth repository through apt, else every .deb of the folder
# with dpkg (up to 3 tries, as kURL), then fixes broken packages. Without .deb files it says
# so and succeeds. Skipped with SKIP_SYSTEM_PACKAGE_INSTALL=1.
function _dpkg_install_host_packages() {
    local dir="$1" prefix="$2"
    local packages=("${@:3}")
    if __berth_host_packages_skipped "${packages[@]}"; then
        return 0
    fi
    local folder="$dir/ubuntu-${DIST_VERSION:-}$prefix"
    if [ "${LSB_DIST:-}" = "debian" ]; then
        folder="$dir/debian-${DIST_VERSION_MAJOR:-}$prefix"
    fi
    if [ -f "$folder/Packages" ]; then
        __berth_install_from_repository "$folder" "${packages[@]}"
        return
    fi
    logStep "Installing host packages ${packages[*]//%/%%}"
    __berth_host_packages_present "$folder" deb "${packages[@]}" || return 0
    local attempt
    for attempt in 1 2 3; do
        # The first try can fail on pre-dependencies; a second one usually succeeds.
        if DEBIAN_FRONTEND=noninteractive dpkg --install --force-depends-version --force-confold \
            --auto-deconfigure "$folder"/*.deb; then
            break
        fi
        if [ "$attempt" -eq 3 ]; then
            logFail "Failed to install host packages ${packages[*]//%/%%}"
            return 1
        fi
        logWarn "Failed to install host packages ${packages[*]//%/%%}, retrying..."
    done
    logSuccess "Host packages ${packages[*]//%/%%} installed"
    _dpkg_apt_get_status_and_maybe_fix_broken_pkgs
}

# _dpkg_apt_get_status_and_maybe_fix_broken_pkgs: checks apt's state and, if packages are
# broken, tries `apt-get install --fix-broken --no-remove`; never fails, says what it found.
function _dpkg_apt_get_status_and_maybe_fix_broken_pkgs() {
    logStep "Checking package manager status"
    if apt-get check status; then
        logSuccess "Status checked successfully. No broken packages were found."
        return 0
    fi
    logWarn "Attempting to correct broken packages by running 'apt-get install --fix-broken --no-remove --yes'"
    DEBIAN_FRONTEND=noninteractive apt-get install --fix-broken --no-remove --yes || true
    if apt-get check status; then
        logSuccess "Broken packages fixed successfully"
        return 0
    fi
    logFail "Unable to fix broken packages. Manual intervention is required."
    logFail "Run the command 'apt-get check status' to get further information."
}

# _yum_get_host_packages_path DIR PREFIX: prints the absolute folder kURL installs rpms from:
# ol-<major> on Oracle Linux when it holds rpms, else by DIST_VERSION_MAJOR: rhel-9 (9, 10),
# amazon-2023, rhel-8, or rhel-7 for anything else.
function _yum_get_host_packages_path() {
    local dir prefix="$2" folder
    dir="$(__berth_realpath "$1")"
    if [ "${LSB_DIST:-}" = "ol" ]; then
        case "${DIST_VERSION_MAJOR:-}" in
            9 | 8) folder="$dir/ol-$DIST_VERSION_MAJOR$prefix" ;;
            *) folder="$dir/ol-7$prefix" ;;
        esac
        if __berth_has_files "$folder" rpm; then
            echo "$folder"
            return 0
        fi
    fi
    case "${DIST_VERSION_MAJOR:-}" in
        9 | 10) echo "$dir/rhel-9$prefix" ;;
        2023) echo "$dir/amazon-2023$prefix" ;;
        8) echo "$dir/rhel-8$prefix" ;;
        *) echo "$dir/rhel-7$prefix" ;;
    esac
}

# __berth_install_rpm_folder FOLDER PACKAGE…: installs the packages from FOLDER, a repository
# (repodata/) read alone, or else every .rpm in it as local files.
function __berth_install_rpm_folder() {
    local folder="$1"
    local packages=("${@:2}")
    local manager=""
    manager="$(__berth_yum_manager)" || manager=""
    if [ -n "$manager" ] && [ -f "$folder/repodata/repomd.xml" ]; then
        __berth_yum_install "$manager" "$folder" "${packages[@]}"
    elif [ -n "$manager" ]; then
        __berth_yum_run "$manager" "" -y install "$folder"/*.rpm
    else
        rpm -Uvh --replacepkgs "$folder"/*.rpm
    fi
}

# _yum_install_host_packages DIR PREFIX PACKAGE…: kURL's EL7/EL8 install from the folder
# _yum_get_host_packages_path picks: on EL7 first swaps openssl-libs to the shipped version,
# and with docker present downgrades containerd.io to the add-on's; then installs the packages
# and resets kURL's kurl.local dnf module. Without rpms it says so and succeeds. Skipped with
# SKIP_SYSTEM_PACKAGE_INSTALL=1.
function _yum_install_host_packages() {
    local dir="$1" prefix="$2"
    local packages=("${@:3}")
    if __berth_host_packages_skipped "${packages[@]}"; then
        return 0
    fi
    logStep "Installing host packages ${packages[*]//%/%%}"
    local folder
    folder="$(_yum_get_host_packages_path "$dir" "$prefix")"
    __berth_host_packages_present "$folder" rpm "${packages[@]}" || return 0
    local manager=""
    manager="$(__berth_yum_manager)" || manager=""
    if [ -n "$manager" ] && [ -f "$folder/repodata/repomd.xml" ]; then
        if [[ " ${packages[*]} " == *openssl* ]] && [[ "$(uname -r)" == *el7* ]]; then
            local available
            available="$(__berth_yum_run "$manager" "$folder" list available 2>/dev/null |
                awk '/^openssl-libs/ { print $2; exit }' | cut -c 3-)"
            if [ -n "$available" ]; then
                __berth_yum_run "$manager" "$folder" -y swap "openssl-libs-$available" openssl-libs-1.0.2k-22.el7_9
            fi
        fi
        if commandExists docker && [ -n "${CONTAINERD_VERSION:-}" ] &&
            [[ " ${packages[*]} " == *" containerd.io "* ]]; then
            local shipped="" running rpm_file
            for rpm_file in "$folder"/containerd.io*.rpm; do
                if [[ "${rpm_file##*/}" =~ [0-9]+\.[0-9]+\.[0-9]+ ]]; then
                    shipped="${BASH_REMATCH[0]}"
                    break
                fi
            done
            running="$(ctr -v 2>/dev/null | grep -o '[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*' | head -n 1 || true)"
            logStep "Downgrading containerd, $running -> $shipped"
            if [ -n "$shipped" ] && [ -n "$running" ]; then
                semverCompare "$shipped" "$running"
                if [ "$SEMVER_COMPARE_RESULT" -lt 0 ]; then
                    local downgrade=(-y downgrade)
                    if [ "$manager" = "dnf" ]; then downgrade+=(--allowerasing); fi
                    __berth_yum_run "$manager" "$folder" "${downgrade[@]}" "${packages[@]}"
                fi
            fi
            logSuccess "Downgraded containerd"
        fi
    fi
    __berth_install_rpm_folder "$folder" "${packages[@]}"
    reset_dnf_module_kurl_local
    logSuccess "Host packages ${packages[*]//%/%%} installed"
}

# _yum_install_host_packages_el9 DIR PREFIX PACKAGE…: kURL's EL9/EL10/Amazon 2023 install
# from the folder _yum_get_host_packages_path picks. Without rpms it says so and succeeds.
# Skipped with SKIP_SYSTEM_PACKAGE_INSTALL=1.
function _yum_install_host_packages_el9() {
    local dir="$1" prefix="$2"
    local packages=("${@:3}")
    if __berth_host_packages_skipped "${packages[@]}"; then
        return 0
    fi
    logStep "Installing host packages ${packages[*]//%/%%}"
    local folder
    folder="$(_yum_get_host_packages_path "$dir" "$prefix")"
    __berth_host_packages_present "$folder" rpm "${packages[@]}" || return 0
    __berth_install_rpm_folder "$folder" "${packages[@]}"
    logSuccess "Host packages ${packages[*]//%/%%} installed"
}

# _rpm_force_install_host_packages DIR PREFIX PACKAGE…: kURL's Amazon Linux 2 install: every
# rpm of DIR/rhel-7-forcePREFIX with `rpm --upgrade --force --nodeps`. Without rpms it says so
# and succeeds. Skipped with SKIP_SYSTEM_PACKAGE_INSTALL=1.
function _rpm_force_install_host_packages() {
    local dir="$1" prefix="$2"
    local packages=("${@:3}")
    if __berth_host_packages_skipped "${packages[@]}"; then
        return 0
    fi
    logStep "Installing host packages ${packages[*]//%/%%}"
    local folder
    folder="$(__berth_realpath "$dir")/rhel-7-force$prefix"
    __berth_host_packages_present "$folder" rpm "${packages[@]}" || return 0
    rpm --upgrade --force --nodeps --nosignature "$folder"/*.rpm
    logSuccess "Host packages ${packages[*]//%/%%} installed"
}

# reset_dnf_module_kurl_local: resets the kurl.local dnf module kURL's EL8 packages enable,
# so a later `yum update` resolves; errors are ignored.
function reset_dnf_module_kurl_local() {
    if commandExists yum; then
        yum module reset -y kurl.local >/dev/null 2>&1 || true
    fi
}

# ensure_host_package YUM_PACKAGE APT_PACKAGE: installs the distro's package from the host's
# own repositories unless it is installed (empty or `skip`: nothing to do for that family);
# bails on other distros or when the install fails. SKIP_SYSTEM_PACKAGE_INSTALL is not read,
# as in kURL.
function ensure_host_package() {
    local yum_package="$1" apt_package="$2"
    case "${LSB_DIST:-}" in
        ubuntu | debian)
            if [ -n "$apt_package" ] && [ "$apt_package" != "skip" ]; then
                _apt_ensure_host_package "$apt_package"
            fi
            ;;
        centos | rhel | ol | rocky | almalinux | amzn)
            if [ -n "$yum_package" ] && [ "$yum_package" != "skip" ]; then
                _yum_ensure_host_package "$yum_package"
            fi
            ;;
        *)
            bail "Host package checks are not supported on ${LSB_DIST:-this distro} ${DIST_VERSION:-}"
            ;;
    esac
}

# _apt_ensure_host_package PACKAGE: installs PACKAGE with apt unless installed; bails on failure.
function _apt_ensure_host_package() {
    local package="$1"
    if apt_is_host_package_installed "$package"; then
        return 0
    fi
    logStep "Installing host package $package"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y "$package"; then
        logFail "Failed to install host package $package."
        logFail "Please install $package and try again."
        bail "    apt install $package"
    fi
    logSuccess "Host package $package installed"
}

# _yum_ensure_host_package PACKAGE: installs PACKAGE with yum unless installed; bails on failure.
function _yum_ensure_host_package() {
    local package="$1"
    if yum_is_host_package_installed "$package"; then
        return 0
    fi
    logStep "Installing host package $package"
    if ! yum install -y "$package"; then
        logFail "Failed to install host package $package."
        logFail "Please install $package and try again."
        bail "    yum install $package"
    fi
    logSuccess "Host package $package installed"
}

# apt_is_host_package_installed PACKAGE: whether dpkg has PACKAGE installed (says it checks).
function apt_is_host_package_installed() {
    log "Checking if $1 is installed"
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"
}

# yum_is_host_package_installed PACKAGE: whether yum lists PACKAGE as installed (says it checks).
function yum_is_host_package_installed() {
    log "Checking if $1 is installed"
    yum list installed "$1" >/dev/null 2>&1
}
