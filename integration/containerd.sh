#!/bin/sh
# containerd 1.6 end to end: a private containerd (its own root, state and
# socket) whose config.toml is made by `gpurun setup containerd`, with
# local images only. `ctr run --runc-binary gpurun` for the task API, and
# the CRI plugin with runtime handler "gpurun" (from that config) through
# integration/cri-client, the path a Kubernetes node takes.
# Usage: integration/containerd.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
. integration/lib/common.sh
suite_start containerd.sh "${1:-}"
trap 'stop_engines; rm -rf "$work"' EXIT INT TERM
make_fixtures

sock="$work/containerd.sock"
write_containerd_config "$work/root" "$work/state"
setup_out=$("$gpurun" setup containerd --config "$work/config.toml" --binary "$gpurun")
check_contains "setup containerd prints the RuntimeClass" "handler: gpurun" "$setup_out"
again=$("$gpurun" setup containerd --config "$work/config.toml" --binary "$gpurun" | head -1)
check_contains "setup containerd is idempotent" "nothing to change" "$again"
check "setup containerd keeps the other settings" 1 \
  "$(grep -c 'restrict_oom_score_adj = true' "$work/config.toml")"

# gpurun finds the fake GPU host through its config file: the engine
# passes its environment on to the shim and the runtime, and so its PATH,
# where checkpoint and restore find criu.
criu_bin=$(criu_bin_dir)
GPURUN_CONFIG="$work/gpurun.toml" PATH="$criu_bin:$PATH" containerd --config "$work/config.toml" > "$work/containerd.log" 2>&1 &
pids="$!"
ctr() { command ctr -a "$sock" -n gpurun "$@"; }
wait_for ctr version || { echo "containerd did not start"; tail "$work/containerd.log"; exit 1; }
for image in busybox glibc pause; do
  ctr image import "$work/$image.tar" >/dev/null
  command ctr -a "$sock" -n k8s.io image import "$work/$image.tar" >/dev/null
done
bb=docker.io/gpurun-test/busybox:latest
glibc=docker.io/gpurun-test/glibc:latest
runc_root=/run/containerd/runc/gpurun
set +e

ctr run --rm --runc-binary "$gpurun" "$bb" t-true true
check "ctr run true exits 0" 0 "$?"
ctr run --rm --runc-binary "$gpurun" "$bb" t-seven sh -c 'exit 7'
check "ctr run 'exit 7' exits 7" 7 "$?"
check "ctr run --rm leaves nothing in gpurun's state dir" "" "$(state_left "$runc_root")"

ctr run -d --runc-binary "$gpurun" "$bb" t-bg sleep 1000 >/dev/null
out=$(ctr task exec --exec-id e1 t-bg sh -c 'echo exec works')
check "ctr task exec" "exec works" "$out"
check "ctr task ps lists the init" 1 "$(ctr task ps t-bg | tail -n +2 | grep -c .)"
ctr task pause t-bg
check "ctr task pause" PAUSED "$(ctr task ls | awk '$1 == "t-bg" {print $3}')"
ctr task resume t-bg
check "ctr task resume" RUNNING "$(ctr task ls | awk '$1 == "t-bg" {print $3}')"
ctr task kill -s SIGKILL t-bg
wait_for sh -c "command ctr -a $sock -n gpurun task ls | grep -q 't-bg.*STOPPED'"
check "ctr task kill" STOPPED "$(ctr task ls | awk '$1 == "t-bg" {print $3}')"
ctr task rm t-bg >/dev/null
ctr container rm t-bg
check "task and container removed, nothing left" "" "$(state_left "$runc_root")"

out=$(ctr run --rm --runc-binary "$gpurun" --env NVIDIA_VISIBLE_DEVICES=0 "$glibc" t-gpu \
  sh -c 'ls /dev/nvidia[0-9]*; nvidia-smi >/dev/null 2>&1; echo smi=$?; cuda_probe | tail -1' 2>&1)
check_contains "GPU 0: only /dev/nvidia0" "/dev/nvidia0
smi=9" "$out"
check_contains "GPU 0: cudaGetDeviceCount returns 100" "cudaGetDeviceCount=100" "$(echo "$out" | tail -1)"

