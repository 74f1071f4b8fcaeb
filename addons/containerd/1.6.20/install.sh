# shellcheck shell=bash
# containerd from the node's distro packages, configured from the spec and started through
# systemd where it runs, directly where it does not. The install hook is `containerd_install`,
# as kURL calls containerd's: a function named `containerd` would hide the program.
#
# Spec fields: containerd.tomlConfig (TOML merged into the configuration, as a file containerd
# imports), containerd.preserveConfig (leave an existing /etc/containerd/config.toml alone).
# Registry hosts are read from /etc/containerd/certs.d (the registry add-ons' hooks write there).

CONTAINERD_ETC=/etc/containerd

function containerd_install() {
    containerd_install_and_start
    # As kURL's containerd: the cluster's registry (kURL's registry add-on; its address is the
    # join command's docker-registry-ip on a joining node) is trusted with the cluster's CA.
    if [ -n "${DOCKER_REGISTRY_IP:-}" ]; then
        kubeadm_registry_containerd_configure "$DOCKER_REGISTRY_IP"
    fi
}

# A joining node has run containerd_install just before, as kURL's join does.
function containerd_join() {
    containerd_answers || containerd_start
}

function containerd_already_applied() {
    containerd_answers || containerd_start
}

function containerd_reset() {
    containerd_stop
    rm -f "$CONTAINERD_ETC/config.toml" "$CONTAINERD_ETC/config.d/berth.toml"
    rmdir "$CONTAINERD_ETC/config.d" "$CONTAINERD_ETC" 2>/dev/null || true
    # Only what this add-on installed goes: packages the host had before stay.
    local installed="$DIR/containerd/installed-packages"
    if [ -s "$installed" ]; then
        local packages
        mapfile -t packages <"$installed"
        if commandExists apt-get; then
            DEBIAN_FRONTEND=noninteractive apt-get remove -y "${packages[@]}"
        elif commandExists dnf; then
            dnf remove -y "${packages[@]}"
        else
            yum remove -y "${packages[@]}"
        fi
    fi
    rm -rf "$DIR/containerd"
}

function containerd_install_and_start() {
    mkdir -p "$DIR/containerd"
    local package missing=()
    for package in containerd runc; do
        containerd_package_installed "$package" || missing+=("$package")
    done
    install_host_archives "$DIR/addons/containerd/$CONTAINERD_VERSION" containerd runc
    if [ "${#missing[@]}" -gt 0 ]; then
        printf '%s\n' "${missing[@]}" >>"$DIR/containerd/installed-packages"
    fi
    containerd_write_config
    containerd_start
    logSuccess "containerd $(command containerd --version | awk '{print $3}') is running"
}

function containerd_package_installed() {
    if commandExists dpkg-query; then
        dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
    else
        rpm -q "$1" >/dev/null 2>&1
    fi
}

function containerd_write_config() {
    if [ "${CONTAINERD_PRESERVE_CONFIG:-}" = 1 ] && [ -f "$CONTAINERD_ETC/config.toml" ]; then
        logWarn "containerd.preserveConfig: $CONTAINERD_ETC/config.toml is left as it is"
        return
    fi
    mkdir -p "$CONTAINERD_ETC/config.d"
    # The kubelet uses the systemd cgroup driver where systemd runs.
    local systemd_cgroup=false
    if berth_has_systemd; then
        systemd_cgroup=true
    fi
    # With no containerd program (its packages not installed), an empty default would
    # replace a working configuration.
    command -v containerd >/dev/null || bail "containerd is not installed: no host packages for this distro?"
    local -
    set -o pipefail
    command containerd config default |
        sed -e "s|^imports = .*|imports = [\"$CONTAINERD_ETC/config.d/*.toml\"]|" \
            -e "s/SystemdCgroup = .*/SystemdCgroup = $systemd_cgroup/" \
            -e "s|config_path = \"\"|config_path = \"$CONTAINERD_ETC/certs.d\"|" >"$CONTAINERD_ETC/config.toml.new"
    mv -f "$CONTAINERD_ETC/config.toml.new" "$CONTAINERD_ETC/config.toml"
    # The pod sandbox image is the one the Kubernetes package carries, loaded with it, rather
    # than containerd's default, which a node without a route out never pulls.
    local pause_image
    pause_image="$(containerd_kubernetes_pause_image)"
    if [ -n "$pause_image" ]; then
        sed -i "s|^\( *\)sandbox_image = .*|\1sandbox_image = \"$pause_image\"|" "$CONTAINERD_ETC/config.toml"
        export CONTAINERD_PAUSE_IMAGE="$pause_image"
    fi
    # Where lowering a process's oom_score_adj is not permitted (inside a container or a user
    # namespace), runc fails every pod sandbox unless containerd keeps the score as it is.
    if ! containerd_can_lower_oom_score; then
        logWarn "this host does not let processes lower their oom_score_adj: containerd's restrict_oom_score_adj is on"
        sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$CONTAINERD_ETC/config.toml"
    fi
    if [ -n "${CONTAINERD_TOML_CONFIG:-}" ]; then
        printf '%s\n' "$CONTAINERD_TOML_CONFIG" >"$CONTAINERD_ETC/config.d/berth.toml"
    else
        rm -f "$CONTAINERD_ETC/config.d/berth.toml"
    fi
}

# The pause image of the Kubernetes package this install carries, as its Manifest names it.
function containerd_kubernetes_pause_image() {
    [ -n "${KUBERNETES_VERSION:-}" ] || return 0
    awk '$1 == "image" && $2 == "pause" { print $3; exit }' \
        "$DIR/addons/kubernetes/$KUBERNETES_VERSION/Manifest" 2>/dev/null
}

# Whether a process here may lower its oom_score_adj, as runc does for a pod sandbox.
function containerd_can_lower_oom_score() {
    (echo -999 > /proc/self/oom_score_adj) 2>/dev/null
}

function containerd_answers() {
    ctr version >/dev/null 2>&1
}

function containerd_start() {
    if berth_has_systemd; then
        systemctl enable containerd >/dev/null 2>&1 || true
        systemctl restart containerd
    else
        # No systemd: containerd runs in a session of its own, so it outlives this install.
        containerd_stop
        setsid containerd --config "$CONTAINERD_ETC/config.toml" </dev/null >>/var/log/containerd.log 2>&1 &
        echo $! >"$DIR/containerd/pid"
    fi
    spinner_until 60 containerd_answers ||
        bail "containerd did not answer within 60 s; see /var/log/containerd.log or journalctl -u containerd"
}

function containerd_stop() {
    if berth_has_systemd; then
        systemctl stop containerd 2>/dev/null || true
        return
    fi
    berth_stop_pid "$DIR/containerd/pid"
}
