#!/usr/bin/env bash
# Runs the RDMA test suite on real verbs: Soft-RoCE (rxe0) in ONE throw-away VM boot.
#
#   tools/rxe_vm_suite.sh [--no-build] [--timeout SECONDS] [--test-timeout SECONDS]
#                         [--suite FILE] [ENTRY...]
#
# 1. Builds on the host: `bazel build //...` (skip with --no-build). Bazel never runs in
#    the VM.
# 2. Boots one VM with tools/rxe_vm.sh and runs every entry of tests/rdma_vm/SUITE (or of
#    --suite FILE, or the ENTRY arguments instead) in order, each bounded by --test-timeout
#    (default 300 s); the whole VM by --timeout (default 900 s).
# 3. Prints one "PASS name (secs)" or "FAIL name: reason" line per entry (with the end of
#    the output of failed ones), then exactly one line
#        rdma-vm: N passed, N failed
#    and exits non-zero if anything failed, including a VM that did not boot (then every
#    entry that did not run counts as failed).
#
# An entry (a SUITE line, or one ENTRY argument) is:
#    PATH [ARGS...]
#  * PATH is relative to bazel-bin/ (e.g. tests/rdma_vm/verbs_smoke_test), or to the
#    repo root if it starts with ./ (scripts); a label //pkg:name means bazel-bin/pkg/name.
#  * ARGS go through bash word splitting in the guest, so quotes work.
#  * In SUITE, blank lines and lines starting with # are ignored.
# Verdicts: PASS needs exit status 0, no "[  SKIPPED ]" line from gtest (inside the VM the
# device must exist, so a skip is a failure) and not "0 tests" run.
# Entries run as root in the repo root with MSGR_RDMA_DEVICE=rxe0, MSGR_RDMA_GID_INDEX=1,
# MSGR_RDMA_CM_DEVICE=rxe1, MSGR_RDMA_CM_ADDR=169.254.77.1 (see tools/rxe_vm.sh).
# Logs of every entry are kept in the directory printed at the end.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=1
VM_TIMEOUT=900
TEST_TIMEOUT=300
SUITE_FILE=$REPO/tests/rdma_vm/SUITE
ARG_ENTRIES=()

NAMES=()    # display name of each entry
COMMANDS=() # shell command of each entry, as run in the guest
PRE_FAIL=() # a reason to fail an entry without running it (e.g. missing binary), or ""
RESULTS=""
PASSED=0
FAILED=0

VM_PID=""  # tools/rxe_vm.sh while it runs

say() { echo "rdma-vm: $*"; }

# Interrupted: stop the VM (rxe_vm.sh kills qemu on TERM) and count that as a failure.
# shellcheck disable=SC2317 # run by the INT/TERM trap
on_signal() {
  trap - INT TERM
  if [[ -n "$VM_PID" ]]; then
    kill -TERM "$VM_PID" 2>/dev/null || true
    wait "$VM_PID" 2>/dev/null || true
  fi
  say "interrupted"
  echo "rdma-vm: $PASSED passed, $((FAILED + 1)) failed"
  exit 130
}

# shellcheck source=tools/lib/flags.sh
source "$REPO/tools/lib/flags.sh"
FLAGS_SCRIPT=rdma-vm
usage_text() { flags_header "${BASH_SOURCE[0]}"; }
usage() { usage_text >&2; exit 2; }

# Ends the run with the summary line; $1 extra failures to count (e.g. a failed build).
finish() {
  FAILED=$((FAILED + ${1:-0}))
  [[ -n "$RESULTS" ]] && echo "logs: $RESULTS"
  echo "rdma-vm: $PASSED passed, $FAILED failed"
  [[ $FAILED -eq 0 ]] && exit 0
  exit 1
}

parse_args() {
  local rest=()
  flags_begin "$@"
  while flags_next; do
    case $FLAG in
      --no-build) BUILD=0 ;;
      --timeout) flag_value VM_TIMEOUT ;;
      --test-timeout) flag_value TEST_TIMEOUT ;;
      --suite) flag_value SUITE_FILE ;;
      --help|-h) usage ;;
      --) flags_rest rest; ARG_ENTRIES+=("${rest[@]}") ;;
      -*) flag_unknown ;;
      *) ARG_ENTRIES+=("$FLAG") ;;
    esac
  done
  local n
  for n in "$VM_TIMEOUT" "$TEST_TIMEOUT"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "rdma-vm: timeouts are positive whole seconds, not '$n'" >&2; exit 2; }
  done
}

