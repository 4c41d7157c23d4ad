#!/bin/sh
# Builds a fake GPU host at OUTDIR from NVIDIA's real 535.x user-space
# packages in Debian's non-free archive (downloaded, never installed), laid
# out as one of the driver layouts real hosts have:
#   debian            libraries in /usr/lib/x86_64-linux-gnu/nvidia/current
#                     (and the multiarch dir), nvidia-smi in
#                     /usr/lib/nvidia/current with a /usr/bin symlink
#   ubuntu            everything in /usr/lib/x86_64-linux-gnu and /usr/bin
#   rhel              libraries in /usr/lib64, programs in /usr/bin
#   usr-local-nvidia  the cloud layout of the recorded H100 host (docs/real-gpu.md): the driver
#                     in /usr/local/nvidia/{lib64,bin,share,firmware}, soname
#                     links in /lib that are absolute symlinks into it, and
#                     shell-script wrappers in /usr/bin
#   gpu-operator      a driver container's root at /run/nvidia/driver
#                     (Ubuntu layout inside), nothing of the driver on the host
# and a kernel module whose /proc/driver/nvidia/version has the wording of
# the open (default for data-center GPUs since 560) or the proprietary one.
#
#   OUTDIR/driver     the host's "/" (driver files, its own etc/ld.so.cache)
#   OUTDIR/dev        char nodes nvidiactl, nvidia0.., nvidia-uvm, dri/...,
#                     nvidia-caps-imex-channels/channel{0,1}, and the gated
#                     nvidia-fs0, infiniband/{uverbs0,rdma_cm}, gdrdrv,
#                     nvidia-nvswitchctl, nvidia-nvswitch0
#   OUTDIR/sys        bus/pci/devices/<bus>/drm/{cardN,renderDN}
#   OUTDIR/proc       driver/nvidia/{version,params,registry,gpus/*/information},
#                     devices (with the IMEX channels' major)
#   OUTDIR/flags      the gpurun flags for this host, one line
# Use it with: gpurun $(cat OUTDIR/flags) ...
# Usage: scripts/fake-gpu-host.sh [--layout L] [--kernel-module open|proprietary] OUTDIR [GPUS]
#        (GPUS default 2; root for mknod)
set -eu
layout=debian
module=proprietary
while [ $# -gt 0 ]; do
  case "$1" in
    --layout) layout=${2:?--layout needs a value}; shift 2 ;;
    --kernel-module) module=${2:?--kernel-module needs a value}; shift 2 ;;
    --) shift; break ;;
    -*) echo "fake-gpu-host.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
case "$layout" in debian|ubuntu|rhel|usr-local-nvidia|gpu-operator) ;;
  *) echo "fake-gpu-host.sh: --layout is debian, ubuntu, rhel, usr-local-nvidia or gpu-operator" >&2; exit 2 ;;
esac
case "$module" in open|proprietary) ;;
  *) echo "fake-gpu-host.sh: --kernel-module is open or proprietary" >&2; exit 2 ;;
esac
out=${1:?usage: fake-gpu-host.sh [--layout L] [--kernel-module M] OUTDIR [GPUS]}
gpus=${2:-2}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cache=${GPURUN_DEB_CACHE:-/var/cache/gpurun-fake-host}
packages="nvidia-smi libnvidia-ml1 libcuda1 libnvidia-cfg1 libnvidia-ptxjitcompiler1 \
  libcudadebugger1 libnvidia-allocator1 nvidia-cuda-mps libnvidia-encode1 libnvidia-nvvm4 \
  libnvcuvid1 libnvidia-opticalflow1 \
  libegl-nvidia0 libnvidia-eglcore libglx-nvidia0 libnvidia-glcore libgles-nvidia2 \
  nvidia-egl-common nvidia-vulkan-common"

