#!/usr/bin/env bash
# The object CLI, like `rados put/get/stat/rm/ls` (see //client/cli:msgr).
#
#   tools/msgr.sh [--cluster-dir DIR | --mon HOST:PORT [--keyring FILE]] [--ms-type tcp|rdma]
#                 put OID FILE|-  |  get OID FILE|-  |  stat OID  |  rm OID
#                 ls [--prefix P] [--long]
#   tools/msgr.sh --help
#
# --cluster-dir DIR (a tools/cluster.sh directory) supplies the monitor (DIR/mon.addr), the
# key (DIR/keyring) and the backend (rdma if the cluster was started --ms-type rdma, else
# tcp). Every flag also takes --flag=VALUE. Exit status: 0 ok, 1 failed, 2 bad usage,
# 3 no such object, 4 cluster unreachable. A progress bar on stderr for objects of 16 MiB
# or more when stderr is a terminal.
# Builds the optimised binary first (a no-op when nothing changed); MSGR_REBUILD=0 skips
# the build when the binary exists; MSGR_BIN points at another bin dir.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${MSGR_BIN:-$ROOT/bazel-bin}"
CLI="$BIN/client/cli/msgr"

if [[ "${MSGR_REBUILD:-1}" != 0 || ! -x "$CLI" ]]; then
  if ! (cd "$ROOT" && bazel build -c opt //client/cli:msgr >&2); then
    echo "msgr.sh: build failed (run tools/setup.sh first?)" >&2
    exit 1
  fi
fi
exec "$CLI" "$@"
