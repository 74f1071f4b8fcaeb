# Kubernetes, as kURL's install.sh and join.sh set it up, for the package berth-build makes of
# kURL's packages/kubernetes/<version>: its images (loaded by Berth before the install or join
# hook, once the container runtime is up) and its assets: kubeadm, crictl and kustomize. kURL
# builds the kubelet and kubectl host packages apart from that folder, so a node must have them
# at the package's version; every step that needs them says so when they are missing and does
# nothing it cannot finish.
#
# kURL's order is kept: every add-on's pre_init hook runs before `kubeadm init` (they drop
# kubeadm patches in $DIR/kustomize/kubeadm/init-patches), every add-on's _join before
# `kubeadm join` (join-patches); the join command carries kubeadm's token (24 hours, as
# kURL's), the CA certificate's hash and, for a control-plane node, the certificate key
# kubeadm keeps for 2 hours.

function __kubernetes_package_dir() {
    echo "$DIR/addons/kubernetes/$KUBERNETES_VERSION"
}

# The host tools kURL installs from host packages it builds apart from this folder: kubelet
# and kubectl at the package's version. Checked before anything changes on the node.
function __kubernetes_host_tools() {
    local missing=()
    local program
    for program in kubelet kubectl; do
        commandExists "$program" || missing+=("$program")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        bail "Kubernetes $KUBERNETES_VERSION needs ${missing[*]} on this host: the package built from kURL's packages/kubernetes/$KUBERNETES_VERSION carries kubeadm, crictl and kustomize, and kURL builds the kubelet and kubectl host packages apart from it. Install kubelet and kubectl $KUBERNETES_VERSION, then run again."
    fi
    local kubelet_has
    kubelet_has="$(kubelet --version 2>/dev/null | awk '{ print $2 }' | sed 's/^v//')"
    if [ "$kubelet_has" != "$KUBERNETES_VERSION" ]; then
        bail "Kubernetes $KUBERNETES_VERSION: this host's kubelet is ${kubelet_has:-of no version it would tell}; install kubelet $KUBERNETES_VERSION"
    fi
}

# kURL's kubernetes_host, once the container runtime is up: the package's programs, kernel
# modules and sysctls.
function __kubernetes_host() {
    __kubernetes_host_tools
    local assets
    assets="$(__kubernetes_package_dir)/assets"
    install -m 0755 "$assets/kubeadm" /usr/local/bin/kubeadm
    if [ -f "$assets/crictl-linux-amd64.tar.gz" ]; then
        tar -xzf "$assets/crictl-linux-amd64.tar.gz" -C /usr/local/bin crictl
    fi
    local kustomize_archive
    for kustomize_archive in "$assets"/kustomize-*.tar.gz; do
        [ -f "$kustomize_archive" ] && tar -xzf "$kustomize_archive" -C /usr/local/bin kustomize
    done
    local module
    for module in br_netfilter overlay ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh; do
        modprobe "$module" 2>/dev/null || logWarn "kernel module $module did not load"
    done
    mkdir -p /etc/modules-load.d /etc/sysctl.d
    printf '%s\n' br_netfilter overlay ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh > /etc/modules-load.d/kurl-kubernetes.conf
    printf '%s\n' 'net.bridge.bridge-nf-call-iptables = 1' 'net.bridge.bridge-nf-call-ip6tables = 1' 'net.ipv4.conf.all.forwarding = 1' 'net.ipv4.ip_forward = 1' > /etc/sysctl.d/99-kurl-kubernetes.conf
    sysctl --system >/dev/null
    systemctl enable kubelet >/dev/null 2>&1 || true
}

# Before any add-on's install: a host that cannot run Kubernetes is refused unchanged.
function kubernetes_pre_init() {
    __kubernetes_refuse_version_change
    __kubernetes_host_tools
}

# The address other nodes reach the API on, as kURL's init sets API_SERVICE_ADDRESS.
function __kubernetes_api_address() {
    if [ "$HA_CLUSTER" = "1" ] && [ -n "$LOAD_BALANCER_ADDRESS" ]; then
        echo "$LOAD_BALANCER_ADDRESS"
    else
        echo "$(berth_private_address):6443"
    fi
}