# A private sources list with non-free, on the system's own mirrors:
# nothing is added to the system's.
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$cache/debs"
mirror=$(sh "$(dirname "$0")/debian-mirror.sh")
security=$(sh "$(dirname "$0")/debian-mirror.sh" security 2>/dev/null || true)
{
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm non-free"
  [ -z "$security" ] ||
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $security bookworm-security non-free"
} > "$apt_dir/sources.list"
apt_opts="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists=$apt_dir/lists -o Dir::Cache=$apt_dir/cache -o APT::Sandbox::User=root"
missing=""
for p in $packages; do ls "$cache/debs/${p}_"*.deb >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  apt-get $apt_opts update -qq
  (cd "$cache/debs" && apt-get $apt_opts download $missing >/dev/null)
fi

# The packages unpacked once (Debian's own layout); every layout is made of
# hard links into it, so a host costs no copy of the driver.
unpacked="$cache/unpacked"
stamp=$(for p in $packages; do ls "$cache/debs/${p}_"*.deb | sort | tail -1; done | md5sum | cut -c1-12)
if [ ! -f "$unpacked/.stamp-$stamp" ]; then
  rm -rf "$unpacked"
  mkdir -p "$unpacked.tmp"
  for p in $packages; do
    dpkg-deb -x "$(ls "$cache/debs/${p}_"*.deb | sort | tail -1)" "$unpacked.tmp"
  done
  rm -rf "$unpacked.tmp/usr/share/doc" "$unpacked.tmp/usr/share/man" "$unpacked.tmp/usr/share/bug" \
    "$unpacked.tmp/usr/share/lintian" "$unpacked.tmp/var"
  find "$unpacked.tmp" -name '*.gz' -delete
  touch "$unpacked.tmp/.stamp-$stamp"
  mv "$unpacked.tmp" "$unpacked"
fi
deb_lib="$unpacked/usr/lib/x86_64-linux-gnu/nvidia/current"
version=$(ls "$deb_lib" | sed -n 's/^libnvidia-ml\.so\.\([0-9]*\.[0-9.]*\)$/\1/p' | head -1)
[ -n "$version" ] || { echo "fake-gpu-host.sh: no libnvidia-ml.so.<version> in the packages" >&2; exit 1; }

rm -rf "$out/driver" "$out/dev" "$out/sys" "$out/proc" "$out/flags"
mkdir -p "$out/driver" "$out/dev" "$out/proc/driver/nvidia/gpus"

# A root with merged /usr, as current distributions have.
merged_usr() {
  mkdir -p "$1/usr/lib" "$1/usr/bin" "$1/usr/sbin" "$1/usr/lib64" "$1/etc"
  ln -s usr/lib "$1/lib"; ln -s usr/bin "$1/bin"; ln -s usr/sbin "$1/sbin"; ln -s usr/lib64 "$1/lib64"
}

# Files from the unpacked packages are hard links where the host is on the
# same filesystem as the cache, copies where not (a VM's fresh /tmp).
if [ "$(stat -c %d "$unpacked")" = "$(stat -c %d "$out")" ]; then
  link_file="ln"; copy_tree="cp -al"
else
  link_file="cp -p"; copy_tree="cp -a"
fi

# Every versioned driver library (file name ends in the driver version).
versioned_libs() {
  find "$unpacked/usr/lib" -type f -name "lib*.so.$version"
}

# Puts every library into DIR as a hard link, with its SONAME link and a
# plain .so development link, as NVIDIA's installer does.
flat_libs() {
  dir=$1
  mkdir -p "$dir"
  for f in $(versioned_libs); do
    name=$(basename "$f")
    $link_file "$f" "$dir/$name"
    soname=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    if [ -n "$soname" ] && [ "$soname" != "$name" ]; then
      ln -s "$name" "$dir/$soname"
      ln -sf "$soname" "$dir/${name%%.so.*}.so"
    else
      ln -sf "$name" "$dir/${name%%.so.*}.so"
    fi
  done
}

programs="nvidia-smi nvidia-cuda-mps-control nvidia-cuda-mps-server"
program_file() {
  case "$1" in
    nvidia-smi) echo "$unpacked/usr/lib/nvidia/current/nvidia-smi" ;;
    nvidia-cuda-mps-control) echo "$unpacked/usr/bin/nvidia-cuda-mps-control" ;;
    nvidia-cuda-mps-server) echo "$unpacked/usr/sbin/nvidia-cuda-mps-server" ;;
  esac
}

