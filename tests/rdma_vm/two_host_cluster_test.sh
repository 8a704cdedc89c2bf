#!/usr/bin/env bash
# The cluster across two machines on real verbs: run at once in both guests of
# tools/rxe_vms.sh (tools/rxe_vm_suite.sh does, from tests/rdma_vm/TWO_HOSTS).
#   guest a (198.18.1.1): the monitor and 2 OSDs, --ms-type rdma --rdma-device rxe0
#                         --public-addr 198.18.1.1, auth secret (messenger key + monitor mTLS);
#   guest b (198.18.1.2): the client, over its own rxe0:
#     1. a verified bench (--verify): 0 errors, 0 mismatches;
#     2. a bench across a kill -9 of osd.1 (done by a when b asks) and its restart: 0
#        errors, and every acknowledged write read back;
#     then rxe's counters (retransmits, timeouts) of both devices go to the log.
#   two_host_cluster_test.sh [--seconds N] [--ms-type rdma|tcp]   (the kill run's length;
#                             tcp runs the same cases over the same link, for comparison)
#   two_host_cluster_test.sh --perf [--seconds N]
#     figures (in TWO_HOSTS with a short N, so every CI run reports them): ib_write_lat /
#     ib_write_bw -s 4096 between the two rxe0s (perftest; skipped if it is not
#     installed), then one cluster with --ms-type both: the bench's 4 KiB -t 1 latency and
#     -t 16 IOPS over rdma and over tcp, N seconds each (default 20; each bench is a new
#     client process, so its connection setup, seconds under emulation for rdma, is inside
#     them); b ends with one line "FIGURES: ..." comparing msgr over rdma with perftest
#     (issue 17's ratios; tools/rxe_vm_suite.sh prints it). Fails if a bench fails or
#     reports errors; the figures themselves decide nothing.
# The halves talk through files in MSGR_VM_SYNC (a 9p directory both guests see, set by
# tools/rxe_vm/suite_guest.sh): the cluster directory there holds only what both need
# (keyring, pki/, mon.addr); data, pid files and admin sockets stay in a's /tmp.
# Every wait is bounded; every daemon a starts is stopped by pid. Exit 0 = this half passed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${MSGR_BIN:-$ROOT/bazel-bin}
ROLE=${MSGR_VM_ROLE:?run by tools/rxe_vms.sh (MSGR_VM_ROLE a|b)}
SYNC=${MSGR_VM_SYNC:?MSGR_VM_SYNC: a directory both guests see}
SELF=${MSGR_VM_ADDR:?} PEER=${MSGR_VM_PEER_ADDR:?}
DEV=${MSGR_RDMA_DEVICE:-rxe0}
KILL_SECONDS=30 MS_TYPE=rdma PERF=0
# shellcheck source=tools/lib/flags.sh
source "$ROOT/tools/lib/flags.sh"
FLAGS_SCRIPT=two_host_cluster_test.sh
usage_text() { flags_header "$0"; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --seconds) flag_value KILL_SECONDS ;;
    --ms-type) flag_value MS_TYPE ;;
    --perf) PERF=1 ;;
    *) flag_unknown ;;
  esac
done
if [[ $PERF == 1 ]]; then
  MS_TYPE=both
  [[ $KILL_SECONDS == 30 ]] && KILL_SECONDS=20
fi
SHARED=$SYNC/cluster.$MS_TYPE  # keyring, pki/, mon.addr
FAILS=0

log() { echo "two_host($ROLE): $*"; }
fail() { log "FAIL $*"; FAILS=$((FAILS + 1)); }
# await FILE SECONDS: waits for FILE (written by the other guest).
await() {
  local deadline=$((SECONDS + $2))
  until [[ -e "$1" ]]; do
    [[ $SECONDS -lt $deadline ]] || return 1
    sleep 0.3
  done
}
rxe_counters() {
  local f out=""
  for f in /sys/class/infiniband/"$DEV"/ports/1/hw_counters/*; do
    out+=" ${f##*/}=$(cat "$f")"
  done
  log "rxe counters of $DEV:$out"
}

