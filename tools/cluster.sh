#!/usr/bin/env bash
# A vstart-like launcher: a monitor and N OSD processes on 127.0.0.1.
#
#   tools/cluster.sh start --cluster-dir DIR [--osds N] [--ms-type tcp|rdma|both]
#                          [--durability durable|buffered|memory] [--auth secret|none]
#                          [--pollers N] [--poller-cpus LIST] [--poller-spin-us US]
#                          [--poller-wakeup-us US] [--poller-nap-us US] [--poller-nap-rings N]
#                          [--poller-ack-spin-us US] [--poller-nap-depth N] [--ms-tcp-threads N]
#                          [--poller-notified-wakeup-us US]
#                          [--capacity BYTES] [--store-commit-window-us US] [--store-zero-ahead-kb KB]
#                          [--ring-bytes BYTES] [--rdma-device soft|IBDEV] [--grace-ms MS]
#                          [--rdma-max-registered-mb MB] [--rdma-ring-min-kb KB] [--pg-log-entries N]
#                          [--metrics] [--hosts] [--ms-mode crc|secure]
#                          [--pool-size N [--pool-min-size M]] [--ms-cluster-type tcp|rdma]
#                          returns once every OSD is up and every PG active (a warning if
#                          PGs still peer 30 s later)
#   tools/cluster.sh stop --cluster-dir DIR
#   tools/cluster.sh status --cluster-dir DIR
#   tools/cluster.sh start-osd --cluster-dir DIR --id K     (re)starts one OSD with its data
#   tools/cluster.sh stop-osd --cluster-dir DIR --id K [--kill]   (SIGTERM, or SIGKILL)
#   tools/cluster.sh start-mon --cluster-dir DIR   restarts the monitor on its address
#   tools/cluster.sh keys --cluster-dir DIR [--osds N]   the keyring and PKI only (for hosts)
#   tools/cluster.sh join --cluster-dir DIR --mon HOST:PORT --id K
#                         [--public-addr HOST | --public-network CIDR] [--host NAME]
#                         [--ms-type ...] [--durability ...] [other OSD flags of start]
#                         starts osd.K on this host in a cluster whose monitor runs
#                         elsewhere. DIR holds what was copied from the admin host: keyring,
#                         pki/ca.crt, pki/osd.K.crt and .key (README "Deploy on three hosts").
#                         start-osd / stop-osd then work on DIR as on a local cluster.
#
# Every flag also takes --flag=VALUE; --dir DIR is the old spelling of --cluster-dir DIR.
# DIR gets mon.addr (host:port of the gRPC monitor), mon.pid, osd.<id>.pid, keyring (when
# auth is on), log/, mon/ (monitor state), osd.<id>/ (OSD data), and run/ (admin sockets:
# run/osd.<id>.asok). --auth secret (the default) also makes DIR/pki: the cluster CA and a
# certificate per entity (mon, osd.K, client.admin, client.bench) for the monitor's mutual
# TLS; monctl, bench.sh and msgr.sh find them with --cluster-dir DIR. Free ports are chosen
# automatically.
# Settings: `start` writes DIR/msgr.conf, an INI file as Ceph's ceph.conf that the daemons
# and tools read themselves (given --cluster-dir DIR, or --conf FILE):
#   [global]  auth, ms-mode, rdma-device         [mon]     grace-ms, pool-size, pool-min-size
#   [osd]     ms-type, durability, pollers, capacity, ring-bytes, poller-*, rdma-*, ...
#   [osd.K]   osd.K only (join writes its host's settings there)   [client]  ms-type
# Keys are the daemons' long flag names (ms-type, ms_type and "ms type" alike); a flag on a
# daemon's command line overrides [osd.K], which overrides [osd] (or [mon], [client]), which
# overrides [global]. Edit it and restart a daemon (start-osd, start-mon) to change one;
# `start` rewrites it from its flags. DIR/cluster.conf (shell variables) keeps this
# script's own settings (--osds, --metrics, --hosts ...) for start-osd and start-mon.
# `keys` writes DIR/msgr.conf too (unless there is one) to copy to other hosts with the keys.
# --metrics: every daemon serves Prometheus /metrics on a free 127.0.0.1 port and writes it
# to DIR/<daemon>.metrics.addr (DIR/mon.metrics.addr, DIR/osd.0.metrics.addr, ...).
# --pool-size N: every object on N OSDs (the PG's primary forwards writes to the others over
# their cluster addresses; acknowledged once all up members have it, and at least
# --pool-min-size M, default N - N/2). Fixed when the cluster is created.
# --hosts: run every daemon on its own test host (tools/hosts.sh start N first; tcp only):
# the monitor on host 0, osd.i on host 1 + i mod (N-2) with N >= 3 (the last host is left
# for clients: tools/hosts.sh exec N-1 tools/bench.sh ...), on host 1 with N = 2. Each OSD
# advertises its host's address and the host's name (msgr-hK) as its failure domain.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# MSGR_BIN: where the binaries are (default bazel-bin; tests point it at their runfiles).
# MSGR_REBUILD=0 skips the `bazel build` step.
BIN="${MSGR_BIN:-$ROOT/bazel-bin}"
HOSTS_SH="$ROOT/tools/hosts.sh"

