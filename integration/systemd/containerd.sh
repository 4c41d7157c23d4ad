# The systemd suite's "containerd" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
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
