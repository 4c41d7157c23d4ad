#!/bin/sh
# The host matrix: the suites that depend on the kernel and the cgroup
# hierarchy, run again in VMs on the kernels GPU hosts run (scripts/vm.sh:
# Debian 12's 6.1 and its 6.12 series, pure cgroup v2, every controller),
# with the test binaries and gpurun built here. Prints one summary line per
# kernel and suite, then "N passed, M failed" (suites); exits 1 if any
# failed.
#
#   sh scripts/host-matrix.sh [KERNEL...]     default: 6.1 6.12
#
# GPURUN_MATRIX_SUITES chooses the test binaries (default below); each runs
# whole, as root, under TCG, so choose for time (README: what runs where).
# SUITE=NAME,NAME runs only the tests whose names contain one of NAMEs.
set -eu
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- 6.1 6.12
suites=${GPURUN_MATRIX_SUITES:-"layouts image lifecycle rootless cgroup_v2 security checkpoint"}

cargo build --locked -p gpurun -p fake-nvml
targets=""
for s in $suites; do targets="$targets --test ${s%%=*}"; done
# The test executables, by suite name, from cargo's own account of them.
list=$(mktemp)
trap 'rm -f "$list"' EXIT
# shellcheck disable=SC2086
cargo test --locked --no-run --message-format=json $targets 2>/dev/null \
  | jq -r 'select(.reason == "compiler-artifact" and .executable != null
                  and (.target.kind | index("test"))) | "\(.target.name) \(.executable)"' > "$list"

passed=0
failed=0
for kernel in "$@"; do
  for entry in $suites; do
    s=${entry%%=*}
    filters=""
    [ "$entry" = "$s" ] || filters=$(echo "${entry#*=}" | tr ',' ' ')
    exe=$(awk -v s="$s" '$1 == s {print $2}' "$list")
    [ -n "$exe" ] || { echo "host-matrix: no test binary for suite $s" >&2; exit 2; }
    log=$(mktemp)
    start=$(date +%s)
    # Two tests at a time: the guest has two CPUs, and the suites share
    # fixtures built once per binary.
    status=0
    # shellcheck disable=SC2086
    sh scripts/vm.sh "$kernel" -- "$exe" $filters --test-threads=2 > "$log" 2>&1 || status=$?
    if [ "$status" = 125 ]; then
      # The guest itself went down before the suite ended (vm.sh's 125,
      # seen once under emulation with the suite passing on its rerun):
      # once more, said here with the guest's last kernel lines, so a
      # suite that brings its guest down every time still fails.
      echo "host-matrix: kernel $kernel, $s: the guest ended without a status; its last kernel lines, then a second run:"
      grep -a '^\[ *[0-9.]*\] ' "$log" | tail -15 | sed "s/^/  [$kernel $s] /"
      status=0
      # shellcheck disable=SC2086
      sh scripts/vm.sh "$kernel" -- "$exe" $filters --test-threads=2 > "$log" 2>&1 || status=$?
    fi
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
      grep -a '^\[ *[0-9.]*\] ' "$log" | tail -15 | sed "s/^/  [$kernel $s kernel] /"
    fi
    rm -f "$log"
  done
done
echo "host-matrix: $passed passed, $failed failed"
[ "$failed" = 0 ]
