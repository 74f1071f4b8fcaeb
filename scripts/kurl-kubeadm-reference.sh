#!/usr/bin/env bash
# kurl-kubeadm-reference.sh KURL_SCRIPTS ENVIRONMENT OUT [init|join]: the kubeadm configuration
# kURL's own code renders for a first primary (init, the default) or a joining node (join), for
# the variables in ENVIRONMENT (NUL-separated NAME=VALUE, as `env -0` writes them from a Berth
# hook session), written to OUT.
#
# KURL_SCRIPTS is the `scripts/` folder of a kURL checkout. kURL's `init` (from its install.sh),
# or its `join_prompts` and `join` (join.sh), run with its helper library and kubeadm templates,
# unchanged, up to `kubeadm init` or `kubeadm join`; the programs they run on the way are stood
# in for: `kubectl kustomize` is the real kubectl, `bin/yamlutil` is Berth's (BERTH_BIN),
# `bin/kurl netutil format-ip-address` brackets an IPv6 address, and `kubeadm init|join`
# copies the configuration it is given to OUT and stops the run.
# Everything runs in a mount namespace whose /etc/kubernetes (when there is one) and /var/log
# are scratch tmpfs, since `init` writes there. Needs root (unshare), kubectl and BERTH_BIN.
set -euo pipefail

if [ "${BERTH_REFERENCE_INNER:-}" != 1 ]; then
    [ "$#" -eq 3 ] || [ "$#" -eq 4 ] || { echo "usage: $0 KURL_SCRIPTS ENVIRONMENT OUT [init|join]" >&2; exit 2; }
    [ -n "${BERTH_BIN:-}" ] || { echo "$0: set BERTH_BIN to the berth binary" >&2; exit 2; }
    exec unshare --mount env BERTH_REFERENCE_INNER=1 "$0" "$@"
fi

kurl="$(cd "$1" && pwd)"
environment="$2"
out="$3"
role="${4:-init}"
case "$role" in
    init | join) ;;
    *) echo "$0: the role is init or join, not $role" >&2; exit 2 ;;
esac
# init writes under /etc/kubernetes and /var/log: scratch folders in this namespace alone.
mount --make-rprivate /
if [ -d /etc/kubernetes ]; then
    mount -t tmpfs berth-reference /etc/kubernetes
fi
mount -t tmpfs berth-reference /var/log
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The hook session's variables, as they were.
while IFS= read -r -d '' entry; do
    name="${entry%%=*}"
    case "$name" in
        PATH | HOME | PWD | SHLVL | _ | OLDPWD | BASH_* | DIR) continue ;;
    esac
    [[ "$name" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
    export "${entry?}"
done <"$environment"

export DIR="$work/kurl"
mkdir -p "$DIR/kustomize" "$DIR/bin" "$work/conf"
cp -r "$kurl/kustomize/kubeadm" "$DIR/kustomize/"
ln -s "$BERTH_BIN" "$DIR/bin/yamlutil"
cat >"$DIR/bin/kurl" <<'PROGRAM'
#!/usr/bin/env bash
if [ "$1 $2" = "netutil format-ip-address" ]; then
    case "$3" in
        *:*:*) echo "[$3]" ;;
        *) echo "$3" ;;
    esac
    exit 0
fi
exit 1
PROGRAM
chmod +x "$DIR/bin/kurl"

set +eu
for file in "$kurl"/common/*.sh "$kurl"/distro/kubeadm/distro.sh; do
    case "$file" in *-test.sh) continue ;; esac
    # shellcheck disable=SC1090 # kURL's library
    . "$file"
done
eval "$(sed -n '/^function init() {/,/^}/p;/^function kubernetes_maybe_generate_bootstrap_token() {/,/^}/p' "$kurl/install.sh")"
eval "$(sed -n '/^function join() {/,/^}/p' "$kurl/join.sh")"

# shellcheck disable=SC2034 # read by kURL's init
KUBEADM_CONF_DIR="$work/conf"
# shellcheck disable=SC2034
KUBEADM_CONF_FILE="$work/conf/kubeadm.conf"
# As kURL's load balancer prompt leaves them: host and port apart.
if [ -n "${LOAD_BALANCER_ADDRESS:-}" ] && [ -z "${LOAD_BALANCER_PORT:-}" ]; then
    splitHostPort "$LOAD_BALANCER_ADDRESS"
    LOAD_BALANCER_ADDRESS="$HOST"
    LOAD_BALANCER_PORT="${PORT:-6443}"
fi
HOSTNAME="$(hostname | tr '[:upper:]' '[:lower:]')"
parse_kubernetes_target_version
setup_kubeadm_kustomize

function kubelet() { echo "Kubernetes v$KUBERNETES_VERSION"; }
# After `kubeadm init`, init's next kubectl call ends the run: the configuration is written.
function kubectl() {
    if [ "$1" = kustomize ]; then
        command kubectl kustomize "$2"
    elif [ -s "$out" ]; then
        exit 0
    else
        return 1
    fi
}
function disable_rook_ceph_operator() { :; }
function kubeadm() {
    if [ "$1" = init ] || [ "$1" = join ]; then
        while [ "$#" -gt 0 ]; do
            if [ "$1" = --config ]; then
                cp "$2" "$out"
            fi
            shift
        done
        return 0
    fi
    return 1
}
if [ "$role" = init ]; then
    init >"$work/run.log" 2>&1
else
    # join.sh's prompts split the first node's address, as its join command gives it.
    join_prompts >"$work/run.log" 2>&1
    # What join does after kubeadm (kubeconfig, labels, CIS permissions) needs a cluster.
    join >>"$work/run.log" 2>&1 || true
fi
if [ ! -s "$out" ]; then
    echo "kURL's $role wrote no kubeadm configuration; its log:" >&2
    cat "$work/run.log" >&2
    exit 1
fi
