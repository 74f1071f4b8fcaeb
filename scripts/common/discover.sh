# shellcheck shell=bash
# Host facts and the globals kURL's install script sets before any add-on runs (distro, kernel,
# hostname, private address, proxy): berth_kurl_globals fills those the environment left empty.

# This file runs berth_kurl_globals when it is sourced, so it uses only bash, coreutils, `ip`
# (and `hostname` where /proc does not say) and what common.sh defines (sourced before it in
# any order the library is loaded), prints nothing and cannot fail under `set -e`.

# __berth_os_release FILE: sets os_id and os_version_id, which the caller declares local, to
# the ID and VERSION_ID of the os-release FILE, without sourcing it (its other names stay out
# of the hook's shell).
function __berth_os_release() {
    local line key value
    os_id=""
    os_version_id=""
    [ -r "$1" ] || return 0
    while IFS= read -r line || [ -n "$line" ]; do
        key="${line%%=*}"
        value="${line#*=}"
        value="${value#[\"\']}"
        value="${value%[\"\']}"
        case "$key" in
            ID) os_id="$value" ;;
            VERSION_ID) os_version_id="$value" ;;
        esac
    done <"$1"
}

# detectLsbDist: sets LSB_DIST, DIST_VERSION, DIST_VERSION_MAJOR and DIST_VERSION_MINOR as
# kURL does, from /etc/centos-release, /etc/os-release, /etc/redhat-release or
# /etc/system-release (the first readable); $BERTH_OS_RELEASE, when set, is read instead of all
# of them. Unlike kURL it never exits: a distro kURL does not support (debian) is set too.
function detectLsbDist() {
    local dist="" version="" line
    local os_release="${BERTH_OS_RELEASE:-/etc/os-release}"
    if [ -z "${BERTH_OS_RELEASE:-}" ] && [ -r /etc/centos-release ]; then
        # "CentOS Linux release 7.9.2009 (Core)" or "CentOS Stream release 8": the version is
        # the third word once "Linux " and "Stream " are gone, cut to major.minor.
        local words=() major_part minor_part
        IFS= read -r line </etc/centos-release || true
        read -r -a words <<<"$line"
        dist="${words[0]:-}"
        line="${line/Linux /}"
        line="${line/Stream /}"
        read -r -a words <<<"$line"
        IFS=. read -r major_part minor_part _ <<<"${words[2]:-}"
        version="$major_part${minor_part:+.$minor_part}"
    elif [ -r "$os_release" ]; then
        local os_id os_version_id
        __berth_os_release "$os_release"
        dist="$os_id"
        version="$os_version_id"
    elif [ -z "${BERTH_OS_RELEASE:-}" ] && [ -r /etc/redhat-release ]; then
        # "Red Hat Enterprise Linux Server release 6.10 (Santiago)": the seventh word's major.
        local words=()
        IFS= read -r line </etc/redhat-release || true
        read -r -a words <<<"$line"
        dist="rhel"
        version="${words[6]:-}"
        version="${version%%.*}"
    elif [ -z "${BERTH_OS_RELEASE:-}" ] && [ -r /etc/system-release ]; then
        # "Amazon Linux AMI release 2018.03": the last word.
        while IFS= read -r line || [ -n "$line" ]; do
            if [[ "$line" == *"Amazon Linux"* ]]; then
                dist="amzn"
                version="${line##* }"
                break
            fi
        done </etc/system-release
    fi
    dist="${dist,,}"
    LSB_DIST="$dist"
    DIST_VERSION="$version"
    DIST_VERSION_MINOR=""
    case "$dist" in
        amzn)
            # Amazon Linux's major is its whole version: 2, 2023, 2018.03.
            DIST_VERSION_MAJOR="$version"
            ;;
        rhel | rocky | centos | ol | almalinux)
            DIST_VERSION_MAJOR="${version%%.*}"
            # As kURL: the part after "MAJOR." up to the next dot (a bare "8" gives "8").
            DIST_VERSION_MINOR="${version#"$DIST_VERSION_MAJOR".}"
            DIST_VERSION_MINOR="${DIST_VERSION_MINOR%%.*}"
            ;;
        *)
            DIST_VERSION_MAJOR="${version%%.*}"
            ;;
    esac
}

