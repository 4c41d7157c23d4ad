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
# runs those on every KERNEL named instead. One boot per kernel runs all of
# its programs (scripts/ci/matrix-guest.sh), as root, under TCG, each within
# GPURUN_MATRIX_TIMEOUT seconds (default 450); a guest whose kernel goes
# down boots once more for the programs that had not ended.
set -eu
cd "$(dirname "$0")/../.."
. integration/lib/common.sh # kernel_lines
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

# One boot per kernel runs every program the plan gives it
# (scripts/ci/matrix-guest.sh), each within $limit seconds; the guest's
# output, in $log, frames each program's. A guest that goes down before its
# last program ends boots once more for the programs that had not ended.
passed=0
failed=0
work=$PWD/target/host-matrix
rm -rf "$work"
mkdir -p "$work"
trap 'rm -f "$plan" "$list"; rm -rf "$work"' EXIT
for kernel in $(awk '{print $1}' "$plan" | uniq); do
  todo="$work/plan-$kernel"
  awk -v k="$kernel" '$1 == k' "$plan" | while read -r _ s names vars; do
    echo "$s $(awk -v s="$s" '$1 == s {print $2}' "$list") $names $vars"
  done > "$todo"
  log="$work/log-$kernel"
  : > "$log"
  start=$(date +%s)
  for boot in 1 2; do
    count=$(grep -c . "$todo")
    sh scripts/vm.sh --timeout "$((limit * count + 60))" "$kernel" -- \
      sh scripts/ci/matrix-guest.sh "$todo" "$limit" > "$log.boot" 2>&1 </dev/null && status=0 || status=$?
    # The serial console ends its lines with CR LF.
    tr -d '\r' < "$log.boot" >> "$log"
    # What did not end: the guest went down (125) during it.
    grep -a '^matrix-guest: end ' "$log" | awk '{print $3}' > "$work/ended"
    awk 'NR == FNR {ended[$1] = 1; next} !($1 in ended)' "$work/ended" "$todo" > "$todo.left"
    [ "$status" = 125 ] && [ -s "$todo.left" ] && [ "$boot" = 1 ] || break
    echo "host-matrix: kernel $kernel: the guest went down before $(awk '{printf "%s ", $1}' "$todo.left")ended; booting it once more" >&2
    kernel_lines "$log" "$kernel kernel" >&2
    mv "$todo.left" "$todo"
  done
  echo "host-matrix: kernel $kernel: $(grep -ac '^matrix-guest: end ' "$log") programs in $(($(date +%s) - start)) s, the boot included"
  for s in $(awk -v k="$kernel" '$1 == k {print $2}' "$plan"); do
    # The program's own lines, from its last begin (a second boot's) to its end.
    awk -v s="$s" '$0 == "matrix-guest: begin " s {buf = ""; on = 1}
      on {buf = buf $0 "\n"} on && index($0, "matrix-guest: end " s " ") == 1 {on = 0}
      END {printf "%s", buf}' "$log" > "$work/out"
    end=$(grep -a "^matrix-guest: end $s " "$work/out" | tail -1)
    summary=$(grep -a '^test result:' "$work/out" | tail -1)
    if [ -n "$end" ] && [ "$(echo "$end" | awk '{print $5}')" = 0 ]; then
      passed=$((passed + 1))
      echo "host-matrix: kernel $kernel, $s: ok in $(echo "$end" | awk '{print $7}') s (${summary:-no test result})"
    else
      failed=$((failed + 1))
      echo "host-matrix: kernel $kernel, $s: FAILED (${end:-the guest went down during it}) (${summary:-no test result})"
      grep -av '^\[ *[0-9.]*\] ' "$work/out" | tail -60 | sed "s/^/  [$kernel $s] /"
      kernel_lines "$log" "$kernel $s kernel"
    fi
  done
done
echo "host-matrix: $passed passed, $failed failed"
[ "$failed" = 0 ]
