#!/bin/sh
# Packs what the benchmarks and scripts/bench/offcpu.sh need on a host
# with no package source (a real GPU machine) into DIR: Debian 12's perf,
# strace, crun, runc, jq, GNU time and static busybox, and today's runc
# (Debian unstable's, from scripts/fixtures/current-engines.sh's root) as
# runc-current. The shared libraries they need beyond glibc go to DIR/lib,
# where each binary finds them through its RPATH (nothing else on the
# host loads them; Debian 12's libseccomp serves both runcs). The host's
# glibc must be 2.36 or newer, 2.38 for runc-current (Ubuntu 24.04 has
# 2.39). On that host:
#   export PATH=DIR/bin:$PATH GPURUN_RUNC_CURRENT=DIR/bin/runc-current
#   sh scripts/real-gpu-check.sh --timing
# Usage: scripts/bench/kit.sh DIR   (as root)
set -eu
cd "$(dirname "$0")/../.."
[ $# = 1 ] || { echo "usage: kit.sh DIR" >&2; exit 2; }
dir=$1
sh scripts/install-deps.sh
mkdir -p "$dir/bin" "$dir/lib"
# BINARY NAME: the binary as DIR/bin/NAME, looking in DIR/lib first (an
# RPATH, not a RUNPATH: it serves the libraries' own dependencies too).
carry() {
  cp -L "$1" "$dir/bin/$2"
  file -L "$1" | grep -q 'dynamically linked' || return 0
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$dir/bin/$2"
}
# BINARY: the libraries it loads here, glibc's own left out.
libraries() {
  ldd "$1" | awk '$3 ~ /^\// {print $3}' | grep -v -e '/libc\.so' -e '/libm\.so' -e '/ld-linux' \
    | while read -r lib; do cp -L "$lib" "$dir/lib/"; done
}
for tool in perf strace crun runc jq time busybox; do
  carry "$(command -v $tool)" $tool
  libraries "$(command -v $tool)"
done
carry "$(sh scripts/fixtures/current-engines.sh build)/usr/sbin/runc" runc-current
echo "kit: $(ls "$dir/bin" | tr '\n' ' ')in $dir ($(du -sh "$dir" | cut -f1))"