# discover_local_kubernetes_version: prints the x.y.z of this node's kube-apiserver image,
# nothing (status 1) on a host that runs no control plane.
function discover_local_kubernetes_version() {
    local manifest=/etc/kubernetes/manifests/kube-apiserver.yaml line
    [ -r "$manifest" ] || return 1
    while IFS= read -r line || [ -n "$line" ]; do
        if [[ "$line" == *" image: "* ]] && [[ "$line" =~ [0-9]+\.[0-9]+\.[0-9]+ ]]; then
            echo "${BASH_REMATCH[0]}"
            return 0
        fi
    done <"$manifest"
    return 1
}

# kubeadm_discover_private_ip: prints the --advertise-address of this node's kube-apiserver
# (nothing on a host that runs none).
function kubeadm_discover_private_ip() {
    local manifest=/etc/kubernetes/manifests/kube-apiserver.yaml line
    [ -r "$manifest" ] || return 0
    while IFS= read -r line || [ -n "$line" ]; do
        if [[ "$line" == *advertise-address=* ]]; then
            line="${line#*advertise-address=}"
            printf '%s' "${line%%[[:space:]]*}"
            return 0
        fi
    done <"$manifest"
}

# discover_private_ip: sets PRIVATE_ADDRESS, when empty, to the address the control plane
# advertises (kURL's ${K8S_DISTRO}_discover_private_ip).
function discover_private_ip() {
    if [ -n "${PRIVATE_ADDRESS:-}" ]; then
        return 0
    fi
    # No control plane here: no subshell to learn so (the library discovers on every run).
    if [ -r /etc/kubernetes/manifests/kube-apiserver.yaml ]; then
        PRIVATE_ADDRESS="$(kubeadm_discover_private_ip)"
    fi
}

# __berth_private_interfaces [LISTING]: sets the arrays __berth_iface_names and
# __berth_iface_addrs to this host's addresses (IPv6 when IPV6_ONLY=1), leaving out the loopback
# and the virtual interfaces Kubernetes and its networks create, as kURL's
# prompt_for_private_ip does. LISTING, when given, is read in place of `ip -o addr`.
function __berth_private_interfaces() {
    __berth_iface_names=()
    __berth_iface_addrs=()
    local family=-4 pattern='^[0-9]+: ([^[:space:]]+)[[:space:]]+inet ([0-9.]+)'
    if [ "${IPV6_ONLY:-}" = "1" ]; then
        family=-6
        pattern='^[0-9]+: ([^[:space:]]+)[[:space:]]+inet6 ([[:alnum:]:]+)'
    fi
    local listing line
    if [ "$#" -gt 0 ]; then
        listing="$1"
    else
        listing="$(ip "$family" -o addr 2>/dev/null || true)"
    fi
    while IFS= read -r line; do
        [[ "$line" =~ $pattern ]] || continue
        case "${BASH_REMATCH[1]}" in
            lo | kube-ipvs0 | docker0 | weave | antrea-gw0 | flannel.1 | cni0) continue ;;
        esac
        __berth_iface_names+=("${BASH_REMATCH[1]}")
        __berth_iface_addrs+=("${BASH_REMATCH[2]}")
    done <<<"$listing"
}

