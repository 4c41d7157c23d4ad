#!/bin/sh
# In a host-matrix guest (scripts/ci/host-matrix.sh): every test program of
# PLAN in this one boot, one after another, each within LIMIT seconds.
# PLAN's lines: PROGRAM EXECUTABLE NAMES [VAR=VALUE...] (NAMES "-" for all,
# else NAME,NAME). Each program's output is framed for the host to read:
#   matrix-guest: begin PROGRAM
#   ...
#   matrix-guest: end PROGRAM status N in S s
# Exits with the number of programs that failed (at most 100).
#   sh scripts/ci/matrix-guest.sh PLAN LIMIT
set -u
plan=$1
limit=$2
failed=0
while read -r program exe names vars; do
  filters=""
  [ "$names" = - ] || filters=$(echo "$names" | tr ',' ' ')
  echo "matrix-guest: begin $program"
  start=$(date +%s)
  # Two tests at a time: the guest has two CPUs.
  # shellcheck disable=SC2086
  env $vars timeout -k 10 "$limit" "$exe" $filters --test-threads=2 </dev/null 2>&1
  status=$?
  echo "matrix-guest: end $program status $status in $(($(date +%s) - start)) s"
  [ "$status" = 0 ] || failed=$((failed + 1))
done < "$plan"
[ "$failed" -le 100 ] || failed=100
exit "$failed"
