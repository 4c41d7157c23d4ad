#!/bin/sh
# The container and GPU checks an aarch64 guest runs (scripts/ci/guest-aarch64.sh
# boots it): the arm64 gpurun over an arm64 fake GPU host, on an arm64
# kernel with pure cgroup v2. Each check prints "ok: NAME" or
# "FAIL: NAME: why"; the last line is "suite: N passed, M failed" and the
# status is 1 if any failed.
#   sh tests/aarch64/suite.sh WORK PAGE_SIZE    (as root, in the guest)
# WORK holds gpurun, host/ (the fake host; host/flags) and image/ (an arm64
# glibc image with ldconfig, busybox, /opt/cudart and cuda_probe).
set -u
work=${1:?usage: suite.sh WORK PAGE_SIZE}
pages=${2:?usage: suite.sh WORK PAGE_SIZE}
bin=$work/gpurun
image=$work/image
flags=$(cat "$work/host/flags")
state=/run/gpurun-suite
t=$(mktemp -d /tmp/suite.XXXXXX)
chmod 755 "$t"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
expect() { # NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: expected '$2', got '$3'"; fi
}
has() { # NAME NEEDLE HAYSTACK
  case "$3" in *"$2"*) ok "$1" ;; *) bad "$1: no '$2' in: $(echo "$3" | tr '\n' '|' | cut -c1-400)" ;; esac
}
matches() { # NAME ERE HAYSTACK
  if echo "$3" | grep -qE -- "$2"; then ok "$1"; else bad "$1: nothing matches '$2' in: $(echo "$3" | tr '\n' '|' | cut -c1-400)"; fi
}
# gpurun as root, with the fake host's flags and the suite's own state dir.
g() { "$bin" --root "$state" $flags "$@"; }
# A bundle at DIR over ROOTFS (read-only) running ARGS (a JSON array); FILTER
# is a jq program applied last. SPEC_FLAGS: `gpurun spec`'s flags (--rootless).
bundle() { # DIR ROOTFS ARGS FILTER
  mkdir -p "$1"
  (cd "$1" && "$bin" spec ${SPEC_FLAGS:-}) || return 1
  jq --arg root "$2" --argjson args "$3" \
    ".root.path = \$root | .process.terminal = false | .process.args = \$args | $4" \
    "$1/config.json" > "$1/c.json" && mv "$1/c.json" "$1/config.json"
}
tmp_mount='.mounts += [{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev"]}]'
gpu_env='.process.env += ["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]'
# What a GPU container reports: the ladder's rungs, the linker cache as
# the image's own ldconfig reads it, the device node, mount points.
gpu_probe='["sh", "-c", "nvidia-smi >/dev/null 2>&1; echo smi=$?; cuda_probe >/dev/null 2>&1; echo cuda=$?; ldconfig -p; stat -c \"node=%F %t:%T\" /dev/nvidia0; cat /proc/self/mountinfo"]'
# The image's fingerprint: every path's type, mode, owner, size, time, and
# every file's content.
fingerprint() {
  { find "$1" -exec stat -c '%n %f %u %g %s %Y' {} +; find "$1" -type f -exec md5sum {} +; } | sort | md5sum
}
# The cgroups but the guest's own and gpurun's parent (/gpurun, which stays).
cgroups() { find /sys/fs/cgroup -mindepth 1 -type d | grep -v -e '^/sys/fs/cgroup/vm-keys' -e '^/sys/fs/cgroup/gpurun$' | sort; }

# What the host looks like before: compared at the end.
image_before=$(fingerprint "$image")
cgroups > "$t/cgroups.before"
mounts_before=$(wc -l < /proc/self/mountinfo)

expect "kernel: the page size is the one this kernel was built for" "$pages" "$(getconf PAGESIZE)"
expect "kernel: pure cgroup v2" cgroup2fs "$(stat -f -c %T /sys/fs/cgroup)"

# Lifecycle.
bundle "$t/exit" "$image" '["sh", "-c", "exit 7"]' '.'
g run --bundle "$t/exit" exit7 </dev/null >/dev/null 2>&1
expect "run: the process's exit status" 7 "$?"
bundle "$t/life" "$image" '["sleep", "300"]' \
  '.linux.resources.memory.limit = 67108864 | .linux.resources.pids.limit = 32 | .linux.namespaces += [{"type": "cgroup"}]'
