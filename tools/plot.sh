#!/usr/bin/env bash
# Comparison charts from bench JSON results (tools/bench.sh --json), drawn with gnuplot:
#
#   tools/plot.sh RESULT.json... [--out DIR] [--name PREFIX] [--title TEXT]
#
# Writes, in DIR (default: the first result's folder), each file named PREFIX-NAME when
# --name is given (e.g. memory-throughput.svg):
#   throughput.png/.svg   MB/s per object size (log scale), one bar per backend (ms_type)
#   iops.png/.svg         IOPS per object size, one bar per backend
#   latency_cdf.png/.svg  latency CDF (log scale): one colour per backend, one line style
#                         per object size
#   cpu.png/.svg          CPU-s per GiB written, OSDs and client, per backend and size
# The charts' titles start with TEXT when given (e.g. "memory mode").
# Exit status: 0 ok, 1 gnuplot or a result file failed, 2 bad arguments.
set -euo pipefail

# shellcheck source=tools/lib/flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/flags.sh"
FLAGS_SCRIPT=plot.sh
usage_text() { flags_header "${BASH_SOURCE[0]}"; }
usage() { usage_text >&2; exit 2; }
FILES=() OUT="" NAME="" TITLE=""
flags_begin "$@"
while flags_next; do
  case "$FLAG" in
    --out) flag_value OUT; [[ -n "$OUT" ]] || flags_error "--out needs a directory" ;;
    --name) flag_value NAME ;;
    --title) flag_value TITLE ;;
    -h|--help) usage ;;
    -*) flag_unknown ;;
    *) FILES+=("$FLAG") ;;
  esac
