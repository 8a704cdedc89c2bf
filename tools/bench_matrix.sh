#!/usr/bin/env bash
# Every figure in docs/BENCHMARKS.md in one run, printed as one table (medians of --reps).
#
#   tools/bench_matrix.sh [--seconds S] [--reps N] [--out DIR] [--no-build] [--only LIST]
#                         [--clients N] [--max-steal PCT] [--steal-retries N]
#
#   --seconds S   length of each cluster bench run (default 3)
#   --reps N      repetitions of every measurement; the table shows medians (default 3)
#   --out DIR     raw results (bench JSON, google-benchmark JSON, fio JSON, perf dumps,
#                 uptime per section); default /tmp/bm.<pid>
#   --only LIST   comma list of sections: mem,clients,durable,store,msgr,idle,repl
#                 (default all)
#   --clients N   client instances of the clients section (default 20)
#   --report      only print the table from an earlier --out DIR (no measurement)
#   --max-steal PCT  a bench run during which the hypervisor took more than PCT% of this
#                 VM's CPUs (the bench's host_cpu.steal_pct) is run again, up to
#                 --steal-retries N times, and the least-stolen run is kept (defaults 10
#                 and 2; 0 never reruns). On a shared host a run's steal can cost it half
#                 its rate (docs/BENCHMARKS.md "Session 41"); every run stays in
#                 OUT/tries/ and the section headers count the reruns.
#   --layout L    free (default): no tuning flag at all, what a user gets (the OSDs'
#                 pollers use hybrid polling); pinned: the clusters' OSD pollers share the
#                 last CPU (--poller-cpus), and -t 1 runs poll for their completion
#                 (--spin-us 200), for both backends alike (the layout of rounds 3 to 6).
#                 Pinning the bench too (taskset) was tried and cost both backends at
#                 4 MiB (docs/BENCHMARKS.md, round 3).
#
# Sections (ratios are what matter; every comparison is made inside one section):
#   mem      3 OSDs, --ms-type both, memory mode, --auth none: tcp vs rdma(soft), 4 KiB -t 1
#            p50, 4 KiB -t 16 IOPS, 4 MiB -t 16 MB/s, OSD CPU-s/GB; single-thread memcpy
#            4 MiB (from ring_throughput_benchmark, run right after, same session)
#   clients  the same cluster: N clients in one bench process (--clients N), 4 KiB, one
#            write in flight each: IOPS, p50, the time all took to connect to every OSD
#   idle     the same cluster left idle: CPU of mon + OSDs over 10 s from /proc
#   durable  3 OSDs, durable: 4 KiB -t 16 IOPS, 4 MiB -t 16 MB/s per backend; fio sequential
#            4 MiB O_DIRECT writes; a pwrite+fdatasync loop (store_benchmark)
#   store    store_benchmark: 4 KiB / 4 MiB per mode, sync threads and pipelined (256 / 16
#            in flight with callbacks: what the OSD does), file-per-object, fdatasync loop
#   msgr     tcp_benchmark (messenger vs raw TCP) and ring_throughput_benchmark
#   repl     replication: per backend a cluster of 3 OSDs whose OSD-to-OSD sessions use that
#            backend (--ms-cluster-type), default pool size 3 and a pool "one" of size 1;
#            4 KiB -t 16 IOPS and 4 MiB -t 16 MiB/s at size 1 and 3, memory mode (128
#            objects overwritten) and durable; +~5 min
# Needs fio (Debian package `fio`). Clusters live in /tmp/bmm.<pid> and /tmp/bmd.<pid>
# (short paths: Unix sockets) and are always stopped on exit. Takes ~6-8 minutes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SECONDS_PER=3 REPS=3 OUT="" BUILD=1 ONLY="mem,clients,idle,durable,store,msgr" LAYOUT=free
CLIENTS=20
# shellcheck source=tools/lib/flags.sh
source tools/lib/flags.sh
# shellcheck source=tools/lib/steal.sh
source tools/lib/steal.sh
FLAGS_SCRIPT=bench_matrix.sh
usage_text() { flags_header tools/bench_matrix.sh; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --seconds) flag_value SECONDS_PER ;;
    --reps) flag_value REPS ;;
    --out) flag_value OUT ;;
    --no-build) BUILD=0 ;;
    --only) flag_value ONLY ;;
    --report) ONLY="" BUILD=0 ;;
    --layout) flag_value LAYOUT ;;
    --clients) flag_value CLIENTS ;;
    --max-steal) flag_value STEAL_MAX ;;
    --steal-retries) flag_value STEAL_RETRIES ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done
