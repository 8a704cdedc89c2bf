#!/usr/bin/env bash
# Runs a command on TWO throw-away Soft-RoCE VMs at once, joined point to point: RDMA
# between two machines, each with its own kernel and its own rxe device.
#
#   tools/rxe_vms.sh [--timeout SECONDS] [--grace SECONDS] [--verbose] [--share DIR]...
#                    [--env NAME=VALUE]... [--mtu-a BYTES] [--mtu-b BYTES] -- COMMAND...
#
# Guest "a" is 198.18.1.1/24, guest "b" 198.18.1.2/24 (RFC 2544's benchmark range), each
# on its own virtio NIC eth0; the two NICs are joined by qemu's `-netdev dgram` over host
# loopback (UDP 127.0.0.1:P_A <-> 127.0.0.1:P_B, nothing else: no multicast, no route out).
# Each guest makes rxe0 on eth0, so its GIDs come from its own address (::ffff:198.18.1.x,
# RoCE v2). The eth0 MTUs differ on purpose (a: 9000 -> rxe active_mtu 4096, b: 1500 ->
# 1024; --mtu-a/--mtu-b change them): the QPs must agree on the smaller path MTU.
#
# COMMAND (its words joined by spaces) runs in BOTH guests, as in tools/rxe_vm.sh (bash -c,
# root, the work tree, `ulimit -l unlimited`), with
#   MSGR_VM_ROLE=a|b  MSGR_VM_ADDR=<own address>  MSGR_VM_PEER_ADDR=<the other's>
#   MSGR_RDMA_DEVICE=rxe0  MSGR_RDMA_CM_DEVICE=rxe0  MSGR_RDMA_CM_ADDR=<own address>
#   MSGR_IN_RXE_VM=1       (and NO MSGR_RDMA_GID_INDEX: the provider picks the GID itself)
# The two halves coordinate through files in a --share DIR (9p, seen by both guests at the
# same path, uncached). Their output streams back prefixed "a| " / "b| ".
# Exit status: the first non-zero of a's and b's COMMAND status, else 0; 124 when the run
# ran out of time (--timeout, default 900 s, covers both boots and COMMANDs); 125 when a
# guest did not get as far as running COMMAND. Once one guest has stopped, the other gets
# --grace seconds (default 120) to finish before it is stopped too.
# One "rxe-vms: ..." line with timings goes to stderr; the consoles only on failure or with
# --verbose.
#
# Both guests get 1 vCPU (MSGR_RXE_VMS_CPUS) and 2048 MiB (MSGR_RXE_VMS_MEM_MB): the machine
# has 2 cores for both. The kernel cache, initramfs and guest scripts are tools/rxe_vm.sh's
# (tools/rxe_vm/lib.sh); MSGR_RXE_VM_KEEP=1 keeps the per-run directory.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPERS=$REPO/tools/rxe_vm

TIMEOUT=900
GRACE=120
VERBOSE=0
SHARES=()
GUEST_ENV=()
COMMAND=""
ROLES=(a b)
declare -A ADDR=([a]=198.18.1.1 [b]=198.18.1.2)
declare -A MTU=([a]=9000 [b]=1500)
declare -A MAC=([a]=52:54:00:12:01:01 [b]=52:54:00:12:01:02)
declare -A WRAPPER=()  # role -> pid of `timeout` (qemu's parent)
declare -A QRC=()      # role -> qemu's exit status
TAIL_PIDS=()
RUN=""                 # per-run directory: RUN/a and RUN/b are the guests' "run" shares

say() { echo "rxe-vms: $*" >&2; }
fail() { say "$*"; exit 125; }

# shellcheck source=tools/lib/flags.sh
source "$REPO/tools/lib/flags.sh"
# shellcheck source=tools/rxe_vm/lib.sh
source "$HELPERS/lib.sh"
FLAGS_SCRIPT=rxe-vms
usage_text() { flags_header "${BASH_SOURCE[0]}"; }
usage() { usage_text >&2; exit 2; }

