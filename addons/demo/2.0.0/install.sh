# shellcheck shell=bash
# The demo add-on: runs docker.io/berth/demo:<version> as a container on the host network,
# answering `demo <version>` on spec.demo.port (default 8080). The first node publishes its
# address and a join token that expires after the install's join TTL; a joining node's hook
# shows the token to the first node's demo (which answers 403 to any other, and to this one
# once it has expired), then runs demo itself. A re-run renews a token that is about to expire.

# The container: `berth-demo` on a node; a Berth root other than / (a second node tried on
# the same machine) gets its own name, so the two do not replace each other's container or
# share its cgroup.
DEMO_CONTAINER=berth-demo
if [ "${BERTH_ROOT:-/}" != / ]; then
    DEMO_CONTAINER="berth-demo-$(printf '%s' "$BERTH_ROOT" | sha256sum | cut -c1-12)"
fi

function demo_port() {
    echo "${DEMO_PORT:-8080}"
}

function demo_preflight() {
    # Preflights run before any add-on installs: containerd in the same spec brings ctr.
    commandExists ctr || [ -n "${CONTAINERD_VERSION:-}" ] ||
        bail "demo needs ctr (containerd) on this node: install containerd, or add it to the spec"
    commandExists curl || bail "demo needs curl on this node"
    local port
    port=$(demo_port)
    if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
        bail "spec.demo.port is '$port'; give a port number from 1 to 65535"
    fi
    # A port something else listens on would leave demo unable to bind it.
    if ! demo_running && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        bail "port $port is in use on this node; set spec.demo.port to a free one, or stop what listens on it"
    fi
}

function demo() {
    demo_new_token
    demo_start "$(cat "$DIR/demo/join-token")" "$(cat "$DIR/demo/join-expires")"
    demo_publish
    logSuccess "demo $DEMO_VERSION answers on port $(demo_port)"
}

function demo_already_applied() {
    # A token with less than a minute left is renewed, and demo restarted to take it.
    local expires
    expires=$(cat "$DIR/demo/join-expires" 2>/dev/null || echo 0)
    if [ "$expires" -le $(($(date +%s) + 60)) ]; then
        demo_new_token
        demo_start "$(cat "$DIR/demo/join-token")" "$(cat "$DIR/demo/join-expires")"
    fi
    demo_publish
}

# A fresh join token, valid for the install's join TTL, kept (0600) in $DIR/demo.
function demo_new_token() {
    mkdir -p "$DIR/demo"
    (
        umask 077
        head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/demo/join-token"
        echo $(($(date +%s) + ${BERTH_JOIN_TTL:-86400})) >"$DIR/demo/join-expires"
    )
}

function demo_join() {
    if [ -z "${DEMO_ADDRESS:-}" ] || [ -z "${DEMO_JOIN_TOKEN:-}" ]; then
        bail "the join command has no demo-address or demo-join-token; print it again with berth join-command"
    fi
    local answer
    answer=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://$DEMO_ADDRESS/join/$DEMO_JOIN_TOKEN") ||
        bail "cannot reach the demo at $DEMO_ADDRESS"
    if [ "$answer" != 200 ]; then
        bail "the demo at $DEMO_ADDRESS refused this node's join token (HTTP $answer)"
    fi
    # This node takes no joins of its own (its token expired in 1970): join commands name the
    # first node.
    demo_start "$DEMO_JOIN_TOKEN" 1
    logSuccess "joined the demo at $DEMO_ADDRESS; demo $DEMO_VERSION answers here on port $(demo_port)"
}

function demo_outro() {
    local address
    address=$(berth_private_address)
    logSuccess "demo: curl http://$address:$(demo_port)/"
}

function demo_reset() {
    demo_stop
    demo_boot_unit_remove
    rm -rf "$DIR/demo"
}

# Where systemd runs the node (and Berth's root is the node's own), a unit starts the demo
# container again at boot, as the service it stands for would be: a container `ctr run`
# started does not outlive a reboot. It carries the join token, so only root reads it.
DEMO_BOOT_UNIT=/etc/systemd/system/berth-demo.service

function demo_boot_unit_wanted() {
    [ "${BERTH_ROOT:-/}" = / ] && [ -d /run/systemd/system ] && commandExists systemctl
}

