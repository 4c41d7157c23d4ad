#!/bin/sh
# Slurm end to end: a single-node cluster (Debian's slurmd, slurmctld and
# munge) with private state, config and socket under a temp dir, whose
# gres.conf names the fake GPU host's /dev/nvidia0 and /dev/nvidia1, with
# task/cgroup and ConstrainDevices=yes as GPU clusters run it. Then
# `srun --gres=gpu:N gpurun run --rootfs ...` and Slurm's own
# `srun --container=BUNDLE` (oci.conf from `gpurun setup slurm`) must show
# exactly the GPUs Slurm gave the step, as root and as an unprivileged user
# (whose runtime slurmstepd starts with HOME still root's), and the
# container must stay below the step's cgroup with the job's --mem.
# Usage: integration/slurm.sh [GPURUN [KERNEL]]   (as root; prints "N passed,
# M failed"). With KERNEL (6.1, 6.12) it runs in a systemd guest of that
# kernel (scripts/vm.sh --systemd) with Slurm's cgroup/v2 plugin; the test
# command runs it that way inside integration/systemd.sh's bookworm guest
# (one boot for both); without systemd it runs with IgnoreSystemd.
set -eu
cd "$(dirname "$0")/.."
repo=$PWD
gpurun=${1:-$repo/target/debug/gpurun}
[ "$(id -u)" = 0 ] || { echo "slurm.sh: run as root (it starts slurmd)" >&2; exit 1; }

# The fake GPU host and a glibc rootfs that the test user can read, made
# here (a systemd guest has its own root and no build tools).
make_work() { # DIR
  mkdir -p "$1"
  chmod 755 "$1"
  sh scripts/fixtures/gpu-fixtures.sh "$1/fx" >/dev/null
  sh scripts/fixtures/glibc-rootfs.sh "$1/rootfs" >/dev/null
  # Mount points made for injected files stay in a writable rootfs (as
  # with runc), so the no-GPU check gets a rootfs no GPU container has used.
  cp -a "$1/rootfs" "$1/rootfs-plain"
  # Open MPI and a program that MPI_Allreduces, for the two-task MPI job.
  sh scripts/fixtures/mpi-rootfs.sh "$1/rootfs-mpi"
  # The same roots as image files, for srun --container-image.
  mksquashfs "$1/rootfs-plain" "$1/app.sqsh" -quiet -no-progress >/dev/null
  mksquashfs "$1/rootfs-mpi" "$1/mpi.sqsh" -quiet -no-progress >/dev/null
  # An image with an environment of its own, as import -o FILE.sqsh keeps it.
  cp -a "$1/rootfs-plain" "$1/rootfs-env"
  mkdir -p "$1/rootfs-env/.gpurun"
  echo '{"config": {"Entrypoint": ["sh", "-c"], "Env": ["PATH=/usr/bin:/bin", "IMAGE_VALUE=image", "BOTH=image"]}}' \
    > "$1/rootfs-env/.gpurun/image-config.json"
  mksquashfs "$1/rootfs-env" "$1/env.sqsh" -quiet -no-progress >/dev/null
  chmod 644 "$1/app.sqsh" "$1/mpi.sqsh" "$1/env.sqsh"
}
# --fixtures DIR: only those, for a guest that runs this suite among others
# (integration/systemd.sh's bookworm guest).
if [ "${1:-}" = --fixtures ]; then
  make_work "$2"
  exit 0
