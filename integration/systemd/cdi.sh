# The systemd suite's "cdi" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
mkdir -p /var/run/cdi
cp "$work/nvidia-cdi.json" /var/run/cdi/nvidia-e2e.json
podman load -i "$work/glibc.tar" >/dev/null 2>&1
smi_and_cache='nvidia-smi >/dev/null 2>&1; echo smi=$? libcuda=$(ldconfig -p | grep -c libcuda.so.1)'
pid_=$(podman --runtime "$gpurun" run -d --network none --cap-add MKNOD --device nvidia.com/gpu=0 \
  gpurun-test/glibc sleep 600 2>&1)
check "rootful podman --device nvidia.com/gpu=0 (NVIDIA's spec): a container" 64 "${#pid_}"
check "CDI: nvidia-smi exits 9, libcuda in the linker cache" "smi=9 libcuda=1" \
  "$(podman exec "$pid_" sh -c "$smi_and_cache" 2>&1)"
expect_devices "rootful podman CDI" "$(podman exec "$pid_" sh -c "$probe" 2>&1)"
host_events
expect_devices "rootful podman CDI, after daemon-reload and an unrelated restart" \
  "$(podman exec "$pid_" sh -c "$probe" 2>&1)"
podman rm -f "$pid_" >/dev/null 2>&1
# containerd 1.6's way: the name in an annotation, resolved by gpurun from
# /var/run/cdi, in a systemd scope.
bundle="$work/cdi-bundle"
mkdir -p "$bundle"
jq --arg root "$work/glibc" --arg probe "$smi_and_cache" '.root.path = $root
  | .process.args = ["sh", "-c", $probe]
  | .process.env += ["NVIDIA_VISIBLE_DEVICES=all"]
  | .annotations = {"cdi.k8s.io/gpu": "nvidia.com/gpu=0"}
  | .linux.cgroupsPath = "system.slice:gpurun:cdiann"' "$work/bb/config.json" > "$bundle/config.json"
out=$("$gpurun" --systemd-cgroup run --bundle "$bundle" cdiann 2>"$work/cdiann.err")
check "gpurun --systemd-cgroup run with a cdi.k8s.io annotation: NVIDIA's spec resolved, hooks done" \
  "smi=9 libcuda=1" "$out"
check_contains "the image's NVIDIA_VISIBLE_DEVICES=all is passed over, and said so" \
  'ignoring env "NVIDIA_VISIBLE_DEVICES=all": the CDI annotations name the devices' "$(cat "$work/cdiann.err")"
check "no gpurun-cdiann scope left" inactive "$(systemctl is-active gpurun-cdiann.scope 2>&1)"
rm -f /var/run/cdi/nvidia-e2e.json
