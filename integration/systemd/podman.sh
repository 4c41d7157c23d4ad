# The systemd suite's "podman" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
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
