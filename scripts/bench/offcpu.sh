#!/bin/sh
# Where a root `run` of `true` waits (or, with --engine, the engine path:
# create, start, state, kill and delete of a `sleep`): records ROUNDS of
# them with `perf sched record -g` and prints the time per start when none
# of its processes was on a CPU, charged to what each was waiting in
# (scripts/bench/offcpu.py), then the same for runc beside it. Needs perf
# (linux-perf; scripts/bench/kit.sh carries it to a host without a
# package source). GPURUN_BIN=... uses that binary instead of a release
# build.
# Usage: scripts/bench/offcpu.sh [--engine] [ROUNDS]   (default 40; as root)
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
bench_mode 40 "$@"
bench_dirs
bench_bundle "$work/bundle" "$g"
echo "host: $(uname -r), $(nproc) CPUs, $(stat -f -c %T /sys/fs/cgroup)"
for runtime in "$g" runc; do
  name=$(basename "$runtime")
  if [ "$bench" = bench/engine.py ]; then
    loop="for i in \$(seq $rounds); do r=\"$runtime --root $state/$name\"; \
\$r create --bundle $work/bundle c\$i; \$r start c\$i; \$r state c\$i >/dev/null; \
\$r kill c\$i KILL; \$r delete --force c\$i; done"
  else
    loop="for i in \$(seq $rounds); do $runtime --root $state/$name run --bundle $work/bundle r\$i; done"
  fi
  perf sched record -q -g -o "$work/$name.data" -- sh -c "$loop" >/dev/null 2>&1
  echo "== $name"
  perf sched timehist -i "$work/$name.data" -g --max-stack 12 --state 2>/dev/null |
    python3 scripts/bench/offcpu.py "$rounds" "^($name|youki:.*|runc.*|true|sleep|memfd:gpurun.*|sh|seq)\[[0-9]+\]\$"
done
