#!/bin/sh
# The vendored libcontainer and libcgroups are the 0.7.0 releases plus the
# patches their GPURUN-PATCH.md describe: this fetches each release from
# crates.io and fails if a file of ours differs from it (or is new) without
# being named in that GPURUN-PATCH.md, or if a file named there is the
# release's unchanged. Prints how many files and lines each fork changes.
#   sh scripts/check-fork.sh
set -eu
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for crate in libcontainer libcgroups; do
  curl -sSfL "https://static.crates.io/crates/$crate/$crate-0.7.0.crate" | tar -xz -C "$work"
  release="$work/$crate-0.7.0"
  ours="crates/vendor/$crate"
  notes="$ours/GPURUN-PATCH.md"
  # Files under src/ that differ from the release or are new.
  changed=$(cd "$ours" && find src -type f | sort | while read -r f; do
    cmp -s "$f" "$release/$f" 2>/dev/null || echo "$f"
  done)
  for f in $changed; do
    short=${f#src/}
    grep -qE "\`($f|$short)\`" "$notes" || {
      echo "check-fork: $ours/$f differs from $crate 0.7.0 but $notes does not name it" >&2
      failed=1
    }
  done
  # Every src path the notes name must be one of ours that differs.
  for f in $(grep -oE '`src/[A-Za-z0-9_/]+\.rs`' "$notes" | tr -d '`' | sort -u); do
    echo "$changed" | grep -qx "$f" || {
      echo "check-fork: $notes names $f, which is $crate 0.7.0's unchanged (or missing)" >&2
      failed=1
    }
  done
  lines=$(diff -r -U0 "$release/src" "$ours/src" | grep -cE '^[+-][^+-]' || true)
  echo "check-fork: $crate: $(echo "$changed" | grep -c .) files differ from 0.7.0, $lines lines added or removed"
done
exit "$failed"
