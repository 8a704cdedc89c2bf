#!/usr/bin/env bash
# Fencing end to end, multi-process (tools/cluster.sh, three OSDs), one backend per run:
#   * a bench is stopped (SIGSTOP) in the middle of its writes; `monctl blocklist
#     client.N --instance X` returns only once every up OSD reported the new epoch applied;
#   * the bench continued (SIGCONT) gets its writes refused with an error that names the
#     blocklist and gives up; nothing it sent after the fence lands in any store, and every
#     object it had acknowledged before reads back;
#   * a new client (another instance) writes as usual; `blocklist ls` and `status` show
#     the entry, `blocklist rm` lifts it, an entry past its --expire-s is dropped;
#   * an OSD restarted as a new process gets its old incarnation blocklisted ("osd.K
#     restarted");
#   * an old OSD process stopped (SIGSTOP) while a new one took its id, then continued: it
#     says it is fenced and exits (status 3); its heartbeats do not keep the id up.
#
#   blocklist_test.sh [--ms-type tcp|rdma]   (or env MS_TYPE; the rdma device: soft, or
#   MSGR_RDMA_DEVICE, as in the Soft-RoCE VM)
set -euo pipefail
# shellcheck source=tests/tools/test_paths.sh
source "$(dirname "$0")/test_paths.sh"
MS_TYPE=${MS_TYPE:-tcp}
# shellcheck source=tools/lib/flags.sh
source "$TOOLS/lib/flags.sh"
FLAGS_SCRIPT=blocklist_test.sh
usage_text() { flags_header "$0"; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --ms-type) flag_value MS_TYPE ;;
    *) flag_unknown ;;
  esac
