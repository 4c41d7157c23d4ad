#!/bin/sh
# Packs what the benchmarks and scripts/bench/offcpu.sh need on a host
# with no package source (a real GPU machine) into DIR: perf, strace, crun,
# runc, jq, GNU time and static busybox, and for amd64 today's runc
# (Debian unstable's, from scripts/fixtures/current-engines.sh's root) as
# runc-current. The shared libraries they need beyond glibc go to DIR/lib,
# where each binary finds them through its RPATH (nothing else on the
# host loads them; one libseccomp serves both runcs).
#   amd64 (the default): Debian 12's tools; the host's glibc must be 2.36
#     or newer, 2.38 for runc-current (Ubuntu 24.04 has 2.39).
#   --arch arm64: Debian 11's arm64 tools (runc 1.0.0-rc93), installed in a throwaway overlay
#     of scripts/fixtures/debian11-root.sh's root (through qemu-user); the
#     host's glibc must be 2.31 or newer (Ubuntu 22.04 and 24.04, DGX OS,
#     RHEL 9: not RHEL 8); no runc-current.
# On that host:
#   export PATH=DIR/bin:$PATH GPURUN_RUNC_CURRENT=DIR/bin/runc-current
#   sh scripts/real-gpu-check.sh --timing
# Usage: scripts/bench/kit.sh [--arch amd64|arm64] DIR   (as root)
set -eu
cd "$(dirname "$0")/../.."
arch=amd64
[ "${1:-}" = --arch ] && { arch=${2:?--arch needs amd64 or arm64}; shift 2; }
[ $# = 1 ] || { echo "usage: kit.sh [--arch amd64|arm64] DIR" >&2; exit 2; }
case "$arch" in amd64 | arm64) ;; *) echo "kit.sh: --arch is amd64 or arm64" >&2; exit 2 ;; esac
mkdir -p "$1/bin" "$1/lib"
dir=$(cd "$1" && pwd)
tools="perf strace crun runc jq time busybox"
# BINARY NAME: the binary as DIR/bin/NAME, looking in DIR/lib first (an
# RPATH, not a RUNPATH: it serves the libraries' own dependencies too).
carry() {
  cp -L "$1" "$dir/bin/$2"
  file -L "$1" | grep -q 'dynamically linked' || return 0
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$dir/bin/$2"
}
# LDD BINARY: the libraries it loads, glibc's own left out (the host's
# must serve: an older libpthread beside a newer libc does not load), as
# paths below ROOT ($root; / for this machine's).
libraries() {
  $1 "$2" 2>/dev/null | awk '$3 ~ /^\// {print $3}' \
    | grep -v -E '/(libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl)\.so|/ld-linux' \
    | while read -r lib; do cp -L "$root$lib" "$dir/lib/"; done
}

if [ "$arch" = amd64 ]; then
  sh scripts/install-deps.sh
  root=""
  for tool in $tools; do
    carry "$(command -v "$tool")" "$tool"
    libraries ldd "$(command -v "$tool")"
  done
  carry "$(sh scripts/fixtures/current-engines.sh build)/usr/sbin/runc" runc-current
else
  sh scripts/install-deps.sh --build
  command -v patchelf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq patchelf >/dev/null
  base=$(sh scripts/fixtures/debian11-root.sh arm64)
  o=$(mktemp -d)
  mkdir -p "$o/upper" "$o/work" "$o/root"
  mount -t overlay overlay -o "lowerdir=$base,upperdir=$o/upper,workdir=$o/work" "$o/root"
  trap 'umount "$o/root" 2>/dev/null; rm -rf "$o"' EXIT
  cp /etc/resolv.conf "$o/root/etc/resolv.conf" 2>/dev/null || true
  chroot "$o/root" sh -c 'apt-get install -y -qq linux-perf strace crun runc jq time busybox-static >/dev/null 2>&1 ||
    apt-get install -y linux-perf strace crun runc jq time busybox-static' >&2
  root=$o/root
  for tool in $tools; do
    path=$(chroot "$root" sh -c "command -v $tool")
    # Debian 11's /usr/bin/perf is a script that picks perf_<kernel series>.
    [ "$tool" = perf ] && path=$(ls "$root"/usr/bin/perf_[0-9]* | sort -V | tail -1 | sed "s#^$root##")
    carry "$root$path" "$tool"
    libraries "chroot $root ldd" "$path"
  done
fi
echo "kit: $(ls "$dir/bin" | tr '\n' ' ')in $dir ($(du -sh "$dir" | cut -f1))"
