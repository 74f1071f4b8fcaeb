# shellcheck shell=bash
# Kubernetes helpers with kURL's names: versions and roles of this node, and kURL's kubectl
# checks (resources, pods, rollouts, nodes) that add-ons poll with spinner_until.

# kubernetes_version_minor VERSION: prints the minor number of [v]X.Y.Z (other text unchanged).
function kubernetes_version_minor() {
    # shellcheck disable=SC2001 # a regular expression, as kURL's
    echo "$1" | sed 's/v\?[0-9]*\.\([0-9]*\)\.[0-9]*/\1/'
}

# kubelet_version: prints the installed kubelet's version without its v (nothing without one).
function kubelet_version() {
    local output
    output="$(kubelet --version 2>/dev/null)" || return 0
    output="${output#* }"
    echo "${output#v}"
}

# __berth_kubectl_versions [--client]: `kubectl version` one line per side ("Client Version:
# v1.x.y"): --short up to kubectl 1.27 (without it, Go structs), plain from 1.28 (no --short).
function __berth_kubectl_versions() {
    kubectl version --short "$@" 2>/dev/null || kubectl version "$@" 2>/dev/null
}

# kubectl_client_version: prints kubectl's client version (v1.x.y).
function kubectl_client_version() {
    __berth_kubectl_versions --client | awk 'tolower($0) ~ /client/ { print $3; exit }'
}

# kubectl_server_version: prints the API server's version (v1.x.y).
function kubectl_server_version() {
    __berth_kubectl_versions | awk 'tolower($0) ~ /server/ { print $3; exit }'
}

# kubernetes_is_master: whether this node is (or becomes) a control plane: MASTER=1 or a
# kube-apiserver manifest on the host.
function kubernetes_is_master() {
    [ "${MASTER:-}" = "1" ] || [ -f /etc/kubernetes/manifests/kube-apiserver.yaml ]
}

# kubernetes_resource_exists NAMESPACE KIND NAME: whether kubectl finds the resource.
function kubernetes_resource_exists() {
    kubectl -n "$1" get "$2" "$3" >/dev/null 2>&1
}

# kubernetes_secret_value NAMESPACE SECRET KEY: prints the decoded value of KEY in SECRET.
function kubernetes_secret_value() {
    kubectl -n "$1" get secret "$2" -o jsonpath="{ .data.$3 }" 2>/dev/null | base64 --decode
}

# kubernetes_scale NAMESPACE KIND NAME REPLICAS: scales the resource if it exists.
function kubernetes_scale() {
    if ! kubernetes_resource_exists "$1" "$2" "$3"; then
        return 0
    fi
    kubectl -n "$1" scale "$2" "$3" --replicas="$4"
}

# kubernetes_scale_down NAMESPACE KIND NAME: scales the resource to 0 replicas if it exists.
function kubernetes_scale_down() {
    kubernetes_scale "$1" "$2" "$3" 0
}

# kubernetes_service_healthy NAMESPACE NAME: whether the service has ready endpoints.
function kubernetes_service_healthy() {
    kubectl -n "$1" get endpoints "$2" --no-headers 2>/dev/null | grep -qv "<none>"
}

# __berth_pod_phase NAME NAMESPACE: prints the pod's phase (nothing if kubectl fails).
function __berth_pod_phase() {
    kubectl -n "$2" get pod "$1" -o jsonpath='{ .status.phase }' 2>/dev/null || true
}

# kubernetes_pod_started NAME NAMESPACE: whether the pod is Running, Failed or Succeeded.
function kubernetes_pod_started() {
    case "$(__berth_pod_phase "$1" "$2")" in
        Running | Failed | Succeeded) return 0 ;;
    esac
    return 1
}

# kubernetes_pod_completed NAME NAMESPACE: whether the pod is Failed or Succeeded.
function kubernetes_pod_completed() {
    case "$(__berth_pod_phase "$1" "$2")" in
        Failed | Succeeded) return 0 ;;
    esac
    return 1
}

# kubernetes_pod_succeeded NAME NAMESPACE: whether the pod is Succeeded.
function kubernetes_pod_succeeded() {
    [ "$(__berth_pod_phase "$1" "$2")" = "Succeeded" ]
}

# kubernetes_any_node_ready: whether some node reports Ready.
function kubernetes_any_node_ready() {
    kubectl get nodes --no-headers 2>/dev/null | awk '{ print $2 }' | grep -v 'NotReady' | grep -q 'Ready'
}

