#!/bin/sh
# What the glibc 2.28 floor costs a start: `run` of `true` on a busybox
# bundle, interleaved, as root, the released build (scripts/release-build.sh:
# zig, glibc 2.28's symbols, no packed relocations) against a build of the
# same checkout linked as before the floor (this host's glibc, -z
# pack-relative-relocs), with Debian 12's runc as the peer. Medians, CPU
# per start, ratios to runc and peak RSS (scripts/bench/interleave.py);
# the ratio of the two gpurun medians is the floor's cost.
# Usage: sh scripts/bench/glibc-floor.sh [ROUNDS]   (default 100; as root)
set -eu
cd "$(dirname "$0")/../.."
rounds=${1:-100}
floor=$(sh scripts/release-build.sh --arch "$(dpkg --print-architecture)")
# The link before the floor: DT_RELR and this host's glibc, its own target
# directory (other flags rebuild every crate).
CARGO_TARGET_DIR=target/bench-relr \
  RUSTFLAGS="-C link-arg=-Wl,-z,pack-relative-relocs -L native=/usr/lib/$(gcc -print-multiarch)" \
  cargo build --locked --release -p gpurun >&2
before=target/bench-relr/release/gpurun
GPURUN_BIN=$PWD/$floor
. scripts/bench/lib.sh
export GPURUN_BIN
bench_setup
bench_dirs
args='["true"]'
bench_bundle "$work/bundle" "$g"
cp "$floor" "$work/gpurun-glibc-2.28"
cp "$before" "$work/gpurun-host-glibc"
. scripts/lib/package-files.sh
for b in "$work/gpurun-glibc-2.28" "$work/gpurun-host-glibc"; do
  echo "$(basename "$b"): starts on glibc $(glibc_floor "$b")"
done
python3 scripts/bench/interleave.py "$rounds" "$work/bundle" \
  "gpurun-glibc-2.28=$work/gpurun-glibc-2.28 --root $state/floor" \
  "gpurun-host-glibc=$work/gpurun-host-glibc --root $state/before" \
  "runc-$(bench_version runc)=runc --root $state/runc"
