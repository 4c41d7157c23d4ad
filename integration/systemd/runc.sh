# The systemd suite's "runc" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
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