# shellcheck source=tools/lib/flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/flags.sh"
# shellcheck source=tools/lib/pki.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/pki.sh"
FLAGS_SCRIPT=cluster.sh
die() { echo "cluster.sh: $*" >&2; exit 1; }
usage_text() { flags_header "${BASH_SOURCE[0]}"; }
usage() { usage_text >&2; exit 2; }

CMD=${1:-}; [[ -n "$CMD" && "$CMD" != -h && "$CMD" != --help ]] || usage; shift
DIR="" OSDS=3 MS_TYPE=tcp DURABILITY=durable AUTH=secret POLLERS=1 POLLER_CPUS="" ID=""
POLLER_SPIN_US="" POLLER_WAKEUP_US="" POLLER_NAP_US="" POLLER_NAP_RINGS="" POLLER_NAP_DEPTH="" POLLER_ACK_SPIN_US="" MS_TCP_THREADS=""
CAPACITY=0 RING_BYTES="" RDMA_DEVICE="" RDMA_MAX_REG_MB="" RDMA_RING_MIN_KB="" PG_LOG_ENTRIES="" GRACE_MS=3000 KILL=0
POOL_SIZE=1 POOL_MIN_SIZE=0
METRICS=0 HOSTS=0 MS_MODE=crc MON="" PUBLIC_ADDR="" PUBLIC_NETWORK="" HOST_NAME=""
MS_CLUSTER_TYPE=""
declare -A GIVEN=()  # the flags on the command line (join writes those into [osd.K])
flags_begin "$@"
while flags_next; do
  if [[ -n $FLAG ]]; then GIVEN[$FLAG]=1; fi
  case "$FLAG" in
    --cluster-dir|--dir) flag_value DIR ;;
    --osds) flag_value OSDS ;;
    --ms-type) flag_value MS_TYPE ;;
    --durability) flag_value DURABILITY ;;
    --auth) flag_value AUTH ;;
    --pollers) flag_value POLLERS ;;
    --poller-cpus) flag_value POLLER_CPUS ;;
    --poller-spin-us) flag_value POLLER_SPIN_US ;;
    --poller-wakeup-us) flag_value POLLER_WAKEUP_US ;;
    --poller-nap-us) flag_value POLLER_NAP_US ;;
    --poller-nap-rings) flag_value POLLER_NAP_RINGS ;;
    --poller-nap-depth) flag_value POLLER_NAP_DEPTH ;;
    --poller-notified-wakeup-us) flag_value POLLER_NOTIFIED_WAKEUP_US ;;
    --ms-tcp-threads) flag_value MS_TCP_THREADS ;;
    --poller-ack-spin-us) flag_value POLLER_ACK_SPIN_US ;;
    --capacity) flag_value CAPACITY ;;
    --store-commit-window-us) flag_value STORE_COMMIT_WINDOW_US ;;
    --store-zero-ahead-kb) flag_value STORE_ZERO_AHEAD_KB ;;
    --ring-bytes) flag_value RING_BYTES ;;
    --rdma-device) flag_value RDMA_DEVICE ;;
    --rdma-max-registered-mb) flag_value RDMA_MAX_REG_MB ;;
    --rdma-ring-min-kb) flag_value RDMA_RING_MIN_KB ;;
    --pg-log-entries) flag_value PG_LOG_ENTRIES ;;
    --grace-ms) flag_value GRACE_MS ;;
    --pool-size) flag_value POOL_SIZE ;;
    --pool-min-size) flag_value POOL_MIN_SIZE ;;
    --id) flag_value ID ;;
    --kill) KILL=1 ;;
    --metrics) METRICS=1 ;;
    --hosts) HOSTS=1 ;;
    --ms-mode) flag_value MS_MODE ;;
    --ms-cluster-type) flag_value MS_CLUSTER_TYPE ;;
    --mon) flag_value MON ;;
    --public-addr) flag_value PUBLIC_ADDR ;;
    --public-network) flag_value PUBLIC_NETWORK ;;
    --host) flag_value HOST_NAME ;;
    -h|--help) usage ;;
    *) flag_unknown ;;
  esac
