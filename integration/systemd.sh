#!/bin/sh
# systemd hosts, as GPU machines run them: a VM (scripts/vm.sh --systemd,
# Debian 12's 6.1 kernel) with systemd as PID 1 and unified cgroups.
# `gpurun --systemd-cgroup` through create, start, update, pause, resume
# and delete (the scope unit appears with the spec's limits and is gone
# after delete), a GPU container with --systemd-cgroup, containerd's CRI
# path with `SystemdCgroup = true`, `ctr run --runc-systemd-cgroup`, and
# Docker on the systemd cgroup driver running a GPU container.
# The fixtures are made here; the checks run in the guest.
# Usage: integration/systemd.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
gpurun=${1:-$PWD/target/debug/gpurun}
[ "$(id -u)" = 0 ] || { echo "systemd.sh: run as root" >&2; exit 1; }

if [ "${GPURUN_IN_SYSTEMD_GUEST:-}" != 1 ]; then
  sh scripts/install-deps.sh
  # Under the checkout, which the guest sees at the same path.
  work=$(mktemp -d "$PWD/target/systemd-suite.XXXXXX")
  chmod 755 "$work" # the rootless Podman user reads the fake driver there
  trap 'rm -rf "$work"' EXIT INT TERM
  . integration/lib/common.sh
  make_fixtures
  [ -x target/debug/cri-client ] || cargo build --locked -q -p cri-client
  GPURUN_IN_SYSTEMD_GUEST=1 GPURUN_SUITE_WORK="$work" \
    sh scripts/vm.sh --systemd 6.1 -- sh integration/systemd.sh "$gpurun"
  exit $?
fi

# In the guest: every check reports, none stops the suite.
set +e
work=$GPURUN_SUITE_WORK
pids=""
. integration/lib/common.sh
host="$work/fx/host"
roots="--driver-root $host/driver --dev-root $host --proc-root $host/proc"
mkdir -p /etc/gpurun
cp "$work/gpurun.toml" /etc/gpurun/config.toml
check "systemd is PID 1" systemd "$(cat /proc/1/comm)"
check "cgroup v2 only" cgroup2fs "$(stat -f -c %T /sys/fs/cgroup)"

# --- gpurun --systemd-cgroup, straight from a shell ---
bundle="$work/sd-bundle"
cp -a "$work/bb" "$bundle"
id=sdtest
jq --arg path "system.slice:gpurun:$id" '.process.args = ["sleep", "300"]
  | .linux.cgroupsPath = $path
  | .linux.resources.memory = {"limit": 67108864}
  | .linux.resources.pids = {"limit": 64}' "$work/bb/config.json" > "$bundle/config.json"
unit="gpurun-$id.scope"
scope=/sys/fs/cgroup/system.slice/$unit
"$gpurun" --systemd-cgroup create --bundle "$bundle" $id
check "--systemd-cgroup create: exit 0" 0 "$?"
check "the scope unit is there" active "$(systemctl is-active "$unit" 2>&1)"
check "MemoryMax on the unit" 67108864 "$(systemctl show -P MemoryMax "$unit")"
check "TasksMax on the unit" 64 "$(systemctl show -P TasksMax "$unit")"
check "memory.max in its cgroup" 67108864 "$(cat "$scope/memory.max" 2>&1)"
check "pids.max in its cgroup" 64 "$(cat "$scope/pids.max" 2>&1)"
pid=$("$gpurun" state $id | jq .pid)
check "the container's process is in the scope" "0::/system.slice/$unit" "$(cat "/proc/$pid/cgroup")"
"$gpurun" --systemd-cgroup start $id
check "start: exit 0" 0 "$?"
"$gpurun" --systemd-cgroup update --memory 134217728 --pids-limit 100 $id
check "update: exit 0" 0 "$?"
check "update reaches memory.max" 134217728 "$(cat "$scope/memory.max" 2>&1)"
check "update reaches the unit's MemoryMax" 134217728 "$(systemctl show -P MemoryMax "$unit")"
check "update reaches pids.max" 100 "$(cat "$scope/pids.max" 2>&1)"
"$gpurun" --systemd-cgroup pause $id
check "pause: paused" paused "$("$gpurun" state $id | jq -r .status)"
check "pause freezes the scope" 1 "$(cat "$scope/cgroup.freeze" 2>&1)"
"$gpurun" --systemd-cgroup resume $id
check "resume: running" running "$("$gpurun" state $id | jq -r .status)"
"$gpurun" --systemd-cgroup delete --force $id
check "delete --force: exit 0" 0 "$?"
wait_for sh -c "! systemctl is-active --quiet $unit"
check "the scope unit is gone after delete" inactive "$(systemctl is-active "$unit" 2>&1)"
check "its cgroup is gone" no "$([ -d "$scope" ] && echo yes || echo no)"
check "nothing left in gpurun's state dir" "" "$(state_left /run/gpurun)"