# Renders kubeadm's configuration for ROLE (init or join) into FILE, merging the add-ons'
# patches from $DIR/kustomize/kubeadm/ROLE-patches with kustomize, as kURL does; the
# `metadata` kustomize needs is taken out again, since kubeadm refuses it.
function __kubernetes_kubeadm_config() {
    local role="$1" file="$2"
    local tree="$DIR/kustomize/kubeadm/$role"
    rm -rf "$tree"
    mkdir -p "$tree"
    "$BERTH_BIN" kubeadm-config "$role" > "$tree/kubeadm.yaml"
    {
        echo "apiVersion: kustomize.config.k8s.io/v1beta1"
        echo "kind: Kustomization"
        echo "resources:"
        echo "- kubeadm.yaml"
    } > "$tree/kustomization.yaml"
    # kURL's kubeadm_customize_config: each add-on patch takes the configuration's kubeadm API
    # version, and loses the kubelet's --container-runtime from Kubernetes 1.24 on (removed in
    # 1.27); its variables are rendered as kURL renders the whole configuration.
    local api minor patch name
    minor="$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
    # The API version berth kubeadm-config chose for this Kubernetes.
    api="$(awk '$1 == "apiVersion:" && $2 ~ /^kubeadm\.k8s\.io\// { print $2; exit }' "$tree/kubeadm.yaml")"
    for patch in "$DIR/kustomize/kubeadm/$role-patches"/*; do
        [ -f "$patch" ] || continue
        name="$(basename "$patch")"
        render_yaml_file_2 "$patch" > "$tree/$name"
        sed -i "s|kubeadm.k8s.io/v1beta.*|$api|" "$tree/$name"
        if [ "$minor" -ge 24 ]; then
            sed -i '/container-runtime:/d' "$tree/$name"
        fi
        insert_patches_strategic_merge "$tree/kustomization.yaml" "$name"
    done
    kubectl kustomize "$tree" > "$file.raw"
    "$DIR/bin/yamlutil" -r -fp "$file.raw" -yp metadata
    mv "$file.raw" "$file"
}

# The CA certificate's hash a joining node checks, as `kubeadm init` prints it.
function __kubernetes_ca_hash() {
    openssl x509 -pubkey -in /etc/kubernetes/pki/ca.crt |
        openssl rsa -pubin -outform der 2>/dev/null |
        sha256sum | awk '{ print "sha256:" $1 }'
}

# What a new node's join command carries, with kURL's lifetimes.
function __kubernetes_publish_join() {
    berth_set_join_param kubernetes-master-address "$(__kubernetes_api_address)"
    berth_set_join_param kubernetes-version "$KUBERNETES_VERSION"
    berth_set_join_param --secret --ttl=24h kubeadm-token "$BOOTSTRAP_TOKEN"
    berth_set_join_param kubeadm-token-ca-hash "$(__kubernetes_ca_hash)"
    if [ "$HA_CLUSTER" = "1" ]; then
        berth_set_join_param --secret --control-plane --ttl=2h cert-key "$CERT_KEY"
    fi
}

# Moving a cluster to another Kubernetes version is kURL's `kubeadm upgrade` path, which these
# hooks do not take: refused before anything changes, rather than a `kubeadm init` over a
# running control plane.
function __kubernetes_refuse_version_change() {
    case "${BERTH_KUBERNETES_DECISION:-}" in
        Upgrade | Downgrade | Rollback)
            bail "Kubernetes ${BERTH_KUBERNETES_CURRENT_VERSION:-?} to $KUBERNETES_VERSION: upgrading Kubernetes (kURL's kubeadm upgrade) is not something Berth's Kubernetes hooks do yet; keep the spec at ${BERTH_KUBERNETES_CURRENT_VERSION:-the installed version}"
            ;;
    esac
}

# kURL's init: kubeadm init with the rendered configuration, then the admin kubeconfig.
function kubernetes() {
    __kubernetes_refuse_version_change
    __kubernetes_host
    if [ -z "$BOOTSTRAP_TOKEN" ]; then
        BOOTSTRAP_TOKEN="$(kubeadm token generate)"
    fi
    export BOOTSTRAP_TOKEN
    # As kURL's install.sh before init: the public address a cloud gives (for the API server's
    # certificate), and the service range (and pod range) not in use.
    discover_public_ip
    export PUBLIC_ADDRESS
    # As kURL's install.sh before init: the service range (and pod range) not in use.
    [ -n "$SERVICE_CIDR" ] || discover_service_subnet
    [ -n "$POD_CIDR" ] || discover_pod_subnet
    export SERVICE_CIDR POD_CIDR
    local upload_certs=()
    if [ "$HA_CLUSTER" = "1" ]; then
        CERT_KEY="$(kubeadm certs certificate-key)"
        export CERT_KEY
        upload_certs=(--upload-certs)
    fi
    mkdir -p /opt/replicated /var/log/apiserver /etc/kubernetes
    # The audit policy the API server's configuration names: request metadata, as kURL logs.
    printf '%s\n' 'apiVersion: audit.k8s.io/v1' 'kind: Policy' 'rules:' '- level: Metadata' > /etc/kubernetes/audit.yaml
    __kubernetes_kubeadm_config init /opt/replicated/kubeadm.conf
    rm -f /etc/kubernetes/*.conf
    kubeadm init \
        --ignore-preflight-errors="${KUBERNETES_INIT_IGNORE_PREFLIGHT_ERRORS:-all}" \
        --config /opt/replicated/kubeadm.conf \
        "${upload_certs[@]+"${upload_certs[@]}"}"
    # kURL's exportKubeconfig: root's kubeconfig is the admin's.
    mkdir -p /root/.kube
    cp /etc/kubernetes/admin.conf /root/.kube/config
    chmod 0600 /root/.kube/config
    __kubernetes_publish_join
}

# On a run that leaves Kubernetes as it is, a new bootstrap token for the next join command.
function kubernetes_already_applied() {
    commandExists kubeadm || return 0
    BOOTSTRAP_TOKEN="$(kubeadm token create --ttl "${BOOTSTRAP_TOKEN_TTL:-24h}")"
    if [ "$HA_CLUSTER" = "1" ]; then
        CERT_KEY="$(kubeadm init phase upload-certs --upload-certs 2>/dev/null | tail -1)"
    fi
    __kubernetes_publish_join
}

# kURL's join: kubeadm join with the join command's token, CA hash and, for a control-plane
# node, certificate key.
function kubernetes_join() {
    __kubernetes_host
    if [ -z "$KUBERNETES_MASTER_ADDR" ] || [ -z "$KUBEADM_TOKEN" ] || [ -z "$KUBEADM_TOKEN_CA_HASH" ]; then
        bail "joining Kubernetes needs the join command's kubernetes-master-address, kubeadm-token and kubeadm-token-ca-hash; run the command the first node printed"
    fi
    mkdir -p /opt/replicated
    __kubernetes_kubeadm_config join /opt/replicated/kubeadm.conf
    kubeadm join \
        --ignore-preflight-errors=all \
        --config /opt/replicated/kubeadm.conf
}
