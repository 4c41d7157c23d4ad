#!/bin/sh
# Today's engines end to end: Docker 28, containerd 2.x and Podman 5 from
# Debian unstable (scripts/fixtures/current-engines.sh: a root of their own, entered
# with a private mount namespace and pivot_root), on this host's kernel and
# cgroups, with the fake GPU host and local images made here first.
# Usage: integration/current-engines.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" != --inside ]; then
  gpurun=${1:-$PWD/target/debug/gpurun}
  [ "$(id -u)" = 0 ] || { echo "current-engines.sh: run as root" >&2; exit 1; }
  sh scripts/install-deps.sh
  sh scripts/fixtures/current-engines.sh build >/dev/null
  work=$(mktemp -d /tmp/gpurun-current.XXXXXX)
  trap 'rm -rf "$work"' EXIT INT TERM
  . integration/lib/common.sh
  make_fixtures
  sh scripts/fixtures/current-engines.sh versions | sed 's/^/current-engines: /'
  rc=0
  sh scripts/fixtures/current-engines.sh enter sh integration/current-engines.sh --inside "$gpurun" "$work" || rc=$?
  exit "$rc"
fi

# Inside the unstable root from here on.
gpurun=$2 work=$3
pids="" made_nodes=""
. integration/lib/common.sh
cleanup() {
  stop_engines
  pkill -U gpurun-test -f 'catatonit|podman' 2>/dev/null || true
  for n in $made_nodes; do rm -f "$n"; done
  rm -f /etc/gpurun/config.toml
}
trap cleanup EXIT INT TERM
host="$work/fx/host"
bb=gpurun-test/busybox
glibc=gpurun-test/glibc
nodes='ls /dev/nvidia[0-9]* | tr "\n" " "; nvidia-smi >/dev/null 2>&1; echo smi=$?'
set +e

# --- Docker 28 ---------------------------------------------------------
# Compose v2 (unstable's docker-compose plugin) on the running dockerd:
# GPUs asked for by `deploy.resources.reservations.devices` (Docker's
# DeviceRequests, the --gpus path), each service exactly its GPUs, and
# `compose down` leaving no gpurun state. ($$ is Compose's escape for $.)
compose_gpus() {
  mkdir -p "$work/compose"
  cat > "$work/compose/compose.yaml" <<EOF
services:
  one:
    image: $glibc
    runtime: gpurun
    network_mode: none
    command: [sh, -c, 'echo \$\$(ls /dev/nvidia[0-9]*); nvidia-smi >/dev/null 2>&1; echo smi=\$\$?']
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, device_ids: ["1"], capabilities: [gpu, utility]}]
  every:
    image: $glibc
    runtime: gpurun
    network_mode: none
    command: [sh, -c, 'echo \$\$(ls /dev/nvidia[0-9]*)']
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, count: all, capabilities: [gpu]}]
EOF
  compose() { (cd "$work/compose" && DOCKER_HOST="unix://$sock" /usr/bin/docker compose "$@"); }
  compose up --no-color >"$work/compose/up.log" 2>&1
  check "docker 28 compose up: exit 0" 0 "$?"
  check "docker 28 compose, device_ids [1]: GPU 1 only, nvidia-smi 9" "/dev/nvidia1
smi=9" "$(compose logs --no-log-prefix one 2>&1)"
  check "docker 28 compose, count all: both GPUs" "/dev/nvidia0 /dev/nvidia1" \
    "$(compose logs --no-log-prefix every 2>&1)"
  compose down >/dev/null 2>&1
  check "docker 28 compose down: no gpurun state left" "" "$(state_left "$work/exec/runtime-gpurun/moby")"
}

