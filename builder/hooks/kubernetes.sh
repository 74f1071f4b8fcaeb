# shellcheck shell=bash
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

# The host packages the package's Manifest names (`apt`/`yum` lines: kubelet, kubectl or
# Debian's kubernetes-client, kubernetes-cni, as upstream's repositories call them), from the
# package's own folder for this distro. kURL builds these apart from its kubernetes folder; a
# vendor who lists them in the Manifest ships them in the package.
function __kubernetes_host_packages() {
    local dir manifest packages
    dir="$(__kubernetes_package_dir)"
    manifest="$dir/Manifest"
    [ -f "$manifest" ] || return 0
    mapfile -t packages < <(awk '$1 ~ /^(apt|yum[0-9a-z]*)$/ { print $2 }' "$manifest" | sort -u)
    [ "${#packages[@]}" -gt 0 ] || return 0
    install_host_archives "$dir" "${packages[@]}"
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
    __kubernetes_host_packages
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
    # crictl (and kubeadm through it) talks to containerd, as kURL's containerd install sets.
    if [ ! -f /etc/crictl.yaml ]; then
        printf '%s\n' 'runtime-endpoint: unix:///run/containerd/containerd.sock' > /etc/crictl.yaml
    fi
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

# Before anything changes on the node (Berth's preflight phase, on the first node and on a
# joining one): a kubelet of another version, and a join command that cannot work here.
function kubernetes_preflight() {
    __kubernetes_refuse_other_kubelet
    __kubernetes_check_control_plane_timeout
    if [ -n "${KUBEADM_TOKEN:-}" ]; then
        __kubernetes_check_join
    fi
}

# `kubernetes-control-plane-timeout=` (kubeadm's timeoutForControlPlane), checked before anything
# changes as `berth kubeadm-config` checks it when it renders: a Go duration of whole seconds,
# minutes and hours, more than none and at most a day.
function __kubernetes_check_control_plane_timeout() {
    __kubernetes_control_plane_seconds >/dev/null
}

# __kubernetes_control_plane_seconds: prints kubernetes-control-plane-timeout= in seconds, or
# kURL's two minutes when it is not set; fails the hook when it is no duration.
function __kubernetes_control_plane_seconds() {
    local timeout="${KUBERNETES_CONTROL_PLANE_TIMEOUT:-}" rest seconds=0 count unit
    if [ -z "$timeout" ]; then
        echo 120
        return 0
    fi
    rest="$timeout"
    while [[ "$rest" =~ ^([0-9]{1,6})([smh])(.*)$ ]]; do
        count=$((10#${BASH_REMATCH[1]}))
        unit="${BASH_REMATCH[2]}"
        rest="${BASH_REMATCH[3]}"
        case "$unit" in
            s) seconds=$((seconds + count)) ;;
            m) seconds=$((seconds + count * 60)) ;;
            h) seconds=$((seconds + count * 3600)) ;;
        esac
    done
    if [ -n "$rest" ] || [ "$seconds" -le 0 ] || [ "$seconds" -gt 86400 ]; then
        bail "kubernetes-control-plane-timeout=$timeout is not a duration such as 20m or 1h30m (s, m and h, at most 24h)"
    fi
    echo "$seconds"
}

# The folder of kubeadm's patches of the control plane's static pods (`--experimental-patches`).
BERTH_KUBEADM_PATCHES=/opt/replicated/kubeadm-static-pod-patches

# __kubernetes_static_pod_patches: writes kubeadm's patches of the static pods where
# kubernetes-control-plane-timeout= is set, and removes any where it is not (the static pods
# are then kubeadm's, as kURL's are). With it, each control-plane component
# may fail its liveness probe for as long as it may take to start: kubeadm's eight failures
# (80 s) kill an API server that a slow machine's load keeps from answering in time, and its
# restart costs that machine minutes of CPU, which slows the others past their own probes.
function __kubernetes_static_pod_patches() {
    rm -rf "$BERTH_KUBEADM_PATCHES"
    [ -n "${KUBERNETES_CONTROL_PLANE_TIMEOUT:-}" ] || return 0
    local seconds failures component
    seconds="$(__kubernetes_control_plane_seconds)" || exit 1
    failures=$(((seconds + 9) / 10))
    [ "$failures" -ge 8 ] || failures=8
    mkdir -p "$BERTH_KUBEADM_PATCHES"
    for component in etcd kube-apiserver kube-controller-manager kube-scheduler; do
        printf 'spec:\n  containers:\n    - name: %s\n      livenessProbe:\n        failureThreshold: %s\n' \
            "$component" "$failures" >"$BERTH_KUBEADM_PATCHES/$component+strategic.yaml"
    done
}

# __kubernetes_patches_arguments: sets the array `patches` to kubeadm's argument for the
# patches __kubernetes_static_pod_patches wrote, or to nothing where it wrote none.
function __kubernetes_patches_arguments() {
    patches=()
    [ ! -d "$BERTH_KUBEADM_PATCHES" ] || patches=("--experimental-patches=$BERTH_KUBEADM_PATCHES")
}

