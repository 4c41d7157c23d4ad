#!/bin/sh
# Many starts at once: N concurrent `run` of `true` on a busybox bundle
# (default N = 1, 10, 40, 80), gpurun against runc (and crun where it runs:
# it refuses cgroup v1 hybrid hosts), as root and rootless, the runtimes
# interleaved over ROUNDS rounds (scripts/bench_parallel.py): throughput,
# p50 and p99 per start, CPU per start and the throughput ratio to runc.
# GPURUN_BIN=... uses that binary instead of building one.
# Usage: scripts/bench-parallel.sh [N...]   (GPURUN_BENCH_ROUNDS, default 5)
set -eu
cd "$(dirname "$0")/.."
sizes=${*:-1 10 40 80}
rounds=${GPURUN_BENCH_ROUNDS:-5}
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
# State on tmpfs, where runtimes keep it by default; bundles on disk.
state=$(mktemp -d -p /run)
chmod 755 "$state"
trap 'rm -rf "$work" "$state"' EXIT
only_true() {
  jq '.process.args = ["true"] | .process.terminal = false' "$1/config.json" > "$1/c" && mv "$1/c" "$1/config.json"
}
sh scripts/busybox-bundle.sh "$work/bundle" "$g" >/dev/null
only_true "$work/bundle"
echo "== root, $rounds rounds"
if command -v crun >/dev/null && crun --root "$state/crun" run --bundle "$work/bundle" probe >/dev/null 2>&1; then
  python3 scripts/bench_parallel.py "$rounds" "$work/bundle" "$sizes" "gpurun=$g --root $state/gpurun" \
    "crun=crun --root $state/crun" "runc=runc --root $state/runc"
else
  echo "(crun does not run on this host: left out)"
  python3 scripts/bench_parallel.py "$rounds" "$work/bundle" "$sizes" "gpurun=$g --root $state/gpurun" \
    "runc=runc --root $state/runc"
fi
sh scripts/busybox-bundle.sh "$work/rootless" "$g" >/dev/null
rm "$work/rootless/config.json"
chown -R "$user:" "$work/rootless"
mkdir "$state/rootless"
chown "$user:" "$state/rootless"
(cd "$work/rootless" && setpriv --reuid="$user" --regid="$user" --init-groups "$g" spec --rootless)
only_true "$work/rootless"
echo "== rootless ($user), $rounds rounds"
python3 scripts/bench_parallel.py --as "$user" "$rounds" "$work/rootless" "$sizes" \
  "gpurun=$g --root $state/rootless/gpurun" \
  "runc=runc --root $state/rootless/runc"