done
[[ -n "$DIR" ]] || die "--cluster-dir DIR is required"
[[ "$OSDS" =~ ^[0-9]+$ && "$OSDS" -ge 1 ]] || die "--osds must be a positive number"
case "$MS_TYPE" in tcp|rdma|both) ;; *) die "--ms-type must be tcp, rdma or both" ;; esac
case "$DURABILITY" in durable|buffered|memory) ;; *) die "--durability must be durable, buffered or memory" ;; esac
case "$AUTH" in secret|none) ;; *) die "--auth must be secret or none" ;; esac
case "$MS_MODE" in crc|secure) ;; *) die "--ms-mode must be crc or secure" ;; esac
case "$MS_CLUSTER_TYPE" in ""|tcp|rdma) ;; *) die "--ms-cluster-type must be tcp or rdma" ;; esac
if [[ $HOSTS == 1 && $CMD == start ]]; then
  [[ $MS_TYPE == tcp ]] || die "--hosts runs on network namespaces, which are tcp-only test hosts (the soft RDMA provider's sockets are per namespace); RDMA between hosts needs the VMs of tools/rxe_vm.sh"
  [[ $(bash "$HOSTS_SH" status | wc -l) -ge 2 ]] || die "--hosts needs test hosts: tools/hosts.sh start N (N >= 2; e.g. 5 for a monitor, 3 OSDs and a client)"
fi

ensure_built() {
  if [[ "${MSGR_REBUILD:-1}" == 1 || ! -x "$BIN/osd_sim/osd" || ! -x "$BIN/osd_sim/mon/mon" ]]; then
    (cd "$ROOT" && bazel build -c opt //osd_sim:osd //osd_sim/mon:mon //osd_sim/mon:monctl \
        //osd_sim/tools:msgr_admin >&2) || die "build failed (run tools/setup.sh first?)"
  fi
}

host_count() { bash "$HOSTS_SH" status | wc -l; }
# osd_host ID: the test host osd.ID runs on (see --hosts above).
osd_host() {
  local n
  n=$(host_count)
  if [[ $n -ge 3 ]]; then echo $((1 + $1 % (n - 2))); else echo 1; fi
}
# bind_host K: the address daemons on test host K bind (loopback without --hosts).
bind_host() { if [[ "${HOSTS:-0}" == 1 ]]; then bash "$HOSTS_SH" addr "$1"; else echo 127.0.0.1; fi; }

# alive PIDFILE: its process runs (a zombie, killed and not yet reaped, does not count).
alive() {
  local pid state
  [[ -f "$1" ]] || return 1
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
  [[ $state != Z && $state != gone ]]
}
# gone_within SECONDS PIDFILE: waits for a process just killed (kill -9 by a test or an
# operator) to be gone before starting its successor; false if it still runs then.
gone_within() {
  local deadline=$((SECONDS + $1))
  while alive "$2"; do
    [[ $SECONDS -lt $deadline ]] || return 1
    sleep 0.1
  done
}

# wait_for TIMEOUT_S DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local t=$1 what=$2; shift 2
  local deadline=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    [[ $SECONDS -lt $deadline ]] || return 1
    sleep 0.2
  done
}

