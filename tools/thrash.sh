#!/usr/bin/env bash
# The thrasher: workloads under continuous faults, with a checker that proves nothing
# acknowledged was lost (tools/thrash/thrash.py; the checker is tools/thrash/check.py).
#
#   tools/thrash.sh --minutes M --seed S [--ms-type tcp|rdma|both] [--writers N]
#                   [--objects N] [--max-size BYTES] [--out-in] [--out DIR] [--keep]
#
# The last line of a run is `violations: N`; exit status 0 when N is 0. Builds the optimised
# binaries first (a no-op when nothing changed); MSGR_REBUILD=0 skips the build, MSGR_BIN
# points at another bin dir.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${MSGR_BIN:-$ROOT/bazel-bin}"
if [[ "${MSGR_REBUILD:-1}" != 0 || ! -x "$BIN/client/thrash/workload" ]]; then
  if ! (cd "$ROOT" && bazel build -c opt //client/thrash:workload //osd_sim:osd //osd_sim/mon:mon \
      //osd_sim/mon:monctl //osd_sim/tools:msgr_admin >&2); then
    echo "thrash.sh: build failed (run tools/setup.sh first?)" >&2
    exit 1
  fi
fi
export MSGR_BIN="$BIN"
exec python3 "$ROOT/tools/thrash/thrash.py" "$@"
