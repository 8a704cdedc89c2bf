#!/usr/bin/env bash
# Test hosts on one machine: N network namespaces on one bridge, for running the monitor,
# the OSDs and clients as if on separate hosts (tcp only: the soft RDMA provider's sockets
# are per namespace; RDMA between machines needs the VMs of tools/rxe_vm.sh).
#
#   tools/hosts.sh start N        make hosts 0..N-1 (needs root)
#   tools/hosts.sh stop           remove every test host and the bridge
#   tools/hosts.sh status         list the hosts and their addresses
#   tools/hosts.sh exec K CMD...  run CMD on host K (ip netns exec)
#   tools/hosts.sh addr K         print host K's address
#   tools/hosts.sh link K up|down         cut or restore host K's link
#   tools/hosts.sh block K ADDR | unblock K ADDR
#                                 drop (or stop dropping) what host K sends to ADDR: a
#                                 one-way partition (a blackhole route, no firewall needed)
#
# Host K is the namespace msgr-hK with eth0 = 198.18.0.(K+1)/24 (198.18.0.0/15 is set aside
# for network benchmarks, RFC 2544), joined by the bridge msgr-br0, which holds 198.18.0.254
# so that tools on this machine reach every host. Nothing is routed: no default route, no
# forwarding, no address outside 198.18.0.0/24. MSGR_HOSTS_PREFIX changes the names (msgr).
set -euo pipefail
P=${MSGR_HOSTS_PREFIX:-msgr}
BR="$P-br0"
NET=198.18.0
die() { echo "hosts.sh: $*" >&2; exit 1; }
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

ns() { echo "$P-h$1"; }
hosts() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$P-h[0-9]+$" | sort -V || true; }
need_host() {
  [[ "$1" =~ ^[0-9]+$ ]] || die "host number expected, got '$1'"
  grep -qx "$(ns "$1")" <<<"$(ip netns list | awk '{print $1}')" \
    || die "no test host $1 (tools/hosts.sh start N makes hosts 0..N-1)"
}

stop_all() {
  local h
  for h in $(hosts); do
    # Daemons are stopped by their owners first (by pid); whatever is left would keep the
    # namespace's sockets alive, so say so.
    if [[ -n "$(ip netns pids "$h" 2>/dev/null)" ]]; then
      echo "hosts.sh: killing processes left on $h: $(ip netns pids "$h" | tr '\n' ' ')" >&2
      ip netns pids "$h" | xargs -r kill -9 2>/dev/null || true
    fi
    ip netns del "$h"
  done
  ip link del "$BR" 2>/dev/null || true
  # The root-side veth ends go with their peers; remove any left from a failed start.
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^$P-v[0-9]+$" \
    | xargs -r -n1 ip link del 2>/dev/null || true
}

CMD=${1:-}; [[ -n "$CMD" ]] || usage; shift
case "$CMD" in
  start)
    n=${1:-}; [[ "$n" =~ ^[0-9]+$ && $n -ge 1 && $n -le 200 ]] || die "start N: N from 1 to 200"
    [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"
    command -v ip >/dev/null || die "needs iproute2 (apt-get install iproute2)"
    [[ -z "$(hosts)" ]] || die "test hosts exist already ($(hosts | tr '\n' ' ')): tools/hosts.sh stop first"
    trap 'stop_all' ERR
    ip link add "$BR" type bridge
    ip addr add "$NET.254/24" dev "$BR"
    ip link set "$BR" up
    for ((k = 0; k < n; k++)); do
      h=$(ns "$k")
      ip netns add "$h"
      ip link add "$P-v$k" type veth peer name eth0 netns "$h"
      ip link set "$P-v$k" master "$BR" up
      ip -n "$h" addr add "$NET.$((k + 1))/24" dev eth0
      ip -n "$h" link set eth0 up
      ip -n "$h" link set lo up
    done
    trap - ERR
    echo "hosts.sh: $n test hosts: $(for ((k = 0; k < n; k++)); do printf '%s=%s ' "$(ns $k)" "$NET.$((k + 1))"; done)" >&2
    ;;
  stop) stop_all ;;
  status)
    for h in $(hosts); do
      printf '%s %s\n' "$h" "$(ip -n "$h" -4 -o addr show dev eth0 | awk '{print $4}')"
    done
    ;;
  exec)
    k=${1:-}; need_host "$k"; shift
    [[ $# -ge 1 ]] || die "exec K CMD..."
    exec ip netns exec "$(ns "$k")" "$@"
    ;;
  addr) need_host "${1:-}"; echo "$NET.$((${1} + 1))" ;;
  link)
    need_host "${1:-}"
    case "${2:-}" in up|down) ip -n "$(ns "$1")" link set eth0 "$2" ;; *) die "link K up|down" ;; esac
    ;;
  block|unblock)
    need_host "${1:-}"; [[ -n "${2:-}" ]] || die "$CMD K ADDR"
    if [[ $CMD == block ]]; then
      ip -n "$(ns "$1")" route add blackhole "$2/32"
    else
      ip -n "$(ns "$1")" route del blackhole "$2/32"
    fi
    ;;
  -h|--help) usage ;;
  *) die "unknown command '$CMD' (start, stop, status, exec, addr, link, block, unblock)" ;;
esac
