#!/bin/sh
# Docker 20.10 (Debian's docker.io) end to end: a private dockerd (its own
# data root, exec root, socket; no iptables, no bridge) whose daemon.json
# gets its runtime from `gpurun setup docker`, which also links
# nvidia-container-runtime-hook to gpurun so that dockerd accepts --gpus.
# Local images only (docker load).
# Usage: integration/docker.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
. integration/lib/common.sh
suite_start docker.sh "${1:-}"
trap 'stop_engines; rm -rf "$work"' EXIT INT TERM
make_fixtures

sock="$work/docker.sock"
write_daemon_json
mkdir -p "$work/hooks"
setup_out=$("$gpurun" setup docker --config "$work/daemon.json" --binary "$gpurun" --hook-dir "$work/hooks")
check_contains "setup docker registers the runtime" "registered runtime \"gpurun\"" "$setup_out"
check "setup docker keeps the other settings" "$work/data" "$(jq -r '."data-root"' "$work/daemon.json")"
check "setup docker links the hook name to gpurun" "$gpurun" "$(readlink "$work/hooks/nvidia-container-runtime-hook")"
check "setup docker writes a backup" 1 "$(ls "$work"/daemon.json.*.bak | grep -c .)"
again=$("$gpurun" setup docker --config "$work/daemon.json" --binary "$gpurun" --hook-dir "$work/hooks" | head -1)
check_contains "setup docker is idempotent" "nothing to change" "$again"

# dockerd accepts --gpus only if it finds the hook's name on its PATH;
# checkpoint finds criu there too (docker checkpoint is experimental in
# 20.10).
criu_bin=$(criu_bin_dir)
# A second runtime name for the GPU checkpoint: gpurun on the host whose
# driver has the checkpoint API.
jq --arg path "$work/gpurun-checkpoint" '.runtimes["gpurun-checkpoint"] = {path: $path}' \
  "$work/daemon.json" > "$work/daemon-ckpt.json" && mv "$work/daemon-ckpt.json" "$work/daemon.json"
docker() { /usr/bin/docker -H "unix://$sock" "$@"; }
start_dockerd "$work/daemon.json" "$work/dockerd.log" "$work/hooks:$criu_bin" --experimental ||
  { echo "dockerd did not start"; tail "$work/dockerd.log"; exit 1; }
load_images
bb=gpurun-test/busybox
glibc=gpurun-test/glibc
state="$work/exec/runtime-runc/moby"
set +e

docker run --rm --runtime=gpurun "$bb" true
check "docker run true exits 0" 0 "$?"
docker run --rm --runtime=gpurun "$bb" sh -c 'exit 7'
check "docker run 'exit 7' exits 7" 7 "$?"

nodes='ls /dev/nvidia[0-9]* | tr "\n" " "; nvidia-smi >/dev/null 2>&1; echo smi=$?'
out=$(docker run --rm --runtime=gpurun --gpus device=0 "$glibc" sh -c "$nodes" 2>&1)
check "--gpus device=0: GPU 0 only, nvidia-smi exits 9" "/dev/nvidia0 smi=9" "$out"
out=$(docker run --rm --runtime=gpurun --gpus all "$glibc" sh -c "$nodes" 2>&1)
check "--gpus all: both GPUs, nvidia-smi exits 9" "/dev/nvidia0 /dev/nvidia1 smi=9" "$out"
out=$(docker run --rm --runtime=gpurun --gpus '"capabilities=utility"' "$glibc" sh -c \
  'ls /usr/lib/x86_64-linux-gnu/libcuda.so* 2>/dev/null | wc -l; cuda_probe | tail -1' 2>&1)
check "--gpus capabilities=utility: no libcuda (cudaGetDeviceCount 35)" "0
cudaGetDeviceCount=35 devices=0" "$out"