done
export MSGR_BIN=$RUNFILES MSGR_REBUILD=0
DIR=$(mktemp -d /tmp/msgr-blocklist-test.XXXXXX)
BENCH_PID=
OLD_OSD_PID=
fail() { echo "FAIL: $*" >&2; tail -n 20 "$DIR"/log/*.log >&2 || true; exit 1; }
cleanup() {
  [[ -n $BENCH_PID ]] && { kill -CONT "$BENCH_PID" 2>/dev/null; kill -9 "$BENCH_PID" 2>/dev/null; } || true
  [[ -n $OLD_OSD_PID ]] && { kill -CONT "$OLD_OSD_PID" 2>/dev/null; kill -9 "$OLD_OSD_PID" 2>/dev/null; } || true
  bash "$TOOLS/cluster.sh" stop --cluster-dir "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
MONCTL=("$RUNFILES/osd_sim/mon/monctl" --cluster-dir "$DIR")
ADMIN=$RUNFILES/osd_sim/tools/msgr_admin

bash "$TOOLS/cluster.sh" start --cluster-dir "$DIR" --osds 3 --ms-type "$MS_TYPE" \
  --durability memory || fail "cluster did not start"

objects() {  # objects in all three stores
  local total=0 n id
  for id in 0 1 2; do
    n=$("$ADMIN" "$DIR/run/osd.$id.asok" perf dump |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["store"]["objects"])')
    total=$((total + n))
  done
  echo "$total"
}

# A bench that would write for 60 s; stopped once its sessions are up and writing.
"$TOOLS/bench.sh" --cluster-dir "$DIR" --ms-type "$MS_TYPE" -b 16K -t 8 --seconds 60 \
  --prefix fenced --acked-log "$DIR/acked.log" >"$DIR/bench.out" 2>&1 &
BENCH_PID=$!
# (Up to 60 s: under the Soft-RoCE VM's emulation the first sessions take seconds.)
for _ in $(seq 1 600); do
  [[ -s $DIR/acked.log ]] && (($(wc -l <"$DIR/acked.log") >= 100)) && break
  sleep 0.1
done
(($(wc -l <"$DIR/acked.log") >= 100)) || fail "the bench acknowledged too few writes: $(cat "$DIR/bench.out")"
# bench.sh runs the bench binary as its child: stop that (the one with the sessions).
BENCH_BIN=$(pgrep -P "$BENCH_PID" -f 'bench' | head -n 1 || true)
[[ -n $BENCH_BIN ]] || BENCH_BIN=$BENCH_PID
kill -STOP "$BENCH_BIN"
# (No process substitution: the Soft-RoCE guest has no /dev/fd.)
fenced=$("$ADMIN" "$DIR/run/osd.0.asok" dump_sessions | python3 -c '
import json, sys
for s in json.load(sys.stdin)["sessions"]:
    if s["peer"].startswith("client.") and s["direction"] == "in" and s["peer_instance"] != "0":
        print(s["peer"], s["peer_instance"]); break')
read -r CLIENT INSTANCE <<<"$fenced" || true
[[ -n ${CLIENT:-} && -n ${INSTANCE:-} ]] || fail "no client session on osd.0 to fence"
echo "fencing $CLIENT instance $INSTANCE (bench pid $BENCH_BIN stopped)"

out=$("${MONCTL[@]}" blocklist "$CLIENT" --instance "$INSTANCE") || fail "blocklist: $out"
echo "$out"
[[ $out == *"applied by every up OSD (3)"* ]] || fail "blocklist did not wait for the OSDs: $out"
before=$(objects)

kill -CONT "$BENCH_BIN"
rc=0
wait "$BENCH_PID" || rc=$?
BENCH_PID=
cat "$DIR/bench.out" | tail -n 5
((rc != 0)) || fail "the fenced bench exited 0"
grep -q "blocklisted" "$DIR/bench.out" || fail "the fenced bench's errors do not say it was blocklisted"
sleep 1
after=$(objects)
((after == before)) || fail "writes landed after the fence: $before objects then $after"
# Acks the OSDs sent before the fence may reach the bench after SIGCONT (they were in its
# socket): those writes landed before the fence, and the verify below reads them back.
acked_after=$(wc -l <"$DIR/acked.log")
bash "$TOOLS/bench.sh" verify --cluster-dir "$DIR" --ms-type "$MS_TYPE" --oids "$DIR/acked.log" \
  -b 16K || fail "an object acknowledged before the fence does not read back"

# Another client instance is served; the entry shows; rm lifts it.
bash "$TOOLS/bench.sh" --cluster-dir "$DIR" --ms-type "$MS_TYPE" -b 4K --count 100 --quiet \
  --prefix other || fail "a new client could not write"
ls=$("${MONCTL[@]}" blocklist ls)
echo "$ls"
grep -q "^$CLIENT .*$INSTANCE .*monctl blocklist" <<<"$ls" || fail "blocklist ls lacks the entry"
grep -q "blocklist: 1 entry" <<<"$("${MONCTL[@]}" status)" || fail "status does not count the entry"
"${MONCTL[@]}" blocklist rm "$CLIENT" --instance "$INSTANCE" || fail "blocklist rm"
[[ $("${MONCTL[@]}" blocklist ls | wc -l) == 1 ]] || fail "the entry is still listed after rm"
# An entry lasts its --expire-s: the monitor drops it (a new epoch) once it is past.
"${MONCTL[@]}" blocklist add client.5 --expire-s 1 >/dev/null || fail "blocklist --expire-s 1"
for _ in $(seq 1 50); do
  grep -q "^client.5 " <<<"$("${MONCTL[@]}" blocklist ls)" || break
  sleep 0.2
done
grep -q "^client.5 " <<<"$("${MONCTL[@]}" blocklist ls)" && fail "client.5's entry outlived --expire-s 1"
out=$("${MONCTL[@]}" blocklist nobody.1 2>&1) && fail "blocklisting nobody.1 succeeded"
[[ $out == *"client.N or an osd.N"* ]] || fail "bad entity: unclear error: $out"

# An OSD restarted as a new process: its old incarnation is fenced.
bash "$TOOLS/cluster.sh" stop-osd --cluster-dir "$DIR" --id 2 --kill
"${MONCTL[@]}" --wait-s 20 wait 2 down >/dev/null || fail "killed osd.2 not marked down"
bash "$TOOLS/cluster.sh" start-osd --cluster-dir "$DIR" --id 2 || fail "start-osd 2"
"${MONCTL[@]}" --wait-s 20 wait 2 up >/dev/null || fail "osd.2 not up again"
ls=$("${MONCTL[@]}" blocklist ls)
echo "$ls"
grep -q "^osd.2 .*osd.2 restarted" <<<"$ls" || fail "osd.2's old incarnation is not blocklisted"

# An OSD process that hung (SIGSTOP) long enough to be replaced, then went on: it learns it
# is fenced (from the map's blocklist or its refused heartbeat) and exits with status 3.
OLD_OSD_PID=$(cat "$DIR/osd.1.pid")
kill -STOP "$OLD_OSD_PID"
"${MONCTL[@]}" --wait-s 20 wait 1 down >/dev/null || fail "stopped osd.1 not marked down"
mv "$DIR/osd.1.pid" "$DIR/osd.1.old.pid"  # as if its host had been given up on
bash "$TOOLS/cluster.sh" start-osd --cluster-dir "$DIR" --id 1 || fail "start-osd 1"
"${MONCTL[@]}" --wait-s 20 wait 1 up >/dev/null || fail "the new osd.1 not up"
kill -CONT "$OLD_OSD_PID"
running() {  # an exited process counts as gone even before something reaps it
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $st != Z* ]]
}
for _ in $(seq 1 100); do
  running "$OLD_OSD_PID" || break
  sleep 0.1
done
running "$OLD_OSD_PID" && fail "the old osd.1 process still runs 10 s after SIGCONT"
OLD_OSD_PID=
grep -q "osd.1 (instance [0-9a-f]*) is fenced and must stop serving" "$DIR/log/osd.1.log" ||
  fail "the old osd.1 did not say it is fenced"
grep -q "osd.1 stopped: fenced" "$DIR/log/osd.1.log" || fail "the old osd.1 did not say why it stopped"
# The new process keeps the id (past the monitor's 3 s grace) and serves writes.
sleep 4
"${MONCTL[@]}" --wait-s 1 wait 1 up >/dev/null || fail "osd.1 went down after the old process left"
"$TOOLS/bench.sh" --cluster-dir "$DIR" --ms-type "$MS_TYPE" -b 4K -t 4 --seconds 2 \
  --prefix after-fence --verify >"$DIR/bench2.out" 2>&1 || { cat "$DIR/bench2.out"; fail "bench after the fence"; }
echo "PASS: blocklist ($MS_TYPE): $CLIENT fenced while stopped; $acked_after acknowledged objects read back, nothing landed after the fence"
