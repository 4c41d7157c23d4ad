#!/bin/sh
# The vendored libcontainer and libcgroups are their 0.7.0 releases plus
# the patch series in crates/vendor/CRATE/patches (scripts/fork.sh). This
# fetches each release through cargo (its own registry and cache, so a
# mirror or an offline cache serves) and fails unless:
#  - the queue and the series agree (scripts/ci/check-fork.py: numbering,
#    tags, Files: and Forwarded: lines, one patch file per entry with its
#    title, its Forwarded: trailer and exactly its files, every Test: there);
#  - the series applied to the release, in order, is the vendored tree,
#    byte for byte;
#  - with each patch in turn applied, the files changed parse and are in
#    rustfmt's layout (scripts/fork.sh stages).
# container-device-interface 1.1.1 is its release but for one line of its
# Cargo.toml. Prints each fork's size and how long its series took to apply.
#   sh scripts/ci/check-fork.sh
set -eu
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "check-fork: $*" >&2; failed=1; }
for crate in libcontainer libcgroups; do
  ours="crates/vendor/$crate"
  python3 scripts/ci/check-fork.py "$ours" || failed=1
  release=$(sh scripts/fork.sh release "$crate")
  start=$(date +%s%N)
  if sh scripts/fork.sh apply "$crate" "$work/$crate" > "$work/$crate.log" 2>&1; then
    took=$((($(date +%s%N) - start) / 1000000))
    diff -r -x GPURUN-PATCH.md -x patches "$work/$crate" "$ours" >&2 ||
      fail "$ours differs from $crate 0.7.0 with its series applied (sh scripts/fork.sh edit, then export)"
  else
    cat "$work/$crate.log" >&2
    fail "$ours/patches does not apply to $crate 0.7.0"
    took=-
  fi
  sh scripts/fork.sh stages "$crate" || fail "$ours/patches: a stage of the series does not parse or is not rustfmt's layout"
  patches=$(ls "$ours/patches" | wc -l)
  files=$(cd "$ours" && find src -type f | while read -r f; do
    cmp -s "$f" "$release/$f" 2>/dev/null || echo "$f"
  done | wc -l)
  lines=$(diff -r -U0 "$release/src" "$ours/src" | grep -cE '^[+-][^+-]' || true)
  echo "check-fork: $crate: release fetched and $patches patches applied in $took ms; $files src files differ from 0.7.0, $lines lines added or removed"
done
# container-device-interface 1.1.1: the release's sources and tests as
# published, its Cargo.toml changed by the one line its GPURUN-PATCH.md
# gives (jsonschema without default features).
release=$(sh scripts/fork.sh release container-device-interface)
ours=crates/vendor/container-device-interface
for d in src tests; do
  diff -r -q "$release/$d" "$ours/$d" >&2 || fail "$ours/$d differs from container-device-interface 1.1.1"
done
added=$(diff "$release/Cargo.toml" "$ours/Cargo.toml" | grep -E '^[<>]' || true)
[ "$added" = "> default-features = false" ] ||
  fail "$ours/Cargo.toml differs from the release other than by its one patch: $added"
echo "check-fork: container-device-interface: 1 patch, Cargo.toml alone, 1 line added"
exit "$failed"
