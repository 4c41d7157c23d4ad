# The systemd suite's "ctr" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
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