OUT=${OUT:-/tmp/bm.$$}
mkdir -p "$OUT"
# Pinned layout: on this 2-CPU machine three OSD pollers (which spin for RDMA rings) and
# the client otherwise take turns on both CPUs, and a spinning poller costs the client
# its core; pinned, the pollers take turns on one CPU and the client keeps the other.
NCPU=$(nproc)
CLUSTER_PIN=() T1_SPIN=0
case "$LAYOUT" in
  pinned)
    [[ $NCPU -ge 2 ]] && CLUSTER_PIN=(--poller-cpus $((NCPU - 1)))
    T1_SPIN=200 ;;
  free) ;;
  *) echo "bench_matrix.sh: --layout is pinned or free, not '$LAYOUT'" >&2; exit 2 ;;
esac
[[ -z "$ONLY" ]] || echo "$LAYOUT: OSD pollers ${CLUSTER_PIN[*]:-on any CPU}, bench on any CPU, -t 1 with --spin-us $T1_SPIN" > "$OUT/layout.txt"
want() { [[ ",$ONLY," == *",$1,"* ]]; }
log() { echo "[$(date +%T)] $*" >&2; }
load() { echo "$1 $(uptime | sed 's/.*load average: //')" >> "$OUT/load.txt"; }
[[ -z "$ONLY" ]] || : > "$OUT/load.txt"

BIN="${MSGR_BIN:-$ROOT/bazel-bin}"  # MSGR_BIN: another build's binaries (an A/B of two checkouts)
if [[ $BUILD == 1 ]]; then
  log "building (bazel build -c opt)"
  bazel build -c opt //osd_sim:osd //osd_sim/mon:mon //osd_sim/mon:monctl \
    //osd_sim/tools:msgr_admin //client/bench:bench //osd_sim/store:store_benchmark \
    //tests/msg/tcp:tcp_benchmark //tests/msg/rdma:ring_throughput_benchmark >&2
fi
export MSGR_REBUILD=0
# The binaries the chosen sections run, checked before the first one (with --no-build, or
# MSGR_BIN pointing at another build, one can be missing: say which and how to get it).
NEEDS=()
if want mem || want clients || want idle || want durable || want repl; then
  NEEDS+=(osd_sim/osd osd_sim/mon/mon osd_sim/mon/monctl osd_sim/tools/msgr_admin client/bench/bench)
fi
if want mem || want msgr; then NEEDS+=(tests/msg/rdma/ring_throughput_benchmark); fi
if want durable || want store; then NEEDS+=(osd_sim/store/store_benchmark); fi
if want msgr; then NEEDS+=(tests/msg/tcp/tcp_benchmark); fi
for b in "${NEEDS[@]}"; do
  if [[ ! -x "$BIN/$b" ]]; then
    echo "bench_matrix.sh: $BIN/$b is missing: run without --no-build (it builds what it" \
         "runs), or bazel build -c opt //${b%/*}:${b##*/} for that build" >&2
    exit 1
  fi
done
if want durable && ! command -v fio >/dev/null; then
  echo "bench_matrix.sh: fio not found (apt-get install -y fio)" >&2; exit 1
fi

MEM=/tmp/bmm.$$ DUR=/tmp/bmd.$$ REPL=/tmp/bmr.$$
cleanup() {
  for d in "$MEM" "$DUR" "$REPL"; do
    [[ -f "$d/mon.pid" ]] && tools/cluster.sh stop --cluster-dir "$d" >/dev/null 2>&1 || true
    rm -rf "$d"
  done
  rm -f /var/tmp/bm_fio.$$
}
trap cleanup EXIT