write_conf() {  # the settings start-osd / start-mon restart daemons with
  cat > "$DIR/cluster.conf" <<EOF
OSDS=$OSDS
MS_TYPE=$MS_TYPE
DURABILITY=$DURABILITY
AUTH=$AUTH
POLLERS=$POLLERS
POLLER_CPUS="$POLLER_CPUS"
POLLER_SPIN_US="$POLLER_SPIN_US"
POLLER_WAKEUP_US="$POLLER_WAKEUP_US"
POLLER_NAP_US="$POLLER_NAP_US"
POLLER_NAP_RINGS="$POLLER_NAP_RINGS"
POLLER_NAP_DEPTH="${POLLER_NAP_DEPTH:-}"
POLLER_NOTIFIED_WAKEUP_US="${POLLER_NOTIFIED_WAKEUP_US:-}"
MS_TCP_THREADS="${MS_TCP_THREADS:-}"
POLLER_ACK_SPIN_US="${POLLER_ACK_SPIN_US:-}"
CAPACITY=$CAPACITY
STORE_COMMIT_WINDOW_US="${STORE_COMMIT_WINDOW_US:-}"
STORE_ZERO_AHEAD_KB="${STORE_ZERO_AHEAD_KB:-}"
RING_BYTES="$RING_BYTES"
RDMA_DEVICE="$RDMA_DEVICE"
RDMA_MAX_REG_MB="$RDMA_MAX_REG_MB"
RDMA_RING_MIN_KB="$RDMA_RING_MIN_KB"
PG_LOG_ENTRIES="$PG_LOG_ENTRIES"
METRICS=$METRICS
HOSTS=$HOSTS
GRACE_MS=$GRACE_MS
POOL_SIZE=$POOL_SIZE
POOL_MIN_SIZE=$POOL_MIN_SIZE
PUBLIC_ADDR="$PUBLIC_ADDR"
PUBLIC_NETWORK="$PUBLIC_NETWORK"
HOST_NAME="$HOST_NAME"
MS_MODE=$MS_MODE
MS_CLUSTER_TYPE="$MS_CLUSTER_TYPE"
EOF
}

# make_keys: the messenger's cluster secret (DIR/keyring) and the control plane's PKI: the
# cluster CA, the monitor, the admin and the bench clients (each OSD's certificate is
# issued when it starts, or by `keys --osds N`). Existing files are kept.
make_keys() {
  if [[ ! -f "$DIR/keyring" ]]; then
    (umask 077; echo "key = $(head -c 32 /dev/urandom | base64)" > "$DIR/keyring")
  fi
  { pki_init "$DIR" && pki_issue "$DIR" mon && pki_issue "$DIR" client.admin &&
    pki_issue "$DIR" client.bench; } || die "cannot make the cluster PKI in $DIR/pki"
}