# __kubernetes_wait_for_api: waits for the API server's health as kURL's
# spinner_kubernetes_api_healthy does, up to kubernetes-control-plane-timeout= when it is set:
# on a slow machine the API server restarts under load after kubeadm init has returned.
function __kubernetes_wait_for_api() {
    local seconds
    seconds="$(__kubernetes_control_plane_seconds)" || exit 1
    if ! spinner_until "$seconds" kubernetes_api_is_healthy; then
        bail "the Kubernetes API at $(kubernetes_api_address) did not report healthy after ${seconds}s of tries: check that the API server runs (its static pod's manifest, /etc/kubernetes/manifests/kube-apiserver.yaml, and the kubelet that starts it) and run again; on a slow machine give kubernetes-control-plane-timeout= a longer duration"
    fi
}

# A kubelet this host already has that is not the package's version is someone else's
# Kubernetes (or another version of this one): installing over it would break it.
function __kubernetes_refuse_other_kubelet() {
    commandExists kubelet || return 0
    local has
    has="$(kubelet --version 2>/dev/null | awk '{ print $2 }' | sed 's/^v//')"
    [ "$has" = "$KUBERNETES_VERSION" ] && return 0
    bail "this host already has kubelet ${has:-of no version it would tell} ($(command -v kubelet)); Kubernetes $KUBERNETES_VERSION brings its own: remove that kubelet, or install the Kubernetes it belongs to, and run again"
}

# The join command's kubernetes-master-address as HOST:PORT (kubeadm's port when it has none).
function __kubernetes_join_address() {
    local address="$KUBERNETES_MASTER_ADDR"
    [[ "$address" == *:* ]] || address="$address:6443"
    echo "$address"
}

# How long a joining node tries the cluster's API, in seconds: a busy first node (a slow
# machine, its API server restarting) answers late, so a minute, or as long as
# kubernetes-control-plane-timeout= gives a slow cluster.
function __kubernetes_join_wait_seconds() {
    if [ -n "${KUBERNETES_CONTROL_PLANE_TIMEOUT:-}" ]; then
        __kubernetes_control_plane_seconds
    else
        echo 60
    fi
}

# The join command against this node and the cluster it names, before anything changes:
# - a node where kubeadm init ran is the cluster's first node: a join command is for others;
# - a node already in a cluster must be in the one the command names (its CA's hash);
# - the cluster must answer at the command's address and know its token (a kubeadm token
#   lasts 24 hours), and its CA must be the one whose hash the command carries.
function __kubernetes_check_join() {
    local address token_id
    address="$(__kubernetes_join_address)"
    if grep -qs '^kind: InitConfiguration' /opt/replicated/kubeadm.conf; then
        bail "this node is the one kubeadm init set up (the cluster's first node): a join command is for the nodes that join it"
    fi
    if [ -f /etc/kubernetes/pki/ca.crt ] && [ "$(__kubernetes_ca_hash)" != "$KUBEADM_TOKEN_CA_HASH" ]; then
        bail "this node is already part of another cluster (its CA is not the one the join command names); run berth reset on it first"
    fi
    __kubernetes_node_is_set_up && return 0
    if ! [[ "$KUBEADM_TOKEN" =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]]; then
        bail "the join command's kubeadm-token is not a kubeadm token (six and sixteen lowercase letters or digits, a dot between); copy the whole command again"
    fi
    if ! commandExists curl; then
        logWarn "no curl on this node: the join command's token and CA are checked by kubeadm join alone"
        return 0
    fi
    local info="" seconds deadline
    seconds="$(__kubernetes_join_wait_seconds)" || exit 1
    deadline=$((SECONDS + seconds))
    while :; do
        info="$(curl -fsSk --max-time 15 "https://$address/api/v1/namespaces/kube-public/configmaps/cluster-info")" && break
        info=""
        [ "$SECONDS" -lt "$deadline" ] || break
        sleep 5
    done
    if [ -z "$info" ]; then
        bail "the cluster's API does not answer at $address (the join command's kubernetes-master-address; tried for ${seconds}s); check that this node reaches it, and on slow machines give kubernetes-control-plane-timeout= a longer duration"
    fi
    token_id="${KUBEADM_TOKEN%%.*}"
    if ! grep -q "\"jws-kubeconfig-$token_id\"" <<<"$info"; then
        bail "the cluster at $address does not know the join command's token $token_id: it has expired (a token lasts 24 hours) or was mistyped; run berth join-command on a control-plane node for a new command"
    fi
    local authority
    authority="$(grep -o 'certificate-authority-data: [A-Za-z0-9+/=]*' <<<"$info" | head -1 | awk '{ print $2 }')"
    if [ -n "$authority" ] && [ "$(base64 -d <<<"$authority" | __kubernetes_hash_of_certificate)" != "$KUBEADM_TOKEN_CA_HASH" ]; then
        bail "the cluster at $address is not the one the join command names: its CA's hash differs from kubeadm-token-ca-hash"
    fi
}