# demo_boot_unit TOKEN EXPIRES LOG: the unit for the container demo_start just ran.
function demo_boot_unit() {
    demo_boot_unit_wanted || return 0
    local ctr
    ctr=$(command -v ctr)
    (
        umask 077
        cat >"$DEMO_BOOT_UNIT" <<UNIT
[Unit]
Description=Berth's demo add-on: its container, started again at boot
After=containerd.service network-online.target
Wants=network-online.target
Requires=containerd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStartPre=-$ctr --namespace k8s.io task delete --force $DEMO_CONTAINER
ExecStartPre=-$ctr --namespace k8s.io container delete $DEMO_CONTAINER
ExecStart=$ctr --namespace k8s.io run --detach --net-host --log-uri file://$3 --label berth.addon=demo --label berth.root=/ docker.io/berth/demo:$DEMO_VERSION $DEMO_CONTAINER /demo $(demo_port) $1 $2

[Install]
WantedBy=multi-user.target
UNIT
    )
    systemctl daemon-reload
    systemctl enable berth-demo.service >/dev/null 2>&1
}

function demo_boot_unit_remove() {
    [ -f "$DEMO_BOOT_UNIT" ] || return 0
    systemctl disable berth-demo.service >/dev/null 2>&1 || true
    rm -f "$DEMO_BOOT_UNIT"
    systemctl daemon-reload || true
}

# Publishes what a joining node needs: this node's demo address and its join token (a secret
# that expires when demo stops taking it).
function demo_publish() {
    local address remaining
    address=$(berth_private_address)
    remaining=$(($(cat "$DIR/demo/join-expires") - $(date +%s)))
    [ "$remaining" -ge 1 ] || remaining=1
    berth_set_join_param demo-address "$address:$(demo_port)"
    berth_set_join_param --secret --ttl="$remaining" demo-join-token "$(cat "$DIR/demo/join-token")"
}

# demo_start TOKEN EXPIRES: runs demo, taking joins with TOKEN until EXPIRES (Unix seconds).
# Its output goes to $DIR/demo/container.log, whose end is shown when it does not answer.
function demo_start() {
    demo_stop
    mkdir -p "$DIR/demo"
    local log
    log="$(cd "$DIR/demo" && pwd)/container.log"
    : >"$log"
    # Labelled for health.yaml, which finds this node's demo container by them.
    ctr --namespace k8s.io run --detach --net-host --log-uri "file://$log" \
        --label berth.addon=demo --label "berth.root=${BERTH_ROOT:-/}" \
        "docker.io/berth/demo:$DEMO_VERSION" "$DEMO_CONTAINER" /demo "$(demo_port)" "$1" "$2" >/dev/null
    echo "waiting for demo $DEMO_VERSION to answer on port $(demo_port)"
    spinner_until 30 demo_answers_or_ended || true
    if ! demo_answers; then
        local ended="it still runs"
        if ! demo_running; then
            ended="its container stopped"
            # The shim copies the container's output as it comes: its last line may lag its
            # exit, and a container that ends at once may leave none.
            spinner_until 2 test -s "$log" || true
        fi
        bail "demo $DEMO_VERSION did not answer on port $(demo_port): $ended; it said: $(tail -n 3 "$log" | tr '\n' ' ')(a port another address of this node holds stops it: ss -ltn)"
    fi
    demo_boot_unit "$1" "$2" "$log"
}

function demo_answers() {
    curl -fsS --max-time 1 "http://127.0.0.1:$(demo_port)/" 2>/dev/null | grep -qx "demo $DEMO_VERSION"
}

# Ends a wait early when the container has stopped: it will not answer.
function demo_answers_or_ended() {
    demo_answers || ! demo_running
}

# Whether this node's demo container runs.
function demo_running() {
    ctr --namespace k8s.io task ls 2>/dev/null |
        awk -v container="$DEMO_CONTAINER" '$1 == container && $3 == "RUNNING" { found = 1 } END { exit !found }'
}

# Stops the running demo, whichever version it is.
function demo_stop() {
    ctr --namespace k8s.io task delete --force "$DEMO_CONTAINER" >/dev/null 2>&1 || true
    ctr --namespace k8s.io container delete "$DEMO_CONTAINER" >/dev/null 2>&1 || true
}
