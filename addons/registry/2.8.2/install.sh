# shellcheck shell=bash
# A local image registry for airgap clusters: the distro's docker-registry program, run by
# this add-on with its own configuration and storage under $DIR/registry, through a systemd
# unit where systemd runs and directly where it does not. Joining nodes are pointed at it:
# their containerd pulls from it over plain HTTP.
#
# Spec fields: registry.publishPort (default 5000), as kURL names it.

REGISTRY_UNIT=/etc/systemd/system/berth-registry.service
REGISTRY_HOSTS_DIR=/etc/containerd/certs.d

function registry_port() {
    echo "${REGISTRY_PUBLISH_PORT:-5000}"
}

function registry_preflight() {
    local port
    port=$(registry_port)
    if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
        bail "spec.registry.publishPort is '$port'; give a port number from 1 to 65535"
    fi
    if ! registry_running && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        bail "port $port is in use on this node; set spec.registry.publishPort to a free one"
    fi
}

function registry() {
    mkdir -p "$DIR/registry/storage"
    if ! commandExists docker-registry; then
        install_host_archives "$DIR/addons/registry/$REGISTRY_VERSION" docker-registry
        echo docker-registry >"$DIR/registry/installed-packages"
        # The package starts its own service on port 5000; this add-on runs its own instead.
        if berth_has_systemd; then
            systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
        fi
    fi
    registry_write_config
    registry_start
    registry_publish
    logSuccess "registry answers on port $(registry_port)"
}

function registry_already_applied() {
    registry_running || registry_start
    registry_publish
}

function registry_publish() {
    local address
    address=$(berth_private_address)
    berth_set_join_param registry-address "$address:$(registry_port)"
}

# A joining node's containerd pulls images from the first node's registry.
function registry_join() {
    [ -n "${REGISTRY_ADDRESS:-}" ] || bail "the join command has no registry-address; print it again with berth join-command"
    curl -fsS --max-time 10 -o /dev/null "http://$REGISTRY_ADDRESS/v2/" ||
        bail "the registry at $REGISTRY_ADDRESS does not answer"
    mkdir -p "$REGISTRY_HOSTS_DIR/$REGISTRY_ADDRESS"
    cat >"$REGISTRY_HOSTS_DIR/$REGISTRY_ADDRESS/hosts.toml" <<TOML
server = "http://$REGISTRY_ADDRESS"

[host."http://$REGISTRY_ADDRESS"]
  capabilities = ["pull", "resolve"]
TOML
    mkdir -p "$DIR/registry"
    echo "$REGISTRY_ADDRESS" >"$DIR/registry/joined-address"
    logSuccess "containerd on this node pulls from the registry at $REGISTRY_ADDRESS"
}

function registry_reset() {
    registry_stop
    rm -f "$REGISTRY_UNIT"
    local joined
    if joined=$(cat "$DIR/registry/joined-address" 2>/dev/null) && [ -n "$joined" ]; then
        rm -rf "${REGISTRY_HOSTS_DIR:?}/$joined"
        rmdir "$REGISTRY_HOSTS_DIR" 2>/dev/null || true
    fi
    if [ -s "$DIR/registry/installed-packages" ] && commandExists apt-get; then
        DEBIAN_FRONTEND=noninteractive apt-get remove -y docker-registry
    fi
    rm -rf "$DIR/registry"
}

function registry_write_config() {
    cat >"$DIR/registry/config.yml" <<YAML
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $DIR/registry/storage
  delete:
    enabled: true
http:
  addr: :$(registry_port)
  headers:
    X-Content-Type-Options: [nosniff]
YAML
}

function registry_running() {
    curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$(registry_port)/v2/" 2>/dev/null
}

function registry_start() {
    registry_stop
    if berth_has_systemd; then
        cat >"$REGISTRY_UNIT" <<UNIT
[Unit]
Description=Image registry (Berth registry add-on)
After=network-online.target

[Service]
ExecStart=$(command -v docker-registry) serve $DIR/registry/config.yml
Restart=always

[Install]
WantedBy=multi-user.target
UNIT
        systemctl daemon-reload
        systemctl enable --now berth-registry.service
    else
        setsid docker-registry serve "$DIR/registry/config.yml" </dev/null >>"$DIR/registry/registry.log" 2>&1 &
        echo $! >"$DIR/registry/pid"
    fi
    spinner_until 30 registry_running || bail "the registry did not answer on port $(registry_port) within 30 s"
}

function registry_stop() {
    if berth_has_systemd; then
        systemctl disable --now berth-registry.service >/dev/null 2>&1 || true
        return
    fi
    berth_stop_pid "$DIR/registry/pid"
}
