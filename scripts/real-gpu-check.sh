#!/bin/sh
# On a machine with a real NVIDIA GPU and its driver: builds gpurun and a
# small glibc image, and checks the GPU features end to end against the
# host itself. Prints one line per check and "N passed, M failed"; exits 1
# if any failed. The tests never need a GPU; this is for when one is at
# hand (put its output in docs/real-gpu.md).
#
#   nvidia-smi -L in a container equals the host's; a CUDA driver-API
#   program JIT-compiles PTX and checks its results; capability filtering;
#   none and void; selection by UUID; EGL loads NVIDIA's vendor library
#   (graphics); gpu verify and doctor agree; rootless; 32 containers, 8 at
#   a time; a user namespace started by root; CDI with NVIDIA's spec
#   form; a CUDA container checkpointed and restored through the driver's
#   checkpoint API (driver 570 or later, CRIU 4); nothing left behind; the
#   image unchanged.
#
# With --timing it also times, interleaved: `run` of `true` and the engine
# path (create, start, state, kill, delete) against crun and runc 1.1 (and
# today's runc with GPURUN_RUNC_CURRENT), one GPU against runc with the same
# mounts plus an ldconfig hook, and checkpoint and restore of 1 GiB of
# device memory (scripts/bench/checkpoint.sh); then where a start waits
# (scripts/bench/offcpu.sh, `run` and the engine path). A host with no
# package source gets perf, strace, crun and both runcs from
# scripts/bench/kit.sh.
#
# Usage (root): sh scripts/real-gpu-check.sh [--timing] [GPURUN]
#   (GPURUN_DEBS=DIR: libegl1 and libglvnd0 .debs where apt cannot fetch;
#    GPURUN_CRIU=PATH: CRIU 4, else scripts/fixtures/criu.sh's)
set -u
timing=0
if [ "${1:-}" = "--timing" ]; then timing=1; shift; fi
cd "$(dirname "$0")/.."
repo=$PWD
if [ "$(id -u)" != 0 ]; then echo "real-gpu-check.sh: run as root" >&2; exit 2; fi
if [ ! -e /proc/driver/nvidia/version ] || ! command -v nvidia-smi >/dev/null; then
  echo "real-gpu-check.sh: no NVIDIA driver on this host (/proc/driver/nvidia/version, nvidia-smi)" >&2
  exit 2
fi
gpurun=${1:-}
if [ -z "$gpurun" ]; then
  cargo build --locked --release -p gpurun >&2 || exit 2
  gpurun=$repo/target/release/gpurun
fi
work=$(mktemp -d /tmp/gpurun-real-gpu.XXXXXX)
chmod 755 "$work"
state="$work/state"
trap 'for c in $("$gpurun" --root "$state" list -q 2>/dev/null); do "$gpurun" --root "$state" delete --force "$c"; done; rm -rf "$work"' EXIT
passed=0
failed=0
check() {   # NAME OK(0/1) DETAIL
  if [ "$2" = 0 ]; then
    passed=$((passed + 1)); echo "ok    $1"
  else
    failed=$((failed + 1)); echo "FAIL  $1: $3"
  fi
}

