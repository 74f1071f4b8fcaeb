# shellcheck shell=bash
# General helpers with kURL's names and signatures: commands, versions and installer URLs, plus
# Berth's own (berth_*) for its add-ons. Everything here works without a cluster.

# commandExists NAME…: whether each NAME is a command, function or builtin (silent).
function commandExists() {
    command -v "$@" >/dev/null 2>&1
}

# semverParse VERSION: sets the globals major, minor and patch from 1.27.3, v1.27.3-rc.1 or
# 1.27.3+k3s1 (a leading v is dropped; -, . and + end the patch).
function semverParse() {
    local version="${1#v}"
    major="${version%%.*}"
    minor="${version#"$major".}"
    minor="${minor%%.*}"
    patch="${version#"$major"."$minor".}"
    patch="${patch%%[-.+]*}"
}

# semverCompare A B: sets SEMVER_COMPARE_RESULT to -1, 0 or 1 as A is older, equal or newer
# than B (missing parts count as 0); always returns 0.
# shellcheck disable=SC2034 # SEMVER_COMPARE_RESULT is the result callers read, as in kURL
function semverCompare() {
    local a_major a_minor a_patch
    semverParse "$1"
    a_major="${major:-0}" a_minor="${minor:-0}" a_patch="${patch:-0}"
    semverParse "$2"
    local pairs=("$a_major ${major:-0}" "$a_minor ${minor:-0}" "$a_patch ${patch:-0}")
    local pair left right
    SEMVER_COMPARE_RESULT=0
    for pair in "${pairs[@]}"; do
        read -r left right <<<"$pair"
        if [ "$left" -lt "$right" ]; then SEMVER_COMPARE_RESULT=-1; return 0; fi
        if [ "$left" -gt "$right" ]; then SEMVER_COMPARE_RESULT=1; return 0; fi
    done
}

# maybe COMMAND [ARG…]: runs the command with its stderr dropped and ignores its failure.
function maybe() {
    "$@" 2>/dev/null || true
}

# cmd_retry TRIES COMMAND [ARG…]: runs the command until it succeeds, at most TRIES times,
# sleeping 1, 2, 4… seconds between tries; returns the last failure's status.
function cmd_retry() {
    local tries="$1"
    shift
    local attempt=0 status
    while true; do
        status=0
        "$@" || status=$?
        if [ "$status" -eq 0 ]; then
            return 0
        fi
        attempt=$((attempt + 1))
        if [ "$attempt" -ge "$tries" ]; then
            echo "Retry $attempt/$tries exited $status, no more retries left."
            return "$status"
        fi
        echo "Retry $attempt/$tries exited $status, retrying in $((1 << (attempt - 1))) seconds..."
        sleep "$((1 << (attempt - 1)))"
    done
}

# build_installer_prefix INSTALLER_ID KURL_VERSION KURL_URL PROXY HTTPS_PROXY: prints the start
# of the command that fetches this installer's scripts for other nodes: `cat ` without a URL,
# else `curl -fsSL[ -x PROXY] URL/[version/V/]ID/` (the HTTPS proxy for an https URL).
function build_installer_prefix() {
    local installer_id="$1" kurl_version="$2" kurl_url="$3"
    local proxy="$4" https_proxy="$5"
    if [ -z "$kurl_url" ]; then
        echo "cat "
        return 0
    fi
    local flags=""
    if [ -n "$proxy" ] || [ -n "$https_proxy" ]; then
        flags=" -x $proxy"
        if [ -n "$https_proxy" ] && [[ "$kurl_url" == https* ]]; then
            flags=" -x $https_proxy"
        fi
    fi
    if [ -n "$kurl_version" ]; then
        echo "curl -fsSL$flags $kurl_url/version/$kurl_version/$installer_id/"
    else
        echo "curl -fsSL$flags $kurl_url/$installer_id/"
    fi
}

# common_upgrade_major_minor_to_major VERSION: prints the major part of X.Y[.Z].
function common_upgrade_major_minor_to_major() {
    local version="$1"
    echo "${version%%.*}"
}

# common_upgrade_major_minor_to_minor VERSION: prints the minor part of X.Y[.Z] (X if no dot).
function common_upgrade_major_minor_to_minor() {
    local rest="${1#*.}"
    echo "${rest%%.*}"
}

# common_upgrade_version_to_major_minor VERSION: prints X.Y of X.Y.Z.
function common_upgrade_version_to_major_minor() {
    local major="${1%%.*}"
    local rest="${1#*.}"
    if [ "$rest" = "$1" ]; then
        echo "$1"
    else
        echo "$major.${rest%%.*}"
    fi
}

