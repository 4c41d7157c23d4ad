#!/bin/sh
# LXC 5 (Debian's lxc) with gpurun as its GPU hook, in place of
# /usr/share/lxc/hooks/nvidia and libnvidia-container: `gpurun setup lxc`
# writes the hooks into a default.conf; privileged and unprivileged
# containers (lxc-execute) on a rootfs from `gpurun import`, and a
# container made by `lxc-create -t oci` from a local OCI layout whose image
# sets NVIDIA_VISIBLE_DEVICES. Checks the nvidia-smi ladder (127 without a
# request, 9 with), which nodes and driver files each container gets, the
# privileged container's device cgroup, a bad request's reason, and that
# neither the rootfs nor the host keeps anything.
# Usage: integration/lxc.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
. integration/lib/common.sh
suite_start lxc.sh "${1:-}"
trap 'rm -rf "$work"' EXIT INT TERM
make_fixtures
lxcpath="$work/lxc"
mkdir -p "$lxcpath"
# An unprivileged container started by root maps its ids through
# newuidmap, which needs root's own subordinate range.
grep -q '^root:' /etc/subuid || echo "root:300000:65536" >> /etc/subuid
grep -q '^root:' /etc/subgid || echo "root:300000:65536" >> /etc/subgid
range=$(grep '^root:' /etc/subuid | head -1 | cut -d: -f2)

# The fake host's driver locations go into the hook's command line (the
# hook takes no GPURUN_* variables: lxc.environment reaches hooks).
roots="--driver-root $host/driver --dev-root $host --proc-root $host/proc"
# The hooks hand privileged containers' device rules over in gpurun's
# default state root, which other LXC containers on the host may share.
handoff=/run/gpurun/@lxc-devices
handoff_before=$(ls "$handoff" 2>/dev/null || true)
out=$("$gpurun" $roots setup lxc --config "$work/default.conf" --binary "$gpurun")
check_contains "setup lxc writes the hooks" "registered gpurun's LXC hooks" "$out"
check "the mount and start-host hooks are gpurun" 2 "$(grep -c "^lxc.hook.[a-z-]* = $gpurun $roots lxc-hook$" "$work/default.conf")"
out=$("$gpurun" $roots setup lxc --config "$work/default.conf" --binary "$gpurun")
check_contains "setup lxc is idempotent" "nothing to change" "$out"

"$gpurun" import "$work/glibc.tar" -o "$work/img" >/dev/null 2>&1
rootfs="$work/img/rootfs"
# Everything about the rootfs but its own directory's time (LXC's
# pivot_root touches that, with or without a hook).
snapshot() {
  (cd "$1" && find . -mindepth 1 -printf '%P %y %s %m %U %G %T@ %l\n' | sort &&
    find . -type f -exec sha256sum {} + | sort)
}
snapshot "$rootfs" > "$work/before"

n=0
# lxc-execute a command in a new container of MODE (privileged or
# unprivileged) with the lxc.environment lines given; sets $out (its
# output, lines joined with spaces) and $rc (lxc-execute's exit code).
lxc_run() { # MODE "ENV;ENV" COMMAND
  n=$((n + 1))
  conf="$work/c$n.conf"
  {
    cat "$work/default.conf"
    echo "lxc.uts.name = c$n"
    echo "lxc.rootfs.path = dir:$rootfs"
    echo "lxc.include = /usr/share/lxc/config/common.conf"
    if [ "$1" = unprivileged ]; then
      echo "lxc.include = /usr/share/lxc/config/userns.conf"
      echo "lxc.idmap = u 0 $range 65536"
      echo "lxc.idmap = g 0 $range 65536"
    fi
    echo "lxc.net.0.type = empty"
    echo "lxc.apparmor.profile = unconfined"
    echo "$2" | tr ';' '\n' | grep . | sed 's/^/lxc.environment = /'
  } > "$conf"
  timeout 60 lxc-execute -n "c$n" -P "$lxcpath" -f "$conf" -o "$work/c$n.log" -l DEBUG \
    -- sh -c "$3" > "$work/c$n.out" 2>&1
  rc=$?
  out=$(tr '\n' ' ' < "$work/c$n.out" | sed 's/ *$//')
}

