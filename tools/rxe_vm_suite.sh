#!/usr/bin/env bash
# Runs the RDMA test suite on real verbs: Soft-RoCE (rxe0) in ONE throw-away VM boot.
#
#   tools/rxe_vm_suite.sh [--no-build] [--timeout SECONDS] [--test-timeout SECONDS]
#                         [--suite FILE] [--two-hosts FILE] [--two-hosts-timeout SECONDS]
#                         [--no-two-hosts] [--only-two-hosts] [ENTRY...]
#
# 1. Builds on the host: `bazel build -c opt //...` (bazel-bin is then bazel-out/k8-opt/bin,
#    where the netem entry of SUITE finds the cluster's binaries too; tools/test.sh's plain
#    step built the same, so in CI this is a cache hit); skip with --no-build. Bazel never
#    runs in the VM.
# 2. Phase 1, one machine: boots one VM with tools/rxe_vm.sh and runs every entry of
#    tests/rdma_vm/SUITE (or of --suite FILE, or the ENTRY arguments instead) in order,
#    each bounded by --test-timeout (default 300 s); the whole VM by --timeout (default
#    900 s).
# 3. Phase 2, two machines: boots the two VMs of tools/rxe_vms.sh (rxe0 on each guest's own
#    NIC, one link between them) and runs every entry of tests/rdma_vm/TWO_HOSTS (or of
#    --two-hosts FILE) in BOTH guests at once (MSGR_VM_ROLE=a or b tells each half which
#    it is); an entry passes only if both halves do. Bounded by --two-hosts-timeout
#    (default 600 s). Skipped with --no-two-hosts, and when ENTRY arguments are given
#    unless --two-hosts is too; --only-two-hosts skips phase 1.
# 4. Prints one "PASS name (secs)" or "FAIL name: reason" line per entry (with the end of
#    the output of failed ones, and the "FIGURES: ..." lines of passed ones), then exactly
#    one line
#        rdma-vm: N passed, N failed
#    and exits non-zero if anything failed, including a VM that did not boot (then every
#    entry that did not run counts as failed).
#
# An entry (a SUITE line, or one ENTRY argument) is:
#    PATH [ARGS...]
#  * PATH is relative to bazel-bin/ (e.g. tests/rdma_vm/verbs_smoke_test), or to the
#    repo root if it starts with ./ (scripts); a label //pkg:name means bazel-bin/pkg/name.
#    MSGR_BIN=DIR (environment) stands for bazel-bin here and in the guests (e.g. a -c opt
#    output directory of another output base); entries that start binaries use it too.
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
TWO_FILE=$REPO/tests/rdma_vm/TWO_HOSTS
TWO_SET=0       # --two-hosts given
TWO_TIMEOUT=600
PHASE1=1 PHASE2=1
ARG_ENTRIES=()
BIN_DIR=${MSGR_BIN:-$REPO/bazel-bin}

