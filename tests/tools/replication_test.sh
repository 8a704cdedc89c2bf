#!/usr/bin/env bash
# Replication end to end, multi-process (tools/cluster.sh --pool-size 3, four OSDs):
#   * the map and `monctl status` carry the pool size;
#   * a bench run during which one OSD is killed with SIGKILL (and left down) completes
#     without a failed write, and every object it acknowledged reads back byte-identical
#     while that OSD is down: the memory-mode store of the killed OSD is gone, so each
#     read is served by a replica;
#   * the stores hold three copies of what was written before the kill, and the OSDs
#     count the writes they acknowledged with two copies (degraded);
#   * with a second OSD killed every acknowledged object still reads back (each had at
#     least two copies, at most one more was lost).
#   * pools: `monctl pool create` makes a size-2 pool beside the size-3 default; a bench
#     run with --pool keeps two copies of each object there (the JSON names the pool);
#     `bench.sh verify -b SIZE` checks sizes: the right size passes, a wrong one is bad.
#   * scrub is clean on a healthy cluster; the two killed OSDs restarted with empty memory
#     stores are recovered before they serve: every acknowledged object reads back and
#     scrub finds nothing missing or differing.
#
#   replication_test.sh [--ms-type tcp|rdma] [--seconds N]   (or env MS_TYPE / BENCH_SECONDS)
set -euo pipefail
# shellcheck source=tests/tools/test_paths.sh
source "$(dirname "$0")/test_paths.sh"
MS_TYPE=${MS_TYPE:-tcp} BENCH_SECONDS=${BENCH_SECONDS:-8}
# shellcheck source=tools/lib/flags.sh
source "$TOOLS/lib/flags.sh"
FLAGS_SCRIPT=replication_test.sh
usage_text() { flags_header "$0"; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --ms-type) flag_value MS_TYPE ;;
    --seconds) flag_value BENCH_SECONDS ;;
    *) flag_unknown ;;
  esac
