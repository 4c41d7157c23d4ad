#!/bin/sh
# Runs every cargo-fuzz target of crates/gpurun-gpu/fuzz for SECONDS each
# (default 20; CI uses that, run it longer by hand: sh scripts/ci/fuzz.sh 600).
# The kept corpus in fuzz/corpus/<target> is read, never written: new inputs
# go to a scratch directory, so a run leaves the tree as it was. A crash
# fails the script and leaves the input in fuzz/artifacts/<target>.
# Needs the nightly toolchain (libFuzzer's sanitizer flags); installs
# cargo-fuzz from crates.io if it is missing.
set -eu
seconds=${1:-20}
cd "$(dirname "$0")/../../crates/gpurun-gpu/fuzz"
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz.sh: the nightly toolchain is missing: rustup toolchain install nightly" >&2
  exit 1
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in $(cargo +nightly fuzz list); do
  mkdir -p "$scratch/$target"
  echo "fuzz: $target for ${seconds}s"
  log="$scratch/$target.log"
  if ! cargo +nightly fuzz run -O "$target" "$scratch/$target" "corpus/$target" -- \
      -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz: $target failed; a failing input is kept in crates/gpurun-gpu/fuzz/artifacts/$target" >&2
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
done
echo "fuzz: every target ran ${seconds}s without a failure"
