# shellcheck shell=bash
# systemd service helpers with kURL's names: restarting a unit and waiting until a new process
# serves it, as the containerd and flannel add-ons do after changing its configuration.

# systemd_restart_succeeded OLD_PID SERVICE: whether SERVICE is active with a new, non-zero
# main pid and its old process OLD_PID is gone.
function systemd_restart_succeeded() {
    local old_pid="$1" service="$2" new_pid
    systemctl is-active --quiet "$service" || return 1
    new_pid="$(systemctl show --property MainPID "$service" 2>/dev/null)"
    new_pid="${new_pid#*=}"
    if [ "$new_pid" = "$old_pid" ] || [ "$new_pid" = "0" ] || [ -z "$new_pid" ]; then
        return 1
    fi
    if [ -n "$old_pid" ] && [ "$old_pid" != "0" ] && ps -p "$old_pid" >/dev/null 2>&1; then
        return 1
    fi
    return 0
}

# restart_systemd_and_wait SERVICE: restarts SERVICE and waits up to 120 s for a new process to
# serve it; on a timeout prints the journal and bails.
function restart_systemd_and_wait() {
    local service="$1" pid
    pid="$(systemctl show --property MainPID "$service" 2>/dev/null)"
    pid="${pid#*=}"
    logSubstep "Restarting $service..."
    systemctl restart "$service"
    log "Checking if $service was restarted successfully"
    if ! spinner_until 120 systemd_restart_succeeded "$pid" "$service"; then
        journalctl -xe --no-pager || true
        bail "Could not successfully restart systemd service $service"
    fi
    logSuccess "Service $service restarted."
}