# Before any add-on's install: a host that cannot run Kubernetes is refused unchanged.
function kubernetes_pre_init() {
    __kubernetes_refuse_version_change
    __kubernetes_host_packages
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
    # Without systemd (containers, namespaces, some minimal hosts) containerd places containers
    # with cgroupfs, and this node's kubelet must agree: a flag of this node's alone, since the
    # cluster's kubelet configuration serves nodes that run systemd too.
    if ! berth_has_systemd; then
        local kind=InitConfiguration document=kubeadm-init-configuration
        if [ "$role" = join ]; then
            kind=JoinConfiguration document=kubeadm-join-configuration
        fi
        printf '%s\n' "apiVersion: $api" "kind: $kind" "metadata:" "  name: $document" \
            "nodeRegistration:" "  kubeletExtraArgs:" "    cgroup-driver: cgroupfs" \
            > "$tree/berth-cgroupfs.yaml"
        insert_patches_strategic_merge "$tree/kustomization.yaml" berth-cgroupfs.yaml
    fi
    # Where the conntrack table's size cannot be set (a node inside a network namespace or a
    # container: the sysctl is the host's), kube-proxy would exit on setting it: the cluster's
    # kube-proxy leaves conntrack's settings as the kernel has them, as kind's clusters do.
    if [ "$role" = init ] && ! __kubernetes_conntrack_settable; then
        logWarn "this node cannot set the conntrack table's size: kube-proxy will leave conntrack's settings as they are"
        printf '%s\n' "apiVersion: kubeproxy.config.k8s.io/v1alpha1" "kind: KubeProxyConfiguration" \
            "metadata:" "  name: kube-proxy-configuration" "conntrack:" "  maxPerCore: 0" \
            "  tcpEstablishedTimeout: 0s" "  tcpCloseWaitTimeout: 0s" > "$tree/berth-conntrack.yaml"
        insert_patches_strategic_merge "$tree/kustomization.yaml" berth-conntrack.yaml
    fi
    kubectl kustomize "$tree" > "$file.raw"
    "$DIR/bin/yamlutil" -r -fp "$file.raw" -yp metadata
    mv "$file.raw" "$file"
}

# Whether this node may set the conntrack table's size, as kube-proxy does (it writes the
# value it reads back).
function __kubernetes_conntrack_settable() {
    local file=/proc/sys/net/netfilter/nf_conntrack_max value
    value="$(cat "$file" 2>/dev/null)" || return 0
    (echo "$value" > "$file") 2>/dev/null
}

# What a control-plane node's API server reads beyond kubeadm's files: the audit policy its
# configuration names (request metadata, as kURL logs) and the folder of its audit log. On
# the first node and on every control-plane node that joins.
function __kubernetes_control_plane_files() {
    mkdir -p /opt/replicated /var/log/apiserver /etc/kubernetes
    printf '%s\n' 'apiVersion: audit.k8s.io/v1' 'kind: Policy' 'rules:' '- level: Metadata' > /etc/kubernetes/audit.yaml
}

# Whether the package carries the image whose Manifest name is NAME.
function __kubernetes_package_has_image() {
    [ -n "$(__kubernetes_package_image "$1")" ]
}

# The reference of the package's image NAME (its Manifest's `image NAME REFERENCE` line).
function __kubernetes_package_image() {
    awk -v name="$1" '$1 == "image" && $2 == name { print $3; exit }' \
        "$(__kubernetes_package_dir)/Manifest" 2>/dev/null
}

# The CA certificate's hash a joining node checks, as `kubeadm init` prints it.
function __kubernetes_ca_hash() {
    __kubernetes_hash_of_certificate < /etc/kubernetes/pki/ca.crt
}