# common_upgrade_compare_versions A B: prints -1, 0 or 1 as major.minor A is older, equal or
# newer than B (patch versions are not compared).
function common_upgrade_compare_versions() {
    local a_major a_minor b_major b_minor
    a_major="$(common_upgrade_major_minor_to_major "$1")"
    b_major="$(common_upgrade_major_minor_to_major "$2")"
    a_minor="$(common_upgrade_major_minor_to_minor "$1")"
    b_minor="$(common_upgrade_major_minor_to_minor "$2")"
    if [ "$a_major" -lt "$b_major" ]; then echo "-1"; return 0; fi
    if [ "$a_major" -gt "$b_major" ]; then echo "1"; return 0; fi
    if [ "$a_minor" -lt "$b_minor" ]; then echo "-1"; return 0; fi
    if [ "$a_minor" -gt "$b_minor" ]; then echo "1"; return 0; fi
    echo "0"
}

# common_upgrade_is_version_included FROM TO VERSION: whether FROM < VERSION <= TO (major.minor).
function common_upgrade_is_version_included() {
    [ "$(common_upgrade_compare_versions "$3" "$1")" = "1" ] &&
        [ "$(common_upgrade_compare_versions "$3" "$2")" != "1" ]
}

# common_upgrade_max_version A B: prints the newer of A and B (major.minor).
function common_upgrade_max_version() {
    if [ "$(common_upgrade_compare_versions "$1" "$2")" = "1" ]; then
        echo "$1"
    else
        echo "$2"
    fi
}

# common_upgrade_major_minor_less_one MAJOR.MINOR: prints the minor release before it (1.9 →
# 1.8; 1.0 stays 1.0).
function common_upgrade_major_minor_less_one() {
    local major minor
    major="$(common_upgrade_major_minor_to_major "$1")"
    minor="$(common_upgrade_major_minor_to_minor "$1")"
    [ "$minor" = 0 ] || minor=$((minor - 1))
    echo "$major.$minor"
}

# common_upgrade_step_versions "STEP…" FROM TO: prints, a line each, the versions an upgrade
# from FROM to TO steps through: the STEP listed for each minor after FROM's, up to TO's (which
# is TO itself when TO names a patch). Bails across major versions and past the list's end.
function common_upgrade_step_versions() {
    local steps=()
    read -ra steps <<<"$1"
    local from="$2" desired="$3" to
    to="$(common_upgrade_version_to_major_minor "$desired")"
    if [ "$(common_upgrade_major_minor_to_major "$from")" != "$(common_upgrade_major_minor_to_major "$to")" ]; then
        bail "Upgrade accross major version from $from to $to is not supported."
    fi
    local first last
    first=$(($(common_upgrade_major_minor_to_minor "$from") + 1))
    last="$(common_upgrade_major_minor_to_minor "$to")"
    if [ "${#steps[@]}" -le "$last" ]; then
        bail "Upgrade from $from to $to is not supported."
    fi
    [ "$first" -le "$last" ] || return 0
    if [ "$desired" != "$to" ]; then
        last=$((last - 1))
    fi
    local step
    for ((step = first; step <= last; step++)); do
        echo "${steps[$step]}"
    done
    if [ "$desired" != "$to" ]; then
        echo "$desired"
    fi
}

# common_upgrade_print_list_of_minor_upgrades FROM TO: prints the minor upgrades between them
# in kURL's words ("This involves upgrading from 1.0 to 1.1, 1.1 to 1.2, and 1.2 to 1.3.").
function common_upgrade_print_list_of_minor_upgrades() {
    local first last minor
    first="$(common_upgrade_major_minor_to_minor "$1")"
    last="$(common_upgrade_major_minor_to_minor "$2")"
    printf "This involves upgrading from "
    for ((minor = first; minor < last; minor++)); do
        if [ "$minor" -gt "$first" ]; then
            printf ", "
            if [ "$((minor + 1))" -eq "$last" ]; then
                printf "and "
            fi
        fi
        printf "1.%s to 1.%s" "$minor" "$((minor + 1))"
    done
    printf ".\n"
}

# berth_set_join_param [--secret] [--control-plane] KEY VALUE: publishes what a new node needs
# from this one; `berth join-command` prints it as KEY=VALUE and a joining node's hooks see it
# as an environment variable (demo-address as DEMO_ADDRESS). A secret expires after the
# install's --join-ttl and never reaches a log: the value travels on standard input.
function berth_set_join_param() {
    local flags=()
    while [ "$#" -gt 0 ] && [[ "$1" == --* ]]; do
        flags+=("$1")
        shift
    done
    if [ "$#" -ne 2 ]; then
        bail "usage: berth_set_join_param [--secret] [--control-plane] KEY VALUE"
    fi
    printf '%s' "$2" | "${BERTH_BIN:-berth}" join-param set "${flags[@]+"${flags[@]}"}" "$1"
}

