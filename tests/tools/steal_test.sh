#!/usr/bin/env bash
# tools/lib/steal.sh, the reruns of bench runs the hypervisor disturbed (bench_matrix.sh,
# demo.sh): a fake bench writes the JSON host_cpu.steal_pct figures of a script, and the
# test checks which tries run and which one is kept.
set -euo pipefail
# shellcheck source=tests/tools/test_paths.sh
source "$(dirname "$0")/test_paths.sh"
# shellcheck source=tools/lib/steal.sh
source "$TOOLS/lib/steal.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/steal-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# fake_bench JSON: writes the next figure of STEALS (a space-separated list; "none": a
# JSON without host_cpu, "fail": no JSON at all) and counts its calls in RUNS.
RUNS=0
fake_bench() {
  local figures
  read -r -a figures <<< "$STEALS"
  local s=${figures[$RUNS]}
  RUNS=$((RUNS + 1))
  case "$s" in
    fail) ;;
    none) echo '{"iops": 1}' > "$1" ;;
    *) echo "{\"iops\": $RUNS, \"host_cpu\": {\"busy_pct\": 90, \"steal_pct\": $s}}" > "$1" ;;
  esac
}

# check CASE STEAL_MAX STEAL_RETRIES "STEALS" RUNS_WANTED BEST_WANTED
check() {
  local name=$1
  STEAL_MAX=$2 STEAL_RETRIES=$3 STEALS=$4 RUNS=0
  steal_retry "$WORK/$name" fake_bench 2> "$WORK/$name.err"
  [[ $RUNS == "$5" ]] || fail "$name: $RUNS tries, expected $5"
  [[ $STEAL_TRIES == "$5" ]] || fail "$name: STEAL_TRIES $STEAL_TRIES, expected $5"
  [[ $STEAL_BEST == "$6" ]] || fail "$name: kept try $STEAL_BEST, expected $6"
  local again
  again=$(grep -c "running it again" "$WORK/$name.err" || true)
  [[ $again == $(($5 - 1)) ]] || fail "$name: $again rerun messages for $5 tries"
}

check undisturbed 10 2 "3.5 40 40" 1 0
check once 10 2 "25 4 40" 2 1
check bounded 10 2 "30 12.5 20 1" 3 1       # never more than 1 + STEAL_RETRIES tries
check least_stolen 10 3 "30 40 15 50" 4 2
check at_the_limit 10 2 "10 40" 1 0         # over the limit, not at it
check never 0 2 "90 1" 1 0                  # --max-steal 0: no rerun
check no_retries 10 0 "90 1" 1 0
check no_figure 10 2 "none 1" 1 0           # an older bench: nothing to judge
check failed_first 10 2 "fail 1" 1 0
check failed_later 10 2 "50 fail 1" 2 0     # the disturbed run beats none
[[ $(run_steal "$WORK/least_stolen.2.json") == 15 ]] || fail "run_steal read the wrong figure"
[[ -z $(run_steal "$WORK/missing.json") ]] || fail "run_steal of no file is not empty"
grep -q "took 30.0% of" "$WORK/bounded.err" || fail "the message does not give the steal"
echo "PASS"
