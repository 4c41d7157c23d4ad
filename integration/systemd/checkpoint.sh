# The systemd suite's "checkpoint" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
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
