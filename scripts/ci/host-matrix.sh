#!/bin/sh
# The host matrix: the suites that depend on the kernel and the cgroup
# hierarchy, run again in VMs on the kernels GPU hosts run (scripts/vm.sh:
# Debian 12's 6.1 and its 6.12 series, pure cgroup v2, every controller),
# with the test binaries and gpurun built here. Prints one summary line per
# kernel and suite, then "N passed, M failed" (suites); exits 1 if any
# failed.
#
#   sh scripts/ci/host-matrix.sh [KERNEL...]     default: 6.1 6.12
#
# Which test programs run on which kernel: tests/matrix.txt (KERNEL
# PROGRAM NAMES VAR=VALUE...). GPURUN_MATRIX_SUITES="PROGRAM[=NAME,...] ..."
# runs those on every KERNEL named instead. Each runs as root, under TCG,
# within GPURUN_MATRIX_TIMEOUT seconds (default 450: a guest whose kernel
# hangs under emulation costs that, then boots once more, not CI's hour).
set -eu
cd "$(dirname "$0")/../.."
. integration/lib/common.sh # boot_once_more
[ $# -gt 0 ] || set -- 6.1 6.12
limit=${GPURUN_MATRIX_TIMEOUT:-450}

# The plan, a line per run: KERNEL PROGRAM NAMES [VAR=VALUE...].
plan=$(mktemp)
list=$(mktemp)
trap 'rm -f "$plan" "$list"' EXIT
for kernel in "$@"; do
  if [ -n "${GPURUN_MATRIX_SUITES:-}" ]; then
    for entry in $GPURUN_MATRIX_SUITES; do
      names=-
      [ "$entry" = "${entry%%=*}" ] || names=${entry#*=}
      echo "$kernel ${entry%%=*} $names"
    done
  else
    grep -v '^#' tests/matrix.txt | awk -v k="$kernel" '$1 == k'
  fi
done > "$plan"
[ -s "$plan" ] || { echo "host-matrix: nothing to run for kernel(s) $*" >&2; exit 2; }

# test.sh's own build (the same packages, so the same features): fresh
# there, where another package set would rebuild every crate.
cargo build --locked -p gpurun -p fake-nvml -p cri-client
targets=$(awk '{printf " --test %s", $2}' "$plan")
# The test executables, by program name, from cargo's own account of them.
# shellcheck disable=SC2086
cargo test --locked --no-run --message-format=json $targets 2>/dev/null \
  | jq -r 'select(.reason == "compiler-artifact" and .executable != null
                  and (.target.kind | index("test"))) | "\(.target.name) \(.executable)"' > "$list"

# Before any guest boots: every program built, every NAME matching a test
# (a filter that matches none would pass silently, zero tests counting
# as a pass; a renamed test must fail the run instead).
while read -r kernel s names vars; do
  exe=$(awk -v s="$s" '$1 == s {print $2}' "$list")
  [ -n "$exe" ] || { echo "host-matrix: no test program $s (tests/matrix.txt)" >&2; exit 2; }
  [ "$names" = - ] && continue
  for name in $(echo "$names" | tr ',' ' '); do
    "$exe" --list 2>/dev/null | grep ': test$' | grep -qF -- "$name" && continue
    echo "host-matrix: $s on $kernel: '$name' matches no test in $s (renamed? fix tests/matrix.txt)" >&2
    exit 2
  done
done < "$plan"

# The GPU programs' fixtures (gpu-fixtures.sh), built once here for every
# guest: under emulation each program built its own, in about 100 s. The
# guests see this machine's /var/cache (their writes are discarded). A
# table line's GPURUN_TEST_FIXTURES= (empty) builds them in the guest.
fixtures=${GPURUN_VM_CACHE:-/var/cache/gpurun-vm}/test-fixtures
rm -rf "$fixtures"
sh scripts/fixtures/gpu-fixtures.sh "$fixtures" >/dev/null
export GPURUN_TEST_FIXTURES="$fixtures"

# One guest run of the current plan line's program, its output in $log.
# Two tests at a time: the guest has two CPUs, and the suites share
# fixtures built once per binary.
guest() {
  # shellcheck disable=SC2086
  env $vars sh scripts/vm.sh --timeout "$limit" "$kernel" -- "$exe" $filters --test-threads=2 > "$log" 2>&1 </dev/null
}
passed=0
failed=0
while read -r kernel s names vars; do
  filters=""
  [ "$names" = - ] || filters=$(echo "$names" | tr ',' ' ')
  exe=$(awk -v s="$s" '$1 == s {print $2}' "$list")
  log=$(mktemp)
  start=$(date +%s)
  status=0
  boot_log=$log boot_once_more "host-matrix: kernel $kernel, $s" guest || status=$?
  if [ "$status" = 0 ]; then
    result=ok
    passed=$((passed + 1))
  else
    result=FAILED
    failed=$((failed + 1))
  fi
  summary=$(grep -a '^test result:' "$log" | tail -1)
  echo "host-matrix: kernel $kernel, $s: $result in $(( $(date +%s) - start )) s (${summary:-no test result})"
  if [ "$result" = FAILED ]; then
    grep -av '^\[ *[0-9.]*\] ' "$log" | tail -60 | sed "s/^/  [$kernel $s] /"
    kernel_lines "$log" "$kernel $s kernel"
  fi
  rm -f "$log"
done < "$plan"
echo "host-matrix: $passed passed, $failed failed"
[ "$failed" = 0 ]