sock="$work/docker.sock"
write_daemon_json
mkdir -p "$work/hooks"
"$gpurun" setup docker --config "$work/daemon.json" --binary "$gpurun" --hook-dir "$work/hooks" >/dev/null
docker() { /usr/bin/docker -H "unix://$sock" "$@"; }
if start_dockerd "$work/daemon.json" "$work/dockerd.log" "$work/hooks"; then
  load_images
  out=$(docker run --rm --runtime=gpurun "$bb" sh -c 'echo x > /dev/full; echo rc=$?' 2>&1)
  check_contains "docker 28: a plain container under its default device rules" "rc=1" "$out"
  docker run --rm --runtime=gpurun "$bb" sh -c 'exit 7'
  check "docker 28: exit 7 exits 7" 7 "$?"
  docker run --rm --runtime=runc "$bb" true
  check "docker 28: runc 1.3 beside it" 0 "$?"
  out=$(docker run --rm --runtime=gpurun --gpus device=0 "$glibc" sh -c "$nodes" 2>"$work/err")
  check "docker 28 --gpus device=0 (hook path): GPU 0 only, nvidia-smi 9" "/dev/nvidia0 smi=9" "$out"
  out=$(docker run --rm --runtime=gpurun --gpus all "$glibc" sh -c "$nodes" 2>"$work/err")
  check "docker 28 --gpus all (hook path): both GPUs" "/dev/nvidia0 /dev/nvidia1 smi=9" "$out"
  compose_gpus
else
  check "dockerd 28 starts" started "$(tail -3 "$work/dockerd.log")"
fi
stop_engines

# Docker 28 with "userns-remap": "default" (a user namespace started by
# root: dockerd makes the dockremap user and its subordinate ranges).
jq '. + {"userns-remap": "default"}' "$work/daemon.json" > "$work/daemon-remap.json"
chmod o+x "$work" "$work/data" 2>/dev/null
if start_dockerd "$work/daemon-remap.json" "$work/dockerd-remap.log" "$work/hooks"; then
  load_images
  check_userns_remap "docker 28 userns-remap"
else
  check "dockerd 28 with userns-remap starts" started "$(tail -3 "$work/dockerd-remap.log")"
fi
stop_engines

# Docker 28 with CDI: NVIDIA's CDI spec in its CDI directory and
# nvidia-cdi-hook on its PATH (a stand-in that records any call: gpurun
# does the hooks natively, so none comes). `--device nvidia.com/gpu=N`
# makes dockerd apply the spec's edits; gpurun completes them, once: the
# library is one mount (gpurun's own plan binds its SONAME name too, so a
# second injection would show), and NVIDIA_VISIBLE_DEVICES is the spec's
# void. (Debian's 28.5.2 here took the toolkit-hook path for --gpus when
# both hook names were on its PATH, and refused --gpus with only
# nvidia-cdi-hook there.)
mkdir -p "$work/cdi" "$work/cdi-bin"
GPURUN_CONFIG="$work/gpurun.toml" "$gpurun" gpu cdi --hook-program nvidia-cdi-hook -o "$work/cdi/nvidia.json" >/dev/null
printf '#!/bin/sh\necho "$@" >> %s/cdi-hook-ran\n' "$work" > "$work/cdi-bin/nvidia-cdi-hook"
chmod 755 "$work/cdi-bin/nvidia-cdi-hook"
jq --arg d "$work/cdi" '. + {"cdi-spec-dirs": [$d], "features": {"cdi": true}}' "$work/daemon.json" > "$work/daemon-cdi.json"
once='ls /dev/nvidia[0-9]* | tr "\n" " "; nvidia-smi >/dev/null 2>&1; echo smi=$?; grep -c "libnvidia-ml.so" /proc/self/mountinfo; echo "$NVIDIA_VISIBLE_DEVICES"'
if start_dockerd "$work/daemon-cdi.json" "$work/dockerd-cdi.log" "$work/cdi-bin"; then
  out=$(docker run --rm --runtime=gpurun --device nvidia.com/gpu=1 "$glibc" sh -c "$once" 2>"$work/err")
  check "docker 28 --device nvidia.com/gpu=1 (CDI): GPU 1 once" "/dev/nvidia1 smi=9
1
void" "$out"
  check "docker 28 CDI: no hook process ran" "" "$(cat "$work/cdi-hook-ran" 2>/dev/null)"
