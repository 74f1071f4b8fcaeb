# shellcheck shell=bash
# Builds $DIR/kustomize/kustomize-demo with each kustomization helper, as kURL add-ons do.
# Spec fields: replicas (KUSTOMIZE_DEMO_REPLICAS), greeting (KUSTOMIZE_DEMO_GREETING).

function kustomize_demo() {
    local src="$DIR/addons/kustomize-demo/$KUSTOMIZE_DEMO_VERSION/kustomize"
    local dst="$DIR/kustomize/kustomize-demo"
    KUSTOMIZE_DEMO_REPLICAS="${KUSTOMIZE_DEMO_REPLICAS:-1}"
    KUSTOMIZE_DEMO_GREETING="${KUSTOMIZE_DEMO_GREETING:-hello}"

    cp -r "$src/." "$dst/"
    insert_resources "$dst/kustomization.yaml" deployment.yaml
    render_yaml_file_2 "$src/configmap.yaml" > "$dst/configmap.yaml"
    insert_resources "$dst/kustomization.yaml" configmap.yaml
    insert_bases "$dst/kustomization.yaml" base
    render_yaml_file_2 "$src/replicas-patch.yaml" > "$dst/replicas-patch.yaml"
    insert_patches_strategic_merge "$dst/kustomization.yaml" replicas-patch.yaml
    insert_patches_json_6902 "$dst/kustomization.yaml" image-patch.json apps v1 Deployment demo demo

    if commandExists kubectl; then
        kubectl kustomize "$dst" > "$dst/rendered.yaml"
        logSuccess "kustomize-demo rendered $(grep -c '^kind:' "$dst/rendered.yaml") resources"
    else
        logWarn "kubectl is not installed; $dst is ready but not rendered"
    fi
}
