#!/bin/sh
# Many starts at once: N concurrent `run` of `true` on a busybox bundle
# (default N = 1, 10, 40, 80), gpurun against runc (and crun where it runs:
# it refuses cgroup v1 hybrid hosts), as root and rootless, the runtimes
# interleaved over ROUNDS rounds (scripts/bench/parallel.py): throughput,
# p50 and p99 per start, CPU per start and the throughput ratio to runc.
# GPURUN_BIN=... uses that binary instead of building one.
# Usage: scripts/bench/parallel.sh [N...]   (GPURUN_BENCH_ROUNDS, default 5)
set -eu
cd "$(dirname "$0")/../.."
sizes=${*:-1 10 40 80}
rounds=${GPURUN_BENCH_ROUNDS:-5}
. scripts/bench/common.sh
echo "== root, $rounds rounds"
if crun_runs; then
  python3 scripts/bench/parallel.py "$rounds" "$work/bundle" "$sizes" "gpurun=$g --root $state/gpurun" \
    "crun=crun --root $state/crun" "runc=runc --root $state/runc"
else
  echo "(crun does not run on this host: left out)"
  python3 scripts/bench/parallel.py "$rounds" "$work/bundle" "$sizes" "gpurun=$g --root $state/gpurun" \
    "runc=runc --root $state/runc"
fi
echo "== rootless ($user), $rounds rounds"
python3 scripts/bench/parallel.py --as "$user" "$rounds" "$work/rootless" "$sizes" \
  "gpurun=$g --root $state/rootless/gpurun" \
  "runc=runc --root $state/rootless/runc"