# __berth_discover_private_address: fills an empty PRIVATE_ADDRESS without ever prompting: the
# control plane's advertised address, else the host's only non-virtual address (kURL's choice
# without a prompt), else, with several, the source address of the default route.
function __berth_discover_private_address() {
    discover_private_ip
    if [ -n "$PRIVATE_ADDRESS" ]; then
        return 0
    fi
    # Berth lists the host's addresses as it starts the session (BERTH_HOST_ADDRESSES).
    if [ -n "${BERTH_HOST_ADDRESSES:-}" ]; then
        __berth_private_interfaces "$BERTH_HOST_ADDRESSES"
    else
        __berth_private_interfaces
    fi
    if [ "${#__berth_iface_addrs[@]}" -eq 1 ]; then
        PRIVATE_ADDRESS="${__berth_iface_addrs[0]}"
        return 0
    fi
    if [ "${#__berth_iface_addrs[@]}" -gt 1 ]; then
        local route="" probe=1.1.1.1 family=-4
        if [ "${IPV6_ONLY:-}" = "1" ]; then
            probe=2001:4860:4860::8888
            family=-6
        fi
        route="$(ip "$family" route get "$probe" 2>/dev/null || true)"
        if [[ "$route" =~ [[:space:]]src[[:space:]]+([^[:space:]]+) ]]; then
            PRIVATE_ADDRESS="${BASH_REMATCH[1]}"
        else
            PRIVATE_ADDRESS="${__berth_iface_addrs[0]}"
        fi
    fi
}

# kubernetes_init_hostname: exports HOSTNAME as this host's name lower-cased, as kURL does
# (kURL's KURL_HOSTNAME_OVERRIDE and kubelet --hostname-override branches end overwritten too).
function kubernetes_init_hostname() {
    export HOSTNAME
    local name=""
    if [ -r /proc/sys/kernel/hostname ]; then
        IFS= read -r name </proc/sys/kernel/hostname || true
    fi
    if [ -z "$name" ]; then
        name="$(hostname 2>/dev/null || true)"
    fi
    HOSTNAME="${name:-${HOSTNAME:-}}"
    HOSTNAME="${HOSTNAME,,}"
}

# get_local_node_name: prints this node's name as Kubernetes knows it (the lower-cased hostname).
function get_local_node_name() {
    echo "${HOSTNAME:-}"
}

# parse_kubernetes_target_version: sets KUBERNETES_TARGET_VERSION_MAJOR, _MINOR and _PATCH from
# KUBERNETES_VERSION (and, as kURL's, the globals major, minor and patch).
# shellcheck disable=SC2034 # the targets are globals hooks read
function parse_kubernetes_target_version() {
    semverParse "${KUBERNETES_VERSION:-}"
    KUBERNETES_TARGET_VERSION_MAJOR="$major"
    KUBERNETES_TARGET_VERSION_MINOR="$minor"
    KUBERNETES_TARGET_VERSION_PATCH="$patch"
}

# read_proxy_config_from_env: sets ENV_HTTP_PROXY_ADDRESS, ENV_HTTPS_PROXY_ADDRESS (the HTTP
# proxy unless HTTPS_PROXY is set) and ENV_NO_PROXY from HTTP_PROXY/http_proxy,
# HTTPS_PROXY/https_proxy and NO_PROXY/no_proxy, exports both cases of each as the same value,
# and lets kubectl reach the API server directly. NO_PROXY=1 is kURL's kurl.noProxy flag, not
# an address list.
function read_proxy_config_from_env() {
    local upper_no_proxy="${NO_PROXY:-}"
    if [ "$upper_no_proxy" = "1" ]; then
        upper_no_proxy=""
    fi
    if [ -n "${HTTP_PROXY:-}" ]; then
        ENV_HTTP_PROXY_ADDRESS="$HTTP_PROXY"
        ENV_HTTPS_PROXY_ADDRESS="$HTTP_PROXY"
    elif [ -n "${http_proxy:-}" ]; then
        ENV_HTTP_PROXY_ADDRESS="$http_proxy"
        ENV_HTTPS_PROXY_ADDRESS="$http_proxy"
    fi
    if [ -n "${HTTPS_PROXY:-}" ]; then
        ENV_HTTPS_PROXY_ADDRESS="$HTTPS_PROXY"
    elif [ -n "${https_proxy:-}" ]; then
        ENV_HTTPS_PROXY_ADDRESS="$https_proxy"
    fi
    if [ -n "$upper_no_proxy" ]; then
        ENV_NO_PROXY="$upper_no_proxy"
    elif [ -n "${no_proxy:-}" ]; then
        ENV_NO_PROXY="$no_proxy"
    fi
    if [ -n "${ENV_HTTP_PROXY_ADDRESS:-}" ]; then
        export http_proxy="$ENV_HTTP_PROXY_ADDRESS" HTTP_PROXY="$ENV_HTTP_PROXY_ADDRESS"
    fi
    if [ -n "${ENV_HTTPS_PROXY_ADDRESS:-}" ]; then
        export https_proxy="$ENV_HTTPS_PROXY_ADDRESS" HTTPS_PROXY="$ENV_HTTPS_PROXY_ADDRESS"
    fi
    if [ -n "${ENV_NO_PROXY:-}" ]; then
        export no_proxy="$ENV_NO_PROXY"
        if [ "${NO_PROXY:-}" != "1" ]; then
            export NO_PROXY="$ENV_NO_PROXY"
        fi
    fi
    if [ -n "${ENV_HTTP_PROXY_ADDRESS:-}" ] || [ -n "${ENV_HTTPS_PROXY_ADDRESS:-}" ]; then
        kubectl_no_proxy
    fi
}