else
  check "dockerd 28 with CDI starts" started "$(tail -3 "$work/dockerd-cdi.log")"
fi
stop_engines

# --- containerd 2.x ----------------------------------------------------
sock="$work/ctd.sock"
containerd config default > "$work/ctd.toml"
out=$("$gpurun" setup containerd --config "$work/ctd.toml" --binary "$gpurun" 2>&1)
check_contains "setup containerd on containerd 2's default config" "registered runtime" "$out"
check "setup containerd keeps version 3" "version = 3" "$(grep -m1 '^version' "$work/ctd.toml")"
# Its own root, state and socket, the local pause image for CRI sandboxes
# and no oom_score_adj below its own (this VM lacks CAP_SYS_RESOURCE); the
# rest as `config default` wrote it.
sed -i -e "s|^root = .*|root = '$work/ctd-root'|" -e "s|^state = .*|state = '$work/ctd-state'|" \
  -e "/^\[grpc\]/,/^\[/ s|^\( *\)address = .*|\1address = '$sock'|" \
  -e "s|^\( *\)sandbox = .*|\1sandbox = 'docker.io/gpurun-test/pause:latest'|" \
  -e "s|restrict_oom_score_adj = false|restrict_oom_score_adj = true|" \
  -e "s|^\( *\)conf_dir = '/etc/cni/net.d'|\1conf_dir = '$work/cni'|" "$work/ctd.toml"
# A pod network for the pod with a user namespace (which cannot take the
# node's network): a veth pair (ptp) with an address, removed with the pod.
mkdir -p "$work/cni"
cat > "$work/cni/10-pod.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "gpurun-pod", "plugins": [{"type": "ptp", "ipMasq": false,
  "ipam": {"type": "host-local", "subnet": "10.233.0.0/24", "dataDir": "$work/cni-ipam"}}]}
EOF
dump=$(containerd --config "$work/ctd.toml" config dump 2>&1)
check_contains "containerd 2 reads the runtime setup wrote" "BinaryName = '$gpurun'" "$dump"
GPURUN_CONFIG="$work/gpurun.toml" containerd --config "$work/ctd.toml" > "$work/containerd.log" 2>&1 &
pids="$!"
ctr() { /usr/bin/ctr -a "$sock" -n gpurun "$@"; }
if wait_for ctr version; then
  ctr image import "$work/busybox.tar" >/dev/null
  ctr image import "$work/glibc.tar" >/dev/null
  ctr run --rm --runc-binary "$gpurun" "docker.io/$bb:latest" c1 sh -c 'exit 5'
  check "containerd 2: ctr run exits 5" 5 "$?"
  out=$(ctr run --rm --runc-binary "$gpurun" --env NVIDIA_VISIBLE_DEVICES=1 \
    "docker.io/$glibc:latest" c2 sh -c "$nodes" 2>"$work/err")
  check "containerd 2: a GPU by the device plugin's env" "/dev/nvidia1 smi=9" "$out"
  # CRI, the path a Kubernetes node takes: a host-network pod whose
  # runtime handler is gpurun (integration/cri-client), GPU 0 by env.
  cri=$PWD/target/debug/cri-client
  /usr/bin/ctr -a "$sock" -n k8s.io image import "$work/pause.tar" >/dev/null
  /usr/bin/ctr -a "$sock" -n k8s.io image import "$work/glibc.tar" >/dev/null
  out=$(RUST_BACKTRACE=0 "$cri" "$sock" gpurun "docker.io/$glibc:latest" "$work/pod-logs" \
    'ls /dev/nvidia[0-9]*; nvidia-smi >/dev/null 2>&1; echo smi=$?; exit 3' NVIDIA_VISIBLE_DEVICES=0 2>&1)
  check_contains "containerd 2 CRI: a GPU pod by env, exit code read back" "exit_code=3" "$out"
  check_contains "containerd 2 CRI: GPU 0 injected (nvidia-smi 9)" "smi=9" "$out"
  check_contains "containerd 2 CRI: the pod removed" "pod removed" "$out"
  # A GPU by CDI name in the container's config (the device plugin's
  # cdi-cri strategy, DRA): containerd 2 applies NVIDIA's CDI edits itself
  # from /var/run/cdi; gpurun completes them natively, once.
  mkdir -p /var/run/cdi
  cp "$work/cdi/nvidia.json" /var/run/cdi/nvidia.json
  out=$(CRI_CLIENT_CDI_DEVICES=nvidia.com/gpu=1 RUST_BACKTRACE=0 "$cri" "$sock" gpurun \
    "docker.io/$glibc:latest" "$work/pod-logs-cdi" "$once" 2>&1)
  check "containerd 2 CRI: a GPU by CDI name, its edits applied once" "/dev/nvidia1 smi=9