# existing_kubernetes_api_address: the API address the cluster recorded in kURL's kurl-config
# ConfigMap (kURL reads it while upgrading Kubernetes).
function existing_kubernetes_api_address() {
    kubectl get cm -n kube-system kurl-config -o jsonpath='{ .data.kubernetes_api_address }'
}

# kubernetes_api_address: HOST:PORT where this node reaches the API server, as kURL's: the load
# balancer where the spec names one (LOAD_BALANCER_ADDRESS, with LOAD_BALANCER_PORT or its own
# :PORT, else 6443), otherwise this node's private address on 6443; IPv6 in brackets.
function kubernetes_api_address() {
    if [ -n "${upgrading_kubernetes:-}" ]; then
        existing_kubernetes_api_address
        return
    fi
    local address="${LOAD_BALANCER_ADDRESS:-}" port="${LOAD_BALANCER_PORT:-}"
    if [ -z "$address" ]; then
        address="$(berth_private_address)" || return 1
        port=6443
    elif [ -z "$port" ]; then
        if [[ "$address" =~ ^\[(.*)\]:([0-9]+)$ ]] || [[ "$address" =~ ^([^:]*):([0-9]+)$ ]]; then
            address="${BASH_REMATCH[1]}"
            port="${BASH_REMATCH[2]}"
        else
            port=6443
        fi
    fi
    address="${address#[}"
    address="${address%]}"
    if [[ "$address" == *:* ]]; then
        address="[$address]"
    fi
    echo "$address:$port"
}

# kubernetes_api_is_healthy: whether the API server answers `ok` on /healthz (kURL's, through
# the distro's ${K8S_DISTRO}_api_is_healthy).
function kubernetes_api_is_healthy() {
    "${K8S_DISTRO:-kubeadm}_api_is_healthy"
}

# spinner_kubernetes_api_healthy: waits up to two minutes for the API server's health, or
# fails the hook, as kURL's does.
function spinner_kubernetes_api_healthy() {
    if ! spinner_until 120 kubernetes_api_is_healthy; then
        bail "Kubernetes API failed to report healthy"
    fi
}

# containerd_is_healthy: whether containerd answers on its socket.
function containerd_is_healthy() {
    ctr -a "$("${K8S_DISTRO:-kubeadm}_get_containerd_sock")" images list &>/dev/null
}

# spinner_containerd_is_healthy: waits up to two minutes for containerd, or fails the hook, as
# kURL's does after a restart.
function spinner_containerd_is_healthy() {
    if ! spinner_until 120 containerd_is_healthy; then
        bail "Containerd failed to restart"
    fi
}

# kubeadm_cluster_configuration: prints the cluster's kubeadm ClusterConfiguration.
function kubeadm_cluster_configuration() {
    kubectl get cm -n kube-system kubeadm-config -o jsonpath='{ .data.ClusterConfiguration }'
}

# kubernetes_get_control_plane_label: prints the control-plane node label this cluster uses:
# node-role.kubernetes.io/master if any node has it, else node-role.kubernetes.io/control-plane.
function kubernetes_get_control_plane_label() {
    if kubectl get nodes --show-labels 2>/dev/null | grep -qF "node-role.kubernetes.io/master"; then
        echo "node-role.kubernetes.io/master"
    else
        echo "node-role.kubernetes.io/control-plane"
    fi
}

# kubernetes_kustomize_config_migrate FOLDER: with Kubernetes 1.27 or later as the target
# (KUBERNETES_TARGET_VERSION_MINOR), rewrites FOLDER's kustomization for kustomize v5
# (`kustomize edit fix`).
function kubernetes_kustomize_config_migrate() {
    local minor="${KUBERNETES_TARGET_VERSION_MINOR:-}"
    if [[ "$minor" =~ ^[0-9]+$ ]] && [ "$minor" -ge 27 ]; then
        (cd "$1" && kustomize edit fix)
    fi
}

# node_is_using_docker: whether this node's kubelet talks to docker (dockershim).
function node_is_using_docker() {
    kubectl get node "$(get_local_node_name)" \
        -o jsonpath='{.metadata.annotations.kubeadm\.alpha\.kubernetes\.io/cri-socket}' 2>/dev/null |
        grep -q "dockershim.sock"
}

