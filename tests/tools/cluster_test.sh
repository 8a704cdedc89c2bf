#!/usr/bin/env bash
# End-to-end test of a real multi-process cluster (tools/cluster.sh + tools/bench.sh):
#   * start a monitor and 3 OSDs, all up in the map;
#   * write objects with the bench while one OSD is killed with SIGKILL and restarted:
#     every write completes, and every acknowledged object reads back byte-identical;
#   * garbage sent to an OSD's port does not take it down;
#   * `perf dump` on the admin socket reports the writes;
#   * the bench's per-op, per-role and copy figures: n/a across the OSD restart, and
#     plausible on a quiet run (roles add up to the OSDs' CPU, wire copies per backend);
#   * `stop` leaves no process behind, and neither does a start whose OSDs exit (it names
#     the OSD and its error);
#   * DIR/msgr.conf reaches the daemons: an [osd.2] section added there holds for osd.2
#     once restarted (its perf dump), not for the others;
#   * the tools' flags: --flag=VALUE and --flag VALUE alike, --dir as the old spelling of
#     --cluster-dir, bench's --auth secret|none, --keyring FILE and the old --auth FILE;
#     an unknown flag exits 2 naming it.
#
#   cluster_test.sh [--ms-type tcp|rdma] [--rdma-device soft|IBDEV] [--seconds N]
#                   [--poller-spin-us US]   (passed to the OSDs)
# (or env MS_TYPE / RDMA_DEVICE / BENCH_SECONDS). Under `bazel test` the binaries come from
# the runfiles; run by hand (or in the Soft-RoCE VM) it uses bazel-bin and tools/.
set -euo pipefail
# shellcheck source=tests/tools/test_paths.sh
source "$(dirname "$0")/test_paths.sh"
MS_TYPE=${MS_TYPE:-tcp} RDMA_DEVICE=${RDMA_DEVICE:-soft} BENCH_SECONDS=${BENCH_SECONDS:-8}
SPIN_ARGS=()
# shellcheck source=tools/lib/flags.sh
source "$TOOLS/lib/flags.sh"
FLAGS_SCRIPT=cluster_test.sh
usage_text() { flags_header "$0"; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --ms-type) flag_value MS_TYPE ;;
    --rdma-device) flag_value RDMA_DEVICE ;;
    --seconds) flag_value BENCH_SECONDS ;;
    --poller-spin-us) flag_value spin; SPIN_ARGS=(--poller-spin-us="$spin") ;;
    *) flag_unknown ;;
  esac
