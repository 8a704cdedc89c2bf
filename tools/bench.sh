#!/usr/bin/env bash
# The object-write benchmark, like `rados bench write` (see //client/bench:bench).
#
#   tools/bench.sh --mon HOST:PORT --ms-type tcp|rdma -b SIZE -t CONCURRENCY --seconds S
#                  [--count N] [--json FILE] [--acked-log FILE] [--verify]
#                  [--auth secret|none] [--keyring FILE] [--prefix P] [--osd-pids PID,...]
#                  [--cluster-dir DIR] [--spin-us US]
#   tools/bench.sh verify --mon HOST:PORT [--ms-type tcp|rdma] --oids FILE [--json FILE]
#   tools/bench.sh --help                      (every flag)
#
# Every flag also takes --flag=VALUE. --auth secret uses --keyring FILE, else the cluster's
# DIR/keyring (--cluster-dir DIR); without --auth, DIR/keyring if it exists, else none.
# --auth FILE is the old spelling of --keyring FILE.
# One thread keeps CONCURRENCY asynchronous writes in flight; --spin-us US makes it poll
# for completions that long before sleeping (default 0: on 2 busy cores spinning lost).
# Builds the optimised binaries first (bazel build -c opt //client/bench:bench //osd_sim/...;
# a no-op when nothing changed), then runs bazel-bin/client/bench/bench with the arguments.
# MSGR_REBUILD=0 skips the build when the binary exists; MSGR_BIN points at another bin dir.
# Exit status: the bench's (0 ok, 1 failed ops / mismatches / setup error, 2 bad arguments).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${MSGR_BIN:-$ROOT/bazel-bin}"
BENCH="$BIN/client/bench/bench"

if [[ "${MSGR_REBUILD:-1}" != 0 || ! -x "$BENCH" ]]; then
  if ! (cd "$ROOT" && bazel build -c opt //client/bench:bench //osd_sim/... >&2); then
    echo "bench.sh: build failed (run tools/setup.sh first?)" >&2
    exit 1
  fi
fi
exec "$BENCH" "$@"
