#!/bin/sh
# Times `run` of `true` for gpurun and runc on the same busybox bundle,
# interleaved, and prints the medians and their ratio.
# Usage: scripts/bench.sh [ROUNDS]   (default 100)
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-100}
sh scripts/install-deps.sh
cargo build --locked --release -p gpurun >/dev/null 2>&1
work=$(mktemp -d)
# State on tmpfs, where both runtimes keep it by default (/run/gpurun,
# /run/runc); bundles stay on disk.
state=$(mktemp -d -p /run)
trap 'rm -rf "$work" "$state"' EXIT
sh scripts/busybox-bundle.sh "$work/bundle" "$PWD/target/release/gpurun" >/dev/null
jq '.process.args = ["true"]' "$work/bundle/config.json" > "$work/c" && mv "$work/c" "$work/bundle/config.json"
python3 scripts/bench_run.py "$rounds" "$work/bundle" \
  "gpurun=$PWD/target/release/gpurun --root $state/gpurun" \
  "runc=runc --root $state/runc"