# bench_one DIR TYPE SIZE T TAG [BENCH FLAGS...]: one tools/bench.sh run -> $OUT/TAG.json
# (again while its steal exceeds --max-steal, up to --steal-retries times: the least-stolen
# run is kept, every try stays in $OUT/tries/).
# The memory-mode cluster keeps every object in RAM: its runs overwrite the same 256
# objects per size (one prefix for both backends and every rep), so a run does not need
# new memory: on this VM memory touched for the first time costs more than the write
# itself (docs/BENCHMARKS.md, "Session 25").
bench_one() {
  local dir=$1 type=$2 size=$3 t=$4 tag=$5 extra=("${@:6}") prefix=$5
  [[ $type == rdma ]] && extra+=(--rdma-device soft)
  if [[ $dir == "$MEM" ]]; then
    extra+=(--max-objects 256)
    prefix="mem_$size"
  fi
  [[ $t == 1 ]] && extra+=(--spin-us "$T1_SPIN")
  mkdir -p "$OUT/tries"
  try_bench() {  # try_bench JSON: one try of this cell
    tools/bench.sh --mon "$(cat "$dir/mon.addr")" --ms-type "$type" -b "$size" -t "$t" \
      --seconds "$SECONDS_PER" --json "$1" --cluster-dir "$dir" --auth none \
      --prefix "$prefix" "${extra[@]}" > "${1%.json}.log" 2>&1 ||
      log "bench $tag failed (see ${1%.json}.log)"
  }
  steal_retry "$OUT/tries/$tag" try_bench
  cp "$OUT/tries/$tag.$STEAL_BEST.log" "$OUT/$tag.log"
  [[ ! -f "$OUT/tries/$tag.$STEAL_BEST.json" ]] || cp "$OUT/tries/$tag.$STEAL_BEST.json" "$OUT/$tag.json"
}

perf_dump() {  # perf_dump DIR TAG
  local i
  for i in 0 1 2; do
    "$BIN/osd_sim/tools/msgr_admin" "$1/run/osd.$i.asok" perf dump > "$OUT/$2.osd$i.perf.json" \
      2>/dev/null || true
  done
}

# cpu_ticks PID...: utime+stime (clock ticks) summed over the processes
cpu_ticks() {
  local s=0 p
  for p in "$@"; do
    s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo $s
}

if want mem || want idle || want clients; then
  log "mem: starting 3 OSDs, both, memory, auth none in $MEM"
  tools/cluster.sh start --cluster-dir "$MEM" --osds 3 --ms-type both --durability memory \
    --auth none --rdma-device soft "${CLUSTER_PIN[@]}" > "$OUT/mem.cluster.log" 2>&1
  if want mem; then
    load mem
    for r in $(seq 1 "$REPS"); do
      for type in tcp rdma; do
        log "mem rep $r $type"
        bench_one "$MEM" $type 4K 1 "mem.$type.4k.t1.r$r"
        bench_one "$MEM" $type 4K 16 "mem.$type.4k.t16.r$r"
        bench_one "$MEM" $type 4M 16 "mem.$type.4m.t16.r$r"
      done
    done
    perf_dump "$MEM" mem
    log "mem: memcpy + ring records (ring_throughput_benchmark)"
    for r in $(seq 1 "$REPS"); do
      "$BIN/tests/msg/rdma/ring_throughput_benchmark" 1 > "$OUT/ring.r$r.txt" 2>&1 || true
    done
  fi
  if want clients; then
    load clients
    for r in $(seq 1 "$REPS"); do
      for type in tcp rdma; do
        log "clients rep $r $type ($CLIENTS clients)"
        bench_one "$MEM" $type 4K "$CLIENTS" "clients.$type.r$r" --clients "$CLIENTS"
      done
    done
    echo "$CLIENTS" > "$OUT/clients.txt"
  fi
  if want idle; then
    sleep 3  # let the pollers back off
    load idle
    pids=$(cat "$MEM"/mon.pid "$MEM"/osd.*.pid)
    # shellcheck disable=SC2086
    a=$(cpu_ticks $pids); sleep 10
    # shellcheck disable=SC2086
    b=$(cpu_ticks $pids)
    echo "$(( b - a )) $(getconf CLK_TCK)" > "$OUT/idle.txt"
  fi
  tools/cluster.sh stop --cluster-dir "$MEM" >/dev/null 2>&1 || true
fi