# ---------------------------------------------------------------------------- guest a
LOCAL=/tmp/msgr-two-host.$MS_TYPE
PIDS=()
osd_args() {
  echo --id "$1" --mon "$(cat "$SHARED/mon.addr")" --data-dir "$LOCAL/osd.$1" --run-dir "$LOCAL/run" \
    --ms-type "$MS_TYPE" --rdma-device "$DEV" --durability durable --cluster-dir "$SHARED" \
    --public-addr "$SELF" --host "$(hostname)" --poller-spin-us 50
}
start_osd() {
  # shellcheck disable=SC2046 # osd_args words are flags and plain values
  "$BIN/osd_sim/osd" $(osd_args "$1") >>"$LOCAL/osd.$1.log" 2>&1 </dev/null &
  echo $! >"$LOCAL/osd.$1.pid"
}
osd_up() {
  "$BIN/osd_sim/mon/monctl" --cluster-dir "$SHARED" --wait-s "$2" wait "$1" up >/dev/null 2>&1
}
stop_all() {
  local f pid
  for f in "$LOCAL"/osd.*.pid "$LOCAL"/mon.pid; do
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null && { timeout 20 tail --pid="$pid" -f /dev/null || kill -KILL "$pid" 2>/dev/null; }
    rm -f "$f"
  done
}

# perftest_a / perftest_b: ib_write_lat then ib_write_bw, 4 KiB, a serving, b driving; both
# on the GID index the provider picks (1: the IPv4 one; perftest's default 0 is link-local).
PERFTEST_GID=1
perftest_a() {
  local t
  for t in ib_write_lat ib_write_bw; do
    command -v "$t" >/dev/null || { touch "$SYNC/$t.skip"; continue; }
    timeout 300 "$t" -d "$DEV" -x "$PERFTEST_GID" -s 4096 -n "$( [[ $t == ib_write_lat ]] && echo 1000 || echo 5000)" -F \
      >"$SYNC/$t.a.log" 2>&1 &
    local pid=$!
    sleep 1
    touch "$SYNC/$t.listening"
    wait "$pid" || log "$t (server) exit $?"
  done
}
perftest_b() {
  local t
  for t in ib_write_lat ib_write_bw; do
    await "$SYNC/$t.listening" 120 || { [[ -e $SYNC/$t.skip ]] && log "$t: not installed (apt-get install perftest)"; continue; }
    sleep 2
    if timeout 300 "$t" -d "$DEV" -x "$PERFTEST_GID" -s 4096 -n "$( [[ $t == ib_write_lat ]] && echo 1000 || echo 5000)" -F "$PEER" \
        >"$SYNC/$t.b.log" 2>&1; then
      log "$t -s 4096: $(grep -E '^ *4096 ' "$SYNC/$t.b.log" | tr -s ' ')"
    else
      log "$t failed: $(tail -n 3 "$SYNC/$t.b.log" | tr '\n' ' ')"
    fi
  done
}

