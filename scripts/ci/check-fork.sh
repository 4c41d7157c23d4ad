#!/bin/sh
# The vendored libcontainer and libcgroups are the 0.7.0 releases plus the
# numbered patch queue in their GPURUN-PATCH.md. This fetches each release
# through cargo (its own registry and cache, so a mirror or an offline
# cache serves) and fails unless:
#  - the patches are numbered 1, 2, 3... and each heading ends in
#    "(for upstream)" or "(gpurun only)";
#  - each patch has a "Files:" line naming at least one src file, and every
#    file named there differs from the release (or is new);
#  - each patch has a "Forwarded:" line (DEP-3's): "no" or where it was
#    sent (an https:// address) for upstream, "not-needed" for gpurun only;
#  - every src file that differs from the release is named by some patch.
# Prints how many files and lines each fork changes.
#   sh scripts/ci/check-fork.sh
set -eu
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "check-fork: $*" >&2; failed=1; }
# A scratch project that depends on the releases: `cargo fetch` puts their
# sources in cargo's registry, and `cargo metadata` says where.
mkdir -p "$work/scratch/src"
touch "$work/scratch/src/lib.rs"
cat > "$work/scratch/Cargo.toml" <<TOML
[package]
name = "check-fork-scratch"
version = "0.0.0"
edition = "2021"
[dependencies]
libcontainer = { version = "=0.7.0", default-features = false }
libcgroups = { version = "=0.7.0", default-features = false }
container-device-interface = "=1.1.1"
TOML
(cd "$work/scratch" && cargo fetch -q)
sources=$(cd "$work/scratch" && cargo metadata --format-version 1 -q |
  python3 -c 'import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if (p["name"], p["version"]) in (("libcontainer", "0.7.0"), ("libcgroups", "0.7.0"),
                                     ("container-device-interface", "1.1.1")):
        print(p["name"], os.path.dirname(p["manifest_path"]))')
for crate in libcontainer libcgroups; do
  release=$(echo "$sources" | awk -v c="$crate" '$1 == c { print $2 }')
  [ -d "$release/src" ] || { echo "check-fork: cargo did not fetch $crate 0.7.0" >&2; exit 1; }
  ours="crates/vendor/$crate"
  queue="$ours/GPURUN-PATCH.md"
  # Files under src/ that differ from the release or are new.
  changed=$(cd "$ours" && find src -type f | sort | while read -r f; do
    cmp -s "$f" "$release/$f" 2>/dev/null || echo "$f"
  done)
  # One line per patch: "NUMBER|TAG|FILES|FORWARDED".
  patches=$(awk '
    /^## / {
      if (n) print n "|" tag "|" files "|" fwd
      n = $2; sub(/\.$/, "", n); tag = ""; files = ""; fwd = ""
      if ($0 ~ /\(for upstream\)$/) tag = "upstream"
      if ($0 ~ /\(gpurun only\)$/) tag = "gpurun"
      next
    }
    /^Files: / && n && files == "" { files = substr($0, 8) }
    /^Forwarded: / && n && fwd == "" { fwd = substr($0, 12) }
    END { if (n) print n "|" tag "|" files "|" fwd }
  ' "$queue")
  expected=1
  named=""
  while IFS='|' read -r number tag files forwarded; do
    [ "$number" = "$expected" ] || fail "$queue: patch $number where patch $expected was expected"
    expected=$((expected + 1))
    [ -n "$tag" ] || fail "$queue: patch $number says neither (for upstream) nor (gpurun only)"
    case "$tag:$forwarded" in
      upstream:no | upstream:https://?* | gpurun:not-needed) ;;
      *:) fail "$queue: patch $number has no Forwarded: line (no, https://..., or not-needed)" ;;
      *) fail "$queue: patch $number ($tag) says Forwarded: $forwarded (upstream: no or https://...; gpurun only: not-needed)" ;;
    esac
    paths=$(echo "$files" | grep -oE '`src/[A-Za-z0-9_/]+\.rs`' | tr -d '`' || true)
    [ -n "$paths" ] || fail "$queue: patch $number has no Files: line naming src files"
    for f in $paths; do
      echo "$changed" | grep -qx "$f" || fail "$queue: patch $number names $f, which is $crate 0.7.0's unchanged (or missing)"
      named="$named
$f"
    done
  done <<PATCHES
$patches
PATCHES
  for f in $changed; do
    echo "$named" | grep -qx "$f" || fail "$ours/$f differs from $crate 0.7.0 but no patch in $queue names it"
  done
  lines=$(diff -r -U0 "$release/src" "$ours/src" | grep -cE '^[+-][^+-]' || true)
  echo "check-fork: $crate: $((expected - 1)) patches, $(echo "$changed" | grep -c .) files differ from 0.7.0, $lines lines added or removed"
done
# container-device-interface 1.1.1: the release's sources and tests as
# published, its Cargo.toml changed by the one line its GPURUN-PATCH.md
# gives (jsonschema without default features).
release=$(echo "$sources" | awk '$1 == "container-device-interface" { print $2 }')
ours=crates/vendor/container-device-interface
[ -d "$release/src" ] || { echo "check-fork: cargo did not fetch container-device-interface 1.1.1" >&2; exit 1; }
for d in src tests; do
  diff -r -q "$release/$d" "$ours/$d" >&2 || fail "$ours/$d differs from container-device-interface 1.1.1"
done
added=$(diff "$release/Cargo.toml" "$ours/Cargo.toml" | grep -E '^[<>]' || true)
[ "$added" = "> default-features = false" ] ||
  fail "$ours/Cargo.toml differs from the release other than by its one patch: $added"
echo "check-fork: container-device-interface: 1 patch, Cargo.toml alone, 1 line added"
exit "$failed"
