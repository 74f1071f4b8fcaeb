#!/usr/bin/env bash
# Resolution benchmark: Berth's apt closure of `containerd` on Debian 12 against apt's own,
# on the same indices, in one run.
#
# apt: `apt-get install --simulate --no-install-recommends` in an empty root whose sources
# point at the Debian 12 mirror and whose dpkg status lists, as installed, the packages Berth
# takes as present on every host (Essential, Priority: required, and their dependencies), so
# both leave out the same base; an `Inst` line for a package apt counts as installed (it shows
# the installed version in brackets: a reinstall) is not part of apt's closure. Both parse the
# indices on every run (apt's binary cache is turned off). Prints each closure, whether they
# agree, and the time ratio. KEEP=1 keeps the work folder.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
command -v apt-get >/dev/null || { echo "apt-get is needed" >&2; exit 1; }
mirror=${MIRROR:-http://deb.debian.org/debian}
packages=${PACKAGES:-containerd}
runs=${RUNS:-3}
cargo build --release --quiet -p berth-build
berth_build="$PWD/target/release/berth-build"
work=$(mktemp -d /tmp/berth-bench-resolve.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

# Berth: fetch the indices once into its cache, then time resolutions.
export BERTH_CACHE_DIR="$work/cache"
"$berth_build" resolve --distro debian-12 --mirror "debian-12=$mirror" --show-base $packages >"$work/berth.out" 2>/dev/null
sed '/^--$/,$d' "$work/berth.out" | awk '{print $1}' | sort >"$work/berth.closure"
sed '1,/^--$/d' "$work/berth.out" | sort >"$work/base"

# apt: an empty root pointed at the same mirror, the base marked installed.
root="$work/apt"
mkdir -p "$root/etc/apt/apt.conf.d" "$root/etc/apt/preferences.d" "$root/var/lib/apt/lists/partial" \
    "$root/var/lib/dpkg" "$root/var/cache/apt/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main" >"$root/etc/apt/sources.list"
apt_options=(-o "Dir=$root" -o "Dir::State::status=$root/var/lib/dpkg/status" -o APT::Architecture=amd64
    -o Debug::NoLocking=1 -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
touch "$root/var/lib/dpkg/status"
apt-get "${apt_options[@]}" update >/dev/null 2>&1
packages_file=$(ls "$root"/var/lib/apt/lists/*_main_binary-amd64_Packages* | head -n 1)
case "$packages_file" in
    *.lz4) reader=(lz4cat) ;; *.gz) reader=(zcat) ;; *.xz) reader=(xzcat) ;; *) reader=(cat) ;;
esac
"${reader[@]}" "$packages_file" | python3 -c '
import sys
base = set(open(sys.argv[1]).read().split())
for paragraph in sys.stdin.read().split("\n\n"):
    fields = dict(line.split(": ", 1) for line in paragraph.splitlines() if ": " in line and not line.startswith(" "))
    if fields.get("Package") in base:
        keep = [l for l in paragraph.splitlines() if l.split(":", 1)[0] in
                ("Package", "Version", "Architecture", "Essential", "Priority", "Provides", "Depends", "Pre-Depends", "Multi-Arch")]
        print("\n".join(keep[:1] + ["Status: install ok installed"] + keep[1:]) + "\n")
' "$work/base" >"$root/var/lib/dpkg/status"
apt-get "${apt_options[@]}" install --simulate --no-install-recommends $packages 2>/dev/null |
    awk '/^Inst / && $3 !~ /^\[/ {print $2}' | sort >"$work/apt.closure"

berth_times=(); apt_times=()
for _ in $(seq "$runs"); do
    start=$(now)
    "$berth_build" resolve --distro debian-12 --mirror "debian-12=$mirror" $packages >/dev/null 2>&1
    berth_times+=("$(echo "$(now) - $start" | bc)")
    start=$(now)
    apt-get "${apt_options[@]}" install --simulate --no-install-recommends $packages >/dev/null 2>&1
    apt_times+=("$(echo "$(now) - $start" | bc)")
done
berth=$(median "${berth_times[@]}"); apt=$(median "${apt_times[@]}")

echo "base taken as present: $(wc -l <"$work/base") packages"
echo "berth closure of '$packages': $(tr '\n' ' ' <"$work/berth.closure")"
echo "apt closure of '$packages':   $(tr '\n' ' ' <"$work/apt.closure")"
if diff -q "$work/berth.closure" "$work/apt.closure" >/dev/null; then
    echo "closures agree"
else
    echo "closures differ:"; diff "$work/berth.closure" "$work/apt.closure" || true
fi
echo "runs: $runs (median; all: berth ${berth_times[*]} / apt ${apt_times[*]})"
printf '%-48s %8.3f s\n' "berth-build resolve (parse indices + resolve)" "$berth"
printf '%-48s %8.3f s\n' "apt-get install --simulate (no binary cache)" "$apt"
printf 'ratio berth/apt: %.2f\n' "$(echo "$berth / $apt" | bc -l)"
