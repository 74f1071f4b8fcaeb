#!/usr/bin/env bash
# The portable node binary (scripts/portable.sh: glibc 2.17, through zig) against the host
# build (`cargo build --release -p berth`): size on disk, and start-up time, as `berth
# --version` run RUNS times (default 300) each, the two interleaved in rounds of 50 so that
# both meet the same machine load. Prints each figure and the portable/host ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-300}

cargo build --release --locked -p berth --bin berth >&2
host=target/release/berth
portable=$(scripts/portable.sh)

size() { stat -c %s "$1"; }
# elapsed BINARY COUNT: nanoseconds for COUNT runs of BINARY --version
elapsed() {
    local start end
    start=$(date +%s%N)
    for ((i = 0; i < $2; i++)); do "$1" --version >/dev/null; done
    end=$(date +%s%N)
    echo $((end - start))
}
host_ns=0
portable_ns=0
for ((done = 0; done < runs; done += 50)); do
    host_ns=$((host_ns + $(elapsed "$host" 50)))
    portable_ns=$((portable_ns + $(elapsed "$portable" 50)))
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
printf '%-26s %14s %14s %8s\n' "" host portable ratio
printf '%-26s %14s %14s %8s\n' "size (bytes)" "$(size "$host")" "$(size "$portable")" \
    "$(ratio "$(size "$portable")" "$(size "$host")")"
printf '%-26s %14s %14s %8s\n' "start-up, mean (us)" "$((host_ns / runs / 1000))" \
    "$((portable_ns / runs / 1000))" "$(ratio "$portable_ns" "$host_ns")"
printf 'glibc asked for: host %s, portable %s\n' \
    "$(objdump -T "$host" | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -n 1)" \
    "$(objdump -T "$portable" | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -n 1)"
