# shellcheck shell=bash
# kURL's prompt helpers, answered without a terminal: Berth's hooks have none, and their stdin
# is /dev/null. Each answers as kURL does non-interactively and prints the answer it took.

# kURL's answers: confirmY says yes; confirmN says no, or yes with ASSUME_YES=1 (the `yes`
# argument; pass assume-yes=1 to Berth); prompt gives an empty answer. TEST_PROMPT_RESULT, kURL's
# test hook, when set, is taken as the typed answer instead.

# prompts_can_prompt: whether a prompt could be answered by a person: never, for Berth's hooks
# (kURL tests for /dev/tty; a hook must never wait on one).
function prompts_can_prompt() {
    return 1
}

# prompt: sets PROMPT_RESULT to the answer, without reading anything: TEST_PROMPT_RESULT when
# set, else empty (pressing enter), and prints that answer after the caller's question.
function prompt() {
    if [ -n "${TEST_PROMPT_RESULT+x}" ]; then
        PROMPT_RESULT="$TEST_PROMPT_RESULT"
        printf '%s\n' "$PROMPT_RESULT"
        log "Prompt answered from TEST_PROMPT_RESULT"
        return 0
    fi
    PROMPT_RESULT=""
    echo ""
    logWarn "Cannot prompt, shell is not interactive: answering with an empty line"
}

# confirmY: prints "(Y/n) " and the answer, and returns 0 (yes) unless the answer is n or N.
# Without a person to ask, as kURL without a terminal: yes.
function confirmY() {
    printf "(Y/n) "
    if [ "${ASSUME_YES:-}" = "1" ]; then
        echo "Y"
        return 0
    fi
    if [ -n "${TEST_PROMPT_RESULT+x}" ]; then
        prompt
        if [ "$PROMPT_RESULT" = "n" ] || [ "$PROMPT_RESULT" = "N" ]; then
            return 1
        fi
        return 0
    fi
    echo "Y"
    logWarn "Automatically accepting prompt, shell is not interactive"
    return 0
}

# confirmN: prints "(y/N) " and the answer, and returns 0 (yes) only for y or Y, or with
# ASSUME_YES=1. Without a person to ask, as kURL without a terminal: no (status 1).
function confirmN() {
    printf "(y/N) "
    if [ "${ASSUME_YES:-}" = "1" ]; then
        echo "Y"
        return 0
    fi
    if [ -n "${TEST_PROMPT_RESULT+x}" ]; then
        prompt
        if [ "$PROMPT_RESULT" = "y" ] || [ "$PROMPT_RESULT" = "Y" ]; then
            return 0
        fi
        return 1
    fi
    echo "N"
    logWarn "Automatically declining prompt, shell is not interactive"
    return 1
}

# prompt_for_token: bails unless KUBEADM_TOKEN is set (kURL prompts for it on a terminal).
function prompt_for_token() {
    if [ -n "${KUBEADM_TOKEN:-}" ]; then
        return 0
    fi
    bail "kubernetes.kubeadmToken required"
}

# prompt_for_token_ca_hash: bails unless KUBEADM_TOKEN_CA_HASH is set.
function prompt_for_token_ca_hash() {
    if [ -n "${KUBEADM_TOKEN_CA_HASH:-}" ]; then
        return 0
    fi
    bail "kubernetes.kubeadmTokenCAHash required"
}

# prompt_for_master_address: bails unless KUBERNETES_MASTER_ADDR is set.
function prompt_for_master_address() {
    if [ -n "${KUBERNETES_MASTER_ADDR:-}" ]; then
        return 0
    fi
    bail "kubernetes.masterAddress required"
}

# prompt_for_private_ip: sets PRIVATE_ADDRESS to the host's only non-virtual address and says
# which interface it is; exits 1 when there is none and bails when there are several (kURL
# would ask which; pass private-address=IP).
# shellcheck disable=SC2154 # __berth_private_interfaces (discover.sh) sets the arrays
# shellcheck disable=SC2034 # PRIVATE_ADDRESS is the global add-ons read
function prompt_for_private_ip() {
    __berth_private_interfaces
    local count="${#__berth_iface_addrs[@]}"
    if [ "$count" -eq 0 ]; then
        echo >&2 "Error: The installer couldn't discover any valid network interfaces on this machine."
        echo >&2 "Check your network configuration and re-run this script again."
        echo >&2 "If you want to skip this discovery process, pass the 'private-address' arg to this script, e.g. 'sudo ./install.sh private-address=1.2.3.4'"
        exit 1
    fi
    if [ "$count" -eq 1 ]; then
        PRIVATE_ADDRESS="${__berth_iface_addrs[0]}"
        printf "The installer will use network interface '%s' (with IP address '%s')\n" \
            "${__berth_iface_names[0]}" "${__berth_iface_addrs[0]}"
        return 0
    fi
    bail "Multiple network interfaces present, please select an IP address. Try passing the selected address to this script e.g. 'sudo ./install.sh private-address=1.2.3.4' or assign an IP address to the privateAddress field in the kurl add-on."
}
