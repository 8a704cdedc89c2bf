#!/usr/bin/env bash
# The main job: set up, build, start a local cluster (monitor + 3 OSDs), run the object-write
# benchmark for each messenger backend at a few object sizes in two sections -- memory mode
# (the messenger alone: the OSDs keep objects in RAM) and durable mode (every write on disk
# before its ack) -- print a table and a one-line verdict per section ("rdma vs tcp: N x
# IOPS at 4K, M x lower p50, K x less OSD CPU per GiB"), write JSON, charts and a
# self-contained report.html to a results folder, stop the cluster.
#
#   tools/demo.sh [--ms-type both|tcp|rdma] [--seconds S] [--sizes 4K,64K,4M]
#                 [--concurrency N] [--osds N] [--sections memory,durable]
#                 [--results DIR] [--cluster-dir DIR] [--layout free|pinned] [--keep-data]
#                 [--max-steal PCT] [--steal-retries N]
#
# --sections: durability modes to run, in order (memory, buffered, durable); --durability
# MODE is the old spelling of --sections MODE. --cluster-dir DIR: the cluster's directory
# (default: a new one under /tmp); --dir DIR is its old spelling. Every flag also takes
# --flag=VALUE. --max-steal PCT: a run during which the hypervisor took more than PCT% of
# this machine's CPUs (shared hosts do) is run again, up to --steal-retries N times, and the
# least-stolen run is kept (defaults 10 and 2; 0 never reruns; tools/lib/steal.sh); every
# try stays in <section>/tries/.
# Defaults: both backends, 4K/64K/4M objects, 5 s per run (12 runs: about 90 s of
# benchmarking), concurrency 16, results in ./results/<timestamp>/, layout free: no tuning
# flag, the OSDs' pollers decide when to spin and when to sleep (hybrid polling,
# msg/base/spin_policy.h). --layout pinned makes the OSDs' pollers share the last CPU
# (--poller-cpus), as before hybrid polling; it no longer wins (README, Benchmarks).
# Bounded at any --seconds in memory: each run overwrites a working set of objects
# (bench --max-objects: 64 MiB of objects, at least 64 of them), and each section starts a
# fresh cluster. On disk, the store's compaction keeps the durable section's log near its
# live data; it is removed with the cluster. The cluster's logs are
# copied into the results folder; its data is removed when the demo made the directory
# itself, unless --keep-data. MSGR_REBUILD=0 skips the setup and the build when the
# binaries exist (as in cluster.sh and bench.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

MS_TYPE=both SECONDS_PER_RUN=5 SIZES=4K,64K,4M CONCURRENCY=16 OSDS=3 SECTIONS=memory,durable
RESULTS="" CLUSTER_DIR="" LAYOUT=free KEEP_DATA=0
# shellcheck source=tools/lib/flags.sh
source tools/lib/flags.sh
# shellcheck source=tools/lib/steal.sh
source tools/lib/steal.sh
FLAGS_SCRIPT=demo.sh
die() { echo "demo.sh: $*" >&2; exit 1; }
usage_text() { flags_header tools/demo.sh; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --ms-type) flag_value MS_TYPE ;;
    --seconds) flag_value SECONDS_PER_RUN ;;
    --sizes) flag_value SIZES ;;
    --concurrency|-t) flag_value CONCURRENCY ;;
    --osds) flag_value OSDS ;;
    --sections|--durability) flag_value SECTIONS ;;
    --results) flag_value RESULTS ;;
    --cluster-dir|--dir) flag_value CLUSTER_DIR ;;
    --layout) flag_value LAYOUT ;;
    --keep-data) KEEP_DATA=1 ;;
    --max-steal) flag_value STEAL_MAX ;;
    --steal-retries) flag_value STEAL_RETRIES ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done
case "$MS_TYPE" in both) BACKENDS=(tcp rdma) ;; tcp|rdma) BACKENDS=("$MS_TYPE") ;;
  *) die "--ms-type must be both, tcp or rdma" ;; esac
[[ "$SECONDS_PER_RUN" =~ ^[0-9]+$ && "$SECONDS_PER_RUN" -ge 1 ]] || die "--seconds must be a positive number"
[[ "$STEAL_MAX" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--max-steal must be a percentage (0: never rerun)"
[[ "$STEAL_RETRIES" =~ ^[0-9]+$ ]] || die "--steal-retries must be a count"
for section in ${SECTIONS//,/ }; do
  case "$section" in memory|buffered|durable) ;;
    *) die "--sections: '$section' is not memory, buffered or durable" ;; esac
done
PIN=()
case "$LAYOUT" in
  pinned) NCPU=$(nproc); [[ $NCPU -ge 2 ]] && PIN=(--poller-cpus $((NCPU - 1))) ;;
  free) ;;
  *) die "--layout must be pinned or free" ;;
esac

