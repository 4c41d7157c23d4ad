#!/bin/sh
# Slurm end to end: a single-node cluster (Debian's slurmd, slurmctld and
# munge) with private state, config and socket under a temp dir, whose
# gres.conf names the fake GPU host's /dev/nvidia0 and /dev/nvidia1. Then
# `srun --gres=gpu:N gpurun run --rootfs ...` must show exactly the GPUs
# Slurm gave the step, as root and as an unprivileged user.
# Usage: integration/slurm.sh [GPURUN]   (as root; prints "N passed, M failed")
set -eu
cd "$(dirname "$0")/.."
repo=$PWD
gpurun=${1:-$repo/target/debug/gpurun}
[ "$(id -u)" = 0 ] || { echo "slurm.sh: run as root (it starts slurmd)" >&2; exit 1; }
sh scripts/install-deps.sh   # slurmd, slurmctld, slurm-client, munge

work=$(mktemp -d /tmp/gpurun-slurm.XXXXXX)
chmod 755 "$work"
pids=""
cleanup() {
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The fake GPU host and a glibc rootfs that the test user can read.
sh scripts/gpu-fixtures.sh "$work/fx" >/dev/null
sh scripts/glibc-rootfs.sh "$work/rootfs" >/dev/null
# Mount points made for injected files stay in a writable rootfs (as with
# runc), so the no-GPU check gets a rootfs no GPU container has used.
cp -a "$work/rootfs" "$work/rootfs-plain"
host="$work/fx/host"
roots="--driver-root $host/driver --dev-root $host --proc-root $host/proc"
user=gpurun-test
sh scripts/test-user.sh "$user"

# munge with its own socket, key and logs.
# munged wants a socket dir everyone can enter and a key only it can read.
mkdir -p "$work/munge" "$work/munge-key"
dd if=/dev/urandom of="$work/munge-key/munge.key" bs=1 count=1024 2>/dev/null
chown -R munge:munge "$work/munge" "$work/munge-key"
chmod 755 "$work/munge"
chmod 700 "$work/munge-key"
chmod 400 "$work/munge-key/munge.key"
su -s /bin/sh munge -c "munged --key-file=$work/munge-key/munge.key --socket=$work/munge/munge.sock \
  --pid-file=$work/munge/munged.pid --log-file=$work/munge/munged.log --seed-file=$work/munge/seed"
pids="$pids $(cat "$work/munge/munged.pid")"

node=$(hostname -s)
mkdir -p "$work/state" "$work/spool"
cat > "$work/slurm.conf" <<EOF
ClusterName=gpurun
SlurmctldHost=$node
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
NodeName=$node Gres=gpu:2 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
echo "NodeName=$node Name=gpu File=$host/dev/nvidia[0-1]" > "$work/gres.conf"
# Slurm 22.05 has no "disabled" cgroup plugin; v1 is what this host mounts.
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
  echo "CgroupPlugin=cgroup/v2" > "$work/cgroup.conf"
else
  echo "CgroupPlugin=cgroup/v1" > "$work/cgroup.conf"
fi
export SLURM_CONF="$work/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 1 50); do
  [ -f "$work/slurmctld.pid" ] && [ -f "$work/slurmd.pid" ] && \
    sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.2
done
pids="$pids $(cat "$work/slurmctld.pid" 2>/dev/null) $(cat "$work/slurmd.pid" 2>/dev/null)"
sinfo -h -o %t | grep -q idle || { echo "slurm.sh: the node did not come up"; tail -5 "$work"/*.log; exit 1; }

# Each check records its result; a failing command must not end the suite.
set +e
. integration/lib/common.sh
nodes='ls /dev/nvidia[0-9]* 2>/dev/null | tr "\n" " "; nvidia-smi >/dev/null 2>&1; echo smi=$?'
as_user() { su -s /bin/sh "$user" -c "SLURM_CONF=$SLURM_CONF XDG_RUNTIME_DIR= $*"; }

out=$(srun --quiet --gres=gpu:1 "$gpurun" $roots run --rootfs "$work/rootfs" -- sh -c "$nodes" 2>&1)
check "root: srun --gres=gpu:1 shows one GPU node" "/dev/nvidia0 smi=9" "$out"

out=$(srun --quiet --gres=gpu:2 "$gpurun" $roots run --rootfs "$work/rootfs" -- sh -c "$nodes" 2>&1)
check "root: srun --gres=gpu:2 shows both" "/dev/nvidia0 /dev/nvidia1 smi=9" "$out"

out=$(as_user srun --quiet --gres=gpu:1 "$gpurun" $roots run --rootfs "$work/rootfs" -- sh -c "'$nodes'" 2>&1)
check "user: srun --gres=gpu:1 shows one GPU node" "/dev/nvidia0 smi=9" "$out"

# While a job holds GPU 0, the next step gets GPU 1, and only that.
srun --quiet --gres=gpu:1 sleep 8 &
holder=$!
pids="$holder $pids"
sleep 2
out=$(as_user srun --quiet --gres=gpu:1 "$gpurun" $roots run --rootfs "$work/rootfs" --gpus all -- sh -c "'$nodes'" 2>&1)
check "user: with GPU 0 taken, --gpus all gives GPU 1 only" "/dev/nvidia1 smi=9" "$out"
out=$(as_user srun --quiet --gres=gpu:1 "$gpurun" $roots run --rootfs "$work/rootfs" --gpus 0 -- true 2>&1; echo "rc=$?")
case "$out" in
  *"GPU 0 is not allocated to Slurm job"*rc=*) check "user: a GPU outside the allocation is refused" refused refused ;;
  *) check "user: a GPU outside the allocation is refused" refused "$out" ;;
esac
wait "$holder" || true

out=$(srun --quiet "$gpurun" $roots run --rootfs "$work/rootfs-plain" -- sh -c "$nodes" 2>&1)
check "root: a job without --gres gets no GPU" "smi=127" "$out"

summary slurm