out=$(ctr run --rm --runc-binary "$gpurun" --env NVIDIA_VISIBLE_DEVICES=9 "$glibc" t-bad true 2>&1)
check "a bad GPU request fails the run" 1 "$?"
check_contains "ctr shows gpurun's one-line reason" 'NVIDIA_VISIBLE_DEVICES: no GPU "9"' "$out"
check "the failed create leaves nothing behind" "" "$(state_left "$runc_root")"

# Checkpoint and restore through containerd's task API: containerd pauses
# the task before it checkpoints it, and go-runc restores with Go-style
# flags (-no-subreaper).
count_of() { ctr task exec --exec-id "c$(date +%s%N)" "$1" cat /tmp/count 2>/dev/null; }
ctr run -d --null-io --runc-binary "$gpurun" "$bb" t-ckpt sh -c "$counter"
count_reaches 10 count_of t-ckpt
check "the task counts to 10" 0 "$?"
ctr task checkpoint --image-path "$work/ckpt-images" t-ckpt
check "ctr task checkpoint: exit 0" 0 "$?"
check "the images are CRIU's" yes "$([ -s "$work/ckpt-images/inventory.img" ] && echo yes)"
check "the task runs on after a checkpoint" RUNNING "$(ctr task ls | awk '$1 == "t-ckpt" {print $3}')"
# Read before the checkpoint: the restored count can only be higher; a
# restarted process would start again from 1.
at_checkpoint=$(count_of t-ckpt)
ctr container checkpoint --task --rw t-ckpt gpurun-test/ckpt:1 >/dev/null
check "ctr container checkpoint --task --rw: exit 0" 0 "$?"
ctr task kill -s SIGKILL t-ckpt
wait_for sh -c "command ctr -a $sock -n gpurun task ls | grep -q 't-ckpt.*STOPPED'"
ctr task rm t-ckpt >/dev/null
ctr container rm t-ckpt
ctr container restore --live --rw t-restored gpurun-test/ckpt:1
check "ctr container restore --live: exit 0" 0 "$?"
at_restore=$(count_of t-restored)
check "the restored process counts on, not from 1" yes \
  "$([ "${at_restore:-0}" -ge "${at_checkpoint:-1}" ] && echo yes)"
check "the restored task is running" RUNNING "$(ctr task ls | awk '$1 == "t-restored" {print $3}')"
ctr task checkpoint --exit --image-path "$work/ckpt-exit" t-restored
check "ctr task checkpoint --exit: exit 0" 0 "$?"
check "the task is stopped after checkpoint --exit" STOPPED \
  "$(ctr task ls | awk '$1 == "t-restored" {print $3}')"
ctr task rm t-restored >/dev/null 2>&1
ctr container rm t-restored
check "checkpoint and restore leave nothing" "" "$(state_left "$runc_root")"
check "no CRIU root left mounted" 0 "$(grep -c criu-root /proc/self/mountinfo)"

# A GPU container the same way: a CUDA worker (8 MiB of device memory, a
# round of GPU work every 100 ms, logged to the host) on the host whose
# driver has the checkpoint API. ctr pauses it, gpurun saves its CUDA
# state through the driver and gives it back; restored, it goes on.
mkdir -p "$work/cuda-log"
ctr run -d --null-io --runc-binary "$work/gpurun-checkpoint" --env NVIDIA_VISIBLE_DEVICES=0 \
  --env NVIDIA_DRIVER_CAPABILITIES=compute,utility \
  --mount "type=bind,src=$work/cuda-log,dst=/log,options=rbind:rw" \
  "$glibc" t-cuda cuda_worker 8 100 /log/ctr
ticks_reach 3 "$work/cuda-log/ctr"
check "the CUDA worker works" 0 "$?"
ctr task checkpoint --image-path "$work/cuda-images" t-cuda
check "ctr task checkpoint of a GPU task: exit 0" 0 "$?"
check "the images record the driver and GPU" yes \
  "$(grep -q '"uuid":"GPU-5a1e0000' "$work/cuda-images/gpurun-gpu.json" && echo yes)"