fi
if [ -n "${2:-}" ] && [ "${GPURUN_IN_SYSTEMD_GUEST:-}" != 1 ]; then
  # KERNEL given: the same suite on a systemd host (scripts/vm.sh
  # --systemd), Slurm's cgroup/v2 plugin asking systemd for its scope.
  sh scripts/install-deps.sh
  work=$(mktemp -d "$PWD/target/slurm-suite.XXXXXX")
  trap 'rm -rf "$work"' EXIT INT TERM
  boot() {
    rm -rf "${work:?}"/*
    make_work "$work"
    GPURUN_IN_SYSTEMD_GUEST=1 GPURUN_SUITE_WORK="$work" \
      sh scripts/vm.sh --systemd --timeout "${GPURUN_GUEST_TIMEOUT:-600}" "$2" \
      -- sh integration/slurm.sh "$gpurun"
  }
  . integration/lib/common.sh
  rc=0
  boot_once_more slurm.sh boot "$@" || rc=$?
  exit "$rc"
fi
if [ "${GPURUN_IN_SYSTEMD_GUEST:-}" = 1 ]; then
  work=$GPURUN_SUITE_WORK
else
  sh scripts/install-deps.sh   # slurmd, slurmctld, slurm-client, munge
  work=$(mktemp -d /tmp/gpurun-slurm.XXXXXX)
  make_work "$work"
fi
pids=""
fuse_mode=$(stat -c %a /dev/fuse 2>/dev/null || true)
cp -a /etc/fuse.conf "/tmp/gpurun-slurm-fuse.conf.$$" 2>/dev/null || true
# The plugin's directory of named containers' layers, removed at the end
# if the suite made it.
layers_were_there=$(if [ -e /run/gpurun-spank ]; then echo yes; fi)
cleanup() {
  [ -n "$layers_were_there" ] || rm -rf /run/gpurun-spank
  [ -z "$fuse_mode" ] || chmod "$fuse_mode" /dev/fuse
  if [ -f "/tmp/gpurun-slurm-fuse.conf.$$" ]; then mv "/tmp/gpurun-slurm-fuse.conf.$$" /etc/fuse.conf; else rm -f /etc/fuse.conf; fi
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  if [ -d /run/systemd/system ]; then systemctl stop "gpurun-test-slurmd-$$" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

host="$work/fx/host"
roots="--driver-root $host/driver --dev-root $host --proc-root $host/proc"
user=gpurun-test
sh scripts/fixtures/test-user.sh "$user"

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
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerNode=256
GresTypes=gpu
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
NodeName=$node Gres=gpu:2 CPUs=$(nproc) RealMemory=$(free -m | awk '/^Mem:/ {print int($2 / 2)}') State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PlugStackConfig=$work/plugstack.conf
EOF
# gpurun's SPANK plugin, built beside the binary, as a site loads pyxis.
plugin=$(dirname "$gpurun")/libspank_gpurun.so
echo "NodeName=$node Name=gpu File=$host/dev/nvidia[0-1]" > "$work/gres.conf"
# Slurm 22.05 has no "disabled" cgroup plugin; v1 is what this host mounts.
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
  echo "CgroupPlugin=cgroup/v2" > "$work/cgroup.conf"
  # Without systemd (the host matrix's guests) slurmd makes its own
  # stepd scope, in the system.slice systemd would have made.
  if [ ! -d /run/systemd/system ]; then
    printf 'IgnoreSystemd=yes\nCgroupAutomount=yes\n' >> "$work/cgroup.conf"
    mkdir -p /sys/fs/cgroup/system.slice
    for c in $(cat /sys/fs/cgroup/system.slice/cgroup.controllers); do
      echo "+$c" > /sys/fs/cgroup/system.slice/cgroup.subtree_control
    done
  fi
else
  echo "CgroupPlugin=cgroup/v1" > "$work/cgroup.conf"
fi
printf 'ConstrainDevices=yes\nConstrainRAMSpace=yes\n' >> "$work/cgroup.conf"
export SLURM_CONF="$work/slurm.conf"
# plugstack.conf, named by slurm.conf's PlugStackConfig, with the site's
# own lines in it already: setup adds gpurun's and keeps them.
echo "# the site's plugins" > "$work/plugstack.conf"
spank_setup=$("$gpurun" $roots setup slurm --spank "$plugin" 2>&1; echo "rc=$?")
slurmctld -f "$SLURM_CONF" || { echo "slurm.sh: slurmctld did not start"; tail -5 "$work/slurmctld.log"; exit 1; }
if [ -d /run/systemd/system ]; then
  # As its unit runs it: in a cgroup systemd delegates to it, from which
  # cgroup/v2 asks systemd for the scope of its slurmstepds.
  systemd-run --quiet --unit="gpurun-test-slurmd-$$" -p Delegate=yes -p Type=forking \
    -p PIDFile="$work/slurmd.pid" slurmd -f "$SLURM_CONF" \
    || { echo "slurm.sh: slurmd did not start"; tail -5 "$work/slurmd.log"; exit 1; }
else
  slurmd -f "$SLURM_CONF" || { echo "slurm.sh: slurmd did not start"; tail -5 "$work/slurmd.log"; exit 1; }
fi
for _ in $(seq 1 50); do
  [ -f "$work/slurmctld.pid" ] && [ -f "$work/slurmd.pid" ] && \
    sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 0.2
done
pids="$pids $(cat "$work/slurmctld.pid" 2>/dev/null || true) $(cat "$work/slurmd.pid" 2>/dev/null || true)"
sinfo -h -o %t 2>/dev/null | grep -q idle || { echo "slurm.sh: the node did not come up"; for log in "$work"/*.log; do echo "== $log"; tail -n 8 "$log"; done; exit 1; }

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

# While a job holds GPU 0, the next step gets GPU 1, and only that. The
# holder runs until both checks are done (a fixed sleep ran out before the
# second check on a slow host, and GPU 0 was then free).
srun --quiet --gres=gpu:1 --job-name=gpu-holder sleep 600 2>/dev/null &
holder=$!
pids="$holder $pids"
held=""
for _ in $(seq 1 150); do
  held=$(squeue -h -t R -n gpu-holder -o %i 2>/dev/null)
  [ -n "$held" ] && break
  sleep 0.2
done
check "a job holding GPU 0 is running" yes "$([ -n "$held" ] && echo yes || echo no)"
out=$(as_user srun --quiet --gres=gpu:1 "$gpurun" $roots run --rootfs "$work/rootfs" --gpus all -- sh -c "'$nodes'" 2>&1)
check "user: with GPU 0 taken, --gpus all gives GPU 1 only" "/dev/nvidia1 smi=9" "$out"
out=$(as_user srun --quiet --gres=gpu:1 "$gpurun" $roots run --rootfs "$work/rootfs" --gpus 0 -- true 2>&1; echo "rc=$?")
case "$out" in
  *"GPU 0 is not allocated to Slurm job"*rc=*) check "user: a GPU outside the allocation is refused" refused refused ;;
  *) check "user: a GPU outside the allocation is refused" refused "$out" ;;
esac
# gpu verify expects what the step's container is given: GPU 1 alone.
out=$(as_user srun --quiet --gres=gpu:1 "$gpurun" $roots gpu verify --gpus all 2>&1)
check_contains "user: gpu verify in a step given GPU 1 expects that one" "requested:  all -> 1 GPU(s)" "$out"
[ -n "$held" ] && scancel "$held"
wait "$holder" || true

out=$(srun --quiet "$gpurun" $roots run --rootfs "$work/rootfs-plain" -- sh -c "$nodes" 2>&1)
check "root: a job without --gres gets no GPU" "smi=127" "$out"

# An MPI step's PMI reaches a `run --rootfs` container as pyxis and enroot
# pass it: the step's SLURM_* variables; PMI-2's PMI_* and its socket
# (PMI_FD, kept open); PMIx's PMIX_* and its server's directory, bound.
# shellcheck disable=SC2016
probe='echo "${SLURM_STEP_ID:+step} ${PMI_RANK:+rank}$([ -e "/proc/self/fd/${PMI_FD:-none}" ] && echo " fd")"'
out=$(srun --quiet --mpi=pmi2 "$gpurun" $roots run --rootfs "$work/rootfs-plain" -- sh -c "$probe" 2>&1)
check "root: srun --mpi=pmi2: the step's variables and PMI-2's socket reach the container" "step rank fd" "$out"
# shellcheck disable=SC2016
probe='echo "${PMIX_RANK:+rank}$([ -n "$PMIX_SERVER_TMPDIR" ] && [ -d "$PMIX_SERVER_TMPDIR" ] && echo " server-dir")"'
out=$(srun --quiet --mpi=pmix "$gpurun" $roots run --rootfs "$work/rootfs-plain" -- sh -c "$probe" 2>&1)
check "root: srun --mpi=pmix: PMIx's variables and server directory reach the container" "rank server-dir" "$out"
# An MPI job across two tasks in two containers: Open MPI finds the step's
# PMIx server, so the ranks find each other and each prints the sum
# 1+2. TCP between them: each container has its own /dev/shm, and Open
# MPI leaves the loopback out unless told.
out=$(srun --quiet -n 2 --mpi=pmix "$gpurun" $roots run --rootfs "$work/rootfs-mpi" \
  -e OMPI_MCA_btl=self,tcp -e OMPI_MCA_btl_tcp_if_include=lo -- /usr/local/bin/mpi_allreduce 2>&1 | sort)
check "root: srun -n 2 --mpi=pmix: MPI_Allreduce across two containers gives 3 on each rank" \
  "rank 0 of 2: sum 3
rank 1 of 2: sum 3" "$out"

# --- srun --container-image: pyxis's flags, through gpurun's SPANK plugin ---
# Root's image runs through a loop device, a user's through FUSE (a guest
# without udev loads no module on first use).
modprobe -a -q loop squashfs fuse 2>/dev/null || true
# A user's image runs through FUSE: /dev/fuse open to users, as udev makes
# it on systemd hosts, and user_allow_other in /etc/fuse.conf, which
# pyxis's default (your own uid inside) needs of a FUSE image, as the
# admin's page says (both put back at the end).
chmod 0666 /dev/fuse
check_contains "setup slurm --spank registers the plugin" "rc=0" "$spank_setup"
check "... in plugstack.conf, after the site's own lines" \
  "# the site's plugins
required $(readlink -f "$plugin") gpurun=$gpurun $(echo "$roots" | sed 's/--\([a-z-]*\) /\1=/g')" \
  "$(grep -v "^# gpurun's" "$work/plugstack.conf" | grep .)"
grep -qx user_allow_other /etc/fuse.conf 2>/dev/null || echo user_allow_other >> /etc/fuse.conf
check "the plugin is loaded (srun --help lists --container-image)" yes \
  "$(srun --help 2>&1 | grep -q -- '--container-image' && echo yes || echo no)"
for who in root user; do
  run_as() { if [ "$who" = root ]; then sh -c "$*"; else as_user "$*"; fi; }
  out=$(run_as "cd $work && srun --quiet --container-image=./app.sqsh --gres=gpu:1 sh -c '$nodes'" 2>&1)
  check "$who: srun --container-image=./app.sqsh --gres=gpu:1: one GPU, nvidia-smi 9" "/dev/nvidia0 smi=9" "$out"
  mkdir -p "$work/scratch-$who" && echo data > "$work/scratch-$who/in"
  [ "$who" = user ] && chown -R "$user:" "$work/scratch-$who"
  out=$(run_as "cd $work && srun --quiet --container-image=./app.sqsh --container-mounts=$work/scratch-$who:/scratch --container-workdir=/scratch --gres=gpu:2 sh -c 'pwd; cat in; ls /dev/nvidia[0-9]* | wc -l'" 2>&1)
  check "$who: --container-mounts and --container-workdir, --gres=gpu:2" "/scratch
data
2" "$(echo "$out" | tr -d ' ')"
  uid=$(run_as "id -u")
  out=$(run_as "srun --quiet --container-image=$work/app.sqsh id -u; srun --quiet --container-image=$work/app.sqsh --container-remap-root id -u" 2>&1)
  check "$who: your uid inside by default, 0 with --container-remap-root" "$uid
0" "$out"
  out=$(run_as "srun --quiet --container-image=$work/app.sqsh sh -c 'touch /w 2>/dev/null; echo \$?'; srun --quiet --container-image=$work/app.sqsh --container-writable sh -c 'touch /w; echo \$?'" 2>&1)
  check "$who: read-only by default, writable with --container-writable" "1
0" "$out"
  out=$(run_as "JOB_VALUE=kept srun --quiet --container-image=$work/app.sqsh sh -c 'echo \$JOB_VALUE \${SLURM_STEP_ID:+step}'" 2>&1)
  check "$who: the job's environment reaches the task, as under pyxis" "kept step" "$out"
  out=$(run_as "IMAGE_VALUE=job BOTH=job srun --quiet --container-image=$work/env.sqsh --container-env=BOTH sh -c 'echo \$IMAGE_VALUE \$BOTH'" 2>&1)
  check "$who: the image's variables win, but for those --container-env names" "image job" "$out"
  # shellcheck disable=SC2016
  mounted='grep -c " $HOME " /proc/self/mountinfo; true'
  out=$(run_as "srun --quiet --container-image=$work/app.sqsh --container-mount-home sh -c '$mounted'; srun --quiet --container-image=$work/app.sqsh sh -c '$mounted'" 2>&1)
  check "$who: \$HOME bound with --container-mount-home, not without" "1
0" "$out"
  out=$(run_as "srun --quiet --container-image=$work/app.sqsh sh -c 'exit 3'; echo rc=\$?" 2>&1 | tail -1)
  check "$who: the task's exit status is srun's" "rc=3" "$out"
  # shellcheck disable=SC2016
  out=$(run_as "srun --quiet --container-image=$work/env.sqsh --container-entrypoint 'echo \$0 entry'" 2>&1)
  check "$who: --container-entrypoint runs the image's entrypoint with the command" "sh entry" "$out"
  out=$(run_as "srun --quiet --container-image=$work/app.sqsh --container-save=$work/scratch-$who/saved.sqsh sh -c 'echo kept > /saved'; srun --quiet --container-image=$work/scratch-$who/saved.sqsh cat /saved" 2>&1)
  check "$who: --container-save: the saved image holds the task's write" kept "$out"
  # A job's steps share a named container's writable layer; another
  # image under the name is refused; the job's end removes the layer.
  cat > "$work/named-$who.sh" <<NAMED
#!/bin/sh
srun --quiet --container-image=$work/app.sqsh --container-name=dev sh -c 'echo one > /kept'
srun --quiet --container-name=dev cat /kept
srun --quiet --container-image=$work/env.sqsh --container-name=dev true 2>&1 | grep -o 'lies over'
[ -d "/run/gpurun-spank/\$(id -u)/\$SLURM_JOB_ID.dev/upper" ] && echo layer kept
echo "job=\$SLURM_JOB_ID"
NAMED
  chmod 755 "$work/named-$who.sh"
  out=$(run_as "salloc --quiet $work/named-$who.sh" 2>&1)
  check "$who: --container-name: a later step sees the first one's write, another image refused" "one
lies over
layer kept" "$(echo "$out" | grep -v '^job=')"
  job=$(echo "$out" | sed -n 's/^job=//p')
  left=yes
  [ -n "$job" ] || left="no job id"
  for _ in $(seq 1 50); do
    [ -n "$job" ] || break
    ls "/run/gpurun-spank/$uid" 2>/dev/null | grep -q "^$job\." || { left=no; break; }
    sleep 0.2
  done
  check "$who: ... and the job's end removes its layer" no "$left"
  out=$(run_as "srun --quiet --container-name=dev true; echo rc=\$?" 2>&1)
  check_contains "$who: ... which a new job does not find" "holds no layer yet" "$out"
  out=$(run_as "srun --quiet --container-image=$work/app.sqsh --container-name=x:exec true; echo rc=\$?" 2>&1)
  check_contains "$who: pyxis's NAME:MODE forms are refused with the reason" "NAME:MODE" "$out"
  check_contains "$who: ... and the step fails" "rc=1" "$out"
done
out=$(as_user "cd $work && OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo srun --quiet -n 2 --mpi=pmix --container-image=./mpi.sqsh /usr/local/bin/mpi_allreduce" 2>&1 | sort)
check "user: srun -n 2 --mpi=pmix --container-image: MPI_Allreduce across the tasks' containers" \
  "rank 0 of 2: sum 3
rank 1 of 2: sum 3" "$out"
check "no FUSE daemon or image mount left" "0 0" \
  "$(ps -eo comm= | grep -c -x -E 'squashfuse|fuse-overlayfs') $(grep -c '@image' /proc/self/mountinfo)"

# --- srun --container: Slurm's own OCI support, with gpurun as its runtime ---
# oci.conf beside slurm.conf, from gpurun's driver locations.
out=$("$gpurun" $roots setup slurm 2>&1)
check "setup slurm: exit 0" 0 "$?"
check_contains "setup slurm writes the RunTimeRun form" "RunTimeRun=\"$gpurun $roots --root=/run/gpurun-slurm/%u run %n.%u.%j.%s.%t -b %b\"" "$(cat "$work/oci.conf")"
check_contains "setup slurm a second time changes nothing" "nothing to change" "$("$gpurun" $roots setup slurm 2>&1)"
# Bundles as users make them: `gpurun spec`, and `gpurun spec --rootless`
# run by the user.
mkdir -p "$work/bundle" "$work/ubundle"
cp -a "$work/rootfs-plain" "$work/bundle/rootfs"
cp -a "$work/rootfs-plain" "$work/ubundle/rootfs"
(cd "$work/bundle" && "$gpurun" spec && jq '.process.terminal = false | .root.readonly = false' config.json > c && mv c config.json)
chown -R "$user:" "$work/ubundle"
su -s /bin/sh "$user" -c "cd $work/ubundle && $gpurun spec --rootless && jq '.process.terminal = false | .root.readonly = false' config.json > c && mv c config.json"
# What the container shows (srun passes the caller's environment, PROBE
# among it, into the bundle's): its GPU nodes and nvidia-smi's exit.
export PROBE='ls /dev/nvidia[0-9]* 2>/dev/null | tr "\n" " "; nvidia-smi >/dev/null 2>&1; echo smi=$?'
in_container() { # WHO SRUN-ARGS...: the probe in srun --container, as root or the user
  who=$1
  shift
  if [ "$who" = root ]; then
    srun --quiet "$@" sh -c 'eval "$PROBE"'
  else
    as_user srun --quiet "$*" sh -c "'eval \"\$PROBE\"'"
  fi
}
# The memory limit over a process's cgroup: v1, memory.stat's hierarchical
# limit; v2, the smallest memory.max on the way up.
memory_limit() { # PID
  line=$(grep -E ':memory:|^0::' "/proc/$1/cgroup" | head -1)
  path=${line#*:*:}
  if [ -d /sys/fs/cgroup/memory ]; then
    awk '$1 == "hierarchical_memory_limit" {print $2}' "/sys/fs/cgroup/memory$path/memory.stat"
  else
    dir=/sys/fs/cgroup$path
    while [ "$dir" != /sys/fs/cgroup ]; do cat "$dir/memory.max" 2>/dev/null; dir=${dir%/*}; done \
      | grep -v max | sort -n | head -1
  fi
}
check "user: root's home, which the user's runtime inherits from slurmd, is not the user's to read" no \
  "$(su -s /bin/sh "$user" -c 'cat /root/.config/gpurun/config.toml >/dev/null 2>&1 && echo yes || echo no')"
for who in root user; do
  b=$work/bundle
  [ "$who" = user ] && b=$work/ubundle
  if [ "$who" = root ]; then
    out=$(srun --quiet --container="$b" id -u 2>&1)
  else
    out=$(as_user srun --quiet --container="$b" id -u 2>&1)
  fi
  check "$who: srun --container runs the step" 0 "$out"
  out=$(in_container $who --container="$b" --gres=gpu:1 2>&1)
  check "$who: srun --container --gres=gpu:1: exactly one GPU, nvidia-smi 9" "/dev/nvidia0 smi=9" "$out"
  out=$(in_container $who --container="$b" --gres=gpu:2 2>&1)
  check "$who: srun --container --gres=gpu:2: both GPUs" "/dev/nvidia0 /dev/nvidia1 smi=9" "$out"
  out=$(in_container $who --container="$b" --export=ALL,NVIDIA_VISIBLE_DEVICES=all 2>&1)
  check "$who: srun --container without gres: no GPU, even with NVIDIA_VISIBLE_DEVICES=all" "smi=127" "$out"
  out=$(in_container $who --container="$b" --gres=gpu:1 --export=ALL,NVIDIA_VISIBLE_DEVICES=all 2>&1)
  check "$who: srun --container --gres=gpu:1 with NVIDIA_VISIBLE_DEVICES=all: still one GPU" "/dev/nvidia0 smi=9" "$out"
  out=$(in_container $who --container="$b" --gres=gpu:1 --export=ALL,NVIDIA_VISIBLE_DEVICES=void 2>&1)
  check "$who: srun --container --gres=gpu:1 with NVIDIA_VISIBLE_DEVICES=void: no GPU" "smi=127" "$out"
  # A running container (for 16 s): its cgroup, seen from the host, is
  # below the step's, and the job's --mem holds over it.
  marker="sleep 1$([ "$who" = root ] && echo 6 || echo 7)"
  if [ "$who" = root ]; then
    srun --quiet --container="$b" --mem=64M $marker >/dev/null 2>&1 &
  else
    as_user srun --quiet --container="$b" --mem=64M $marker >/dev/null 2>&1 &
  fi
  wait_for pgrep -f "^$marker"
  pid=$(pgrep -f "^$marker" | head -1)
  check_contains "$who: the container's cgroup is below the step's" "/step_0/" \
    "$(grep -E ':devices:|^0::' "/proc/$pid/cgroup" 2>&1 | head -1)"
  check "$who: the job's --mem=64M holds over the container" 67108864 "$(memory_limit "$pid")"
  wait
done
# v1: beside the step's task directories; v2: in its user/ directory,
# beside the task's (a v2 cgroup holding processes has no child cgroups).
check "root: the container has a cgroup of its own below the step" 1 \
  "$(srun --quiet --container="$work/bundle" cat /proc/self/cgroup 2>&1 | grep -E ':devices:|^0::' \
    | head -1 | grep -cE '/step_0/(user/)?gpurun-')"
check "no container cgroup left in any hierarchy" "" \
  "$(find /sys/fs/cgroup -maxdepth 7 -type d -name "gpurun-$node.*" 2>/dev/null)"
# One path serves every v1 hierarchy: the step directories made for a
# container in those Slurm does not use (pids here) go with it.
[ -d /sys/fs/cgroup/pids ] && check "no step directory left where Slurm keeps none (pids)" "" \
  "$(find /sys/fs/cgroup/pids -maxdepth 1 -name "slurm*" 2>/dev/null)"
check "nothing left in the state directories" "" \
  "$(ls "/run/gpurun-slurm/root" "/run/gpurun-slurm/$user" 2>/dev/null | grep -v '^@' | grep -v ':$' | grep .)"

# What Slurm said, where something failed.
if [ "$failed" -gt 0 ]; then
  for log in "$work"/*.log; do echo "== $log"; tail -n 15 "$log"; done
fi
summary slurm
