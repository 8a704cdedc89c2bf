#!/usr/bin/env bash
# Guest half of tools/rxe_vm_suite.sh: runs, inside the rxe VM, every entry the host wrote
# to RESULTS/entries and leaves one verdict per entry in RESULTS (a read-write share):
#
#   suite_guest.sh RESULTS TEST_TIMEOUT_SECONDS
#
# RESULTS/entries has one line per entry: "INDEX<TAB>NAME<TAB>SHELL_COMMAND".
# For entry INDEX it writes INDEX.log (stdout+stderr), INDEX.secs (run time) and, last,
# INDEX.status: "PASS" or "FAIL <reason>". The host counts only .status files, so an entry
# cut short by a crash or the VM's time limit is a failure, never a pass.
# Exit status 0 means every entry was run (whatever their verdicts).
set -uo pipefail

RESULTS=${1:?usage: suite_guest.sh RESULTS TEST_TIMEOUT_SECONDS}
TEST_TIMEOUT=${2:?usage: suite_guest.sh RESULTS TEST_TIMEOUT_SECONDS}

# verdict RC LOG: PASS, or FAIL with the reason.
verdict() {
  local rc=$1 log=$2
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "FAIL timed out after $TEST_TIMEOUT s"
  elif [[ $rc -ne 0 ]]; then
    echo "FAIL exit status $rc"
  elif grep -q '^\[  SKIPPED \]' "$log"; then
    # Here the verbs device exists by construction: a skip means the test did not run.
    echo "FAIL skipped test(s) inside the VM, where an RDMA device must be found"
  elif grep -q '^\[==========\] 0 tests from' "$log"; then
    echo "FAIL ran no tests (check the --gtest_filter)"
  else
    echo PASS
  fi
}

main() {
  local index name cmd start rc secs
  export GTEST_COLOR=no
  while IFS=$'\t' read -r index name cmd; do
    [[ -n "$index" ]] || continue
    echo "rdma-vm: running $name" >&2
    start=$(date +%s.%N)
    # --kill-after: a test that ignores TERM is still stopped.
    timeout --kill-after=10 "$TEST_TIMEOUT" bash -c "$cmd" </dev/null >"$RESULTS/$index.log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "$secs" >"$RESULTS/$index.secs"
    verdict "$rc" "$RESULTS/$index.log" >"$RESULTS/$index.status"
  done <"$RESULTS/entries"
  return 0
}

main "$@"