# berth_private_address: prints this node's address for other nodes: PRIVATE_ADDRESS (the
# private-address argument, or what the library discovered as kURL does); bails when there is
# none.
function berth_private_address() {
    # Discovered again only when a hook emptied it since the library was sourced.
    if [ -z "${PRIVATE_ADDRESS:-}" ]; then
        __berth_discover_private_address
    fi
    [ -n "${PRIVATE_ADDRESS:-}" ] || bail "cannot tell this node's address; pass private-address=IP"
    echo "$PRIVATE_ADDRESS"
}

# berth_has_systemd: whether systemd runs this host (and so manages its services).
function berth_has_systemd() {
    [ -d /run/systemd/system ] && commandExists systemctl
}

# berth_stop_pid FILE: stops the process whose pid FILE holds (one a hook started without
# systemd), waits until it is gone, and removes FILE. No FILE: nothing to stop.
function berth_stop_pid() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 0
    if kill "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do
            sleep 0.1
        done
    fi
    rm -f "$1"
}

# kebab_to_camel TEXT: prints TEXT with each `-x` made `X` (`cert-manager` → `certManager`),
# as kURL names an add-on's spec key from its folder.
function kebab_to_camel() {
    local text="$1" out="" next
    while [ -n "$text" ]; do
        if [ "${text:0:1}" = - ] && [ "${#text}" -gt 1 ]; then
            next="${text:1:1}"
            out+="${next^}"
            text="${text:2}"
        else
            out+="${text:0:1}"
            text="${text:1}"
        fi
    done
    printf '%s\n' "$out"
}

# insertOrReplaceJsonParam FILE KEY VALUE: sets the top-level KEY of the JSON object in FILE to
# the string VALUE (kURL edits Docker's daemon.json so); a missing FILE is made with its folder.
# Unlike kURL's sed, any VALUE is written as a JSON string and a nested key of the same name is
# left alone.
function insertOrReplaceJsonParam() {
    "${BERTH_BIN:-berth}" kurl json-param "$1" "$2" "$3"
}

# parseDockerVersion VERSION: sets DOCKER_VERSION_MAJOR, _MINOR, _PATCH and _RELEASE from
# `17.03.0-ce` (17, 03, 0, ce); each is empty for an empty VERSION.
# shellcheck disable=SC2034 # the results callers read, as in kURL
function parseDockerVersion() {
    DOCKER_VERSION_MAJOR="" DOCKER_VERSION_MINOR="" DOCKER_VERSION_PATCH="" DOCKER_VERSION_RELEASE=""
    [ -n "$1" ] || return 0
    local rest third
    DOCKER_VERSION_MAJOR="${1%%.*}"
    rest="${1#*.}"
    [ "$rest" != "$1" ] || return 0
    DOCKER_VERSION_MINOR="${rest%%.*}"
    third="${rest#*.}"
    [ "$third" != "$rest" ] || return 0
    third="${third%%.*}"
    DOCKER_VERSION_PATCH="${third%%-*}"
    if [ "$DOCKER_VERSION_PATCH" != "$third" ]; then
        DOCKER_VERSION_RELEASE="${third#*-}"
        DOCKER_VERSION_RELEASE="${DOCKER_VERSION_RELEASE%%-*}"
    fi
}

