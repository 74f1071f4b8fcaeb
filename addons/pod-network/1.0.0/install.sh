# shellcheck shell=bash
# A pod network for clusters kURL's CNI images cannot reach: the bridge CNI plugin on each
# node over the pod range the cluster gives that node, and routes between the nodes' ranges,
# kept by `berth-pod-network` (beside this file) as a service on every node. Pods on
# different nodes reach each other by their own addresses when the nodes share a link (one
# subnet), as flannel's host-gw backend does.
#
# It runs on the node's kubelet credentials, so it starts before `kubeadm join` on a joining
# node and waits for them.

POD_NETWORK_UNIT=berth-pod-network.service

# Before kubeadm init: the cluster gives every node a pod range of its own.
function pod-network_pre_init() {
    cp "$DIR/addons/pod-network/$POD_NETWORK_VERSION/kubeadm.yaml" \
        "$DIR/kustomize/kubeadm/init-patches/pod-network.yaml"
}

function pod-network() {
    pod_network_start
}

function pod-network_join() {
    pod_network_start
}

function pod-network_already_applied() {
    pod_network_running || pod_network_start
}

function pod-network_reset() {
    pod_network_stop
    rm -f /usr/local/bin/berth-pod-network "/etc/systemd/system/$POD_NETWORK_UNIT" \
        /etc/cni/net.d/10-berth-pod-network.conflist
    local route
    while read -r route _; do
        [ -n "$route" ] && ip route del "$route" proto 211
    done < <(ip route show proto 211)
    ip link delete cni0 2>/dev/null || true
}

# The keeper writes its pid here.
POD_NETWORK_PID_FILE=/run/berth-pod-network.pid

function pod_network_running() {
    local pid
    pid="$(cat "$POD_NETWORK_PID_FILE" 2>/dev/null)" || return 1
    [ -n "$pid" ] && grep -qs berth-pod-network "/proc/$pid/cmdline"
}

function pod_network_start() {
    local source="$DIR/addons/pod-network/$POD_NETWORK_VERSION"
    install -m 0755 "$source/berth-pod-network" /usr/local/bin/berth-pod-network
    if berth_has_systemd; then
        install -m 0644 "$source/$POD_NETWORK_UNIT" "/etc/systemd/system/$POD_NETWORK_UNIT"
        systemctl daemon-reload
        systemctl enable "$POD_NETWORK_UNIT" >/dev/null 2>&1 || true
        systemctl restart "$POD_NETWORK_UNIT"
    else
        # No systemd: the keeper runs in a session of its own, so it outlives this run.
        pod_network_stop
        setsid /usr/local/bin/berth-pod-network </dev/null >>/var/log/berth-pod-network.log 2>&1 &
    fi
    spinner_until 30 pod_network_running ||
        bail "the pod network's route keeper did not start; see /var/log/berth-pod-network.log or journalctl -u $POD_NETWORK_UNIT"
    logSuccess "pod network: routes between the nodes' pod ranges are kept"
}

# Stops this node's keeper alone: by its unit, else by its pid (never by its name, which
# would also match the keepers of other nodes that share this host's processes).
function pod_network_stop() {
    if berth_has_systemd; then
        systemctl disable --now "$POD_NETWORK_UNIT" 2>/dev/null || true
    fi
    if pod_network_running; then
        berth_stop_pid "$POD_NETWORK_PID_FILE"
    fi
}