# The OSD settings of msgr.conf, as "key = value" lines: each of SETTING (all when none
# is named) whose value is not empty.
osd_settings() {
  local line
  for line in "ms-type=$MS_TYPE" "durability=$DURABILITY" "pollers=$POLLERS" \
              "capacity=$CAPACITY" "store-commit-window-us=${STORE_COMMIT_WINDOW_US:-}" "store-zero-ahead-kb=${STORE_ZERO_AHEAD_KB:-}" "poller-cpus=$POLLER_CPUS" "poller-spin-us=$POLLER_SPIN_US" \
              "poller-wakeup-us=$POLLER_WAKEUP_US" "poller-nap-us=$POLLER_NAP_US" \
              "poller-nap-rings=$POLLER_NAP_RINGS" "poller-nap-depth=${POLLER_NAP_DEPTH:-}" "poller-notified-wakeup-us=${POLLER_NOTIFIED_WAKEUP_US:-}" "poller-ack-spin-us=${POLLER_ACK_SPIN_US:-}" "ms-tcp-threads=${MS_TCP_THREADS:-}" "ring-bytes=$RING_BYTES" \
              "rdma-device=$RDMA_DEVICE" "rdma-max-registered-mb=$RDMA_MAX_REG_MB" \
              "rdma-ring-min-kb=${RDMA_RING_MIN_KB:-}" "pg-log-entries=${PG_LOG_ENTRIES:-}" "ms-mode=$MS_MODE" "auth=$AUTH" \
              "public-addr=${PUBLIC_ADDR:-}" "public-network=${PUBLIC_NETWORK:-}" \
              "host=${HOST_NAME:-}" "ms-cluster-type=${MS_CLUSTER_TYPE:-}"; do
    if [[ $# -gt 0 && " $* " != *" ${line%%=*} "* ]]; then continue; fi
    if [[ -n ${line#*=} ]]; then echo "${line%%=*} = ${line#*=}"; fi
  done
}

# write_msgr_conf: DIR/msgr.conf, the settings the daemons and tools read themselves.
write_msgr_conf() {
  local client_ms=tcp
  if [[ $MS_TYPE == rdma ]]; then client_ms=rdma; fi
  {
    echo "# The cluster's settings (tools/cluster.sh $CMD, $(date -u +%FT%TZ)); flags override them."
    echo "# Keys: the daemons' long flag names. Precedence: flag > [osd.K] > [osd] > [global]."
    echo "[global]"
    osd_settings auth ms-mode rdma-device
    echo
    echo "[mon]"
    echo "grace-ms = $GRACE_MS"
    echo "pool-size = $POOL_SIZE"
    echo "pool-min-size = $POOL_MIN_SIZE"
    echo
    echo "[osd]"
    osd_settings ms-type durability pollers capacity store-commit-window-us store-zero-ahead-kb poller-cpus poller-spin-us \
      poller-wakeup-us poller-notified-wakeup-us poller-nap-us poller-nap-rings poller-nap-depth poller-ack-spin-us ms-tcp-threads ring-bytes rdma-max-registered-mb rdma-ring-min-kb pg-log-entries public-addr \
      public-network host ms-cluster-type
    echo
    echo "[client]"
    echo "ms-type = $client_ms"
  } > "$DIR/msgr.conf.tmp"
  mv "$DIR/msgr.conf.tmp" "$DIR/msgr.conf"
}

# set_osd_section K: [osd.K] of DIR/msgr.conf holds the OSD settings given on this command
# line (replacing an [osd.K] there was).
set_osd_section() {
  local keys=() flag
  for flag in "${!GIVEN[@]}"; do
    case "$flag" in
      --rdma-max-registered-mb) keys+=(rdma-max-registered-mb) ;;
      --host) keys+=(host) ;;
      --ms-type|--durability|--pollers|--capacity|--store-commit-window-us|--store-zero-ahead-kb|--poller-cpus|--poller-spin-us|\
      --poller-wakeup-us|--poller-notified-wakeup-us|--poller-nap-us|--poller-nap-rings|--poller-nap-depth|--poller-ack-spin-us|--ms-tcp-threads|--ring-bytes|--rdma-device|--rdma-ring-min-kb|--pg-log-entries|--ms-mode|--auth|\
      --public-addr|--public-network|--ms-cluster-type) keys+=("${flag#--}") ;;
    esac
  done
  awk -v s="[osd.$1]" '/^[[:space:]]*\[/ { skip = ($1 == s) } !skip' "$DIR/msgr.conf" \
    > "$DIR/msgr.conf.tmp"
  if [[ ${#keys[@]} -gt 0 ]]; then
    { echo; echo "[osd.$1]"; osd_settings "${keys[@]}"; } >> "$DIR/msgr.conf.tmp"
  fi
  mv "$DIR/msgr.conf.tmp" "$DIR/msgr.conf"
}

load_conf() {
  [[ -f "$DIR/cluster.conf" ]] || die "$DIR/cluster.conf not found: start the cluster first"
  # shellcheck disable=SC1091
  source "$DIR/cluster.conf"
  # A directory of an older cluster.sh: its daemons' settings were flags.
  if [[ ! -f "$DIR/msgr.conf" ]]; then write_msgr_conf; fi
}

# start_mon HOST:PORT: the monitor on that address (port 0: a free one, written to mon.addr).
start_mon() {
  # The rest (auth, grace, pool size) from DIR/msgr.conf.
  local mon_args=(--data-dir "$DIR/mon" --addr "$1" --addr-file "$DIR/mon.addr"
                  --cluster-dir "$DIR")
  rm -f "$DIR/mon.metrics.addr"
  if [[ "${METRICS:-0}" == 1 ]]; then
    mon_args+=(--metrics-addr "${1%:*}:0" --metrics-addr-file "$DIR/mon.metrics.addr")
  fi
  setsid bash -c 'exec "$@"' _ $(if [[ "${HOSTS:-0}" == 1 ]]; then echo ip netns exec msgr-h0; fi) \
    "$BIN/osd_sim/mon/mon" "${mon_args[@]}" >>"$DIR/log/mon.log" 2>&1 < /dev/null &
  echo $! > "$DIR/mon.pid"
}

start_osd() {
  local id=$1
  local pidf="$DIR/osd.$id.pid"
  gone_within 10 "$pidf" || die "osd.$id already running (pid $(cat "$pidf"))"
  mkdir -p "$DIR/osd.$id" "$DIR/run" "$DIR/log"
  # --cluster-dir DIR: the settings of DIR/msgr.conf ([global], [osd], [osd.ID]) and, with
  # auth secret, DIR/keyring and mutual TLS to the monitor with DIR/pki.
  local args=(--id "$id" --mon "$(cat "$DIR/mon.addr")" --data-dir "$DIR/osd.$id"
              --run-dir "$DIR/run" --cluster-dir "$DIR")
  if [[ "$AUTH" == secret ]]; then
    # Issued here on the admin host (DIR has the CA key); copied in on a joined host.
    if [[ ! -f "$DIR/pki/osd.$id.crt" || ! -f "$DIR/pki/osd.$id.key" ]]; then
      pki_issue "$DIR" "osd.$id" || die "cannot issue the certificate of osd.$id in $DIR/pki"
    fi
  fi
  local k=0 host=127.0.0.1
  if [[ "${HOSTS:-0}" == 1 ]]; then
    k=$(osd_host "$id")
    host=$(bind_host "$k")
    args+=(--public-addr "$host" --host "msgr-h$k")
  fi
  [[ -n "${PUBLIC_ADDR:-}" ]] && host=$PUBLIC_ADDR  # (public-addr is in msgr.conf)
  rm -f "$DIR/osd.$id.metrics.addr"
  if [[ "${METRICS:-0}" == 1 ]]; then
    args+=(--metrics-addr "$host:0" --metrics-addr-file "$DIR/osd.$id.metrics.addr")
  fi
  setsid bash -c 'exec "$@"' _ $(if [[ "${HOSTS:-0}" == 1 ]]; then echo ip netns exec "msgr-h$k"; fi) \
    "$BIN/osd_sim/osd" "${args[@]}" >>"$DIR/log/osd.$id.log" 2>&1 < /dev/null &
  echo $! > "$pidf"
}

osd_up() {  # osd_up ID: the monitor reports osd.ID up
  # As osd.ID (it may read the map): a joined host has no client.admin certificate.
  local who=()
  [[ "${AUTH:-secret}" == secret ]] && who=(--entity "osd.$1")
  "$BIN/osd_sim/mon/monctl" --cluster-dir "$DIR" "${who[@]}" map-json \
    | python3 -c "import json,sys; m=json.load(sys.stdin); sys.exit(0 if any(o['id']==$1 and o['up'] for o in m['osds']) else 1)"
}

all_up() {
  local id
  for ((id = 0; id < OSDS; id++)); do osd_up "$id" || return 1; done
}

# wait_osds_up SECONDS: 0 once every OSD is up in the map; 2 as soon as one of them has
# exited (its id in EXITED: a bad setting, a store it cannot open), 1 at the timeout.
wait_osds_up() {
  local deadline=$((SECONDS + $1)) id
  EXITED=""
  until all_up >/dev/null 2>&1; do
    for ((id = 0; id < OSDS; id++)); do
      alive "$DIR/osd.$id.pid" || { EXITED=$id; return 2; }
    done
    [[ $SECONDS -lt $deadline ]] || return 1
    sleep 0.2
  done
}

# stop_daemons: SIGTERM every OSD of DIR, then its monitor (`stop`, a failed `start`).
stop_daemons() {
  local pidf
  for pidf in "$DIR"/osd.*.pid; do [[ -e "$pidf" ]] && stop_pid "$pidf" TERM; done
  stop_pid "$DIR/mon.pid" TERM
}

# start_failed MESSAGE: a start that cannot finish stops the daemons it launched (their
# logs stay in DIR/log) and exits 1, so no half-started cluster is left running.
start_failed() {
  stop_daemons
  die "$*; stopped the daemons this start launched (logs in $DIR/log)"
}

# pgs_active: every up OSD reported (in a heartbeat) the monitor's latest map applied, and
# between them they lead every PG of every pool with none peering. An OSD being "up" is
# not enough: the PGs it leads peer after its boot (client ops on them wait meanwhile).
pgs_active() {
  local who=()
  [[ "${AUTH:-secret}" == secret ]] && who=(--entity osd.0)
  "$BIN/osd_sim/mon/monctl" --cluster-dir "$DIR" "${who[@]}" map-json | python3 -c '
import json, sys
m = json.load(sys.stdin)
up = [o for o in m["osds"] if o["up"]]
pgs = sum(p["pg_num"] for p in m["pools"]) if m.get("pools") else m["pg_num"]
current = all(o["applied_epoch"] >= m["epoch"] and "pgs_active" in o for o in up)
active = sum(o.get("pgs_active", 0) for o in up)
peering = sum(o.get("pgs_peering", 0) for o in up)
sys.exit(0 if up and current and active == pgs and peering == 0 else 1)'
}

# metrics_ready DAEMON...: with --metrics, each DAEMON (mon, osd.0, ...) has written the
# address it serves /metrics on (it does so once serving, after it is up).
metrics_ready() {
  [[ "${METRICS:-0}" == 1 ]] || return 0
  local d
  for d in "$@"; do [[ -s "$DIR/$d.metrics.addr" ]] || return 1; done
}

stop_pid() {  # stop_pid PIDFILE SIGNAL
  local pidf=$1 sig=$2 pid
  [[ -f "$pidf" ]] || return 0
  pid=$(cat "$pidf")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidf"
}

case "$CMD" in
  start)
    ensure_built
    mkdir -p "$DIR/log" "$DIR/mon" "$DIR/run"
    DIR=$(cd "$DIR" && pwd)
    if alive "$DIR/mon.pid"; then die "a cluster is already running in $DIR (stop it first)"; fi
    [[ "$POOL_SIZE" =~ ^[1-9][0-9]?$ && "$POOL_MIN_SIZE" =~ ^[0-9]+$ ]] \
      || die "--pool-size takes 1..16 and --pool-min-size 0..N (got $POOL_SIZE, $POOL_MIN_SIZE)"
    if ((POOL_SIZE > OSDS)); then
      echo "cluster.sh: warning: pool size $POOL_SIZE > $OSDS OSDs: each object gets $OSDS copies" >&2
    fi
    write_conf
    write_msgr_conf
    [[ "$AUTH" == secret ]] && make_keys
    rm -f "$DIR/mon.addr" "$DIR/mon.metrics.addr"
    start_mon "$(bind_host 0):0"
    wait_for 20 "monitor address" test -s "$DIR/mon.addr" \
      || start_failed "monitor did not start within 20 s; see $DIR/log/mon.log"
    for ((id = 0; id < OSDS; id++)); do start_osd "$id"; done
    rc=0
    wait_osds_up 60 || rc=$?
    if [[ $rc == 2 ]]; then
      why=$(grep -E '^osd: |\[(error|critical)\]' "$DIR/log/osd.$EXITED.log" | tail -n 1)
      start_failed "osd.$EXITED exited while starting: ${why:-see $DIR/log/osd.$EXITED.log}"
    elif [[ $rc != 0 ]]; then
      start_failed "not all OSDs came up within 60 s; see $DIR/log/osd.*.log"
    fi
    daemons=(mon)
    for ((id = 0; id < OSDS; id++)); do daemons+=("osd.$id"); done
    wait_for 20 "metrics addresses" metrics_ready "${daemons[@]}" \
      || start_failed "not every daemon serves /metrics within 20 s; see $DIR/log/"
    if ((OSDS > 0)) && ! wait_for 30 "PGs active" pgs_active; then
      echo "cluster.sh: warning: PGs not all active 30 s after the OSDs came up (ops on" \
        "the others wait); see tools/cluster.sh status --cluster-dir $DIR" >&2
    fi
    where=""
    [[ $HOSTS == 1 ]] && where=" on test hosts msgr-h0..msgr-h$(($(host_count) - 1))"
    echo "cluster up in $DIR$where: mon $(cat "$DIR/mon.addr"), $OSDS OSDs, ms-type $MS_TYPE, durability $DURABILITY, auth $AUTH" >&2
    ;;
  stop)
    stop_daemons
    rm -f "$DIR"/*.metrics.addr
    echo "cluster in $DIR stopped" >&2
    ;;
  status)
    [[ -f "$DIR/mon.addr" ]] || die "no cluster in $DIR (no mon.addr)"
    alive "$DIR/mon.pid" || die "monitor of $DIR is not running"
    "$BIN/osd_sim/mon/monctl" --cluster-dir "$DIR" status
    # Peering and recovery, from the admin sockets of this host's OSDs (perf dump 'peering').
    for asok in "$DIR"/run/osd.*.asok; do
      [[ -S "$asok" ]] || continue
      osd=$(basename "$asok" .asok)
      "$BIN/osd_sim/tools/msgr_admin" "$asok" perf dump 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin).get("peering")
if p:
    state = "peering (ops on those PGs wait)" if p["pgs_peering"] else "all active"
    print("%s: %d PGs led, %d peering: %s; recovered %d objects (%.1f MiB) in %d pulls, %d pushes"
          " (%d syncs from PG logs, %d backfills)"
          % (sys.argv[1], p["pgs_active"] + p["pgs_peering"], p["pgs_peering"], state,
             p["objects_recovered"], p["bytes_recovered"] / 1048576.0, p["pulls"], p["pushes"],
             p.get("recoveries_from_log", 0) + p.get("pulls_from_log", 0), p.get("backfills", 0)))
' "$osd" || true
    done
    ;;
  start-osd)
    [[ -n "$ID" ]] || die "start-osd needs --id K"
    DIR=$(cd "$DIR" && pwd)
    load_conf
    start_osd "$ID"
    wait_for 30 "osd.$ID up" osd_up "$ID" || die "osd.$ID did not come up within 30 s; see $DIR/log/osd.$ID.log"
    wait_for 20 "osd.$ID metrics" metrics_ready "osd.$ID" \
      || die "osd.$ID does not serve /metrics within 20 s; see $DIR/log/osd.$ID.log"
    echo "osd.$ID up" >&2
    ;;
  keys)
    mkdir -p "$DIR"
    make_keys
    for ((id = 0; id < OSDS; id++)); do
      pki_issue "$DIR" "osd.$id" || die "cannot issue the certificate of osd.$id"
    done
    [[ -f "$DIR/msgr.conf" ]] || write_msgr_conf  # the settings given here, to copy too
    echo "keys in $DIR: keyring, pki/ (ca, mon, client.admin, client.bench, osd.0..osd.$((OSDS - 1))), msgr.conf" >&2
    ;;
  join)
    [[ -n "$ID" && "$ID" =~ ^[0-9]+$ ]] || die "join needs --id K"
    [[ -n "$MON" ]] || die "join needs --mon HOST:PORT (the monitor's address)"
    [[ $HOSTS == 0 ]] || die "join runs an OSD on this host; --hosts is for local test hosts"
    mkdir -p "$DIR/log" "$DIR/run"
    DIR=$(cd "$DIR" && pwd)
    if [[ "$AUTH" == secret ]]; then
      for f in keyring pki/ca.crt "pki/osd.$ID.crt" "pki/osd.$ID.key"; do
        [[ -f "$DIR/$f" ]] && continue
        if [[ $f == pki/osd.* && -f "$DIR/pki/ca.key" ]]; then continue; fi  # issued below
        die "no $DIR/$f: copy it from the admin host's cluster directory (make it there with: bash tools/lib/pki.sh issue DIR osd.$ID)"
      done
    fi
    ensure_built
    echo "$MON" > "$DIR/mon.addr"
    OSDS=0  # no OSD of this directory is started by `start`; start-osd takes --id
    write_conf
    # The admin host's msgr.conf when copied here (with this host's flags in [osd.ID]),
    # else one from this command line.
    if [[ -f "$DIR/msgr.conf" ]]; then set_osd_section "$ID"; else write_msgr_conf; fi
    start_osd "$ID"
    wait_for 60 "osd.$ID up" osd_up "$ID" \
      || die "osd.$ID did not come up within 60 s; see $DIR/log/osd.$ID.log"
    echo "osd.$ID joined the cluster of the monitor at $MON" >&2
    ;;
  start-mon)
    DIR=$(cd "$DIR" && pwd)
    load_conf
    gone_within 10 "$DIR/mon.pid" || die "the monitor of $DIR is running (pid $(cat "$DIR/mon.pid"))"
    [[ -s "$DIR/mon.addr" ]] || die "no $DIR/mon.addr: start the cluster first"
    start_mon "$(cat "$DIR/mon.addr")"  # the same address: daemons and clients keep it
    wait_for 30 "monitor" "$BIN/osd_sim/mon/monctl" --cluster-dir "$DIR" status \
      || die "the monitor did not come back within 30 s; see $DIR/log/mon.log"
    echo "mon up at $(cat "$DIR/mon.addr")" >&2
    ;;
  stop-osd)
    [[ -n "$ID" ]] || die "stop-osd needs --id K"
    if [[ $KILL == 1 ]]; then stop_pid "$DIR/osd.$ID.pid" KILL; else stop_pid "$DIR/osd.$ID.pid" TERM; fi
    ;;
  *) usage ;;
esac
