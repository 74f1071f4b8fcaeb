# shellcheck shell=bash
# kURL's kubeadm distro functions (scripts/distro/kubeadm/distro.sh): add-ons call them as
# ${K8S_DISTRO}_<name>, and K8S_DISTRO is kubeadm (see discover.sh).

# kubeadm_get_kubeconfig: prints the cluster admin's kubeconfig path.
function kubeadm_get_kubeconfig() {
    echo "/etc/kubernetes/admin.conf"
}

# kubeadm_get_containerd_sock: prints containerd's socket: CONTAINERD_ADDRESS when set (a
# containerd of its own, as Berth's tests run), else /run/containerd/containerd.sock.
function kubeadm_get_containerd_sock() {
    echo "${CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}"
}

# kubeadm_api_is_healthy: whether the API server at kubernetes_api_address answers `ok` on
# /healthz (each probe bounded, so a hung server is a no).
function kubeadm_api_is_healthy() {
    local address
    address="$(kubernetes_api_address)" || return 1
    curl --globoff --noproxy "*" --fail --silent --insecure --max-time 10 \
        "https://$address/healthz" 2>/dev/null | grep -q "ok"
}

# kubeadm_get_client_kube_apiserver_crt: prints the API server's kubelet client certificate.
function kubeadm_get_client_kube_apiserver_crt() {
    echo "/etc/kubernetes/pki/apiserver-kubelet-client.crt"
}

# kubeadm_get_client_kube_apiserver_key: prints the API server's kubelet client key.
function kubeadm_get_client_kube_apiserver_key() {
    echo "/etc/kubernetes/pki/apiserver-kubelet-client.key"
}

# kubeadm_get_server_ca: prints the cluster CA certificate's path.
function kubeadm_get_server_ca() {
    echo "/etc/kubernetes/pki/ca.crt"
}

# kubeadm_get_server_ca_key: prints the cluster CA key's path.
function kubeadm_get_server_ca_key() {
    echo "/etc/kubernetes/pki/ca.key"
}

# kubeadm_containerd_restart: restarts containerd.
function kubeadm_containerd_restart() {
    systemctl restart containerd
}

# kubeadm_registry_containerd_configure REGISTRY_IP: makes containerd trust the cluster CA for
# the registry at REGISTRY_IP (with IPV6_ONLY=1 under the name registry.kurl.svc.cluster.local,
# which /etc/hosts then maps), writing /etc/containerd/certs.d/<server>/hosts.toml unless it
# exists; sets CONTAINERD_NEEDS_RESTART=1 when it writes it.
# shellcheck disable=SC2034 # CONTAINERD_NEEDS_RESTART is read by the containerd add-on
function kubeadm_registry_containerd_configure() {
    local registry_ip="$1"
    local server="$registry_ip"
    # The address becomes a folder under /etc/containerd/certs.d and a line of /etc/hosts.
    if ! isValidIpv4 "$registry_ip" && ! isValidIpv6 "$registry_ip"; then
        bail "The registry address ${registry_ip//%/%%} is not an IP address"
    fi
    if [ "${IPV6_ONLY:-}" = "1" ]; then
        server="registry.kurl.svc.cluster.local"
        sed -i '/registry\.kurl\.svc\.cluster\.local/d' /etc/hosts
        echo "$registry_ip $server" >>/etc/hosts
    fi
    local hosts_toml="/etc/containerd/certs.d/$server/hosts.toml"
    if [ -f "$hosts_toml" ]; then
        echo "Registry $server TLS already configured for containerd"
        return 0
    fi
    mkdir -p "/etc/containerd/certs.d/$server"
    cat >"$hosts_toml" <<EOF
server = "https://$server"

[host."https://$server"]
  ca = ["/etc/kubernetes/pki/ca.crt"]
EOF
    CONTAINERD_NEEDS_RESTART=1
}
