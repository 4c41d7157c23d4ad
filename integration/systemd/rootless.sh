# The systemd suite's "rootless" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
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
