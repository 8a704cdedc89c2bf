# Bench runs that the hypervisor disturbed, run again (sourced, not run; used by
# bench_matrix.sh and demo.sh; bench_ab.sh passes the limits on). On a shared host the
# hypervisor can take a third of this VM's CPUs for seconds at a time ("steal"), and a run
# then measures the host, not msgr:
# half the rate is common (docs/BENCHMARKS.md "Session 41"). The bench reports the steal
# during its run (JSON host_cpu.steal_pct); a run over the limit is run again and the
# least-stolen one kept.
#
#   source tools/lib/steal.sh            # before the flags: sets the defaults below
#   ... --max-steal) flag_value STEAL_MAX ;; --steal-retries) flag_value STEAL_RETRIES ;;
#   my_run() { tools/bench.sh ... --json "$1" ...; }   # one try, its JSON to $1
#   steal_retry PREFIX my_run [ARGS...]  # tries PREFIX.0.json, PREFIX.1.json, ...
#   echo "$STEAL_BEST"                   # the kept try's number ($STEAL_TRIES tries made)
#
# STEAL_MAX 0 never reruns. A try without a steal figure (the run failed, or an older
# bench) ends the retries; it is kept only if it is the first.

# shellcheck shell=bash disable=SC2034  # STEAL_BEST, STEAL_TRIES: read by the callers
STEAL_MAX=10 STEAL_RETRIES=2  # the defaults of --max-steal and --steal-retries
STEAL_BEST=0 STEAL_TRIES=0

# run_steal JSON: the run's host_cpu.steal_pct, or nothing (no file, no field)
run_steal() {
  python3 -c 'import json, sys
try:
    v = (json.load(open(sys.argv[1])).get("host_cpu") or {}).get("steal_pct")
except Exception:
    v = None
print("" if v is None else v)' "$1"
}

steal_retry() {
  local prefix=$1 run=$2 try steal best_steal=""
  shift 2
  STEAL_BEST=-1 STEAL_TRIES=0
  for ((try = 0; try <= STEAL_RETRIES; try++)); do
    "$run" "$prefix.$try.json" "$@"
    STEAL_TRIES=$((try + 1))
    steal=$(run_steal "$prefix.$try.json")
    if [[ -z $steal ]]; then
      [[ $STEAL_BEST -ge 0 ]] || STEAL_BEST=$try
      return 0
    fi
    if [[ $STEAL_BEST -lt 0 ]] || awk -v a="$steal" -v b="$best_steal" 'BEGIN { exit !(a < b) }'; then
      STEAL_BEST=$try best_steal=$steal
    fi
    awk -v s="$steal" -v m="$STEAL_MAX" 'BEGIN { exit !(m > 0 && s > m) }' || return 0
    [[ $try -lt $STEAL_RETRIES ]] || return 0
    echo "[$(date +%T)] $(basename "$prefix"): the hypervisor took $(printf %.1f "$steal")% of" \
      "this machine's CPUs during the run (over --max-steal $STEAL_MAX): running it again" >&2
  done
}
