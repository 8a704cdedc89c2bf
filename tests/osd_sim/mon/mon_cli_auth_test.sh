#!/usr/bin/env bash
# End to end: `mon --auth secret` and `monctl` with the cluster PKI made by tools/lib/pki.sh:
# the admin marks out, client.bench is refused (exit 1, the monitor's message, counted in
# /metrics as msgr_mon_auth_refused_total, logged once), monctl without TLS gets the clear
# error, a missing certificate is named, bad flag values exit 2.
set -euo pipefail
MON=$1
MONCTL=$2
PKI=$3
TMP=${TEST_TMPDIR:-$(mktemp -d)}
CLUSTER=$TMP/cluster
ADDR_FILE=$TMP/mon.addr
METRICS_FILE=$TMP/metrics.addr
fail() {
  echo "FAIL: $*" >&2
  [[ -f $TMP/mon.log ]] && sed 's/^/  mon.log: /' "$TMP/mon.log" >&2
  exit 1
}

bash "$PKI" init "$CLUSTER"
for e in mon client.admin client.bench; do bash "$PKI" issue "$CLUSTER" "$e"; done
[[ $(stat -c %a "$CLUSTER/pki/client.bench.key") == 600 ]] || fail "key mode"

# Bad usage is refused before anything is bound.
set +e
"$MON" --data-dir "$TMP/d0" --auth secret 2>"$TMP/err"; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "mon --auth secret without --cluster-dir: exit $rc, want 2"
grep -q -- "--auth secret needs --cluster-dir" "$TMP/err" || fail "msg: $(cat "$TMP/err")"
set +e
"$MON" --data-dir "$TMP/d0" --auth secret --cluster-dir "$CLUSTER" --entity mon.b 2>"$TMP/err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "mon with a missing certificate: exit $rc"
grep -q "missing $CLUSTER/pki/mon.b.crt" "$TMP/err" || fail "missing-cert msg: $(cat "$TMP/err")"

"$MON" --data-dir "$TMP/data" --addr-file "$ADDR_FILE" --grace-ms 300 --heartbeat-ms 100 \
  --pg-num 32 --auth secret --cluster-dir "$CLUSTER" \
  --metrics-addr 127.0.0.1:0 --metrics-addr-file "$METRICS_FILE" 2>>"$TMP/mon.log" &
MON_PID=$!
trap 'kill "$MON_PID" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -s $ADDR_FILE && -s $METRICS_FILE ]] && break; sleep 0.05; done
[[ -s $ADDR_FILE ]] || fail "mon did not write $ADDR_FILE"
ADDR=$(cat "$ADDR_FILE")
grep -q "auth mTLS as mon" "$TMP/mon.log" || fail "mon does not log its auth"

ADMIN=(--auth secret --cluster-dir "$CLUSTER")
grep -q "epoch 1 pg_num 32" <<<"$("$MONCTL" --mon "$ADDR" "${ADMIN[@]}" status)" || fail "admin status"

# Not a client of this cluster: the default (no TLS) gets a clear error, within the timeout.
set +e; out=$("$MONCTL" --mon "$ADDR" --timeout-ms 500 status 2>&1); rc=$?; set -e
[[ $rc -eq 1 ]] || fail "monctl without TLS: exit $rc"
[[ $out == *"it probably requires mutual TLS"* ]] || fail "no-TLS msg: $out"

# client.bench may read but not mark out (twice: logged once, counted twice).
grep -q '"pg_num": 32' <<<"$("$MONCTL" --mon "$ADDR" "${ADMIN[@]}" --entity client.bench map-json)" ||
  fail "client.bench map-json"
for _ in 1 2; do
  set +e
  out=$("$MONCTL" --mon "$ADDR" "${ADMIN[@]}" --entity client.bench out 0 2>&1); rc=$?
  set -e
  [[ $rc -eq 1 ]] || fail "client.bench out: exit $rc"
  [[ $out == *"client.bench may not mark OSDs out: needs client.admin"* ]] || fail "msg: $out"
done
[[ $(grep -c "client.bench may not mark OSDs out" "$TMP/mon.log") -eq 1 ]] ||
  fail "refusal not logged exactly once"
metrics=$(curl -sf "http://$(cat "$METRICS_FILE")/metrics")
grep -q "^msgr_mon_auth_refused_total 2" <<<"$metrics" ||
  fail "auth_refused not exported: $(echo "$metrics" | grep auth || true)"

# The admin is allowed (the OSD does not exist: the monitor's own NOT_FOUND comes back).
set +e; out=$("$MONCTL" --mon "$ADDR" "${ADMIN[@]}" out 0 2>&1); rc=$?; set -e
[[ $rc -eq 1 && $out == *"osd.0 does not exist"* ]] || fail "admin out 0: $rc $out"

# A certificate that was never issued is named, with how to make it.
set +e
out=$("$MONCTL" --mon "$ADDR" "${ADMIN[@]}" --entity client.nobody status 2>&1); rc=$?
set -e
[[ $rc -eq 1 ]] || fail "missing cert: exit $rc"
[[ $out == *"missing $CLUSTER/pki/client.nobody.crt"*"pki.sh issue $CLUSTER client.nobody"* ]] ||
  fail "missing cert msg: $out"
set +e; "$MONCTL" --mon "$ADDR" --auth bogus status 2>/dev/null; rc=$?; set -e
[[ $rc -eq 2 ]] || fail "--auth bogus: exit $rc, want 2"

kill -TERM "$MON_PID"
wait "$MON_PID" || fail "mon exited non-zero on SIGTERM"
trap - EXIT
echo "PASS"