out=$(docker run --rm --runtime=gpurun -e NVIDIA_VISIBLE_DEVICES=9 "$glibc" true 2>&1)
check "a bad GPU request fails the run" 125 "$?"
check_contains "docker shows gpurun's one-line reason" 'NVIDIA_VISIBLE_DEVICES: no GPU "9"' "$out"

id=$(docker run -d --runtime=gpurun --name upd "$bb" sleep 1000)
tab=$(printf '\t')
check "the container runs under Docker's seccomp profile" "Seccomp:${tab}2" "$(docker exec upd grep Seccomp: /proc/1/status)"
check "and so does docker exec" "Seccomp:${tab}2" "$(docker exec upd grep Seccomp: /proc/self/status)"
check "docker exec -u 1000 runs as that user" "uid=1000 gid=0(root) groups=0(root)" "$(docker exec -u 1000 upd id)"
docker update --memory 64m --memory-swap 128m upd >/dev/null
check "docker update --memory" 0 "$?"
limit=$(cat "/sys/fs/cgroup/memory/docker/$id/memory.limit_in_bytes" 2>/dev/null \
  || cat "/sys/fs/cgroup/docker/$id/memory.max" 2>/dev/null)
check "the new limit is in the container's cgroup" 67108864 "$limit"
docker stop -t 1 upd >/dev/null
check "docker stop" exited "$(docker inspect -f '{{.State.Status}}' upd)"
docker rm upd >/dev/null
check "docker rm" 0 "$?"
docker inspect upd >/dev/null 2>&1
check "docker rm removed it" 1 "$?"
check "nothing left in gpurun's state dir" "" "$(state_left "$state")"

# docker checkpoint create: the container's stdio are dockerd's pipes.
# (Docker 20.10's `docker start --checkpoint` fails on this containerd with
# runc as well: "failed to upload checkpoint to containerd: ... already
# exists", moby/moby#42900; restore is tested through containerd.sh. The
# same bug fails, at times, a second checkpoint of one container, whose
# spec blob the first already stored: each checkpoint here takes a
# container of its own.)
loop='i=0; while true; do i=$((i+1)); echo "line $i"; sleep 0.1; done'
id=$(docker run -d --runtime=gpurun --name ckpt "$bb" sh -c "$loop")
docker checkpoint create --leave-running ckpt c1 >/dev/null
check "docker checkpoint create --leave-running: exit 0" 0 "$?"
check "the checkpoint is CRIU's images" yes \
  "$([ -s "$work/data/containers/$id/checkpoints/c1/inventory.img" ] && echo yes)"
check "the container runs on" running "$(docker inspect -f '{{.State.Status}}' ckpt)"
docker run -d --runtime=gpurun --name ckpt2 "$bb" sh -c "$loop" >/dev/null
docker checkpoint create ckpt2 c2 >/dev/null
check "docker checkpoint create: exit 0" 0 "$?"
check "the container stopped at its checkpoint" exited "$(docker inspect -f '{{.State.Status}}' ckpt2)"
docker rm -f ckpt ckpt2 >/dev/null
check "nothing left after the checkpoints" "" "$(state_left "$state")"
# A GPU container: a CUDA worker (a pattern in device memory, GPU work
# every 100 ms, logged to the host), its CUDA state saved through the
# driver and given back (--leave-running).
mkdir -p "$work/cuda-log"
docker run -d --runtime=gpurun-checkpoint --name cuda-ckpt -e NVIDIA_VISIBLE_DEVICES=0 \
  -e NVIDIA_DRIVER_CAPABILITIES=compute,utility -v "$work/cuda-log:/log" \
  "$glibc" cuda_worker 8 100 /log/docker >/dev/null
ticks_reach 3 "$work/cuda-log/docker"
check "the CUDA worker works" 0 "$?"
id=$(docker inspect -f '{{.Id}}' cuda-ckpt)
docker checkpoint create --leave-running cuda-ckpt g1 >/dev/null
check "docker checkpoint create of a GPU container: exit 0" 0 "$?"
check "the checkpoint records the driver and GPU" yes \
  "$(grep -q '"uuid":"GPU-5a1e0000' "$work/data/containers/$id/checkpoints/g1/gpurun-gpu.json" && echo yes)"
