# shellcheck shell=bash
# kURL's helpers about add-ons that add-ons themselves call (MinIO and OpenEBS do): loading
# another add-on's images and kURL's install reports, which Berth does not send anywhere.

# addon_load NAME VERSION: loads the images of add-on NAME at VERSION ($DIR/addons/NAME/VERSION/
# images); nothing when VERSION is empty.
function addon_load() {
    local name="$1" version="${2:-}"
    if [ -z "$version" ]; then
        return 0
    fi
    load_images "${DIR:-.}/addons/$name/$version/images"
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
