#!/usr/bin/env bash
# The main job: set up, build, start a local cluster (monitor + 3 OSDs), run the object-write
# benchmark for each messenger backend at a few object sizes, print one side-by-side table,
# write JSON and charts to a results folder, stop the cluster.
#
#   tools/demo.sh [--ms-type both|tcp|rdma] [--seconds S] [--sizes 4K,64K,4M]
#                 [--concurrency N] [--osds N] [--durability durable|buffered|memory]
#                 [--results DIR] [--cluster-dir DIR] [--layout pinned|free] [--keep-data]
#
# --cluster-dir DIR: the cluster's directory (default: a new one under /tmp); --dir DIR is
# its old spelling. Every flag also takes --flag=VALUE.
# Defaults: both backends, 4K/64K/4M objects, 6 s per run (about a minute in all),
# concurrency 16, durable OSDs, results in ./results/<timestamp>/, layout pinned: on a
# machine with 2 or more CPUs the OSDs' pollers (which spin on RDMA rings) share the last
# CPU and leave the others to the client, the flushers and the TCP readers -- as in
# tools/bench_matrix.sh (durable 4 KiB -t 16 over rdma: ~7.5k IOPS pinned vs ~6k free here).
# The cluster's logs are copied into the results folder; its data (GBs: the OSDs' logs of
# everything written) is removed when the demo made the directory itself, unless --keep-data.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

MS_TYPE=both SECONDS_PER_RUN=6 SIZES=4K,64K,4M CONCURRENCY=16 OSDS=3 DURABILITY=durable
RESULTS="" CLUSTER_DIR="" LAYOUT=pinned KEEP_DATA=0
# shellcheck source=tools/lib/flags.sh
source tools/lib/flags.sh
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
    --durability) flag_value DURABILITY ;;
    --results) flag_value RESULTS ;;
    --cluster-dir|--dir) flag_value CLUSTER_DIR ;;
    --layout) flag_value LAYOUT ;;
    --keep-data) KEEP_DATA=1 ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done
case "$MS_TYPE" in both) BACKENDS=(tcp rdma) ;; tcp|rdma) BACKENDS=("$MS_TYPE") ;;
  *) die "--ms-type must be both, tcp or rdma" ;; esac
[[ "$SECONDS_PER_RUN" =~ ^[0-9]+$ && "$SECONDS_PER_RUN" -ge 1 ]] || die "--seconds must be a positive number"
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

echo "== setup (tools/setup.sh)" >&2
bash tools/setup.sh
echo "== build (bazel build -c opt)" >&2
bazel build -c opt //osd_sim:osd //osd_sim/mon:mon //osd_sim/mon:monctl \
  //osd_sim/tools:msgr_admin //client/bench:bench >&2

CLUSTER_MS=$MS_TYPE
[[ "$MS_TYPE" == both ]] && CLUSTER_MS=both
cleanup() {
  MSGR_REBUILD=0 bash tools/cluster.sh stop --cluster-dir "$CLUSTER_DIR" || true
  if [[ -d "$CLUSTER_DIR/log" ]]; then cp -r "$CLUSTER_DIR/log" "$RESULTS/cluster-log" || true; fi
  if [[ $OWN_DIR == 1 && $KEEP_DATA == 0 ]]; then
    rm -rf "$CLUSTER_DIR"
    echo "cluster data in $CLUSTER_DIR removed (logs: $RESULTS/cluster-log; --keep-data keeps it)" >&2
  fi
}
trap cleanup EXIT
echo "== cluster: monitor + $OSDS OSDs in $CLUSTER_DIR (ms-type $CLUSTER_MS, $DURABILITY, layout $LAYOUT${PIN[*]:+: ${PIN[*]}})" >&2
MSGR_REBUILD=0 bash tools/cluster.sh start --cluster-dir "$CLUSTER_DIR" --osds "$OSDS" \
  --ms-type "$CLUSTER_MS" --durability "$DURABILITY" "${PIN[@]}"
MSGR_REBUILD=0 bash tools/cluster.sh status --cluster-dir "$CLUSTER_DIR" >&2
MON=$(cat "$CLUSTER_DIR/mon.addr")

FILES=()
for ms in "${BACKENDS[@]}"; do
  for size in ${SIZES//,/ }; do
    out="$RESULTS/$ms-$size.json"
    echo "== bench: --ms-type $ms -b $size -t $CONCURRENCY --seconds $SECONDS_PER_RUN" >&2
    MSGR_REBUILD=0 bash tools/bench.sh --mon "$MON" --ms-type "$ms" -b "$size" \
      -t "$CONCURRENCY" --seconds "$SECONDS_PER_RUN" --json "$out" --verify \
      --auth secret --cluster-dir "$CLUSTER_DIR" --prefix "demo-$ms-$size" >&2
    FILES+=("$out")
  done
done

python3 - "${FILES[@]}" <<'EOF'
import json, sys
rows = [json.load(open(f)) for f in sys.argv[1:]]
def human(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)
sizes = sorted({r["object_size"] for r in rows})
backends = [b for b in ("tcp", "rdma") if any(r["ms_type"] == b for r in rows)]
print()
print(f"{'size':>5} {'backend':>7} {'MB/s':>9} {'IOPS':>9} {'p50 us':>9} {'p99 us':>9} "
      f"{'OSD CPU-s/GB':>13} {'verify':>12}")
for s in sizes:
    for b in backends:
        for r in rows:
            if r["object_size"] == s and r["ms_type"] == b:
                v = r["verify"]
                print(f"{human(s):>5} {b:>7} {r['mb_per_s']:>9.1f} {r['iops']:>9.0f} "
                      f"{r['lat_us']['p50']:>9.0f} {r['lat_us']['p99']:>9.0f} "
                      f"{r['cpu_s_per_gb']['osds']:>13.2f} "
                      f"{str(v['checked']) + '/' + str(v['mismatches']) + ' bad':>12}")
print()
EOF

bash tools/plot.sh "${FILES[@]}" --out "$RESULTS" >&2
echo "results: $RESULTS (JSON per run; charts: $RESULTS/*.png, $RESULTS/*.svg)"