# Output lines are joined with spaces.
nodes='ls /dev/nvidia* 2>/dev/null'
smi='nvidia-smi >/dev/null 2>&1; echo nvidia-smi=$?'
libs='ls /usr/lib/x86_64-linux-gnu | grep -E "^lib(cuda|nvidia-ml)\.so\.1$"'
set +e
for mode in privileged unprivileged; do
  lxc_run $mode "" "$nodes; $smi"
  check "$mode: no request: no GPU, no nvidia-smi (127)" "nvidia-smi=127" "$out"

  lxc_run $mode "NVIDIA_VISIBLE_DEVICES=0;NVIDIA_DRIVER_CAPABILITIES=utility" "$nodes; $smi; $libs"
  check "$mode: GPU 0, utility: its nodes, nvidia-smi resolved (9), NVML without libcuda" \
    "/dev/nvidia0 /dev/nvidiactl nvidia-smi=9 libnvidia-ml.so.1" "$out"

  lxc_run $mode "NVIDIA_VISIBLE_DEVICES=1;NVIDIA_DRIVER_CAPABILITIES=compute,utility" \
    "$nodes; $libs; LD_LIBRARY_PATH=/opt/cudart cuda_probe | tail -1"
  check "$mode: GPU 1, compute: libcuda, cudaGetDeviceCount 100" \
    "/dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia1 /dev/nvidiactl libcuda.so.1 libnvidia-ml.so.1 cudaGetDeviceCount=100 devices=0" "$out"

  lxc_run $mode "NVIDIA_VISIBLE_DEVICES=7" "true"
  check "$mode: a GPU the host lacks stops the container" 1 "$rc"
  check_contains "$mode: with gpurun's reason in LXC's log" 'NVIDIA_VISIBLE_DEVICES: no GPU "7"' \
    "$(cat "$work/c$n.log")"
done

# The privileged container's device cgroup allows its own GPU, not the other.
# (LXC leaves the cgroup mounts to a cgroup-namespaced init: mount the
# hierarchy over /tmp, which changes nothing in the image.)
lxc_run privileged "NVIDIA_VISIBLE_DEVICES=1;NVIDIA_DRIVER_CAPABILITIES=utility" \
  "mount -t cgroup -o devices cgroup /tmp && grep -E '^c 195:' /tmp/devices.list"
check "privileged: the devices cgroup allows GPU 1 and nvidiactl only" "c 195:1 rwm c 195:255 rwm" "$out"
check "the hooks' handoff file is gone" "" \
  "$(ls "$handoff" 2>/dev/null | while read -r f; do printf '%s\n' "$handoff_before" | grep -qxF "$f" || echo "$f"; done)"

# The hook reads NVIDIA_* and nothing else of lxc.environment (which an
# image's Env fills through lxc-create -t oci): driver locations set there
# do not steer it.
lxc_run privileged "NVIDIA_VISIBLE_DEVICES=0;NVIDIA_DRIVER_CAPABILITIES=utility;GPURUN_DRIVER_ROOT=/nonexistent;GPURUN_CONFIG=/nonexistent" "$nodes; $smi"
check "GPURUN_* in lxc.environment does not steer the hook" "/dev/nvidia0 /dev/nvidiactl nvidia-smi=9" "$out"

snapshot "$rootfs" > "$work/after"
check "the rootfs is unchanged, file for file" "" "$(diff "$work/before" "$work/after")"
check "no mount of the container is left on the host" "" "$(grep -F "$work" /proc/self/mountinfo)"

# lxc-create -t oci (skopeo, umoci) from a local OCI layout whose image
# asks for GPU 0: LXC turns its Env into lxc.environment, and the
# default.conf that setup wrote brings gpurun's hooks.
MAKE_IMAGE_ENV="NVIDIA_VISIBLE_DEVICES=0;NVIDIA_DRIVER_CAPABILITIES=utility" \
  python3 tests/fixtures/make_image.py fromdir "$work/img-env" "$work/glibc" \
  docker.io/gpurun-test/glibc-gpu:latest sh >/dev/null
skopeo copy -q "docker-archive:$work/img-env/image.docker.tar" "oci:$work/layout:latest"
{
  cat "$work/default.conf"
  echo "lxc.net.0.type = empty"
  echo "lxc.apparmor.profile = unconfined"
} > "$work/oci.conf"
lxc-create -q -n oci1 -P "$lxcpath" -t oci -f "$work/oci.conf" -- --url "oci:$work/layout:latest" --no-cache >/dev/null 2>&1
check "lxc-create -t oci from the local layout" 0 "$?"
check_contains "the container's config has the image's request" "lxc.environment = NVIDIA_VISIBLE_DEVICES=0" \
  "$(cat "$lxcpath/oci1/config" 2>/dev/null)"
out=$(timeout 60 lxc-execute -n oci1 -P "$lxcpath" -- sh -c "$nodes; $smi" 2>&1 | tr '\n' ' ' | sed 's/ *$//')
check "lxc-create -t oci container: GPU 0, nvidia-smi 9" "/dev/nvidia0 /dev/nvidiactl nvidia-smi=9" "$out"
lxc-destroy -q -n oci1 -P "$lxcpath"
check "lxc-destroy" 0 "$?"

summary lxc
