#!/bin/sh
# systemd hosts, as GPU machines run them: a VM (scripts/vm.sh --systemd,
# Debian 12's 6.12 series kernel, or KERNEL) with systemd as PID 1 and unified
# cgroups. `gpurun --systemd-cgroup` through create, start, update, pause,
# resume and delete (the scope unit appears with the spec's limits and is
# gone after delete); the spec's device rules under the systemd driver for
# every way in (gpurun from a shell, ctr, containerd's CRI with
# `SystemdCgroup = true`, Docker on the systemd driver, rootful Podman with
# the systemd cgroup manager), each container holding CAP_MKNOD so that
# the device rules alone decide, checked again after `systemctl
# daemon-reload`, an unrelated unit's restart and an update; runc 1.1.5
# beside it; `docker update` against runc's; rootless Podman; NVIDIA's CDI
# spec (its nvidia-cdi-hook absent) applied by rootful Podman and resolved
# by gpurun itself from a cdi.k8s.io annotation, under the systemd driver;
# GPU containers in user namespaces started by root (from a shell, Docker's
# userns-remap, Podman's --userns=auto), and AppArmor's docker-default.
# The fixtures are made here; the checks run in the guest.
# With ROOT "unstable", the guest runs Debian unstable's engines
# (containerd 2, Docker 28, Podman 5; vm.sh --systemd-root unstable): the
# CRI, Docker and Podman sections, and a Quadlet unit with a GPU.
# Usage: integration/systemd.sh [GPURUN [KERNEL [ROOT]]]   (as root; prints "N passed, M failed";
# with no ROOT, bookworm's then unstable's, each with the cases the other lacks)
# GPURUN_SYSTEMD_CASES: the engine sections to run (default: all of
# shell runc ctr cri docker podman cdi rootless checkpoint on bookworm's root; cri
# docker podman quadlet on unstable's).
set -eu
cd "$(dirname "$0")/.."
gpurun=${1:-$PWD/target/debug/gpurun}
[ "$(id -u)" = 0 ] || { echo "systemd.sh: run as root" >&2; exit 1; }

if [ "${GPURUN_IN_SYSTEMD_GUEST:-}" != 1 ] && [ -z "${3:-}" ]; then
  # No ROOT (the test command): both roots. bookworm's runs the cases that
  # unstable's does not (its CRI, Docker and rootful Podman checks run
  # there on containerd 2, Docker 28 and Podman 5; Debian 12's engines run
  # natively in integration/containerd.sh, docker.sh and podman.sh; the
  # runc case shows only runc 1.1.5's own loss).
  rc=0
  GPURUN_SYSTEMD_CASES=${GPURUN_SYSTEMD_CASES:-"shell ctr cdi rootless checkpoint"} \
    sh "$0" "$gpurun" "${2:-6.12}" bookworm || rc=1
  sh "$0" "$gpurun" "${2:-6.12}" unstable || rc=1
  exit "$rc"
fi
if [ "${GPURUN_IN_SYSTEMD_GUEST:-}" != 1 ]; then
  sh scripts/install-deps.sh
  . integration/lib/common.sh
  trap 'rm -rf "$work"' EXIT INT TERM
  # One boot, with fixtures of its own: under the checkout, which the guest
  # sees at the same path.
  boot() {
  [ -z "${work:-}" ] || rm -rf "$work"
  work=$(mktemp -d "$PWD/target/systemd-suite.XXXXXX")
  chmod 755 "$work" # the rootless Podman user reads the fake driver there
  make_fixtures
  [ -x target/debug/cri-client ] || cargo build --locked -q -p cri-client
  python3 integration/lib/toolkit_cdi_spec.py "$host/driver" "$host/dev" "$work/nvidia-cdi.json"
  # A node no driver has, open to all, for a user-namespace container to
  # be given by a bind mount (mknod is refused there whatever the rules).
  mknod -m 666 "$work/c42" c 42 0
  # CRIU 4, for the GPU checkpoint: scripts/fixtures/criu.sh's, carried under the
  # checkout (the guest's own root has Debian 12's 3.17).
  criu4=$(sh scripts/fixtures/criu.sh --gpu)
  if [ "$criu4" = /var/cache/gpurun-criu/criu ]; then
    cp -a /var/cache/gpurun-criu/root "$work/criu-root"
    lib="$work/criu-root/usr/lib/x86_64-linux-gnu"
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$lib/ld-linux-x86-64.so.2" "$lib" \
      "$work/criu-root/usr/sbin/criu" > "$work/criu4"
    chmod 755 "$work/criu4"
  else
    ln -s "$criu4" "$work/criu4"
  fi
  GPURUN_IN_SYSTEMD_GUEST=1 GPURUN_SUITE_WORK="$work" \
    sh scripts/vm.sh --systemd-root "$1" --timeout "${GPURUN_GUEST_TIMEOUT:-900}" "$2" \
      -- sh integration/systemd.sh "$gpurun"
  }
  # A guest that goes down or hangs boots once more, on fresh fixtures.
  rc=0
  boot_once_more systemd.sh boot "$3" "${2:-6.12}" || rc=$?
  exit "$rc"
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
default_cases="shell runc ctr cri docker podman cdi rootless checkpoint"
# runc 1.3 keeps its GPU through a reload (the runc case shows 1.1.5's
# loss); ctr, CDI and rootless Podman on today's engines run natively
# (integration/current-engines.sh).
containerd --version | grep -q 'containerd/v2 ' && default_cases="cri docker podman quadlet"
cases=${GPURUN_SYSTEMD_CASES:-$default_cases}
case_on() { case " $cases " in *" $1 "*) return 0 ;; esac; return 1; }
echo "systemd suite on $(uname -r), systemd $(systemctl --version | awk 'NR == 1 {print $2}'), $(containerd --version | awk '{print $3}'): $cases"

