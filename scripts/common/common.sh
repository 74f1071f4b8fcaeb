# shellcheck shell=bash
# General helpers with kURL's names and signatures.

function commandExists() {
    command -v "$@" >/dev/null 2>&1
}

# Sets major, minor and patch from a version such as 1.27.3 or v1.27.3-rc.1.
function semverParse() {
    local version="${1#v}"
    major="${version%%.*}"
    minor="${version#"$major".}"
    minor="${minor%%.*}"
    patch="${version#"$major"."$minor".}"
    patch="${patch%%[-.+]*}"
}

# Compares two versions; sets SEMVER_COMPARE_RESULT to -1, 0 or 1.
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
        if [ "$left" -lt "$right" ]; then SEMVER_COMPARE_RESULT=-1; return; fi
        if [ "$left" -gt "$right" ]; then SEMVER_COMPARE_RESULT=1; return; fi
    done
}

# Runs "$2 ${@:3}" until it succeeds, for at most $1 seconds (forever if empty or negative).
# It tries every tenth of a second: a service that comes up in 200 ms is not waited on for 1 s.
function spinner_until() {
    local timeout_seconds="${1:--1}"
    local command="$2"
    local tries=0
    while ! "$command" "${@:3}"; do
        tries=$((tries + 1))
        if [ "$timeout_seconds" -ge 0 ] && [ "$tries" -gt $((timeout_seconds * 10)) ]; then
            return 1
        fi
        sleep 0.1
    done
}

# Tries a command every 2 seconds, up to 30 times; the last try shows its error and ends the install.
function try_1m() {
    local command="$1"
    local tries=0
    while ! "$command" "${@:2}" 2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -ge 30 ]; then
            "$command" "${@:2}"
            exit 1
        fi
        sleep 2
    done
}

function kubernetes_resource_exists() {
    local namespace="$1"
    local kind="$2"
    local name="$3"
    kubectl -n "$namespace" get "$kind" "$name" >/dev/null 2>&1
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

# Prints this node's address for other nodes: kURL's private-address argument when given,
# else the source address of the default route, else the first address of the host.
function berth_private_address() {
    if [ -n "${PRIVATE_ADDRESS:-}" ]; then
        echo "$PRIVATE_ADDRESS"
        return
    fi
    local address
    address=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n1)
    if [ -z "$address" ]; then
        address=$(hostname -I 2>/dev/null | awk '{print $1}')
    fi
    [ -n "$address" ] || bail "cannot tell this node's address; pass private-address=IP"
    echo "$address"
}

# Whether systemd runs this host (and so manages its services).
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