if want durable; then
  log "durable: starting 3 OSDs, both, durable, auth none in $DUR"
  tools/cluster.sh start --cluster-dir "$DUR" --osds 3 --ms-type both --durability durable \
    --auth none --rdma-device soft "${CLUSTER_PIN[@]}" > "$OUT/dur.cluster.log" 2>&1
  load durable
  for r in $(seq 1 "$REPS"); do
    for type in tcp rdma; do
      log "durable rep $r $type"
      bench_one "$DUR" $type 4K 16 "dur.$type.4k.t16.r$r"
      bench_one "$DUR" $type 4M 16 "dur.$type.4m.t16.r$r"
    done
    log "durable rep $r fio + fdatasync loop"
    fio --name=seq --rw=write --bs=4M --size=512M --direct=1 --ioengine=psync \
      --filename=/var/tmp/bm_fio.$$ --output-format=json > "$OUT/fio.r$r.json" 2>/dev/null
    rm -f /var/tmp/bm_fio.$$
    # the same, but durable like the store: fdatasync after every 4 MiB write
    fio --name=seqsync --rw=write --bs=4M --size=256M --direct=1 --ioengine=psync --fdatasync=1 \
      --filename=/var/tmp/bm_fio.$$ --output-format=json > "$OUT/fiosync.r$r.json" 2>/dev/null
    rm -f /var/tmp/bm_fio.$$
    "$BIN/osd_sim/store/store_benchmark" --benchmark_filter='BM_WriteFdatasync' \
      --benchmark_min_time=1 --benchmark_out="$OUT/fdatasync.r$r.json" \
      --benchmark_out_format=json > /dev/null 2>&1
  done
  perf_dump "$DUR" dur
  tools/cluster.sh stop --cluster-dir "$DUR" >/dev/null 2>&1 || true
fi

if want repl; then
  load repl
  for mode in memory durable; do
    for type in tcp rdma; do
      log "repl: 3 OSDs, $mode, client and OSD-to-OSD sessions over $type, in $REPL"
      tools/cluster.sh start --cluster-dir "$REPL" --osds 3 --ms-type both \
        --ms-cluster-type "$type" --durability "$mode" --auth none --rdma-device soft \
        --pool-size 3 "${CLUSTER_PIN[@]}" > "$OUT/repl.$mode.$type.cluster.log" 2>&1
      "$BIN/osd_sim/mon/monctl" --cluster-dir "$REPL" pool create one --size 1 >/dev/null
      keep=()
      [[ $mode == memory ]] && keep=(--max-objects 128)
      for r in $(seq 1 "$REPS"); do
        for pool in one default; do
          size=$([[ $pool == one ]] && echo 1 || echo 3)
          bench_one "$REPL" "$type" 4K 16 "repl.$mode.$type.s$size.4k.t16.r$r" --pool "$pool" "${keep[@]}"
          bench_one "$REPL" "$type" 4M 16 "repl.$mode.$type.s$size.4m.t16.r$r" --pool "$pool" "${keep[@]}"
        done
      done
      perf_dump "$REPL" "repl.$mode.$type"
      tools/cluster.sh stop --cluster-dir "$REPL" >/dev/null 2>&1 || true
      rm -rf "$REPL"
    done
  done
fi

if want store; then
  load store
  log "store: store_benchmark x$REPS (+ fio once per rep, same session)"
  for r in $(seq 1 "$REPS"); do
    fio --name=seq --rw=write --bs=4M --size=512M --direct=1 --ioengine=psync \
      --filename=/var/tmp/bm_fio.$$ --output-format=json > "$OUT/store.fio.r$r.json" 2>/dev/null
    fio --name=seqsync --rw=write --bs=4M --size=256M --direct=1 --ioengine=psync --fdatasync=1 \
      --filename=/var/tmp/bm_fio.$$ --output-format=json > "$OUT/store.fiosync.r$r.json" 2>/dev/null
    rm -f /var/tmp/bm_fio.$$
  done
  "$BIN/osd_sim/store/store_benchmark" --benchmark_min_time=0.5 \
    --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/store.json" --benchmark_out_format=json > "$OUT/store.txt" 2>&1
fi

if want msgr; then
  load msgr
  log "msgr: tcp_benchmark + ring_throughput_benchmark"
  "$BIN/tests/msg/tcp/tcp_benchmark" --benchmark_min_time=0.5 \
    --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/tcp.json" --benchmark_out_format=json > "$OUT/tcp.txt" 2>&1
  if ! want mem; then
    for r in $(seq 1 "$REPS"); do
      "$BIN/tests/msg/rdma/ring_throughput_benchmark" 1 > "$OUT/ring.r$r.txt" 2>&1 || true
    done
  fi