done
export MSGR_BIN=$RUNFILES MSGR_REBUILD=0
DIR=$(mktemp -d /tmp/msgr-repl-test.XXXXXX)
fail() { echo "FAIL: $*" >&2; tail -n 20 "$DIR"/log/*.log >&2 || true; exit 1; }
cleanup() { bash "$TOOLS/cluster.sh" stop --cluster-dir "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
MONCTL=("$RUNFILES/osd_sim/mon/monctl" --cluster-dir "$DIR")

bash "$TOOLS/cluster.sh" start --cluster-dir "$DIR" --osds 4 --ms-type "$MS_TYPE" \
  --durability memory --pool-size 3 --grace-ms 2000 || fail "cluster did not start"
status=$("${MONCTL[@]}" status)
echo "$status"
grep -q "pool size 3 min_size 2" <<<"$status" || fail "status does not show pool size 3 min_size 2"
"${MONCTL[@]}" map-json | python3 -c '
import json, sys
m = json.load(sys.stdin)
assert m["pool_size"] == 3 and m["pool_min_size"] == 2, m' || fail "map JSON lacks the pool size"

objects() {  # total objects in every live OSD's store
  local total=0 n id
  for id in "$@"; do
    n=$("$RUNFILES/osd_sim/tools/msgr_admin" "$DIR/run/osd.$id.asok" perf dump |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["store"]["objects"])')
    total=$((total + n))
  done
  echo "$total"
}

BENCH=(bash "$TOOLS/bench.sh" --cluster-dir "$DIR" --ms-type "$MS_TYPE" -b 16K -t 8 --quiet)
# Before any fault: three copies of each object.
"${BENCH[@]}" --count 200 --prefix pre --acked-log "$DIR/pre.log" || fail "bench failed"
copies=$(objects 0 1 2 3)
[[ $copies == 600 ]] || fail "200 objects of size 3 make $copies copies, not 600"

# A pool of size 2 beside the default pool: 50 objects there are 100 more copies.
"${MONCTL[@]}" pool create two --size 2 || fail "pool create"
"${MONCTL[@]}" pool ls | grep -Eq '^ +1 +two +2 +1 ' || fail "pool ls: $("${MONCTL[@]}" pool ls)"
"${BENCH[@]}" --pool two --count 50 --prefix intwo --acked-log "$DIR/two.log" \
  --json "$DIR/two.json" || fail "bench --pool two failed"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["pool"] == "two" and j["errors"] == 0, j' \
  "$DIR/two.json" || fail "bench JSON does not name pool two"
# Each byte went on to one replica: the primary's CPU copied it at least once on the way
# (tcp: into the frame and the socket; rdma: staged, and the soft HCA's memcpy).
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["copies_per_byte"]; assert c["osd_send"] >= 1, c' \
  "$DIR/two.json" || fail "copies_per_byte.osd_send does not count the forwards to the replicas"
copies=$(objects 0 1 2 3)
[[ $copies == 700 ]] || fail "50 objects of size 2 after 600 copies make $copies, not 700"
bash "$TOOLS/bench.sh" verify --cluster-dir "$DIR" --ms-type "$MS_TYPE" --pool two -b 16K \
  --oids "$DIR/two.log" --json "$DIR/two-verify.json" || fail "verify --pool two -b 16K failed"
rc=0
out=$(bash "$TOOLS/bench.sh" verify --cluster-dir "$DIR" --ms-type "$MS_TYPE" --pool two \
  -b 4K --oids "$DIR/two.log" 2>&1) || rc=$?
[[ $rc == 1 && $out == *"verify: 0 ok, 50 bad"* && $out == *"16384 bytes, expected 4096"* ]] \
  || fail "verify with a wrong -b: rc $rc: $out"
# In the default pool these objects do not exist.
rc=0
bash "$TOOLS/bench.sh" verify --cluster-dir "$DIR" --ms-type "$MS_TYPE" --oids "$DIR/two.log" \
  >/dev/null 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "pool two's objects verified in the default pool (rc $rc)"
rc=0
out=$(bash "$TOOLS/bench.sh" --cluster-dir "$DIR" --pool nosuch --count 1 2>&1) || rc=$?
[[ $rc == 2 && $out == *"no pool 'nosuch' (pools: default, two)"* ]] \
  || fail "bench --pool nosuch: rc $rc: $out"

# Scrub (msgr.sh scrub): every copy of both pools agrees with the map.
scrub() { bash "$TOOLS/msgr.sh" --cluster-dir "$DIR" --ms-type "$MS_TYPE" "$@" scrub; }
out=$(scrub) || fail "scrub of a healthy cluster: $out"
[[ $out == *"scrub: 200 objects, 600 copies, 0 missing, 0 differing, 0 stray (clean)"* ]] \
  || fail "scrub of the default pool: $out"
out=$(scrub --pool two) || fail "scrub --pool two: $out"
[[ $out == *"scrub: 50 objects, 100 copies, 0 missing, 0 differing, 0 stray (clean)"* ]] \
  || fail "scrub of pool two: $out"

# kill -9 osd.1 a quarter into a run; it stays down.
"${BENCH[@]}" --seconds "$BENCH_SECONDS" --prefix run --acked-log "$DIR/run.log" \
  --json "$DIR/bench.json" &
bench_pid=$!
sleep $((BENCH_SECONDS / 4))
bash "$TOOLS/cluster.sh" stop-osd --cluster-dir "$DIR" --id 1 --kill
wait "$bench_pid" || fail "bench failed while osd.1 was killed (size 3, min_size 2)"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["errors"] == 0 and j["ops"] > 50, j' \
  "$DIR/bench.json" || fail "writes failed or too few while one of four OSDs was down"
"${MONCTL[@]}" --wait-s 20 wait 1 down || fail "killed osd.1 not marked down"
cat "$DIR/pre.log" "$DIR/run.log" > "$DIR/acked.log"
acked=$(wc -l < "$DIR/acked.log")
verify() {
  bash "$TOOLS/bench.sh" verify --cluster-dir "$DIR" --ms-type "$MS_TYPE" \
    --oids "$DIR/acked.log" --json "$DIR/verify.json" || fail "verify $1 failed"
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verify"]; assert v["checked"] == int(sys.argv[2]) and v["mismatches"] == 0, v' \
    "$DIR/verify.json" "$acked" || fail "not every acknowledged object verified $1"
}
verify "with osd.1 down"
degraded=0
for id in 0 2 3; do
  n=$("$RUNFILES/osd_sim/tools/msgr_admin" "$DIR/run/osd.$id.asok" perf dump |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["replication"]["writes_degraded"])')
  degraded=$((degraded + n))
done
[[ $degraded -gt 0 ]] || fail "no write was counted as degraded while osd.1 was down"

bash "$TOOLS/cluster.sh" stop-osd --cluster-dir "$DIR" --id 2 --kill
"${MONCTL[@]}" --wait-s 20 wait 2 down || fail "killed osd.2 not marked down"
verify "with osd.1 and osd.2 down"

# osd.1 and osd.2 back with empty memory stores: before either serves a PG its copy is
# filled from a complete one (recovery), so once no PG is peering every acknowledged
# object reads back and scrub finds nothing missing or differing. (A PG of pool "two"
# whose two members were both killed lost its objects with their memory stores: with both
# down it waited for them, with both back it has nothing; the default pool kept a third
# copy of everything.)
bash "$TOOLS/cluster.sh" start-osd --cluster-dir "$DIR" --id 1 || fail "start-osd 1"
bash "$TOOLS/cluster.sh" start-osd --cluster-dir "$DIR" --id 2 || fail "start-osd 2"
"${MONCTL[@]}" --wait-s 20 wait 1 up || fail "osd.1 not up again"
"${MONCTL[@]}" --wait-s 20 wait 2 up || fail "osd.2 not up again"
peering() {
  local total=0 id n
  for id in 0 1 2 3; do
    n=$("$RUNFILES/osd_sim/tools/msgr_admin" "$DIR/run/osd.$id.asok" perf dump |
        python3 -c 'import json,sys; p=json.load(sys.stdin)["peering"]; print(p["pgs_peering"])') || n=1
    total=$((total + n))
  done
  echo "$total"
}
recovery_start=$SECONDS
for _ in $(seq 1 240); do
  [[ $(peering) == 0 ]] && break
  sleep 0.5
done
[[ $(peering) == 0 ]] || fail "PGs still peering 120 s after osd.1 and osd.2 came back"
recovered=$("$RUNFILES/osd_sim/tools/msgr_admin" "$DIR/run/osd.1.asok" perf dump |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["peering"]["objects_recovered"])')
verify "after osd.1 and osd.2 came back empty and were recovered"
rc=0
out=$(scrub) || rc=$?
summary=$(tail -n 1 <<<"$out")
[[ $rc == 0 && $summary == *" 0 missing, 0 differing"* ]] \
  || fail "scrub after osd.1 and osd.2 were recovered: rc $rc: $summary"
echo "scrub with osd.1 and osd.2 recovered in $((SECONDS - recovery_start)) s ($recovered objects pulled by osd.1): $summary"
echo "PASS: replication ($MS_TYPE): $acked acknowledged objects read back with one and with two of four OSDs killed ($degraded degraded writes)"
