#!/usr/bin/env bash
# A/B of two builds on this machine, interleaved: tools/bench_matrix.sh runs once per build
# per round, in the order A B B A A B B A ... (drift in the machine's load hits both
# alike), each on the binaries of its build (MSGR_BIN), then one table compares every cell:
# the median of A's runs, of B's, and B/A (a cell below --floor is marked). "in flight"
# rows (IOPS x mean latency: the ops really in the system at -t N) are shown, not judged:
# they tell a p50 that rose because more ops were kept in flight from one that rose alone.
# "steal %" rows (the bench's host_cpu.steal_pct: CPU time the hypervisor took from this
# VM during the run) are shown too: on a shared host they tell a noisy side.
#
#   tools/bench_ab.sh --a BIN_DIR --b BIN_DIR [--rounds N] [--only LIST] [--seconds S]
#                     [--reps N] [--out DIR] [--floor X] [--report]
#                     [--max-steal PCT] [--steal-retries N]
#
#   --a, --b      bazel-bin directories of the two builds (built with -c opt), e.g. a
#                 worktree of the older commit: git worktree add /tmp/old REV &&
#                 (cd /tmp/old && bazel build -c opt //...)
#   --rounds N    pairs of runs per build (default 2: A B B A)
#   --only LIST   bench_matrix sections (default mem,durable,msgr)
#   --seconds S   per bench run (default 3); --reps N repetitions inside each run (default 1)
#   --out DIR     raw results, one bench_matrix --out per run (default /tmp/ab.<pid>)
#   --floor X     B/A below X is marked (default 0.9; "lower is better" cells use A/B)
#   --report      only print the table from an earlier --out DIR
#   --max-steal PCT, --steal-retries N   passed to tools/bench_matrix.sh: a bench run with
#                 more host steal than PCT% (default 10) runs again, up to N (2) times
# The scripts used are this checkout's; only the binaries differ.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
A="" B="" ROUNDS=2 ONLY="mem,durable,msgr" SECS=3 REPS=1 OUT="" FLOOR=0.9 REPORT=0
# shellcheck source=tools/lib/flags.sh
source tools/lib/flags.sh
# shellcheck source=tools/lib/steal.sh
source tools/lib/steal.sh  # the defaults of --max-steal, --steal-retries (passed on)
FLAGS_SCRIPT=bench_ab.sh
usage_text() { flags_header tools/bench_ab.sh; }
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --a) flag_value A ;;
    --b) flag_value B ;;
    --rounds) flag_value ROUNDS ;;
    --only) flag_value ONLY ;;
    --seconds) flag_value SECS ;;
    --reps) flag_value REPS ;;
    --out) flag_value OUT ;;
    --floor) flag_value FLOOR ;;
    --report) REPORT=1 ;;
    --max-steal) flag_value STEAL_MAX ;;
    --steal-retries) flag_value STEAL_RETRIES ;;
    -h|--help) usage_text; exit 0 ;;
    *) flag_unknown ;;
  esac
done
OUT=${OUT:-/tmp/ab.$$}
if [[ $REPORT == 0 ]]; then
  for d in "$A" "$B"; do
    [[ -x "$d/osd_sim/osd" && -x "$d/client/bench/bench" ]] ||
      { echo "bench_ab.sh: '$d' has no built osd and bench (bazel build -c opt //... there)" >&2; exit 2; }
  done
  mkdir -p "$OUT"
  run=0
  for r in $(seq 1 "$ROUNDS"); do
    order=(A B); (( r % 2 == 0 )) && order=(B A)
    for side in "${order[@]}"; do
      run=$((run + 1))
      bin=$A; [[ $side == B ]] && bin=$B
      echo "bench_ab: round $r, $side ($bin) -> $OUT/$side.$run" >&2
      MSGR_BIN=$bin tools/bench_matrix.sh --no-build --only "$ONLY" --seconds "$SECS" \
        --reps "$REPS" --max-steal "$STEAL_MAX" --steal-retries "$STEAL_RETRIES" \
        --out "$OUT/$side.$run" > "$OUT/$side.$run.table" 2>"$OUT/$side.$run.log" ||
        echo "bench_ab: run $run ($side) failed: $OUT/$side.$run.log" >&2
    done
  done