fi

python3 - "$OUT" <<'EOF'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def f(x, fmt="{:,.0f}"):
    return "-" if x is None else fmt.format(x)
def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b
def bench(tag, key):
    vals = []
    for p in sorted(glob.glob(f"{out}/{tag}.r*.json")):
        try:
            j = json.load(open(p))
        except Exception:
            continue
        v = j
        for k in key.split("."):
            v = v.get(k) if isinstance(v, dict) else None
        vals.append(v)
    return med(vals)
load = dict(l.split(" ", 1) for l in open(f"{out}/load.txt").read().splitlines() if l)
def steal(prefix):
    # The hypervisor's steal during a section's bench runs (host_cpu.steal_pct), median and
    # worst: a section whose runs lost CPU to the host is slower than its code.
    vals = []
    for p in glob.glob(f"{out}/{prefix}.*.json"):
        try:
            v = (json.load(open(p)).get("host_cpu") or {}).get("steal_pct")
        except Exception:
            continue
        if v is not None:
            vals.append(v)
    reruns = len([p for p in glob.glob(f"{out}/tries/{prefix}.*.json")
                  if not p.endswith(".0.json")])
    again = f", {reruns} run{'s' if reruns != 1 else ''} rerun for steal" if reruns else ""
    return f", steal {med(vals):.1f}% (worst run {max(vals):.1f}%){again}" if vals else ""
for sec, prefix in [("mem", "mem"), ("clients", "clients"), ("durable", "dur"), ("repl", "repl")]:
    if sec in load:
        load[sec] += steal(prefix)
print(f"# msgr bench matrix  ({out}; medians of runs; load = uptime 1/5/15 min at section start, "
      "steal = CPU time the hypervisor took during the section's bench runs)")
print("units: MiB/s (2^20 bytes per second) and CPU-seconds per GiB, as the bench reports them")
if os.path.exists(f"{out}/layout.txt"):
    print(f"layout: {open(out + '/layout.txt').read().strip()}")
# Every rate in these tables is MiB/s (2^20 bytes), the unit of the bench's mb_per_s;
# fio, Google Benchmark and ring_throughput_benchmark's decimal MB/s are converted.
MIB = float(1 << 20)
DEC = 1e6 / MIB
memcpy = med([float(m.group(1)) * DEC for p in glob.glob(f"{out}/ring.r*.txt")
              for m in re.finditer(r"memcpy\s+4194304 B:\s+([\d.]+) MB/s", open(p).read())])
if "mem" in load:
    print(f"\n## 1. cluster, 3 OSDs, memory mode, auth none   load {load['mem']}")
    print(f"| metric | tcp | rdma (soft) | rdma/tcp |\n|---|---|---|---|")
    rows = [("4 KiB -t 1 p50 latency (us)", "4k.t1", "lat_us.p50", "{:,.1f}"),
            ("4 KiB -t 1 p99 latency (us)", "4k.t1", "lat_us.p99", "{:,.1f}"),
            ("4 KiB -t 16 IOPS", "4k.t16", "iops", "{:,.0f}"),
            ("4 KiB -t 16 p50 latency (us)", "4k.t16", "lat_us.p50", "{:,.1f}"),
            ("4 MiB -t 16 MiB/s", "4m.t16", "mb_per_s", "{:,.0f}"),
            ("4 MiB -t 16 OSD CPU-s/GB", "4m.t16", "cpu_s_per_gb.osds", "{:,.2f}"),
            ("4 KiB -t 16 OSD CPU-s/GB", "4k.t16", "cpu_s_per_gb.osds", "{:,.2f}"),
            ("4 MiB -t 16 client CPU-s/GB", "4m.t16", "cpu_s_per_gb.client", "{:,.2f}")]
    for name, case, key, fmt in rows:
        t, r = bench(f"mem.tcp.{case}", key), bench(f"mem.rdma.{case}", key)
        print(f"| {name} | {f(t, fmt)} | {f(r, fmt)} | {f(ratio(r, t), '{:.2f}x')} |")
    r4m = bench("mem.rdma.4m.t16", "mb_per_s")
    print(f"| single-thread memcpy 4 MiB (MiB/s) | {f(memcpy)} | rdma 4 MiB = {f(ratio(r4m, memcpy), '{:.0%}')} of memcpy | |")
