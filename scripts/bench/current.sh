#!/bin/sh
# Times `run` of `true` on a busybox bundle, interleaved, as root, against
# today's runc (Debian unstable's, in scripts/fixtures/current-engines.sh's root)
# and Debian 12's runc beside it, and crun where it runs (crun 1.28
# refuses cgroup v1 hybrid hosts: a probe says). Everything runs inside the
# current-engines root, so each peer uses its own distribution's libraries;
# Debian 12's runc is carried in as a file. Medians, CPU per start, ratios
# to the last runtime named and peak RSS (scripts/bench/interleave.py).
# With --engine, the engine path instead (scripts/bench/engine.py:
# create, start, state, kill, reap, delete of a `sleep`, as containerd's
# shim and conmon call them), each step's median and the whole path's.
# GPURUN_BIN=... uses that binary instead of a release build.
# Usage: scripts/bench/current.sh [--engine] [ROUNDS]   (default 60; as root)
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
bench_mode 60 "$@"
work=$(mktemp -d /tmp/gpurun-bench-current.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
bench_bundle "$work/bundle" "$g"
cp "$(command -v runc)" "$work/runc-debian12"
old_runc=$("$work/runc-debian12" --version | head -1 | awk '{print $3}')
sh scripts/fixtures/current-engines.sh versions | sed 's/^/current engines: /'
sh scripts/fixtures/current-engines.sh enter sh -euc '
  g=$1 work=$2 rounds=$3 old=$4 bench=$5
  state=$(mktemp -d -p /run)
  new=$(runc --version | head -1 | awk "{print \$3}")
  crun=$(crun --version | head -1 | awk "{print \$3}")
  peers="runc-$old=$work/runc-debian12 --root $state/runc-old"
  if crun --root "$state/crun" create --bundle "$work/bundle" probe >/dev/null 2>&1 &&
    crun --root "$state/crun" delete --force probe >/dev/null 2>&1; then
    peers="$peers|crun-$crun=crun --root $state/crun"
  else
    echo "(crun $crun does not run on this host: left out)"
  fi
  IFS="|"
  # shellcheck disable=SC2086
  python3 "scripts/$bench" "$rounds" "$work/bundle" "gpurun=$g --root $state/gpurun" \
    $peers "runc-$new=runc --root $state/runc-new"
' sh "$g" "$work" "$rounds" "$old_runc" "$bench"