# kubectl_no_proxy: adds the API server host of /etc/kubernetes/admin.conf to no_proxy (and
# NO_PROXY) unless it is there already, so kubectl bypasses the proxy.
function kubectl_no_proxy() {
    local kubeconfig=/etc/kubernetes/admin.conf line endpoint="" host
    [ -r "$kubeconfig" ] || return 0
    while IFS= read -r line || [ -n "$line" ]; do
        if [[ "$line" == *"server:"* ]]; then
            endpoint="${line##* }"
            break
        fi
    done <"$kubeconfig"
    endpoint="${endpoint#http://}"
    endpoint="${endpoint#https://}"
    host="${endpoint%%:*}"
    if [ -z "$host" ] || [[ ",${no_proxy:-}," == *"$host"* ]]; then
        return 0
    fi
    export no_proxy="${no_proxy:+$no_proxy,}$host"
    if [ "${NO_PROXY:-}" != "1" ]; then
        export NO_PROXY="${NO_PROXY:+$NO_PROXY,}$host"
    fi
}

# configure_proxy: sets PROXY_ADDRESS and PROXY_HTTPS_ADDRESS as kURL does: the spec's
# proxyAddress for both, else the environment's proxies; kurl.noProxy (NO_PROXY=1) unsets the
# proxies instead. Says which on stdout.
function configure_proxy() {
    if [ "${NO_PROXY:-}" = "1" ]; then
        echo "Not using http proxy"
        unset PROXY_ADDRESS http_proxy HTTP_PROXY https_proxy HTTPS_PROXY
        return 0
    fi
    if [ -z "${PROXY_ADDRESS:-}" ] && [ -z "${ENV_HTTP_PROXY_ADDRESS:-}" ] &&
        [ -z "${ENV_HTTPS_PROXY_ADDRESS:-}" ]; then
        printf '%s\n' "Not using proxy address" >&2
        return 0
    fi
    if [ -n "${PROXY_ADDRESS:-}" ]; then
        printf '%s\n' "Overriding HTTP and HTTPS proxies addresses with $PROXY_ADDRESS" >&2
        PROXY_HTTPS_ADDRESS="$PROXY_ADDRESS"
        return 0
    fi
    PROXY_ADDRESS="${ENV_HTTP_PROXY_ADDRESS:-}"
    PROXY_HTTPS_ADDRESS="${ENV_HTTPS_PROXY_ADDRESS:-${ENV_HTTP_PROXY_ADDRESS:-}}"
    echo "Using system proxies, HTTP: $PROXY_ADDRESS, HTTPS: $PROXY_HTTPS_ADDRESS"
}

