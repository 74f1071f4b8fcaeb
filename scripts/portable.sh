#!/usr/bin/env bash
# Builds the node binary that ships: `berth` linked against glibc 2.17, so it starts on every
# system kURL installs on (CentOS/RHEL 7 and newer, Amazon Linux 2, Ubuntu 20.04, Debian 11),
# not only on systems as new as the build host. Prints its path:
#   target/x86_64-unknown-linux-gnu/release/berth
# cargo-zigbuild (from the crate registry) links Rust's own x86_64-unknown-linux-gnu standard
# library with zig (from PyPI's `ziglang`, into .venv-zig/) against glibc 2.17's symbols: no
# other toolchain or sysroot to install, and every crate builds as on the host (ring's C code
# through zig's C compiler; rustls, so no OpenSSL). Both are installed when missing.
# `berth-build serve|bundle|script|upload` ship it by default once it is built (else the `berth`
# beside them, refused unless --allow-new-glibc: it needs the build host's glibc).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
floor=2.17

if [ ! -x .venv-zig/bin/python ] || ! .venv-zig/bin/python -m ziglang version >/dev/null 2>&1; then
    echo "installing: ziglang (PyPI) into .venv-zig" >&2
    [ -x .venv-zig/bin/pip ] || python3 -m venv .venv-zig
    .venv-zig/bin/pip install --quiet --disable-pip-version-check ziglang
fi
command -v cargo-zigbuild >/dev/null 2>&1 || cargo install --locked cargo-zigbuild >&2
# cargo-zigbuild runs zig as `python3 -m ziglang` when no `zig` is on the PATH.
PATH="$PWD/.venv-zig/bin:$PATH" cargo zigbuild --release --locked -p berth --bin berth \
    --target "$target.$floor" >&2
echo "target/$target/release/berth"