at=$(ticks "$work/cuda-log/docker")
ticks_reach $((at + 3)) "$work/cuda-log/docker"
check "the GPU container works on after its checkpoint" 0 "$?"
check "its device memory kept the pattern" yes "$(worker_ok "$work/cuda-log/docker")"
docker rm -f cuda-ckpt >/dev/null
check "nothing left after the GPU checkpoint" "" "$(state_left "$work/exec/runtime-gpurun-checkpoint/moby")"

# Docker's userns-remap, a user namespace started by root: a second
# daemon on the same config plus "userns-remap": "default" (dockerd makes
# the dockremap user and its subordinate ranges), plain and with --gpus.
stop_engines
jq '. + {"userns-remap": "default"}' "$work/daemon.json" > "$work/daemon-remap.json"
# The remapped root must reach its graph root below ours (dockerd says so).
chmod o+x "$work" "$work/data"
if start_dockerd "$work/daemon-remap.json" "$work/dockerd-remap.log" "$work/hooks"; then
  load_images
  check_userns_remap userns-remap
  out=$(docker run --rm --runtime=gpurun --gpus device=0 "$glibc" sh -c \
    'ldconfig -p | grep -c "libcuda.so.1 "; cuda_probe | tail -1' 2>&1)
  check "userns-remap --gpus: libcuda in the linker cache, cudaGetDeviceCount 100" "1
cudaGetDeviceCount=100 devices=0" "$out"
  check "userns-remap: nothing left in gpurun's state dir" "" "$(state_left "$state")"
else
  check "userns-remap: dockerd starts" started "$(tail -3 "$work/dockerd-remap.log")"
fi

# Beside an installed NVIDIA Container Toolkit: setup makes no hook link
# that could shadow the toolkit's, so --gpus under runc reaches the
# toolkit's hook (a stand-in that records its call), and under gpurun the
# hook is dropped and the GPU injected natively.
stop_engines
mkdir -p "$work/toolkit-bin"
printf '#!/bin/sh\necho "$@" >> %s/toolkit-hook-ran\n' "$work" > "$work/toolkit-bin/nvidia-container-runtime-hook"
chmod 755 "$work/toolkit-bin/nvidia-container-runtime-hook"
rm -f "$work/hooks/nvidia-container-runtime-hook"
out=$(PATH="$work/toolkit-bin:$PATH" "$gpurun" setup docker --config "$work/daemon.json" --binary "$gpurun" --hook-dir "$work/hooks" 2>&1)
check_contains "setup docker beside the toolkit makes no link" "no link made beside it" "$out"
check "setup docker beside the toolkit: no hook link" "" "$(ls "$work/hooks")"
if start_dockerd "$work/daemon.json" "$work/dockerd-toolkit.log" "$work/hooks:$work/toolkit-bin"; then
  docker run --rm --runtime=runc --gpus all "$bb" true
  check "beside the toolkit: --gpus under runc exits 0" 0 "$?"
  check "beside the toolkit: --gpus under runc ran the toolkit's hook" "prestart" "$(cat "$work/toolkit-hook-ran" 2>/dev/null)"
  rm -f "$work/toolkit-hook-ran"
  out=$(docker run --rm --runtime=gpurun --gpus device=0 "$glibc" sh -c "$nodes" 2>&1)
  check "beside the toolkit: --gpus under gpurun is native, GPU 0" "/dev/nvidia0 smi=9" "$out"
  check "beside the toolkit: gpurun did not run the toolkit's hook" "" "$(cat "$work/toolkit-hook-ran" 2>/dev/null)"
else
  check "beside the toolkit: dockerd starts" started "$(tail -3 "$work/dockerd-toolkit.log")"
fi

summary docker
