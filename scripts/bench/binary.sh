#!/bin/sh
# Prints the gpurun binary the benchmarks time: $GPURUN_BIN where set,
# else a release build of this checkout (built first).
#   g=$(sh scripts/bench/binary.sh)
set -eu
cd "$(dirname "$0")/../.."
if [ -n "${GPURUN_BIN:-}" ]; then
  echo "$GPURUN_BIN"
  exit 0
fi
cargo build --locked --release -p gpurun >/dev/null 2>&1
echo "$PWD/target/release/gpurun"
