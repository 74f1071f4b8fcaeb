# shellcheck shell=bash
# Network helpers with kURL's names: addresses (split, validate), TLS names of a serving
# endpoint, and the choice of the pod and service networks so they overlap no route of the host.

# splitHostPort HOST:PORT: sets the globals HOST and PORT (split at the first colon, as kURL:
# not for bare IPv6 addresses).
# shellcheck disable=SC2034 # HOST and PORT are the results callers read
function splitHostPort() {
    IFS=":" read -r HOST PORT <<<"$1"
}

# isValidIpv4 TEXT: whether TEXT is four dot-separated numbers.
function isValidIpv4() {
    [[ "$1" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]
}

# isValidIpv6 TEXT: whether TEXT has the shape of an IPv6 address (hex groups and colons).
function isValidIpv6() {
    [[ "$1" =~ ^([0-9a-fA-F]{0,4}:){1,7}[0-9a-fA-F]{0,4}$ ]]
}

# cert_has_san HOST:PORT NAME: whether the certificate served at HOST:PORT lists NAME among its
# subject alternative names.
function cert_has_san() {
    local address="$1" san="$2"
    echo "Q" | openssl s_client -connect "$address" 2>/dev/null |
        openssl x509 -noout -text 2>/dev/null |
        grep --after-context=1 'X509v3 Subject Alternative Name' | grep -qF "$san"
}

# __berth_is_ipv4_cidr TEXT: whether TEXT is a dotted IPv4 address (each part 0-255) with an
# optional /0-32 length. Only text that passes goes into bash arithmetic, which would run a
# command named in it (`x[$(cmd)]`), and spec values reach here.
function __berth_is_ipv4_cidr() {
    local text="$1" address length part parts
    [[ "$text" =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}(/[0-9]{1,2})?$ ]] || return 1
    address="${text%%/*}"
    if [[ "$text" == */* ]]; then
        length="${text#*/}"
        [ "$((10#$length))" -le 32 ] || return 1
    fi
    IFS=. read -r -a parts <<<"$address"
    for part in "${parts[@]}"; do
        [ "$((10#$part))" -le 255 ] || return 1
    done
}

# __berth_ipv4_to_number ADDRESS: prints the IPv4 ADDRESS (checked by __berth_is_ipv4_cidr)
# as an integer.
function __berth_ipv4_to_number() {
    local a b c d
    IFS=. read -r a b c d <<<"$1"
    echo "$(((10#$a << 24) + (10#$b << 16) + (10#$c << 8) + 10#$d))"
}

# __berth_number_to_ipv4 NUMBER: prints the integer NUMBER as a dotted IPv4 address.
function __berth_number_to_ipv4() {
    echo "$((($1 >> 24) & 255)).$((($1 >> 16) & 255)).$((($1 >> 8) & 255)).$(($1 & 255))"
}

# __berth_subnet_alloc [--subnet-alloc-range CIDR] [--cidr-range SIZE] [--exclude-subnet=LIST]:
# the IPv4 part of kURL's `subnet` tool, for hosts without $DIR/bin/subnet: prints (without a
# newline) the first /SIZE network in CIDR that overlaps neither a route of the host's main
# table (the default route aside) nor a network of LIST; fails when there is none.
function __berth_subnet_alloc() {
    local range="10.0.0.0/8" size=22 excluded=""
    while [ "$#" -gt 0 ]; do
        case "$1" in
            --subnet-alloc-range=*) range="${1#*=}" ;;
            --subnet-alloc-range) range="${2:-}"; shift ;;
            --cidr-range=*) size="${1#*=}" ;;
            --cidr-range) size="${2:-}"; shift ;;
            --exclude-subnet=*) excluded="${1#*=}" ;;
            --exclude-subnet) excluded="${2:-}"; shift ;;
        esac
        shift
    done
    if [[ "$range" != */* ]] || ! __berth_is_ipv4_cidr "$range" ||
        ! [[ "$size" =~ ^[0-9]{1,2}$ ]] || [ "$((10#$size))" -lt 1 ] || [ "$((10#$size))" -gt 32 ]; then
        echo "cannot allocate a /$size in $range"
        return 1
    fi
    # Every network to avoid, as "start end" pairs.
    local taken=() network start length line first
    local routes
    routes="$(ip -4 route show 2>/dev/null || true)"
    while read -r first network _; do
        case "$first" in
            unicast | blackhole | unreachable | prohibit | throw) ;;
            *) network="$first" ;;
        esac
        if [ -n "$network" ] && [ "$network" != "default" ]; then
            taken+=("$network")
        fi
    done <<<"$routes"
    local excluded_list=()
    IFS=, read -r -a excluded_list <<<"$excluded"
    taken+=("${excluded_list[@]}")
    local spans=() mask
    for line in "${taken[@]}"; do
        [ -n "$line" ] || continue
        __berth_is_ipv4_cidr "$line" || continue
        network="${line%%/*}"
        length=32
        if [[ "$line" == */* ]]; then length="$((10#${line#*/}))"; fi
        [ "$network" != "0.0.0.0" ] || continue
        mask=$(((0xffffffff << (32 - length)) & 0xffffffff))
        start=$(($(__berth_ipv4_to_number "$network") & mask))
        spans+=("$start $((start + (1 << (32 - length)) - 1))")
    done
    local range_length="$((10#${range#*/}))" range_start range_end block candidate next jump hit
    size="$((10#$size))"
    local span span_start span_end
    mask=$(((0xffffffff << (32 - range_length)) & 0xffffffff))
    range_start=$(($(__berth_ipv4_to_number "${range%%/*}") & mask))
    range_end=$((range_start + (1 << (32 - range_length)) - 1))
    block=$((1 << (32 - size)))
    candidate=$((range_start - range_start % block))
    while [ "$candidate" -ge "$range_start" ] && [ $((candidate + block - 1)) -le "$range_end" ]; do
        next=$((candidate + block))
        hit=0
        for span in "${spans[@]}"; do
            read -r span_start span_end <<<"$span"
            if [ "$span_start" -le $((candidate + block - 1)) ] && [ "$candidate" -le "$span_end" ]; then
                # Taken: resume at the first network of this size past what overlaps.
                hit=1
                jump=$(((span_end + block) / block * block))
                if [ "$jump" -gt "$next" ]; then next="$jump"; fi
            fi
        done
        if [ "$hit" -eq 0 ]; then
            printf '%s/%s' "$(__berth_number_to_ipv4 "$candidate")" "$size"
            return 0
        fi
        candidate="$next"
    done
    echo "failed to find available subnet: no available subnet found within $range"
    return 1
}

