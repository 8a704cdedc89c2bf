#!/usr/bin/env bash
# "Any standard gRPC client can call it": Debian's python3-grpcio, with code generated from
# proto/mon.proto by the system protoc + grpc_python_plugin, calls a `mon --auth secret`
# with the cluster CA and a client certificate: GetMap works as client.bench, MarkOut is
# PERMISSION_DENIED for it and works for client.admin.
set -euo pipefail
MON=$1
PKI=$2
PROTO=$3
CLIENT=$4
TMP=${TEST_TMPDIR:-$(mktemp -d)}
CLUSTER=$TMP/cluster
ADDR_FILE=$TMP/mon.addr
fail() {
  echo "FAIL: $*" >&2
  [[ -f $TMP/mon.log ]] && sed 's/^/  mon.log: /' "$TMP/mon.log" >&2
  exit 1
}

# Debian's python (not a pyenv one earlier on a developer's PATH) has python3-grpcio.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
"$PY" -c "import grpc" 2>/dev/null ||
  fail "$PY has no grpc module: install python3-grpcio (tools/setup.sh does)"
PLUGIN=$(command -v grpc_python_plugin) ||
  fail "no grpc_python_plugin (Debian package protobuf-compiler-grpc, tools/setup.sh)"

mkdir -p "$TMP/gen"
protoc -I "$(dirname "$PROTO")" --python_out="$TMP/gen" --grpc_out="$TMP/gen" \
  --plugin=protoc-gen-grpc="$PLUGIN" "$PROTO"

bash "$PKI" init "$CLUSTER"
for e in mon client.admin client.bench; do bash "$PKI" issue "$CLUSTER" "$e"; done
"$MON" --data-dir "$TMP/data" --addr-file "$ADDR_FILE" --pg-num 16 \
  --auth secret --cluster-dir "$CLUSTER" 2>>"$TMP/mon.log" &
MON_PID=$!
trap 'kill "$MON_PID" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -s $ADDR_FILE ]] && break; sleep 0.05; done
[[ -s $ADDR_FILE ]] || fail "mon did not write $ADDR_FILE"
ADDR=$(cat "$ADDR_FILE")

out=$("$PY" "$CLIENT" "$TMP/gen" "$ADDR" "$CLUSTER" client.bench get-map) ||
  fail "python GetMap as client.bench: $out"
[[ $out == "epoch 1 pg_num 16" ]] || fail "python GetMap: '$out'"

set +e; out=$("$PY" "$CLIENT" "$TMP/gen" "$ADDR" "$CLUSTER" client.bench mark-out 0); rc=$?; set -e
[[ $rc -eq 1 ]] || fail "python MarkOut as client.bench: exit $rc ($out)"
[[ $out == "PERMISSION_DENIED: client.bench may not mark OSDs out: needs client.admin" ]] ||
  fail "python MarkOut as client.bench: '$out'"
# As the admin the call is allowed; osd.0 never booted, so the monitor's own NOT_FOUND.
set +e; out=$("$PY" "$CLIENT" "$TMP/gen" "$ADDR" "$CLUSTER" client.admin mark-out 0); set -e
[[ $out == "NOT_FOUND: osd.0 does not exist"* ]] || fail "python MarkOut as client.admin: '$out'"

kill -TERM "$MON_PID"
wait "$MON_PID" || fail "mon exited non-zero"
trap - EXIT
echo "PASS"