# The image: the host's glibc, busybox, the probes, glvnd's EGL loader, in
# this machine's multiarch directory (x86_64 or aarch64).
rootfs="$work/rootfs"
triplet=$(uname -m)-linux-gnu
sh scripts/fixtures/glibc-rootfs.sh "$rootfs" >/dev/null 2>&1 || { echo "glibc-rootfs.sh failed" >&2; exit 2; }
cc -O2 -o "$rootfs/usr/bin/cuda_vector_add" tests/fixtures/cuda_vector_add.c -ldl
cc -O2 -o "$rootfs/usr/bin/egl_probe" tests/fixtures/egl_probe.c -ldl
cc -O2 -o "$rootfs/usr/bin/cuda_worker" tests/fixtures/cuda_worker.c -ldl
mkdir -p "$work/debs"
# GPURUN_DEBS: a directory holding libegl1's and libglvnd0's .deb, for a
# machine that reaches no package source.
[ -n "${GPURUN_DEBS:-}" ] && cp "$GPURUN_DEBS"/*.deb "$work/debs/"
if ls "$work"/debs/*.deb >/dev/null 2>&1 \
  || (cd "$work/debs" && apt-get -o APT::Sandbox::User=root download libegl1 libglvnd0 >/dev/null 2>&1); then
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$rootfs"; done
  ldconfig -r "$rootfs"
fi
chmod -R a+rX "$work"
fingerprint() { (cd "$rootfs" && find . -printf '%p %y %m %U %G %s %T@ %l\n' | sort | md5sum); }
image_before=$(fingerprint)
# CUDA's JIT cache off: a program's own writes to its writable rootfs
# ($HOME/.nv/ComputeCache) are not gpurun's (seen on an H200).
run() {   # GPURUN-ARGS... -- CMD
  "$gpurun" --root "$state" run --rootfs "$rootfs" -e CUDA_CACHE_DISABLE=1 "$@"
}

# 1. nvidia-smi -L: the container sees what the host sees.
host_list=$(nvidia-smi -L 2>&1)
in_list=$(run --gpus all -- nvidia-smi -L 2>&1)
[ "$host_list" = "$in_list" ]; check "nvidia-smi -L in a container equals the host's" $? "host: $host_list / container: $in_list"

# 2. CUDA through the driver API, PTX JIT-compiled, results checked.
out=$(run --gpus 0 -- cuda_vector_add 2>&1)
case "$out" in "vector add OK on 1 GPU(s)") r=0 ;; *) r=1 ;; esac
check "CUDA driver API: PTX vector add on GPU 0" $r "$out"

# 3. Capability filtering.
out=$(run --gpus 0 --gpu-capabilities utility -- sh -c "ls /usr/lib/$triplet/libcuda.so.1 2>/dev/null; nvidia-smi -L >/dev/null 2>&1; echo smi=\$?" 2>&1)
[ "$out" = "smi=0" ]; check "utility only: nvidia-smi, no libcuda" $? "$out"
out=$(run --gpus 0 --gpu-capabilities compute -- sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?; cuda_vector_add' 2>&1)
case "$out" in "smi=127
vector add OK on 1 GPU(s)") r=0 ;; *) r=1 ;; esac
check "compute only: CUDA, no nvidia-smi" $r "$out"

# 4. none (the driver, no GPU) and void (nothing).
out=$(run --gpus none -- sh -c 'ls /dev/nvidia[0-9]* 2>/dev/null; nvidia-smi -L >/dev/null 2>&1; echo smi=$?' 2>&1)
case "$out" in smi=127|smi=12|"") r=1 ;; smi=*) r=0 ;; *) r=1 ;; esac
check "NVIDIA_VISIBLE_DEVICES=none: driver files, no GPU node" $r "$out"
out=$(run --gpus void -- sh -c 'ls /dev/nvidia* 2>/dev/null; nvidia-smi >/dev/null 2>&1; echo smi=$?' 2>&1)
[ "$out" = "smi=127" ]; check "NVIDIA_VISIBLE_DEVICES=void: nothing injected" $? "$out"

# 5. Selection by UUID.
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
out=$(run --gpus "$uuid" -- nvidia-smi --query-gpu=uuid --format=csv,noheader 2>&1)
[ "$out" = "$uuid" ]; check "selection by UUID ($uuid)" $? "$out"

# 6. Graphics: glvnd loads NVIDIA's EGL vendor library.
if [ -e "$rootfs/usr/lib/$triplet/libEGL.so.1" ]; then
  out=$(run --gpus 0 --gpu-capabilities graphics,utility -- sh -c 'LD_DEBUG=libs egl_probe 2>&1 | grep -c "calling init: .*libEGL_nvidia.so.0"; egl_probe' 2>&1)
  case "$out" in 1*EGL_VENDOR=NVIDIA*) r=0 ;; *) r=1 ;; esac
  check "graphics: EGL loads libEGL_nvidia and says EGL_VENDOR = NVIDIA" $r "$out"
else
  check "graphics: EGL (libegl1 could not be downloaded)" 1 "no libEGL.so.1 in the image"
fi

# 7. gpu verify and doctor agree with run.
out=$("$gpurun" --root "$state" gpu verify --gpus all 2>&1)
case "$out" in *"verdict:    OK"*) r=0 ;; *) r=1 ;; esac
check "gpu verify --gpus all" $r "$out"
out=$("$gpurun" --root "$state" doctor --gpu 2>&1)
case "$out" in *"GPU container: would run with the GPUs"*) r=0 ;; *) r=1 ;; esac
check "doctor --gpu says a GPU container runs" $r "$out"

# 8. Rootless, as an unprivileged user with subordinate ids.
sh scripts/fixtures/test-user.sh >/dev/null 2>&1
user=gpurun-test
if id "$user" >/dev/null 2>&1; then
  uid=$(id -u "$user")
  xdg="$work/xdg-$uid"; mkdir -p "$xdg"; chown "$user" "$xdg"; chmod 700 "$xdg"
  out=$(su "$user" -s /bin/sh -c "XDG_RUNTIME_DIR=$xdg $gpurun run --rootfs $rootfs -e CUDA_CACHE_DISABLE=1 --gpus 0 -- cuda_vector_add" 2>&1)
  case "$out" in "vector add OK on 1 GPU(s)") r=0 ;; *) r=1 ;; esac
  check "rootless: CUDA vector add as $user" $r "$out"
else
  check "rootless" 1 "no test user"
fi

# 9. 32 containers, 8 at a time.
i=0; fails=0
while [ $i -lt 32 ]; do
  j=0
  while [ $j -lt 8 ]; do
    (run --gpus all -- cuda_vector_add >"$work/c$i-$j.out" 2>&1; echo $? >"$work/c$i-$j.rc") &
    j=$((j + 1))
  done
  wait
  i=$((i + 8))
done
for rc in "$work"/c*.rc; do [ "$(cat "$rc")" = 0 ] || fails=$((fails + 1)); done
[ "$fails" = 0 ]; check "32 GPU containers, 8 at a time" $? "$fails failed: $(cat "$work"/c*.out | sort | uniq -c)"

# 11. A user namespace started by root (Kubernetes hostUsers: false, Docker
# userns-remap): root maps to 100000, the image is owned by it, the nodes
# are bind-mounted.
bundle="$work/userns"
mkdir -p "$bundle"
cp -a "$rootfs" "$bundle/rootfs"
chown -R 100000:100000 "$bundle/rootfs"
(cd "$bundle" && "$gpurun" spec)
mkdir -p "$work/volume"
touch "$work/volume/f"
python3 - "$bundle/config.json" "$work/volume" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
config["process"]["terminal"] = False
config["process"]["env"] += ["NVIDIA_VISIBLE_DEVICES=0", "CUDA_CACHE_DISABLE=1"]
config["root"] = {"path": "rootfs", "readonly": False}
config["linux"]["namespaces"].append({"type": "user"})
mapping = [{"containerID": 0, "hostID": 100000, "size": 65536}]
config["linux"]["uidMappings"] = mapping
config["linux"]["gidMappings"] = mapping
# A volume as containerd 2.x gives a hostUsers: false pod: idmapped with
# the pod's mapping, so the host root's files are the container root's.
config["mounts"].append({"destination": "/data", "type": "bind", "source": sys.argv[2],
                         "options": ["rbind", "rprivate", "rw"],
                         "uidMappings": mapping, "gidMappings": mapping})
config["process"]["args"] = ["sh", "-c", "id -u; stat -c %u:%g /data/f; cuda_vector_add"]
json.dump(config, open(path, "w"))
PY
out=$("$gpurun" --root "$state" run --bundle "$bundle" real-gpu-userns 2>&1)
case "$out" in "0
0:0
vector add OK on 1 GPU(s)") r=0 ;; *) r=1 ;; esac
check "user namespace started by root (0 -> 100000), an idmapped volume: CUDA vector add" $r "$out"

# 12. CDI: NVIDIA's spec form (nvidia-cdi-hook hooks, not installed here),
# its hooks done by gpurun itself.
cdi_spec=/var/run/cdi/gpurun-real-gpu-check.json
mkdir -p /var/run/cdi
"$gpurun" gpu cdi --hook-program nvidia-cdi-hook -o "$cdi_spec"
out=$(run --gpus nvidia.com/gpu=0 -- sh -c 'ls /dev/nvidia[0-9]*; nvidia-smi -L | wc -l; cuda_vector_add' 2>&1)
rm -f "$cdi_spec"
case "$out" in "/dev/nvidia0
1
vector add OK on 1 GPU(s)") r=0 ;; *) r=1 ;; esac
check "CDI nvidia.com/gpu=0 (NVIDIA's spec form, hooks native): GPU 0 only, CUDA" $r "$out"

# 13. Checkpoint and restore of a CUDA container: a worker keeps 64 MiB of
# device memory holding a pattern and logs a round of GPU work every
# 250 ms to a host directory. checkpoint stops the log; restore under
# another id continues it, the pattern intact and the new work right.
# The rootfs is an overlay mount, as engines give.
checkpoint_check() {
  criu=${GPURUN_CRIU:-$(sh scripts/fixtures/criu.sh --gpu 2>/dev/null)}
  if [ -z "$criu" ]; then
    check "GPU checkpoint and restore" 1 "no CRIU 4 (scripts/fixtures/criu.sh failed; set GPURUN_CRIU)"
    return
  fi
  ck="$work/ckpt"
  mkdir -p "$ck/rootfs" "$ck/upper" "$ck/work" "$ck/log"
  mount -t overlay overlay -o "lowerdir=$rootfs,upperdir=$ck/upper,workdir=$ck/work" "$ck/rootfs"
  (cd "$ck" && "$gpurun" spec)
  python3 - "$ck/config.json" "$ck/log" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["terminal"] = False
c["process"]["args"] = ["cuda_worker", "64", "250", "/log/w"]
c["process"]["env"] += ["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                        "CUDA_CACHE_DISABLE=1"]
c["root"] = {"path": "rootfs", "readonly": False}
c["mounts"].append({"destination": "/log", "type": "bind", "source": sys.argv[2], "options": ["rbind", "rw"]})
json.dump(c, open(sys.argv[1], "w"))
PY
  ticks() { n=$(grep -c '^tick' "$ck/log/w" 2>/dev/null); echo "${n:-0}"; }
  wait_ticks() { for _ in $(seq 1 80); do [ "$(ticks)" -ge "$1" ] && return 0; sleep 0.25; done; return 1; }
  g() { "$gpurun" --root "$state" --criu "$criu" "$@"; }
  g run -d --bundle "$ck" ckpt-a </dev/null >/dev/null 2>&1
  wait_ticks 3; check "GPU checkpoint: the CUDA worker works" $? "$(tail -2 "$ck/log/w" 2>&1)"
  t=$(date +%s%N)
  out=$(g --debug checkpoint --image-path "$ck/images" ckpt-a 2>&1)
  r=$?; ms=$(( ($(date +%s%N) - t) / 1000000 ))
  check "gpurun checkpoint of a CUDA container ($ms ms, $(du -sm "$ck/images" 2>/dev/null | cut -f1) MiB of images)" $r "$out"
  echo "$out" | grep -E 'CUDA|CRIU' | sed 's/^/      /'
  at=$(ticks); sleep 1
  [ "$(ticks)" = "$at" ]; check "the worker stopped at its checkpoint" $? "$(ticks) rounds, $at at the checkpoint"
  t=$(date +%s%N)
  out=$(g --debug restore -d --image-path "$ck/images" --bundle "$ck" ckpt-b 2>&1)
  r=$?; ms=$(( ($(date +%s%N) - t) / 1000000 ))
  check "gpurun restore under another id ($ms ms)" $r "$out"
  echo "$out" | grep -E 'CUDA|CRIU' | sed 's/^/      /'
  wait_ticks $((at + 3)); check "the restored worker works on" $? "$(tail -2 "$ck/log/w")"
  bad=$(grep '^tick' "$ck/log/w" | grep -cv 'pattern ok work ok$')
  starts=$(grep -c '^started' "$ck/log/w")
  [ "$bad" = 0 ] && [ "$starts" = 1 ]
  check "device memory kept its pattern, new GPU work right, never restarted" $? "$bad bad rounds, $starts starts: $(grep -v 'pattern ok' "$ck/log/w" | head -3)"
  g delete --force ckpt-b >/dev/null 2>&1
  umount "$ck/rootfs"
}
checkpoint_check

# 10. Nothing left behind, and the image unchanged.
left=$(ls "$state" 2>/dev/null | grep -cv '^@driver-cache$')
cgroups=$(find /sys/fs/cgroup -maxdepth 3 -path '*gpurun*' -type d 2>/dev/null | wc -l)
[ "$left" = 0 ] && [ "$cgroups" -le 1 ]; check "nothing left (state dirs, cgroups)" $? "$left state entries, $cgroups cgroup dirs"
[ "$(fingerprint)" = "$image_before" ]; check "the image is unchanged" $? "the rootfs changed"

if [ $timing = 1 ]; then
  echo
  echo "== timing"
  GPURUN_BIN=$gpurun sh scripts/bench/run.sh 100
  GPURUN_BIN=$gpurun GPURUN_REAL_DRIVER=1 sh scripts/bench/gpu.sh 100
  GPURUN_BIN=$gpurun sh scripts/bench/checkpoint.sh 1024 3
  GPURUN_BIN=$gpurun sh scripts/bench/offcpu.sh 40
  GPURUN_BIN=$gpurun sh scripts/bench/offcpu.sh --engine 40
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
