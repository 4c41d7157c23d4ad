#!/bin/sh
# The one command that sets everything up and runs the demo: installs the
# packages, builds gpurun's Debian package and installs it (/usr/bin/gpurun,
# its man pages and completions), builds a fake GPU host from NVIDIA's real 535
# user-space files (or uses the real driver when /proc/driver/nvidia exists),
# checks the host with `gpurun doctor`, and runs a GPU container straight
# from a root filesystem (`run --rootfs`, no config.json) with the numbered
# lifecycle steps (--debug).
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
deb=$(sh scripts/package-deb.sh)
dpkg -i "$deb" >/dev/null
echo "== installed $deb: $(gpurun --version | head -1)"
gpurun=/usr/bin/gpurun
work="${TMPDIR:-/tmp}/gpurun-demo"
rm -rf "$work/bundle" "$work/state"
mkdir -p "$work/bundle"
if [ -d /proc/driver/nvidia/gpus ]; then
  roots=""            # a real GPU host: the defaults find the driver
else
  sh scripts/fixtures/gpu-fixtures.sh "$work/fixtures"
  roots="--driver-root $work/fixtures/host/driver --dev-root $work/fixtures/host --proc-root $work/fixtures/host/proc"
fi
rootfs="$work/bundle/rootfs"
sh scripts/fixtures/glibc-rootfs.sh "$rootfs"
[ -f "$work/fixtures/cuda_probe" ] && cp "$work/fixtures/cuda_probe" "$rootfs/usr/bin/" \
  && mkdir -p "$rootfs/opt/cudart" && cp "$work/fixtures/cudart/libcudart.so.12" "$rootfs/opt/cudart/"
echo "== gpurun gpu info"
$gpurun $roots gpu info
echo
echo "== gpurun doctor"
$gpurun $roots doctor || true
echo
echo "== gpurun --debug run --rootfs DIR --gpus 0 -- CMD (no config.json; no kernel driver on a fake host: nvidia-smi exits 9)"
$gpurun $roots --root "$work/state" --debug run --rootfs "$rootfs" --gpus 0 -- sh -c \
  'echo; echo inside: $(ls /dev/nvidia*); ldconfig -p | grep -E "libnvidia-ml|libcuda\."; nvidia-smi -L; echo nvidia-smi exit code: $?; if command -v cuda_probe >/dev/null; then cuda_probe; fi; true' 2>&1 \
  | awk '!/^gpurun: / || /step [0-9]\/9/ || /gpurun: [^dwi]/'
echo
echo "== gpurun gpu verify --gpus 0"
$gpurun $roots --root "$work/state" gpu verify --gpus 0 || true
