#!/usr/bin/env bash
# End to end: the `mon` daemon and `monctl` as the cluster scripts use them, and their
# config file (msgr.conf, --conf FILE).
set -euo pipefail
MON=$1
MONCTL=$2
TMP=${TEST_TMPDIR:-$(mktemp -d)}
DATA=$TMP/mon-data
ADDR_FILE=$TMP/mon.addr
fail() { echo "FAIL: $*" >&2; exit 1; }

start_mon() {
  rm -f "$ADDR_FILE"
  "$MON" --data-dir "$DATA" --addr-file "$ADDR_FILE" --grace-ms 300 --heartbeat-ms 100 \
    --pg-num 32 2>>"$TMP/mon.log" &
  MON_PID=$!
  for _ in $(seq 100); do [[ -s $ADDR_FILE ]] && break; sleep 0.05; done
  [[ -s $ADDR_FILE ]] || fail "mon did not write $ADDR_FILE"
  ADDR=$(cat "$ADDR_FILE")
}

start_mon
[[ $ADDR == 127.0.0.1:* ]] || fail "mon bound $ADDR, not loopback"
grep -q "epoch 1 pg_num 32" <<<"$("$MONCTL" --mon "$ADDR" status)" || fail "status"
json=$("$MONCTL" --mon "$ADDR" map-json)
grep -q '"pg_num": 32' <<<"$json" || fail "map-json: $json"
grep -q '"osds": \[\]' <<<"$json" || fail "map-json osds: $json"
if "$MONCTL" --mon "$ADDR" out 7 2>"$TMP/err"; then fail "out of unknown id succeeded"; fi
grep -q "osd.7 does not exist" "$TMP/err" || fail "unknown id message: $(cat "$TMP/err")"
set +e; "$MONCTL" --mon "$ADDR" frobnicate 2>/dev/null; rc=$?; set -e
[[ $rc -eq 2 ]] || fail "bad command exit $rc, want 2"

# Pools: create (with its refusals), ls, status, map-json; kept across the restart below.
out=$("$MONCTL" --mon "$ADDR" pool create images --size 3 --min-size 2 --pg-num 16) \
  || fail "pool create: $out"
[[ $out == *"pool 'images' created: id 1 size 3 min_size 2 pg_num 16"* ]] || fail "create: $out"
expect_refusal() {  # RC WORDS ARGS...
  local want=$1 words=$2 rc=0 out
  shift 2
  out=$("$MONCTL" --mon "$ADDR" "$@" 2>&1) || rc=$?
  [[ $rc -eq $want && $out == *"$words"* ]] || fail "'$*': rc $rc (want $want): $out"
}
expect_refusal 1 "pool 'images' already exists" pool create images
expect_refusal 1 "min_size 3 is more than the pool's size 2" pool create x --size 2 --min-size 3
expect_refusal 2 "--size must be at least 1" pool create x --size 0
expect_refusal 2 "pool wants 'create NAME' or 'ls'" pool create
expect_refusal 2 "blocklist wants [add] ENTITY, rm ENTITY or ls" blocklist
expect_refusal 2 "--instance wants the hex instance" blocklist client.3 --instance zz
expect_refusal 2 "blocklist ls takes no --instance" blocklist ls --instance 1f
expect_refusal 2 "blocklist rm takes no --expire-s" blocklist rm client.3 --expire-s 5
expect_refusal 1 "'mon.1' cannot be blocklisted: name a client.N or an osd.N" blocklist mon.1
expect_refusal 1 "client.3 (every instance) is not blocklisted" blocklist rm client.3
ls_out=$("$MONCTL" --mon "$ADDR" pool ls)
grep -Eq '^ +0 +default +1 +1 +32$' <<<"$ls_out" || fail "pool ls default: $ls_out"
grep -Eq '^ +1 +images +3 +2 +16$' <<<"$ls_out" || fail "pool ls images: $ls_out"
grep -q "pools: default (id 0, size 1/1, pg_num 32), images (id 1, size 3/2, pg_num 16)" <<<"$("$MONCTL" --mon "$ADDR" status)" \
  || fail "status pools: $("$MONCTL" --mon "$ADDR" status)"
grep -q '"name": "images"' <<<"$("$MONCTL" --mon "$ADDR" map-json)" || fail "map-json pools"

kill -TERM "$MON_PID"
wait "$MON_PID" || fail "mon exited non-zero on SIGTERM"
grep -q "signal 15: shutting down" "$TMP/mon.log" || fail "no shutdown log"

# Restart: the same cluster at the same epoch (nothing changed).
start_mon
grep -q "epoch 2 pg_num 32" <<<"$("$MONCTL" --mon "$ADDR" status)" || fail "epoch after restart"
"$MONCTL" --mon "$ADDR" pool ls | grep -Eq '^ +1 +images +3 +2 +16$' || fail "pool lost on restart"
kill -INT "$MON_PID"
wait "$MON_PID" || fail "mon exited non-zero on SIGINT"

set +e; out=$("$MONCTL" --mon "$ADDR" --timeout-ms 300 status 2>&1); rc=$?; set -e
[[ $rc -eq 1 ]] || fail "unreachable mon exit $rc"
[[ $out == *"monitor at $ADDR unreachable after 300ms"* ]] || fail "unreachable msg: $out"

# msgr.conf: monctl takes the monitor and its timeout from [global] / [client], the command
# line overrides them; the monitor takes [mon] (a new cluster's pg_num) and ignores [osd].
printf '[global]\nmon = %s\n[client]\ntimeout-ms = 200\n[osd]\ndurability = memory\n' "$ADDR" \
  > "$TMP/msgr.conf"
set +e; out=$("$MONCTL" --conf "$TMP/msgr.conf" status 2>&1); rc=$?; set -e
[[ $rc -eq 1 && $out == *"monitor at $ADDR unreachable after 200ms"* ]] || fail "conf: rc $rc: $out"
set +e; out=$("$MONCTL" --conf "$TMP/msgr.conf" --timeout-ms 250 status 2>&1); set -e
[[ $out == *"unreachable after 250ms"* ]] || fail "flag over conf: $out"
printf '[client]\ntimeout-mss = 1\n' > "$TMP/typo.conf"
set +e; out=$("$MONCTL" --conf "$TMP/typo.conf" --mon "$ADDR" status 2>&1); rc=$?; set -e
[[ $rc -eq 2 && $out == *"typo.conf:2: unknown key 'timeout-mss' in [client]"* ]] || fail "typo: rc $rc: $out"
printf '[mon]\npg num = 16\n[osd]\npollers = 2\n' > "$TMP/mon.conf"
"$MON" --data-dir "$TMP/mon-conf-data" --addr-file "$TMP/mon2.addr" --conf "$TMP/mon.conf" \
  2>>"$TMP/mon.log" &
MON_PID=$!
for _ in $(seq 100); do [[ -s $TMP/mon2.addr ]] && break; sleep 0.05; done
grep -q "pg_num 16" <<<"$("$MONCTL" --mon "$(cat "$TMP/mon2.addr")" status)" || fail "[mon] pg num not used"
kill -TERM "$MON_PID"
wait "$MON_PID" || fail "mon (with --conf) exited non-zero"
echo "PASS"
