#!/bin/sh
# Times `run` of `true` on a busybox bundle, interleaved with runc (and crun
# where it runs: it refuses cgroup v1 hybrid hosts), as root and rootless
# (the unprivileged test user, with a `spec --rootless` bundle of its own):
# medians, CPU per start, ratios and peak RSS (scripts/bench_run.py). Then
# the cost of gpurun's protected re-exec (scripts/bench_costs.py).
# GPURUN_BIN=... uses that binary instead of building one; it must be a
# root-owned install (as in /usr/local/bin) for the rootless figure to be
# the one users get.
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
user=gpurun-test
sh scripts/test-user.sh "$user"
work=$(mktemp -d)
chmod 755 "$work"
# State on tmpfs, where runtimes keep it by default (/run/gpurun,
# /run/runc); bundles stay on disk.
state=$(mktemp -d -p /run)
chmod 755 "$state"
trap 'rm -rf "$work" "$state"' EXIT
only_true() {
  jq '.process.args = ["true"] | .process.terminal = false' "$1/config.json" > "$1/c" && mv "$1/c" "$1/config.json"
}
sh scripts/busybox-bundle.sh "$work/bundle" "$g" >/dev/null
only_true "$work/bundle"
echo "== root"
if command -v crun >/dev/null && crun --root "$state/crun" run --bundle "$work/bundle" probe >/dev/null 2>&1; then
  python3 scripts/bench_run.py "$rounds" "$work/bundle" "gpurun=$g --root $state/gpurun" \
    "crun=crun --root $state/crun" "runc=runc --root $state/runc"
else
  echo "(crun does not run on this host: left out)"
  python3 scripts/bench_run.py "$rounds" "$work/bundle" "gpurun=$g --root $state/gpurun" \
    "runc=runc --root $state/runc"
fi

# The rootless bundle: the user's own rootfs copy and a config that maps
# the user to the container's root, as `spec --rootless` writes for it.
sh scripts/busybox-bundle.sh "$work/rootless" "$g" >/dev/null
rm "$work/rootless/config.json"
chown -R "$user:" "$work/rootless"
mkdir "$state/rootless"
chown "$user:" "$state/rootless"
(cd "$work/rootless" && setpriv --reuid="$user" --regid="$user" --init-groups "$g" spec --rootless)
only_true "$work/rootless"
echo "== rootless ($user)"
python3 scripts/bench_run.py --as "$user" "$rounds" "$work/rootless" \
  "gpurun=$g --root $state/rootless/gpurun" \
  "runc=runc --root $state/rootless/runc"
python3 scripts/bench_costs.py "$rounds" "$g"