# add_entry LINE: resolves "PATH [ARGS...]" into NAMES/COMMANDS/PRE_FAIL.
add_entry() {
  local line=$1 path args host_path
  line="${line#"${line%%[![:space:]]*}"}" # trim leading blanks
  path=${line%%[[:space:]]*}
  args=${line:${#path}}
  if [[ "$path" == //* ]]; then
    path=${path#//}
    path=${path/://}
  fi
  if [[ "$path" == ./* ]]; then
    host_path=$REPO/${path#./}
  else
    host_path=$REPO/bazel-bin/$path
  fi
  NAMES+=("$line")
  COMMANDS+=("$(printf '%q' "$host_path")$args")
  if [[ ! -f "$host_path" || ! -x "$host_path" ]]; then
    PRE_FAIL+=("no executable $host_path (build it, or fix the entry)")
  else
    PRE_FAIL+=("")
  fi
}

read_entries() {
  local line
  if [[ ${#ARG_ENTRIES[@]} -gt 0 ]]; then
    for line in "${ARG_ENTRIES[@]}"; do add_entry "$line"; done
  else
    [[ -f "$SUITE_FILE" ]] || { say "no suite file $SUITE_FILE"; finish 1; }
    while IFS= read -r line || [[ -n "$line" ]]; do
      [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
      add_entry "$line"
    done <"$SUITE_FILE"
  fi
  if [[ ${#NAMES[@]} -eq 0 ]]; then
    say "the suite lists no tests ($SUITE_FILE): nothing would be checked"
    finish 1
  fi
}

build() {
  [[ $BUILD -eq 1 ]] || return 0
  say "building on the host: bazel build //..."
  if ! (cd "$REPO" && bazel build //...); then
    say "bazel build //... failed: fix the build, then rerun"
    finish 1
  fi
}

# Boots the VM once and runs all runnable entries in it.
run_in_vm() {
  local i runnable=0 rc=0
  : >"$RESULTS/entries"
  for i in "${!NAMES[@]}"; do
    [[ -n "${PRE_FAIL[$i]}" ]] && continue
    printf '%s\t%s\t%s\n' "$i" "${NAMES[$i]}" "${COMMANDS[$i]}" >>"$RESULTS/entries"
    runnable=$((runnable + 1))
  done
  [[ $runnable -gt 0 ]] || return 0
  say "booting the Soft-RoCE VM for $runnable test(s)"
  # In the background so that our INT/TERM trap can stop it (and with it qemu) at once.
  "$REPO/tools/rxe_vm.sh" --timeout "$VM_TIMEOUT" --share "$RESULTS" -- \
    "bash tools/rxe_vm/suite_guest.sh $(printf '%q' "$RESULTS") $TEST_TIMEOUT" &
  VM_PID=$!
  wait "$VM_PID" || rc=$?
  VM_PID=""
  if [[ $rc -ne 0 ]]; then
    case $rc in
      124) say "the VM hit its time limit ($VM_TIMEOUT s, --timeout); tests that did not finish count as failed" ;;
      125) say "the VM did not boot or set up rxe0 (see above); its tests count as failed" ;;
      *) say "the VM run ended with status $rc; tests without a verdict count as failed" ;;
    esac
  fi
}

# Prints and counts one verdict per entry, from the files the guest left.
report() {
  local i status secs reason
  for i in "${!NAMES[@]}"; do
    secs=""
    if [[ -n "${PRE_FAIL[$i]}" ]]; then
      status="FAIL ${PRE_FAIL[$i]}"
    elif [[ -s "$RESULTS/$i.status" ]]; then
      status=$(cat "$RESULTS/$i.status")
      secs=$(cat "$RESULTS/$i.secs" 2>/dev/null || true)
    else
      status="FAIL no verdict: the VM stopped before this test ran or finished"
    fi
    if [[ "$status" == PASS ]]; then
      echo "PASS ${NAMES[$i]} (${secs} s)"
      PASSED=$((PASSED + 1))
    else
      reason=${status#FAIL }
      echo "FAIL ${NAMES[$i]}: $reason${secs:+ (${secs} s)}"
      if [[ -s "$RESULTS/$i.log" ]]; then
        echo "---- last lines of its output ($RESULTS/$i.log) ----"
        tail -n 40 "$RESULTS/$i.log"
        echo "----"
      fi
      FAILED=$((FAILED + 1))
    fi
  done
}

main() {
  parse_args "$@"
  trap on_signal INT TERM
  cd "$REPO"
  RESULTS=$(mktemp -d /tmp/msgr-rdma-vm.XXXXXX)
  build
  read_entries
  local start end
  start=$(date +%s)
  run_in_vm
  end=$(date +%s)
  report
  say "VM run took $((end - start)) s"
  finish 0
}

main "$@"
