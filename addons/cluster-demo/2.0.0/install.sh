# shellcheck shell=bash
# The demo program as a cluster workload, installed as kURL's add-ons install theirs: the
# install hook (on the primary) renders the kustomize base into $DIR/kustomize/cluster-demo
# with the spec's values and applies it; a joining node's `_join` checks that the image its
# pods run is on the node. An upgrade applies the next version's base over it.

# The base, with the spec's replicas as a patch.
function __cluster_demo_render() {
    local src="$DIR/addons/cluster-demo/$CLUSTER_DEMO_VERSION/kustomize"
    local dst="$DIR/kustomize/cluster-demo"
    mkdir -p "$dst"
    cp -r "$src/." "$dst/"
    CLUSTER_DEMO_REPLICAS="${CLUSTER_DEMO_REPLICAS:-2}"
    render_yaml_file_2 "$src/replicas-patch.yaml" >"$dst/replicas-patch.yaml"
    insert_patches_strategic_merge "$dst/kustomization.yaml" replicas-patch.yaml
}

function __cluster_demo_apply() {
    __cluster_demo_render
    kubectl apply -k "$DIR/kustomize/cluster-demo"
    # Reset removes the objects only where they were applied from.
    mkdir -p "$DIR/cluster-demo"
    echo "$CLUSTER_DEMO_VERSION" >"$DIR/cluster-demo/applied-here"
}

function cluster_demo() {
    __cluster_demo_apply
    logSuccess "cluster-demo $CLUSTER_DEMO_VERSION applied: $CLUSTER_DEMO_REPLICAS replicas in namespace cluster-demo"
}

# Applied again on every run: what was changed or deleted in the cluster comes back.
function cluster_demo_already_applied() {
    __cluster_demo_apply
    logSuccess "cluster-demo $CLUSTER_DEMO_VERSION applied again"
}

function cluster_demo_join() {
    local image="docker.io/berth/demo:$CLUSTER_DEMO_VERSION"
    if ! ctr --namespace k8s.io images list -q "name==$image" | grep -qx "$image"; then
        bail "cluster-demo: $image is not in this node's containerd, where its pods would run"
    fi
    logSuccess "cluster-demo: $image is in place for the pods scheduled here"
}

function cluster_demo_reset() {
    [ -f "$DIR/cluster-demo/applied-here" ] || return 0
    # Asked, not waited for: the namespace controller finishes it, and a pod on a node that is
    # gone (a worker reset first) would hold the wait for minutes.
    if [ -f /etc/kubernetes/admin.conf ]; then
        kubectl --kubeconfig /etc/kubernetes/admin.conf delete namespace cluster-demo \
            --ignore-not-found --wait=false || logWarn "cluster-demo: its namespace could not be deleted (above)"
    fi
    rm -rf "$DIR/cluster-demo"
}
