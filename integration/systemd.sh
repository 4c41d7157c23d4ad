#!/bin/sh
# systemd hosts, as GPU machines run them: a VM (scripts/vm.sh --systemd,
# Debian 12's 6.12 series kernel, or KERNEL) with systemd as PID 1 and unified
# cgroups. `gpurun --systemd-cgroup` through create, start, update, pause,
# resume and delete (the scope unit appears with the spec's limits and is
# gone after delete); the spec's device rules under the systemd driver for
# every way in (gpurun from a shell, ctr, containerd's CRI with
# `SystemdCgroup = true`, Docker on the systemd driver, rootful Podman with
# the systemd cgroup manager), each container holding CAP_MKNOD so that
# the device rules alone decide, checked again after `systemctl
# daemon-reload`, an unrelated unit's restart and an update; runc 1.1.5
# beside it; `docker update` against runc's; rootless Podman; NVIDIA's CDI
# spec (its nvidia-cdi-hook absent) applied by rootful Podman and resolved
# by gpurun itself from a cdi.k8s.io annotation, under the systemd driver;
# GPU containers in user namespaces started by root (from a shell, Docker's
# userns-remap, Podman's --userns=auto), and AppArmor's docker-default;
# then, in the same boot, Slurm's `srun --container` with the cgroup/v2
# plugin (integration/slurm.sh, its own checks and summary).
# The fixtures are made here; the checks run in the guest, one file per
# case under integration/systemd/ (sourced in the order below).
# With ROOT "unstable", the guest runs Debian unstable's engines
# (containerd 2, Docker 28, Podman 5; vm.sh --systemd-root unstable): the
# CRI, Docker and Podman sections, and a Quadlet unit with a GPU.
# Usage: integration/systemd.sh [GPURUN [KERNEL [ROOT]]]   (as root; prints "N passed, M failed";
# with no ROOT, bookworm's then unstable's, each with the cases the other lacks)
# GPURUN_SYSTEMD_CASES: the engine sections to run (default: all of
# shell runc ctr cri docker podman cdi rootless checkpoint slurm on bookworm's
# root; cri docker podman quadlet on unstable's).
set -eu
cd "$(dirname "$0")/.."
gpurun=${1:-$PWD/target/debug/gpurun}
[ "$(id -u)" = 0 ] || { echo "systemd.sh: run as root" >&2; exit 1; }

if [ "${GPURUN_IN_SYSTEMD_GUEST:-}" != 1 ] && [ -z "${3:-}" ]; then
  # No ROOT (the test command): both roots. bookworm's runs the cases that
  # unstable's does not (its CRI, Docker and rootful Podman checks run
  # there on containerd 2, Docker 28 and Podman 5; Debian 12's engines run
  # natively in integration/containerd.sh, docker.sh and podman.sh; the
  # runc case shows only runc 1.1.5's own loss).
  rc=0
  GPURUN_SYSTEMD_CASES=${GPURUN_SYSTEMD_CASES:-"shell ctr cdi rootless checkpoint slurm"} \
    sh "$0" "$gpurun" "${2:-6.12}" bookworm || rc=1
  sh "$0" "$gpurun" "${2:-6.12}" unstable || rc=1
  exit "$rc"
fi
if [ "${GPURUN_IN_SYSTEMD_GUEST:-}" != 1 ]; then
  sh scripts/install-deps.sh
  . integration/lib/common.sh
  trap 'rm -rf "$work"' EXIT INT TERM
  # One boot, with fixtures of its own: under the checkout, which the guest
  # sees at the same path.
  boot() {
  [ -z "${work:-}" ] || rm -rf "$work"
  work=$(mktemp -d "$PWD/target/systemd-suite.XXXXXX")
  chmod 755 "$work" # the rootless Podman user reads the fake driver there
  make_fixtures
  [ -x target/debug/cri-client ] || cargo build --locked -q -p cri-client
  python3 integration/lib/toolkit_cdi_spec.py "$host/driver" "$host/dev" "$work/nvidia-cdi.json"
  # A node no driver has, open to all, for a user-namespace container to
  # be given by a bind mount (mknod is refused there whatever the rules).
  mknod -m 666 "$work/c42" c 42 0
  # Slurm's (bookworm's root alone has Slurm): its default cases include it.
  if [ "$1" = bookworm ]; then
    case " ${GPURUN_SYSTEMD_CASES:-slurm} " in *" slurm "*) sh integration/slurm.sh --fixtures "$work/slurm" ;; esac
  fi
  # CRIU 4, for the GPU checkpoint: scripts/fixtures/criu.sh's, carried under the
  # checkout (the guest's own root has Debian 12's 3.17).
  criu4=$(sh scripts/fixtures/criu.sh --gpu)
  if [ "$criu4" = /var/cache/gpurun-criu/criu ]; then
    cp -a /var/cache/gpurun-criu/root "$work/criu-root"
    lib="$work/criu-root/usr/lib/x86_64-linux-gnu"
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$lib/ld-linux-x86-64.so.2" "$lib" \
      "$work/criu-root/usr/sbin/criu" > "$work/criu4"
    chmod 755 "$work/criu4"
  else
    ln -s "$criu4" "$work/criu4"
  fi
  GPURUN_IN_SYSTEMD_GUEST=1 GPURUN_SUITE_WORK="$work" \
    sh scripts/vm.sh --systemd-root "$1" --timeout "${GPURUN_GUEST_TIMEOUT:-900}" "$2" \
      -- sh integration/systemd.sh "$gpurun"
  }
  # A guest that goes down or hangs boots once more, on fresh fixtures.
  rc=0
  boot_once_more systemd.sh boot "$3" "${2:-6.12}" || rc=$?
  exit "$rc"
