#!/bin/sh
# Stress: TOTAL containers (default 200), PARALLEL at a time (default 20),
# mixing run, create+start+delete, run -d + exec + kill and create + start +
# kill --all + delete --force; as root (rootless: not yet); for gpurun and runc in the same run. Fails if anything is
# left: state dirs, cgroups, mounts, zombies. Prints containers per second.
# Usage: scripts/stress.sh [TOTAL] [PARALLEL]   (as root)
set -eu
cd "$(dirname "$0")/.."
total=${1:-200} parallel=${2:-20}
sh scripts/install-deps.sh
cargo build --locked --release -p gpurun >/dev/null 2>&1
gpurun="$PWD/target/release/gpurun"
user=gpurun-test
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
grep -q "^$user:" /etc/subuid || echo "$user:200000:65536" >> /etc/subuid
grep -q "^$user:" /etc/subgid || echo "$user:200000:65536" >> /etc/subgid
work=$(mktemp -d /tmp/gpurun-stress.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
bundles() { # DIR [-r]
  for kind in true sleep; do
    sh scripts/busybox-bundle.sh $2 "$1/$kind" "$gpurun" >/dev/null
  done
  jq '.process.args = ["true"]' "$1/true/config.json" > "$1/c" && mv "$1/c" "$1/true/config.json"
  jq '.process.args = ["sleep", "30"]' "$1/sleep/config.json" > "$1/c" && mv "$1/c" "$1/sleep/config.json"
}
bundles "$work/root" ""
echo "== as root"
python3 scripts/stress.py "$total" "$parallel" "$work/root" \
  "gpurun=$gpurun --root $work/root/gpurun-state" "runc=runc --root $work/root/runc-state"
