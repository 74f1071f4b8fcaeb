# shellcheck shell=bash
# kURL's helpers about add-ons that add-ons themselves call (MinIO and OpenEBS do): sourcing,
# installing early and loading another add-on's images, and kURL's install reports, which
# Berth does not send anywhere.

# addon_load NAME VERSION: loads the images of add-on NAME at VERSION ($DIR/addons/NAME/VERSION/
# images); nothing when VERSION is empty.
function addon_load() {
    local name="$1" version="${2:-}"
    if [ -z "$version" ]; then
        return 0
    fi
    load_images "${DIR:-.}/addons/$name/$version/images"
}

# addon_source NAME VERSION: sources add-on NAME's install.sh at VERSION, defining its hooks.
function addon_source() {
    local script="${DIR:-.}/addons/$1/$2/install.sh"
    [ -f "$script" ] || bail "add-on $1 $2 is not on this node ($script); it must be in the spec"
    # shellcheck disable=SC1090 # the add-on's own hooks
    . "$script"
}

# addon_install NAME VERSION: runs add-on NAME's install hook at VERSION now, as MinIO's and
# OpenEBS's pre_init hooks do to install themselves early: its kustomize folder made empty,
# its install.sh sourced, `NAME` (containerd's `containerd_install`) run. Nothing when VERSION
# is empty. Berth records the add-on when its own turn comes, not here.
# shellcheck disable=SC2034 # ADDONS_HAVE_HOST_COMPONENTS is kURL's global, read by its outro
function addon_install() {
    local name="$1" version="${2:-}"
    if [ -z "$version" ]; then
        return 0
    fi
    logStep "Addon $name $version"
    rm -rf "${DIR:-.}/kustomize/$name"
    mkdir -p "${DIR:-.}/kustomize/$name"
    addon_source "$name" "$version"
    if [ "$name" = containerd ]; then
        containerd_install
    else
        "$name"
    fi
    if [ "$name" = containerd ] || commandExists "${name}_join"; then
        ADDONS_HAVE_HOST_COMPONENTS=1
    fi
}

# report_addon_start NAME VERSION: kURL reports an add-on's start to replicated.app when
# INSTALLATION_ID is set; Berth sends no telemetry, so this does nothing.
function report_addon_start() {
    return 0
}

# report_addon_success NAME VERSION: kURL reports an add-on's success; Berth does nothing.
function report_addon_success() {
    return 0
}

# report_addon_fail NAME VERSION: kURL reports an add-on's failure; Berth does nothing.
function report_addon_fail() {
    return 0
}
