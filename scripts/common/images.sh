# shellcheck shell=bash
# Container image helpers with kURL's names: loading an add-on's image archives into the
# container runtime (containerd's k8s.io namespace, or docker) and naming images as runtimes do.

# __berth_images_use_docker: whether images go to docker rather than containerd: as kURL, when
# the spec has docker (DOCKER_VERSION); BERTH_CONTAINER_RUNTIME=docker or containerd decides first.
function __berth_images_use_docker() {
    case "${BERTH_CONTAINER_RUNTIME:-}" in
        docker) return 0 ;;
        containerd) return 1 ;;
    esac
    [ -n "${DOCKER_VERSION:-}" ]
}

# __berth_ctr ARG…: runs `ctr` on the k8s.io namespace at containerd's address
# (CONTAINERD_ADDRESS when set, else the kubeadm socket).
function __berth_ctr() {
    ctr --address "$(kubeadm_get_containerd_sock)" --namespace k8s.io "$@"
}

# __berth_is_gzip FILE: whether FILE starts with gzip's magic bytes.
function __berth_is_gzip() {
    local magic
    magic="$(head -c 2 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')"
    [ "$magic" = "1f8b" ]
}

# __berth_import_gzip ARCHIVE: streams the gzip'd image ARCHIVE into containerd; fails if
# either gunzip or the import does.
function __berth_import_gzip() {
    local -
    set -o pipefail
    gunzip -c "$1" | __berth_ctr images import -
}

# load_images FOLDER: loads every image archive in FOLDER (and below): *.tar.gz, *.tgz and
# *.tar (kURL's images/NAME.tar.gz is a gzip'd `docker save`), into containerd's k8s.io
# namespace with `ctr images import`, or into docker with `docker load`; then adds kURL's
# k8s.gcr.io <-> registry.k8s.io aliases. A missing FOLDER loads nothing. Returns 1 if an
# archive failed to load (each failure is named), after trying them all.
function load_images() {
    local folder="$1" archive failed=0 loaded
    [ -d "$folder" ] || return 0
    # A Berth package keeps its images as one OCI layout, which Berth itself verifies and loads
    # (the runtime's add-on's right after its install hook): nothing is left to do here.
    if [ -f "$folder/oci-layout" ]; then
        return 0
    fi
    local archives=()
    while IFS= read -r -d '' archive; do
        archives+=("$archive")
    done < <(find "$folder" -type f \( -name '*.tar.gz' -o -name '*.tgz' -o -name '*.tar' \) -print0 | sort -z)
    for archive in "${archives[@]}"; do
        loaded=0
        if __berth_images_use_docker; then
            docker load <"$archive" || loaded=$?
        elif __berth_is_gzip "$archive"; then
            __berth_import_gzip "$archive" || loaded=$?
        else
            __berth_ctr images import "$archive" || loaded=$?
        fi
        if [ "$loaded" != "0" ]; then
            logFail "Failed to load the images of ${archive//%/%%}"
            failed=1
        fi
    done
    retag_gcr_images
    [ "$failed" = "0" ]
}

# retag_gcr_images: gives every k8s.gcr.io image a registry.k8s.io alias and back (and a
# coredns image also registry.k8s.io/coredns:TAG), in docker or containerd; errors are ignored.
function retag_gcr_images() {
    local images image tag
    if __berth_images_use_docker; then
        commandExists docker || return 0
        images="$(docker images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -F k8s.gcr.io || true)"
        for image in $images; do
            docker tag "$image" "${image//k8s.gcr.io/registry.k8s.io}" 2>/dev/null || true
            if [[ "$image" == *coredns* ]]; then
                tag="${image##*:}"
                docker tag "$image" "registry.k8s.io/coredns:$tag" 2>/dev/null || true
            fi
        done
        images="$(docker images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -F registry.k8s.io || true)"
        for image in $images; do
            docker tag "$image" "${image//registry.k8s.io/k8s.gcr.io}" 2>/dev/null || true
        done
    else
        commandExists ctr || return 0
        images="$(__berth_ctr images list --quiet 2>/dev/null | grep -F k8s.gcr.io || true)"
        for image in $images; do
            __berth_ctr images tag "$image" "${image//k8s.gcr.io/registry.k8s.io}" >/dev/null 2>&1 || true
            if [[ "$image" == *coredns* ]]; then
                tag="${image##*:}"
                __berth_ctr images tag "$image" "registry.k8s.io/coredns:$tag" >/dev/null 2>&1 || true
            fi
        done
        images="$(__berth_ctr images list --quiet 2>/dev/null | grep -F registry.k8s.io || true)"
        for image in $images; do
            __berth_ctr images tag "$image" "${image//registry.k8s.io/k8s.gcr.io}" >/dev/null 2>&1 || true
        done
    fi
}

# get_shared: loads kURL's kurl-util image, $DIR/shared/kurl-util.tar, when present.
function get_shared() {
    local archive="${DIR:-.}/shared/kurl-util.tar"
    [ -f "$archive" ] || return 0
    if __berth_images_use_docker; then
        docker load <"$archive"
    else
        __berth_ctr images import "$archive"
    fi
}

# canonical_image_name IMAGE: prints IMAGE's full name: docker.io/library/ for a bare name,
# docker.io/ when the first part is no registry host, :latest without a tag.
function canonical_image_name() {
    local image="$1"
    if [[ "$image" != */* ]]; then
        image="library/$image"
    fi
    if [[ "${image%%/*}" != *.* ]]; then
        image="docker.io/$image"
    fi
    if [[ "$image" != *:* ]]; then
        image="$image:latest"
    fi
    echo "$image"
}