done
[[ ${#FILES[@]} -gt 0 ]] || { echo "plot.sh: no RESULT.json given" >&2; usage; }
for f in "${FILES[@]}"; do
  [[ -r "$f" ]] || { echo "plot.sh: cannot read $f" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
OUT=${OUT:-$(dirname "${FILES[0]}")}
mkdir -p "$OUT"
PFX=${NAME:+$NAME-}
TPFX=${TITLE:+$TITLE: }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# JSON -> gnuplot data files: bars.dat (size label, one MB/s and IOPS column per backend)
# and cdf_<backend>_<size>.dat (lat_us fraction), plus the gnuplot list of series.
python3 - "$WORK" "${FILES[@]}" <<'PY' || { echo "plot.sh: bad result file" >&2; exit 1; }
import json, math, os, sys
work, files = sys.argv[1], sys.argv[2:]
rows = []
for f in files:
    with open(f) as fh:
        r = json.load(fh)
    if r.get("mode", "write") != "write":
        continue
    rows.append(r)
if not rows:
    sys.exit("no write results among the files")
def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)
backends = sorted({r["ms_type"] for r in rows}, key=lambda b: (b != "tcp", b))
sizes = sorted({r["object_size"] for r in rows})
best = {}
for r in rows:  # several runs of one (backend, size): keep the last given
    best[(r["ms_type"], r["object_size"])] = r
def num(v):
    return "NaN" if v is None else str(v)
with open(os.path.join(work, "bars.dat"), "w") as out:
    out.write("# size " + " ".join(f"{b}_mbps {b}_iops" for b in backends) + "\n")
    for s in sizes:
        cols = []
        for b in backends:
            r = best.get((b, s))
            cols += [str(r["mb_per_s"]) if r else "NaN", str(r["iops"]) if r else "NaN"]
        out.write(human(s) + " " + " ".join(cols) + "\n")
# cpu.dat: size, then per backend the OSDs' and the client's CPU-s per GiB.
with open(os.path.join(work, "cpu.dat"), "w") as out:
    out.write("# size " + " ".join(f"{b}_osds {b}_client" for b in backends) + "\n")
    for s in sizes:
        cols = []
        for b in backends:
            c = (best.get((b, s)) or {}).get("cpu_s_per_gb") or {}
            cols += [num(c.get("osds")), num(c.get("client"))]
        out.write(human(s) + " " + " ".join(cols) + "\n")
series = []
for (b, s), r in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    pts = r.get("lat_cdf") or []
    if not pts:
        continue
    name = f"cdf_{b}_{human(s)}.dat"
    with open(os.path.join(work, name), "w") as out:
        for lat, frac in pts:
            out.write(f"{max(lat, 0.1)} {frac}\n")
    series.append((name, f"{b} {human(s)}", backends.index(b), sizes.index(s)))
with open(os.path.join(work, "meta.sh"), "w") as out:
    mbps = [r["mb_per_s"] for r in best.values() if r["mb_per_s"] > 0] or [1]
    out.write(f"MBPS_MIN={10 ** math.floor(math.log10(min(mbps) * 0.5))}\n")
    out.write(f"NB={len(backends)}\nNS={len(sizes)}\n")
    out.write("BACKENDS=(" + " ".join(backends) + ")\n")
    out.write("CDF_FILES=(" + " ".join(n for n, *_ in series) + ")\n")
    out.write("CDF_TITLES=(" + " ".join(f"'{t}'" for _, t, *_ in series) + ")\n")
    out.write("CDF_BACKEND=(" + " ".join(str(bi) for *_, bi, _ in series) + ")\n")
    out.write("CDF_SIZE=(" + " ".join(str(si) for *_, si in series) + ")\n")
PY
# shellcheck disable=SC1091
source "$WORK/meta.sh"

# One colour per backend in every chart (tcp blue, rdma orange, others after them).
COLOURS=("#1f77b4" "#ff7f0e" "#2ca02c" "#9467bd")
colour() { echo "${COLOURS[$(($1 % ${#COLOURS[@]}))]}"; }

bars() {  # bars TERMINAL EXT COLUMN_OFFSET YLABEL NAME YSCALE
  local term=$1 ext=$2 off=$3 ylabel=$4 name=$5 yscale=$6 plot="" i col
  for ((i = 0; i < NB; i++)); do
    col=$((2 + 2 * i + off))
    plot+="${plot:+, }'$WORK/bars.dat' using $col:xtic(1) title '${BACKENDS[$i]}' lc rgb '$(colour "$i")'"
  done
  gnuplot <<GP
set terminal $term size 800,500
set output '$OUT/$PFX$name.$ext'
set title '$TPFX$ylabel per object size'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set offsets 0, 0, graph 0.08, 0
set xrange [-0.6:$NS-0.4]
set key top left
set grid ytics
set ylabel '$ylabel'
set xlabel 'object size'
$yscale
plot $plot
GP
}

cdf() {  # cdf TERMINAL EXT
  local term=$1 ext=$2 plot="" i
  for ((i = 0; i < ${#CDF_FILES[@]}; i++)); do
    plot+="${plot:+, }'$WORK/${CDF_FILES[$i]}' using 1:2 with steps lw 2"
    plot+=" lc rgb '$(colour "${CDF_BACKEND[$i]}")' dt $((1 + CDF_SIZE[i])) title '${CDF_TITLES[$i]}'"
  done
  [[ -n "$plot" ]] || return 0
  gnuplot <<GP
set terminal $term size 800,500 dashed
set output '$OUT/${PFX}latency_cdf.$ext'
set title '${TPFX}write latency CDF (colour: backend, line style: object size)'
set logscale x
set format x '%g'
set xlabel 'latency (us)'
set ylabel 'fraction of ops'
set yrange [0:1]
set key bottom right
set grid
plot $plot
GP
}

cpu() {  # cpu TERMINAL EXT: per size, OSD (solid) and client (hatched) bars per backend
  local term=$1 ext=$2 plot="" i
  for ((i = 0; i < NB; i++)); do
    plot+="${plot:+, }'$WORK/cpu.dat' using $((2 + 2 * i)):xtic(1) title '${BACKENDS[$i]} OSDs'"
    plot+=" lc rgb '$(colour "$i")' fs solid 0.8"
    plot+=", '' using $((3 + 2 * i)) title '${BACKENDS[$i]} client' lc rgb '$(colour "$i")' fs pattern 4"
  done
  gnuplot <<GP
set terminal $term size 800,500
set output '$OUT/${PFX}cpu.$ext'
set title '${TPFX}CPU-s per GiB written (lower is better)'
set style data histogram
set style histogram clustered gap 1
set boxwidth 0.9
set offsets 0, 0, graph 0.08, 0
set xrange [-0.6:$NS-0.4]
set key top right
set grid ytics
set ylabel 'CPU-s per GiB'
set xlabel 'object size'
set yrange [0:*]
plot $plot
GP
}

for fmt in "pngcairo png" "svg svg"; do
  read -r term ext <<<"$fmt"
  # Throughput spans decades between 4K and 4M objects: log scale keeps every size readable.
  bars "$term" "$ext" 0 "MB/s" throughput "set logscale y; set yrange [$MBPS_MIN:*]"
  bars "$term" "$ext" 1 "IOPS" iops "set yrange [0:*]"
  cdf "$term" "$ext"
  cpu "$term" "$ext"
done
echo "plot.sh: charts in $OUT: ${PFX}throughput, ${PFX}iops, ${PFX}latency_cdf, ${PFX}cpu (.png and .svg)"