# x_fully_updated NAMESPACE KIND NAME: whether the deployment or statefulset has all its
# replicas available, ready and updated.
function x_fully_updated() {
    local status desired available ready updated
    # Separated by colons: a field the status lacks (no replica of that kind yet) stays empty.
    status="$(kubectl get "$2" -n "$1" "$3" -o jsonpath='{.status.replicas}:{.status.availableReplicas}:{.status.readyReplicas}:{.status.updatedReplicas}' 2>/dev/null)" || return 1
    IFS=: read -r desired available ready updated <<<"$status"
    # A StatefulSet has availableReplicas from Kubernetes 1.22; before, ready is what there is
    # (kURL's compares the missing field and waits for ever).
    if [ "$2" = statefulset ] && [ -z "$available" ]; then
        available="$ready"
    fi
    [ "$desired" = "$available" ] && [ "$desired" = "$ready" ] && [ "$desired" = "$updated" ]
}

# deployment_fully_updated NAMESPACE NAME: whether the deployment is fully rolled out.
function deployment_fully_updated() {
    x_fully_updated "$1" deployment "$2"
}

# statefulset_fully_updated NAMESPACE NAME: whether the statefulset is fully rolled out.
function statefulset_fully_updated() {
    x_fully_updated "$1" statefulset "$2"
}

# daemonset_fully_updated NAMESPACE NAME: whether the daemonset runs, ready and updated, on
# every node it is scheduled to.
function daemonset_fully_updated() {
    local status desired current available ready updated
    status="$(kubectl get daemonset -n "$1" "$2" -o jsonpath='{.status.desiredNumberScheduled}:{.status.currentNumberScheduled}:{.status.numberAvailable}:{.status.numberReady}:{.status.updatedNumberScheduled}' 2>/dev/null)" || return 1
    IFS=: read -r desired current available ready updated <<<"$status"
    [ "$desired" = "$available" ] && [ "$desired" = "$current" ] &&
        [ "$desired" = "$ready" ] && [ "$desired" = "$updated" ]
}

# pod_count_by_selector NAMESPACE SELECTOR: prints how many pods match SELECTOR; -1 when
# kubectl fails.
function pod_count_by_selector() {
    local pods
    if ! pods="$(kubectl -n "$1" get pods --no-headers -l "$2" 2>/dev/null)"; then
        echo -1
        return 0
    fi
    if [ -z "$pods" ]; then
        echo 0
    else
        printf '%s\n' "$pods" | wc -l
    fi
}

# pods_gone_by_selector NAMESPACE SELECTOR: whether no pod matches SELECTOR.
function pods_gone_by_selector() {
    [ "$(pod_count_by_selector "$1" "$2")" = "0" ]
}

