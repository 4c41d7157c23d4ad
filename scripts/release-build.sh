#!/bin/sh
# Builds the release binary that packages carry, for amd64, arm64 or both,
# linked against glibc 2.28's symbols (cargo-zigbuild with zig), so that it
# starts on RHEL 8 and 9, Ubuntu 22.04 and 24.04 and Debian 11 to 13. Both
# are built in the cross root (scripts/fixtures/cross-root.sh: Debian
# unstable's rustc with both standard libraries); nothing is installed on
# the host. Several architectures are one cargo run (the build scripts
# and proc-macros built once). Prints each binary's path, one a line, in
# the order asked.
#   sh scripts/release-build.sh [--arch amd64|arm64]...   (default: this host's)
#   GPURUN_RELEASE_PROFILE=link-check builds the same way without
#   optimisation or debug info (Cargo.toml: the package checks' quicker
#   build; zig links against 2.28's symbols alone, so it links only if
#   every glibc call is 2.28's, as the release build does).
# .cargo/config.toml gives each target its flags (the multiarch -L, and
# 64K page alignment on aarch64). The C libraries linked dynamically
# (libelf, for libbpf) are the target system's at run time: their own
# glibc needs are not the binary's, so the link allows their undefined
# symbols (--allow-shlib-undefined).
set -eu
cd "$(dirname "$0")/.."
arches=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arches="$arches ${2:?--arch needs amd64 or arm64}"; shift 2 ;;
    *) echo "release-build.sh: error: unknown argument $1: use --arch amd64|arm64" >&2; exit 2 ;;
  esac
done
[ -n "$arches" ] || arches=$(dpkg --print-architecture)
glibc=2.28
profile=${GPURUN_RELEASE_PROFILE:-release}
out_dir=$profile
[ "$profile" = dev ] && out_dir=debug
targets="" flags="" paths=""
for arch in $arches; do
  case "$arch" in
    amd64) triple=x86_64-unknown-linux-gnu ;;
    arm64) triple=aarch64-unknown-linux-gnu ;;
    *) echo "release-build.sh: error: no build for $arch: use --arch amd64 or arm64" >&2; exit 2 ;;
  esac
  targets="$targets --target $triple.$glibc"
  var=CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_RUSTFLAGS
  flags="$flags $var=-Clink-arg=-Wl,--allow-shlib-undefined"
  paths="$paths target/release-$glibc/$triple/$out_dir/gpurun"
done
cache=${GPURUN_CROSS_ROOT:-/var/cache/gpurun-cross}
sh scripts/fixtures/cross-root.sh build >/dev/null
# shellcheck disable=SC2086
sh scripts/fixtures/cross-root.sh enter env $flags \
  CARGO_HOME="$cache/cargo-home" CARGO_TARGET_DIR="$PWD/target/release-$glibc" \
  LIBBPF_SYS_EXTRA_CFLAGS="-idirafter /usr/include" \
  PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_PATH_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig \
  cargo zigbuild --locked --profile "$profile" -p gpurun -p gpurun-spank $targets >&2
for p in $paths; do echo "$p"; done
