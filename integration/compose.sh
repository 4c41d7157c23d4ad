#!/bin/sh
# Docker Compose (Debian's docker-compose 1.29) on a private dockerd 20.10
# whose default runtime is gpurun (`gpurun setup docker --default`), as the
# NVIDIA walkthrough does: one compose file asks for GPUs with
# `runtime: gpurun` and NVIDIA_VISIBLE_DEVICES, the other with
# `deploy.resources.reservations.devices`. Three services each: nvidia-smi,
# a CUDA probe, an EGL probe. Each must see exactly its GPUs, and
# `docker-compose down` must leave nothing (containers, gpurun state,
# cgroups).
# Usage: integration/compose.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
. integration/lib/common.sh
suite_start compose.sh "${1:-}"
trap 'stop_engines; rm -rf "$work"' EXIT INT TERM
make_fixtures

# The glibc image with glvnd's EGL loader and the EGL probe added.
cp -a "$work/glibc" "$work/egl"
cp -a "$work/fx/glvnd/usr" "$work/egl/"
cp "$work/fx/egl_probe" "$work/egl/usr/bin/"
ldconfig -r "$work/egl"
python3 tests/fixtures/make_image.py fromdir "$work/img-egl" "$work/egl" \
  docker.io/gpurun-test/egl:latest sh >/dev/null

sock="$work/docker.sock"
write_daemon_json
mkdir -p "$work/hooks"
"$gpurun" setup docker --default --config "$work/daemon.json" --binary "$gpurun" \
  --hook-dir "$work/hooks" >/dev/null
check "setup docker --default makes gpurun the default runtime" gpurun \
  "$(jq -r '."default-runtime"' "$work/daemon.json")"
PATH="$work/hooks:$PATH" GPURUN_CONFIG="$work/gpurun.toml" \
  dockerd --config-file "$work/daemon.json" > "$work/dockerd.log" 2>&1 &
pids="$!"
export DOCKER_HOST="unix://$sock"
wait_for docker version || { echo "dockerd did not start"; tail "$work/dockerd.log"; exit 1; }
for image in busybox glibc; do docker load -i "$work/$image.tar" >/dev/null; done
docker load -i "$work/img-egl/image.docker.tar" >/dev/null
state="$work/exec/runtime-gpurun/moby"

# What each service prints: its GPU nodes, then its probe's result. ($$ is
# compose's escape for $.)
nodes='printf "%s " $$(ls /dev/nvidia[0-9]* 2>/dev/null)'
smi="$nodes; nvidia-smi >/dev/null 2>&1; echo nvidia-smi=\$\$?"
cuda="$nodes; cuda_probe | tail -1"
egl="$nodes; LD_DEBUG=libs egl_probe 2>&1 | grep -o 'calling init: .*libEGL_nvidia.so.0' | sort -u"
# A YAML single-quoted string (a ' is written '').
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/''/g")"; }
smi=$(quote "$smi") cuda=$(quote "$cuda") egl=$(quote "$egl")

mkdir -p "$work/env" "$work/deploy"
cat > "$work/env/docker-compose.yml" <<EOF
services:
  smi:
    image: gpurun-test/glibc
    runtime: gpurun
    network_mode: none
    environment:
      NVIDIA_VISIBLE_DEVICES: "0"
      NVIDIA_DRIVER_CAPABILITIES: utility
    command: [sh, -c, $smi]
  cuda:
    image: gpurun-test/glibc
    runtime: gpurun
    network_mode: none
    environment:
      NVIDIA_VISIBLE_DEVICES: "1"
      NVIDIA_DRIVER_CAPABILITIES: compute
    command: [sh, -c, $cuda]
  egl:
    image: gpurun-test/egl
    runtime: gpurun
    network_mode: none
    environment:
      NVIDIA_VISIBLE_DEVICES: all
      NVIDIA_DRIVER_CAPABILITIES: graphics
    command: [sh, -c, $egl]
