#!/usr/bin/env bash
# Helpers the bench scripts share; sourced, never run.

# Times are read from $EPOCHREALTIME (bash 5), which costs no process: `date` in a command
# substitution added about 2 ms to each interval measured.
[ -n "${EPOCHREALTIME:-}" ] || { echo "bash 5 or later is needed (EPOCHREALTIME)" >&2; exit 1; }
# Now, in seconds with a fraction, for intervals (`$(now) - start` through bc or awk).
now() { printf '%s\n' "$EPOCHREALTIME"; }
# The median of the numbers given.
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# Starts a private containerd under $1, records its pid in containerd_pids (for the caller's
# cleanup) and sets CONTAINERD_ADDRESS to its socket.
containerd_pids=()
start_containerd() {
    local dir=$1
    mkdir -p "$dir"
    printf 'version = 2\nroot = "%s/root"\nstate = "%s/state"\n[grpc]\n  address = "%s/containerd.sock"\n' \
        "$dir" "$dir" "$dir" >"$dir/config.toml"
    containerd --config "$dir/config.toml" >"$dir/log" 2>&1 &
    containerd_pids+=($!)
    export CONTAINERD_ADDRESS="$dir/containerd.sock"
    for _ in $(seq 100); do ctr version >/dev/null 2>&1 && return; sleep 0.1; done
    echo "containerd did not start" >&2
    exit 1
}

# Sets `work` to a scratch folder /tmp/berth-bench-NAME.*, removed on exit with the containerds
# started for it.
make_work() {
    work=$(mktemp -d "/tmp/berth-bench-$1.XXXXXX")
    trap remove_work EXIT
}
remove_work() {
    for pid in "${containerd_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    sleep 0.5
    umount -R "$work" 2>/dev/null || true
    rm -rf "$work"
}

# For the benches that install Kubernetes on machines of their own: the tools they use (and
# those named), Kubernetes v1.20.2's artefacts exported as BERTH_KUBERNETES_ARTEFACTS
# (scripts/kubernetes.sh: built once, then cached), and berth-build in the release profile the
# benches take it from (beside their berth). Run from the repository's root.
prepare_cluster_bench() {
    local tool
    for tool in containerd runc ctr ip nsenter skopeo docker-registry "$@"; do
        command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/test.sh first" >&2; exit 1; }
    done
    BERTH_KUBERNETES_ARTEFACTS=$(scripts/kubernetes.sh)
    export BERTH_KUBERNETES_ARTEFACTS
    cargo build --release --quiet -p berth-build
}