# unique_no_proxy_addresses LIST: prints the comma-separated LIST sorted, without empty or
# repeated entries.
function unique_no_proxy_addresses() {
    local entries=() entry
    IFS=, read -r -a entries <<<"$1"
    for entry in "${entries[@]}"; do
        if [ -n "${entry//[[:space:]]/}" ]; then
            printf '%s\n' "$entry"
        fi
    done | sort -u | paste -s -d, -
}

# configure_no_proxy: when a proxy is in use, sets NO_PROXY_ADDRESSES (and exports no_proxy) to
# what must bypass it, as kURL computes it: local names, the cluster's suffixes for the add-ons
# in the spec, this node's and the API server's addresses, the pod and service networks and
# ADDITIONAL_NO_PROXY_ADDRESSES. Prints the result on stdout.
function configure_no_proxy() {
    if [ -z "${PROXY_ADDRESS:-}" ]; then
        return 0
    fi
    local addresses="localhost,127.0.0.1,.svc,.local,.default,kubernetes"
    local suffix name value
    if [ -n "${ENV_NO_PROXY:-}" ]; then addresses="$addresses,$ENV_NO_PROXY"; fi
    if [ -n "${KOTSADM_VERSION:-}" ]; then addresses="$addresses,kotsadm-rqlite,kotsadm-api-node"; fi
    for suffix in ROOK_VERSION:.rook-ceph FLUENTD_VERSION:.logging REGISTRY_VERSION:.kurl \
        PROMETHEUS_VERSION:.monitoring; do
        name="${suffix%%:*}"
        if [ -n "${!name:-}" ]; then
            addresses="$addresses,${suffix#*:}"
        fi
    done
    if [ -n "${VELERO_VERSION:-}" ] && [ -n "${VELERO_NAMESPACE:-}" ]; then
        addresses="$addresses,.$VELERO_NAMESPACE"
    fi
    if [ -n "${MINIO_VERSION:-}" ] && [ -n "${MINIO_NAMESPACE:-}" ]; then
        addresses="$addresses,.$MINIO_NAMESPACE"
    fi
    for value in "${PRIVATE_ADDRESS:-}" "${LOAD_BALANCER_ADDRESS:-}" "${KUBERNETES_MASTER_ADDR:-}" \
        "${POD_CIDR:-}" "${SERVICE_CIDR:-}" "${ADDITIONAL_NO_PROXY_ADDRESSES:-}"; do
        if [ -n "$value" ]; then addresses="$addresses,$value"; fi
    done
    addresses="$(unique_no_proxy_addresses "$addresses")"
    export no_proxy="$addresses"
    NO_PROXY_ADDRESSES="$addresses"
    echo "Exported no_proxy: $no_proxy"
}

# __berth_proxy_globals: fills the proxy globals kURL's scripts set, keeping values already set:
# ENV_*_PROXY_ADDRESS and ENV_NO_PROXY, PROXY_ADDRESS and PROXY_HTTPS_ADDRESS, NO_PROXY_ADDRESSES.
function __berth_proxy_globals() {
    if [ -z "${ENV_HTTP_PROXY_ADDRESS:-}" ] && [ -z "${ENV_HTTPS_PROXY_ADDRESS:-}" ] &&
        [ -z "${ENV_NO_PROXY:-}" ]; then
        read_proxy_config_from_env
    fi
    if [ "${NO_PROXY:-}" = "1" ]; then
        configure_proxy >/dev/null
        return 0
    fi
    if [ -n "${PROXY_ADDRESS:-}" ]; then
        PROXY_HTTPS_ADDRESS="${PROXY_HTTPS_ADDRESS:-$PROXY_ADDRESS}"
    else
        PROXY_ADDRESS="${ENV_HTTP_PROXY_ADDRESS:-}"
        PROXY_HTTPS_ADDRESS="${PROXY_HTTPS_ADDRESS:-${ENV_HTTPS_PROXY_ADDRESS:-${ENV_HTTP_PROXY_ADDRESS:-}}}"
    fi
    if [ -z "${NO_PROXY_ADDRESSES:-}" ] && [ -n "$PROXY_ADDRESS" ]; then
        configure_no_proxy >/dev/null
    fi
}