# The hash kubeadm gives a CA certificate (read from standard input): the SHA-256 of its
# public key's DER encoding.
function __kubernetes_hash_of_certificate() {
    openssl x509 -pubkey |
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

# `berth restore` leaves a backup's etcd snapshot here before it runs this install: etcd's data
# is made from it, a new single-member cluster of this node (its name and peer address as
# kubeadm gives them), before kubeadm init starts etcd over it. etcd's own tool does it, from
# the package's etcd image; the data is moved into place only once whole.
function __kubernetes_restore_etcd() {
    local snapshot="$DIR/restore/etcd-snapshot.db"
    [ -f "$snapshot" ] || return 0
    if [ -d /var/lib/etcd/member ]; then
        log "etcd's data is in place (/var/lib/etcd/member): the snapshot was restored already"
        return 0
    fi
    local image name peer
    image="$(__kubernetes_package_image etcd)"
    [ -n "$image" ] || bail "this Kubernetes package has no etcd image, whose etcdctl restores the backup's snapshot"
    name="$(hostname | tr '[:upper:]' '[:lower:]')"
    peer="https://$(berth_private_address):2380"
    log "restoring etcd from the backup's snapshot, as member $name ($peer)"
    rm -rf /var/lib/etcd.restoring
    if ! ctr --namespace k8s.io run --rm --net-host \
        --mount "type=bind,src=$DIR/restore,dst=/restore,options=rbind:ro" \
        --mount "type=bind,src=/var/lib,dst=/host/var/lib,options=rbind:rw" \
        "$image" berth-etcd-restore \
        /usr/local/bin/etcdctl snapshot restore /restore/etcd-snapshot.db \
        --data-dir /host/var/lib/etcd.restoring --name "$name" \
        --initial-cluster "$name=$peer" --initial-advertise-peer-urls "$peer"; then
        rm -rf /var/lib/etcd.restoring
        bail "etcdctl could not restore the backup's snapshot (above); nothing of etcd's was kept"
    fi
    if [ -e /var/lib/etcd ] && ! rmdir /var/lib/etcd 2>/dev/null; then
        rm -rf /var/lib/etcd.restoring
        bail "/var/lib/etcd holds files but no etcd member: move them away, then run berth restore again"
    fi
    mv /var/lib/etcd.restoring /var/lib/etcd
    chmod 0700 /var/lib/etcd
}

# kURL's init: kubeadm init with the rendered configuration, then the admin kubeconfig.
function kubernetes() {
    __kubernetes_refuse_version_change
    __kubernetes_host
    # Run again on a node kubeadm already set up (a repair, or a run stopped after init):
    # the node is repaired, not initialized a second time over its running control plane.
    if __kubernetes_node_is_set_up; then
        log "Kubernetes is already set up on this node (/etc/kubernetes/kubelet.conf): repairing it, not running kubeadm init again"
        kubernetes_already_applied
        return
    fi
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
    local upload_certs=() patches=()
    if [ "$HA_CLUSTER" = "1" ]; then
        CERT_KEY="$(kubeadm certs certificate-key)"
        export CERT_KEY
        upload_certs=(--upload-certs)
    fi
    __kubernetes_control_plane_files
    __kubernetes_kubeadm_config init /opt/replicated/kubeadm.conf
    rm -f /etc/kubernetes/*.conf
    # A package without kURL's CoreDNS image (one built where CoreDNS cannot be) gets no
    # cluster DNS rather than a Deployment that never pulls.
    local skip_phases=()
    if ! __kubernetes_package_has_image coredns; then
        if __kubernetes_package_has_image cluster-dns; then
            log "Kubernetes $KUBERNETES_VERSION: this package has cluster-dns instead of kURL's CoreDNS image; cluster-dns serves the cluster's DNS"
        else
            logWarn "Kubernetes $KUBERNETES_VERSION: this package has no coredns image; the cluster gets no cluster DNS"
        fi
        skip_phases=(--skip-phases=addon/coredns)
    fi
    # As kURL: up to three tries, each keeping what the last one made (certificates,
    # manifests, etcd's data). A control plane that needs longer than kubeadm's wait to start
    # needs kubernetes-control-plane-timeout= instead: its startup probes restart it on the
    # same clock, try after try.
    __kubernetes_static_pod_patches
    __kubernetes_patches_arguments
    __kubernetes_restore_etcd
    if ! cmd_retry 3 kubeadm init \
        --ignore-preflight-errors="${KUBERNETES_INIT_IGNORE_PREFLIGHT_ERRORS:-all}" \
        --config /opt/replicated/kubeadm.conf \
        "${upload_certs[@]+"${upload_certs[@]}"}" \
        "${patches[@]+"${patches[@]}"}" \
        "${skip_phases[@]+"${skip_phases[@]}"}"; then
        # What kubeadm left (manifests, certificates, a half-made etcd) would make the next
        # run fail on it: the node goes back to where kubeadm reset leaves it.
        kubeadm reset --force >/dev/null 2>&1 || true
        bail "kubeadm init failed (above); the node is as kubeadm reset leaves it, so the same command can run again once the cause is fixed"
    fi
    # kURL's exportKubeconfig: root's kubeconfig is the admin's.
    mkdir -p /root/.kube
    cp /etc/kubernetes/admin.conf /root/.kube/config
    chmod 0600 /root/.kube/config
    __kubernetes_cluster_dns
    __kubernetes_after_init
    __kubernetes_publish_join
}

# As kURL's init after kubeadm init (on every run on the primary): the `kurl` namespace its
# add-ons put their objects in; and, where the spec has kURL's registry, its Service
# (`registry_init`), whose cluster address containerd is told to trust with the cluster's CA,
# here and, through the join command's docker-registry-ip, on every node that joins.
function __kubernetes_after_init() {
    __kubernetes_wait_for_api
    kubectl --kubeconfig /etc/kubernetes/admin.conf get namespace kurl >/dev/null 2>&1 ||
        kubectl --kubeconfig /etc/kubernetes/admin.conf create namespace kurl --save-config
    commandExists registry_init || return 0
    registry_init
    if [ -z "${DOCKER_REGISTRY_IP:-}" ]; then
        bail "registry_init gave the registry no cluster address (DOCKER_REGISTRY_IP)"
    fi
    # containerd reads /etc/containerd/certs.d at each pull: no restart is needed.
    kubeadm_registry_containerd_configure "$DOCKER_REGISTRY_IP"
    berth_set_join_param docker-registry-ip "$DOCKER_REGISTRY_IP"
}

# The cluster's DNS where the package carries cluster-dns (an `image cluster-dns` line in its
# Manifest) and not kURL's CoreDNS: two replicas behind the Service kube-dns, at the address
# and for the domain the kubelets give their pods (kubeadm's clusterDNS and clusterDomain).
# Applied again on every run on a control plane, which restores what was deleted.
function __kubernetes_cluster_dns() {
    __kubernetes_package_has_image coredns && return 0
    local image address domain config=/var/lib/kubelet/config.yaml
    image="$(__kubernetes_package_image cluster-dns)"
    [ -n "$image" ] || return 0
    address="$(awk '$1 == "clusterDNS:" { getline; print $2; exit }' "$config")"
    domain="$(awk '$1 == "clusterDomain:" { print $2; exit }' "$config")"
    if ! [[ "$address" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || ! [[ "$domain" =~ ^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$ ]]; then
        bail "cluster-dns: $config gives no usable cluster DNS address and domain (clusterDNS '$address', clusterDomain '$domain')"
    fi
    # Three tries, each after the API server reports healthy: one that restarts between its
    # health and the apply (a slow machine) refuses the connection.
    local attempt
    for attempt in 1 2 3; do
        __kubernetes_wait_for_api
        if __kubernetes_cluster_dns_objects "$image" "$address" "$domain" |
            kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f - >/dev/null; then
            break
        fi
        [ "$attempt" != 3 ] || bail "cluster-dns: its objects could not be applied (above)"
    done
    logSuccess "cluster DNS: cluster-dns answers for $domain at $address"
}

# cluster-dns's objects for IMAGE, serving ADDRESS and DOMAIN: its account, the right to read
# Services and Endpoints, the Deployment and the Service kube-dns.
function __kubernetes_cluster_dns_objects() {
    local image="$1" address="$2" domain="$3"
    cat <<EOF
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cluster-dns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: berth:cluster-dns
rules:
  - apiGroups: [""]
    resources: [services, endpoints]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: berth:cluster-dns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: berth:cluster-dns
subjects:
  - kind: ServiceAccount
    name: cluster-dns
    namespace: kube-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cluster-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 2
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      serviceAccountName: cluster-dns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      tolerations:
        - key: CriticalAddonsOnly
          operator: Exists
        - key: node-role.kubernetes.io/master
          effect: NoSchedule
        - key: node-role.kubernetes.io/control-plane
          effect: NoSchedule
      containers:
        - name: cluster-dns
          image: "$image"
          imagePullPolicy: IfNotPresent
          args: ["--domain", "$domain"]
          ports:
            - {name: dns, containerPort: 53, protocol: UDP}
            - {name: dns-tcp, containerPort: 53, protocol: TCP}
          livenessProbe:
            httpGet: {path: /health, port: 8080}
            initialDelaySeconds: 10
          readinessProbe:
            httpGet: {path: /ready, port: 8181}
          resources:
            requests: {cpu: 50m, memory: 30Mi}
            limits: {memory: 170Mi}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
    kubernetes.io/name: cluster-dns
spec:
  clusterIP: "$address"
  selector:
    k8s-app: kube-dns
  ports:
    - {name: dns, port: 53, protocol: UDP}
    - {name: dns-tcp, port: 53, protocol: TCP}
EOF
}

# Whether kubeadm has already made this node part of a cluster (init or join wrote the
# kubelet's credentials).
function __kubernetes_node_is_set_up() {
    [ -f /etc/kubernetes/kubelet.conf ]
}

# __kubernetes_kubelet_healthy: whether the kubelet answers on its health port.
function __kubernetes_kubelet_healthy() {
    [ "$(curl -fsS --max-time 3 http://127.0.0.1:10248/healthz 2>/dev/null)" = ok ]
}

# A node kubeadm set up whose kubelet stopped gets it started again: a re-run repairs the
# node; kubeadm init or join never runs twice on it. A kubelet that does not come up stops
# the run: the node runs no pod without it.
function __kubernetes_repair() {
    if systemctl is-active --quiet kubelet 2>/dev/null && __kubernetes_kubelet_healthy; then
        return 0
    fi
    logWarn "the kubelet was not running; starting it"
    systemctl start kubelet || true
    if ! spinner_until 60 __kubernetes_kubelet_healthy; then
        bail "the kubelet is not running on this node and did not start within 60 s (systemctl start kubelet; its log, journalctl -u kubelet, says why): this node runs no pod without it; fix it and run again"
    fi
}

# On a run that leaves Kubernetes as it is, the kubelet running and, on a control plane, a
# new bootstrap token for the next join command.
function kubernetes_already_applied() {
    commandExists kubeadm || return 0
    if __kubernetes_node_is_set_up; then
        __kubernetes_repair
    fi
    [ -f /etc/kubernetes/admin.conf ] || return 0
    __kubernetes_wait_for_api
    __kubernetes_cluster_dns
    __kubernetes_after_init
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
    if __kubernetes_node_is_set_up; then
        log "this node has already joined the cluster (/etc/kubernetes/kubelet.conf): repairing it, not running kubeadm join again"
        __kubernetes_repair
        __kubernetes_follow_api_address
        return
    fi
    if [ -z "$KUBERNETES_MASTER_ADDR" ] || [ -z "$KUBEADM_TOKEN" ] || [ -z "$KUBEADM_TOKEN_CA_HASH" ]; then
        bail "joining Kubernetes needs the join command's kubernetes-master-address, kubeadm-token and kubeadm-token-ca-hash; run the command the first node printed"
    fi
    mkdir -p /opt/replicated
    if [ "${MASTER:-}" = "1" ]; then
        __kubernetes_control_plane_files
    fi
    __kubernetes_kubeadm_config join /opt/replicated/kubeadm.conf
    # A control plane joins in two steps. The kubelet admits a static pod once, when its
    # manifest appears, against the resources its Node shows: etcd's asks for 100Mi of
    # ephemeral storage, which a kubelet started seconds before (as kubeadm join starts it)
    # has not yet reported, and a refused pod is never retried. Its etcd member, announced to
    # the cluster already, would then cost the cluster its quorum. So etcd's manifest is
    # written once the Node shows its storage.
    local first_step=() patches=()
    if [ "${MASTER:-}" = "1" ]; then
        first_step=(--skip-phases=control-plane-join)
        __kubernetes_static_pod_patches
        __kubernetes_patches_arguments
    fi
    if ! kubeadm join \
        --ignore-preflight-errors=all \
        --config /opt/replicated/kubeadm.conf \
        "${first_step[@]+"${first_step[@]}"}" \
        "${patches[@]+"${patches[@]}"}" ||
        { [ "${MASTER:-}" = "1" ] && ! __kubernetes_join_control_plane; }; then
        kubeadm reset --force >/dev/null 2>&1 || true
        bail "kubeadm join failed (above); the node is as kubeadm reset leaves it, so the join command can run again once the cause is fixed"
    fi
}

# Whether the API server at URL answers with a certificate this node's cluster CA signed for
# its address.
function __kubernetes_vouched() {
    curl -fsS --connect-timeout 5 --max-time 15 --cacert /etc/kubernetes/pki/ca.crt "$1/healthz" >/dev/null 2>&1
}

# __kubernetes_until_vouched URL SECONDS: tries __kubernetes_vouched for SECONDS of the clock.
function __kubernetes_until_vouched() {
    local deadline=$((SECONDS + $2))
    until __kubernetes_vouched "$1"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 5
    done
}

# A node that joined the cluster at another address, where no API server answers any more
# (its control plane restored onto another machine: berth restore says to run the join
# command on each node), is pointed at the join command's address: its kubelet's kubeconfig
# names it, and the kubelet restarts. Only once the API server there answers with a
# certificate this node's own cluster CA signed for that address, so no other server can take
# the node over. An address that still answers is kept (a load balancer the kubelet reaches
# the API through, as kubeadm's controlPlaneEndpoint gives it). A control plane ran its own
# etcd member and API server, which a new address does not mend: it is reset and joined
# again.
function __kubernetes_follow_api_address() {
    local address kubeconfig=/etc/kubernetes/kubelet.conf current
    [ -n "$KUBERNETES_MASTER_ADDR" ] || return 0
    address="$(__kubernetes_join_address)"
    local plain='^[][A-Za-z0-9.:-]+$'
    if ! [[ "$address" =~ $plain ]]; then
        bail "the join command's kubernetes-master-address '$address' is not a host and port; copy the whole command again"
    fi
    current="$(awk '$1 == "server:" { print $2; exit }' "$kubeconfig")"
    [ -n "$current" ] || bail "$kubeconfig names no API server (no server: line); run berth reset on this node, then the join command"
    local seconds
    seconds="$(__kubernetes_join_wait_seconds)" || exit 1
    # Where the node is already pointed: repaired only if the cluster answers there, rather
    # than reported joined while it cannot reach its cluster.
    if [ "$current" = "https://$address" ]; then
        __kubernetes_until_vouched "$current" "$seconds" ||
            bail "this node's cluster API at $current, which the join command names too, did not answer for ${seconds}s (its certificate signed by /etc/kubernetes/pki/ca.crt): the node cannot reach its cluster; check that the API server runs there, then run the join command again"
        return 0
    fi
    if __kubernetes_vouched "$current"; then
        logWarn "this node reaches the cluster's API at $current, which answers; the join command names https://$address: the node keeps $current"
        return 0
    fi
    if [ -f /etc/kubernetes/manifests/etcd.yaml ]; then
        bail "this control-plane node reaches the cluster at $current, and the join command names $address: a control plane that ran an etcd member of the cluster before it moved is joined again, not pointed elsewhere: on a control-plane node, berth remove-node $(__kubernetes_node_name); here, berth reset; then run the control-plane join command"
    fi
    if ! __kubernetes_until_vouched "https://$address" "$seconds"; then
        bail "this node reaches the cluster at $current; the join command names $address, where no API server of this node's cluster answered for ${seconds}s (its certificate must be signed by /etc/kubernetes/pki/ca.crt for that address): nothing was changed"
    fi
    log "the cluster's API moved from $current to https://$address: the kubelet follows it"
    sed "s#^\([[:space:]]*server:\).*#\1 https://$address#" "$kubeconfig" > "$kubeconfig.berth"
    chmod 0600 "$kubeconfig.berth"
    mv "$kubeconfig.berth" "$kubeconfig"
    systemctl restart kubelet || true
    if ! spinner_until 60 __kubernetes_kubelet_healthy; then
        bail "the kubelet did not come back within 60 s after it was pointed at $address (journalctl -u kubelet says why); run the join command again"
    fi
}

# The second step of a control plane's join: once the kubelet's Node shows its ephemeral
# storage, kubeadm adds the etcd member and its static pod, then marks the node.
function __kubernetes_join_control_plane() {
    if ! spinner_until 180 __kubernetes_node_shows_storage; then
        logFail "the kubelet did not report this node's ephemeral storage within 180 s; etcd's static pod would be refused"
        return 1
    fi
    local patches
    __kubernetes_patches_arguments
    kubeadm join phase control-plane-join all --config /opt/replicated/kubeadm.conf \
        "${patches[@]+"${patches[@]}"}"
}

# Whether this node's Node object, read with the kubelet's own credentials, shows allocatable
# ephemeral storage.
function __kubernetes_node_shows_storage() {
    local name storage
    name="$(__kubernetes_node_name)"
    [ -n "$name" ] || return 1
    storage="$(kubectl --kubeconfig /etc/kubernetes/kubelet.conf get node "$name" \
        -o jsonpath='{.status.allocatable.ephemeral-storage}' 2>/dev/null)"
    [ -n "$storage" ] && [ "$storage" != 0 ]
}

# `berth remove-node NAME` (kURL's ekco-purge-node), on a control-plane node: NAME leaves the
# cluster for good. It is drained when Ready (giving up after two minutes), its etcd member is
# removed and its API endpoint taken out of kubeadm's ClusterStatus when it was a control
# plane, and its Node object is deleted. On NAME itself, `berth reset` undoes its install.
function kubernetes_remove_node() {
    local name="${BERTH_REMOVE_NODE:-}" this
    [ -f /etc/kubernetes/admin.conf ] ||
        bail "berth remove-node runs on a control-plane node; this one has no /etc/kubernetes/admin.conf"
    local kubectl=(kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=30s)
    this="$(__kubernetes_node_name)"
    if [ "$name" = "$this" ]; then
        bail "$name is this node: run berth remove-node on another control-plane node, or berth reset on this one"
    fi
    if ! "${kubectl[@]}" get node "$name" >/dev/null 2>&1; then
        bail "the cluster has no node $name; its nodes: $("${kubectl[@]}" get nodes -o jsonpath='{.items[*].metadata.name}')"
    fi
    local control_plane=0
    if "${kubectl[@]}" get nodes -o name -l 'node-role.kubernetes.io/master' | grep -qx "node/$name" ||
        "${kubectl[@]}" get nodes -o name -l 'node-role.kubernetes.io/control-plane' | grep -qx "node/$name"; then
        control_plane=1
    fi
    # A node that is gone (not Ready) cannot drain: its pods go with its Node object.
    if [ "$("${kubectl[@]}" get node "$name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; then
        log "draining $name"
        "${kubectl[@]}" drain "$name" --ignore-daemonsets --delete-emptydir-data --force --timeout=120s ||
            logWarn "$name did not drain within two minutes; removing it anyway"
    else
        log "$name is not Ready: not drained; its pods go with its Node object"
    fi
    if [ "$control_plane" = 1 ]; then
        __kubernetes_remove_etcd_member "$name" "$this"
        __kubernetes_remove_api_endpoint "$name"
    fi
    "${kubectl[@]}" delete node "$name" --timeout=60s >/dev/null ||
        bail "the Node object $name could not be deleted (above)"
    logSuccess "node $name removed from the cluster"
}

# Removes NAME's member from the stacked etcd, through THIS node's etcd.
function __kubernetes_remove_etcd_member() {
    local name="$1" this="$2" id
    local etcdctl=(kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system exec "etcd-$this" --
        etcdctl --endpoints https://127.0.0.1:2379 --cacert /etc/kubernetes/pki/etcd/ca.crt
        --cert /etc/kubernetes/pki/etcd/server.crt --key /etc/kubernetes/pki/etcd/server.key)
    id="$("${etcdctl[@]}" member list | awk -F', ' -v name="$name" '$3 == name { print $1 }')" ||
        bail "etcd's members could not be listed through etcd-$this (above)"
    if [ -z "$id" ]; then
        log "etcd has no member $name"
        return 0
    fi
    "${etcdctl[@]}" member remove "$id" >/dev/null || bail "etcd member $name ($id) could not be removed (above)"
    log "etcd member $name removed"
}

# Takes NAME out of the API endpoints kubeadm keeps in its ClusterStatus (kubeadm reset does
# it for the node it runs on).
function __kubernetes_remove_api_endpoint() {
    local name="$1" status kept
    status="$(kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get configmap kubeadm-config \
        -o jsonpath='{.data.ClusterStatus}' 2>/dev/null)"
    [ -n "$status" ] || return 0
    # NAME's block: its "  NAME:" line and the deeper lines below it.
    kept="$(awk -v key="  $name:" '
        $0 == key { skip = 1; next }
        skip && /^    / { next }
        { skip = 0; print }' <<<"$status")"
    [ "$kept" != "$status" ] || return 0
    # The patch carries the document as one JSON string: its lines joined by \n. (kubeadm
    # writes neither quotes nor backslashes there; a document with them is left alone.)
    if [[ "$kept" == *[\\\"]* ]]; then
        logWarn "$name's API endpoint stays in kubeadm's ClusterStatus (kube-system/kubeadm-config), which holds quotes or backslashes"
        return 0
    fi
    kept="$(awk 'BEGIN { ORS = "" } { print $0 "\\n" }' <<<"$kept")"
    kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system patch configmap kubeadm-config \
        --type merge -p "{\"data\":{\"ClusterStatus\":\"$kept\"}}" >/dev/null ||
        logWarn "$name's API endpoint stays in kubeadm's ClusterStatus (kube-system/kubeadm-config)"
}

# The node's name in the cluster: its kubelet certificate's common name (system:node:NAME).
function __kubernetes_node_name() {
    openssl x509 -noout -subject -nameopt multiline \
        -in /var/lib/kubelet/pki/kubelet-client-current.pem 2>/dev/null |
        sed -n 's/^ *commonName *= *system:node://p'
}

# `berth reset`: the node leaves the cluster and goes back to where it was before kubeadm.
# The kubelet stops, kubeadm reset removes this node's etcd member from a stacked etcd and
# everything kubeadm wrote, then the Node object is deleted (with the admin's credentials on a
# control plane, else the node's own, which may delete only itself). The kubelet and
# kubectl packages stay, so the node can join again.
function kubernetes_reset() {
    commandExists kubeadm || return 0
    local name kubeconfig=/etc/kubernetes/kubelet.conf saved=""
    name="$(__kubernetes_node_name)"
    [ -f /etc/kubernetes/admin.conf ] && kubeconfig=/etc/kubernetes/admin.conf
    # The kubelet stops first: it would register the Node again. (A control plane's static
    # pods run on without it until kubeadm reset removes them.)
    systemctl stop kubelet >/dev/null 2>&1 || true
    # The credentials, kept whole (the files they name inlined) for after kubeadm reset, which
    # removes them: kubeadm reset reads this node's Node object to remove its etcd member, so
    # the Node goes after it.
    if [ -n "$name" ] && [ -f "$kubeconfig" ]; then
        saved="$(mktemp)"
        kubectl --kubeconfig "$kubeconfig" config view --raw --flatten > "$saved" 2>/dev/null ||
            { rm -f "$saved"; saved=""; }
    fi
    kubeadm reset --force
    if [ -n "$saved" ]; then
        kubectl --kubeconfig "$saved" delete node "$name" --timeout=30s >/dev/null 2>&1 ||
            logWarn "the Node object $name could not be deleted from here; on a control-plane node: kubectl delete node $name"
        rm -f "$saved"
    fi
    rm -f /root/.kube/config /etc/crictl.yaml /opt/replicated/kubeadm.conf /etc/kubernetes/audit.yaml
    rm -rf "$BERTH_KUBEADM_PATCHES"
    # What kube-proxy, the kubelet and the CNI plugins left in iptables goes with them: their
    # chains and the rules that jump to them, each table rewritten at once, the rest kept.
    local table
    for table in filter nat mangle; do
        iptables-save -t "$table" 2>/dev/null | grep -q -e 'KUBE-' -e 'CNI-' || continue
        iptables-save -t "$table" | grep -v -e 'KUBE-' -e 'CNI-' | iptables-restore -T "$table" ||
            logWarn "iptables table $table still holds Kubernetes' rules"
    done
}
