#!/usr/bin/env bash
# The cluster across test hosts (tools/hosts.sh: network namespaces on one bridge), over tcp:
# the monitor on host 0, three OSDs on hosts 1-3, every client on host 4. Each case is one
# result; the last line is "hosts: N passed, N failed, N skipped".
#   1. the map says where each OSD is (its host's address, its host name);
#   2. a verified bench from the client host;
#   3. kill -9 of an OSD mid-run, restarted: every acknowledged write reads back;
#   4. garbage on every port (monitor, each OSD): the cluster keeps serving;
#   5. a link fault: one OSD host's link down for 5 s mid-run, then up: the bench finishes
#      with no error and every acknowledged write reads back;
#   6. a client-to-OSD partition (the client's packets to one OSD dropped for 5 s);
#   7. netem delay (1 ms) on every host's link: a verified bench under a real round trip
#      passes with no error, its p50 and even its fastest write take at least 2 ms (each
#      write crosses the delay both ways), that write >= 1 ms longer than without the delay
#      (the same bench runs first without it), and the netem qdiscs sent the packets
#      (skipped, with the reason, where the kernel has no sch_netem, like this machine's:
#      there it runs inside the Soft-RoCE VM, tests/rdma_vm/netem_hosts_test.sh, in the
#      rdma-vm step);
#   8. an rdma client on another host than its OSD (soft provider): a clear error at once;
#   9. the control plane from another host: without a certificate monctl is refused (the
#      monitor wants mutual TLS), with a client certificate `out` is refused (needs
#      client.admin), with the admin's it works;
#  10. `cluster.sh join` on another host, with only the files an operator copies there
#      (keyring, pki/ca.crt, pki/osd.K.*): the OSD comes up with that host's address;
#  11. replicas on different hosts: a pool of size 3 (every object on all three OSD hosts),
#      one OSD host's link down for 5 s mid-run: no op fails, every acknowledged write reads
#      back, scrub finds every copy equal, and the returning OSD was recovered from the
#      primaries' PG logs (perf dump peering.recoveries_from_log).
# Needs root. Not a Bazel test: the sandbox and the ASan rerun do not fit root network
# setup. Run by tools/test.sh (step hosts) or by hand: bash tests/tools/hosts_test.sh.
#   hosts_test.sh [--only CASE[,CASE...]]   run only these cases (the setup still runs):
#       map verified-bench kill9 garbage link-cut partition netem-1ms
#       replicated soft-rdma-across-hosts control-plane-roles join
# Uses bazel-bin (MSGR_BIN) and builds nothing (MSGR_REBUILD=0 is set for the tools).
# HOSTS_TEST_CLUSTER_ARGS: more tools/cluster.sh start flags, after this test's own
# (`--durability durable --grace-ms 3000`), e.g. `--durability memory --poller-spin-us 50`.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOOLS=$ROOT/tools
export MSGR_REBUILD=0
BIN=${MSGR_BIN:-$ROOT/bazel-bin}
export MSGR_BIN=$BIN
HOSTS=(bash "$TOOLS/hosts.sh")
CLIENT_HOST=4
SECONDS_PER_RUN=${HOSTS_TEST_SECONDS:-12}
PASS=0 FAIL=0 SKIP=0
CASES=(map verified-bench kill9 garbage link-cut partition netem-1ms replicated
       soft-rdma-across-hosts control-plane-roles join)
