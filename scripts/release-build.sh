#!/bin/sh
# Builds the release binary that packages carry, for amd64 or arm64,
# linked against glibc 2.28's symbols (cargo-zigbuild with zig), so that it
# starts on RHEL 8 and 9, Ubuntu 22.04 and 24.04 and Debian 11 to 13. Both
# are built in the cross root (scripts/fixtures/cross-root.sh: Debian
# unstable's rustc with both standard libraries); nothing is installed on
# the host. Prints the binary's path.
#   sh scripts/release-build.sh [--arch amd64|arm64]   (default: this host's)
#   GPURUN_RELEASE_PROFILE=dev builds the same way without optimisation
#   (the package checks' quicker build: the same glibc calls, since a
#   release build only drops code).
# The C libraries linked dynamically (libelf, for libbpf) are the target
# system's at run time: their own glibc needs are not the binary's, so the
# link allows their undefined symbols (--allow-shlib-undefined).
set -eu
cd "$(dirname "$0")/.."
arch=$(dpkg --print-architecture)
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    *) echo "release-build.sh: error: unknown argument $1: use --arch amd64|arm64" >&2; exit 2 ;;
  esac
done
# aarch64 kernels run 4K, 16K or 64K pages (Grace hosts 64K): segments
# aligned for the largest load on each.
case "$arch" in
  amd64) triple=x86_64-unknown-linux-gnu; multiarch=x86_64-linux-gnu; link="" ;;
  arm64) triple=aarch64-unknown-linux-gnu; multiarch=aarch64-linux-gnu; link="-C link-arg=-Wl,-z,max-page-size=65536" ;;
  *) echo "release-build.sh: error: no build for $arch: use --arch amd64 or arm64" >&2; exit 2 ;;
esac
glibc=2.28
profile=${GPURUN_RELEASE_PROFILE:-release}
out_dir=$profile
[ "$profile" = dev ] && out_dir=debug
cache=${GPURUN_CROSS_ROOT:-/var/cache/gpurun-cross}
sh scripts/fixtures/cross-root.sh build >/dev/null
# shellcheck disable=SC2016
sh scripts/fixtures/cross-root.sh enter env \
  CARGO_HOME="$cache/cargo-home" CARGO_TARGET_DIR="$PWD/target/release-$glibc" \
  RUSTFLAGS="-L native=/usr/lib/$multiarch -C link-arg=-Wl,--allow-shlib-undefined $link" \
  LIBBPF_SYS_EXTRA_CFLAGS="-idirafter /usr/include" \
  PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_PATH="/usr/lib/$multiarch/pkgconfig" \
  cargo zigbuild --locked --profile "$profile" -p gpurun --target "$triple.$glibc" >&2
echo "target/release-$glibc/$triple/$out_dir/gpurun"
