#!/usr/bin/env bash
# The OSD daemon's command line: bad values are refused before anything starts (exit 2,
# a message naming the flag and what it takes), --help lists the tuning flags.
set -uo pipefail
OSD=${TEST_SRCDIR:?run under bazel test}/msgr/osd_sim/osd
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_refused "what it must say" ARGS...
expect_refused() {
  local want=$1; shift
  local out rc
  out=$("$OSD" --id 0 --mon 127.0.0.1:1 --durability memory "$@" 2>&1); rc=$?
  [[ $rc == 2 ]] || fail "$* exited $rc, want 2 (output: ${out:0:200})"
  grep -qF -- "$want" <<<"$out" || fail "$*: no '$want' in: ${out:0:300}"
}

expect_refused "--op-complaint-time takes a number of seconds above 0" --op-complaint-time abc
expect_refused "--op-complaint-time takes a number of seconds above 0" --op-complaint-time 0
expect_refused "poller-wakeup-us" --poller-wakeup-us fast
expect_refused "poller-spin-us" --poller-spin-us -5
expect_refused "--ring-bytes must be a power of two" --ring-bytes 100000

help=$("$OSD" --help 2>&1)
for flag in --poller-spin-us --poller-wakeup-us --op-complaint-time --metrics-addr; do
  grep -qF -- "$flag" <<<"$help" || fail "--help does not mention $flag"
done

if [[ $failures -gt 0 ]]; then echo "$failures failure(s)" >&2; exit 1; fi
echo "osd_main_test: ok"