# A GPU container under --systemd-cgroup: its device program lets the
# asked-for GPU through and nothing else.
gpu="$work/sd-gpu"
mkdir -p "$gpu"
jq --arg root "$work/glibc" '.root.path = $root | .root.readonly = false
  | .linux.cgroupsPath = "system.slice:gpurun:sdgpu"
  | .process.env += ["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility"]
  | .process.args = ["sh", "-c", "nvidia-smi >/dev/null 2>&1; echo smi=$?; head -c0 /dev/nvidia0 2>&1 | grep -q \"not permitted\" || echo gpu0=allowed; mknod /tmp/n1 c 195 1 && head -c0 /tmp/n1 2>/dev/null || echo gpu1=denied"]' \
  "$work/bb/config.json" > "$gpu/config.json"
out=$("$gpurun" --systemd-cgroup $roots run --bundle "$gpu" sdgpu 2>&1)
check_contains "--systemd-cgroup GPU run: nvidia-smi exits 9" "smi=9" "$out"
# (A fake node opens with ENXIO, no driver behind it; EPERM is the cgroup.)
check_contains "the asked-for GPU is let through" "gpu0=allowed" "$out"
check_contains "an unrequested GPU node is denied" "gpu1=denied" "$out"
check "the GPU container's scope is gone" inactive "$(systemctl is-active gpurun-sdgpu.scope 2>&1)"

# --- containerd: ctr with the systemd cgroup driver, and CRI with SystemdCgroup = true ---
sock="$work/containerd.sock"
# containerd's root on the guest's own disk: its overlay snapshots cannot
# sit on the overlay that makes the checkout writable here.
ctd=/var/lib/gpurun-suite-containerd
mkdir -p "$ctd"
write_containerd_config "$ctd/root" /run/gpurun-suite-containerd
"$gpurun" setup containerd --config "$work/config.toml" --binary "$gpurun" >/dev/null
# The runtime's options: the systemd cgroup driver, as kubelet's default.
sed -i '/BinaryName/a\            SystemdCgroup = true' "$work/config.toml"
check "SystemdCgroup = true in the gpurun runtime's options" 1 "$(grep -c 'SystemdCgroup = true' "$work/config.toml")"
containerd --config "$work/config.toml" >"$work/containerd.log" 2>&1 &
pids="$pids $!"
wait_for ctr -a "$sock" version
check "containerd (SystemdCgroup = true) is up" 0 "$?"
[ "$failed" = 0 ] || tail -20 "$work/containerd.log"
for image in busybox glibc pause; do
  ctr -a "$sock" -n default image import "$work/$image.tar" >/dev/null
  ctr -a "$sock" -n k8s.io image import "$work/$image.tar" >/dev/null
