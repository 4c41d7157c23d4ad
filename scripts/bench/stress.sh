#!/bin/sh
# Stress: TOTAL containers (default 200), PARALLEL at a time (default 20),
# mixing run, create+start+delete, run -d + exec + kill and create + start +
# kill --all + delete --force; as root, then rootless as the unprivileged
# user gpurun-test; for gpurun and runc in the same run. Fails if anything is
# left: state dirs, cgroups, mounts, zombies. Prints containers per second.
# Usage: scripts/bench/stress.sh [TOTAL] [PARALLEL]   (as root)
set -eu
cd "$(dirname "$0")/../.."
total=${1:-200} parallel=${2:-20}
sh scripts/install-deps.sh
cargo build --locked --release -p gpurun >/dev/null 2>&1
gpurun="$PWD/target/release/gpurun"
user=gpurun-test
sh scripts/fixtures/test-user.sh "$user"
work=$(mktemp -d /tmp/gpurun-stress.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
bundles() { # DIR [-r] [COMMAND PREFIX, to run as the user who will use them]
  dir=$1 flag=$2
  shift 2
  for kind in true sleep; do
    "$@" sh scripts/fixtures/busybox-bundle.sh $flag "$dir/$kind" "$gpurun" >/dev/null
  done
  "$@" sh -c "jq '.process.args = [\"true\"]' '$dir/true/config.json' > '$dir/c' && mv '$dir/c' '$dir/true/config.json'"
  "$@" sh -c "jq '.process.args = [\"sleep\", \"30\"]' '$dir/sleep/config.json' > '$dir/c' && mv '$dir/c' '$dir/sleep/config.json'"
}
status=0
bundles "$work/root" ""
echo "== as root"
python3 scripts/bench/stress.py "$total" "$parallel" "$work/root" \
  "gpurun=$gpurun --root $work/root/gpurun-state" "runc=runc --root $work/root/runc-state" || status=1

# Rootless: bundles and state dirs made and used by the user. This host
# gives no cgroup delegation, so both runtimes run without cgroups.
mkdir "$work/user"
chown "$user" "$work/user"
as_user="runuser -u $user -- env HOME=$work/user STRESS_KILL_ALL=0"
bundles "$work/user" -r $as_user
echo "== rootless, as $user"
$as_user python3 scripts/bench/stress.py "$total" "$parallel" "$work/user" \
  "gpurun=$gpurun --root $work/user/gpurun-state" \
  "runc=runc --rootless true --root $work/user/runc-state" || status=1
exit $status