if "clients" in load:
    n = open(f"{out}/clients.txt").read().strip()
    print(f"\n## 1b. {n} clients in one process (--clients {n}), 4 KiB, one write in flight each, memory mode   load {load['clients']}")
    print(f"| metric | tcp | rdma (soft) | rdma/tcp |\n|---|---|---|---|")
    for name, key, fmt in [("IOPS", "iops", "{:,.0f}"), ("p50 latency (us)", "lat_us.p50", "{:,.1f}"),
                           ("all connected to every OSD (s)", "connect_s", "{:,.3f}"),
                           ("OSD CPU-us per op", "cpu_us_per_op.osds", "{:,.1f}"),
                           ("client CPU-us per op", "cpu_us_per_op.client", "{:,.1f}")]:
        t, r = bench("clients.tcp", key), bench("clients.rdma", key)
        print(f"| {name} | {f(t, fmt)} | {f(r, fmt)} | {f(ratio(r, t), '{:.2f}x')} |")
if os.path.exists(f"{out}/idle.txt"):
    ticks, hz = map(int, open(f"{out}/idle.txt").read().split())
    print(f"\n## 5. idle cluster (mon + 3 OSDs), 10 s   load {load.get('idle','')}")
    print(f"CPU used: {ticks / hz:.2f} s in 10 s = {ticks / hz / 10:.1%} of one core")
if "durable" in load:
    fio = med([json.load(open(p))["jobs"][0]["write"]["bw_bytes"] / MIB
               for p in glob.glob(f"{out}/fio.r*.json")])
    fiosync = med([json.load(open(p))["jobs"][0]["write"]["bw_bytes"] / MIB
                   for p in glob.glob(f"{out}/fiosync.r*.json")])
    fds = {}
    for p in glob.glob(f"{out}/fdatasync.r*.json"):
        for b in json.load(open(p))["benchmarks"]:
            fds.setdefault(b["name"], []).append(b)
    def fd(name, k): return med([b[k] for b in fds.get(name, [])])
    print(f"\n## 2. cluster, 3 OSDs, durable mode, auth none   load {load['durable']}")
    print(f"| metric | tcp | rdma (soft) | rdma/tcp |\n|---|---|---|---|")
    for name, case, key in [("4 KiB -t 16 IOPS", "4k.t16", "iops"),
                            ("4 KiB -t 16 p50 latency (us)", "4k.t16", "lat_us.p50"),
                            ("4 MiB -t 16 MiB/s", "4m.t16", "mb_per_s")]:
        t, r = bench(f"dur.tcp.{case}", key), bench(f"dur.rdma.{case}", key)
        print(f"| {name} | {f(t)} | {f(r)} | {f(ratio(r, t), '{:.2f}x')} |")
    t4m = bench("dur.tcp.4m.t16", "mb_per_s")
    r4m = bench("dur.rdma.4m.t16", "mb_per_s")
    print(f"| fio seq 4 MiB O_DIRECT psync (MiB/s) | {f(fio)} | | |")
    print(f"| fio seq 4 MiB O_DIRECT psync + fdatasync each write (MiB/s) | {f(fiosync)} | | |")
    fd4m = fd("BM_WriteFdatasync/4194304/real_time", "bytes_per_second")
    print(f"| pwrite+fdatasync loop 4 MiB (MiB/s) | {f(None if fd4m is None else fd4m / MIB)} | | |")
    print(f"| pwrite+fdatasync loop 4 KiB (ops/s) | {f(fd('BM_WriteFdatasync/4096/real_time', 'items_per_second'))} | | |")
    print(f"| cluster 4 MiB / fio | {f(ratio(t4m, fio), '{:.0%}')} | {f(ratio(r4m, fio), '{:.0%}')} | |")
    print(f"| cluster 4 MiB / fio+fdatasync | {f(ratio(t4m, fiosync), '{:.0%}')} | {f(ratio(r4m, fiosync), '{:.0%}')} | |")