at=$(ticks "$work/cuda-log/ctr")
ticks_reach $((at + 3)) "$work/cuda-log/ctr"
check "the GPU task works on after its checkpoint" 0 "$?"
ctr container checkpoint --task --rw t-cuda gpurun-test/cuda-ckpt:1 >/dev/null
check "ctr container checkpoint --task of a GPU task: exit 0" 0 "$?"
ctr task kill -s SIGKILL t-cuda
wait_for sh -c "command ctr -a $sock -n gpurun task ls | grep -q 't-cuda.*STOPPED'"
ctr task rm t-cuda >/dev/null
ctr container rm t-cuda
at=$(ticks "$work/cuda-log/ctr")
ctr container restore --live --rw t-cuda-r gpurun-test/cuda-ckpt:1
check "ctr container restore --live of a GPU task: exit 0" 0 "$?"
ticks_reach $((at + 3)) "$work/cuda-log/ctr"
check "the restored CUDA worker works on" 0 "$?"
check "its device memory kept the pattern, and it never restarted" yes "$(worker_ok "$work/cuda-log/ctr")"
ctr task kill -s SIGKILL t-cuda-r
wait_for sh -c "command ctr -a $sock -n gpurun task ls | grep -q 't-cuda-r.*STOPPED'"
ctr task rm t-cuda-r >/dev/null 2>&1
ctr container rm t-cuda-r
check "GPU checkpoint and restore leave nothing" "" "$(state_left "$runc_root")"

# The CRI path: a host-network pod with runtime_handler "gpurun".
cri=target/debug/cri-client
if [ -x "$cri" ]; then
  # containerd's default runtime root for CRI, which a host's own
  # containerd shares: only what this suite leaves counts.
  cri_state_before=$(state_left /run/containerd/runc/k8s.io || true)
  out=$(RUST_BACKTRACE=0 "$cri" "$sock" gpurun "$glibc" "$work/pod-logs" \
    'ls /dev/nvidia[0-9]*; nvidia-smi >/dev/null 2>&1; echo smi=$?; exit 3' NVIDIA_VISIBLE_DEVICES=0 2>&1)
  check_contains "CRI: the container's exit code is read back" "exit_code=3" "$out"
  check_contains "CRI: the GPU was injected (nvidia-smi exits 9)" "smi=9" "$out"
  check_contains "CRI: the pod was removed" "pod removed" "$out"
  check "CRI: nothing left in gpurun's state dir" "" "$(state_new /run/containerd/runc/k8s.io "$cri_state_before")"

  # A shared node: only the device plugin's allocation counts. gpurun reads
  # its config at each create, so containerd needs no restart.
  mt=$("$gpurun" setup containerd --config "$work/config.toml" --binary "$gpurun" \
    --multi-tenant --gpurun-config "$work/gpurun.toml")
  check_contains "setup containerd --multi-tenant writes gpurun's config" "wrote the multi-tenant settings" "$mt"
  probe='for n in /dev/nvidia[0-9]*; do [ -c "$n" ] && echo "node=$n"; done; nvidia-smi >/dev/null 2>&1; echo smi=$?'
  out=$(CRI_CLIENT_DEVICE_MOUNTS=1 RUST_BACKTRACE=0 "$cri" "$sock" gpurun "$glibc" "$work/pod-logs-mt1" \
    "$probe" NVIDIA_VISIBLE_DEVICES=all 2>&1)
  check "CRI, multi-tenant: env 'all' with GPU 1 allocated by volume mount gets GPU 1 only" \
    "node=/dev/nvidia1 smi=9" "$(printf '%s\n' "$out" | grep -E '^(node|smi)=' | tr '\n' ' ' | sed 's/ $//')"
  out=$(RUST_BACKTRACE=0 "$cri" "$sock" gpurun "$glibc" "$work/pod-logs-mt2" \
    "$probe" NVIDIA_VISIBLE_DEVICES=all 2>&1)
  check "CRI, multi-tenant: env 'all' with nothing allocated gets no GPU" \
    "smi=127" "$(printf '%s\n' "$out" | grep -E '^(node|smi)=' | tr '\n' ' ' | sed 's/ $//')"
  check "CRI, multi-tenant: nothing left in gpurun's state dir" "" "$(state_new /run/containerd/runc/k8s.io "$cri_state_before")"
else
  check "CRI client built (cargo build -p cri-client)" built missing
fi

summary containerd
