# Berth {{ script | comment }} for installer {{ id | comment }}, rendered by berth-build.
#
# Online:  curl -fsSL {{ script_url | comment }} | sudo bash [-s ARGUMENT…]
# Airgap:  tar xzf <bundle>.tar.gz --no-same-owner --no-same-permissions &&
#          sudo bash {{ script | comment }} airgap [ARGUMENT…]
# Airgap, the bundle read as a stream (never extracted whole; only what is installed takes
# room):
#          tar xzf <bundle>.tar.gz --no-same-owner --no-same-permissions \
#              --occurrence {{ script | comment }} berth &&
#          sudo bash {{ script | comment }} airgap bundle=<bundle>.tar.gz [ARGUMENT…]
# A bundle in zstd (<bundle>.tar.zst): `tar --zstd -xf` in place of `tar xzf` (it needs zstd
# on the node); `bundle=` reads either.
#
# Arguments, as kURL's scripts take them: `airgap`; `plan` (print what would be done, change
# nothing); `allow-downgrade` (install and upgrade: let an add-on go back to the older
# version the spec names); `force-reapply` (run every add-on's hooks again, even one applied
# as asked and healthy); `health-timeout=DURATION` and `hook-timeout=DURATION` (how long an
# add-on's components may take to be healthy, 5m by default, and a hook to run, 30m: longer on
# a slow machine); and kURL's flags, merged into the spec as kURL merges them: its bare
# words (`ha`, `yes`, `ipv6`, `preserve-selinux-config`, `host-preflight-ignore`, …) and
# `key=value` pairs (`public-address=10.0.0.1`, `labels=zone=edge`, …). Other `key=value`
# pairs reach hooks as environment variables (`demo-port=8080` as DEMO_PORT).
#
# The whole script is one function, called on its last line: a download cut short defines
# part of a function and runs nothing.
set -euo pipefail

berth_main() {
BERTH_INSTALLER_ID={{ id | sh }}
BERTH_DIST_URL={{ dist_url | sh }}
BERTH_SCRIPTS_URL={{ scripts_base_url | sh }}
berth_arches={{ arches | sh }}

berth_fail() {
    echo "berth: $*" >&2
    exit 1
}

# berth_pass_words WORD…: the bare words this script does not take itself go to berth with
# the key=value pairs; berth refuses one that is not kURL's, listing those it takes.
berth_pass_words() {
    berth_params+=("$@")
}

berth_airgap=0
berth_bundle_file=""
berth_plan_only=0
berth_allow_downgrade=0
berth_force_reapply=0
berth_params=()
berth_words=()
berth_timeout_arguments=()
for berth_argument in "$@"; do
    case "$berth_argument" in
        airgap) berth_airgap=1 ;;
        bundle=*)
            berth_airgap=1
            berth_bundle_file="${berth_argument#bundle=}"
            ;;
        plan | dry-run | --dry-run) berth_plan_only=1 ;;
        allow-downgrade) berth_allow_downgrade=1 ;;
        force-reapply) berth_force_reapply=1 ;;
        control-plane) berth_params+=("control-plane=1") ;;
        health-timeout=* | hook-timeout=*)
            berth_timeout_arguments+=("--${berth_argument%%=*}" "${berth_argument#*=}")
            ;;
        *=*) berth_params+=("$berth_argument") ;;
        *) berth_words+=("$berth_argument") ;;
    esac
done

[ "$(uname -s)" = Linux ] || berth_fail "Berth installs on Linux; this is $(uname -s)"
case "$(uname -m)" in
    x86_64 | amd64) berth_arch=amd64 ;;
    aarch64 | arm64) berth_arch=arm64 ;;
    *) berth_fail "no berth binary for $(uname -m); this release has: $berth_arches" ;;
esac
# shellcheck disable=SC1090 # os-release is the host's
berth_os="$(. "${BERTH_OS_RELEASE:-/etc/os-release}" 2>/dev/null && echo "${PRETTY_NAME:-$ID $VERSION_ID}")" ||
    berth_os="an unknown Linux"
echo "berth: installer $BERTH_INSTALLER_ID on $berth_os ($berth_arch)" >&2

case "$berth_arch" in
{%- for arch, digest in berth_sha256 | items %}
    {{ arch | sh }}) berth_expected_sha256={{ digest | sh }}; berth_binary_file={{ berth_files[arch] | sh }} ;;
{%- endfor %}
    *) berth_fail "this release has no berth binary for $berth_arch; it has: $berth_arches" ;;
esac

berth_state="${BERTH_ROOT:-}/var/lib/berth"
if [ "$berth_plan_only" = 1 ]; then
    # `plan` changes nothing on the node: its files go to a folder removed on exit.
    berth_scratch="$(mktemp -d)"
    trap 'rm -rf "$berth_scratch"' EXIT
    berth_installer_dir="$berth_scratch/installer"
else
    berth_installer_dir="$berth_state/installers/$BERTH_INSTALLER_ID"
fi
mkdir -p "$berth_installer_dir"
# The spec may hold secrets (an add-on's password): its folder and files are root's alone.
chmod 0700 "$berth_installer_dir"

