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