vendor_files() {   # DEST_SHARE_DIR
  mkdir -p "$1"
  cp -a "$unpacked/usr/share/glvnd" "$unpacked/usr/share/vulkan" "$1/"
}

firmware() {   # DIR
  mkdir -p "$1/$version"
  printf 'fake GSP firmware\n' > "$1/$version/gsp_ga10x.bin"
  printf 'fake GSP firmware\n' > "$1/$version/gsp_tu10x.bin"
}

# The distribution layouts: ROOT gets the driver as that distribution
# installs it, and a linker cache.
ubuntu_root() {
  r=$1
  merged_usr "$r"
  flat_libs "$r/usr/lib/x86_64-linux-gnu"
  for p in $programs; do $link_file "$(program_file "$p")" "$r/usr/bin/$p"; done
  vendor_files "$r/usr/share"
  firmware "$r/usr/lib/firmware/nvidia"
  echo /usr/lib/x86_64-linux-gnu > "$r/etc/ld.so.conf"
}

root="$out/driver"
driver_root="$root"
case "$layout" in
  debian)
    mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/etc"
    $copy_tree "$unpacked/usr" "$root/"
    ln -sf /usr/lib/nvidia/current/nvidia-smi "$root/usr/bin/nvidia-smi"
    printf '/usr/lib/x86_64-linux-gnu/nvidia/current\n/usr/lib/x86_64-linux-gnu\n' > "$root/etc/ld.so.conf"
    ;;
  ubuntu)
    ubuntu_root "$root"
    ;;
  rhel)
    merged_usr "$root"
    flat_libs "$root/usr/lib64"
    for p in $programs; do $link_file "$(program_file "$p")" "$root/usr/bin/$p"; done
    vendor_files "$root/usr/share"
    firmware "$root/usr/lib/firmware/nvidia"
    echo /usr/lib64 > "$root/etc/ld.so.conf"
    ;;
  usr-local-nvidia)
    merged_usr "$root"
    nv="$root/usr/local/nvidia"
    flat_libs "$nv/lib64"
    ln -s lib64 "$nv/lib"
    mkdir -p "$nv/bin"
    for p in $programs; do
      $link_file "$(program_file "$p")" "$nv/bin/$p"
      # The wrapper on the PATH, as on the recorded host.
      cat > "$root/usr/bin/$p" <<WRAP