1
void" "$(printf '%s\n' "$out" | grep -E '^(/dev/nvidia|[0-9]+$|void)' | head -3)"
  # The GPU Operator's own pods (DCGM, feature discovery) in CDI mode ask
  # for the management device: every GPU's node and the control nodes,
  # from the management spec gpurun writes, applied by containerd 2.
  GPURUN_CONFIG="$work/gpurun.toml" "$gpurun" gpu cdi --kind management.nvidia.com/gpu \
    --hook-program nvidia-cdi-hook -o /var/run/cdi/management.json >/dev/null
  out=$(CRI_CLIENT_CDI_DEVICES=management.nvidia.com/gpu=all RUST_BACKTRACE=0 "$cri" "$sock" gpurun \
    "docker.io/$glibc:latest" "$work/pod-logs-mgmt" "$once; [ -c /dev/nvidia-uvm-tools ] && echo uvm-tools" 2>&1)
  check "containerd 2 CRI: the management device (GPU Operator pods): every GPU, uvm-tools, edits once" \
    "/dev/nvidia0 /dev/nvidia1 smi=9
1
void
uvm-tools" "$(printf '%s\n' "$out" | grep -E '^(/dev/nvidia|[0-9]+$|void|uvm-tools)' | head -4)"
  rm -f /var/run/cdi/nvidia.json /var/run/cdi/management.json
  # hostUsers: false: the pod in a user namespace of its own (ids from
  # 3000000, and a network of its own), a GPU by env and a host volume, which containerd 2 asks the
  # runtime to idmap (it reads `features` for that): root in the pod
  # writes the volume as the host's root, not as 3000000.
  mkdir -p "$work/volume"
  out=$(CRI_CLIENT_USERNS=3000000:65536 CRI_CLIENT_VOLUME="$work/volume" RUST_BACKTRACE=0 "$cri" "$sock" gpurun \
    "docker.io/$glibc:latest" "$work/pod-logs-userns" \
    'echo map=$(head -1 /proc/self/uid_map | tr -s " "); '"$nodes"'; touch /volume/made && echo wrote' \
    NVIDIA_VISIBLE_DEVICES=0 2>&1)
  check "containerd 2 CRI hostUsers: false: mapped to 3000000, GPU 0, nvidia-smi 9, volume written" \
    "map= 0 3000000 65536
/dev/nvidia0 smi=9
wrote" "$(printf '%s\n' "$out" | grep -E '^(map=|/dev/nvidia|wrote)')"
  check "containerd 2 CRI hostUsers: false: the volume's file is the host's root's (idmapped)" \
    "0:0" "$(stat -c %u:%g "$work/volume/made" 2>&1)"
else
  check "containerd 2 starts" started "$(tail -3 "$work/containerd.log")"
fi
stop_engines

