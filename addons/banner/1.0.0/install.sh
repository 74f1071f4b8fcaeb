# shellcheck shell=bash
# Runs a container from the image this add-on's package carries. Berth imported the image
# into containerd's k8s.io namespace before any hook ran; ctr finds containerd at its default
# socket, or at CONTAINERD_ADDRESS.

BANNER_IMAGE=docker.io/berth/banner:1.0.0

function banner_preflight() {
    commandExists ctr || bail "banner needs ctr (containerd) on this node"
}

function banner() {
    logStep "Running $BANNER_IMAGE"
    local output
    output=$(ctr --namespace k8s.io run --rm "$BANNER_IMAGE" "banner-$$" /banner)
    echo "$output"
    mkdir -p "$DIR/banner"
    echo "$output" > "$DIR/banner/last-output"
    logSuccess "banner ran"
}

function banner_already_applied() {
    logSuccess "banner already ran: $(cat "$DIR/banner/last-output" 2>/dev/null)"
}