# __berth_subnet ARG…: runs kURL's subnet tool ($BIN_SUBNET, else $DIR/bin/subnet) with the
# arguments, or Berth's IPv4 equivalent on a host without it.
function __berth_subnet() {
    local tool="${BIN_SUBNET:-${DIR:-.}/bin/subnet}"
    if [ -x "$tool" ]; then
        "$tool" "$@"
    else
        __berth_subnet_alloc "$@"
    fi
}

# __berth_check_given_subnet WHAT CIDR RANGE EXISTING EXCLUDED: kURL's checks of a pod or
# service network the spec gives: at least /RANGE, the cluster's EXISTING one unchanged, and
# (asked, yes by default) free of the host's routes and of EXCLUDED (`--exclude-subnet=…`).
function __berth_check_given_subnet() {
    local what="$1" cidr="$2" range="$3" existing="$4" excluded="$5"
    local size="${cidr#*/}"
    if [ -n "$range" ] && [ "$size" -gt "$range" ]; then
        bail "$what cidr must be at least /$range"
    fi
    if [ "$cidr" = "$existing" ]; then
        return 0
    elif [ -n "$existing" ]; then
        bail "$what cidr cannot be changed to $cidr because existing cidr is $existing"
    fi
    if __berth_subnet --subnet-alloc-range "$cidr" --cidr-range "$size" "$excluded" >/dev/null; then
        return 0
    fi
    # shellcheck disable=SC2059 # kURL's colours are part of the format
    printf "${RED}$what cidr %s overlaps with existing route. Continue? ${NC}" "$cidr"
    if ! confirmY; then
        exit 1
    fi
}

# discover_pod_subnet: sets POD_CIDR as kURL does: fd00:c00b:1::/112 with IPV6_ONLY=1; a given
# POD_CIDR is checked (at least /POD_CIDR_RANGE, not a change of EXISTING_POD_CIDR, and, if it
# overlaps a route, confirmed); else EXISTING_POD_CIDR; else a free /POD_CIDR_RANGE (default
# /20) in 10.32.0.0/16, then in 10.0.0.0/8. Bails when none is free.
function discover_pod_subnet() {
    if [ "${IPV6_ONLY:-}" = "1" ]; then
        POD_CIDR="${POD_CIDR:-fd00:c00b:1::/112}"
        return 0
    fi
    local excluded=""
    if __berth_private_address_unrouted; then
        excluded="--exclude-subnet=${PRIVATE_ADDRESS:-}/16"
    fi
    if [ -n "${POD_CIDR:-}" ]; then
        __berth_check_given_subnet Pod "$POD_CIDR" "${POD_CIDR_RANGE:-}" "${EXISTING_POD_CIDR:-}" "$excluded"
        return 0
    fi
    if [ -n "${EXISTING_POD_CIDR:-}" ]; then
        echo "Using existing pod network $EXISTING_POD_CIDR"
        POD_CIDR="$EXISTING_POD_CIDR"
        return 0
    fi
    local size="${POD_CIDR_RANGE:-20}" network range
    for range in 10.32.0.0/16 10.0.0.0/8; do
        if network="$(__berth_subnet --subnet-alloc-range "$range" --cidr-range "$size" "$excluded")"; then
            echo "Found pod network: $network"
            POD_CIDR="$network"
            return 0
        fi
    done
    local addon=Flannel anchor=flannel
    if [ -n "${WEAVE_VERSION:-}" ]; then
        addon=Weave anchor=weave
    fi
    bail "Failed to find an available /$size subnet for the pod network within either 10.32.0.0/16 or 10.0.0.0/8. \n  Use $addon's podCIDR parameter to set a pod network that is not already in use. \n  https://kurl.sh/docs/add-ons/$anchor#advanced-install-options"
}