# --- Podman 5 ----------------------------------------------------------
export PODMAN_IGNORE_CGROUPSV1_WARNING=1
podman() {
  /usr/bin/podman --root "$work/pm-root" --runroot "$work/pm-run" --storage-driver vfs \
    --cgroup-manager cgroupfs --events-backend file --runtime "$gpurun" "$@"
}
podman load -i "$work/busybox.tar" >/dev/null 2>&1
podman load -i "$work/glibc.tar" >/dev/null 2>&1
podman run --rm --network none "$bb" sh -c 'exit 4'
check "podman 5: run exits 4" 4 "$?"
mkdir -p "$work/cdi-podman"
GPURUN_CONFIG="$work/gpurun.toml" "$gpurun" gpu cdi -o "$work/cdi-podman/nvidia.yaml" >/dev/null 2>&1
out=$(GPURUN_CONFIG="$work/gpurun.toml" podman --cdi-spec-dir "$work/cdi-podman" run --rm --network none \
  --device nvidia.com/gpu=0 "$glibc" sh -c "$nodes" 2>"$work/err")
check "podman 5 --device nvidia.com/gpu=0 (CDI): GPU 0, nvidia-smi 9" "/dev/nvidia0 smi=9" "$out"
# Checkpoint and restore with CRIU 4.2 (Debian unstable's): a counter at
# 30 or more (3 s in) is checkpointed (it stops) and restored; read at
# once, it is still 30 or more, which a fresh start would not be for 3 s.
podman run -d --name ckpt --network none "$bb" sh -c "$counter" >/dev/null 2>&1
count_reaches 30 podman exec ckpt cat /tmp/count
podman container checkpoint ckpt >"$work/ckpt.out" 2>&1
check "podman 5 container checkpoint (CRIU 4.2): exit 0" 0 "$?"
check "podman 5: the checkpointed container stopped" exited "$(podman inspect -f '{{.State.Status}}' ckpt 2>&1)"
podman container restore ckpt >"$work/restore.out" 2>&1
check "podman 5 container restore: exit 0" 0 "$?"
now=$(podman exec ckpt cat /tmp/count 2>/dev/null)
check "podman 5: the restored container counts on from its checkpoint" yes "$([ "${now:-0}" -ge 30 ] && echo yes)"
podman rm -f ckpt >/dev/null 2>&1

# GPU containers checkpointed and restored, GPU 0 asked for by CDI and by
# the env: a CUDA worker (device memory holding a pattern, GPU work every
# 100 ms, logged to the host) on the host whose driver has the checkpoint
# API. Podman's overlay storage here: on vfs the rootfs is a plain
# directory, where gpurun's private mount-point overlays (which CRIU
# cannot save) are refused.
mkdir -p "$work/cdi-ckpt" "$work/cuda-log"
GPURUN_CONFIG="$work/gpurun-checkpoint.toml" "$gpurun" gpu cdi -o "$work/cdi-ckpt/nvidia.yaml" >/dev/null 2>&1
mkdir -p /etc/gpurun
cp "$work/gpurun-checkpoint.toml" /etc/gpurun/config.toml
podman_ovl() {
  /usr/bin/podman --root "$work/pmo-root" --runroot "$work/pmo-run" --storage-driver overlay \
    --cgroup-manager cgroupfs --events-backend file --runtime "$gpurun" \
    --cdi-spec-dir "$work/cdi-ckpt" "$@"
}
podman_ovl load -i "$work/glibc.tar" >/dev/null 2>&1
for how in cdi env; do
  case $how in
    cdi) request="--device nvidia.com/gpu=0" ;;
    env) request="-e NVIDIA_VISIBLE_DEVICES=0 -e NVIDIA_DRIVER_CAPABILITIES=compute,utility" ;;
  esac
  log="$work/cuda-log/$how"
  # shellcheck disable=SC2086
  podman_ovl run -d --name "cuda-$how" --network none $request -v "$work/cuda-log:/log" \
    "$glibc" cuda_worker 8 100 "/log/$how" >/dev/null 2>"$work/err"
  ticks_reach 3 "$log"
  check "podman 5 GPU checkpoint ($how): the CUDA worker works" 0 "$?"
  podman_ovl container checkpoint "cuda-$how" >"$work/ckpt.out" 2>&1
  check "podman 5 container checkpoint of a GPU container ($how): exit 0" 0 "$?"
  at=$(ticks "$log")
  sleep 0.5
  check "podman 5 ($how): the checkpointed worker stopped" "$at" "$(ticks "$log")"
  podman_ovl container restore "cuda-$how" >"$work/restore.out" 2>&1
  check "podman 5 container restore of a GPU container ($how): exit 0" 0 "$?"
  ticks_reach $((at + 3)) "$log"
  check "podman 5 ($how): the restored worker works on" 0 "$?"
  check "podman 5 ($how): device memory kept, never restarted" yes "$(worker_ok "$log")"
  podman_ovl rm -f "cuda-$how" >/dev/null 2>&1
