# Shared by the end-to-end suites: results, images, the fake GPU host.
# Source it after `cd` to the repository root.

passed=0 failed=0
# A suite's start: as root, the packages installed, $gpurun (the suite's
# first argument, else the debug build), an empty $work (mode 755: the
# test user reads fixtures there) and no engine started yet.
suite_start() { # SUITE [GPURUN]
  [ "$(id -u)" = 0 ] || { echo "$1: run as root" >&2; exit 1; }
  gpurun=${2:-$PWD/target/debug/gpurun}
  sh scripts/install-deps.sh
  work=$(mktemp -d "/tmp/gpurun-${1%.sh}.XXXXXX")
  chmod 755 "$work"
  pids=""
}
check() { # NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then
    passed=$((passed + 1)); echo "ok   $1"
  else
    failed=$((failed + 1)); echo "FAIL $1: expected [$2], got [$3]"
  fi
}
check_contains() { # NAME NEEDLE HAYSTACK
  case "$3" in
    *"$2"*) passed=$((passed + 1)); echo "ok   $1" ;;
    *) failed=$((failed + 1)); echo "FAIL $1: [$2] not in [$3]" ;;
  esac
}
# Runs COMMAND, a guest's boot (scripts/vm.sh); a guest that went down or
# hung before its suite ended (vm.sh's 125: a kernel oops under emulation,
# the suite passing on its rerun) boots once more, so one that goes down
# every time still fails. With $boot_log (the guest's output) set, the
# guest's last kernel lines are shown first.
boot_once_more() { # SUITE COMMAND...
  boot_suite=$1; shift
  boot_rc=0
  "$@" || boot_rc=$?
  [ "$boot_rc" = 125 ] || return "$boot_rc"
  echo "$boot_suite: the guest went down before the suite ended; booting it once more" >&2
  if [ -n "${boot_log:-}" ]; then
    echo "$boot_suite: its last kernel lines:" >&2
    kernel_lines "$boot_log" "$boot_suite" >&2
  fi
  boot_rc=0
  "$@" || boot_rc=$?
  return "$boot_rc"
}
# The last 15 kernel lines of a guest's output, each marked [LABEL].
kernel_lines() { # LOG LABEL
  grep -a '^\[ *[0-9.]*\] ' "$1" | tail -15 | sed "s/^/  [$2] /"
}
summary() { # SUITE
  echo "$1: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}

# What a state directory holds besides gpurun's own entries, whose names
# start with @ and are kept between containers on purpose (@driver-cache,
# @lxc-devices).
state_left() { # DIR
  ls "$1" 2>/dev/null | grep -v '^@'
}

# What DIR holds now that it did not hold in BEFORE (an earlier state_left
# of it): a suite using a state directory it does not own (the default
# /run/gpurun, containerd's default runtime root) counts only what it left,
# since other programs on the host may keep containers there.
state_new() { # DIR BEFORE
  state_left "$1" | while read -r entry; do
    printf '%s\n' "$2" | grep -qxF "$entry" || echo "$entry"
  done
}

# Waits up to 20 s for COMMAND to succeed.
wait_for() {
  for _ in $(seq 1 100); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# The fake GPU host (NVIDIA's real 535 user-space files, fake nodes), a
# gpurun config pointing at it, and two local images as docker-save
# archives: $work/busybox.tar (docker.io/gpurun-test/busybox) and
# $work/glibc.tar (docker.io/gpurun-test/glibc, with nvidia-smi's libc,
# the CUDA runtime, cuda_probe and cuda_worker), plus $work/pause.tar for
# CRI sandboxes. For GPU checkpoints, $work/gpurun-checkpoint is gpurun on
# the host whose libcuda has the driver's checkpoint API (gpu-fixtures.sh's
# host-checkpoint), for an engine's runtime path.
make_fixtures() {
  sh scripts/fixtures/gpu-fixtures.sh "$work/fx" >/dev/null
  host="$work/fx/host"
  cat > "$work/gpurun.toml" <<EOF
driver-root = "$host/driver"
dev-root = "$host"
proc-root = "$host/proc"
EOF
  chmod 644 "$work/gpurun.toml"
  sed "s#$host#$host-checkpoint#" "$work/gpurun.toml" > "$work/gpurun-checkpoint.toml"
  printf '#!/bin/sh\nGPURUN_CONFIG=%s exec %s "$@"\n' "$work/gpurun-checkpoint.toml" "$gpurun" \
    > "$work/gpurun-checkpoint"
  chmod 755 "$work/gpurun-checkpoint"
  sh scripts/fixtures/busybox-bundle.sh "$work/bb" "$gpurun" >/dev/null
  python3 tests/fixtures/make_image.py fromdir "$work/img-bb" "$work/bb/rootfs" \
    docker.io/gpurun-test/busybox:latest sh
  python3 tests/fixtures/make_image.py fromdir "$work/img-pause" "$work/bb/rootfs" \
    docker.io/gpurun-test/pause:latest sleep 1000000
  sh scripts/fixtures/glibc-rootfs.sh "$work/glibc" >/dev/null
  mkdir -p "$work/glibc/opt/cudart"
  cp "$work/fx/cudart/libcudart.so.12" "$work/glibc/opt/cudart/"
  cp "$work/fx/cuda_probe" "$work/fx/cuda_worker" "$work/glibc/usr/bin/"
  python3 tests/fixtures/make_image.py fromdir "$work/img-glibc" "$work/glibc" \
    docker.io/gpurun-test/glibc:latest sh
  mv "$work/img-bb/image.docker.tar" "$work/busybox.tar"
  mv "$work/img-pause/image.docker.tar" "$work/pause.tar"
  mv "$work/img-glibc/image.docker.tar" "$work/glibc.tar"
}

# Rootless runtimes bind the engine's device nodes from the same path on
# the host, so the fake GPU host's nodes ($host/dev/nvidia*) are made in
# /dev, as a real driver's are; those made are added to $made_nodes, for
# the suite to remove (and only those).
make_host_nodes() {
  for node in "$host"/dev/nvidia*; do
    name=/dev/$(basename "$node")
    [ -e "$name" ] && continue
    mknod -m 666 "$name" c "$((0x$(stat -c %t "$node")))" "$((0x$(stat -c %T "$node")))"
    made_nodes="$made_nodes $name"
  done
}

# For the checkpoint checks: a shell loop that counts ten times a second
# into /tmp/count (by rename, so a read never sees it half written) and
# prints "line N"; count_reaches N CMD... waits up to 20 s until CMD (which
# prints the container's /tmp/count) says N or more.
counter='i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; echo "line $i"; sleep 0.1; done'
count_reaches() { # N CMD...
  n=$1; shift
  for _ in $(seq 1 100); do
    [ "$("$@")" -ge "$n" ] 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# For the GPU checkpoint checks: ticks LOG prints how many rounds of GPU
# work tests/fixtures/cuda_worker.c logged; ticks_reach N LOG waits up to
# 20 s for N; worker_ok LOG says "yes" when it started once and every
# round kept its pattern.
ticks() { n=$(grep -c '^tick' "$1" 2>/dev/null); echo "${n:-0}"; }
ticks_reach() { # N LOG
  for _ in $(seq 1 100); do
    [ "$(ticks "$2")" -ge "$1" ] && return 0
    sleep 0.2
  done
  return 1
}
worker_ok() { # LOG
  [ "$(grep -c '^started' "$1")" = 1 ] && ! grep '^tick' "$1" | grep -qv 'pattern ok work ok$' && echo yes
}

# A directory holding only `criu` (scripts/fixtures/criu.sh --gpu's: CRIU 4, as GPU
# containers need), for an engine's PATH.
criu_bin_dir() {
  mkdir -p "$work/criu-bin"
  ln -sf "$(sh scripts/fixtures/criu.sh --gpu)" "$work/criu-bin/criu"
  echo "$work/criu-bin"
}

# A private containerd's $work/config.toml: its own ROOT and STATE, the
# socket $sock, the CRI plugin with the local pause image (and this VM
# lacks CAP_SYS_RESOURCE: no oom_score_adj below its own).
write_containerd_config() { # ROOT STATE
  cat > "$work/config.toml" <<EOF
version = 2
root = "$1"
state = "$2"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "docker.io/gpurun-test/pause:latest"
EOF
}

# A private dockerd's daemon.json at $work/daemon.json: its own data root,
# exec root and socket ($sock); no iptables, no bridge.
write_daemon_json() {
  cat > "$work/daemon.json" <<EOF
{
  "data-root": "$work/data",
  "exec-root": "$work/exec",
  "pidfile": "$work/docker.pid",
  "hosts": ["unix://$sock"],
  "iptables": false,
  "ip-masq": false,
  "bridge": "none"
}
EOF
}

# Kills the PIDs in $pids (the engines this suite started), then cleans up.
stop_engines() {
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.2
  done
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  pids=""
}

# Starts a private dockerd on CONFIG (a daemon.json from write_daemon_json)
# with gpurun's config, PATH_PREFIX ahead of PATH (where it finds the hook
# names --gpus needs) and any further dockerd flags, logging to LOG, and
# waits for it; its PID joins $pids. Fails where it did not start.
start_dockerd() { # CONFIG LOG PATH_PREFIX [DOCKERD_FLAG...]
  config=$1 log=$2 prefix=$3
  shift 3
  PATH="${prefix:+$prefix:}$PATH" GPURUN_CONFIG="$work/gpurun.toml" \
    dockerd "$@" --config-file "$config" > "$log" 2>&1 &
  pids="$pids $!"
  wait_for docker version
}

# The busybox and glibc images into the running dockerd's data root.
load_images() {
  for image in busybox glibc; do docker load -i "$work/$image.tar" >/dev/null; done
}

# Docker's "userns-remap": "default" on the running dockerd (a user
# namespace started by root): root is dockremap's first subordinate id, the
# image writable, and --gpus device=0 gives GPU 0 with nvidia-smi 9.
# Docker 28's own warning about IP forwarding (bridge none) is passed over;
# anything else on stderr counts.
check_userns_remap() { # LABEL
  remap=$(awk -F: '$1 == "dockremap" {print $2; exit}' /etc/subuid)
  out=$(docker run --rm --runtime=gpurun "$bb" sh -c \
    'awk "{print \$1, \$2}" /proc/self/uid_map; id -u; touch /x && echo wrote' 2>&1 | grep -v '^WARNING: IPv4 forwarding is disabled')
  check "$1: root is dockremap's first subordinate id, the image writable" "0 $remap
0
wrote" "$out"
  out=$(docker run --rm --runtime=gpurun --gpus device=0 "$glibc" sh -c "$nodes" 2>&1 | grep -v '^WARNING: IPv4 forwarding is disabled')
  check "$1 --gpus device=0: GPU 0 only, nvidia-smi exits 9" "/dev/nvidia0 smi=9" "$out"
}
