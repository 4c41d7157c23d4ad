#!/bin/sh
# Everything the GPU tests and the demo need, under OUTDIR:
#   OUTDIR/host          a fake GPU host (scripts/fake-gpu-host.sh), 2 GPUs
#   OUTDIR/cudart/       libcudart.so.12 from PyPI's nvidia-cuda-runtime-cu12
#   OUTDIR/cuda_probe    calls cudaGetDeviceCount, exits with its result
#   OUTDIR/cuda_vector_add  a PTX vector add through the CUDA driver API
#   OUTDIR/cuda_worker   keeps a pattern in device memory and works every
#                        interval, logging each round (checkpoint tests)
#   OUTDIR/host-checkpoint  the fake host with a driver that has the
#                        checkpoint API: its libcuda.so.VERSION is the
#                        stand-in tests/fixtures/fake_cuda.c, not NVIDIA's
#   OUTDIR/glvnd/        Debian's libglvnd EGL loader (libegl1, libglvnd0),
#                        unpacked, for images that use EGL
#   OUTDIR/egl_probe     asks glvnd for the default EGL display
#   OUTDIR/compat/CASE/  an image's CUDA forward-compatibility directory
#                        (libcuda.so.VERSION and its libcuda.so.1 link; a
#                        stand-in library, not NVIDIA's), for the fake
#                        host's 535: note-listed (575, a
#                        .note.cuda.fwd_compatibility listing branch 535),
#                        note-unlisted (575, branches 550-575),
#                        plain-newer (575, no note), plain-older (530)
# Downloads are cached in /var/cache/gpurun-fake-host.
# Usage: scripts/gpu-fixtures.sh OUTDIR
set -eu
out=${1:?usage: gpu-fixtures.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
sh "$here/fake-gpu-host.sh" "$out/host" 2 >/dev/null
cache=${GPURUN_DEB_CACHE:-/var/cache/gpurun-fake-host}
mkdir -p "$cache/pypi" "$out/cudart"
if ! ls "$cache/pypi/"nvidia_cuda_runtime_cu12-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 nvidia-cuda-runtime-cu12==12.2.140 -d "$cache/pypi"
fi
python3 - "$cache/pypi" "$out/cudart" <<'PY'
import glob, sys, zipfile
wheel = sorted(glob.glob(sys.argv[1] + "/nvidia_cuda_runtime_cu12-*.whl"))[-1]
with zipfile.ZipFile(wheel) as z:
    name = [n for n in z.namelist() if n.endswith("/libcudart.so.12")][0]
    open(sys.argv[2] + "/libcudart.so.12", "wb").write(z.read(name))
PY
cc -O2 -o "$out/cuda_probe" "$here/../tests/fixtures/cuda_probe.c" -ldl
cc -O2 -o "$out/egl_probe" "$here/../tests/fixtures/egl_probe.c" -ldl
cc -O2 -o "$out/cuda_vector_add" "$here/../tests/fixtures/cuda_vector_add.c" -ldl
cc -O2 -o "$out/cuda_worker" "$here/../tests/fixtures/cuda_worker.c" -ldl
# Hard links but for libcuda, which is removed (not written through: the
# links share the download cache's files) and replaced.
rm -rf "$out/host-checkpoint"
cp -al "$out/host" "$out/host-checkpoint"
cc -O2 -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$out/fake_cuda.so" \
  "$here/../tests/fixtures/fake_cuda.c" -lpthread
find "$out/host-checkpoint/driver" -type f -name 'libcuda.so.*' | while read -r lib; do
  rm "$lib" && cp "$out/fake_cuda.so" "$lib"
done
sed "s#$out/host#$out/host-checkpoint#g" "$out/host/flags" > "$out/host-checkpoint/flags.new"
mv "$out/host-checkpoint/flags.new" "$out/host-checkpoint/flags"
# glvnd from Debian main, downloaded (not installed) once.
mkdir -p "$cache/main-debs" "$out/glvnd"
if ! ls "$cache/main-debs/"libegl1_*.deb "$cache/main-debs/"libglvnd0_*.deb >/dev/null 2>&1; then
  (cd "$cache/main-debs" && apt-get -o APT::Sandbox::User=root download libegl1 libglvnd0 >/dev/null)
fi
for deb in "$cache/main-debs/"*.deb; do dpkg-deb -x "$deb" "$out/glvnd"; done
rm -rf "$out/glvnd/usr/share"
# CUDA compat libraries: an ELF with SONAME libcuda.so.1 and, for the
# note cases, the NVIDIA note (owner, then JSON) in a 4-aligned section.
compat_lib() { # DIR VERSION [DRIVER_LIST]
  mkdir -p "$1"
  echo 'int gpurun_compat_fixture = 1;' > "$1/fixture.c"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$1/libcuda.so.$2" "$1/fixture.c"
  rm "$1/fixture.c"
  ln -sf "libcuda.so.$2" "$1/libcuda.so.1"
  [ $# -ge 3 ] || return 0
  python3 - "$1/note.bin" "$3" <<'PY'
import json, struct, sys
desc = json.dumps({"Format": 1, "CUDA Version": "12.9", "Driver": json.loads(sys.argv[2]),
                   "Device": [1, 2, 7, 8, 9, 10]}).encode()
name = b"NVIDIA Corporation\0"
pad = b"\0" * (-len(name) % 4)
open(sys.argv[1], "wb").write(struct.pack("<III", len(name), len(desc), 1) + name + pad + desc)
PY
  objcopy --add-section .note.cuda.fwd_compatibility="$1/note.bin" \
    --set-section-flags .note.cuda.fwd_compatibility=readonly "$1/libcuda.so.$2"
  objcopy --set-section-alignment .note.cuda.fwd_compatibility=4 "$1/libcuda.so.$2"
  rm "$1/note.bin"
}
compat_lib "$out/compat/note-listed" 575.57.08 '[535, 550, 570, 575]'
compat_lib "$out/compat/note-unlisted" 575.57.08 '[550, 570, 575]'
compat_lib "$out/compat/plain-newer" 575.57.08
compat_lib "$out/compat/plain-older" 530.30.02
chmod -R a+rX "$out"