parse_args() {
  local dir env cmd=() n
  flags_begin "$@"
  while flags_next; do
    case $FLAG in
      --timeout) flag_value TIMEOUT ;;
      --grace) flag_value GRACE ;;
      --verbose|-v) VERBOSE=1 ;;
      --share) flag_value dir; SHARES+=("$(cd "$dir" && pwd)") ;;
      --env) flag_value env
             [[ "$env" == [A-Za-z_]*=* ]] || { say "--env needs NAME=VALUE"; exit 2; }
             GUEST_ENV+=("$env") ;;
      --mtu-a) flag_value 'MTU[a]' ;;
      --mtu-b) flag_value 'MTU[b]' ;;
      --help|-h) usage ;;
      --) flags_rest cmd ;;
      -*) flag_unknown ;;
      *) say "unexpected argument '$FLAG' (the command goes after --)"; usage ;;
    esac
  done
  [[ ${#cmd[@]} -gt 0 ]] || { say "no COMMAND given"; usage; }
  for n in "$TIMEOUT" "$GRACE" "${MTU[a]}" "${MTU[b]}"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { say "--timeout, --grace and the MTUs are positive numbers, not '$n'"; exit 2; }
  done
  COMMAND="${cmd[*]}"
}

# Two UDP ports on 127.0.0.1 that are free now (the kernel picks them; qemu binds them a
# moment later).
free_udp_ports() {
  python3 -c '
import socket
ss = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])'
}

prepare_run_dirs() {
  local role peer cwd s i
  RUN=$(mktemp -d "${TMPDIR:-/tmp}/msgr-rxe-vms.XXXXXX")
  cwd=$REPO
  [[ "$PWD/" == "$REPO/"* ]] && cwd=$PWD
  bash "$HELPERS/build_initramfs.sh" "$KDIR" "$KVER" "$RUN/initramfs.cpio" >&2 \
    || fail "building the initramfs failed"
  for role in "${ROLES[@]}"; do
    peer=b; [[ $role == b ]] && peer=a
    mkdir "$RUN/$role"
    cp "$HELPERS/guest_init.sh" "$RUN/$role/guest_init.sh"
    ln "$RUN/initramfs.cpio" "$RUN/$role/initramfs.cpio"
    printf '%s' "$COMMAND" >"$RUN/$role/command"
    : >"$RUN/$role/stdout"
    : >"$RUN/$role/stderr"
    : >"$RUN/$role/console.log"
    {
      printf 'VM_WORKTREE=%q\n' "$REPO"
      printf 'VM_CWD=%q\n' "$cwd"
      printf 'VM_ROLE=%q VM_NIC=eth0 VM_ADDR=%q VM_PEER_ADDR=%q VM_PEER_MAC=%q\n' "$role" \
        "${ADDR[$role]}" "${ADDR[$peer]}" "${MAC[$peer]}"
      printf 'VM_ENV=('; for s in "${GUEST_ENV[@]}"; do printf '%q ' "$s"; done; printf ')\n'
    } >"$RUN/$role/config"
    {
      echo "share work $REPO"
      for i in "${!SHARES[@]}"; do echo "share share$i ${SHARES[$i]}"; done
      echo "modules $KDIR/lib/modules/$KVER"
    } >"$RUN/$role/mounts"
    echo "eth0 ${ADDR[$role]}/24 ${MTU[$role]}" >"$RUN/$role/net"
  done
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  local rc=$? role pid
  trap - EXIT INT TERM
  for role in "${!WRAPPER[@]}"; do
    pid=${WRAPPER[$role]}
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null # timeout passes TERM on
  done
  if [[ -n "$RUN" ]]; then
    for role in "${ROLES[@]}"; do kill_qemu "$RUN/$role/qemu.pid"; done
  fi
  end_run
  exit "$rc"
}

# stream ROLE FILE FD: FILE to FD while ROLE's qemu runs, each line prefixed "ROLE| ".
stream() {
  (tail -n +1 -s 0.2 -f --pid="${WRAPPER[$1]}" "$2" | sed -u "s/^/$1| /") >&"$3" &
  TAIL_PIDS+=($!)
}