fi

# In the guest: every check reports, none stops the suite.
set +e
work=$GPURUN_SUITE_WORK
pids=""
. integration/lib/common.sh
host="$work/fx/host"
roots="--driver-root $host/driver --dev-root $host --proc-root $host/proc"
mkdir -p /etc/gpurun
cp "$work/gpurun.toml" /etc/gpurun/config.toml
check "systemd is PID 1" systemd "$(cat /proc/1/comm)"
check "cgroup v2 only" cgroup2fs "$(stat -f -c %T /sys/fs/cgroup)"
default_cases="shell runc ctr cri docker podman cdi rootless checkpoint slurm"
# runc 1.3 keeps its GPU through a reload (the runc case shows 1.1.5's
# loss); ctr, CDI and rootless Podman on today's engines run natively
# (integration/current-engines.sh).
containerd --version | grep -q 'containerd/v2 ' && default_cases="cri docker podman quadlet"
cases=${GPURUN_SYSTEMD_CASES:-$default_cases}
case_on() { case " $cases " in *" $1 "*) return 0 ;; esac; return 1; }
echo "systemd suite on $(uname -r), systemd $(systemctl --version | awk 'NR == 1 {print $2}'), $(containerd --version | awk '{print $3}'): $cases"

# --- The device probe every engine's container runs ---
# Each container holds CAP_MKNOD (checked: every mknod must work), so an
# open that fails with EPERM was refused by the device cgroup and nothing
# else; ENXIO, ENODEV or EIO mean the open got through to a driver (or to
# the lack of one: the fake GPU nodes have none). It prints NAME=denied or
# NAME=through(...) for: the guest's disk, a number no driver has, a GPU
# not asked for, every /dev/nvidia* node the container was given, the
# default nodes and a pts number.
disk=$(stat -c '%t %T' /dev/vda)
disk_major=$((0x${disk% *}))
disk_minor=$((0x${disk#* }))
probe='
opens() {
  if err=$(head -c1 "$1" 2>&1 >/dev/null); then echo "through(open)"; return; fi
  case "$err" in
    *"not permitted"*) echo denied ;;
    *"No such device or address"*) echo "through(ENXIO)" ;;
    *"No such device"*) echo "through(ENODEV)" ;;
    *"Input/output error"*) echo "through(EIO)" ;;
    *) echo "other($err)" ;;
  esac
}
node() {
  rm -f "/tmp/$1"
  if mknod "/tmp/$1" "$2" "$3" "$4" 2>/dev/null; then echo "$1=$(opens "/tmp/$1")"; else echo "$1=no-mknod"; fi
}
node disk b '"$disk_major $disk_minor"'
node c42 c 42 0
node gpu1 c 195 1
node pts c 136 0
for n in /dev/nvidia* /dev/nvidia-caps/* /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty; do
  [ -e "$n" ] && echo "$n=$(opens "$n")"
done
true'
# expect_devices LABEL OUTPUT: the rules hold in one probe's output.
expect_devices() {
  check "$1: CAP_MKNOD held (every mknod worked)" "" "$(echo "$2" | grep no-mknod)"
  check_contains "$1: the guest's disk is refused (EPERM)" "disk=denied" "$2"
  check_contains "$1: a number no driver has (c 42 0) is refused" "c42=denied" "$2"
  check_contains "$1: a GPU not asked for (c 195 1) is refused" "gpu1=denied" "$2"
  check_contains "$1: the requested /dev/nvidia0 opens" "/dev/nvidia0=through" "$2"
  check_contains "$1: /dev/nvidiactl opens" "/dev/nvidiactl=through" "$2"
  check "$1: no node the container was given is refused" "" "$(echo "$2" | grep '^/dev/.*=denied')"
  check "$1: the default nodes and pts open" "null zero full random urandom tty pts" \
    "$(for n in null zero full random urandom tty; do echo "$2" | grep -q "^/dev/$n=through" && printf '%s ' $n; done
       echo "$2" | grep -q '^pts=through' && echo pts)"
}
# In a user namespace mknod is refused whatever the rules, so the probe
# there opens nodes a mount binds in, open to all (0666): GPU 1 and c 42 0
# must fail with EPERM, which only the device rules give; /dev/null, bound
# the same way, must open.
uprobe="$(echo "$probe" | sed -n '/^opens()/,/^}/p')
echo uid=\$(id -u) host=\$(awk '{print \$2}' /proc/self/uid_map)
for n in /dev/nvidia0 /dev/nvidiactl /mnt/gpu1 /mnt/c42 /mnt/null; do echo \"\$n=\$(opens \$n)\"; done
ls /dev/nvidia1 2>/dev/null; nvidia-smi >/dev/null 2>&1; echo smi=\$?"
expect_userns_devices() {
  check_contains "$1: root is host uid 100000" "uid=0 host=100000" "$2"
  check_contains "$1: the requested /dev/nvidia0 opens" "/dev/nvidia0=through" "$2"
  check_contains "$1: /dev/nvidiactl opens" "/dev/nvidiactl=through" "$2"
  check_contains "$1: GPU 1, bound in by a mount, is refused (EPERM)" "/mnt/gpu1=denied" "$2"
  check_contains "$1: c 42 0, bound in by a mount, is refused (EPERM)" "/mnt/c42=denied" "$2"
  check_contains "$1: /dev/null, bound in the same way, opens" "/mnt/null=through" "$2"
  check_contains "$1: nvidia-smi exits 9" "smi=9" "$2"
  check "$1: GPU 1 is not in /dev" "" "$(echo "$2" | grep -x /dev/nvidia1)"
}
# A unit that has nothing to do with containers, to restart.
cat > /run/systemd/system/gpurun-unrelated.service <<'EOF'
[Service]
ExecStart=/bin/sleep 100000
EOF
systemctl daemon-reload
systemctl start gpurun-unrelated.service
# host_events: what may make systemd apply a unit's device program again.
host_events() {
  systemctl daemon-reload
  systemctl restart gpurun-unrelated.service
}

# --- gpurun --systemd-cgroup, straight from a shell ---
if case_on shell; then . integration/systemd/shell.sh; fi

# --- GPU checkpoint and restore under the systemd driver ---
if case_on checkpoint; then . integration/systemd/checkpoint.sh; fi

# --- runc 1.1.5 beside it: the GPU as a CDI spec gives it (node and allow rule) ---
if case_on runc; then . integration/systemd/runc.sh; fi

# --- containerd: ctr with the systemd cgroup driver, and CRI with SystemdCgroup = true ---
if case_on ctr || case_on cri; then . integration/systemd/containerd.sh; fi
if case_on ctr; then . integration/systemd/ctr.sh; fi
if case_on cri; then . integration/systemd/cri.sh; fi
stop_engines
pids=""

# --- Docker on the systemd cgroup driver ---
if case_on docker; then . integration/systemd/docker.sh; fi

# --- rootful Podman with the systemd cgroup manager ---
if case_on podman; then . integration/systemd/podman.sh; fi

# --- A Quadlet unit (Podman's systemd integration) with a GPU by CDI name:
# NVIDIA's own spec, gpurun as the runtime, CAP_MKNOD held, the probe run
# as the unit's service; its output is the unit's journal.
if case_on quadlet; then . integration/systemd/quadlet.sh; fi

# --- CDI under the systemd driver: NVIDIA's own spec, whose nvidia-cdi-hook
# is not installed; gpurun does the hooks' work and the device rules the
# spec's nodes bring hold as an env request's do.
if case_on cdi; then . integration/systemd/cdi.sh; fi

# --- rootless Podman in a systemd user session: a delegated cgroup ---
if case_on rootless; then . integration/systemd/rootless.sh; fi

# --- Slurm's srun --container, its cgroup/v2 plugin asking systemd for the
# step's scope (integration/slurm.sh; its own checks, one line here) ---
if case_on slurm; then
  GPURUN_SUITE_WORK="$work/slurm" sh integration/slurm.sh "$gpurun"
  check "slurm.sh on this systemd host: every check passed" 0 "$?"
fi

summary systemd