# berth_kurl_globals: sets the globals kURL's install, join and upgrade scripts give add-ons,
# each only when the environment left it empty (what Berth passes, the spec's fields under
# kURL's names, always wins): K8S_DISTRO, KUBECONFIG, LSB_DIST and DIST_VERSION[_MAJOR|_MINOR],
# KERNEL_MAJOR/_MINOR, CURRENT_KUBERNETES_VERSION, KUBERNETES_UPGRADE,
# KUBERNETES_TARGET_VERSION_*, HOSTNAME (always this host's, lower-cased), PRIVATE_ADDRESS and
# the proxy globals. Silent, and never fails or prompts.
# shellcheck disable=SC2034 # these are globals add-ons read
function berth_kurl_globals() {
    K8S_DISTRO="${K8S_DISTRO:-kubeadm}"
    if [ -z "${KUBECONFIG:-}" ]; then
        export KUBECONFIG=/etc/kubernetes/admin.conf
    fi

    if [ -z "${LSB_DIST:-}" ] || [ -z "${DIST_VERSION:-}" ] || [ -z "${DIST_VERSION_MAJOR:-}" ]; then
        local given_dist="${LSB_DIST:-}" given_version="${DIST_VERSION:-}"
        local given_major="${DIST_VERSION_MAJOR:-}" given_minor="${DIST_VERSION_MINOR:-}"
        detectLsbDist
        LSB_DIST="${given_dist:-$LSB_DIST}"
        DIST_VERSION="${given_version:-$DIST_VERSION}"
        DIST_VERSION_MAJOR="${given_major:-$DIST_VERSION_MAJOR}"
        DIST_VERSION_MINOR="${given_minor:-$DIST_VERSION_MINOR}"
    fi

    if [ -z "${KERNEL_MAJOR:-}" ] || [ -z "${KERNEL_MINOR:-}" ]; then
        local kernel="" kernel_major kernel_minor
        if [ -r /proc/sys/kernel/osrelease ]; then
            IFS= read -r kernel </proc/sys/kernel/osrelease || true
        else
            kernel="$(uname -r 2>/dev/null || true)"
        fi
        IFS=. read -r kernel_major kernel_minor _ <<<"$kernel"
        KERNEL_MAJOR="${KERNEL_MAJOR:-$kernel_major}"
        KERNEL_MINOR="${KERNEL_MINOR:-$kernel_minor}"
    fi

    if [ -z "${CURRENT_KUBERNETES_VERSION:-}" ] && [ -e /etc/kubernetes/manifests/kube-apiserver.yaml ]; then
        CURRENT_KUBERNETES_VERSION="$(discover_local_kubernetes_version || true)"
    fi
    export CURRENT_KUBERNETES_VERSION="${CURRENT_KUBERNETES_VERSION:-}"
    export KUBERNETES_UPGRADE="${KUBERNETES_UPGRADE:-0}"

    if [ -n "${KUBERNETES_VERSION:-}" ] && [ -z "${KUBERNETES_TARGET_VERSION_MINOR:-}" ]; then
        local major minor patch
        parse_kubernetes_target_version
    fi

    kubernetes_init_hostname

    if [ -z "${PRIVATE_ADDRESS:-}" ]; then
        __berth_discover_private_address
    fi

    __berth_proxy_globals
    # The addresses Berth listed as the session started served this discovery; a later one
    # lists the host afresh.
    unset BERTH_HOST_ADDRESSES
    return 0
}

# Sourced for its definitions alone (Berth's library.sh), the globals wait for the session's
# variables: Berth calls berth_kurl_globals once they are set.
if [ -z "${__berth_definitions_only:-}" ]; then
    berth_kurl_globals
fi
