#!/usr/bin/env bash
# Fuzzing: every parser that reads what a node or the builder is handed (the Manifest, the
# Installer spec, package.json, the archive reader, apt Packages and InRelease, rpm repomd and
# primary, versions.json, the kustomization editor, the fleet's messages and records, rollout
# files carried through their decisions, health.yaml rendered, host-preflight files templated
# and read) under libFuzzer, each for SECONDS_PER_TARGET
# seconds (default 60). Fails on any crash, on one input that runs past 10 s (a hang) and on memory
# past 2 GiB; libFuzzer leaves the input it found in fuzz/artifacts/<target>/: add it as a
# regression test beside the parser, then fix the parser. Seeds come from the repository and,
# when present, ../shared/fixtures (read in place, copied only into a work folder).
# Needs nightly Rust (rustup) and cargo-fuzz (installed when missing). TARGETS="a b" runs some.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${SECONDS_PER_TARGET:-60}
all_targets=(manifest installer_spec package_index archive archive_members apt_packages apt_release rpm_repomd rpm_primary versions kustomization fleet_messages rollout health host_preflight)
read -r -a targets <<<"${TARGETS:-${all_targets[*]}}"

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

work=$(mktemp -d /tmp/berth-bench-fuzz.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
fixtures=../shared/fixtures

seed() { # seed TARGET FILE…: copies the files into the target's corpus
    local target=$1
    shift
    mkdir -p "$work/corpus/$target"
    local file
    for file in "$@"; do
        [ -f "$file" ] && cp "$file" "$work/corpus/$target/$(sha256sum "$file" | cut -c1-16)"
    done
    return 0
}
shopt -s nullglob
seed manifest addons/*/*/Manifest "$fixtures"/kurl-manifests/*.Manifest
seed installer_spec examples/*.yaml "$fixtures"/kurl-specs/*.yaml
seed versions versions.json
seed health addons/*/*/health.yaml
seed host_preflight addons/*/*/host-preflight.yaml "$fixtures"/kurl-host-preflights/*.yaml
# The rollout file documented in formats/src/rollout.rs (its backticks are the sed pattern's).
# shellcheck disable=SC2016
sed -n '/^\/\/! ```yaml$/,/^\/\/! ```$/p' formats/src/rollout.rs | sed '1d;$d;s|^//! \{0,1\}||' >"$work/rollout.yaml"
seed rollout "$work/rollout.yaml"
printf '{"type":"register","token":"t","node":{"name":"node-2","machineId":"m2","role":"secondary","labels":{"canary":"true"}}}' >"$work/register.json"
printf '{"type":"progress","work":"demo-2.ab12.1","outcome":"Succeeded","addons":[{"name":"demo","current":"2.0.0","progressing":"Succeeded","configHash":"sha256:00"}]}' >"$work/progress.json"
seed fleet_messages "$work/register.json" "$work/progress.json"
seed kustomization addons/*/*/kustomize/kustomization.yaml addons/*/*/kustomize/*/kustomization.yaml
tar czf "$work/hello.tar.gz" -C addons hello
seed archive "$work/hello.tar.gz"
# The members target takes a tar uncompressed (it cuts it into gzip members itself), behind a
# first byte that says how: 0x03 four members, 0x07 four and raw bytes after them.
tar cf "$work/hello.tar" -C addons hello
for shape in 00 03 07; do
    { printf '%b' "\\x$shape"; cat "$work/hello.tar"; } >"$work/hello-$shape.tar"
    seed archive_members "$work/hello-$shape.tar"
done
printf '{"schemaVersion":1,"name":"demo","version":"1.0.0","arch":"amd64","inputsDigest":"sha256:%064d","files":[],"images":[]}\n' 0 >"$work/package.json"
seed package_index "$work/package.json"
printf 'Package: containerd\nVersion: 1.6.20~ds1-1+b1\nArchitecture: amd64\nDepends: libc6 (>= 2.34), runc (>= 1.0.0~rc94~) | runc-any\nProvides: containerd-any\nFilename: pool/main/c/containerd/containerd_1.6.20~ds1-1+b1_amd64.deb\nSize: 100\nSHA256: %064d\n\n' 0 >"$work/Packages"
seed apt_packages "$work/Packages"
printf 'Origin: Debian\nSuite: stable\nSHA256:\n %064d 1234 main/binary-amd64/Packages.xz\n' 0 >"$work/InRelease"
seed apt_release "$work/InRelease"
printf '<?xml version="1.0"?>\n<repomd xmlns="http://linux.duke.edu/metadata/repo"><data type="primary"><checksum type="sha256">%064d</checksum><location href="repodata/primary.xml.gz"/></data></repomd>\n' 0 >"$work/repomd.xml"
seed rpm_repomd "$work/repomd.xml"
printf '<?xml version="1.0"?>\n<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="1"><package type="rpm"><name>runc</name><arch>x86_64</arch><version epoch="0" ver="1.1.4" rel="1.el9"/><checksum type="sha256">%064d</checksum><location href="Packages/runc.rpm"/><format><rpm:provides><rpm:entry name="runc" flags="EQ" epoch="0" ver="1.1.4" rel="1.el9"/></rpm:provides><rpm:requires><rpm:entry name="(libseccomp if kernel)"/></rpm:requires></format></package></metadata>\n' 0 >"$work/primary.xml"
seed rpm_primary "$work/primary.xml"

echo "building the fuzz targets (nightly, libFuzzer, optimised)" >&2
(cd fuzz && cargo +nightly fuzz build -O)

failed=()
printf '%-16s %10s %10s %12s %10s\n' TARGET SECONDS RUNS RUNS/S PEAK-MiB
for target in "${targets[@]}"; do
    log="$work/$target.log"
    if (cd fuzz && cargo +nightly fuzz run -O "$target" "$work/corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
        -print_final_stats=1) >"$log" 2>&1; then
        outcome=""
    else
        outcome="FAILED"
        failed+=("$target")
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    peak=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
    printf '%-16s %10s %10s %12s %10s %s\n' "$target" "$seconds" "${runs:--}" "${speed:--}" "${peak:--}" "$outcome"
    if [ -n "$outcome" ]; then
        grep -E 'ERROR|panicked|Test unit written|timeout|out-of-memory' "$log" | head -n 10 >&2 || true
    fi
done
if ((${#failed[@]})); then
    echo "fuzzing found problems in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "every target ran clean for ${seconds}s"