fi
python3 - "$OUT" "$FLOOR" <<'EOF'
import glob, json, os, re, statistics, sys
out, floor = sys.argv[1], float(sys.argv[2])
MIB = float(1 << 20)
INFO = 2  # a cell shown for context: its ratio is B/A, never marked
def runs(side): return sorted(glob.glob(f"{out}/{side}.[0-9]*/"))
def cells(d):
    c = {}
    for p in glob.glob(f"{d}/*.json"):
        m = re.match(r"(mem|dur)\.(tcp|rdma)\.(\w+)\.(t\d+)\.r\d+\.json$", os.path.basename(p))
        if not m:
            continue
        try:
            j = json.load(open(p))
        except Exception:
            continue
        base = f"{m.group(1)} {m.group(2)} {m.group(3)} -{m.group(4)}"
        for key, name, hi in [("iops", "IOPS", 1), ("mb_per_s", "MiB/s", 1),
                              ("lat_us.p50", "p50 us", 0), ("cpu_s_per_gb.osds", "OSD CPU-s/GiB", 0)]:
            v = j
            for k in key.split("."):
                v = v.get(k) if isinstance(v, dict) else None
            if v is not None:
                c.setdefault((f"{base} {name}", hi), []).append(float(v))
        # Ops truly in flight (Little's law: IOPS x mean latency), shown, not judged: at a
        # fixed -t a build whose driver refills slots sooner keeps more ops in the system,
        # and each of them then queues longer, so its p50 rises with its IOPS.
        if j.get("iops") and (j.get("lat_us") or {}).get("avg"):
            c.setdefault((f"{base} in flight", INFO), []).append(j["iops"] * j["lat_us"]["avg"] / 1e6)
        # The hypervisor's steal during the run, shown: on a shared host it moves a cell
        # more than most changes do (a side whose runs had more steal is not slower code).
        steal = (j.get("host_cpu") or {}).get("steal_pct")
        if steal is not None:
            c.setdefault((f"{base} steal %", INFO), []).append(float(steal))
    if os.path.exists(f"{d}/tcp.json"):
        for b in json.load(open(f"{d}/tcp.json"))["benchmarks"]:
            if b.get("aggregate_name") == "median":
                c.setdefault((f"msgr {b['run_name']} MiB/s", 1), []).append(b["bytes_per_second"] / MIB)
    for p in glob.glob(f"{d}/ring.r*.txt"):
        for m in re.finditer(r"^(\w+)\s+(\d+) B records:\s+([\d.]+) MB/s", open(p).read(), re.M):
            c.setdefault((f"ring {m.group(1)} {int(m.group(2)) // 1024} KiB MB/s", 1), []).append(float(m.group(3)))
    return c
def gather(side):
    g = {}
    for d in runs(side):
        for k, v in cells(d).items():
            g.setdefault(k, []).extend(v)
    return g
a, b = gather("A"), gather("B")
print(f"# A/B ({out}): A = {len(runs('A'))} runs, B = {len(runs('B'))} runs; medians; "
      f"ratio = B/A (A/B where lower is better), marked '<' under {floor}")
print("| cell | A | B | ratio | |\n|---|---|---|---|---|")
worst = None
for key in sorted(set(a) & set(b)):
    name, hi = key
    ma, mb = statistics.median(a[key]), statistics.median(b[key])
    r = (mb / ma if ma else None) if hi else (ma / mb if mb else None)
    mark = "<" if r is not None and r < floor and hi != INFO else ""
    if r is not None and hi != INFO and (worst is None or r < worst[0]):
        worst = (r, name)
    print(f"| {name} | {ma:,.1f} | {mb:,.1f} | {'-' if r is None else f'{r:.2f}x'} | {mark} |")
if worst:
    print(f"\nworst cell: {worst[1]} at {worst[0]:.2f}x")
EOF