NAMES=()    # display name of each entry
COMMANDS=() # shell command of each entry, as run in the guest
PHASES=()   # 1 (one VM) or 2 (both guests of the two-VM run)
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
      --two-hosts) flag_value TWO_FILE; TWO_SET=1 ;;
      --two-hosts-timeout) flag_value TWO_TIMEOUT ;;
      --no-two-hosts) PHASE2=0 ;;
      --only-two-hosts) PHASE1=0 ;;
      --help|-h) usage ;;
      --) flags_rest rest; ARG_ENTRIES+=("${rest[@]}") ;;
      -*) flag_unknown ;;
      *) ARG_ENTRIES+=("$FLAG") ;;
    esac
  done
  local n
  if [[ ${#ARG_ENTRIES[@]} -gt 0 && $TWO_SET -eq 0 ]]; then PHASE2=0; fi
  for n in "$VM_TIMEOUT" "$TEST_TIMEOUT" "$TWO_TIMEOUT"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "rdma-vm: timeouts are positive whole seconds, not '$n'" >&2; exit 2; }
  done
}

# add_entry PHASE LINE: resolves "PATH [ARGS...]" into NAMES/COMMANDS/PRE_FAIL/PHASES.
add_entry() {
  local phase=$1 line=$2 path args host_path
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
    host_path=$BIN_DIR/$path
  fi
  PHASES+=("$phase")
  NAMES+=("$line")
  COMMANDS+=("$(printf '%q' "$host_path")$args")
  if [[ ! -f "$host_path" || ! -x "$host_path" ]]; then
    PRE_FAIL+=("no executable $host_path (build it, or fix the entry)")
  else
    PRE_FAIL+=("")
  fi
}

# read_suite PHASE FILE: adds FILE's entries (blank lines and # comments skipped).
read_suite() {
  local phase=$1 file=$2 line
  [[ -f "$file" ]] || { say "no suite file $file"; finish 1; }
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
    add_entry "$phase" "$line"
  done <"$file"
}

read_entries() {
  local line
  if [[ $PHASE1 -eq 1 ]]; then
    if [[ ${#ARG_ENTRIES[@]} -gt 0 ]]; then
      for line in "${ARG_ENTRIES[@]}"; do add_entry 1 "$line"; done
    else
      read_suite 1 "$SUITE_FILE"
    fi
  fi
  [[ $PHASE2 -eq 1 ]] && read_suite 2 "$TWO_FILE"
  if [[ ${#NAMES[@]} -eq 0 ]]; then
    say "the suites list no tests: nothing would be checked"
    finish 1
  fi
}

build() {
  [[ $BUILD -eq 1 ]] || return 0
  # Optimised: under emulation a fastbuild client alone takes longer per write than the
  # 1 ms delay the netem entry measures, and the benchmarks' figures mean something.
  say "building on the host: bazel build -c opt //..."
  if ! (cd "$REPO" && bazel build -c opt //...); then
    say "bazel build -c opt //... failed: fix the build, then rerun"
    finish 1
  fi
}

# Boots the VM once and runs all runnable entries in it.
run_in_vm() {
  local i runnable=0 rc=0
  : >"$RESULTS/entries"
  for i in "${!NAMES[@]}"; do
    [[ -n "${PRE_FAIL[$i]}" || ${PHASES[$i]} != 1 ]] && continue
    printf '%s\t%s\t%s\n' "$i" "${NAMES[$i]}" "${COMMANDS[$i]}" >>"$RESULTS/entries"
    runnable=$((runnable + 1))
  done
  [[ $runnable -gt 0 ]] || return 0
  say "booting the Soft-RoCE VM for $runnable test(s)"
  # In the background so that our INT/TERM trap can stop it (and with it qemu) at once.
  "$REPO/tools/rxe_vm.sh" --timeout "$VM_TIMEOUT" --share "$RESULTS" "${BIN_ENV[@]}" -- \
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

# Boots the two VMs once and runs all runnable phase-2 entries in both guests.
run_in_two_vms() {
  local i runnable=0 rc=0 two=$RESULTS/two
  mkdir -p "$two"
  : >"$two/entries"
  for i in "${!NAMES[@]}"; do
    [[ -n "${PRE_FAIL[$i]}" || ${PHASES[$i]} != 2 ]] && continue
    printf '%s\t%s\t%s\n' "$i" "${NAMES[$i]}" "${COMMANDS[$i]}" >>"$two/entries"
    runnable=$((runnable + 1))
  done
  [[ $runnable -gt 0 ]] || return 0
  say "booting two Soft-RoCE VMs (one link between them) for $runnable test(s)"
  "$REPO/tools/rxe_vms.sh" --timeout "$TWO_TIMEOUT" --share "$RESULTS" "${BIN_ENV[@]}" -- \
    "bash tools/rxe_vm/suite_guest.sh $(printf '%q' "$two") $TEST_TIMEOUT" &
  VM_PID=$!
  wait "$VM_PID" || rc=$?
  VM_PID=""
  if [[ $rc -ne 0 ]]; then
    case $rc in
      124) say "the two VMs hit their time limit ($TWO_TIMEOUT s, --two-hosts-timeout); tests that did not finish count as failed" ;;
      125) say "a VM of the two did not boot or set up rxe0 (see above); its tests count as failed" ;;
      *) say "the two-VM run ended with status $rc; tests without a verdict count as failed" ;;
    esac
  fi
}

# status_of INDEX: the verdict the guest(s) left for entry INDEX ("" if none): phase 1
# reads RESULTS/INDEX.status; phase 2 needs PASS from both guests.
status_of() {
  local i=$1 role s out="" secs=0 t
  if [[ ${PHASES[$i]} == 1 ]]; then
    [[ -s "$RESULTS/$i.status" ]] && cat "$RESULTS/$i.status"
    return
  fi
  for role in a b; do
    s=$(cat "$RESULTS/two/$role/$i.status" 2>/dev/null || true)
    [[ -n "$s" ]] || s="FAIL no verdict: guest $role stopped before this test ran or finished"
    [[ "$s" == PASS ]] || out+="${out:+; }$role: ${s#FAIL }"
  done
  if [[ -z "$out" ]]; then echo PASS; else echo "FAIL $out"; fi
}

# secs_of INDEX, log_of INDEX ROLE: what report() shows.
secs_of() {
  if [[ ${PHASES[$1]} == 1 ]]; then cat "$RESULTS/$1.secs" 2>/dev/null || true; return; fi
  local a b
  a=$(cat "$RESULTS/two/a/$1.secs" 2>/dev/null || echo "?")
  b=$(cat "$RESULTS/two/b/$1.secs" 2>/dev/null || echo "?")
  echo "a $a, b $b"
}

# Prints and counts one verdict per entry, from the files the guest left.
report() {
  local i status secs reason
  for i in "${!NAMES[@]}"; do
    secs=""
    if [[ -n "${PRE_FAIL[$i]}" ]]; then
      status="FAIL ${PRE_FAIL[$i]}"
    elif status=$(status_of "$i") && [[ -n "$status" ]]; then
      secs=$(secs_of "$i")
    else
      status="FAIL no verdict: the VM stopped before this test ran or finished"
    fi
    local name=${NAMES[$i]}
    [[ ${PHASES[$i]} == 2 ]] && name="[two hosts] $name"
    if [[ "$status" == PASS ]]; then
      echo "PASS $name (${secs} s)"
      # An entry's "FIGURES: ..." lines (benchmark ratios, e.g. msgr vs perftest) go to the
      # summary too, so that every run reports them.
      local figs
      for figs in "$RESULTS/$i.log" "$RESULTS/two/a/$i.log" "$RESULTS/two/b/$i.log"; do
        [[ -s "$figs" ]] && { grep -h 'FIGURES: ' "$figs" | sed 's/^/  /' || true; }
      done
      PASSED=$((PASSED + 1))
    else
      reason=${status#FAIL }
      echo "FAIL $name: $reason${secs:+ (${secs} s)}"
      local logf
      for logf in "$RESULTS/$i.log" "$RESULTS/two/a/$i.log" "$RESULTS/two/b/$i.log"; do
        [[ -s "$logf" ]] || continue
        echo "---- last lines of its output ($logf) ----"
        tail -n 40 "$logf"
        echo "----"
      done
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
  BIN_ENV=()
  [[ -n "${MSGR_BIN:-}" ]] && BIN_ENV=(--env "MSGR_BIN=$MSGR_BIN")
  local start mid end
  start=$(date +%s)
  run_in_vm
  mid=$(date +%s)
  run_in_two_vms
  end=$(date +%s)
  report
  say "VM runs took $((end - start)) s (one VM $((mid - start)) s, two VMs $((end - mid)) s)"
  finish 0
}

main "$@"