done
out=$(ctr -a "$sock" run --rm --runc-binary "$gpurun" --runc-systemd-cgroup \
  --cgroup "system.slice:ctr:sdctr" --env NVIDIA_VISIBLE_DEVICES=0 \
  docker.io/gpurun-test/glibc:latest sdctr sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?; cat /proc/self/cgroup' 2>&1)
check_contains "ctr --runc-systemd-cgroup: the GPU was injected (nvidia-smi exits 9)" "smi=9" "$out"
check_contains "ctr --runc-systemd-cgroup: in its scope" "0::/system.slice/ctr-sdctr.scope" "$out"
check "ctr's scope is gone" inactive "$(systemctl is-active ctr-sdctr.scope 2>&1)"
out=$(RUST_BACKTRACE=0 target/debug/cri-client "$sock" gpurun "docker.io/gpurun-test/glibc:latest" "$work/pod-logs" \
  'nvidia-smi >/dev/null 2>&1; echo smi=$?; cat /proc/self/cgroup; exit 3' NVIDIA_VISIBLE_DEVICES=0 2>&1)
check_contains "CRI with SystemdCgroup = true: exit code read back" "exit_code=3" "$out"
check_contains "CRI with SystemdCgroup = true: the GPU was injected" "smi=9" "$out"
check_contains "CRI with SystemdCgroup = true: the pod was removed" "pod removed" "$out"
check "CRI: no cri-containerd scope left" "" \
  "$(systemctl list-units --all --plain --no-legend 'cri-containerd-*' | awk '$3 == "active"')"
check "nothing left in containerd's gpurun state" "" "$(state_left /run/containerd/runc/k8s.io)"
stop_engines
pids=""

# --- Docker on the systemd cgroup driver ---
jq --arg gpurun "$gpurun" '.runtimes = {"gpurun": {"path": $gpurun}}' /etc/docker/daemon.json > "$work/daemon.json"
cp "$work/daemon.json" /etc/docker/daemon.json
systemctl restart docker
check "dockerd uses the systemd cgroup driver" systemd "$(docker info -f '{{.CgroupDriver}}' 2>&1)"
docker load -i "$work/glibc.tar" >/dev/null
out=$(docker run --rm --runtime=gpurun --network none -e NVIDIA_VISIBLE_DEVICES=0 \
  gpurun-test/glibc sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?' 2>&1)
check_contains "docker run --runtime=gpurun (systemd driver): nvidia-smi exits 9" "smi=9" "$out"
cid=$(docker run -d --runtime=gpurun --network none -m 64m -e NVIDIA_VISIBLE_DEVICES=0 \
  gpurun-test/glibc sleep 300)
check "docker's GPU container runs in its own scope unit" active "$(systemctl is-active "docker-$cid.scope" 2>&1)"
check "docker -m 64m lands in the scope's memory.max" 67108864 \
  "$(cat "/sys/fs/cgroup/system.slice/docker-$cid.scope/memory.max" 2>&1)"
docker rm -f "$cid" >/dev/null
check "no docker scope left" "" \
  "$(systemctl list-units --all --plain --no-legend 'docker-*.scope' | awk '$3 == "active"')"

# --- rootless Podman in a systemd user session: a delegated cgroup ---
user=gpurun-podman
useradd -m -s /bin/sh "$user"
echo "$user:200000:65536" >> /etc/subuid
echo "$user:200000:65536" >> /etc/subgid
uid=$(id -u "$user")
loginctl enable-linger "$user"
wait_for test -S "/run/user/$uid/bus"
check "the user's systemd session is up" 0 "$?"
as_user() {
  runuser -u "$user" -- env HOME="/home/$user" XDG_RUNTIME_DIR="/run/user/$uid" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
}
mkdir -p "/home/$user/.config/gpurun"
# Rootless Podman's container binds device nodes from their own paths,
# so the fake nodes go into this (throwaway) guest's /dev, as podman.sh
# does on a host, and the user's config says dev-root = "/".
for node in "$host"/dev/nvidia*; do
  [ -e "/dev/${node##*/}" ] || mknod -m 666 "/dev/${node##*/}" c \
    "$((0x$(stat -c %t "$node")))" "$((0x$(stat -c %T "$node")))"
done
sed 's|^dev-root = .*|dev-root = "/"|' /etc/gpurun/config.toml > "/home/$user/.config/gpurun/config.toml"
cp "$work/busybox.tar" "$work/glibc.tar" "/home/$user/"
chown -R "$user:" "/home/$user"
as_user podman load -i "/home/$user/busybox.tar" >/dev/null 2>&1
as_user podman load -i "/home/$user/glibc.tar" >/dev/null 2>&1
check "rootless podman uses the systemd cgroup manager" systemd \
  "$(as_user podman info -f '{{.Host.CgroupManager}}' 2>&1)"
out=$(as_user podman --runtime "$gpurun" run --rm --network none -m 64m --pids-limit 50 \
  gpurun-test/busybox sh -c 'cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max' 2>&1)
check "rootless podman -m 64m --pids-limit 50 apply in its delegated cgroup" "67108864 50" "$(echo $out)"
out=$(as_user podman --runtime "$gpurun" run --rm --network none -e NVIDIA_VISIBLE_DEVICES=0 \
  gpurun-test/glibc sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?' 2>&1)
check_contains "rootless podman GPU container: nvidia-smi exits 9" "smi=9" "$out"
check "nothing left in the user's gpurun state dir" "" "$(state_left "/run/user/$uid/gpurun")"

summary systemd