run_a() {
  [[ $PERF == 1 ]] && perftest_a
  # shellcheck source=tools/lib/pki.sh
  source "$ROOT/tools/lib/pki.sh"
  rm -rf "$SHARED" "$LOCAL"
  mkdir -p "$SHARED" "$LOCAL/run" "$LOCAL/mon"
  trap stop_all EXIT
  (umask 077; echo "key = $(head -c 32 /dev/urandom | base64)" >"$SHARED/keyring")
  { pki_init "$SHARED" && pki_issue "$SHARED" mon && pki_issue "$SHARED" client.admin &&
    pki_issue "$SHARED" client.bench && pki_issue "$SHARED" osd.0 && pki_issue "$SHARED" osd.1; } \
    >"$LOCAL/pki.log" 2>&1 || { fail "cannot make the cluster PKI: $(tail -2 "$LOCAL/pki.log")"; touch "$SYNC/a.failed"; return; }
  "$BIN/osd_sim/mon/mon" --data-dir "$LOCAL/mon" --addr "$SELF:0" --addr-file "$SHARED/mon.addr" \
    --grace-ms 3000 --auth secret --cluster-dir "$SHARED" >"$LOCAL/mon.log" 2>&1 </dev/null &
  echo $! >"$LOCAL/mon.pid"
  await "$SHARED/mon.addr" 60 || { fail "no monitor after 60 s: $(tail -3 "$LOCAL/mon.log")"; touch "$SYNC/a.failed"; return; }
  start_osd 0
  start_osd 1
  if ! osd_up 0 120 || ! osd_up 1 120; then
    fail "OSDs not up within 120 s: $(tail -n 3 "$LOCAL"/osd.*.log | tr '\n' ' ')"
    touch "$SYNC/a.failed"
    return
  fi
  log "monitor $(cat "$SHARED/mon.addr") and 2 OSDs up ($MS_TYPE on $DEV, $SELF)"
  touch "$SYNC/cluster.ready"
  if [[ $PERF == 1 ]]; then
    await "$SYNC/b.done" 900 || fail "b did not finish"
    rxe_counters
    return
  fi
  # Serve b: kill -9 osd.1 when asked, restart it, say so; until b is done.
  if await "$SYNC/kill.please" $((KILL_SECONDS + 300)); then
    kill -KILL "$(cat "$LOCAL/osd.1.pid")"
    log "osd.1 killed (-9)"
    sleep 1
    start_osd 1
    if osd_up 1 120; then log "osd.1 restarted and up"; else fail "osd.1 not up again within 120 s"; fi
    touch "$SYNC/kill.done"
  fi
  await "$SYNC/b.done" $((KILL_SECONDS + 400)) || fail "b did not finish"
  local f
  for f in "$LOCAL"/osd.*.pid "$LOCAL/mon.pid"; do
    kill -0 "$(cat "$f")" 2>/dev/null || fail "${f##*/} is not running at the end"
  done
  [[ $MS_TYPE == rdma ]] && rxe_counters
  if [[ $FAILS -gt 0 ]]; then tail -n 5 "$LOCAL"/*.log; fi
}

# ---------------------------------------------------------------------------- guest b
BENCH=()
bench_errors() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['errors'])" "$1"; }

# perf_b OUT: the bench's figures over each messenger type, after a warm-up that pays for
# the connections' setup (ring registration is slow under emulation).
perf_b() {
  local out=$1 ms t j
  for ms in rdma tcp; do
    local b=("$BIN/client/bench/bench" --cluster-dir "$SHARED" --ms-type "$ms" --rdma-device "$DEV" --quiet)
    # The warm-up: right after the OSDs are up, the first writes of a fresh cluster took
    # ~3 s each in some runs (both messengers' code, 2026-12-05): not what -t 1 measures.
    timeout 120 "${b[@]}" -b 4K -t 4 --seconds 2 --prefix "warm-$ms" >"$out/warm-$ms.log" 2>&1 ||
      log "warm-up over $ms failed: $(tail -n 2 "$out/warm-$ms.log" | tr '\n' ' ')"
    for t in 1 16; do
      timeout 300 "${b[@]}" -b 4K -t "$t" --seconds "$KILL_SECONDS" --prefix "perf-$ms-$t" \
        --json "$out/perf-$ms-$t.json" >"$out/perf-$ms-$t.log" 2>&1 || { fail "bench $ms -t $t: $(tail -n 2 "$out/perf-$ms-$t.log" | tr '\n' ' ')"; continue; }
      j=$out/perf-$ms-$t.json
      log "msgr $ms 4K -t $t: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(round(j["iops"]), "IOPS, p50", round(j["lat_us"]["p50"]), "us, p99", round(j["lat_us"]["p99"]), "us,", j["errors"], "errors")' "$j")"
    done
  done
}

# figures_b OUT: the line that compares msgr over rdma with perftest on the same link.
figures_b() {
  python3 - "$1" "$SYNC/ib_write_lat.b.log" "$SYNC/ib_write_bw.b.log" <<'PY'
import json, os, sys
out, lat_log, bw_log = sys.argv[1:4]
def row(path):  # perftest's result row for 4096-byte messages, or None
    if not os.path.exists(path):
        return None
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and f[0] == "4096":
            return f
    return None
def bench(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
lat, bw = row(lat_log), row(bw_log)
t1, t16 = bench("perf-rdma-1.json"), bench("perf-rdma-16.json")
parts = []
if t1 and lat:
    typical = float(lat[4])  # t_typical [usec]
    parts.append("rdma 4K -t 1 p50 %.0f us = %.1fx ib_write_lat's typical %.0f us"
                 % (t1["lat_us"]["p50"], t1["lat_us"]["p50"] / typical, typical))
if t16 and bw:
    rate = float(bw[4]) * 1e6  # MsgRate [Mpps]
    parts.append("rdma 4K -t 16 %.0f IOPS = %.1f%% of ib_write_bw's %.0f writes/s"
                 % (t16["iops"], 100.0 * t16["iops"] / rate, rate))
print("FIGURES: " + ("; ".join(parts) if parts else "none (perftest or a bench gave no result)"))
PY
}

run_b() {
  [[ $PERF == 1 ]] && perftest_b
  local out=/tmp/msgr-two-host-b.$MS_TYPE
  rm -rf "$out"
  mkdir -p "$out"
  trap 'touch "$SYNC/b.done"' EXIT
  if ! await "$SYNC/cluster.ready" 300 || [[ -e $SYNC/a.failed ]]; then
    fail "the cluster on a never came up"
    return
  fi
  BENCH=("$BIN/client/bench/bench" --cluster-dir "$SHARED" --ms-type "$MS_TYPE" --rdma-device "$DEV" --quiet)
  if [[ $PERF == 1 ]]; then
    perf_b "$out"
    log "$(figures_b "$out")"
    return
  fi

  # 1. Verified bench.
  if timeout 300 "${BENCH[@]}" -b 4K -t 16 --seconds 5 --prefix verified --verify \
      --json "$out/verified.json" >"$out/verified.log" 2>&1 && [[ $(bench_errors "$out/verified.json") == 0 ]]; then
    log "PASS verified-bench: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["ops"], "ops,", round(j["iops"]), "IOPS, p50", j["lat_us"]["p50"], "us, verify", j["verify"])' "$out/verified.json")"
  else
    fail "verified-bench: $(tail -n 3 "$out/verified.log" | tr '\n' ' ')"
  fi

  # 2. kill -9 of osd.1 a third of the way in; restarted by a.
  timeout $((KILL_SECONDS + 300)) "${BENCH[@]}" -b 16K -t 8 --seconds "$KILL_SECONDS" --prefix kill \
    --acked-log "$out/acked" --json "$out/kill.json" >"$out/kill.log" 2>&1 &
  local bench=$! rc=0
  sleep $((KILL_SECONDS / 3))
  touch "$SYNC/kill.please"
  await "$SYNC/kill.done" 200 || fail "a did not report osd.1's restart"
  wait "$bench" || rc=$?
  local n
  n=$(wc -l <"$out/acked" 2>/dev/null || echo 0)
  if [[ $rc -ne 0 ]]; then
    fail "kill9: bench exit $rc: $(grep -v '^\s*[0-9]' "$out/kill.log" | tail -n 3 | tr '\n' ' ')"
  elif [[ $(bench_errors "$out/kill.json") != 0 ]]; then
    fail "kill9: $(bench_errors "$out/kill.json") ops failed"
  elif [[ $n -lt 20 ]]; then
    fail "kill9: only $n writes acknowledged"
  elif ! timeout 300 "$BIN/client/bench/bench" verify --cluster-dir "$SHARED" --ms-type "$MS_TYPE" \
      --rdma-device "$DEV" --oids "$out/acked" --json "$out/verify.json" >"$out/verify.log" 2>&1; then
    fail "kill9: verify failed: $(tail -n 3 "$out/verify.log" | tr '\n' ' ')"
  elif ! python3 - "$out/verify.json" "$n" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["verify"]
assert v["checked"] == int(sys.argv[2]) and v["mismatches"] == 0, v
PY
  then
    fail "kill9: not every acknowledged write read back"
  else
    log "PASS kill9: $n acknowledged writes across osd.1's kill -9 and restart, all read back"
  fi
  [[ $MS_TYPE == rdma ]] && rxe_counters
}

if [[ $ROLE == a ]]; then run_a; else run_b; fi
[[ $FAILS -eq 0 ]]
