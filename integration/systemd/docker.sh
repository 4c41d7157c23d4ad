# The systemd suite's "docker" case, sourced in the guest by
# integration/systemd.sh, whose variables and functions it uses.
jq --arg gpurun "$gpurun" '.runtimes = {"gpurun": {"path": $gpurun}}' /etc/docker/daemon.json > "$work/daemon.json"
cp "$work/daemon.json" /etc/docker/daemon.json
systemctl restart docker
check "dockerd uses the systemd cgroup driver" systemd "$(docker info -f '{{.CgroupDriver}}' 2>&1)"
check_contains "doctor names Docker's driver" "Docker: systemd" "$("$gpurun" doctor 2>&1)"
docker load -i "$work/glibc.tar" >/dev/null
out=$(docker run --rm --runtime=gpurun --network none -e NVIDIA_VISIBLE_DEVICES=0 \
  gpurun-test/glibc sh -c 'nvidia-smi >/dev/null 2>&1; echo smi=$?' 2>&1)
check_contains "docker run --runtime=gpurun (systemd driver): nvidia-smi exits 9" "smi=9" "$out"
# AppArmor, which `gpurun features` says is supported: Docker's
# docker-default profile confines the container's process, as under runc.
gprof=$(docker run --rm --runtime=gpurun --network none gpurun-test/glibc cat /proc/self/attr/current 2>&1)
rprof=$(docker run --rm --runtime=runc --network none gpurun-test/glibc cat /proc/self/attr/current 2>&1)
check "AppArmor: docker-default confines the process, as under runc (gpurun / runc)" \
  "docker-default (enforce) / docker-default (enforce)" "$gprof / $rprof"
cid=$(docker run -d --runtime=gpurun --network none -m 64m --cap-add MKNOD \
  -e NVIDIA_VISIBLE_DEVICES=0 gpurun-test/glibc sleep 600)
check "docker's GPU container runs in its own scope unit" active "$(systemctl is-active "docker-$cid.scope" 2>&1)"
check "docker -m 64m lands in the scope's memory.max" 67108864 \
  "$(cat "/sys/fs/cgroup/system.slice/docker-$cid.scope/memory.max" 2>&1)"
expect_devices "docker --runtime=gpurun" "$(docker exec "$cid" sh -c "$probe" 2>&1)"
host_events
expect_devices "docker --runtime=gpurun, after daemon-reload and an unrelated restart" \
  "$(docker exec "$cid" sh -c "$probe" 2>&1)"
# docker update, against runc's result for the same request. (runc 1.1.5
# writes a block I/O weight only to io.weight, gpurun to the unit's
# IOWeight too, so that property is checked on its own.)
rid=$(docker run -d --runtime=runc --network none -m 64m --cap-add MKNOD gpurun-test/glibc sleep 600)
limits() { # CID: the unit's properties and the cgroup files docker update changes
  unit="docker-$1.scope"
  dir="/sys/fs/cgroup/system.slice/$unit"
  systemctl show -p MemoryMax -p MemorySwapMax -p CPUQuotaPerSecUSec -p AllowedCPUs -p TasksMax "$unit" | sort | tr '\n' ' '
  for f in memory.max memory.swap.max cpu.max cpuset.cpus pids.max io.weight io.bfq.weight; do
    printf '%s=%s ' "$f" "$(cat "$dir/$f" 2>/dev/null | head -1)"
  done
}
for update in "--memory 128m --memory-swap 256m" "--cpus 0.5" "--cpuset-cpus 0" "--pids-limit 30" "--blkio-weight 300"; do
  # shellcheck disable=SC2086
  gout=$(docker update $update "$cid" 2>&1); grc=$?
  # shellcheck disable=SC2086
  rout=$(docker update $update "$rid" 2>&1); rrc=$?
  check "docker update $update: exit status as runc's" "$rrc" "$grc"
  [ "$grc" = 0 ] || echo "  gpurun: $gout / runc: $rout"
  check "docker update $update: unit and cgroup as runc's" "$(limits "$rid")" "$(limits "$cid")"
done
check "docker update: memory.max under gpurun" 134217728 \
  "$(cat "/sys/fs/cgroup/system.slice/docker-$cid.scope/memory.max" 2>&1)"
check "docker update: pids.max under gpurun" 30 \
  "$(cat "/sys/fs/cgroup/system.slice/docker-$cid.scope/pids.max" 2>&1)"
check "docker update: AllowedCPUs on gpurun's unit" 0 "$(systemctl show -P AllowedCPUs "docker-$cid.scope")"
check "docker update --blkio-weight 300: the unit's IOWeight under gpurun" 2930 \
  "$(systemctl show -P IOWeight "docker-$cid.scope")"
expect_devices "docker --runtime=gpurun, after docker update" "$(docker exec "$cid" sh -c "$probe" 2>&1)"
systemctl daemon-reload
expect_devices "docker --runtime=gpurun, after docker update and a reload" \
  "$(docker exec "$cid" sh -c "$probe" 2>&1)"
docker rm -f "$cid" "$rid" >/dev/null
check "no docker scope left" "" \
  "$(systemctl list-units --all --plain --no-legend 'docker-*.scope' | awk '$3 == "active"')"

# Docker's userns-remap on the systemd driver: each container in a user
# namespace started by root (root is dockremap's first subordinate id), a
# GPU given; GPU 1 and c 42 0, bound in by volumes and open to all, fail
# with EPERM, which only the device rules give.
jq '. + {"userns-remap": "default"}' "$work/daemon.json" > /etc/docker/daemon.json
systemctl restart docker
docker load -i "$work/glibc.tar" >/dev/null
remap=$(awk -F: '$1 == "dockremap" {print $2; exit}' /etc/subuid)
out=$(docker run --rm --runtime=gpurun --network none -e NVIDIA_VISIBLE_DEVICES=0 \
  -v "$host/dev/nvidia1:/mnt/gpu1" -v "$work/c42:/mnt/c42" -v /dev/null:/mnt/null \
  gpurun-test/glibc sh -c "$uprobe" 2>&1)
check_contains "userns-remap (systemd driver): root is dockremap's first subordinate id" "uid=0 host=$remap" "$out"
check_contains "userns-remap: the requested /dev/nvidia0 opens" "/dev/nvidia0=through" "$out"
check_contains "userns-remap: GPU 1, bound in by a volume, is refused (EPERM)" "/mnt/gpu1=denied" "$out"
check_contains "userns-remap: c 42 0, bound in by a volume, is refused (EPERM)" "/mnt/c42=denied" "$out"
check_contains "userns-remap: /dev/null, bound in the same way, opens" "/mnt/null=through" "$out"
check_contains "userns-remap: nvidia-smi exits 9" "smi=9" "$out"
cp "$work/daemon.json" /etc/docker/daemon.json
systemctl restart docker
