#!/bin/sh
# Today's engines (Debian unstable: containerd 2.x, Docker 28, Podman 5,
# runc 1.3, crun 1.2x, CRIU 4) in a root of their own, built once into a
# cache and rebuilt when the package list below changes. Nothing is
# installed on the host.
#   sh scripts/current-engines.sh build        prints the root's path
#   sh scripts/current-engines.sh enter CMD... runs CMD inside it
# `enter` gives the root a private mount namespace and pivot_root (not
# chroot: containerd's snapshotters and every runtime's pivot_root break
# under chroot), with the host's /dev, /proc, /sys, /tmp, /var/cache (the
# fixtures' caches) and the gpurun checkout bind-mounted in at the same
# paths, and a fresh /run. The mirror is the system's own (scripts/debian-mirror.sh).
set -eu
cd "$(dirname "$0")/.."
packages="containerd containernetworking-plugins docker.io docker-cli docker-compose podman runc crun criu iproute2 iptables \
  ca-certificates procps util-linux kmod fuse-overlayfs uidmap conmon netavark \
  catatonit jq python3 busybox-static time passwd"
cache=${GPURUN_CURRENT_ENGINES:-/var/cache/gpurun-current-engines}
stamp=$(echo "$packages" | tr -s ' \n' ' ' | md5sum | cut -c1-12)
root="$cache/root-$stamp"

build() {
  [ -f "$root/.complete" ] && { echo "$root"; return; }
  command -v mmdebstrap >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
  }
  mirror=$(sh scripts/debian-mirror.sh)
  rm -rf "$cache"/root-* "$cache/tmp"
  mkdir -p "$cache/tmp"
  # Unstable's Release file can be past its Valid-Until on a late mirror.
  mmdebstrap --quiet --variant=apt --mode=root \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$(echo $packages | tr ' ' ',')" \
    unstable "$cache/tmp" "$mirror" >&2
  mv "$cache/tmp" "$root"
  touch "$root/.complete"
  echo "$root"
}

# The versions, one "name version" line each.
versions() {
  chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' \
    containerd docker.io podman runc crun criu 2>/dev/null
}

enter() {
  build >/dev/null
  here=$PWD
  # The inner shell runs in the new mount namespace; "$@" is the command.
  exec unshare --mount --propagation private sh -euc '
    root=$1; here=$2; shift 2
    mount --bind "$root" "$root"
    for d in dev proc sys tmp var/cache; do
      mkdir -p "$root/$d"; mount --rbind "/$d" "$root/$d"
    done
    mkdir -p "$root$here"
    mount --rbind "$here" "$root$here"
    mount -t tmpfs -o mode=755 tmpfs "$root/run"
    cd "$root"; mkdir -p .old-root
    pivot_root . .old-root
    umount -l /.old-root; rmdir /.old-root
    cd "$here"
    exec env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"
  ' sh "$root" "$here" "$@"
}

case "${1:-}" in
  build) build ;;
  versions) build >/dev/null; versions ;;
  enter) shift; enter "$@" ;;
  *) echo "usage: current-engines.sh build | versions | enter CMD..." >&2; exit 2 ;;
esac