# __berth_private_address_unrouted: whether no route has PRIVATE_ADDRESS as its source
# network: kURL then keeps the /16 around it out of the pod and service networks.
function __berth_private_address_unrouted() {
    ! ip route show src "${PRIVATE_ADDRESS:-}" 2>/dev/null | awk '{ print $1 }' | grep -q '/'
}

# discover_service_subnet: sets SERVICE_CIDR (and EXISTING_SERVICE_CIDR, from the cluster's
# kubeadm configuration when it answers) as kURL does: fd00:c00b:2::/112 with IPV6_ONLY=1; a
# given SERVICE_CIDR is checked like POD_CIDR; else the existing one; else a free
# /SERVICE_CIDR_RANGE (default /22) in 10.96.0.0/16, then in 10.0.0.0/8, apart from POD_CIDR.
function discover_service_subnet() {
    if [ "${IPV6_ONLY:-}" = "1" ]; then
        SERVICE_CIDR="${SERVICE_CIDR:-fd00:c00b:2::/112}"
        return 0
    fi
    local excluded="--exclude-subnet=${POD_CIDR:-}"
    if __berth_private_address_unrouted; then
        excluded="$excluded,${PRIVATE_ADDRESS:-}/16"
    fi
    EXISTING_SERVICE_CIDR="$(maybe kubeadm_cluster_configuration | awk '/serviceSubnet/ { print $2 }')"
    if [ -n "${SERVICE_CIDR:-}" ]; then
        __berth_check_given_subnet Service "$SERVICE_CIDR" "${SERVICE_CIDR_RANGE:-}" "$EXISTING_SERVICE_CIDR" "$excluded"
        return 0
    fi
    if [ -n "$EXISTING_SERVICE_CIDR" ]; then
        echo "Using existing service network $EXISTING_SERVICE_CIDR"
        SERVICE_CIDR="$EXISTING_SERVICE_CIDR"
        return 0
    fi
    local size="${SERVICE_CIDR_RANGE:-22}" network range
    for range in 10.96.0.0/16 10.0.0.0/8; do
        if network="$(__berth_subnet --subnet-alloc-range "$range" --cidr-range "$size" "$excluded")"; then
            echo "Found service network: $network"
            SERVICE_CIDR="$network"
            return 0
        fi
    done
    bail "Failed to find an available /$size subnet for the service network within either 10.32.0.0/16 or 10.0.0.0/8. \n  Use Kubernetes's serviceCIDR parameter to set a pod network that is not already in use. \n  https://kurl.sh/docs/add-ons/kubernetes#advanced-install-options"
}

# discover_public_ip: sets PUBLIC_ADDRESS, as kURL's does, from the first cloud metadata service
# that answers with an address: GCE's, EC2's (IMDSv2, then v1), Azure's. Nothing on an airgap
# install, when PUBLIC_ADDRESS is set, or off a cloud (each service gets 2 s to connect and 5 to
# answer). Unlike kURL's, an answer that is not an address moves on to the next service, and
# the caller's errexit is left as it was. BERTH_METADATA_GCE and BERTH_METADATA_LINK_LOCAL
# (metadata.google.internal, 169.254.169.254) name the services' hosts.
function discover_public_ip() {
    if [ "${AIRGAP:-}" = 1 ] || [ -n "${PUBLIC_ADDRESS:-}" ]; then
        return 0
    fi
    local gce="${BERTH_METADATA_GCE:-metadata.google.internal}"
    local link_local="${BERTH_METADATA_LINK_LOCAL:-169.254.169.254}"
    local curl_options=(--noproxy '*' --connect-timeout 2 --max-time 5 -fsS)
    local answer token
    for provider in gce ec2v2 ec2v1 azure; do
        answer=""
        case "$provider" in
            gce)
                answer="$(curl "${curl_options[@]}" -H 'Metadata-Flavor: Google' \
                    "http://$gce/computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip" 2>/dev/null)" || answer=""
                ;;
            ec2v2)
                token="$(curl "${curl_options[@]}" -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' \
                    "http://$link_local/latest/api/token" 2>/dev/null)" || token=""
                if [ -n "$token" ]; then
                    answer="$(curl "${curl_options[@]}" -H "X-aws-ec2-metadata-token: $token" \
                        "http://$link_local/latest/meta-data/public-ipv4" 2>/dev/null)" || answer=""
                fi
                ;;
            ec2v1)
                answer="$(curl "${curl_options[@]}" "http://$link_local/latest/meta-data/public-ipv4" 2>/dev/null)" || answer=""
                ;;
            azure)
                answer="$(curl "${curl_options[@]}" -H 'Metadata: true' \
                    "http://$link_local/metadata/instance/network/interface/0/ipv4/ipAddress/0/publicIpAddress?api-version=2017-08-01&format=text" 2>/dev/null)" || answer=""
                ;;
        esac
        if isValidIpv4 "$answer" || isValidIpv6 "$answer"; then
            PUBLIC_ADDRESS="$answer"
            return 0
        fi
    done
    return 0
}
