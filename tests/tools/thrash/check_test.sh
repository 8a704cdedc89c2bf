#!/usr/bin/env bash
# Runs the checker's unit tests (check_test.py) with the system python3.
set -euo pipefail
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  exec python3 "$TEST_SRCDIR/msgr/tests/tools/thrash/check_test.py"
fi
exec python3 "$(dirname "$0")/check_test.py"
