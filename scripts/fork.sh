#!/bin/sh
# The vendored crates (crates/vendor/CRATE) are a crates.io release plus
# the patch series in crates/vendor/CRATE/patches, one git format-patch
# file per entry of its GPURUN-PATCH.md. The tree beside them is the
# series applied; scripts/ci/check-fork.sh fails where the two differ.
#
#   sh scripts/fork.sh release CRATE      the release's sources (fetched through cargo)
#   sh scripts/fork.sh apply CRATE DIR    the release with the series applied, in DIR
#   sh scripts/fork.sh edit CRATE DIR     DIR as a git repository: the release
#                                         (tag "release"), then one commit per patch
#   sh scripts/fork.sh export CRATE DIR   the series and the vendored tree written
#                                         back from DIR's commits after "release"
#   sh scripts/fork.sh stages CRATE       fails unless the release with each patch
#                                         in turn parses and is rustfmt's layout
#
# To change a patch: edit, change it with `git rebase -i release` there (or
# add a commit for a new entry, and its section to GPURUN-PATCH.md), then
# export. To follow a newer upstream: edit, commit the new release's sources
# on a branch from "release", and `git rebase --onto` it (git keeps each
# patch's hunks as far as they still apply, and stops where they do not).
set -eu
here=$(pwd)
cd "$(dirname "$0")/.."
top=$(pwd)

# DIR as given, from where the script was run.
absolute() {
  case "$1" in /*) echo "$1" ;; *) echo "$here/$1" ;; esac
}

usage() {
  echo "usage: sh scripts/fork.sh release CRATE | apply CRATE DIR | edit CRATE DIR | export CRATE DIR | stages CRATE" >&2
  exit 2
}

# The [package] version of the vendored crate.
version_of() {
  awk '/^\[package\]/ { p = 1; next } /^\[/ { p = 0 } p && /^version = / { gsub(/"/, "", $3); print $3; exit }' \
    "crates/vendor/$1/Cargo.toml"
}

# The release's source directory in cargo's registry: a scratch project
# that depends on it exactly, fetched (a mirror or an offline cache serves).
release_dir() {
  crate=$1
  [ -f "crates/vendor/$crate/GPURUN-PATCH.md" ] || { echo "fork.sh: no vendored crate $crate" >&2; exit 2; }
  version=$(version_of "$crate")
  scratch=$(mktemp -d)
  mkdir -p "$scratch/src"
  touch "$scratch/src/lib.rs"
  printf '[package]\nname = "fork-scratch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = { version = "=%s", default-features = false }\n' \
    "$crate" "$version" > "$scratch/Cargo.toml"
  (cd "$scratch" && cargo fetch -q)
  dir=$(cd "$scratch" && cargo metadata --format-version 1 -q |
    python3 -c 'import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if (p["name"], p["version"]) == (sys.argv[1], sys.argv[2]):
        print(os.path.dirname(p["manifest_path"]))' "$crate" "$version")
  rm -rf "$scratch"
  [ -d "$dir/src" ] || { echo "fork.sh: cargo did not fetch $crate $version" >&2; exit 1; }
  echo "$dir"
}

# git with a fixed identity and dates, so that the series is the same
# whoever exports it.
git_fixed() {
  GIT_AUTHOR_DATE="2026-12-06T00:00:00Z" GIT_COMMITTER_DATE="2026-12-06T00:00:00Z" \
    git -c user.name="gpurun maintainers" -c user.email="gpurun@invalid" \
    -c core.autocrlf=false -c commit.gpgsign=false "$@"
}

# The crates kept as a series (container-device-interface is its release
# but for one line, which check-fork.sh checks).
series_only() {
  [ -d "crates/vendor/$1/patches" ] ||
    { echo "fork.sh: crates/vendor/$1 is kept as no patch series (it has no patches/)" >&2; exit 2; }
}

# DIR: the release as published, less cargo's own packaging files, as the
# first commit of a new repository (tagged "release"), then the series.
edit() {
  crate=$1 dir=$2
  series_only "$crate"
  [ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] || { echo "fork.sh: $dir is not empty" >&2; exit 2; }
  release=$(release_dir "$crate")
  mkdir -p "$dir"
  cp -R "$release/." "$dir/"
  chmod -R u+w "$dir"
  rm -f "$dir/.cargo_vcs_info.json" "$dir/Cargo.toml.orig" "$dir/.cargo-ok"
  git_fixed -C "$dir" init -q
  git_fixed -C "$dir" add -A
  git_fixed -C "$dir" commit -q -m "$crate $(version_of "$crate") as published"
  git_fixed -C "$dir" tag release
  set -- "$top/crates/vendor/$crate/patches/"*.patch
  [ -e "$1" ] || return 0
  git_fixed -C "$dir" am -q --committer-date-is-author-date "$@"
}

apply() {
  edit "$1" "$2"
  rm -rf "$2/.git"
}

# The series from DIR's commits after "release", and the vendored tree
# from DIR's last commit (GPURUN-PATCH.md and patches/ kept).
export_series() {
  crate=$1 dir=$2 ours="crates/vendor/$1"
  series_only "$crate"
  git -C "$dir" diff --quiet HEAD || { echo "fork.sh: $dir has uncommitted changes" >&2; exit 2; }
  rm -rf "$ours/patches"
  mkdir "$ours/patches"
  git_fixed -C "$dir" format-patch -q --zero-commit --no-signature --numbered \
    -o "$top/$ours/patches" release..HEAD
  find "$ours" -mindepth 1 -maxdepth 1 ! -name GPURUN-PATCH.md ! -name patches -exec rm -rf {} +
  git -C "$dir" archive HEAD | tar -x -C "$ours"
  echo "fork.sh: $ours: $(ls "$ours/patches" | wc -l) patches written"
}

# Each stage of the series (the release plus patches 1..N) checked with
# rustfmt: the files it changed parse, and are laid out as rustfmt lays
# them (the release is). A patch cut so that it leaves a brace to a later
# one fails here.
stages() {
  # (edit sets crate and dir: sh has no locals)
  scratch=$(mktemp -d)
  edit "$1" "$scratch/repo" > /dev/null
  commits=$(git -C "$scratch/repo" rev-list --reverse release..HEAD)
  bad=0
  for commit in $commits; do
    git -C "$scratch/repo" checkout -q "$commit"
    files=$(git -C "$scratch/repo" diff --name-only --diff-filter=AM release -- '*.rs')
    [ -n "$files" ] || continue
    if ! (cd "$scratch/repo" && rustfmt --edition 2024 --check $files > "$scratch/out" 2>&1); then
      echo "fork.sh: $1: with \"$(git -C "$scratch/repo" log -1 --format=%s "$commit")\" applied:" >&2
      head -5 "$scratch/out" >&2
      bad=1
    fi
  done
  rm -rf "$scratch"
  return "$bad"
}

[ $# -ge 2 ] || usage
case "$1" in
  release) [ $# -eq 2 ] || usage; release_dir "$2" ;;
  apply) [ $# -eq 3 ] || usage; apply "$2" "$(absolute "$3")" ;;
  edit) [ $# -eq 3 ] || usage; edit "$2" "$(absolute "$3")" ;;
  export) [ $# -eq 3 ] || usage; export_series "$2" "$(absolute "$3")" ;;
  stages) [ $# -eq 2 ] || usage; stages "$2" ;;
  *) usage ;;
esac
