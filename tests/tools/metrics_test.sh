#!/usr/bin/env bash
# End-to-end test of /metrics with the real Prometheus server (Debian's prometheus 2.42):
#   * a 3-OSD cluster started with `tools/cluster.sh start --metrics` (tcp and rdma on the
#     soft device): every daemon writes DIR/<daemon>.metrics.addr, and `promtool check
#     metrics` passes on each one's /metrics;
#   * Prometheus scrapes all four every second while `tools/bench.sh` writes 4 KiB objects
#     for 3 s over tcp; after a scrape that follows the bench, its HTTP query API says
#     that every OSD's client-write rate was non-zero during the run and that
#     sum(msgr_osd_client_writes_total) equals the bench's ops;
#   * every metric the Grafana dashboard (tools/grafana/msgr.json) reads is exported;
#   * `start-osd` restarts an OSD with /metrics (cluster.conf keeps --metrics);
#   * every process (cluster, Prometheus) is stopped by its pid.
# Prometheus missing is a failure (run tools/setup.sh), never a pass.
#
#   metrics_test.sh      (under `bazel test`: binaries from the runfiles; else bazel-bin)
set -euo pipefail
# shellcheck source=tests/tools/test_paths.sh
source "$(dirname "$0")/test_paths.sh"
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
PROMTOOL=${PROMTOOL:-/usr/bin/promtool}
BENCH_SECONDS=3
OSDS=3

fail() { echo "FAIL: $*" >&2; exit 1; }
for b in "$PROMETHEUS" "$PROMTOOL" "$(command -v curl || true)"; do
  [[ -n "$b" && -x "$b" ]] || fail "${b:-curl} not found: run tools/setup.sh (it installs prometheus and curl)"
done

export MSGR_BIN=$RUNFILES MSGR_REBUILD=0
# Unix socket paths must stay short: the cluster lives under /tmp, not TEST_TMPDIR.
DIR=$(mktemp -d /tmp/msgr-metrics-test.XXXXXX)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/prom.XXXXXX")
PROM_PID=""
cleanup() {
  if [[ -n "$PROM_PID" ]] && kill -0 "$PROM_PID" 2>/dev/null; then
    kill "$PROM_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$PROM_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PROM_PID" 2>/dev/null || true
  fi
  bash "$TOOLS/cluster.sh" stop --cluster-dir "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR" "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  tail -n 20 "$DIR"/log/*.log "$WORK/prometheus.log" >&2 2>/dev/null || true
  exit 1
}

bash "$TOOLS/cluster.sh" start --cluster-dir "$DIR" --osds "$OSDS" --ms-type both \
  --rdma-device soft --durability memory --metrics || fail "cluster did not start"
MON=$(cat "$DIR/mon.addr")
DAEMONS=(mon)
for ((i = 0; i < OSDS; i++)); do DAEMONS+=("osd.$i"); done

