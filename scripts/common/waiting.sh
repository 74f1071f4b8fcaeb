# shellcheck shell=bash
# Waiting and retrying with kURL's names: spinner_until, sleep_spinner and the try_* helpers
# add-ons wrap around commands that need a service or the cluster to settle.

# __berth_spin_frame: draws the next spinner frame, as kURL does, but only on a terminal: a
# hook's output is a log, where frames would be noise.
function __berth_spin_frame() {
    [ -t 1 ] || return 0
    local frames="|/-\\"
    __berth_spin_index=$(((${__berth_spin_index:-0} + 1) % 4))
    printf " [%c]  \b\b\b\b\b\b" "${frames:$__berth_spin_index:1}"
}

# spinner_until TIMEOUT COMMAND [ARG…]: runs COMMAND until it succeeds; returns 1 once the
# waits between tries add up to more than TIMEOUT seconds (empty or negative: forever), 0 when
# it succeeds. kURL waits 1 s between tries; this waits 0.1 s for the first 3 s, then 1 s,
# so a service that is up in 200 ms is not waited on for a whole second, and the cluster is not
# polled ten times a second for minutes. The arguments keep their quoting.
function spinner_until() {
    local timeout="${1:--1}"
    local waited=0 delay
    while ! "$2" "${@:3}"; do
        if [ "$waited" -lt 30 ]; then delay=1; else delay=10; fi
        waited=$((waited + delay))
        if [ "$timeout" -ge 0 ] && [ "$waited" -gt $((timeout * 10)) ]; then
            return 1
        fi
        __berth_spin_frame
        sleep "$((delay / 10)).$((delay % 10))"
    done
}

# sleep_spinner SECONDS: waits SECONDS (default 0), with a spinner on a terminal.
function sleep_spinner() {
    local seconds="${1:-0}" elapsed=0
    while [ "$elapsed" -lt "$seconds" ]; do
        __berth_spin_frame
        sleep 1
        elapsed=$((elapsed + 1))
    done
}

# __berth_try TRIES SPAN QUIET COMMAND [ARG…]: kURL's try loop: runs COMMAND every 2 s until it
# succeeds, with its stderr dropped when QUIET is 1; after TRIES failures prints an empty line
# and the output of one more run, then bails "spent SPAN attempting to run …". Sets the globals
# n (failures so far) and try_output, as kURL's do.
# shellcheck disable=SC2034 # n and try_output are kURL's globals
function __berth_try() {
    local tries="$1" span="$2" quiet="$3"
    shift 3
    n=0
    while true; do
        if [ "$quiet" = "1" ]; then
            "$@" 2>/dev/null && return 0
        else
            "$@" && return 0
        fi
        n=$((n + 1))
        if [ "$n" -ge "$tries" ]; then
            echo ""
            try_output="$("$@" 2>&1)" || true
            echo "$try_output"
            bail "spent $span attempting to run \"$*\" without success"
        fi
        sleep 2
    done
}

# try_1m COMMAND [ARG…]: tries COMMAND (stderr dropped) every 2 s, 30 times, then bails.
function try_1m() {
    __berth_try 30 1m 1 "$@"
}

# try_5m COMMAND [ARG…]: tries COMMAND (stderr dropped) every 2 s, 150 times, then bails.
function try_5m() {
    __berth_try 150 5m 1 "$@"
}

# try_1m_stderr COMMAND [ARG…]: as try_1m, with each try's stderr shown.
function try_1m_stderr() {
    __berth_try 30 1m 0 "$@"
}
