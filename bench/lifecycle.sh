#!/usr/bin/env bash
# Lifecycle benchmark, for the demo spec (examples/demo.yaml): wall time of an online install
# (`curl … | bash` against `berth-build serve`, berth downloaded and checked), a re-run on the
# unchanged node, a join (the command the first node printed), and an airgap install from an
# extracted bundle. Baseline for the install: the same work by hand — `tar xzf` the package,
# `ctr images import` its image, `ctr run` the container and wait until it answers.
#
# Everything runs in a network namespace with loopback alone and a private containerd, so
# nothing on the host is touched; each run starts from fresh node folders. Median of RUNS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root: it makes a network namespace" >&2; exit 1; }
for tool in containerd ctr curl ip nsenter unshare python3; do
    command -v "$tool" >/dev/null || { echo "missing $tool: run scripts/test.sh first" >&2; exit 1; }
done
cargo build --release --quiet -p berth -p berth-build
berth="$PWD/target/release/berth"
berth_build="$PWD/target/release/berth-build"
runs=${RUNS:-3}

work=$(mktemp -d /tmp/berth-bench-lifecycle.XXXXXX)
namespace="berth-bench-$$"
pids=()
cleanup() {
    # Containers first: their shims outlive containerd.
    for task in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do
        ctr -n k8s.io tasks delete --force "$task" >/dev/null 2>&1 || true
    done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    ip netns del "$namespace" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$namespace"
ip -n "$namespace" link set lo up
# Runs a command in the namespace. Background servers are started with nsenter itself, not
# through this function, so that `$!` is their pid (nsenter execs the command).
inside() { nsenter --net="/run/netns/$namespace" "$@"; }

echo "building the demo packages..." >&2
for version in 1.0.0 2.0.0; do
    "$berth_build" package "addons/demo/$version" --out "$work/dist" --cache-dir "$work/cache" >/dev/null 2>&1
done
echo '{"addons": [{"name": "demo", "versions": [{"version": "2.0.0"}, {"version": "1.0.0"}]}]}' \
    >"$work/dist/versions.json"
# A containerd in the namespace, its runc state private (a tmpfs in a mount namespace).
mkdir -p "$work/containerd" /run/containerd/runc
printf 'version = 2\nroot = "%s/root"\nstate = "%s/state"\n[grpc]\n  address = "%s/containerd.sock"\n' \
    "$work/containerd" "$work/containerd" "$work/containerd" >"$work/containerd/config.toml"
nsenter --net="/run/netns/$namespace" unshare --mount --propagation private sh -c \
    'mount -t tmpfs tmpfs /run/containerd/runc && exec containerd --config "$0"' \
    "$work/containerd/config.toml" >"$work/containerd/log" 2>&1 &
pids+=($!)
export CONTAINERD_ADDRESS="$work/containerd/containerd.sock"
for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done

nsenter --net="/run/netns/$namespace" "$berth_build" serve --dist "$work/dist" --installers "$work/installers" --listen 127.0.0.1:18800 --berth "$berth" \
    >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do inside curl -fsS -o /dev/null http://127.0.0.1:18800/versions.json 2>/dev/null && break; sleep 0.1; done
url=$(inside curl -fsS --data-binary @examples/demo.yaml http://127.0.0.1:18800/installer)
id=${url##*/}
inside curl -fsS -o "$work/bundle.tar.gz" "http://127.0.0.1:18800/bundle/$id.tar.gz"

seconds() { python3 -c "print(f'{$2 - $1:.3f}')"; }
answers() { inside curl -fsS --max-time 1 "http://127.0.0.1:$1/" 2>/dev/null | grep -qx "$2"; }
wait_answer() { for _ in $(seq 300); do answers "$1" "$2" && return; sleep 0.01; done; echo "no answer on $1" >&2; exit 1; }
# A node: a fresh Berth root with a port of its own (a per-node override of the spec's).
node() { mkdir -p "$work/$1/etc/berth" && echo "demo: {port: $2}" >"$work/$1/etc/berth/node.yaml"; }
as_node() { local root=$1; shift; BERTH_ROOT="$work/$root" inside "$@"; }
# Runs a step with its output in $1, shown if it fails.
step() { local log=$1; shift; "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "failed: $*" >&2; exit 1; }; }

raw=(); online=(); rerun=(); join=(); airgap=()
for run in $(seq "$runs"); do
    echo "run $run of $runs..." >&2
    # By hand: unpack, import, run, wait.
    start=$(now)
    mkdir -p "$work/raw-$run"
    tar xzf "$work/dist/demo-1.0.0.tar.gz" -C "$work/raw-$run"
    tar -C "$work/raw-$run/addons/demo/1.0.0/images" -c . | ctr -n k8s.io images import - >/dev/null
    inside ctr -n k8s.io run --detach --net-host docker.io/berth/demo:1.0.0 "raw-$run" /demo 18079 token >/dev/null
    wait_answer 18079 "demo 1.0.0"
    raw+=("$(seconds "$start" "$(now)")")
    ctr -n k8s.io task delete --force "raw-$run" >/dev/null 2>&1
    ctr -n k8s.io container delete "raw-$run" >/dev/null
    ctr -n k8s.io images rm docker.io/berth/demo:1.0.0 >/dev/null

    node "first-$run" 18080
    start=$(now)
    step "$work/online-$run.log" as_node "first-$run" bash -c "curl -fsSL $url | bash -s private-address=127.0.0.1"
    online+=("$(seconds "$start" "$(now)")")
    answers 18080 "demo 1.0.0"

    start=$(now)
    step "$work/rerun-$run.log" as_node "first-$run" bash -c "curl -fsSL $url | bash -s private-address=127.0.0.1"
    rerun+=("$(seconds "$start" "$(now)")")

    node "second-$run" 18081
    command=$(BERTH_ROOT="$work/first-$run" "$berth" join-command)
    start=$(now)
    step "$work/join-$run.log" as_node "second-$run" bash -c "${command/sudo /}"
    join+=("$(seconds "$start" "$(now)")")
    answers 18081 "demo 1.0.0"

    node "airgap-$run" 18082
    mkdir -p "$work/bundle-$run"
    tar xzf "$work/bundle.tar.gz" -C "$work/bundle-$run"
    start=$(now)
    (cd "$work/bundle-$run" && step "$work/airgap-$run.log" \
        as_node "airgap-$run" bash install.sh airgap private-address=127.0.0.1)
    airgap+=("$(seconds "$start" "$(now)")")
    answers 18082 "demo 1.0.0"

    for root in second first airgap; do
        as_node "$root-$run" "$berth" reset >/dev/null 2>&1
    done
done

printf '%-44s %10s   %s\n' "" "median s" "runs"
printf '%-44s %10s   %s\n' "by hand: tar xzf, ctr import, ctr run" "$(median "${raw[@]}")" "${raw[*]}"
printf '%-44s %10s   %s\n' "online install (curl | bash)" "$(median "${online[@]}")" "${online[*]}"
printf '%-44s %10s   %s\n' "re-run on the unchanged node" "$(median "${rerun[@]}")" "${rerun[*]}"
printf '%-44s %10s   %s\n' "join (the printed command)" "$(median "${join[@]}")" "${join[*]}"
printf '%-44s %10s   %s\n' "airgap install (bash install.sh airgap)" "$(median "${airgap[@]}")" "${airgap[*]}"
echo "online install / by hand: $(python3 -c "print(f'{$(median "${online[@]}") / $(median "${raw[@]}"):.2f}')")"
python3 bench/headline.py airgap "Airgap install of the demo spec (bash install.sh airgap)" \
    "$(median "${airgap[@]}") s" "—" "—" "—"
rerun_median=$(median "${rerun[@]}")
if python3 -c "import sys; sys.exit(0 if $rerun_median < 1 else 1)"; then
    echo "re-run: ${rerun_median} s (target < 1 s): met"
else
    echo "re-run: ${rerun_median} s (target < 1 s): NOT met"
fi