done
export MSGR_BIN=$RUNFILES MSGR_REBUILD=0
# Unix socket paths must stay short: the cluster lives under /tmp, not TEST_TMPDIR.
DIR=$(mktemp -d /tmp/msgr-cluster-test.XXXXXX)
fail() { echo "FAIL: $*" >&2; tail -n 20 "$DIR"/log/*.log >&2 || true; exit 1; }
cleanup() { bash "$TOOLS/cluster.sh" stop --cluster-dir "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT

# usage_error RC_WANT WORD CMD...: CMD exits RC_WANT (2) at once with WORD in its error and
# its usage.
usage_error() {
  local want=$1 word=$2 rc=0 err
  shift 2
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  [[ $rc == "$want" ]] || fail "'$*' exited $rc, not $want: $err"
  grep -qF -- "$word" <<<"$err" || fail "'$*' did not name $word: $err"
  grep -qi "usage\|--cluster-dir" <<<"$err" || fail "'$*' printed no usage: $err"
}
usage_error 2 "unknown flag '--no-such-flag'" \
  bash "$TOOLS/cluster.sh" start --cluster-dir "$DIR" --no-such-flag 1
usage_error 2 "unknown flag '--no-such-flag'" bash "$TOOLS/cluster.sh" status --no-such-flag=1
usage_error 2 "--osds needs a value" bash "$TOOLS/cluster.sh" start --cluster-dir "$DIR" --osds
usage_error 2 "--kill takes no value" bash "$TOOLS/cluster.sh" stop-osd --dir "$DIR" --id 0 --kill=1
usage_error 2 "unknown argument '--no-such-flag'" bash "$TOOLS/bench.sh" --mon 127.0.0.1:1 --no-such-flag
usage_error 2 "--auth" bash "$TOOLS/bench.sh" --mon 127.0.0.1:1 --auth=secret
[[ ! -e "$DIR/mon.pid" ]] || fail "a refused command line started something"

# A start whose OSDs exit (a bad setting) says which and why at once, and stops the
# monitor and OSDs it launched rather than leave a half-started cluster running.
BAD=$(mktemp -d /tmp/msgr-cluster-bad.XXXXXX)
rc=0
err=$(bash "$TOOLS/cluster.sh" start --cluster-dir "$BAD" --osds 2 --ring-bytes 100000 \
  --rdma-device="$RDMA_DEVICE" 2>&1 >/dev/null) || rc=$?
mon_pid=$(pgrep -f -- "--data-dir $BAD/mon" || true)
rm -rf "$BAD"
[[ $rc == 1 ]] || fail "a start with OSDs that exit returned $rc, not 1: $err"
grep -qF "osd.0 exited while starting: osd: --ring-bytes must be a power of two" <<<"$err" \
  || fail "the failed start did not say which OSD exited and why: $err"
[[ -z "$mon_pid" ]] || fail "the failed start left its monitor running (pid $mon_pid)"

# --flag=VALUE forms throughout.
bash "$TOOLS/cluster.sh" start --cluster-dir="$DIR" --osds=3 --ms-type="$MS_TYPE" --grace-ms=3000 \
  --rdma-device="$RDMA_DEVICE" "${SPIN_ARGS[@]}" || fail "cluster did not start"
MON=$(cat "$DIR/mon.addr")
if [[ "$MS_TYPE" == rdma ]]; then
  # The OSDs must really run on the requested device (soft HCA, or ibverbs in the VM).
  want=$([[ "$RDMA_DEVICE" == soft ]] && echo "device soft" || echo "device ${MSGR_RDMA_DEVICE:-$RDMA_DEVICE} (provider ibverbs)")
  grep -q "messenger on $want" "$DIR/log/osd.0.log" || fail "osd.0 not on $want"
  grep -h "messenger on device" "$DIR/log/osd.0.log"
fi
status=$(bash "$TOOLS/cluster.sh" status --cluster-dir "$DIR")
echo "$status"
grep -q "3 up, 3 in" <<<"$status" || fail "status does not show 3 OSDs up and in"
grep -Eq "^osd\.0: [0-9]+ PGs led, 0 peering: all active" <<<"$status" \
  || fail "status does not show osd.0's PGs active (peering)"
# `start` returns once the OSDs' heartbeats (on the latest map) show every PG active.
grep -Eq "^pgs: 128 active, 0 peering; [0-9]+ objects recovered" <<<"$status" \
  || fail "cluster.sh start returned before monctl status showed the 128 PGs active"
# --dir: the old spelling, in both forms.
# (no process substitution: the rdma VM's initramfs has no /dev/fd)
status=$(bash "$TOOLS/cluster.sh" status --dir "$DIR")
grep -q "3 up, 3 in" <<<"$status" || fail "status --dir DIR"
status=$(bash "$TOOLS/cluster.sh" status --dir="$DIR")
grep -q "3 up, 3 in" <<<"$status" || fail "status --dir=DIR"

# Writes while osd.1 is killed and restarted.
BENCH=(bash "$TOOLS/bench.sh" --mon "$MON" --ms-type "$MS_TYPE" --rdma-device "$RDMA_DEVICE" -b 16K -t 8
       --cluster-dir "$DIR" --auth=secret --prefix kill --quiet)
"${BENCH[@]}" --seconds "$BENCH_SECONDS" --acked-log "$DIR/acked.log" --json "$DIR/bench.json" &
bench_pid=$!
sleep $((BENCH_SECONDS / 4))
bash "$TOOLS/cluster.sh" stop-osd --cluster-dir="$DIR" --id=1 --kill
sleep 1
bash "$TOOLS/cluster.sh" start-osd --cluster-dir="$DIR" --id=1 || fail "osd.1 did not restart"
wait "$bench_pid" || fail "bench failed while an OSD was killed and restarted"
acked=$(wc -l < "$DIR/acked.log")
[[ $acked -gt 50 ]] || fail "only $acked objects acknowledged"
python3 - "$DIR/bench.json" "$MS_TYPE" "$RDMA_DEVICE" <<'PY' || fail "bench JSON is wrong"
import json, sys
j, ms, device = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
assert j["errors"] == 0, j
assert j["ops"] > 0 and j["mb_per_s"] > 0, j
for k in ("ms_type", "object_size", "concurrency", "seconds", "ops", "bytes", "iops"):
    assert k in j, k
assert j["auth"] == "secret", j["auth"]
for k in ("p50", "p99", "p999", "max"):
    assert j["lat_us"][k] > 0, k
# osd.1 restarted during the run: its CPU and its perf dump are not comparable across it.
assert j["osd_processes"] == 2, j["osd_processes"]
assert j["cpu_us_per_op"]["client"] > 0 and j["cpu_us_per_op"]["osds"] > 0, j["cpu_us_per_op"]
assert j["cpu_us_per_op"]["osds_busy"] is None, j["cpu_us_per_op"]
assert j["copies_per_byte"]["osd_wire"] is None, j
# The client's CPU copies every payload over tcp (the kernel) and the soft HCA (its memcpy);
# on a real HCA the bench's registered buffers (Client::AllocBuffer) are sent as they are.
if ms == "tcp" or device == "soft":
    assert j["copies_per_byte"]["client"] > 0, j
else:
    assert j["copies_per_byte"]["client"] == 0, j
assert j["osd_cpu_s_per_gb_by_role"]["store"] is not None, j["osd_cpu_s_per_gb_by_role"]
# transport needs the pollers' counters too (a poller drives its tcp messenger).
assert j["osd_cpu_s_per_gb_by_role"]["transport"] is None, j["osd_cpu_s_per_gb_by_role"]
assert j["osd_cpu_s_per_gb_by_role"]["crc"] is None and j["poller_spin_s_per_gb"] is None, j
PY
verify_json="$DIR/verify.json"
bash "$TOOLS/bench.sh" verify --mon "$MON" --ms-type "$MS_TYPE" --rdma-device "$RDMA_DEVICE" \
  --oids "$DIR/acked.log" --json "$verify_json" --keyring="$DIR/keyring" --cluster-dir "$DIR" \
  || fail "verify of acknowledged objects failed"
python3 - "$verify_json" "$acked" <<'PY' || fail "not every acknowledged object verified"
import json, sys
v = json.load(open(sys.argv[1]))["verify"]
assert v["checked"] == int(sys.argv[2]) and v["mismatches"] == 0, v
PY

# A killed OSD is marked down, and every watcher sees it through WatchMap; it comes back up
# under the same id, with the settings of DIR/msgr.conf: there, [osd.2] overrides the
# cluster's durability (durable, in [osd]) for osd.2 only.
MONCTL=("$RUNFILES/osd_sim/mon/monctl" --cluster-dir "$DIR")
grep -qx "durability = durable" "$DIR/msgr.conf" || fail "no durability in msgr.conf: $(cat "$DIR/msgr.conf")"
printf '\n[osd.2]\ndurability = buffered\n' >> "$DIR/msgr.conf"
bash "$TOOLS/cluster.sh" stop-osd --dir "$DIR" --id 2 --kill
"${MONCTL[@]}" --wait-s 20 wait 2 down || fail "killed osd.2 not marked down via WatchMap"
bash "$TOOLS/cluster.sh" start-osd --dir="$DIR" --id 2 || fail "osd.2 did not restart"
"${MONCTL[@]}" --wait-s 20 wait 2 up || fail "restarted osd.2 not up via WatchMap"
for id in 0 2; do
  "$RUNFILES/osd_sim/tools/msgr_admin" "$DIR/run/osd.$id.asok" perf dump > "$DIR/perf.$id.json"
done
python3 - "$DIR/perf.0.json" "$DIR/perf.2.json" <<'PY' || fail "msgr.conf's [osd.2] did not reach osd.2"
import json, sys
d0, d2 = (json.load(open(f))["osd"]["durability"] for f in sys.argv[1:])
assert (d0, d2) == ("durable", "buffered"), (d0, d2)
PY

# kill -9 of the monitor and `cluster.sh start-mon`: the new incarnation keeps the map as
# it was (same epoch, every OSD up from the same epoch: nobody re-boots, no PG re-peers),
# and every OSD's heartbeats reach it over mutual TLS (each reports its applied epoch to the
# new incarnation) before the grace (3 s) would mark it down. (A reconnecting TLS channel
# that failed its calls fast once never finished its handshake.)
# (Under ASan, monctl's leak check is off for these calls: its gRPC channel meets the
# restarting monitor's TLS and once left 904 bytes of OpenSSL's own state behind on an
# exiting thread -- inside uninstrumented libcrypto, not this code; every other process of
# the test keeps the check.)
map_summary() {  # epoch, then id:up:up_from of each OSD
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "${MONCTL[@]}" map-json | python3 -c '
import json, sys
m = json.load(sys.stdin)
print(m["epoch"], " ".join("%d:%s:%d" % (o["id"], o["up"], o["up_from"]) for o in m["osds"]))'
}
before=$(map_summary) || fail "map-json before the monitor restart failed"
kill -9 "$(cat "$DIR/mon.pid")"
bash "$TOOLS/cluster.sh" start-mon --cluster-dir "$DIR" || fail "start-mon failed"
heard=""
for _ in $(seq 100); do
  heard=$(ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "${MONCTL[@]}" map-json 2>/dev/null |
    python3 -c 'import json, sys; print(all(o["applied_epoch"] > 0 for o in json.load(sys.stdin)["osds"]))' \
    2>/dev/null) || true
  [[ $heard == True ]] && break
  sleep 0.2
done
[[ $heard == True ]] || fail "not every OSD heartbeated the restarted monitor within 20 s"
sleep 4  # past the grace: an OSD whose heartbeats did not get through would be down now
after=$(map_summary) || fail "map-json after the monitor restart failed"
[[ $after == "$before" ]] ||
  fail "the monitor restart changed the map: before '$before', after '$after'"
for id in 0 1 2; do
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "${MONCTL[@]}" --wait-s 20 wait "$id" up ||
    fail "osd.$id not up after a monitor restart"
done

# Garbage on an OSD's messenger port: that connection is dropped, the OSD keeps serving.
addr=$("$RUNFILES/osd_sim/mon/monctl" --cluster-dir "$DIR" map-json \
  | python3 -c "import json,sys; print([o['addr'] for o in json.load(sys.stdin)['osds'] if o['id']==0][0])")
head -c 100000 /dev/urandom > "/dev/tcp/${addr%:*}/${addr##*:}" || true
"${BENCH[@]}" --count 200 --prefix after-garbage --verify || fail "writes after garbage failed"
kill -0 "$(cat "$DIR/osd.0.pid")" || fail "osd.0 died after garbage on its port"

# bench's old spelling --auth FILE: the messenger secret comes from FILE (the monitor's TLS
# certificates from --cluster-dir's pki/, as a cluster made with --auth secret has one).
bash "$TOOLS/bench.sh" --mon="$MON" --ms-type="$MS_TYPE" --rdma-device="$RDMA_DEVICE" -b 4K -t 4 \
  --count=50 --prefix=old-auth --quiet --auth "$DIR/keyring" --json="$DIR/old-auth.json" \
  --cluster-dir "$DIR" \
  || fail "bench --auth KEYRING (the old spelling) failed"
python3 - "$DIR/old-auth.json" <<'PY' || fail "bench --auth KEYRING did not authenticate"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["auth"] == "secret" and j["ops"] == 50 and j["errors"] == 0, j
PY
# --auth none really goes without credentials: the monitor (mutual TLS) refuses it at once,
# saying what it wants.
rc=0
bash "$TOOLS/bench.sh" --mon "$MON" --ms-type "$MS_TYPE" --rdma-device "$RDMA_DEVICE" -b 4K -t 1 \
  --count 1 --op-timeout 2 --prefix no-auth --quiet --cluster-dir "$DIR" --auth none \
  --json "$DIR/no-auth.json" > "$DIR/no-auth.out" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "bench --auth none against a cluster with a secret exited $rc, not 1"
grep -q "requires mutual TLS" "$DIR/no-auth.out" \
  || fail "bench --auth none: no clear refusal: $(tail -2 "$DIR/no-auth.out")"

# --ms-mode secure against this crc cluster: refused at once, naming both modes (tcp; with
# rdma the client refuses secure mode itself: it is tcp-only).
rc=0
bash "$TOOLS/bench.sh" --mon "$MON" --ms-type "$MS_TYPE" --rdma-device "$RDMA_DEVICE" -b 4K -t 1 \
  --count 1 --op-timeout 5 --prefix secure --quiet --cluster-dir "$DIR" --ms-mode secure \
  > "$DIR/secure.out" 2>&1 || rc=$?
if [[ $MS_TYPE == tcp ]]; then
  [[ $rc == 1 ]] || fail "bench --ms-mode secure against a crc cluster exited $rc, not 1"
  grep -q "use the same --ms-mode" "$DIR/secure.out" || fail "no clear ms_mode refusal: $(tail -2 "$DIR/secure.out")"
else  # a bad combination of arguments: exit 2
  [[ $rc == 2 ]] || fail "bench --ms-type rdma --ms-mode secure exited $rc, not 2"
  grep -q "secure mode is tcp-only" "$DIR/secure.out" || fail "rdma + secure not refused: $(tail -2 "$DIR/secure.out")"
fi

# The bench's per-op, per-role and copy figures on a quiet timed run.
bash "$TOOLS/bench.sh" --mon "$MON" --ms-type "$MS_TYPE" --rdma-device "$RDMA_DEVICE" -b 4K -t 16 \
  --seconds 2 --cluster-dir "$DIR" --prefix figures --quiet --json "$DIR/figures.json" \
  > "$DIR/figures.out" 2> "$DIR/figures.err" || fail "bench for the CPU and copy figures failed"
! grep "are n/a" "$DIR/figures.err" || fail "perf-dump figures n/a on a quiet cluster"
grep -q "^Copies/byte: *client [0-9]" "$DIR/figures.out" || fail "no copies line in the summary"
python3 - "$DIR/figures.json" "$MS_TYPE" "$RDMA_DEVICE" <<'PY' || fail "bench CPU / copy figures are wrong"
import json, sys
j, ms, device = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
op, role, cp = j["cpu_us_per_op"], j["osd_cpu_s_per_gb_by_role"], j["copies_per_byte"]
assert j["ops"] > 0 and j["errors"] == 0 and j["osd_processes"] == 3, j
for group in (op, role, cp):
    for k, v in group.items():
        assert isinstance(v, (int, float)) and v >= 0, (k, v, group)
assert isinstance(j["poller_spin_s_per_gb"], (int, float)), j["poller_spin_s_per_gb"]
assert op["client"] > 0 and op["osds"] > 0 and op["osds_busy"] <= op["osds"], op
assert j["poller_spin_s_per_gb"] <= role["poller"] + 1e-3, (j["poller_spin_s_per_gb"], role)
# Every payload byte crosses the client's CPU at least once over tcp (the kernel's socket
# copy) and over the soft HCA (its memcpy; a real HCA may send from registered memory);
# the OSD's CPU copies it in over tcp, never over rdma.
if ms == "tcp" or device == "soft":
    assert cp["client"] >= 1, cp
else:
    assert cp["client"] == 0, cp  # sent from the bench's registered buffers
assert (cp["osd_wire"] >= 1) if ms == "tcp" else (cp["osd_wire"] == 0), (ms, cp)
assert cp["osd_send"] == 0, cp  # pool size 1: no OSD forwards a payload
# The roles come from per-thread readings, the total from each process's: never much more;
# less by what threads that exited during the run used (an rdma OSD sets up each session on
# a thread of its own: on rxe0 in the VM they were a third of the total), so the lower
# bound holds over tcp only.
total, parts = j["cpu_s_per_gb"]["osds"], sum(role.values())
assert parts <= 1.2 * total, (parts, total, role)
if ms == "tcp":
    assert parts >= 0.8 * total, (parts, total, role)
assert role["transport"] > 0 and role["poller"] + role["crc"] > 0, role
# Registered memory per session (rdma only): the OSDs' rings and pools, the client's
# staging, pools and record buffers; each at least a ring's 512 KiB minimum, within the
# 64 MiB a session may register.
reg = j["registered_kib_per_session"]
if ms == "rdma":
    assert 256 <= reg["osd"] <= 65536 and 256 <= reg["client"] <= 65536, reg
else:
    assert reg["osd"] is None and reg["client"] is None, reg
print("figures:", {k: j[k] for k in ("cpu_us_per_op", "osd_cpu_s_per_gb_by_role",
                                     "poller_spin_s_per_gb", "copies_per_byte",
                                     "registered_kib_per_session")})
PY

# perf dump reports the writes.
"$RUNFILES/osd_sim/tools/msgr_admin" "$DIR/run/osd.0.asok" perf dump > "$DIR/perf.json"
python3 - "$DIR/perf.json" "$MS_TYPE" <<'PY' || fail "perf dump is wrong"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["osd"]["ops"] > 0 and p["osd"]["bytes"] > 0, p["osd"]
assert p["store"]["flushes"] > 0, p["store"]
assert sys.argv[2] in p["messenger"], p["messenger"].keys()
PY

pids=$(cat "$DIR"/*.pid)
bash "$TOOLS/cluster.sh" stop --dir "$DIR"
for p in $pids; do
  if kill -0 "$p" 2>/dev/null; then fail "process $p still running after stop"; fi
done
echo "PASS: cluster end-to-end ($MS_TYPE): $acked acknowledged objects verified across an OSD kill"