# __berth_compare_numbers A B: prints -1, 0 or 1; a part that is not a number (or is empty)
# compares equal, as in kURL's comparisons.
function __berth_compare_numbers() {
    if [[ "$1" =~ ^[0-9]+$ ]] && [[ "$2" =~ ^[0-9]+$ ]]; then
        if ((10#$1 < 10#$2)); then echo -1; return; fi
        if ((10#$1 > 10#$2)); then echo 1; return; fi
    fi
    echo 0
}

# compareDockerVersionsIgnorePatch A B: sets COMPARE_DOCKER_VERSIONS_RESULT to -1, 0 or 1 by
# major and minor.
# shellcheck disable=SC2034 # the result callers read, as in kURL
function compareDockerVersionsIgnorePatch() {
    local a_major a_minor
    parseDockerVersion "$1"
    a_major="$DOCKER_VERSION_MAJOR" a_minor="$DOCKER_VERSION_MINOR"
    parseDockerVersion "$2"
    COMPARE_DOCKER_VERSIONS_RESULT="$(__berth_compare_numbers "$a_major" "$DOCKER_VERSION_MAJOR")"
    if [ "$COMPARE_DOCKER_VERSIONS_RESULT" = 0 ]; then
        COMPARE_DOCKER_VERSIONS_RESULT="$(__berth_compare_numbers "$a_minor" "$DOCKER_VERSION_MINOR")"
    fi
}

# compareDockerVersions A B: sets COMPARE_DOCKER_VERSIONS_RESULT to -1, 0 or 1 by major, minor
# and patch (the release, `-ce`, aside).
function compareDockerVersions() {
    compareDockerVersionsIgnorePatch "$1" "$2"
    [ "$COMPARE_DOCKER_VERSIONS_RESULT" = 0 ] || return 0
    local a_patch
    parseDockerVersion "$1"
    a_patch="$DOCKER_VERSION_PATCH"
    parseDockerVersion "$2"
    COMPARE_DOCKER_VERSIONS_RESULT="$(__berth_compare_numbers "$a_patch" "$DOCKER_VERSION_PATCH")"
}

# get_docker_version: prints the installed Docker's version (`20.10.17`), nothing without one.
function get_docker_version() {
    commandExists docker || return 0
    docker -v 2>/dev/null | awk '{ gsub(",", "", $3); print $3 }'
}

# is_docker_version_supported: whether kURL installs Docker on this OS: not on CentOS, RHEL or
# Oracle Linux 8 (when a Docker version is asked for).
function is_docker_version_supported() {
    case "${LSB_DIST:-}" in
        centos | rhel | ol)
            if [ "${DIST_VERSION_MAJOR:-}" = 8 ] && [ -n "${DOCKER_VERSION:-}" ]; then
                return 1
            fi
            ;;
    esac
    return 0
}

# kURL's flags for the command other nodes run (each with its leading space, nothing when it
# does not apply).
function get_docker_registry_ip_flag() {
    [ -z "$1" ] || printf ' docker-registry-ip=%s' "$1"
}
function get_skip_system_package_install_flag() {
    [ "${SKIP_SYSTEM_PACKAGE_INSTALL:-}" != 1 ] || printf ' skip-system-package-install'
}
function get_exclude_builtin_host_preflights_flag() {
    [ "${EXCLUDE_BUILTIN_HOST_PREFLIGHTS:-}" != 1 ] || printf ' exclude-builtin-host-preflights'
}
function get_additional_no_proxy_addresses_flag() {
    [ -z "$1" ] || printf ' additional-no-proxy-addresses=%s' "$2"
}
function get_kurl_install_directory_flag() {
    if [ -n "$1" ] && [ "$1" != /var/lib/kurl ]; then
        printf ' kurl-install-directory=%s' "$1"
    fi
}
function get_ipv6_flag() {
    [ "${IPV6_ONLY:-}" != 1 ] || printf ' ipv6'
}
# get_remotes_flags: ` primary-host=IP` for each control-plane node, then ` secondary-host=IP`
# for each other node of the cluster (kubectl).
function get_remotes_flags() {
    local label address
    label="$(kubernetes_get_control_plane_label)"
    while read -r address; do
        [ -z "$address" ] || printf ' primary-host=%s' "$address"
    done < <(kubectl get nodes --no-headers --selector="$label" -o wide | awk '{ print $6 }')
    while read -r address; do
        [ -z "$address" ] || printf ' secondary-host=%s' "$address"
    done < <(kubectl get nodes --no-headers --selector="!$label" -o wide | awk '{ print $6 }')
}

# common_task_require_param NAME VALUE: bails when a task's VALUE is empty.
function common_task_require_param() {
    [ -n "$2" ] || bail "Error: $1 is required"
}

# common_upgrade_tasks_params ARG…: reads a tasks.sh upgrade task's `from-version=`,
# `to-version=` and `airgap` into the caller's from_version, to_version and airgap.
# shellcheck disable=SC2034 # the caller's variables, as in kURL
function common_upgrade_tasks_params() {
    local argument
    for argument in "$@"; do
        case "$argument" in
            from-version=*) from_version="${argument#*=}" ;;
            to-version=*) to_version="${argument#*=}" ;;
            airgap) airgap=1 ;;
            *) bail "Error: unknown parameter \"${argument%%=*}\"" ;;
        esac
    done
}

# common_list_images_in_manifest_file MANIFEST: prints the images a Manifest's `image` lines
# name, each in its canonical form, separated by spaces.
function common_list_images_in_manifest_file() {
    local images=() kind image
    while read -r kind _ image _; do
        if [ "$kind" != image ] || [ -z "$image" ]; then
            continue
        fi
        images+=("$(canonical_image_name "$image")")
    done <"$1"
    echo "${images[*]}"
}

# common_upgrade_merge_images_list LIST…: prints the images of every LIST (space-separated),
# sorted and each once.
function common_upgrade_merge_images_list() {
    # shellcheck disable=SC2048,SC2086 # each LIST is split on spaces, as kURL's
    printf '%s\n' $* | sort -u | xargs
}

# get_addon_config NAME: prints add-on NAME's section of the spec the hooks act on
# (MERGED_YAML_SPEC, the script flags merged) as JSON, as kURL's does through yamlutil.
function get_addon_config() {
    "$BIN_YAMLUTIL" -j -fp "$MERGED_YAML_SPEC" -jf "spec.$(kebab_to_camel "$1")"
}
