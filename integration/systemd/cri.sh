# The systemd suite's "cri" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
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
