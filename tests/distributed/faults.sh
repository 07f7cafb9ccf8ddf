#!/usr/bin/env bash
# Jobs that fail must end quickly, with every rank reporting the failure (fault_program.cpp):
#   faults.sh scripts/mpirun.sh build/tests/distributed_fault
set -uo pipefail
mpirun_sh=$1
program=$2
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expect NAME MAX_SECONDS NEEDLE... -- COMMAND...: the command fails within MAX_SECONDS and its
# output holds every needle.
expect() {
  local name=$1 limit=$2; shift 2
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  local start=$SECONDS
  timeout $((limit + 30)) "$@" >"$out" 2>&1
  local rc=$? took=$((SECONDS - start))
  local ok=1
  if [ $rc -eq 0 ]; then echo "FAIL $name: exited 0"; ok=0; fi
  if [ $rc -eq 124 ]; then echo "FAIL $name: still running after $((limit + 30)) s (a hang)"; ok=0; fi
  if [ $took -gt "$limit" ]; then echo "FAIL $name: took $took s, more than $limit"; ok=0; fi
  for n in "${needles[@]}"; do
    grep -qF -- "$n" "$out" || { echo "FAIL $name: no '$n' in its output"; ok=0; }
  done
  if [ $ok -eq 1 ]; then echo "ok   $name ($took s)"; else failures=$((failures + 1)); sed 's/^/    | /' "$out"; fi
}

expect "an exception on rank 1 of 3" 40 \
  "rank 1 failed: boom at step 3" "rank 0 stops: rank 1 failed: boom at step 3" \
  "rank 2 stops: rank 1 failed: boom at step 3" -- "$mpirun_sh" 3 "$program" throw
expect "an exception in rank 1's backward, buckets in flight" 40 \
  "rank 1 failed: boom in the backward of step 3" "rank 0 stops: rank 1 failed: boom in the backward of step 3" \
  -- "$mpirun_sh" 2 "$program" backward
SMELT_DISTRIBUTED_TIMEOUT=3 expect "rank 1 of 2 stops calling collectives" 40 \
  "got no answer from every rank within 3 s" -- "$mpirun_sh" 2 "$program" hang
expect "rank 1 of 2 builds another module" 40 \
  "rank 1's module differs from rank 0's at parameter 0" -- "$mpirun_sh" 2 "$program" mismatch
expect "2 processes asked for without mpirun" 20 \
  "not started by mpirun" "mpirun -np 2" -- "$program" world2
exit $failures
