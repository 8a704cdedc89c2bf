#!/usr/bin/env bash
# The thrasher: workloads under continuous faults, with a checker that proves nothing
# acknowledged was lost (tools/thrash/thrash.py; the checker is tools/thrash/check.py).
#
#   tools/thrash.sh --minutes M --seed S [--ms-type tcp|rdma|both] [--pool-size N] [--hosts]
#                   [--writers N] [--objects N] [--max-size BYTES] [--rate OPS_PER_S]
#                   [--out-in] [--out DIR] [--keep] [--dry-run]
#
# --pool-size N (1..4, default 1): every object on N OSDs, 4 OSDs when N > 1. Faults then
# overlap, but never more than N - 1 OSDs are killed, stopped or out at once (one OSD at a
# time at N = 1, as before); after the final read-back every PG is waited for to be active
# and `msgr scrub` runs: each missing or differing copy is a violation, added into the last
# line (the line before it splits the count: history check, scrub).
# --hosts (root): the run makes five test hosts (tools/hosts.sh: network namespaces, tcp
# only, so rdma/both become tcp with a note), the monitor on msgr-h0, osd.K on msgr-h(1+K),
# the workloads on msgr-h4, and the seed's schedule adds host faults: an OSD host's link cut,
# an OSD partitioned from the monitor or from the client host, netem delay/loss on a host's
# link (skipped, saying why, where the kernel has no sch_netem). The hosts are removed at the
# end, also on an error or Ctrl-C. --dry-run prints the seed's schedule and starts nothing.
# The last line of a run is `violations: N`; exit status 0 when N is 0. Builds the optimised
# binaries first (a no-op when nothing changed; not for --dry-run or --help); MSGR_REBUILD=0
# skips the build, MSGR_BIN points at another bin dir.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${MSGR_BIN:-$ROOT/bazel-bin}"
BUILD=1
for arg in "$@"; do  # --dry-run and --help run nothing: no build
  case "$arg" in --dry-run|-h|--help) BUILD=0 ;; esac
done
if [[ $BUILD == 1 && ( "${MSGR_REBUILD:-1}" != 0 || ! -x "$BIN/client/thrash/workload" ) ]]; then
  if ! (cd "$ROOT" && bazel build -c opt //client/thrash:workload //osd_sim:osd //osd_sim/mon:mon \
      //osd_sim/mon:monctl //osd_sim/tools:msgr_admin >&2); then
    echo "thrash.sh: build failed (run tools/setup.sh first?)" >&2
    exit 1
  fi
fi
export MSGR_BIN="$BIN"
exec python3 "$ROOT/tools/thrash/thrash.py" "$@"
