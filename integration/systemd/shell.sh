# The systemd suite's "shell" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
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

# The create waits on the bus for its scope's start job (JobRemoved) or
# its process in the scope's cgroup, whichever comes first: a `run` makes
# no sleeping call (it slept 20 ms at a time on every start before). The
# runtime starts the scope for the init it cloned straight into the new
# pid namespace, with no intermediate process.
hostlib=/host/lib/x86_64-linux-gnu
jq '.process.args = ["sh", "-c", "echo pid=$$; cat /proc/self/cgroup"]
  | .linux.cgroupsPath = "system.slice:gpurun:sdnosleep"' \
  "$work/bb/config.json" > "$bundle/config.json"
out=$("$hostlib/ld-linux-x86-64.so.2" --library-path "$hostlib:/host/usr/lib/x86_64-linux-gnu" \
  /host/usr/bin/strace -f -o /tmp/sdnosleep.trace \
  -e trace=nanosleep,clock_nanosleep,clone,clone3,prctl \
  "$gpurun" --systemd-cgroup run --bundle "$bundle" sdnosleep)
check "--systemd-cgroup run under strace: exit 0" 0 "$?"
check "a --systemd-cgroup start makes no sleeping call" 0 \
  "$(grep -c nanosleep /tmp/sdnosleep.trace)"
check "no intermediate process under the systemd driver" 0 "$(grep -c 'INTER]' /tmp/sdnosleep.trace)"
check "one clone, into the new pid namespace" 1 "$(grep -c 'clone.*CLONE_NEWPID' /tmp/sdnosleep.trace)"
check_contains "the init is pid 1 in its namespace" "pid=1" "$out"
check_contains "the init is in its scope" "0::/system.slice/gpurun-sdnosleep.scope" "$out"

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


# A container with no cgroup namespace of its own sees the host's whole
# hierarchy at /sys/fs/cgroup, as runc gives it, and its start leaves the
# host's cgroup2 options (systemd's nsdelegate) as they were: gpurun binds
# the host's mount, where a new mount's options would be applied to the
# host's hierarchy (and, since kernel 6.18, wait for an RCU grace period).
host_options() { awk '$5 == "/sys/fs/cgroup" {print $NF}' /proc/self/mountinfo; }
before=$(host_options)
check_contains "systemd mounts cgroup2 with nsdelegate" nsdelegate "$before"
nocgns="$work/sd-nocgns"
cp -a "$work/bb" "$nocgns"
jq '.linux.namespaces |= map(select(.type != "cgroup"))
  | .process.args = ["sh", "-c", "test -d /sys/fs/cgroup/init.scope && echo whole; grep -c \" /sys/fs/cgroup \" /proc/self/mountinfo"]' \
  "$work/bb/config.json" > "$nocgns/config.json"
check "no cgroup namespace: the host's whole hierarchy, one mount" "whole
1" "$("$gpurun" run --bundle "$nocgns" sdnocgns 2>&1)"
check "the host's cgroup2 options are unchanged by the start" "$before" "$(host_options)"

# With no mount on /dev, an image whose /dev is a symlink to a host
# directory gets its nodes and links inside the root, where the symlink
# leads there: nothing is made in the host's directory and its ptmx stays
# (libcontainer made the links there and replaced the ptmx).
victim=$(mktemp -d)
echo "the host's" > "$victim/ptmx"
devsym="$work/devsym-bundle"
cp -a "$work/bb" "$devsym"
rm -rf "$devsym/rootfs/dev"
ln -s "$victim" "$devsym/rootfs/dev"
jq '.process.args = ["sh", "-c", "test -c /dev/null && test -L /dev/fd && echo ok"]
  | .mounts |= map(select(.destination | startswith("/dev") | not))
  | .linux.cgroupsPath = "system.slice:gpurun:sddevsym"' \
  "$work/bb/config.json" > "$devsym/config.json"
out=$("$gpurun" --systemd-cgroup run --bundle "$devsym" sddevsym 2>/tmp/devsym.err)
check "a /dev symlinked to a host directory, no /dev mount: exit 0" 0 "$?"
check "its nodes and links are in the container's /dev" ok "$out"
check "nothing is made in the host's directory" ptmx "$(ls "$victim")"
check "the host directory's ptmx is kept" "the host's" "$(cat "$victim/ptmx")"