boot_and_run() {
  local ports port_a port_b role local_port remote_port first="" deadline
  read -r port_a port_b < <(free_udp_ports) || fail "cannot find two free UDP ports on 127.0.0.1"
  START=$(date +%s.%N)
  for role in "${ROLES[@]}"; do
    if [[ $role == a ]]; then local_port=$port_a remote_port=$port_b; else local_port=$port_b remote_port=$port_a; fi
    qemu_guest_args "$RUN/$role" "${MSGR_RXE_VMS_CPUS:-1}" "${MSGR_RXE_VMS_MEM_MB:-2048}"
    for i in "${!SHARES[@]}"; do qemu_share_args "share$i" "${SHARES[$i]}"; done
    # shellcheck disable=SC2054 # the commas belong to qemu's option syntax
    QEMU+=(-netdev "dgram,id=link,local.type=inet,local.host=127.0.0.1,local.port=$local_port,remote.type=inet,remote.host=127.0.0.1,remote.port=$remote_port"
           -device "virtio-net-pci,netdev=link,mac=${MAC[$role]}")
    timeout --kill-after=5 "$TIMEOUT" "${QEMU[@]}" </dev/null >"$RUN/$role/qemu.out" 2>&1 &
    WRAPPER[$role]=$!
    stream "$role" "$RUN/$role/stdout" 1
    stream "$role" "$RUN/$role/stderr" 2
    [[ $VERBOSE -eq 1 ]] && stream "$role" "$RUN/$role/console.log" 2
  done
  # The first guest to stop starts the other's grace period.
  while [[ -z "$first" ]]; do
    for role in "${ROLES[@]}"; do
      kill -0 "${WRAPPER[$role]}" 2>/dev/null || { first=$role; break; }
    done
    [[ -n "$first" ]] || sleep 0.5
  done
  deadline=$((SECONDS + GRACE))
  for role in "${ROLES[@]}"; do
    [[ $role == "$first" ]] && continue
    while kill -0 "${WRAPPER[$role]}" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do sleep 0.5; done
    if kill -0 "${WRAPPER[$role]}" 2>/dev/null; then
      say "guest $first stopped; guest $role still runs after --grace $GRACE s: stopping it"
      kill -TERM "${WRAPPER[$role]}" 2>/dev/null || true
    fi
  done
  for role in "${ROLES[@]}"; do
    QRC[$role]=0
    wait "${WRAPPER[$role]}" || QRC[$role]=$?
  done
  END=$(date +%s.%N)
  for i in "${TAIL_PIDS[@]}"; do wait "$i" 2>/dev/null || true; done
  TAIL_PIDS=()
}

show_console() {
  [[ $VERBOSE -eq 1 ]] && return # already streamed
  say "---- guest $1 console ($2) ----"
  cat "$RUN/$1/console.log" >&2
  [[ -s "$RUN/$1/qemu.out" ]] && { say "---- guest $1 qemu ----"; cat "$RUN/$1/qemu.out" >&2; }
  say "---- end of guest $1 console ----"
}

report() {
  local role rc=0 status=() r timed_out=0 setup=0
  for role in "${ROLES[@]}"; do
    if [[ -f "$RUN/$role/rc" ]]; then
      r=$(cat "$RUN/$role/rc")
      status+=("$role: ready $(span "$START" "$(stat -c %.3Y "$RUN/$role/ready")") s, COMMAND exit $r")
      [[ $rc -eq 0 && $r -ne 0 ]] && rc=$r
      [[ $r -ne 0 ]] && show_console "$role" "COMMAND exited with status $r"
    elif [[ ${QRC[$role]} -eq 124 || ${QRC[$role]} -eq 137 || ${QRC[$role]} -eq 143 ]]; then
      status+=("$role: stopped before COMMAND finished (time limit or grace)")
      show_console "$role" "timed out"
      timed_out=1
    else
      if [[ -s "$RUN/$role/setup_failed" ]]; then
        status+=("$role: setup failed: $(cat "$RUN/$role/setup_failed")")
      else
        status+=("$role: stopped with no exit status (qemu status ${QRC[$role]})")
      fi
      show_console "$role" "no exit status"
      setup=1
    fi
  done
  say "kernel $KVER, ${status[0]}; ${status[1]}; total $(span "$START" "$END") s"
  [[ $setup -eq 1 ]] && exit 125
  [[ $timed_out -eq 1 ]] && exit 124
  exit "$rc"
}

main() {
  parse_args "$@"
  ensure_host_tools
  ensure_kernel
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  prepare_run_dirs
  boot_and_run
  report
}

main "$@"