STAMP=$(date +%Y%m%d-%H%M%S)
RESULTS=${RESULTS:-$ROOT/results/$STAMP}
OWN_DIR=0
if [[ -z "$CLUSTER_DIR" ]]; then CLUSTER_DIR=$(mktemp -d /tmp/msgr-demo.XXXXXX); OWN_DIR=1; fi
mkdir -p "$RESULTS"

if [[ "${MSGR_REBUILD:-1}" == 0 && -x bazel-bin/client/bench/bench && -x bazel-bin/osd_sim/osd ]]; then
  echo "== setup and build skipped (MSGR_REBUILD=0: the binaries in bazel-bin)" >&2
else
  echo "== setup (tools/setup.sh)" >&2
  bash tools/setup.sh
  echo "== build (bazel build -c opt)" >&2
  bazel build -c opt //osd_sim:osd //osd_sim/mon:mon //osd_sim/mon:monctl \
    //osd_sim/tools:msgr_admin //client/bench:bench >&2
fi

SECTION=""
save_logs() {
  if [[ -n "$SECTION" && -d "$CLUSTER_DIR/log" ]]; then
    mkdir -p "$RESULTS/cluster-log"
    cp -r "$CLUSTER_DIR/log" "$RESULTS/cluster-log/$SECTION" || true
  fi
}
cleanup() {
  MSGR_REBUILD=0 bash tools/cluster.sh stop --cluster-dir "$CLUSTER_DIR" >/dev/null 2>&1 || true
  save_logs
  if [[ $OWN_DIR == 1 && $KEEP_DATA == 0 ]]; then
    rm -rf "$CLUSTER_DIR"
    echo "cluster data in $CLUSTER_DIR removed (logs: $RESULTS/cluster-log; --keep-data keeps it)" >&2
  fi
}
trap cleanup EXIT

echo "$OSDS OSDs, ms-type $MS_TYPE, -t $CONCURRENCY, $SECONDS_PER_RUN s per run, layout $LAYOUT${PIN[*]:+ (${PIN[*]})}, $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC')" > "$RESULTS/meta.txt"
for section in ${SECTIONS//,/ }; do
  if [[ -n "$SECTION" ]]; then  # the previous section's cluster: stop it, free its data
    MSGR_REBUILD=0 bash tools/cluster.sh stop --cluster-dir "$CLUSTER_DIR" >/dev/null
    save_logs
    rm -rf "$CLUSTER_DIR"/osd.* "$CLUSTER_DIR/mon" "$CLUSTER_DIR/log"
  fi
  SECTION=$section
  echo "== $section section: monitor + $OSDS OSDs in $CLUSTER_DIR (ms-type $MS_TYPE, layout $LAYOUT${PIN[*]:+: ${PIN[*]}})" >&2
  MSGR_REBUILD=0 bash tools/cluster.sh start --cluster-dir "$CLUSTER_DIR" --osds "$OSDS" \
    --ms-type "$MS_TYPE" --durability "$section" "${PIN[@]}"
  MON=$(cat "$CLUSTER_DIR/mon.addr")
  mkdir -p "$RESULTS/$section"
  FILES=()
  for ms in "${BACKENDS[@]}"; do
    for size in ${SIZES//,/ }; do
      out="$RESULTS/$section/$ms-$size.json"
      bytes=$(python3 -c "
import sys; s = sys.argv[1].upper().rstrip('B').rstrip('I')
m = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}.get(s[-1:], 1)
print(int(s[:-1] if s[-1:] in 'KMG' else s) * m)" "$size") || die "--sizes: bad size '$size'"
      working_set=$(( (64 << 20) / bytes )); [[ $working_set -ge 64 ]] || working_set=64
      echo "== bench ($section): --ms-type $ms -b $size -t $CONCURRENCY --seconds $SECONDS_PER_RUN --max-objects $working_set" >&2
      demo_bench() {  # demo_bench JSON: one try of this run
        MSGR_REBUILD=0 bash tools/bench.sh --mon "$MON" --ms-type "$ms" -b "$size" \
          -t "$CONCURRENCY" --seconds "$SECONDS_PER_RUN" --json "$1" --verify \
          --max-objects "$working_set" --auth secret --cluster-dir "$CLUSTER_DIR" \
          --prefix "demo-$ms-$size" >&2
      }
      mkdir -p "$RESULTS/$section/tries"
      steal_retry "$RESULTS/$section/tries/$ms-$size" demo_bench
      cp "$RESULTS/$section/tries/$ms-$size.$STEAL_BEST.json" "$out"
      [[ $STEAL_TRIES == 1 ]] ||
        echo "== kept try $STEAL_BEST of $STEAL_TRIES (the least stolen)" >&2
      FILES+=("$out")
    done
  done
  bash tools/plot.sh "${FILES[@]}" --out "$RESULTS" --name "$section" --title "$section mode" >&2
done

python3 tools/report.py "$RESULTS" --html "$RESULTS/report.html"
echo "results: $RESULTS (report.html; JSON per run in <section>/; charts: <section>-*.png/.svg)"