done
rm -f /etc/gpurun/config.toml

# Rootful with --userns=auto (a user namespace started by root, as
# Kubernetes' hostUsers: false): conmon passes the runtime no environment,
# so the fake host is named in this root's own /etc/gpurun/config.toml,
# and Podman's "containers" user gets subordinate ids (both this root's
# files, not the host's).
id containers >/dev/null 2>&1 || useradd --system --no-create-home containers
grep -q '^containers:' /etc/subuid 2>/dev/null || echo containers:2000000:1000000 >> /etc/subuid
grep -q '^containers:' /etc/subgid 2>/dev/null || echo containers:2000000:1000000 >> /etc/subgid
mkdir -p /etc/gpurun
cp "$work/gpurun.toml" /etc/gpurun/config.toml
out=$(podman run --rm --userns=auto --network none -e NVIDIA_VISIBLE_DEVICES=0 "$glibc" sh -c \
  'read inside host size < /proc/self/uid_map; [ "$host" -gt 0 ] && echo "$inside mapped"; '"$nodes" 2>&1)
check "podman 5 --userns=auto -e NVIDIA_VISIBLE_DEVICES=0: root mapped, GPU 0, nvidia-smi 9" \
  "0 mapped
/dev/nvidia0 smi=9" "$out"
rm -f /etc/gpurun/config.toml
podman rm -af >/dev/null 2>&1
podman system reset -f >/dev/null 2>&1

# Rootless, as an unprivileged user of this root with a private HOME:
# `setup podman` writes its containers.conf, a plain run and a GPU by CDI
# name. A rootless runtime binds a device node from the host's own /dev,
# so the fake host's nodes are made there for these runs (only those made
# here are removed).
user=gpurun-test
sh scripts/fixtures/test-user.sh "$user"
home="$work/home"
mkdir -p "$home/run" "$home/.config/gpurun" "$home/cdi"
cp "$work/gpurun.toml" "$home/.config/gpurun/config.toml"
cp "$work/cdi-podman/nvidia.yaml" "$home/cdi/"
chown -R "$user" "$home"
chmod 700 "$home/run"
chmod o+rx "$work" && chmod -R o+rX "$work/busybox.tar" "$work/glibc.tar" "$work/fx"
make_host_nodes
as_user() { setpriv --reuid="$user" --regid="$user" --init-groups env HOME="$home" XDG_RUNTIME_DIR="$home/run" "$@"; }
out=$(cd "$home" && as_user "$gpurun" setup podman --binary "$gpurun" 2>&1)
check_contains "podman 5 rootless: setup podman writes the user's containers.conf" \
  "$home/.config/containers/containers.conf" "$out"
upodman() { (cd "$home" && as_user /usr/bin/podman --storage-driver vfs --runtime gpurun "$@"); }
upodman load -i "$work/busybox.tar" >/dev/null 2>&1
upodman load -i "$work/glibc.tar" >/dev/null 2>&1
upodman run --rm --network none "$bb" sh -c 'exit 6'
check "podman 5 rootless: run exits 6" 6 "$?"
out=$(upodman --cdi-spec-dir "$home/cdi" run --rm --network none --device nvidia.com/gpu=1 "$glibc" sh -c "$nodes" 2>&1)
check "podman 5 rootless --device nvidia.com/gpu=1 (CDI): GPU 1, nvidia-smi 9" "/dev/nvidia1 smi=9" "$out"
upodman system reset -f >/dev/null 2>&1

summary "current-engines"
