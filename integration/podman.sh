#!/bin/sh
# Podman 4.3 end to end, rootless, as the unprivileged user gpurun-test with
# a private HOME: `gpurun setup podman` registers the runtime in the user's
# containers.conf, `podman --runtime gpurun run` runs a locally loaded
# image, and `podman run --device nvidia.com/gpu=0` applies a CDI spec
# (the one `gpurun gpu cdi` writes, then NVIDIA's own form, whose
# nvidia-cdi-hook is not installed) to a Debian-layout and a RHEL-layout
# (/usr/lib64) image: gpurun does the spec's hooks natively.
# Usage: integration/podman.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
. integration/lib/common.sh
suite_start podman.sh "${1:-}"
made_nodes=""
cdi_spec=/var/run/cdi/gpurun-e2e.json
user=gpurun-test
added_subids=""
wrote_config=""
# The system config as it was before the --userns=auto runs wrote it.
restore_config() {
  if [ -e "$work/saved-config.toml" ]; then cp "$work/saved-config.toml" /etc/gpurun/config.toml; else rm -f /etc/gpurun/config.toml; fi
  wrote_config=""
}
cleanup() {
  pkill -U "$user" -f 'catatonit|podman' 2>/dev/null || true
  rm -f "$cdi_spec"
  for f in $added_subids; do sed -i '/^containers:2000000:1000000$/d' "$f"; done
  [ -z "$wrote_config" ] || restore_config
  for n in $made_nodes; do rm -f "$n"; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
make_fixtures
chmod -R a+rX "$work"

sh scripts/fixtures/test-user.sh "$user"
home="$work/home"
mkdir -p "$home/run"
chown -R "$user" "$home"
chmod 700 "$home/run"
as_user() { su -s /bin/sh "$user" -c "export HOME=$home XDG_RUNTIME_DIR=$home/run; cd $home; $*"; }

# The fake host's nodes in /dev for the rootless runtime (common.sh).
make_host_nodes
# Podman 4.3 reads CDI specs from /etc/cdi and /var/run/cdi only.
mkdir -p /var/run/cdi
# A RHEL/UBI-layout image: libraries in /usr/lib64 only.
sh scripts/fixtures/glibc-rootfs.sh "$work/glibc64" rhel >/dev/null
python3 tests/fixtures/make_image.py fromdir "$work/img-glibc64" "$work/glibc64" \
  docker.io/gpurun-test/glibc64:latest sh
chmod -R a+rX "$work/img-glibc64"

out=$(as_user "$gpurun setup podman --binary $gpurun")
check_contains "setup podman writes the user's containers.conf" "$home/.config/containers/containers.conf" "$out"
out=$(as_user "$gpurun setup podman --binary $gpurun" | head -1)
check_contains "setup podman is idempotent" "nothing to change" "$out"

as_user podman load -i "$work/busybox.tar" >/dev/null 2>&1
as_user podman load -i "$work/glibc.tar" >/dev/null 2>&1
as_user podman load -i "$work/img-glibc64/image.docker.tar" >/dev/null 2>&1
set +e
# conmon does not pass podman's environment on to the runtime; gpurun
# finds the fake GPU host through the user's own config file.
mkdir -p "$home/.config/gpurun"
cp "$work/gpurun.toml" "$home/.config/gpurun/config.toml"
chown -R "$user" "$home/.config"
prun() { as_user "podman --runtime gpurun run --rm --network host $*"; }

prun gpurun-test/busybox true
check "podman run true exits 0" 0 "$?"
prun gpurun-test/busybox sh -c "'exit 7'"
check "podman run 'exit 7' exits 7" 7 "$?"
out=$(prun gpurun-test/busybox id -u 2>&1)
check "the container is root in the user's namespace" 0 "$out"

nodes="'ls /dev/nvidia[0-9]* | tr \"\\n\" \" \"; nvidia-smi >/dev/null 2>&1; echo smi=\$?'"
# The GPU nodes, nvidia-smi's exit code and how many libcuda.so.1 entries
# the container's linker cache has.
cdi_probe="'ls /dev/nvidia[0-9]* | tr \"\\n\" \" \"; nvidia-smi >/dev/null 2>&1; echo smi=\$? libcuda=\$(ldconfig -p | grep -c libcuda.so.1)'"
for form in gpurun nvidia; do
  if [ "$form" = gpurun ]; then
    "$gpurun" --driver-root "$host/driver" --dev-root / --proc-root "$host/proc" gpu cdi -o "$cdi_spec"
  else
    python3 integration/lib/toolkit_cdi_spec.py "$host/driver" /dev "$cdi_spec"
  fi
  for image in glibc glibc64; do
    out=$(prun --device nvidia.com/gpu=0 gpurun-test/$image sh -c "$cdi_probe" 2>&1)
    check "--device nvidia.com/gpu=0 with $form's CDI spec, $image image: GPU 0, nvidia-smi exits 9, libcuda cached" \
      "/dev/nvidia0 smi=9 libcuda=1" "$out"
  done
done
out=$(prun -e NVIDIA_VISIBLE_DEVICES=1 gpurun-test/glibc sh -c "$nodes" 2>&1)
check "-e NVIDIA_VISIBLE_DEVICES=1 (gpurun injects): GPU 1, nvidia-smi exits 9" "/dev/nvidia1 smi=9" "$out"
out=$(prun -e NVIDIA_VISIBLE_DEVICES=9 gpurun-test/glibc true 2>&1)
check_contains "a bad GPU request shows gpurun's reason" 'NVIDIA_VISIBLE_DEVICES: no GPU "9"' "$out"
check "nothing left in gpurun's state dir" "" "$(state_left "$home/run/gpurun")"

# Rootful Podman with private storage: podman container checkpoint and
# restore (Podman checks `gpurun checkpoint --help` and finds criu on
# PATH; the container's stdio are conmon's pipes). Lower ulimits: rootful
# Podman asks for nofile and nproc of 1048576, which only a runtime with
# CAP_SYS_RESOURCE can set (this VM's root lacks it; runc fails the same).
criu_bin=$(criu_bin_dir)
rootful() {
  PATH="$criu_bin:$PATH" podman --root "$work/storage" --runroot "$work/runroot" \
    --runtime "$gpurun" --cgroup-manager cgroupfs --events-backend file "$@"
}
rootful load -i "$work/busybox.tar" >/dev/null 2>&1
# Rootful Podman uses gpurun's default state root, which other programs
# on this host may use too: only what this suite leaves counts.
default_state_before=$(state_left /run/gpurun || true)
rootful run -d --network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
  --name ckpt gpurun-test/busybox sh -c "$counter" >/dev/null
check "rootful podman run -d" 0 "$?"
id=$(rootful inspect -f '{{.Id}}' ckpt)
check "the container's state is in gpurun's root" 1 "$("$gpurun" list -q | grep -c "^$id$")"
count_of() { rootful exec ckpt cat /tmp/count 2>/dev/null; }
count_reaches 10 count_of
check "the container counts to 10" 0 "$?"
at_checkpoint=$(count_of)
rootful container checkpoint ckpt >/dev/null
check "podman container checkpoint: exit 0" 0 "$?"
check "the container stopped at its checkpoint" exited "$(rootful inspect -f '{{.State.Status}}' ckpt)"
rootful container restore ckpt >/dev/null
check "podman container restore: exit 0" 0 "$?"
at_restore=$(count_of)
check "the restored process counts on, not from 1" yes \
  "$([ "${at_restore:-0}" -ge "${at_checkpoint:-1}" ] && echo yes)"
sleep 0.5
last=$(rootful logs ckpt 2>&1 | tail -1)
check "its output still reaches podman logs" yes \
  "$([ "${last#line }" -gt "${at_restore:-0}" ] 2>/dev/null && echo yes)"
rootful rm -f -t 0 ckpt >/dev/null
check "nothing left in gpurun's state dir" "" "$(state_new /run/gpurun "$default_state_before")"

# Rootful Podman with --userns=auto (a user namespace started by root, as
# Kubernetes' hostUsers: false): plain and with a GPU. conmon passes no
# environment to the runtime, so the fake host is named in the system
# config for these runs (an existing one is put back), and Podman's
# "containers" user gets subordinate ids if it has none.
rootful load -i "$work/glibc.tar" >/dev/null 2>&1
for f in /etc/subuid /etc/subgid; do
  grep -q '^containers:' "$f" 2>/dev/null || { echo "containers:2000000:1000000" >> "$f"; added_subids="$added_subids $f"; }
done
mkdir -p /etc/gpurun
[ -e /etc/gpurun/config.toml ] && cp /etc/gpurun/config.toml "$work/saved-config.toml"
wrote_config=1
cp "$work/gpurun.toml" /etc/gpurun/config.toml
userns_run() {
  rootful run --rm --userns=auto --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$@"
}
out=$(userns_run gpurun-test/glibc sh -c 'read inside host size < /proc/self/uid_map; [ "$host" -gt 0 ] && echo "$inside mapped"; id -u' 2>&1)
check "rootful podman --userns=auto: root in a user namespace of its own" "0 mapped 0" "$(echo $out)"
plain_probe='ls /dev/nvidia[0-9]* | tr "\n" " "; nvidia-smi >/dev/null 2>&1; echo smi=$? libcuda=$(ldconfig -p | grep -c libcuda.so.1)'
out=$(userns_run -e NVIDIA_VISIBLE_DEVICES=0 gpurun-test/glibc sh -c "$plain_probe" 2>&1)
check "rootful podman --userns=auto -e NVIDIA_VISIBLE_DEVICES=0: GPU 0, nvidia-smi exits 9, libcuda cached" \
  "/dev/nvidia0 smi=9 libcuda=1" "$out"
restore_config
rootful system reset -f >/dev/null 2>&1

summary podman