# The spec and the lock this script was rendered with: the lock pins every package's digest.
berth_spec_file="$berth_installer_dir/"{{ spec_file | sh }}
berth_lock_file="$berth_installer_dir/"{{ lock_file | sh }}
printf '%s\n' {{ spec | sh }} >"$berth_spec_file"
printf '%s\n' {{ lock | sh }} >"$berth_lock_file"
chmod 0600 "$berth_spec_file" "$berth_lock_file"
berth_trust_arguments=()
{%- if lock_signature %}
# The vendor's server signed the lock, and names the key the node checks the dist's
# signatures with: exactly that key. berth keeps it for this dist's origin alone (but for a
# plan, which changes nothing), so every later run for the dist — an upgrade by hand, a fleet
# rollout — checks with it too, and no other vendor's dist does.
printf '%s\n' {{ lock_signature | sh }} >"$berth_lock_file.sig"
berth_trust_key="$berth_installer_dir/"{{ trust_key_name | sh }}
printf '%s' {{ trust_key | sh }} >"$berth_trust_key"
berth_trust_arguments+=(--trust-key "$berth_trust_key")
{%- endif %}

berth_sha256_of() {
    sha256sum "$1" | cut -d' ' -f1
}

# The berth binary, kept on the node while its digest is the one this script expects: copied
# from the bundle beside this script (airgap) or downloaded, once. Kept airgap too: `berth
# join-command`, `berth status` and the fleet's agent need it once the bundle's folder is gone.
# For `plan`, it goes to the scratch folder unless the node has it already.
berth_binary="$berth_state/bin/berth"
if [ "$berth_airgap" = 1 ]; then
    berth_bundle_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    berth_source="$berth_bundle_dir/"{{ bundle_binary | sh }}
    berth_dist="$berth_bundle_dir"
    [ -f "$berth_source" ] || berth_fail "airgap: no berth binary beside this script in $berth_bundle_dir"
else
    berth_dist="$BERTH_DIST_URL"
fi
if [ ! -x "$berth_binary" ] || [ "$(berth_sha256_of "$berth_binary")" != "$berth_expected_sha256" ]; then
    if [ "$berth_plan_only" = 1 ]; then
        berth_binary="$berth_scratch/berth"
    fi
    mkdir -p "$(dirname "$berth_binary")"
    if [ "$berth_airgap" = 1 ]; then
        cp "$berth_source" "$berth_binary.partial"
    else
        command -v curl >/dev/null 2>&1 || berth_fail "downloading berth needs curl"
        echo "berth: downloading $BERTH_DIST_URL/$berth_binary_file" >&2
        curl -fsSL --retry 5 --retry-delay 2 --retry-connrefused \
            -o "$berth_binary.partial" "$BERTH_DIST_URL/$berth_binary_file" ||
            berth_fail "failed to download $BERTH_DIST_URL/$berth_binary_file"
    fi
    chmod 0755 "$berth_binary.partial"
    mv -f "$berth_binary.partial" "$berth_binary"
fi
berth_actual_sha256="$(berth_sha256_of "$berth_binary")"
if [ "$berth_actual_sha256" != "$berth_expected_sha256" ]; then
    rm -f "$berth_binary"
    berth_fail "$berth_binary has sha256 $berth_actual_sha256, this script expects $berth_expected_sha256"
fi
if [ -z "${BERTH_ROOT:-}" ] && [ -d /usr/local/bin ] && [ "$berth_plan_only" = 0 ]; then
    ln -sf "$berth_binary" /usr/local/bin/berth
fi

# A signed bundle's lock is taken with its signature: the node checks it against the vendor's
# key it trusts (/etc/berth/trusted-keys/*.pub, or --trust-key), which never comes from the
# bundle itself.
if [ "$berth_airgap" = 1 ] && [ -z "$berth_bundle_file" ] &&
    [ -f "$berth_bundle_dir/"{{ lock_file | sh }}.sig ]; then
    cp "$berth_bundle_dir/"{{ lock_file | sh }} "$berth_lock_file"
    cp "$berth_bundle_dir/"{{ lock_file | sh }}.sig "$berth_lock_file.sig"
fi

berth_install_arguments=(
    --spec "$berth_spec_file"
    "${berth_trust_arguments[@]+"${berth_trust_arguments[@]}"}"
)
if [ -n "$berth_bundle_file" ]; then
    # The bundle's own lock, checked with its signature as the stream brings it.
    [ -f "$berth_bundle_file" ] || berth_fail "bundle=$berth_bundle_file: no such file"
    berth_install_arguments+=(--bundle "$berth_bundle_file")
else
    berth_install_arguments+=(--lock "$berth_lock_file" --dist "$berth_dist")
fi
if [ "$berth_allow_downgrade" = 1 ]; then
    berth_install_arguments+=(--allow-downgrade)
fi
if [ "$berth_force_reapply" = 1 ]; then
    berth_install_arguments+=(--force-reapply)
fi
if [ "$berth_plan_only" = 0 ]; then
    # A plan waits for nothing: the timeouts are the run's.
    berth_install_arguments+=("${berth_timeout_arguments[@]+"${berth_timeout_arguments[@]}"}")
fi
if [ "$berth_airgap" = 1 ]; then
    berth_params+=(airgap=1)
elif [ "$berth_plan_only" = 0 ]; then
    # Recorded for `berth join-command`: new nodes fetch join.sh from the same place.
    berth_install_arguments+=(--scripts-url "$BERTH_SCRIPTS_URL")
fi
# The key=value pairs reach berth on its standard input, one per NUL-ended record, not on its
# command line: they may hold join secrets, and every user can read a command line.
berth_install_arguments+=(--params-from-stdin)

berth_print_params() {
    if [ -n "${berth_params[*]+set}" ]; then
        printf '%s\0' "${berth_params[@]}"
    fi
}
