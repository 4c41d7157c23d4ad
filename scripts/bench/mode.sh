# Sourced by bench/current.sh and bench/guest.sh, which take the same
# arguments: [--engine] [ROUNDS].
# bench_mode DEFAULT_ROUNDS ARGS...: sets $bench (the runner under
# scripts/: the interleaved `run` of `true`, or with --engine the engine
# path of a `sleep`), $args (the container's command, as JSON) and $rounds.
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
}

# bench_bundle DIR GPURUN: a busybox bundle at DIR running $args.
bench_bundle() {
  sh scripts/fixtures/busybox-bundle.sh "$1" "$2" >/dev/null
  jq ".process.args = $args | .process.terminal = false" "$1/config.json" > "$1/config.new"
  mv "$1/config.new" "$1/config.json"
}