# Every daemon's address file, and /metrics that promtool accepts.
TARGETS=()
for d in "${DAEMONS[@]}"; do
  [[ -s "$DIR/$d.metrics.addr" ]] || fail "no $DIR/$d.metrics.addr"
  addr=$(cat "$DIR/$d.metrics.addr")
  [[ "$addr" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "$d serves metrics on '$addr', not on 127.0.0.1"
  TARGETS+=("$addr")
  curl -fsS --max-time 5 "http://$addr/metrics" > "$WORK/$d.txt" || fail "GET http://$addr/metrics ($d)"
  "$PROMTOOL" check metrics < "$WORK/$d.txt" > "$WORK/$d.lint" 2>&1 \
    || fail "promtool check metrics on $d: $(cat "$WORK/$d.lint")"
done
grep -q '^msgr_mon_osds_up 3$' "$WORK/mon.txt" || fail "mon does not export 3 OSDs up: $(grep osds_up "$WORK/mon.txt")"
for ((i = 0; i < OSDS; i++)); do
  t=$WORK/osd.$i.txt
  grep -q "^msgr_osd_client_writes_total{osd=\"$i\"} 0$" "$t" || fail "osd.$i: no msgr_osd_client_writes_total{osd=\"$i\"} 0"
  grep -q "^msgr_messenger_sent_bytes_total{osd=\"$i\",backend=\"tcp\"}" "$t" || fail "osd.$i: no tcp messenger series"
  grep -q "^msgr_rdma_registered_bytes{osd=\"$i\",backend=\"rdma\"}" "$t" || fail "osd.$i: no rdma series"
  grep -q "^msgr_thread_cpu_seconds_total{osd=\"$i\",role=\"poller\"}" "$t" || fail "osd.$i: no thread CPU by role"
done
echo "ok: ${#DAEMONS[@]} daemons serve /metrics, promtool check metrics passes"

# The Grafana dashboard only reads metrics that exist.
DASHBOARD=$RUNFILES/tools/grafana/msgr.json
[[ -f "$DASHBOARD" ]] || DASHBOARD=$ROOT/tools/grafana/msgr.json
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$DASHBOARD" || fail "$DASHBOARD is not JSON"
for name in $(grep -o 'msgr_[a-z_]*' "$DASHBOARD" | sort -u); do
  # A histogram's series are its family's name + _bucket (and _count, _sum).
  family=$name
  [[ $name == *_bucket ]] && family=${name%_bucket}
  grep -q "^# TYPE $family " "$WORK"/*.txt || fail "the dashboard reads $name, which no daemon exports"
done
echo "ok: every metric the dashboard reads is exported"

# Prometheus on a free port, scraping every daemon each second.
PROM_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PROM=http://127.0.0.1:$PROM_PORT
{
  echo "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}"
  echo "scrape_configs:"
  echo "  - job_name: msgr"
  echo "    static_configs:"
  printf '      - targets: [%s]\n' "$(IFS=,; echo "${TARGETS[*]}")"
} > "$WORK/prometheus.yml"
"$PROMTOOL" check config "$WORK/prometheus.yml" >/dev/null || fail "bad config: $(cat "$WORK/prometheus.yml")"
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prometheus.log" 2>&1 </dev/null &
PROM_PID=$!

# query EXPR [TIME]: the instant query's result vector as "labels-json value" lines.
query() {
  local args=(--data-urlencode "query=$1")
  [[ -n "${2:-}" ]] && args+=(--data-urlencode "time=$2")
  curl -fsS --max-time 5 "${args[@]}" "$PROM/api/v1/query" | python3 -c '
import json, sys
r = json.load(sys.stdin)
if r.get("status") != "success": sys.exit("query failed: %s" % r)
for s in r["data"]["result"]: print(json.dumps(s["metric"], sort_keys=True), s["value"][1])'
}
# wait_until SECONDS WHAT CMD...: polls CMD (every 0.5 s) until it succeeds.
wait_until() {
  local t=$1 what=$2; shift 2
  local deadline=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    [[ $SECONDS -lt $deadline ]] || fail "$what: not within $t s"
    sleep 0.5
  done
}
targets_up() { [[ "$(query 'count(up{job="msgr"} == 1)' | awk '{print $NF}')" == "${#TARGETS[@]}" ]]; }
wait_until 60 "Prometheus ready" curl -fsS --max-time 2 "$PROM/-/ready"
wait_until 30 "every daemon scraped and up" targets_up
echo "ok: Prometheus scrapes ${#TARGETS[@]} targets"

# The bench, over tcp.
T0=$(date +%s.%N)
bash "$TOOLS/bench.sh" --mon "$MON" --ms-type tcp -b 4K -t 4 --seconds "$BENCH_SECONDS" \
  --cluster-dir "$DIR" --json "$WORK/bench.json" > "$WORK/bench.out" 2>&1 \
  || fail "bench failed: $(tail -n 20 "$WORK/bench.out")"
T1=$(date +%s.%N)
OPS=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["ops"])' "$WORK/bench.json")
ERRS=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["errors"])' "$WORK/bench.json")
[[ "$OPS" -gt 0 && "$ERRS" == 0 ]] || fail "bench: $OPS ops, $ERRS errors"
echo "bench: $OPS ops in $(python3 -c "print(round($T1 - $T0, 1))") s"

# A scrape of every OSD after the bench ended: its samples are the final counts.
scraped_after_bench() {
  local oldest
  oldest=$(query 'min(timestamp(msgr_osd_client_writes_total))' | awk '{print $NF}')
  [[ -n "$oldest" ]] && python3 -c "import sys; sys.exit(0 if $oldest > $T1 else 1)"
}
wait_until 20 "a scrape of every OSD after the bench" scraped_after_bench

SUM=$(query 'sum(msgr_osd_client_writes_total)' | awk '{print $NF}')
[[ "$SUM" == "$OPS" ]] || fail "sum(msgr_osd_client_writes_total) = $SUM, the bench's ops = $OPS"
echo "ok: sum(msgr_osd_client_writes_total) = $SUM = the bench's ops"

# The OSDs' op latency histogram timed every one of those writes (pool size 1: no replica
# records), and its p99 is a real latency (above 0, below the bench's op timeout).
TIMED=$(query 'sum(msgr_poller_op_latency_seconds_count)' | awk '{print $NF}')
[[ "$TIMED" == "$OPS" ]] || fail "sum(msgr_poller_op_latency_seconds_count) = $TIMED, the bench's ops = $OPS"
P99=$(query 'histogram_quantile(0.99, sum by (le) (msgr_poller_op_latency_seconds_bucket))' | awk '{print $NF}')
python3 -c "import sys; sys.exit(0 if 0 < float('${P99:-0}') < 30 else 1)" || fail "op latency p99 '$P99'"
echo "ok: every write timed by the OSDs' op latency histogram, p99 <= ${P99} s"

# The write rate of every OSD over the run, evaluated at its end (the window covers it).
WINDOW=$(python3 -c "import math; print(math.ceil($T1 - $T0))")
query "rate(msgr_osd_client_writes_total[${WINDOW}s])" "$T1" > "$WORK/rates"
cat "$WORK/rates"
for ((i = 0; i < OSDS; i++)); do
  rate=$(grep "\"osd\": \"$i\"" "$WORK/rates" | awk '{print $NF}')
  [[ -n "$rate" ]] || fail "no write rate for osd.$i"
  python3 -c "import sys; sys.exit(0 if float('$rate') > 0 else 1)" \
    || fail "osd.$i write rate during the bench was $rate"
done
echo "ok: every OSD's client-write rate was non-zero during the bench"

# What else a dashboard reads: thread CPU by role moved, the monitor's map.
cpu=$(query 'sum(rate(msgr_thread_cpu_seconds_total{role="transport"}['"${WINDOW}"'s]))' "$T1" | awk '{print $NF}')
python3 -c "import sys; sys.exit(0 if float('${cpu:-0}') > 0 else 1)" || fail "transport CPU rate was '${cpu}'"
[[ "$(query 'msgr_mon_osds_up' | awk '{print $NF}')" == "$OSDS" ]] || fail "msgr_mon_osds_up is not $OSDS"

# start-osd restarts an OSD with metrics too (cluster.conf remembers --metrics).
bash "$TOOLS/cluster.sh" stop-osd --cluster-dir "$DIR" --id 1
bash "$TOOLS/cluster.sh" start-osd --cluster-dir "$DIR" --id 1 || fail "start-osd --id 1"
addr=$(cat "$DIR/osd.1.metrics.addr") || fail "no osd.1.metrics.addr after start-osd"
curl -fsS --max-time 5 "http://$addr/metrics" > "$WORK/osd.1.restarted" || fail "GET http://$addr/metrics (osd.1 restarted)"
grep -q '^msgr_osd_client_writes_total{osd="1"} ' "$WORK/osd.1.restarted" \
  || fail "osd.1 restarted without its metrics on $addr"
echo "ok: start-osd keeps --metrics"
echo "PASS"