EOF
cat > "$work/deploy/docker-compose.yml" <<EOF
services:
  smi:
    image: gpurun-test/glibc
    network_mode: none
    command: [sh, -c, $smi]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu, utility]
  cuda:
    image: gpurun-test/glibc
    network_mode: none
    command: [sh, -c, $cuda]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["1"]
              capabilities: [gpu, compute]
  egl:
    image: gpurun-test/egl
    network_mode: none
    command: [sh, -c, $egl]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu, graphics]
EOF

set +e
# Runs a project to the end; prints each service's output as "NAME: OUT".
up() { # DIR
  (cd "$1" && docker-compose up --no-color >"$1/up.log" 2>&1) || { cat "$1/up.log"; return 1; }
  for service in smi cuda egl; do
    printf '%s: %s\n' "$service" \
      "$(cd "$1" && docker-compose logs --no-color --no-log-prefix "$service" 2>/dev/null | grep -v "^Attaching to" | tr -d '\r' | tr '\n' ' ' | sed 's/ *$//')"
  done
}
exit_codes() { # DIR
  (cd "$1" && docker-compose ps -q) | xargs docker inspect -f '{{.State.ExitCode}}' | sort -u | tr '\n' ' '
}
leftovers() { # what a project left: containers, gpurun state, cgroups
  docker ps -aq
  state_left "$state"
  find /sys/fs/cgroup/*/docker /sys/fs/cgroup/docker -mindepth 1 -maxdepth 1 -type d 2>/dev/null
}

for project in env deploy; do
  out=$(up "$work/$project")
  check "$project: docker-compose up" 0 "$?"
  check_contains "$project: nvidia-smi on GPU 0 only, injected and resolved (exit 9)" \
    "smi: /dev/nvidia0 nvidia-smi=9" "$out"
  check_contains "$project: the CUDA probe on GPU 1 only, libcuda there (100)" \
    "cuda: /dev/nvidia1 cudaGetDeviceCount=100" "$out"
  check_contains "$project: the EGL probe on both GPUs, glvnd loads NVIDIA's EGL" \
    "egl: /dev/nvidia0 /dev/nvidia1 calling init: /usr/lib/x86_64-linux-gnu/libEGL_nvidia.so.0" "$out"
  check "$project: every service exits 0" "0 " "$(exit_codes "$work/$project")"
  (cd "$work/$project" && docker-compose down >/dev/null 2>&1)
  check "$project: docker-compose down" 0 "$?"
  check "$project: down leaves no container, state or cgroup" "" "$(leftovers)"
done

# A capability the service did not ask for is not there: the smi service
# (utility) has no libcuda, the cuda service (compute) no nvidia-smi.
cat > "$work/env/docker-compose.override.yml" <<EOF
services:
  smi:
    command: ["sh", "-c", "ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 2>&1 | grep -c 'No such'"]
  cuda:
    command: ["sh", "-c", "command -v nvidia-smi || echo none"]
  egl:
    command: ["true"]
EOF
out=$(up "$work/env")
check_contains "utility only: no libcuda" "smi: 1" "$out"
check_contains "compute only: no nvidia-smi" "cuda: none" "$out"
(cd "$work/env" && docker-compose down >/dev/null 2>&1)

# A request for a GPU the host lacks fails that service with gpurun's reason.
cat > "$work/env/docker-compose.override.yml" <<EOF
services:
  smi:
    environment:
      NVIDIA_VISIBLE_DEVICES: "7"
EOF
(cd "$work/env" && docker-compose up --no-color smi >"$work/bad.log" 2>&1)
check "a GPU the host lacks: docker-compose up fails" 1 "$?"
check_contains "and says which GPU, in gpurun's words" 'NVIDIA_VISIBLE_DEVICES: no GPU "7"' "$(cat "$work/bad.log")"
(cd "$work/env" && docker-compose down >/dev/null 2>&1)
check "and leaves nothing behind" "" "$(leftovers)"

summary compose
