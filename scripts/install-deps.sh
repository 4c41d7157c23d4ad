#!/bin/sh
# Installs every system package gpurun's build, tests and demo need, from
# Debian. Idempotent; run as root. The Rust toolchain (cargo >= 1.85) must
# already be on PATH. With --build, only what building gpurun, its package,
# a fake GPU host and a glibc rootfs need (the README's quick start); the
# release build's own toolchain is a root of its own
# (scripts/fixtures/cross-root.sh).
set -eu
build="build-essential pkg-config libseccomp-dev libelf-dev zlib1g-dev busybox-static ca-certificates curl \
  mmdebstrap dpkg-dev file binutils-aarch64-linux-gnu rpm"
packages="build-essential pkg-config libseccomp-dev libelf-dev zlib1g-dev \
  busybox-static runc crun linux-perf uidmap jq strace time python3 python3-pip ca-certificates zstd \
  slurmd slurmctld slurm-client munge umoci skopeo protobuf-compiler \
  containerd docker.io podman conmon fuse-overlayfs slirp4netns \
  docker-registry apache2-utils openssl curl docker-compose lxc procps util-linux \
  mmdebstrap lintian dpkg-dev binutils patchelf file \
  binutils-aarch64-linux-gnu rpm rpmlint qemu-user-static binfmt-support musl-tools squashfs-tools siftool squashfuse fuse-overlayfs libpmix-dev libopenmpi-dev"
[ "${1:-}" = --build ] && packages=$build
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps.sh: missing packages:$missing; run this script as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $missing >/dev/null
fi
command -v cargo >/dev/null || { echo "install-deps.sh: cargo not found: install Rust 1.85 or newer" >&2; exit 1; }