if "repl" in load:
    print(f"\n## 6. replication: 3 OSDs, pool size 1 vs 3, auth none   load {load['repl']}")
    print("client and OSD-to-OSD sessions over the same backend (--ms-cluster-type); memory mode "
          "overwrites 128 objects")
    print("| mode | cell | tcp size 1 | tcp size 3 | rdma size 1 | rdma size 3 | size 3/1 tcp | "
          "size 3/1 rdma | rdma/tcp size 3 |\n|---|---|---|---|---|---|---|---|---|")
    for mode in ("memory", "durable"):
        for case, key, name in (("4k.t16", "iops", "4 KiB -t 16 IOPS"),
                                ("4m.t16", "mb_per_s", "4 MiB -t 16 MiB/s")):
            v = {(t, s): bench(f"repl.{mode}.{t}.s{s}.{case}", key)
                 for t in ("tcp", "rdma") for s in (1, 3)}
            print(f"| {mode} | {name} | {f(v['tcp', 1])} | {f(v['tcp', 3])} | {f(v['rdma', 1])} | "
                  f"{f(v['rdma', 3])} | {f(ratio(v['tcp', 3], v['tcp', 1]), '{:.2f}x')} | "
                  f"{f(ratio(v['rdma', 3], v['rdma', 1]), '{:.2f}x')} | "
                  f"{f(ratio(v['rdma', 3], v['tcp', 3]), '{:.2f}x')} |")
if os.path.exists(f"{out}/store.json"):
    fio = med([json.load(open(p))["jobs"][0]["write"]["bw_bytes"] / MIB
               for p in glob.glob(f"{out}/store.fio.r*.json")])
    print(f"\n## 3. store only (store_benchmark, medians of {len(glob.glob(out + '/store.fio.r*.json'))})   load {load.get('store','')}")
    fiosync = med([json.load(open(p))["jobs"][0]["write"]["bw_bytes"] / MIB
                   for p in glob.glob(f"{out}/store.fiosync.r*.json")])
    print(f"fio seq 4 MiB O_DIRECT (same session): {f(fio)} MiB/s; "
          f"with --fdatasync=1: {f(fiosync)} MiB/s\n")
    print("| case | records/s | MiB/s | vs fio | appends/flush | flush us |\n|---|---|---|---|---|---|")
    for b in json.load(open(f"{out}/store.json"))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        mbs = b.get("bytes_per_second", 0) / MIB
        print(f"| {b['run_name']} | {f(b.get('items_per_second'))} | {f(mbs)} | "
              f"{f(ratio(mbs, fio), '{:.0%}')} | {f(b.get('appends_per_flush'), '{:.1f}')} | "
              f"{f(b.get('flush_us'), '{:,.0f}')} |")
if os.path.exists(f"{out}/tcp.json"):
    print(f"\n## 4. messenger only   load {load.get('msgr','')}")
    rows = {}
    for b in json.load(open(f"{out}/tcp.json"))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            name, size = b["run_name"].split("/")[:2]
            rows.setdefault(size, {})[name] = b.get("bytes_per_second", 0) / MIB
    print("| record size | messenger MiB/s | raw TCP MiB/s | messenger/raw |\n|---|---|---|---|")
    for size, d in sorted(rows.items(), key=lambda x: int(x[0])):
        m, r = d.get("BM_MessengerRingRecords"), d.get("BM_RawTcp")
        print(f"| {int(size) // 1024} KiB | {f(m)} | {f(r)} | {f(ratio(m, r), '{:.0%}')} |")
ring = {}
for p in glob.glob(f"{out}/ring.r*.txt"):
    for m in re.finditer(r"^(\w+)\s+(\d+) B records:\s+([\d.]+) MB/s\s+(\d+) records/s", open(p).read(), re.M):
        ring.setdefault((m.group(1), int(m.group(2))), []).append((float(m.group(3)) * DEC, float(m.group(4))))
if ring:
    print("\nring_throughput_benchmark (1 s per case; one ring, one drainer):")
    print("| backend | size | MiB/s | records/s | vs memcpy 4 MiB |\n|---|---|---|---|---|")
    for (t, s), v in sorted(ring.items(), key=lambda x: (x[0][1], x[0][0])):
        mb = med([x[0] for x in v])
        print(f"| {t} | {s // 1024} KiB | {f(mb)} | {f(med([x[1] for x in v]))} | {f(ratio(mb, memcpy), '{:.0%}')} |")
    print(f"| memcpy | 4 MiB | {f(memcpy)} | | |")
EOF
