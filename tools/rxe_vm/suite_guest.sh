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
#
# In the two guests of tools/rxe_vms.sh (MSGR_VM_ROLE a or b) both run the same entries:
# the files above go to RESULTS/ROLE/ instead, and before each entry each guest waits
# (at most TEST_TIMEOUT) for the other to get there too, through RESULTS/sync/INDEX/
# (ROLE.here files), so that the two halves of an entry run together. The entry gets that
# directory as MSGR_VM_SYNC for its own rendezvous.
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

# barrier DIR: waits until the other guest has reached DIR too (false after TEST_TIMEOUT).
barrier() {
  local dir=$1 peer=a deadline=$((SECONDS + TEST_TIMEOUT))
  [[ $MSGR_VM_ROLE == a ]] && peer=b
  mkdir -p "$dir"
  touch "$dir/$MSGR_VM_ROLE.here"
  until [[ -e "$dir/$peer.here" ]]; do
    [[ $SECONDS -lt $deadline ]] || return 1
    sleep 0.3
  done
}

# link_report: the state of the link to the other guest, after a failed entry (tells a
# lost link -- drops, errors, a neighbour entry gone -- from a bug in the entry).
link_report() {
  local nic=${MSGR_VM_NIC:-eth0}
  echo "---- link to the other guest after this failure ($nic, peer ${MSGR_VM_PEER_ADDR:-?}) ----"
  ip -s link show "$nic"
  ip -s neigh show dev "$nic"
  echo "----"
}

main() {
  local index name cmd start rc secs out=$RESULTS
  export GTEST_COLOR=no
  if [[ -n "${MSGR_VM_ROLE:-}" ]]; then
    out=$RESULTS/$MSGR_VM_ROLE
    mkdir -p "$out"
  fi
  while IFS=$'\t' read -r index name cmd; do
    [[ -n "$index" ]] || continue
    if [[ -n "${MSGR_VM_ROLE:-}" ]]; then
      export MSGR_VM_SYNC=$RESULTS/sync/$index
      if ! barrier "$MSGR_VM_SYNC"; then
        echo "FAIL the other guest did not reach this test within $TEST_TIMEOUT s" >"$out/$index.status"
        continue
      fi
    fi
    echo "rdma-vm${MSGR_VM_ROLE:+ ($MSGR_VM_ROLE)}: running $name" >&2
    start=$(date +%s.%N)
    # --kill-after: a test that ignores TERM is still stopped.
    timeout --kill-after=10 "$TEST_TIMEOUT" bash -c "$cmd" </dev/null >"$out/$index.log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "$secs" >"$out/$index.secs"
    verdict "$rc" "$out/$index.log" >"$out/$index.status"
    if [[ $rc -ne 0 && -n "${MSGR_VM_ROLE:-}" ]]; then link_report >>"$out/$index.log" 2>&1; fi
  done <"$RESULTS/entries"
  return 0
}

main "$@"
