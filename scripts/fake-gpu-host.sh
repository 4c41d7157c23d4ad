#!/bin/sh
# Builds a fake GPU host at OUTDIR from NVIDIA's real 535.x user-space
# packages in Debian's non-free archive (downloaded, never installed):
#   OUTDIR/driver   the unpacked driver files, with their own etc/ld.so.cache
#   OUTDIR/dev      char nodes nvidiactl, nvidia0, nvidia1, nvidia-uvm, ...
#   OUTDIR/proc     driver/nvidia/{version,params,registry,gpus/*/information}
# Use it with: gpurun --driver-root OUTDIR/driver --dev-root OUTDIR --proc-root OUTDIR/proc
# Usage: scripts/fake-gpu-host.sh OUTDIR [GPUS]   (GPUS default 2; root for mknod)
set -eu
out=${1:?usage: fake-gpu-host.sh OUTDIR [GPUS]}
gpus=${2:-2}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cache=${GPURUN_DEB_CACHE:-/var/cache/gpurun-fake-host}
packages="nvidia-smi libnvidia-ml1 libcuda1 libnvidia-cfg1 libnvidia-ptxjitcompiler1 \
  libcudadebugger1 libnvidia-allocator1 nvidia-cuda-mps libnvidia-encode1 libnvidia-nvvm4"

# A private sources list with non-free: nothing is added to the system's.
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$cache/debs"
cat > "$apt_dir/sources.list" <<LIST
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security non-free
LIST
apt_opts="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists=$apt_dir/lists -o Dir::Cache=$apt_dir/cache -o APT::Sandbox::User=root"
have_all=1
for p in $packages; do ls "$cache/debs/${p}_"*.deb >/dev/null 2>&1 || have_all=0; done
if [ "$have_all" = 0 ]; then
  apt-get $apt_opts update -qq
  (cd "$cache/debs" && apt-get $apt_opts download $packages >/dev/null)
fi

rm -rf "$out/driver" "$out/dev" "$out/proc"
mkdir -p "$out/driver" "$out/dev" "$out/proc/driver/nvidia/gpus"
for p in $packages; do
  deb=$(ls "$cache/debs/${p}_"*.deb | sort | tail -1)
  dpkg-deb -x "$deb" "$out/driver"
done
rm -rf "$out/driver/usr/share"
version=$(ls "$out/driver/usr/lib/x86_64-linux-gnu/nvidia/current/" | sed -n "s/^libnvidia-ml\\.so\\.\\([0-9]*\\.[0-9.]*\\)\$/\\1/p" | head -1)
[ -n "$version" ] || { echo "fake-gpu-host.sh: no libnvidia-ml.so.<version> in the packages" >&2; exit 1; }

# The driver root's own linker cache, as a real host's would list the libs.
mkdir -p "$out/driver/etc"
echo /usr/lib/x86_64-linux-gnu/nvidia/current > "$out/driver/etc/ld.so.conf"
ldconfig -r "$out/driver" -X 2>/dev/null || ldconfig -r "$out/driver"

# Device nodes: 195 is the NVIDIA major; nvidia-uvm's is dynamic on a real
# host (read from /proc/devices), 511 here.
uvm_major=511
mknod -m 666 "$out/dev/nvidiactl" c 195 255
mknod -m 666 "$out/dev/nvidia-modeset" c 195 254
mknod -m 666 "$out/dev/nvidia-uvm" c $uvm_major 0
mknod -m 666 "$out/dev/nvidia-uvm-tools" c $uvm_major 1
printf 'Character devices:\n195 nvidia-frontend\n%s nvidia-uvm\n' $uvm_major > "$out/proc/devices"

cat > "$out/proc/driver/nvidia/version" <<V
NVRM version: NVIDIA UNIX x86_64 Kernel Module  $version  Tue Jan  7 00:00:00 UTC 2025
GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)
V
printf 'ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 0\nDeviceFileMode: 438\n' \
  > "$out/proc/driver/nvidia/params"
: > "$out/proc/driver/nvidia/registry"
i=0
while [ "$i" -lt "$gpus" ]; do
  mknod -m 666 "$out/dev/nvidia$i" c 195 $i
  bus=$(printf '0000:%02x:00.0' $((0x1a + i)))
  mkdir -p "$out/proc/driver/nvidia/gpus/$bus"
  cat > "$out/proc/driver/nvidia/gpus/$bus/information" <<I
Model: 		 NVIDIA H100 80GB HBM3
IRQ:   		 $((100 + i))
GPU UUID: 	 GPU-$(printf '%08x' $((0x5a1e0000 + i)))-0000-4000-8000-$(printf '%012x' $((0xfa4e + i)))
Video BIOS: 	 96.00.99.00.01
Bus Type: 	 PCIe
DMA Size: 	 52 bits
DMA Mask: 	 0xfffffffffffff
Bus Location: 	 $bus
Device Minor: 	 $i
GPU Excluded:	 No
I
  i=$((i + 1))
done
echo "fake GPU host with $gpus GPUs, driver $version, at $out"