ONLY=""
# shellcheck source=tools/lib/flags.sh
source "$TOOLS/lib/flags.sh"
FLAGS_SCRIPT=hosts_test.sh
usage_text() { flags_header "$0"; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --only) flag_value ONLY ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done
if [[ -n $ONLY ]]; then
  for c in ${ONLY//,/ }; do
    [[ " ${CASES[*]} " == *" $c "* ]] || flags_error "--only: no case '$c' (cases: ${CASES[*]})"
  done
fi
# want CASE: true if CASE is to run.
want() { [[ -z $ONLY || ",$ONLY," == *",$1,"* ]]; }
DIR=$(mktemp -d /tmp/msgr-hosts-test.XXXXXX)

log() { echo "hosts_test: $*"; }
pass() { PASS=$((PASS + 1)); log "PASS $1"; }
fail_case() { FAIL=$((FAIL + 1)); log "FAIL $1${2:+: $2}"; }
skip() { SKIP=$((SKIP + 1)); log "SKIP $1: $2"; }

cleanup() {
  bash "$TOOLS/cluster.sh" stop --cluster-dir "$DIR" >/dev/null 2>&1 || true
  "${HOSTS[@]}" stop >/dev/null 2>&1 || true
  # The OSDs' data (~3 GB after the load cases) never outlives the run: every run used to
  # leave it in /tmp. A passed run leaves nothing; a failed one keeps its logs and lists.
  if [[ $FAIL -eq 0 ]]; then
    rm -rf "$DIR"
  else
    rm -rf "$DIR"/osd.*/ "$DIR"/join-h2/osd.*/
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() {
  [[ $FAIL -eq 0 ]] || echo "logs: $DIR/log (the OSDs' data is removed on exit)"
  echo "hosts: $PASS passed, $FAIL failed, $SKIP skipped"
  [[ $FAIL -eq 0 ]]
  exit $?
}

[[ $(id -u) -eq 0 ]] || { fail_case setup "needs root (network namespaces)"; finish; }
[[ -x "$BIN/osd_sim/osd" && -x "$BIN/client/bench/bench" ]] \
  || { fail_case setup "no binaries in $BIN (bazel build -c opt //osd_sim:osd //client/bench:bench ...)"; finish; }
"${HOSTS[@]}" stop >/dev/null 2>&1 || true  # left over from an interrupted run
"${HOSTS[@]}" start 5 || { fail_case setup "tools/hosts.sh start 5"; finish; }
# shellcheck disable=SC2086 # HOSTS_TEST_CLUSTER_ARGS: flags, split on blanks
bash "$TOOLS/cluster.sh" start --cluster-dir "$DIR" --hosts --durability durable --grace-ms 3000 \
  ${HOSTS_TEST_CLUSTER_ARGS:-} || { fail_case setup "cluster.sh start --hosts (logs: $DIR/log)"; finish; }
MON=$(cat "$DIR/mon.addr")
MONCTL=("$BIN/osd_sim/mon/monctl" --cluster-dir "$DIR")
on_client() { "${HOSTS[@]}" exec "$CLIENT_HOST" "$@"; }
BENCH=(bash "$TOOLS/bench.sh" --mon "$MON" --ms-type tcp --cluster-dir "$DIR" --quiet)

# verify_acked CASE LOG [BENCH FLAGS]: every object in LOG reads back (from the client host).
verify_acked() {
  local name=$1 oids=$2 n
  n=$(wc -l < "$oids")
  if [[ $n -lt 20 ]]; then fail_case "$name" "only $n writes acknowledged"; return 1; fi
  if ! on_client bash "$TOOLS/bench.sh" verify --mon "$MON" --ms-type tcp --cluster-dir "$DIR" \
      --oids "$oids" --json "$oids.verify.json" "${@:3}" >"$oids.verify.log" 2>&1; then
    fail_case "$name" "verify failed: $(tail -3 "$oids.verify.log" | tr '\n' ' ')"
    return 1
  fi
  python3 - "$oids.verify.json" "$n" <<'PY' || { fail_case "$name" "not every acknowledged object verified"; return 1; }
import json, sys
v = json.load(open(sys.argv[1]))["verify"]
assert v["checked"] == int(sys.argv[2]) and v["mismatches"] == 0, v
PY
  log "$name: $n acknowledged writes read back"
}
# bench_errors JSON: the run's failed ops.
bench_errors() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['errors'])" "$1"; }
# bench_during CASE FAULT_CMD UNDO_CMD: a bench from the client host; FAULT_CMD 3 s in, UNDO_CMD
# 5 s later; the bench must finish without errors and its acknowledged writes read back.
bench_during() {
  local name=$1 fault=$2 undo=$3 out="$DIR/$1"
  on_client "${BENCH[@]}" -b 16K -t 8 --seconds "$SECONDS_PER_RUN" --prefix "$name" \
    --acked-log "$out.acked" --json "$out.json" >"$out.log" 2>&1 &
  local pid=$!
  sleep 3
  eval "$fault"
  sleep 5
  eval "$undo"
  if ! wait "$pid"; then
    fail_case "$name" "bench failed: $(grep -v '^\s*[0-9]' "$out.log" | tail -3 | tr '\n' ' ')"
    return
  fi
  local errors
  errors=$(bench_errors "$out.json")
  [[ $errors == 0 ]] || { fail_case "$name" "$errors ops failed"; return; }
  verify_acked "$name" "$out.acked" && pass "$name"
}

# 1. The map: OSD i on host 1+i with that host's address and name.
case_map() {
  if python3 - <<PY
import json, subprocess
m = json.loads(subprocess.check_output(["${MONCTL[0]}", "--cluster-dir", "$DIR", "map-json"]))
osds = {o["id"]: o for o in m["osds"]}
assert sorted(osds) == [0, 1, 2], osds
for i, o in osds.items():
    assert o["up"] and o["host"] == f"msgr-h{1 + i}", o
    assert o["addr"].startswith(f"198.18.0.{2 + i}:"), o
    assert o["cluster_addr"] == o["addr"], o
PY
  then pass map; else fail_case map "OSDs not where cluster.sh put them: $("${MONCTL[@]}" status)"; fi
}

# 2. A verified bench from the client host.
case_verified_bench() {
  if on_client "${BENCH[@]}" -b 4K -t 16 --seconds 4 --prefix verified --verify --json "$DIR/verified.json" \
      >"$DIR/verified.log" 2>&1 && [[ $(bench_errors "$DIR/verified.json") == 0 ]]; then
    pass verified-bench
    grep -E '^(IOPS|Average IOPS|Latency p50)' "$DIR/verified.log" | head -2 | sed 's/^/hosts_test:   /'
  else
    fail_case verified-bench "$(tail -3 "$DIR/verified.log" | tr '\n' ' ')"
  fi
}

# 3. kill -9 of osd.1 mid-run, restarted.
case_kill9() {
  bench_during kill9 \
    'bash "$TOOLS/cluster.sh" stop-osd --cluster-dir "$DIR" --id 1 --kill' \
    'bash "$TOOLS/cluster.sh" start-osd --cluster-dir "$DIR" --id 1 >/dev/null'
}

# 4. Garbage on every port, from the client host; then the cluster still serves.
case_garbage() {
  local ports=("$MON") a alive=1 pidf
  while read -r a; do ports+=("$a"); done < <("${MONCTL[@]}" map-json | python3 -c \
    "import json,sys; [print(o['addr']) for o in json.load(sys.stdin)['osds']]")
  for a in "${ports[@]}"; do
    on_client bash -c "head -c 200000 /dev/urandom > /dev/tcp/${a%:*}/${a##*:}" 2>/dev/null || true
  done
  for pidf in "$DIR"/mon.pid "$DIR"/osd.*.pid; do kill -0 "$(cat "$pidf")" 2>/dev/null || alive=0; done
  if [[ $alive == 1 ]] && on_client "${BENCH[@]}" -b 4K -t 4 --count 300 --prefix after-garbage --verify \
      >"$DIR/garbage.log" 2>&1; then
    pass "garbage-on-${#ports[@]}-ports"
  else
    fail_case garbage "a daemon died or writes failed after garbage: $(tail -2 "$DIR/garbage.log" | tr '\n' ' ')"
  fi
}

# 5. osd.2's host loses its link for 5 s.
case_link_cut() {
  bench_during link-cut '"${HOSTS[@]}" link 3 down' '"${HOSTS[@]}" link 3 up'
  "${MONCTL[@]}" --wait-s 30 wait 2 up >/dev/null 2>&1 || true
}

# 6. The client's packets to osd.0 are dropped for 5 s.
OSD0_HOST=$("${HOSTS[@]}" addr 1)
case_partition() {
  bench_during partition '"${HOSTS[@]}" block $CLIENT_HOST $OSD0_HOST' '"${HOSTS[@]}" unblock $CLIENT_HOST $OSD0_HOST'
}

# 7. 1 ms of netem delay on every host's link. The same short bench runs first without the
# delay (for comparison), then with it: it must pass its verification with no failed op,
# its p50 and even its fastest write must take at least 2 ms (a write and its reply each
# leave through one delayed link), that fastest write at least 1 ms longer than without
# the delay, and the netem qdiscs of the client and the OSD hosts must have sent packets. HOSTS_TEST_NETEM_THREADS, HOSTS_TEST_NETEM_SECONDS: the bench's
# -t (1: each write sees the bare round trip) and --seconds (4).
NETEM_ARGS=(-b 4K -t "${HOSTS_TEST_NETEM_THREADS:-1}" --seconds "${HOSTS_TEST_NETEM_SECONDS:-4}")
netem_del() { local k; for k in 0 1 2 3 4; do ip netns exec "msgr-h$k" tc qdisc del dev eth0 root 2>/dev/null; done; }
case_netem_1ms() {
  local k rc=0 figures
  if ! ip netns exec msgr-h0 tc qdisc add dev eth0 root netem delay 1ms 2>"$DIR/netem.err"; then
    skip netem-1ms "this kernel has no sch_netem ($(head -1 "$DIR/netem.err"); modprobe sch_netem: $(modprobe sch_netem 2>&1 | head -1))"
    return
  fi
  netem_del
  if ! on_client "${BENCH[@]}" "${NETEM_ARGS[@]}" --prefix netem-base --json "$DIR/netem-base.json" \
      >"$DIR/netem-base.log" 2>&1; then
    fail_case netem-1ms "the bench without delay failed: $(tail -3 "$DIR/netem-base.log" | tr '\n' ' ')"
    return
  fi
  for k in 0 1 2 3 4; do
    ip netns exec "msgr-h$k" tc qdisc add dev eth0 root netem delay 1ms 2>>"$DIR/netem.err" || rc=1
  done
  if [[ $rc != 0 ]]; then
    netem_del
    fail_case netem-1ms "tc qdisc add netem failed on a host: $(tail -1 "$DIR/netem.err")"
    return
  fi
  on_client "${BENCH[@]}" "${NETEM_ARGS[@]}" --prefix netem --verify --json "$DIR/netem.json" \
    >"$DIR/netem.log" 2>&1 || rc=$?
  for k in 0 1 2 3 4; do ip netns exec "msgr-h$k" tc -s qdisc show dev eth0 >"$DIR/netem.qdisc.h$k" 2>&1; done
  netem_del
  if [[ $rc != 0 ]]; then
    fail_case netem-1ms "the bench under delay failed (status $rc): $(tail -3 "$DIR/netem.log" | tr '\n' ' ')"
    return
  fi
  if figures=$(python3 - "$CLIENT_HOST" "$DIR/netem.json" "$DIR/netem-base.json" "$DIR"/netem.qdisc.* 2>&1 <<'PY'
import json, re, sys
client = "h" + sys.argv[1]
d, b = (json.load(open(f)) for f in sys.argv[2:4])
def pkts(f):  # packets the host's netem qdisc sent
    m = re.search(r"qdisc netem .*?Sent \d+ bytes (\d+) pkt", open(f).read(), re.S)
    return int(m.group(1)) if m else 0
sent = {f.rsplit(".", 1)[1]: pkts(f) for f in sys.argv[4:]}
low = lambda j: j["lat_cdf"][0][0]  # the fastest write (its histogram bucket's upper bound)
print(f"p50 {d['lat_us']['p50']:.0f} us with 1 ms netem, {b['lat_us']['p50']:.0f} us without; "
      f"fastest write {low(d):.0f} vs {low(b):.0f} us; {d['iops']} vs {b['iops']} IOPS; "
      f"{d['ops']} ops, {d['errors']} failed, {d['verify']['mismatches']} mismatches in "
      f"{d['verify']['checked']} read back; packets through netem: "
      + ", ".join(f"{h} {n}" for h, n in sorted(sent.items())))
bad = []
if d["errors"] != 0: bad.append("failed ops under delay")
if not (d["verify"]["checked"] == d["ops"] > 0 and d["verify"]["mismatches"] == 0):
    bad.append("not every write read back intact")
if d["lat_us"]["p50"] < 2000: bad.append("p50 below 2 ms: the delay did not apply")
if low(d) < 2000: bad.append("a write faster than 2 ms: the delay did not apply to it")
# Where the machine is slow enough that writes take 2 ms without any delay (emulation, a
# debug build), the bounds above prove little: the fastest write must also be >= 1 ms (half
# the added round trip) slower than without the delay.
if low(d) - low(b) < 1000: bad.append("the fastest write not even 1 ms slower than without the delay")
if sent.get(client, 0) == 0: bad.append(f"no packet through the client's ({client}) netem qdisc")
if sum(n for h, n in sent.items() if h not in (client, "h0")) == 0:
    bad.append("no packet through the OSD hosts' netem qdiscs")
if bad:
    print("; ".join(bad))
    sys.exit(1)
PY
  ); then
    pass netem-1ms
    log "  $figures"
  else
    fail_case netem-1ms "$(tr '\n' ' ' <<<"$figures")"
  fi
}

# 11. Pool rep3 (size 3, min_size 2): each object on the three OSD hosts. osd.2's host loses
# its link for 5 s mid-run (the monitor marks it down; writes go on with two copies); once
# it is back and every PG active, the acknowledged writes read back, scrub finds the copies
# equal, and the primaries recovered osd.2 from their PG logs.
# pg_log_recoveries: peering.recoveries_from_log summed over the OSDs' perf dumps.
pg_log_recoveries() {
  local asok n=0 v
  for asok in "$DIR"/run/osd.*.asok; do
    v=$("$BIN/osd_sim/tools/msgr_admin" "$asok" perf dump 2>/dev/null | python3 -c \
      "import json,sys; print(json.load(sys.stdin)['peering']['recoveries_from_log'])" 2>/dev/null)
    n=$((n + ${v:-0}))
  done
  echo "$n"
}
case_replicated() {
  local out=$DIR/replicated pid errors before after i scrubbed=0
  local MSGR=("$BIN/client/cli/msgr" --cluster-dir "$DIR" --pool rep3)
  if ! "${MONCTL[@]}" pool create rep3 --size 3 --min-size 2 --pg-num 16 >"$out.pool.log" 2>&1; then
    fail_case replicated "monctl pool create: $(tail -1 "$out.pool.log")"
    return
  fi
  before=$(pg_log_recoveries)
  on_client "${BENCH[@]}" --pool rep3 -b 16K -t 8 --seconds "$SECONDS_PER_RUN" --prefix replicated \
    --acked-log "$out.acked" --json "$out.json" >"$out.log" 2>&1 &
  pid=$!
  sleep 3
  "${HOSTS[@]}" link 3 down
  sleep 5
  "${HOSTS[@]}" link 3 up
  if ! wait "$pid"; then
    fail_case replicated "bench failed: $(grep -v '^\s*[0-9]' "$out.log" | tail -3 | tr '\n' ' ')"
    return
  fi
  errors=$(bench_errors "$out.json")
  [[ $errors == 0 ]] || { fail_case replicated "$errors ops failed"; return; }
  "${MONCTL[@]}" --wait-s 30 wait 2 up >/dev/null 2>&1
  verify_acked replicated "$out.acked" --pool rep3 || return
  # Scrub compares the copies on the up OSDs: retried while the PGs still sync (30 s).
  for i in $(seq 30); do
    if on_client "${MSGR[@]}" scrub >"$out.scrub" 2>&1; then scrubbed=1; break; fi
    sleep 1
  done
  after=$(pg_log_recoveries)
  if [[ $scrubbed != 1 ]]; then
    fail_case replicated "scrub: $(tail -3 "$out.scrub" | tr '\n' ' ')"
  elif [[ $after -le $before ]]; then
    fail_case replicated "no PG was recovered from a PG log ($before before, $after after)"
  else
    pass replicated
    log "  $(tail -1 "$out.scrub"); $((after - before)) syncs from PG logs"
  fi
}

# 8. An rdma OSD on host 1 and a soft-provider client on the client host: refused at once.
case_soft_rdma_across_hosts() {
  local osd9 start rc took i
  mkdir -p "$DIR/osd.9"
  bash "$TOOLS/lib/pki.sh" issue "$DIR" osd.9
  "${HOSTS[@]}" exec 1 "$BIN/osd_sim/osd" --id 9 --mon "$MON" --ms-type rdma --durability memory \
    --cluster-dir "$DIR" --public-addr "$OSD0_HOST" --host msgr-h1 --weight 0.001 \
    >"$DIR/log/osd.9.log" 2>&1 &
  osd9=$!
  "${MONCTL[@]}" --wait-s 20 wait 9 up >/dev/null 2>&1
  for i in 0 1 2; do "${MONCTL[@]}" out "$i" >/dev/null; done
  start=$SECONDS
  on_client bash "$TOOLS/bench.sh" --mon "$MON" --ms-type rdma --rdma-device soft \
    --cluster-dir "$DIR" -b 4K -t 1 --count 5 --prefix soft-remote >"$DIR/soft.log" 2>&1
  rc=$?
  took=$((SECONDS - start))
  for i in 0 1 2; do "${MONCTL[@]}" in "$i" >/dev/null; done
  kill "$osd9" 2>/dev/null; wait "$osd9" 2>/dev/null
  if [[ $rc -ne 0 && $took -lt 20 ]] && grep -q "soft provider works only between processes of one host" "$DIR/soft.log"; then
    pass soft-rdma-across-hosts-refused
  else
    fail_case soft-rdma-across-hosts "rc $rc after ${took}s: $(tail -3 "$DIR/soft.log" | tr '\n' ' ')"
  fi
}

# 9. The control plane from the client host.
case_control_plane_roles() {
  local out_none rc_none out_bench rc_bench out_admin rc_admin
  out_none=$(on_client "${MONCTL[0]}" --mon "$MON" --auth none out 2 2>&1); rc_none=$?
  out_bench=$(on_client "${MONCTL[@]}" --entity client.bench out 2 2>&1); rc_bench=$?
  out_admin=$(on_client "${MONCTL[@]}" out 2 2>&1); rc_admin=$?
  on_client "${MONCTL[@]}" in 2 >/dev/null 2>&1
  if [[ $rc_none == 1 && $out_none == *"requires mutual TLS"* && $rc_bench == 1 &&
        $out_bench == *"needs client.admin"* && $rc_admin == 0 ]]; then
    pass control-plane-roles
  else
    fail_case control-plane-roles "no cert: rc $rc_none '$out_none'; client.bench: rc $rc_bench '$out_bench'; admin: rc $rc_admin '$out_admin'"
  fi
}

# 10. osd.5 joins from host 2 with a directory holding only the copied files.
case_join() {
  local JOIN=$DIR/join-h2 rc joined
  mkdir -p "$JOIN/pki"
  bash "$TOOLS/lib/pki.sh" issue "$DIR" osd.5
  cp "$DIR/keyring" "$JOIN/" && cp "$DIR/pki/ca.crt" "$DIR/pki/osd.5.crt" "$DIR/pki/osd.5.key" "$JOIN/pki/"
  "${HOSTS[@]}" exec 2 bash "$TOOLS/cluster.sh" join --cluster-dir "$JOIN" --mon "$MON" --id 5 \
    --public-network 198.18.0.0/24 --host msgr-h2 --durability memory >"$DIR/join.log" 2>&1
  rc=$?
  joined=$("${MONCTL[@]}" map-json | python3 -c "import json,sys
o=[o for o in json.load(sys.stdin)['osds'] if o['id']==5]
print(o[0]['host'], o[0]['addr'].rsplit(':',1)[0], o[0]['up']) if o else print('absent')")
  bash "$TOOLS/cluster.sh" stop-osd --cluster-dir "$JOIN" --id 5 >/dev/null 2>&1
  if [[ $rc == 0 && $joined == "msgr-h2 198.18.0.3 True" ]]; then
    pass join-from-another-host
  else
    fail_case join "rc $rc, map says '$joined': $(tail -3 "$DIR/join.log" | tr '\n' ' ')"
  fi
}

want map && case_map
want verified-bench && case_verified_bench
want kill9 && case_kill9
want garbage && case_garbage
want link-cut && case_link_cut
want partition && case_partition
want netem-1ms && case_netem_1ms
want replicated && case_replicated
want soft-rdma-across-hosts && case_soft_rdma_across_hosts
want control-plane-roles && case_control_plane_roles
want join && case_join

finish