#!/bin/sh
export LD_LIBRARY_PATH="\${LD_LIBRARY_PATH:+\$LD_LIBRARY_PATH:}/usr/local/nvidia/lib:/usr/local/nvidia/lib64"
exec /usr/local/nvidia/bin/$p "\$@"
WRAP
      chmod 755 "$root/usr/bin/$p"
    done
    vendor_files "$nv/share"
    firmware "$nv/firmware/nvidia"
    printf 'v%s\n' "$version" > "$nv/version"
    # Soname-level absolute links in /lib, no versioned file outside lib64.
    for link in "$nv"/lib64/*.so "$nv"/lib64/*.so.[0-9]; do
      [ -L "$link" ] || continue
      ln -s "/usr/local/nvidia/lib64/$(basename "$link")" "$root/usr/lib/$(basename "$link")"
    done
    mkdir -p "$root/etc/ld.so.conf.d"
    echo 'include /etc/ld.so.conf.d/*.conf' > "$root/etc/ld.so.conf"
    printf '/usr/local/nvidia/lib64\n/usr/local/nvidia/lib\n' > "$root/etc/ld.so.conf.d/000_nvidia.conf"
    ;;
  gpu-operator)
    merged_usr "$root"
    driver_root="$root/run/nvidia/driver"
    mkdir -p "$driver_root"
    ubuntu_root "$driver_root"
    ldconfig -r "$driver_root" -X 2>/dev/null || ldconfig -r "$driver_root"
    ;;
esac
# The root's own linker cache, as a real host's would list the libraries.
ldconfig -r "$root" -X 2>/dev/null || ldconfig -r "$root"
# The fabric manager's and persistenced's sockets (no daemon listens), which
# libnvidia-container mounts for utility.
for sock in nvidia-fabricmanager nvidia-persistenced; do
  mkdir -p "$driver_root/run/$sock"
  # Bound by its relative name: a fixture's full path can pass AF_UNIX's
  # 108-byte limit.
  (cd "$driver_root/run/$sock" && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("socket")')
done
# GPUDirect Storage's config, which a GDS container gets read-only.
mkdir -p "$driver_root/etc"
printf '{ "logging": { "level": "ERROR" } }\n' > "$driver_root/etc/cufile.json"

# Device nodes: 195 is the NVIDIA major; nvidia-uvm's is dynamic on a real
# host (read from /proc/devices), 511 here; DRM nodes are 226.
uvm_major=511
mknod -m 666 "$out/dev/nvidiactl" c 195 255
mknod -m 666 "$out/dev/nvidia-modeset" c 195 254
mknod -m 666 "$out/dev/nvidia-uvm" c $uvm_major 0
mknod -m 666 "$out/dev/nvidia-uvm-tools" c $uvm_major 1
mkdir -p "$out/dev/dri"
# IMEX channels 0 and 1 (major from /proc/devices, minor the id) and the
# gated devices: GPUDirect Storage, MOFED (uverbs is infiniband's static
# 231), GDRCopy, NVSwitch. The dynamic majors are ones no driver here has,
# so an open that gets through fails with ENXIO.
imex_major=510
mkdir -p "$out/dev/nvidia-caps-imex-channels" "$out/dev/infiniband"
mknod -m 666 "$out/dev/nvidia-caps-imex-channels/channel0" c $imex_major 0
mknod -m 666 "$out/dev/nvidia-caps-imex-channels/channel1" c $imex_major 1
mknod -m 666 "$out/dev/nvidia-fs0" c 509 0
mknod -m 666 "$out/dev/infiniband/uverbs0" c 231 192
mknod -m 666 "$out/dev/infiniband/rdma_cm" c 508 0
mknod -m 666 "$out/dev/gdrdrv" c 507 0
mknod -m 666 "$out/dev/nvidia-nvswitchctl" c 506 255
mknod -m 666 "$out/dev/nvidia-nvswitch0" c 506 0
printf 'Character devices:\n195 nvidia-frontend\n226 drm\n%s nvidia-uvm\n%s nvidia-caps-imex-channels\n' \
  $uvm_major $imex_major > "$out/proc/devices"

if [ "$module" = open ]; then
  nvrm="NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  $version  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Jan  7 00:00:00 UTC 2025"
else
  nvrm="NVRM version: NVIDIA UNIX x86_64 Kernel Module  $version  Tue Jan  7 00:00:00 UTC 2025"
fi
printf '%s\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n' "$nvrm" > "$out/proc/driver/nvidia/version"
printf 'ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 0\nDeviceFileMode: 438\n' \
  > "$out/proc/driver/nvidia/params"
: > "$out/proc/driver/nvidia/registry"
i=0
while [ "$i" -lt "$gpus" ]; do
  mknod -m 666 "$out/dev/nvidia$i" c 195 $i
  bus=$(printf '0000:%02x:00.0' $((0x1a + i)))
  mkdir -p "$out/proc/driver/nvidia/gpus/$bus" "$out/sys/bus/pci/devices/$bus/drm/card$((i + 1))" \
    "$out/sys/bus/pci/devices/$bus/drm/renderD$((128 + i))"
  mknod -m 660 "$out/dev/dri/card$((i + 1))" c 226 $((i + 1))
  mknod -m 666 "$out/dev/dri/renderD$((128 + i))" c 226 $((128 + i))
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
echo "--driver-root $driver_root --dev-root $out --proc-root $out/proc" > "$out/flags"
echo "fake GPU host ($layout layout, $module kernel module) with $gpus GPUs, driver $version, at $out"
