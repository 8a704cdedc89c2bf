#!/usr/bin/env bash
# Runs the thrasher's schedule tests (schedule_test.py) with the system python3.
set -euo pipefail
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  exec python3 "$TEST_SRCDIR/msgr/tests/tools/thrash/schedule_test.py"
fi
exec python3 "$(dirname "$0")/schedule_test.py"
