#!/bin/sh
# The GPU library's unit tests built for aarch64 and run under qemu-user
# (Debian unstable's qemu-aarch64, which has openat2), in the cross root
# (scripts/fixtures/cross-root.sh): there Platform::native() is aarch64's,
# so the linker-cache flags, library directories and ELF machine checks
# are the Arm ones; the fake driver trees' libraries are compiled for
# aarch64 (GPURUN_TEST_CC).
#   sh scripts/ci/test-aarch64.sh [CARGO TEST ARGS...]   (as root)
set -eu
cd "$(dirname "$0")/../.."
cache=${GPURUN_CROSS_ROOT:-/var/cache/gpurun-cross}
for p in qemu-user-static binfmt-support; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null
done
sh scripts/fixtures/cross-root.sh build >/dev/null
# The release build's own link and target directory (scripts/release-build.sh),
# and profile (link-check), so the arm64 build of check-release.sh in the
# test command has built most of it.
sh scripts/fixtures/cross-root.sh enter env \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS=-Clink-arg=-Wl,--allow-shlib-undefined \
  CARGO_HOME="$cache/cargo-home" CARGO_TARGET_DIR="$PWD/target/release-2.28" \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64 GPURUN_TEST_CC=aarch64-linux-gnu-gcc \
  LIBBPF_SYS_EXTRA_CFLAGS="-idirafter /usr/include" \
  PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_PATH_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig \
  cargo-zigbuild test --locked --no-fail-fast --profile link-check --target aarch64-unknown-linux-gnu.2.28 \
  -p gpurun-gpu -p safe-fs --lib -- "$@"
