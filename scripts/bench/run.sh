#!/bin/sh
# Times `run` of `true` on a busybox bundle, interleaved with runc (and crun
# where it runs: it refuses cgroup v1 hybrid hosts), as root and rootless
# (the unprivileged test user, with a `spec --rootless` bundle of its own):
# medians, CPU per start, ratios and peak RSS (scripts/bench/interleave.py). Then
# the cost of gpurun's protected re-exec (scripts/bench/costs.py).
# GPURUN_BIN=... uses that binary instead of building one; it must be a
# root-owned install (as in /usr/local/bin) for the rootless figure to be
# the one users get.
# Usage: scripts/bench/run.sh [ROUNDS]   (default 100)
set -eu
cd "$(dirname "$0")/../.."
rounds=${1:-100}
. scripts/bench/common.sh
echo "== root"
if crun_runs; then
  python3 scripts/bench/interleave.py "$rounds" "$work/bundle" "gpurun=$g --root $state/gpurun" \
    "crun=crun --root $state/crun" "runc=runc --root $state/runc"
else
  echo "(crun does not run on this host: left out)"
  python3 scripts/bench/interleave.py "$rounds" "$work/bundle" "gpurun=$g --root $state/gpurun" \
    "runc=runc --root $state/runc"
fi

echo "== rootless ($user)"
python3 scripts/bench/interleave.py --as "$user" "$rounds" "$work/rootless" \
  "gpurun=$g --root $state/rootless/gpurun" \
  "runc=runc --root $state/rootless/runc"
python3 scripts/bench/costs.py "$rounds" "$g"