g create --bundle "$t/life" life </dev/null >/dev/null 2>&1
expect "create: state is created" created "$(g state life | jq -r .status)"
g start life
expect "start: state is running" running "$(g state life | jq -r .status)"
pid=$(g state life | jq -r .pid)
cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
expect "cgroup: memory.max from the spec" 67108864 "$(cat "/sys/fs/cgroup$cg/memory.max" 2>&1)"
expect "cgroup: pids.max from the spec" 32 "$(cat "/sys/fs/cgroup$cg/pids.max" 2>&1)"
# (A process outside the init's cgroup would see a path with "..".)
expect "exec: in the init's cgroup, the namespace's root" "0::/" "$(g exec life cat /proc/self/cgroup 2>&1)"
expect "exec: reads the limit inside" 67108864 "$(g exec life cat /sys/fs/cgroup/memory.max 2>&1)"
g exec life sh -c 'exit 3' </dev/null >/dev/null 2>&1
expect "exec: the process's exit status" 3 "$?"
g kill life KILL
n=0
while [ "$(g state life | jq -r .status)" != stopped ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
expect "kill: state is stopped" stopped "$(g state life | jq -r .status)"
g delete life
[ -e "/sys/fs/cgroup$cg" ] && bad "delete: the cgroup $cg is left" || ok "delete: the cgroup is removed"
g state life >/dev/null 2>&1
expect "delete: state reports no container (runc's status 1)" 1 "$?"

# Seccomp, aarch64's own filter: mkdir(2) is mkdirat there.
seccomp='.linux.seccomp = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_AARCH64"],
  "syscalls": [{"names": ["mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}'
bundle "$t/seccomp" "$image" '["sh", "-c", "mkdir /tmp/x 2>&1; echo rc=$?"]' "$tmp_mount | $seccomp"
has "seccomp: mkdirat refused with EPERM" "Operation not permitted" "$(g run --bundle "$t/seccomp" sec1 2>&1 </dev/null)"
bundle "$t/noseccomp" "$image" '["sh", "-c", "mkdir /tmp/x 2>&1; echo rc=$?"]' "$tmp_mount"
expect "seccomp: the same mkdir without the filter" rc=0 "$(g run --bundle "$t/noseccomp" sec2 2>&1 </dev/null)"

# The device cgroup (an eBPF program on v2): with CAP_MKNOD, a block node
# is made, and opening it is EPERM; allowed in the spec, the open reaches
# the kernel (no such disk here: ENXIO).
mknod='["sh", "-c", "mknod /dev/blk b 8 0 && head -c 1 /dev/blk; echo rc=$?"]'
cap='.process.capabilities.bounding += ["CAP_MKNOD"] | .process.capabilities.effective += ["CAP_MKNOD"]
  | .process.capabilities.permitted += ["CAP_MKNOD"]'
bundle "$t/devdeny" "$image" "$mknod" "$cap"
has "device cgroup: open of an unlisted node is EPERM" "Operation not permitted" \
  "$(g run --bundle "$t/devdeny" dev1 2>&1 </dev/null)"
bundle "$t/devallow" "$image" "$mknod" \
  "$cap | .linux.resources.devices += [{\"allow\": true, \"type\": \"b\", \"major\": 8, \"minor\": 0, \"access\": \"rwm\"}]"
has "device cgroup: the same node allowed reaches the kernel (ENXIO)" "No such device or address" \
  "$(g run --bundle "$t/devallow" dev2 2>&1 </dev/null)"

# The GPU ladder, as root.
bundle "$t/nogpu" "$image" "$gpu_probe" '.'
out=$(g run --bundle "$t/nogpu" nogpu 2>&1 </dev/null)
has "gpu: no request: nvidia-smi is not there (127)" smi=127 "$out"
has "gpu: no request: cudaGetDeviceCount without libcuda (35)" cuda=35 "$out"
smi=$(find "$work/host/driver" -name nvidia-smi -type f | head -1)
bundle "$t/smionly" "$image" '["sh", "-c", "/tmp/nvidia-smi >/dev/null 2>&1; echo smi=$?"]' \
  "$tmp_mount | .mounts += [{\"destination\": \"/tmp/nvidia-smi\", \"type\": \"bind\", \"source\": \"$smi\", \"options\": [\"bind\", \"ro\"]}]"
expect "gpu: nvidia-smi alone, without libnvidia-ml.so.1 (12)" smi=12 "$(g run --bundle "$t/smionly" smionly 2>&1 </dev/null)"
gpu_checks() { # WHO OUTPUT
  has "gpu $1: nvidia-smi with its library resolved (9)" smi=9 "$2"
  has "gpu $1: cudaGetDeviceCount with libcuda, no GPU answering (100)" cuda=100 "$2"
  for lib in libnvidia-ml.so.1 libcuda.so.1; do
    matches "gpu $1: the image's ldconfig reads $lib's aarch64 entry" \
      "^[[:space:]]*$lib \(libc6,AArch64[^)]*\) => /usr/lib/aarch64-linux-gnu/$lib\$" "$2"
  done
  has "gpu $1: /dev/nvidia0 is the host's 195:0" "node=character special file c3:0" "$2"
}
bundle "$t/gpu" "$image" "$gpu_probe" "$gpu_env"
gpu_checks root "$(g run --bundle "$t/gpu" gpu 2>&1 </dev/null)"

# Root-started, in a user namespace (Kubernetes hostUsers: false): nodes
# are bound, not made.
userns='.linux.namespaces += [{"type": "user"}] | .linux.uidMappings = [{"containerID": 0, "hostID": 100000, "size": 65536}]
  | .linux.gidMappings = [{"containerID": 0, "hostID": 100000, "size": 65536}]'
bundle "$t/gpuns" "$image" "$gpu_probe" "$gpu_env | $userns"
out=$(g run --bundle "$t/gpuns" gpuns 2>&1 </dev/null)
gpu_checks "in a user namespace" "$out"
has "gpu in a user namespace: /dev/nvidia0 is a bind mount" " /dev/nvidia0 " "$out"

# Rootless: uid 1000, its own state dir, `gpurun spec --rootless`.
id gpu >/dev/null 2>&1 || useradd -m -u 1000 gpu
mkdir -p /run/user/1000 && chown gpu:gpu /run/user/1000 && chmod 700 /run/user/1000
as_user() { setpriv --reuid 1000 --regid 1000 --init-groups env HOME=/home/gpu XDG_RUNTIME_DIR=/run/user/1000 "$@"; }
# (The spec is made here as root: its mappings are set to the user's.)
own='.linux.uidMappings = [{"containerID": 0, "hostID": 1000, "size": 1}]
  | .linux.gidMappings = [{"containerID": 0, "hostID": 1000, "size": 1}]'
SPEC_FLAGS=--rootless bundle "$t/rootless" "$image" "$gpu_probe" "$gpu_env | $own"
chown -R gpu:gpu "$t/rootless"
out=$(as_user "$bin" --root /run/user/1000/gpurun $flags run --bundle "$t/rootless" rootless 2>&1 </dev/null)
gpu_checks rootless "$out"
has "gpu rootless: /dev/nvidia0 is a bind mount" " /dev/nvidia0 " "$out"

# Hostile images: nothing made or mounted outside the rootfs.
outside=$(mktemp -d /tmp/outside.XXXXXX)
echo "the host's" > "$outside/ptmx"
cp -a "$image" "$t/devsym"
rm -rf "$t/devsym/dev" && ln -s "$outside" "$t/devsym/dev"
bundle "$t/devsymb" "$t/devsym" '["sh", "-c", "test -c /dev/null && test -L /dev/fd && echo inside"]' \
  '.root.readonly = false | .mounts |= map(select(.destination | startswith("/dev") | not))'
expect "hostile: /dev a symlink out, no /dev mount: made inside" inside "$(g run --bundle "$t/devsymb" devsym 2>&1 </dev/null)"
expect "hostile: /dev a symlink out: nothing made outside" ptmx "$(ls -A "$outside" | tr '\n' ' ' | sed 's/ $//')"
expect "hostile: /dev a symlink out: the host's ptmx kept" "the host's" "$(cat "$outside/ptmx")"
rm -f "$outside/ptmx"
cp -a "$image" "$t/mntsym"
ln -s "$outside" "$t/mntsym/mnt"
mkdir -p "$t/src" && echo marker > "$t/src/marker"
bundle "$t/mntsymb" "$t/mntsym" '["cat", "/mnt/x/marker"]' \
  ".root.readonly = false | .mounts += [{\"destination\": \"/mnt/x\", \"type\": \"bind\", \"source\": \"$t/src\", \"options\": [\"bind\"]}]"
expect "hostile: a mount through a symlink out lands inside" marker "$(g run --bundle "$t/mntsymb" mntsym 2>&1 </dev/null)"
expect "hostile: a mount through a symlink out: nothing made outside" "" "$(ls -A "$outside")"
grep -q " $outside" /proc/self/mountinfo && bad "hostile: a mount is left on $outside" || ok "hostile: nothing mounted outside"

# Nothing left behind, the image untouched.
expect "after: no container left" "" "$(g list -q 2>&1)"
cgroups > "$t/cgroups.after"
expect "after: no cgroup left" "" "$(diff "$t/cgroups.before" "$t/cgroups.after")"
expect "after: no mount left" "$mounts_before" "$(wc -l < /proc/self/mountinfo)"
expect "after: the image is untouched" "$image_before" "$(fingerprint "$image")"

echo "suite: $passed passed, $failed failed"
[ "$failed" = 0 ]