# check_for_running_pods NAMESPACE: whether every pod of NAMESPACE is Running with all its
# containers ready, or Succeeded (evicted pods aside); when not, returns 1 and exports
# UNHEALTHY_PODS with the names of the others.
function check_for_running_pods() {
    local namespace="$1" pods pod phase containers container unhealthy=""
    pods="$(kubectl get pods -n "$namespace" -o jsonpath='{.items[*].metadata.name}' 2>/dev/null || true)"
    for pod in $pods; do
        phase="$(__berth_pod_phase "$pod" "$namespace")"
        if [ "$phase" = "Failed" ] &&
            [ "$(kubectl get pod "$pod" -n "$namespace" -o jsonpath='{.status.reason}' 2>/dev/null)" = "Evicted" ]; then
            continue
        fi
        if [ "$phase" = "Succeeded" ]; then
            continue
        fi
        if [ "$phase" != "Running" ]; then
            unhealthy="$unhealthy $pod"
            continue
        fi
        containers="$(kubectl get pod "$pod" -n "$namespace" -o jsonpath='{.spec.containers[*].name}' 2>/dev/null || true)"
        for container in $containers; do
            if [ "$(kubectl get pod "$pod" -n "$namespace" -o jsonpath="{.status.containerStatuses[?(@.name==\"$container\")].ready}" 2>/dev/null)" != "true" ]; then
                unhealthy="$unhealthy $pod"
                break
            fi
        done
    done
    if [ -n "$unhealthy" ]; then
        export UNHEALTHY_PODS="$unhealthy"
        return 1
    fi
    return 0
}

# ekco_pods_gone: whether EKCO's operator pods are gone from the kurl namespace.
function ekco_pods_gone() {
    pods_gone_by_selector kurl app=ekc-operator
}

# prometheus_pods_gone: whether no Prometheus pod is left in the monitoring namespace (both
# label schemes, before and after Prometheus 0.53).
function prometheus_pods_gone() {
    local selector
    for selector in app=prometheus app.kubernetes.io/name=prometheus; do
        if kubectl -n monitoring get pods -l "$selector" 2>/dev/null | grep -q 'prometheus'; then
            return 1
        fi
    done
    return 0
}

# prometheus_operator_pods_gone: whether the Prometheus operator's pods are gone.
function prometheus_operator_pods_gone() {
    ! kubectl -n monitoring get pods -l app=kube-prometheus-stack-operator 2>/dev/null | grep -q 'prometheus'
}

# spinnerPodRunning NAMESPACE POD_PREFIX: waits, without end, until a pod whose name starts
# with POD_PREFIX is Running.
function spinnerPodRunning() {
    local namespace="$1" prefix="$2"
    until kubectl -n "$namespace" get pods --no-headers 2>/dev/null |
        awk -v prefix="$prefix" 'index($1, prefix) == 1 && $3 == "Running" { found = 1 } END { exit !found }'; do
        __berth_spin_frame
        sleep 0.75
    done
}

# check_network: checks pod networking as kURL does: waits up to 10 minutes for a Ready node,
# runs kURL's kurlnet client and server pods ($KURL_UTIL_IMAGE) and bails if the client fails;
# if it has not finished after a minute, prints its logs and keeps waiting.
function check_network() {
    logStep "Checking cluster networking"
    if [ -n "${WEAVE_VERSION:-}" ]; then
        log "Checking if weave-net binary can be found in the path /opt/cni/bin/"
        if ! compgen -G "/opt/cni/bin/*weave-net*" >/dev/null; then
            logWarn "Unable to find weave-net binary, deleting weave-net pod so that the binary will be recreated"
            kubectl delete pods --selector=name=weave-net --field-selector="spec.nodeName=$(get_local_node_name)" \
                -n kube-system --ignore-not-found=true
        fi
    fi
    if ! kubernetes_any_node_ready; then
        echo "Waiting up to 10 minutes for node to report Ready"
        if ! spinner_until 600 kubernetes_any_node_ready; then
            kubectl get nodes || true
            bail "Any Node failed to report Ready"
        fi
    fi
    kubectl delete pods kurlnet-client kurlnet-server --force --grace-period=0 >/dev/null 2>&1 || true
    kubectl apply -f - <<EOF
apiVersion: v1
kind: Service
metadata:
  name: kurlnet
spec:
  selector:
    app: kurlnet
    component: server
  ports:
  - protocol: TCP
    port: 8080
    targetPort: 8080
---
apiVersion: v1
kind: Pod
metadata:
  name: kurlnet-server
  labels:
    app: kurlnet
    component: server
spec:
  restartPolicy: OnFailure
  containers:
  - name: pod
    image: ${KURL_UTIL_IMAGE:-}
    command: [/usr/local/bin/network, --server]
---
apiVersion: v1
kind: Pod
metadata:
  name: kurlnet-client
  labels:
    app: kurlnet
    component: client
spec:
  restartPolicy: OnFailure
  containers:
  - name: pod
    image: ${KURL_UTIL_IMAGE:-}
    command: [/usr/local/bin/network, --client, --address, http://kurlnet.default.svc.cluster.local:8080]
EOF
    echo "Waiting for kurlnet-client pod to start"
    if ! spinner_until 120 kubernetes_pod_started kurlnet-client default; then
        bail "kurlnet-client pod failed to start"
    fi
    if ! spinner_until 60 kubernetes_pod_completed kurlnet-client default; then
        # shellcheck disable=SC2059 # kURL's colours are part of the format
        printf "${YELLOW}There appears to be a problem with cluster networking${NC}\n"
        kubectl logs kurlnet-client || true
        spinner_until -1 kubernetes_pod_completed kurlnet-client default
    fi
    if kubernetes_pod_succeeded kurlnet-client default; then
        kubectl delete pods kurlnet-client kurlnet-server --force --grace-period=0
        kubectl delete service kurlnet
        return 0
    fi
    bail "kurlnet-client pod failed to validate cluster networking"
}
