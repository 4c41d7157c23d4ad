# The systemd suite's "quadlet" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
mkdir -p /var/run/cdi /etc/containers/systemd
cp "$work/nvidia-cdi.json" /var/run/cdi/nvidia-e2e.json
podman load -i "$work/glibc.tar" >/dev/null 2>&1
printf '%s\n' "$probe" 'nvidia-smi >/dev/null 2>&1; echo smi=$?' > "$work/quadlet-probe.sh"
cat > /etc/containers/systemd/gpurun-quadlet.container <<EOF
[Unit]
Description=A GPU container from a Quadlet file
[Container]
Image=docker.io/gpurun-test/glibc:latest
GlobalArgs=--runtime=$gpurun
AddDevice=nvidia.com/gpu=0
AddCapability=MKNOD
Network=none
Volume=$work/quadlet-probe.sh:/probe.sh:ro
Exec=sh /probe.sh
[Service]
Restart=no
EOF
systemctl daemon-reload
check "Quadlet made the unit" 0 "$(systemctl cat gpurun-quadlet.service >/dev/null 2>&1; echo $?)"
systemctl start gpurun-quadlet.service
wait_for sh -c "! systemctl is-active --quiet gpurun-quadlet.service"
out=$(journalctl -u gpurun-quadlet.service -o cat --no-pager 2>&1 | grep -E '^(/dev/|disk=|c42=|gpu1=|pts=|smi=)')
check "Quadlet: the unit ran to success" "success" "$(systemctl show -P Result gpurun-quadlet.service)"
check_contains "Quadlet --device nvidia.com/gpu=0: nvidia-smi exits 9" "smi=9" "$out"
expect_devices "Quadlet unit" "$out"
rm -f /etc/containers/systemd/gpurun-quadlet.container /var/run/cdi/nvidia-e2e.json
systemctl daemon-reload
