#!/bin/sh
# Times `run` of `true` on a busybox bundle, interleaved with runc (and crun
# where it runs: it refuses cgroup v1 hybrid hosts), as root and rootless
# (the unprivileged test user, with a `spec --rootless` bundle of its own):
# medians, CPU per start, ratios and peak RSS (scripts/bench/interleave.py).
# Then, as root against the same peers, the engine path (create, start,
# state, kill, reap, delete of a `sleep`, as containerd's shim and conmon
# call them: scripts/bench/engine.py), `run` under the systemd cgroup
# driver where systemd is PID 1, and the cost of gpurun's protected
# re-exec (scripts/bench/costs.py).
# GPURUN_BIN=... uses that binary instead of building one; it must be a
# root-owned install (as in /usr/local/bin) for the rootless figure to be
# the one users get. GPURUN_RUNC_CURRENT=PATH adds today's runc (a binary
# carried to the host: scripts/bench/kit.sh) beside Debian 12's.
# Usage: scripts/bench/run.sh [ROUNDS]   (default 100)
set -eu
cd "$(dirname "$0")/../.."
rounds=${1:-100}
. scripts/bench/common.sh
set -- "gpurun=$g --root $state/gpurun"
if crun_runs; then
  set -- "$@" "crun-$(bench_version crun)=crun --root $state/crun"
else
  echo "(crun does not run on this host: left out)"
fi
if [ -n "${GPURUN_RUNC_CURRENT:-}" ]; then
  if current=$(bench_version "$GPURUN_RUNC_CURRENT") && [ -n "$current" ]; then
    set -- "$@" "runc-$current=$GPURUN_RUNC_CURRENT --root $state/runc-current"
  else
    echo "($GPURUN_RUNC_CURRENT does not run here: left out)"
  fi
fi
set -- "$@" "runc-$(bench_version runc)=runc --root $state/runc"
echo "== root"
python3 scripts/bench/interleave.py "$rounds" "$work/bundle" "$@"
echo "== engine path, root"
cp -a "$work/bundle" "$work/engine"
bundle_args "$work/engine" '["sleep", "1000"]'
python3 scripts/bench/engine.py "$rounds" "$work/engine" "$@"

# Where systemd is PID 1 on pure cgroup v2, as on GPU hosts (and the
# engines' default driver there): `run` again, every runtime with
# --systemd-cgroup (a transient scope per start).
if [ "$(cat /proc/1/comm)" = systemd ] && [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
  echo "== root, systemd cgroup driver"
  (
    for runtime in "$@"; do set -- "$@" "$runtime --systemd-cgroup"; shift; done
    python3 scripts/bench/interleave.py "$rounds" "$work/bundle" "$@"
  ) || echo "(a runtime failed under the systemd driver: that table is left out)"
fi

echo "== rootless ($user)"
python3 scripts/bench/interleave.py --as "$user" "$rounds" "$work/rootless" \
  "gpurun=$g --root $state/rootless/gpurun" \
  "runc=runc --root $state/rootless/runc"
python3 scripts/bench/costs.py "$rounds" "$g"
