#!/bin/sh
# The container and GPU tests on Arm: tests/aarch64/suite.sh in aarch64
# guests (scripts/vm.sh --arch arm64: qemu-system-aarch64 under TCG, pure
# cgroup v2, no systemd) whose root is Debian 11's arm64 root
# (scripts/fixtures/debian11-root.sh), with the arm64 release binary, an
# arm64 fake GPU host (NVIDIA's arm64 535 files) and an arm64 glibc image
# holding libcudart and a cudaGetDeviceCount probe, all made here once and
# shared with every guest. One boot per kernel: bookworm's arm64 6.1 (4K
# pages) and unstable's arm64-16k (16K pages). Prints each guest's checks
# and "guest-aarch64: N passed, M failed" (kernels); exits 1 if any failed.
#   sh scripts/ci/guest-aarch64.sh [KERNEL...]   default: 6.1 16k (as root)
set -eu
cd "$(dirname "$0")/../.."
. integration/lib/common.sh # boot_once_more, kernel_lines
[ $# -gt 0 ] || set -- 6.1 16k
limit=${GPURUN_GUEST_TIMEOUT:-900}
say() { echo "guest-aarch64: $*"; }

# The arm64 binary: check-release.sh's build where the test command made it.
binary=target/release-2.28/aarch64-unknown-linux-gnu/link-check/gpurun
[ -x "$binary" ] || binary=$(GPURUN_RELEASE_PROFILE=link-check sh scripts/release-build.sh --arch arm64)
root=$(sh scripts/fixtures/debian11-root.sh arm64)

# What every guest shares, under the checkout (the guests see it at its own
# path): the binary, the fake host, the image.
work=$PWD/target/aarch64-guest
rm -rf "$work"
mkdir -p "$work"
cp "$binary" "$work/gpurun"
sh scripts/fixtures/fake-gpu-host.sh --arch arm64 "$work/host" 2 >/dev/null
sh scripts/fixtures/glibc-rootfs.sh --arch arm64 --from "$root" "$work/image" >/dev/null
# The CUDA runtime for aarch64 and the probe, linked for glibc 2.28 by zig
# in the cross root.
sh scripts/fixtures/cudart.sh arm64 "$work/image/opt/cudart"
sh scripts/fixtures/cross-root.sh enter python3 -m ziglang cc -target aarch64-linux-gnu.2.28 -O2 \
  -o "$work/image/usr/bin/cuda_probe" tests/fixtures/cuda_probe.c -ldl
file -b "$work/image/usr/bin/cuda_probe" | grep -q aarch64 || { say "error: cuda_probe is not aarch64" >&2; exit 1; }
say "shared: $(file -b "$work/gpurun" | cut -d, -f1-2), the fake host, the image"

passed=0
failed=0
guest() {
  sh scripts/vm.sh --arch arm64 --root "$root" --mem 3072 --timeout "$limit" "$kernel" -- \
    sh tests/aarch64/suite.sh "$work" "$pages" > "$log" 2>&1 </dev/null
}
for kernel in "$@"; do
  case "$kernel" in *16k*) pages=16384 ;; *) pages=4096 ;; esac
  log=$(mktemp)
  start=$(date +%s)
  status=0
  boot_log=$log boot_once_more "guest-aarch64: kernel $kernel" guest || status=$?
  grep -a -E '^(ok|FAIL|suite):' "$log" | sed "s/^/  [$kernel] /"
  if [ "$status" = 0 ]; then
    passed=$((passed + 1))
    say "kernel $kernel: passed in $(($(date +%s) - start)) s"
  else
    failed=$((failed + 1))
    say "kernel $kernel: FAILED (status $status) in $(($(date +%s) - start)) s; the guest's last lines:"
    grep -a -v -E '^(ok|FAIL):' "$log" | tail -40 | sed "s/^/  [$kernel] /"
  fi
  rm -f "$log"
done
summary guest-aarch64