# --- The device probe every engine's container runs ---
# Each container holds CAP_MKNOD (checked: every mknod must work), so an
# open that fails with EPERM was refused by the device cgroup and nothing
# else; ENXIO, ENODEV or EIO mean the open got through to a driver (or to
# the lack of one: the fake GPU nodes have none). It prints NAME=denied or
# NAME=through(...) for: the guest's disk, a number no driver has, a GPU
# not asked for, every /dev/nvidia* node the container was given, the
# default nodes and a pts number.
disk=$(stat -c '%t %T' /dev/vda)
disk_major=$((0x${disk% *}))
disk_minor=$((0x${disk#* }))
probe='
opens() {
  if err=$(head -c1 "$1" 2>&1 >/dev/null); then echo "through(open)"; return; fi
  case "$err" in
    *"not permitted"*) echo denied ;;
    *"No such device or address"*) echo "through(ENXIO)" ;;
    *"No such device"*) echo "through(ENODEV)" ;;
    *"Input/output error"*) echo "through(EIO)" ;;
    *) echo "other($err)" ;;
  esac
}
node() {
  rm -f "/tmp/$1"
  if mknod "/tmp/$1" "$2" "$3" "$4" 2>/dev/null; then echo "$1=$(opens "/tmp/$1")"; else echo "$1=no-mknod"; fi
}
node disk b '"$disk_major $disk_minor"'
node c42 c 42 0
node gpu1 c 195 1
node pts c 136 0
for n in /dev/nvidia* /dev/nvidia-caps/* /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty; do
  [ -e "$n" ] && echo "$n=$(opens "$n")"
done
true'
# expect_devices LABEL OUTPUT: the rules hold in one probe's output.
expect_devices() {
  check "$1: CAP_MKNOD held (every mknod worked)" "" "$(echo "$2" | grep no-mknod)"
  check_contains "$1: the guest's disk is refused (EPERM)" "disk=denied" "$2"
  check_contains "$1: a number no driver has (c 42 0) is refused" "c42=denied" "$2"
  check_contains "$1: a GPU not asked for (c 195 1) is refused" "gpu1=denied" "$2"
  check_contains "$1: the requested /dev/nvidia0 opens" "/dev/nvidia0=through" "$2"
  check_contains "$1: /dev/nvidiactl opens" "/dev/nvidiactl=through" "$2"
  check "$1: no node the container was given is refused" "" "$(echo "$2" | grep '^/dev/.*=denied')"
  check "$1: the default nodes and pts open" "null zero full random urandom tty pts" \
    "$(for n in null zero full random urandom tty; do echo "$2" | grep -q "^/dev/$n=through" && printf '%s ' $n; done
       echo "$2" | grep -q '^pts=through' && echo pts)"
}
# In a user namespace mknod is refused whatever the rules, so the probe
# there opens nodes a mount binds in, open to all (0666): GPU 1 and c 42 0
# must fail with EPERM, which only the device rules give; /dev/null, bound
# the same way, must open.
uprobe="$(echo "$probe" | sed -n '/^opens()/,/^}/p')
echo uid=\$(id -u) host=\$(awk '{print \$2}' /proc/self/uid_map)
for n in /dev/nvidia0 /dev/nvidiactl /mnt/gpu1 /mnt/c42 /mnt/null; do echo \"\$n=\$(opens \$n)\"; done
ls /dev/nvidia1 2>/dev/null; nvidia-smi >/dev/null 2>&1; echo smi=\$?"
expect_userns_devices() {
  check_contains "$1: root is host uid 100000" "uid=0 host=100000" "$2"
  check_contains "$1: the requested /dev/nvidia0 opens" "/dev/nvidia0=through" "$2"
  check_contains "$1: /dev/nvidiactl opens" "/dev/nvidiactl=through" "$2"
  check_contains "$1: GPU 1, bound in by a mount, is refused (EPERM)" "/mnt/gpu1=denied" "$2"
  check_contains "$1: c 42 0, bound in by a mount, is refused (EPERM)" "/mnt/c42=denied" "$2"
  check_contains "$1: /dev/null, bound in the same way, opens" "/mnt/null=through" "$2"
  check_contains "$1: nvidia-smi exits 9" "smi=9" "$2"
  check "$1: GPU 1 is not in /dev" "" "$(echo "$2" | grep -x /dev/nvidia1)"
}
# A unit that has nothing to do with containers, to restart.
cat > /run/systemd/system/gpurun-unrelated.service <<'EOF'
[Service]
ExecStart=/bin/sleep 100000
EOF
systemctl daemon-reload
systemctl start gpurun-unrelated.service
# host_events: what may make systemd apply a unit's device program again.
host_events() {
  systemctl daemon-reload
  systemctl restart gpurun-unrelated.service
}

# --- gpurun --systemd-cgroup, straight from a shell ---
if case_on shell; then
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
# An update that names one limit leaves the others as they are (runc's
# reading: Docker sends 0 for every field it does not set).
echo '{"memory":{"limit":0,"reservation":0,"swap":0},"cpu":{"shares":0,"quota":0,"period":0,"cpus":"","mems":""},"pids":{"limit":50},"blockIO":{"weight":0}}' \
  | "$gpurun" --systemd-cgroup update --resources - $id
check "update with Docker's zeros: exit 0" 0 "$?"
check "the zeros left memory.max alone" 134217728 "$(cat "$scope/memory.max" 2>&1)"
check "the one limit given reached pids.max" 50 "$(cat "$scope/pids.max" 2>&1)"
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

# Once its last process exits, systemd removes the scope and its cgroup:
# `kill --all` of the exited container (what containerd's shim sends after
# every exit) has nothing left to signal and succeeds, as runc's does.
jq '.process.args = ["true"] | .linux.cgroupsPath = "system.slice:gpurun:sdexit"' \
  "$work/bb/config.json" > "$bundle/config.json"
"$gpurun" --systemd-cgroup create --bundle "$bundle" sdexit && "$gpurun" --systemd-cgroup start sdexit
wait_for sh -c "\"$gpurun\" state sdexit | grep -q '\"stopped\"'"
wait_for sh -c "! systemctl is-active --quiet gpurun-sdexit.scope"
"$gpurun" --systemd-cgroup kill --all sdexit 9
check "kill --all of an exited container whose scope systemd removed: exit 0" 0 "$?"
"$gpurun" --systemd-cgroup delete sdexit
check "delete of that container: exit 0" 0 "$?"

out=$("$gpurun" doctor 2>&1)
check_contains "doctor: device rules under systemd are enforced" "ok    device rules under systemd: enforced" "$out"

# A GPU container under --systemd-cgroup, with CAP_MKNOD: the rules hold
# from the start, through a reload, an unrelated restart and an update.
gpu="$work/sd-gpu"
mkdir -p "$gpu"
jq --arg root "$work/glibc" '.root.path = $root | .root.readonly = false
  | .linux.cgroupsPath = "system.slice:gpurun:sdgpu"
  | .process.capabilities |= with_entries(.value += ["CAP_MKNOD"])
  | .process.env += ["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility,compute"]
  | .process.args = ["sleep", "600"]' "$work/bb/config.json" > "$gpu/config.json"
"$gpurun" --systemd-cgroup $roots run -d --bundle "$gpu" sdgpu
check "--systemd-cgroup GPU run -d: exit 0" 0 "$?"
out=$("$gpurun" exec sdgpu sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?' 2>&1)
check_contains "--systemd-cgroup GPU container: nvidia-smi exits 9" "smi=9" "$out"
show=$(systemctl show -p DevicePolicy -p DeviceAllow gpurun-sdgpu.scope)
echo "systemd sees: $show"
check_contains "the unit's DevicePolicy is strict" "DevicePolicy=strict" "$show"
check_contains "the unit's DeviceAllow has the GPU" "/dev/char/195:0 rw" "$show"
check_contains "the unit's DeviceAllow has /dev/null" "/dev/char/1:3 rwm" "$show"
check "the unit's DeviceAllow has no GPU not asked for" "" "$(echo "$show" | grep -o '/dev/char/195:1 ')"
expect_devices "gpurun --systemd-cgroup" "$("$gpurun" exec sdgpu sh -c "$probe" 2>&1)"
host_events
expect_devices "gpurun --systemd-cgroup, after daemon-reload and an unrelated restart" \
  "$("$gpurun" exec sdgpu sh -c "$probe" 2>&1)"
"$gpurun" --systemd-cgroup update --memory 268435456 sdgpu
check "update of the GPU container: exit 0" 0 "$?"
check "update reaches the GPU container's MemoryMax" 268435456 "$(systemctl show -P MemoryMax gpurun-sdgpu.scope)"
expect_devices "gpurun --systemd-cgroup, after update" "$("$gpurun" exec sdgpu sh -c "$probe" 2>&1)"
systemctl daemon-reload
expect_devices "gpurun --systemd-cgroup, after update and a reload" "$("$gpurun" exec sdgpu sh -c "$probe" 2>&1)"
"$gpurun" delete --force sdgpu
wait_for sh -c "! systemctl is-active --quiet gpurun-sdgpu.scope"
check "the GPU container's scope is gone" inactive "$(systemctl is-active gpurun-sdgpu.scope 2>&1)"

# A GPU container in a user namespace started by root (hostUsers: false
# on a systemd node): root is host uid 100000, the GPU nodes are
# bind-mounted, and the rules are still exactly the nodes given. mknod is
# refused in a user namespace whatever the rules, so the spec bind-mounts
# in nodes that are open to all (0666): GPU 1 and c 42 0 must then fail
# with EPERM, which only the device rules give; /dev/null, bound the same
# way, opens.
ugpu="$work/sd-ugpu"
mkdir -p "$ugpu"
cp -a "$work/glibc" "$ugpu/rootfs"
chown -R 100000:100000 "$ugpu/rootfs"
jq --arg gpu1 "$host/dev/nvidia1" --arg c42 "$work/c42" '.root.path = "rootfs" | .root.readonly = false
  | .linux.cgroupsPath = "system.slice:gpurun:sdugpu"
  | .linux.namespaces += [{"type": "user"}]
  | .linux.uidMappings = [{"containerID": 0, "hostID": 100000, "size": 65536}]
  | .linux.gidMappings = [{"containerID": 0, "hostID": 100000, "size": 65536}]
  | .mounts += [{"source": $gpu1, "destination": "/mnt/gpu1", "type": "bind", "options": ["bind"]},
                {"source": $c42, "destination": "/mnt/c42", "type": "bind", "options": ["bind"]},
                {"source": "/dev/null", "destination": "/mnt/null", "type": "bind", "options": ["bind"]}]
  | .process.env += ["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility,compute"]
  | .process.args = ["sleep", "600"]' "$work/bb/config.json" > "$ugpu/config.json"
"$gpurun" --systemd-cgroup $roots run -d --bundle "$ugpu" sdugpu
check "--systemd-cgroup GPU run -d in a user namespace: exit 0" 0 "$?"
expect_userns_devices "userns, --systemd-cgroup" "$("$gpurun" exec sdugpu sh -c "$uprobe" 2>&1)"
host_events
expect_userns_devices "userns, --systemd-cgroup, after daemon-reload and an unrelated restart" \
  "$("$gpurun" exec sdugpu sh -c "$uprobe" 2>&1)"
"$gpurun" delete --force sdugpu
wait_for sh -c "! systemctl is-active --quiet gpurun-sdugpu.scope"
check "the user-namespace GPU container's scope is gone" inactive "$(systemctl is-active gpurun-sdugpu.scope 2>&1)"

fi

# --- GPU checkpoint and restore under the systemd driver ---
if case_on checkpoint; then
# A GPU container checkpointed and restored under the systemd driver: a
# CUDA worker on the host whose libcuda has the driver's checkpoint API,
# paused first (thawed for the driver through the unit, paused again),
# then stopped by its checkpoint and restored into a scope of its own.
# Its overlay rootfs on the guest's own /tmp (the shared checkout cannot
# be an overlay's upper layer).
# The checkpoint host too: the stand-in libcuda finds its own mapping in a
# process by device and inode, which the shared filesystem does not keep.
ck=$(mktemp -d /tmp/sd-ckpt.XXXXXX)
cp -a "$work/glibc" "$ck/lower"
cp -a "$work/fx/host-checkpoint" "$ck/host"
sed "s#$work/fx/host-checkpoint#$ck/host#g" "$work/fx/host-checkpoint/flags" > "$ck/flags"
if [ -d "$work/criu-root" ]; then
  cp -a "$work/criu-root" "$ck/criu-root"
  sed "s#$work/criu-root#$ck/criu-root#g" "$work/criu4" > "$ck/criu" && chmod 755 "$ck/criu"
else
  ln -s "$(readlink -f "$work/criu4")" "$ck/criu"
fi
mkdir -p "$ck/rootfs" "$ck/upper" "$ck/work" "$ck/log"
mount -t overlay overlay -o "lowerdir=$ck/lower,upperdir=$ck/upper,workdir=$ck/work" "$ck/rootfs"
jq --arg log "$ck/log" '.root.path = "rootfs" | .root.readonly = false
  | .linux.cgroupsPath = "system.slice:gpurun:sdckpt"
  | .mounts += [{"source": $log, "destination": "/log", "type": "bind", "options": ["rbind", "rw"]}]
  | .process.env += ["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility,compute"]
  | .process.args = ["cuda_worker", "8", "100", "/log/w"]' "$work/bb/config.json" > "$ck/config.json"
# Each command bounded: a hang fails its check instead of the suite.
sdg() {
  timeout 180 "$gpurun" --systemd-cgroup --criu "$ck/criu" $(cat "$ck/flags") "$@"
}
sdg run -d --bundle "$ck" sdckpt </dev/null >/dev/null 2>&1
ticks_reach 3 "$ck/log/w"
check "--systemd-cgroup: the CUDA worker works" 0 "$?"
sdg pause sdckpt
sdg checkpoint --leave-running --image-path "$ck/img1" sdckpt
check "--systemd-cgroup checkpoint --leave-running of a paused GPU container: exit 0" 0 "$?"
check "it stays paused" paused "$(sdg state sdckpt | jq -r .status)"
sdg resume sdckpt
at=$(ticks "$ck/log/w")
ticks_reach $((at + 3)) "$ck/log/w"
check "resumed, the worker works on" 0 "$?"
sdg checkpoint --image-path "$ck/img2" sdckpt
check "--systemd-cgroup checkpoint of a GPU container: exit 0" 0 "$?"
wait_for sh -c "! systemctl is-active --quiet gpurun-sdckpt.scope"
check "its scope is gone with it" inactive "$(systemctl is-active gpurun-sdckpt.scope 2>&1)"
at=$(ticks "$ck/log/w")
sdg restore -d --image-path "$ck/img2" --bundle "$ck" sdckpt2
check "--systemd-cgroup restore of a GPU container: exit 0" 0 "$?"
ticks_reach $((at + 3)) "$ck/log/w"
check "the restored worker works on" 0 "$?"
check "its device memory kept the pattern, never restarted" yes "$(worker_ok "$ck/log/w")"
check "the restored worker is in the scope" "0::/system.slice/gpurun-sdckpt.scope" \
  "$(cat "/proc/$(sdg state sdckpt2 | jq .pid)/cgroup" 2>&1)"
sdg delete --force sdckpt2
check "delete of the restored GPU container: exit 0" 0 "$?"
wait_for sh -c "! systemctl is-active --quiet gpurun-sdckpt.scope"
check "the restored GPU container's scope is gone" inactive "$(systemctl is-active gpurun-sdckpt.scope 2>&1)"
umount "$ck/rootfs"
rm -rf "$ck"
fi

# --- runc 1.1.5 beside it: the GPU as a CDI spec gives it (node and allow rule) ---
if case_on runc; then
rbundle="$work/sd-runc"
mkdir -p "$rbundle"
jq --arg root "$work/glibc" '.root.path = $root | .root.readonly = false
  | .linux.cgroupsPath = "system.slice:runc:sdrunc"
  | .process.capabilities |= with_entries(.value += ["CAP_MKNOD"])
  | .linux.devices += [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": 438}]
  | .linux.resources.devices += [{"allow": true, "type": "c", "major": 195, "minor": 0, "access": "rw"}]
  | .process.args = ["sleep", "600"]' "$work/bb/config.json" > "$rbundle/config.json"
runc --root /run/suite-runc --systemd-cgroup run -d --bundle "$rbundle" sdrunc >/dev/null 2>&1 </dev/null
check "runc 1.1.5 --systemd-cgroup run -d: exit 0" 0 "$?"
out=$(runc --root /run/suite-runc exec sdrunc sh -c "$probe" 2>&1)
check_contains "runc 1.1.5: its GPU opens at first" "/dev/nvidia0=through" "$out"
check_contains "runc 1.1.5: the disk is refused" "disk=denied" "$out"
systemctl daemon-reload
out=$(runc --root /run/suite-runc exec sdrunc sh -c "$probe" 2>&1)
# NVIDIA's "Failed to initialize NVML: Unknown Error": runc's list for
# systemd left out /dev/char/195:0, which does not exist on the host.
check_contains "runc 1.1.5: after daemon-reload its GPU is refused (what gpurun must not do)" \
  "/dev/nvidia0=denied" "$out"
runc --root /run/suite-runc delete --force sdrunc
fi

# --- containerd: ctr with the systemd cgroup driver, and CRI with SystemdCgroup = true ---
if case_on ctr || case_on cri; then
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
fi
if case_on ctr; then
out=$(ctr -a "$sock" run --rm --runc-binary "$gpurun" --runc-systemd-cgroup \
  --cgroup "system.slice:ctr:sdctr" --env NVIDIA_VISIBLE_DEVICES=0 \
  docker.io/gpurun-test/glibc:latest sdctr sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?; cat /proc/self/cgroup' 2>&1)
check_contains "ctr --runc-systemd-cgroup: the GPU was injected (nvidia-smi exits 9)" "smi=9" "$out"
check_contains "ctr --runc-systemd-cgroup: in its scope" "0::/system.slice/ctr-sdctr.scope" "$out"
check "ctr's scope is gone" inactive "$(systemctl is-active ctr-sdctr.scope 2>&1)"
# containerd's default capabilities include CAP_MKNOD.
ctr -a "$sock" run -d --runc-binary "$gpurun" --runc-systemd-cgroup \
  --cgroup "system.slice:ctr:sdprobe" --env NVIDIA_VISIBLE_DEVICES=0 \
  docker.io/gpurun-test/glibc:latest sdprobe sleep 600 >/dev/null 2>&1
check "ctr run -d --runc-systemd-cgroup: exit 0" 0 "$?"
ctr_probe() { ctr -a "$sock" task exec --exec-id "probe$1" sdprobe sh -c "$probe" 2>&1; }
expect_devices "ctr --runc-systemd-cgroup" "$(ctr_probe 1)"
host_events
expect_devices "ctr --runc-systemd-cgroup, after daemon-reload and an unrelated restart" "$(ctr_probe 2)"
ctr -a "$sock" task kill -s SIGKILL sdprobe >/dev/null 2>&1
wait_for sh -c "ctr -a '$sock' task ls | grep -q 'sdprobe.*STOPPED'"
ctr -a "$sock" task rm sdprobe >/dev/null 2>&1
ctr -a "$sock" container rm sdprobe >/dev/null 2>&1
check "ctr's probe scope is gone" inactive "$(systemctl is-active ctr-sdprobe.scope 2>&1)"
fi
if case_on cri; then
# A cgroup parent that is a slice, as a kubelet on the systemd driver
# gives a pod (it makes kubepods-*.slice first): containerd then hands the
# runtime "system.slice:cri-containerd:ID", a scope of its own.
export CRI_CLIENT_CGROUP_PARENT=system.slice
out=$(RUST_BACKTRACE=0 timeout 300 target/debug/cri-client "$sock" gpurun "docker.io/gpurun-test/glibc:latest" "$work/pod-logs" \
  'nvidia-smi >/dev/null 2>&1; echo smi=$?; cat /proc/self/cgroup; exit 3' NVIDIA_VISIBLE_DEVICES=0 2>&1)
check_contains "CRI with SystemdCgroup = true: exit code read back" "exit_code=3" "$out"
check_contains "CRI with SystemdCgroup = true: the GPU was injected" "smi=9" "$out"
check_contains "CRI with SystemdCgroup = true: the pod was removed" "pod removed" "$out"
# The CRI's default capabilities include CAP_MKNOD. Between the two
# probes the client updates the memory limit through
# UpdateContainerResources, and the host reloads systemd.
mkdir -p "$work/cri-sync"
out=$(CRI_CLIENT_SYNC="$work/cri-sync" CRI_CLIENT_UPDATE_MEMORY=268435456 \
  CRI_CLIENT_BETWEEN="systemctl daemon-reload; systemctl restart gpurun-unrelated.service
    systemctl list-units --type=scope --plain --no-legend | while read -r u rest; do
      echo \"\$u \$(systemctl show -P MemoryMax \$u)\"; done > '$work/cri-memorymax'" \
  RUST_BACKTRACE=0 timeout 300 target/debug/cri-client "$sock" gpurun "docker.io/gpurun-test/glibc:latest" "$work/pod-logs2" \
  "$probe
echo phase=1
while [ ! -e /sync/go ]; do sleep 0.2; done
echo ---after
echo memory.max=\$(cat /sys/fs/cgroup/memory.max)
$probe" NVIDIA_VISIBLE_DEVICES=0 2>&1)
expect_devices "CRI (SystemdCgroup = true)" "$(echo "$out" | sed '/^---after/,$d')"
expect_devices "CRI, after UpdateContainerResources, daemon-reload and an unrelated restart" \
  "$(echo "$out" | sed '1,/^---after/d')"
echo "$out" | grep -E '^(pod |updated |between: |Error)' | sed 's/^/  cri-client: /'
check_contains "CRI (SystemdCgroup = true): the container runs in its own scope unit" "cri-containerd-" "$(cat "$work/cri-memorymax" 2>&1)"
check_contains "CRI's UpdateContainerResources reaches the unit's MemoryMax" ".scope 268435456" "$(cat "$work/cri-memorymax" 2>&1)"
grep -q " 268435456" "$work/cri-memorymax" || sed 's/^/  scope: /' "$work/cri-memorymax"
check_contains "CRI's UpdateContainerResources reaches the container's memory.max" "memory.max=268435456" "$out"
unset CRI_CLIENT_CGROUP_PARENT
check "CRI: no cri-containerd scope left" "" \
  "$(systemctl list-units --all --plain --no-legend 'cri-containerd-*' | awk '$3 == "active"')"
check "nothing left in containerd's gpurun state" "" "$(state_left /run/containerd/runc/k8s.io)"
fi
stop_engines
pids=""

# --- Docker on the systemd cgroup driver ---
if case_on docker; then
jq --arg gpurun "$gpurun" '.runtimes = {"gpurun": {"path": $gpurun}}' /etc/docker/daemon.json > "$work/daemon.json"
cp "$work/daemon.json" /etc/docker/daemon.json
systemctl restart docker
check "dockerd uses the systemd cgroup driver" systemd "$(docker info -f '{{.CgroupDriver}}' 2>&1)"
check_contains "doctor names Docker's driver" "Docker: systemd" "$("$gpurun" doctor 2>&1)"
docker load -i "$work/glibc.tar" >/dev/null
out=$(docker run --rm --runtime=gpurun --network none -e NVIDIA_VISIBLE_DEVICES=0 \
  gpurun-test/glibc sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?' 2>&1)
check_contains "docker run --runtime=gpurun (systemd driver): nvidia-smi exits 9" "smi=9" "$out"
# AppArmor, which `gpurun features` says is supported: Docker's
# docker-default profile confines the container's process, as under runc.
gprof=$(docker run --rm --runtime=gpurun --network none gpurun-test/glibc cat /proc/self/attr/current 2>&1)
rprof=$(docker run --rm --runtime=runc --network none gpurun-test/glibc cat /proc/self/attr/current 2>&1)
check "AppArmor: docker-default confines the process, as under runc (gpurun / runc)" \
  "docker-default (enforce) / docker-default (enforce)" "$gprof / $rprof"
cid=$(docker run -d --runtime=gpurun --network none -m 64m --cap-add MKNOD \
  -e NVIDIA_VISIBLE_DEVICES=0 gpurun-test/glibc sleep 600)
check "docker's GPU container runs in its own scope unit" active "$(systemctl is-active "docker-$cid.scope" 2>&1)"
check "docker -m 64m lands in the scope's memory.max" 67108864 \
  "$(cat "/sys/fs/cgroup/system.slice/docker-$cid.scope/memory.max" 2>&1)"
expect_devices "docker --runtime=gpurun" "$(docker exec "$cid" sh -c "$probe" 2>&1)"
host_events
expect_devices "docker --runtime=gpurun, after daemon-reload and an unrelated restart" \
  "$(docker exec "$cid" sh -c "$probe" 2>&1)"
# docker update, against runc's result for the same request. (runc 1.1.5
# writes a block I/O weight only to io.weight, gpurun to the unit's
# IOWeight too, so that property is checked on its own.)
rid=$(docker run -d --runtime=runc --network none -m 64m --cap-add MKNOD gpurun-test/glibc sleep 600)
limits() { # CID: the unit's properties and the cgroup files docker update changes
  unit="docker-$1.scope"
  dir="/sys/fs/cgroup/system.slice/$unit"
  systemctl show -p MemoryMax -p MemorySwapMax -p CPUQuotaPerSecUSec -p AllowedCPUs -p TasksMax "$unit" | sort | tr '\n' ' '
  for f in memory.max memory.swap.max cpu.max cpuset.cpus pids.max io.weight io.bfq.weight; do
    printf '%s=%s ' "$f" "$(cat "$dir/$f" 2>/dev/null | head -1)"
  done
}
for update in "--memory 128m --memory-swap 256m" "--cpus 0.5" "--cpuset-cpus 0" "--pids-limit 30" "--blkio-weight 300"; do
  # shellcheck disable=SC2086
  gout=$(docker update $update "$cid" 2>&1); grc=$?
  # shellcheck disable=SC2086
  rout=$(docker update $update "$rid" 2>&1); rrc=$?
  check "docker update $update: exit status as runc's" "$rrc" "$grc"
  [ "$grc" = 0 ] || echo "  gpurun: $gout / runc: $rout"
  check "docker update $update: unit and cgroup as runc's" "$(limits "$rid")" "$(limits "$cid")"
done
check "docker update: memory.max under gpurun" 134217728 \
  "$(cat "/sys/fs/cgroup/system.slice/docker-$cid.scope/memory.max" 2>&1)"
check "docker update: pids.max under gpurun" 30 \
  "$(cat "/sys/fs/cgroup/system.slice/docker-$cid.scope/pids.max" 2>&1)"
check "docker update: AllowedCPUs on gpurun's unit" 0 "$(systemctl show -P AllowedCPUs "docker-$cid.scope")"
check "docker update --blkio-weight 300: the unit's IOWeight under gpurun" 2930 \
  "$(systemctl show -P IOWeight "docker-$cid.scope")"
expect_devices "docker --runtime=gpurun, after docker update" "$(docker exec "$cid" sh -c "$probe" 2>&1)"
systemctl daemon-reload
expect_devices "docker --runtime=gpurun, after docker update and a reload" \
  "$(docker exec "$cid" sh -c "$probe" 2>&1)"
docker rm -f "$cid" "$rid" >/dev/null
check "no docker scope left" "" \
  "$(systemctl list-units --all --plain --no-legend 'docker-*.scope' | awk '$3 == "active"')"

# Docker's userns-remap on the systemd driver: each container in a user
# namespace started by root (root is dockremap's first subordinate id), a
# GPU given; GPU 1 and c 42 0, bound in by volumes and open to all, fail
# with EPERM, which only the device rules give.
jq '. + {"userns-remap": "default"}' "$work/daemon.json" > /etc/docker/daemon.json
systemctl restart docker
docker load -i "$work/glibc.tar" >/dev/null
remap=$(awk -F: '$1 == "dockremap" {print $2; exit}' /etc/subuid)
out=$(docker run --rm --runtime=gpurun --network none -e NVIDIA_VISIBLE_DEVICES=0 \
  -v "$host/dev/nvidia1:/mnt/gpu1" -v "$work/c42:/mnt/c42" -v /dev/null:/mnt/null \
  gpurun-test/glibc sh -c "$uprobe" 2>&1)
check_contains "userns-remap (systemd driver): root is dockremap's first subordinate id" "uid=0 host=$remap" "$out"
check_contains "userns-remap: the requested /dev/nvidia0 opens" "/dev/nvidia0=through" "$out"
check_contains "userns-remap: GPU 1, bound in by a volume, is refused (EPERM)" "/mnt/gpu1=denied" "$out"
check_contains "userns-remap: c 42 0, bound in by a volume, is refused (EPERM)" "/mnt/c42=denied" "$out"
check_contains "userns-remap: /dev/null, bound in the same way, opens" "/mnt/null=through" "$out"
check_contains "userns-remap: nvidia-smi exits 9" "smi=9" "$out"
cp "$work/daemon.json" /etc/docker/daemon.json
systemctl restart docker
fi

# --- rootful Podman with the systemd cgroup manager ---
if case_on podman; then
podman load -i "$work/glibc.tar" >/dev/null 2>&1
check "rootful podman uses the systemd cgroup manager" systemd "$(podman info -f '{{.Host.CgroupManager}}' 2>&1)"
pid_=$(podman --runtime "$gpurun" run -d --network none --cap-add MKNOD -e NVIDIA_VISIBLE_DEVICES=0 \
  gpurun-test/glibc sleep 600 2>&1)
check "rootful podman --runtime gpurun run -d: a container" 64 "${#pid_}"
out=$(podman exec "$pid_" sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?' 2>&1)
check_contains "rootful podman GPU container: nvidia-smi exits 9" "smi=9" "$out"
expect_devices "rootful podman" "$(podman exec "$pid_" sh -c "$probe" 2>&1)"
host_events
expect_devices "rootful podman, after daemon-reload and an unrelated restart" \
  "$(podman exec "$pid_" sh -c "$probe" 2>&1)"
if podman update --help >/dev/null 2>&1; then
  podman update --memory 256m "$pid_" >/dev/null
  check "podman update: exit 0" 0 "$?"
  check "podman update reaches the unit's MemoryMax" 268435456 "$(systemctl show -P MemoryMax "libpod-$pid_.scope")"
  expect_devices "rootful podman, after podman update" "$(podman exec "$pid_" sh -c "$probe" 2>&1)"
fi
podman rm -f "$pid_" >/dev/null 2>&1
check "no podman scope left" "" \
  "$(systemctl list-units --all --plain --no-legend 'libpod-*.scope' | awk '$3 == "active"')"
# Rootful Podman with --userns=auto on the systemd driver (a user
# namespace started by root): a GPU, and the rules exactly the node given.
# (Podman 5 looks the ranges up by a user that must exist.)
id containers >/dev/null 2>&1 || useradd --system --no-create-home containers
for f in /etc/subuid /etc/subgid; do
  grep -q '^containers:' "$f" || echo "containers:2000000:1000000" >> "$f"
done
out=$(podman --runtime "$gpurun" run --rm --userns=auto --network none \
  --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 -e NVIDIA_VISIBLE_DEVICES=0 \
  -v "$host/dev/nvidia1:/mnt/gpu1" -v "$work/c42:/mnt/c42" -v /dev/null:/mnt/null \
  gpurun-test/glibc sh -c "$uprobe" 2>&1)
mapped=$(echo "$out" | sed -n 's/^uid=0 host=\([0-9]*\)$/\1/p')
check "podman --userns=auto (systemd driver): root is a subordinate id of containers" yes \
  "$([ "${mapped:-0}" -ge 2000000 ] && echo yes)"
check_contains "podman --userns=auto: the requested /dev/nvidia0 opens" "/dev/nvidia0=through" "$out"
check_contains "podman --userns=auto: GPU 1, bound in by a volume, is refused (EPERM)" "/mnt/gpu1=denied" "$out"
check_contains "podman --userns=auto: c 42 0, bound in by a volume, is refused (EPERM)" "/mnt/c42=denied" "$out"
check_contains "podman --userns=auto: /dev/null, bound in the same way, opens" "/mnt/null=through" "$out"
check_contains "podman --userns=auto: nvidia-smi exits 9" "smi=9" "$out"
fi

# --- A Quadlet unit (Podman's systemd integration) with a GPU by CDI name:
# NVIDIA's own spec, gpurun as the runtime, CAP_MKNOD held, the probe run
# as the unit's service; its output is the unit's journal.
if case_on quadlet; then
mkdir -p /var/run/cdi /etc/containers/systemd
cp "$work/nvidia-cdi.json" /var/run/cdi/nvidia-e2e.json
podman load -i "$work/glibc.tar" >/dev/null 2>&1
printf '%s\n' "$probe" 'nvidia-smi >/dev/null 2>&1; echo smi=$?' > "$work/quadlet-probe.sh"
cat > /etc/containers/systemd/gpurun-quadlet.container <<EOF
[Unit]
Description=A GPU container from a Quadlet file
[Container]
Image=docker.io/gpurun-test/glibc:latest
GlobalArgs=--runtime=$gpurun
AddDevice=nvidia.com/gpu=0
AddCapability=MKNOD
Network=none
Volume=$work/quadlet-probe.sh:/probe.sh:ro
Exec=sh /probe.sh
[Service]
Restart=no
EOF
systemctl daemon-reload
check "Quadlet made the unit" 0 "$(systemctl cat gpurun-quadlet.service >/dev/null 2>&1; echo $?)"
systemctl start gpurun-quadlet.service
wait_for sh -c "! systemctl is-active --quiet gpurun-quadlet.service"
out=$(journalctl -u gpurun-quadlet.service -o cat --no-pager 2>&1 | grep -E '^(/dev/|disk=|c42=|gpu1=|pts=|smi=)')
check "Quadlet: the unit ran to success" "success" "$(systemctl show -P Result gpurun-quadlet.service)"
check_contains "Quadlet --device nvidia.com/gpu=0: nvidia-smi exits 9" "smi=9" "$out"
expect_devices "Quadlet unit" "$out"
rm -f /etc/containers/systemd/gpurun-quadlet.container /var/run/cdi/nvidia-e2e.json
systemctl daemon-reload
fi

if case_on cdi; then
# --- CDI under the systemd driver: NVIDIA's own spec, whose nvidia-cdi-hook
# is not installed; gpurun does the hooks' work and the device rules the
# spec's nodes bring hold as an env request's do.
mkdir -p /var/run/cdi
cp "$work/nvidia-cdi.json" /var/run/cdi/nvidia-e2e.json
podman load -i "$work/glibc.tar" >/dev/null 2>&1
smi_and_cache='nvidia-smi >/dev/null 2>&1; echo smi=$? libcuda=$(ldconfig -p | grep -c libcuda.so.1)'
pid_=$(podman --runtime "$gpurun" run -d --network none --cap-add MKNOD --device nvidia.com/gpu=0 \
  gpurun-test/glibc sleep 600 2>&1)
check "rootful podman --device nvidia.com/gpu=0 (NVIDIA's spec): a container" 64 "${#pid_}"
check "CDI: nvidia-smi exits 9, libcuda in the linker cache" "smi=9 libcuda=1" \
  "$(podman exec "$pid_" sh -c "$smi_and_cache" 2>&1)"
expect_devices "rootful podman CDI" "$(podman exec "$pid_" sh -c "$probe" 2>&1)"
host_events
expect_devices "rootful podman CDI, after daemon-reload and an unrelated restart" \
  "$(podman exec "$pid_" sh -c "$probe" 2>&1)"
podman rm -f "$pid_" >/dev/null 2>&1
# containerd 1.6's way: the name in an annotation, resolved by gpurun from
# /var/run/cdi, in a systemd scope.
bundle="$work/cdi-bundle"
mkdir -p "$bundle"
jq --arg root "$work/glibc" --arg probe "$smi_and_cache" '.root.path = $root
  | .process.args = ["sh", "-c", $probe]
  | .process.env += ["NVIDIA_VISIBLE_DEVICES=all"]
  | .annotations = {"cdi.k8s.io/gpu": "nvidia.com/gpu=0"}
  | .linux.cgroupsPath = "system.slice:gpurun:cdiann"' "$work/bb/config.json" > "$bundle/config.json"
out=$("$gpurun" --systemd-cgroup run --bundle "$bundle" cdiann 2>"$work/cdiann.err")
check "gpurun --systemd-cgroup run with a cdi.k8s.io annotation: NVIDIA's spec resolved, hooks done" \
  "smi=9 libcuda=1" "$out"
check_contains "the image's NVIDIA_VISIBLE_DEVICES=all is passed over, and said so" \
  'ignoring env "NVIDIA_VISIBLE_DEVICES=all": the CDI annotations name the devices' "$(cat "$work/cdiann.err")"
check "no gpurun-cdiann scope left" inactive "$(systemctl is-active gpurun-cdiann.scope 2>&1)"
rm -f /var/run/cdi/nvidia-e2e.json
fi

if case_on rootless; then
# --- rootless Podman in a systemd user session: a delegated cgroup ---
user=gpurun-podman
useradd -m -s /bin/sh "$user"
# useradd gives the user subordinate ids after those already taken (by
# dockremap, if the docker case ran); a range only if it gave none.
for f in /etc/subuid /etc/subgid; do
  grep -q "^$user:" "$f" || echo "$user:300000:65536" >> "$f"
done
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
fi

summary systemd
