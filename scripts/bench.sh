#!/bin/sh
# Times `run` of `true` for gpurun and runc on the same busybox bundle,
# interleaved, and prints the medians, their ratio and peak RSS; then the
# cost of gpurun's protected re-exec (scripts/bench_costs.py).
# GPURUN_BIN=... uses that binary instead of building one.
# Usage: scripts/bench.sh [ROUNDS]   (default 100)
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-100}
sh scripts/install-deps.sh
g=${GPURUN_BIN:-}
if [ -z "$g" ]; then
  cargo build --locked --release -p gpurun >/dev/null 2>&1
  g="$PWD/target/release/gpurun"
fi
work=$(mktemp -d)
# State on tmpfs, where both runtimes keep it by default (/run/gpurun,
# /run/runc); bundles stay on disk.
state=$(mktemp -d -p /run)
trap 'rm -rf "$work" "$state"' EXIT
sh scripts/busybox-bundle.sh "$work/bundle" "$g" >/dev/null
jq '.process.args = ["true"]' "$work/bundle/config.json" > "$work/c" && mv "$work/c" "$work/bundle/config.json"
python3 scripts/bench_run.py "$rounds" "$work/bundle" \
  "gpurun=$g --root $state/gpurun" \
  "runc=runc --root $state/runc"
python3 scripts/bench_costs.py "$rounds" "$g"
