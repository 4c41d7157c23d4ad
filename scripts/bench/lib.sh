# Functions the bench scripts share; sourced from the repository root.

# bench_setup: installs what the benchmarks need and sets $g, the gpurun
# binary they time (GPURUN_BIN, else a release build of this checkout).
# A host with no package source (a real GPU machine) brings what the
# benchmarks run in scripts/bench/kit.sh's kit instead.
bench_setup() {
  for tool in runc jq python3 busybox time perf; do
    command -v "$tool" >/dev/null || { sh scripts/install-deps.sh; break; }
  done
  g=$(sh scripts/bench/binary.sh)
}

# bench_mode DEFAULT_ROUNDS [--engine] [ROUNDS], the arguments of
# bench/current.sh and bench/guest.sh: sets $bench (the runner under
# scripts/: the interleaved `run` of `true`, or with --engine the engine
# path of a `sleep`), $args (the container's command, as JSON) and
# $rounds, then runs bench_setup.
bench_mode() {
  default=$1
  shift
  bench=bench/interleave.py args='["true"]'
  if [ "${1:-}" = --engine ]; then
    bench=bench/engine.py args='["sleep", "1000"]'
    shift
  fi
  case "${1:-}" in
    -*) echo "$0: unknown option $1: [--engine] [ROUNDS]" >&2; exit 2 ;;
  esac
  rounds=${1:-$default}
  bench_setup
}

# bench_dirs: $work, a scratch directory others can read, and $state, the
# runtimes' state root on a tmpfs of its own (as /run is on the hosts
# users run), both removed on exit.
bench_dirs() {
  work=$(mktemp -d)
  chmod 755 "$work"
  state=$(mktemp -d -p /run)
  mount -t tmpfs -o mode=755,size=256m gpurun-bench "$state"
  trap 'umount -l "$state"; rm -rf "$work" "$state"' EXIT
}

# bench_version BINARY: the version its --version names first.
bench_version() {
  "$1" --version | awk 'NR == 1 {print $3}'
}

# bundle_args DIR JSON: the bundle's process runs JSON, with no terminal.
bundle_args() {
  jq ".process.args = $2 | .process.terminal = false" "$1/config.json" > "$1/config.new"
  mv "$1/config.new" "$1/config.json"
}

# bench_bundle DIR GPURUN: a busybox bundle at DIR running $args.
bench_bundle() {
  sh scripts/fixtures/busybox-bundle.sh "$1" "$2" >/dev/null
  bundle_args "$1" "$args"
}

# bench_fuse_user NAME: for the benchmarks of a user's `run --image`:
# installs what they need, sets $g (scripts/bench/binary.sh), $user (the
# test user, made) and $work (a scratch directory under /var/tmp others
# can read), and opens /dev/fuse to users while the script runs, as udev
# leaves it on systemd hosts; on exit its mode is put back and $work goes.
bench_fuse_user() {
  sh scripts/install-deps.sh
  g=$(sh scripts/bench/binary.sh)
  user=gpurun-test
  sh scripts/fixtures/test-user.sh "$user"
  work=$(mktemp -d "/var/tmp/gpurun-bench-$1.XXXXXX")
  chmod 755 "$work"
  fuse_mode=$(stat -c %a /dev/fuse)
  trap 'chmod "$fuse_mode" /dev/fuse; rm -rf "$work"' EXIT
  chmod 0666 /dev/fuse
}

# seconds COMMAND...: its wall time in seconds, its output dropped; the
# script fails if the command does.
seconds() {
  start=$(date +%s%N)
  "$@" >/dev/null 2>&1 || { echo "$(basename "$0"): failed: $*" >&2; exit 1; }
  echo "$start $(date +%s%N)" | awk '{printf "%.3f", ($2 - $1) / 1e9}'
}
