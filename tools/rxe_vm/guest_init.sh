#!/bin/bash
# Phase 2 of the rxe VM boot: PID 1 on the real root (the host's root, read-only, under a
# RAM overlay), run by the host's own bash, so every host tool (rdma, modprobe, the tests'
# shared libraries) is here. Phase 1 (initramfs_init.sh) already mounted everything, loaded
# the modules and set up lo and dummy0.
#
# The host's tools/rxe_vm.sh copies this file into the per-run directory, which the guest
# sees at /run/msgr-vm (9p, read-write), next to:
#   config    shell variables written by the host (VM_WORKTREE, VM_CWD, VM_ENV; for a guest
#             of tools/rxe_vms.sh also VM_ROLE, VM_NIC, VM_ADDR, VM_PEER_ADDR, VM_PEER_MAC)
#   command   the COMMAND text, run with `bash -c`
# and this script writes back:
#   ready     guest uptime (s) when rxe0 was usable     stdout, stderr  COMMAND's output
#   rc        COMMAND's exit status                     setup_failed    why setup failed
# The VM powers itself off at the end; the host treats a missing rc as a failed run.
# Processes are expensive under emulation, so this script uses bash builtins where it can.
set -u
RUN=/run/msgr-vm
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

# Sets UP to the guest uptime in seconds (no subprocess).
uptime_s() { read -r UP _ </proc/uptime; }

log() { echo "rxe-vm guest: $*"; }

poweroff_now() {
  # No init system to ask: the kernel's sysrq power-off works without one. The run and
  # work shares are not cached, so nothing is left to flush to the host.
  echo o >/proc/sysrq-trigger
  sleep 30
}

die() {
  log "setup failed: $*"
  echo "$*" >"$RUN/setup_failed"
  poweroff_now
  exit 1
}

# The GID sysfs shows for IPv4 address $1 (::ffff:a.b.c.d), e.g.
# 0000:0000:0000:0000:0000:ffff:c612:0101 for 198.18.1.1.
ipv4_gid() {
  local IFS=. o
  read -r -a o <<<"$1"
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${o[@]}"
}

# wait_gid DEVICE GID: waits (the GID table fills asynchronously) until some index of
# DEVICE's port 1 holds GID; sets GID_INDEX to the first such index.
wait_gid() {
  local dev=$1 want=$2 i f g
  GID_INDEX=""
  for ((i = 0; i < 100; i++)); do
    for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
      read -r g 2>/dev/null <"$f" || continue
      if [[ "$g" == "$want" ]]; then GID_INDEX=${f##*/}; return 0; fi
    done
    sleep 0.1
  done
  return 1
}

setup_rdma() {
  local m
  # Phase 1 normally loaded these already; modprobe is the fallback.
  for m in rdma_rxe ib_uverbs rdma_ucm; do
    [[ -d /sys/module/$m ]] || modprobe "$m" || die "modprobe $m failed"
  done
  if [[ -n "${VM_NIC:-}" ]]; then
    # One of two guests: rxe0 on the NIC joined to the other guest, its GID from our
    # own address. rdma_cm works on it too (it is a real netdev), so no rxe1.
    rdma link add rxe0 type rxe netdev "$VM_NIC" || die "rdma link add rxe0 (netdev $VM_NIC) failed"
    # The peer's MAC is known (tools/rxe_vms.sh gives both): a permanent neighbour entry,
    # so that a burst of datagrams the host drops between the two qemus (both emulated on
    # two busy cores) cannot fail ARP and turn into "No route to host" for TCP and rxe
    # alike; lost packets are then retransmitted like on any lossy link.
    if [[ -n "${VM_PEER_MAC:-}" ]]; then
      ip neigh replace "$VM_PEER_ADDR" lladdr "$VM_PEER_MAC" dev "$VM_NIC" nud permanent \
        || die "cannot add the neighbour entry of $VM_PEER_ADDR ($VM_PEER_MAC) on $VM_NIC"
      log "neighbour $VM_PEER_ADDR on $VM_NIC: $(ip neigh show "$VM_PEER_ADDR" dev "$VM_NIC")"
    fi
    wait_gid rxe0 "$(ipv4_gid "$VM_ADDR")" \
      || die "rxe0 has no GID for $VM_ADDR: $(cat /sys/class/infiniband/rxe0/ports/1/gids/* 2>&1 | sort -u | tr '\n' ' ')"
    log "rxe0 on $VM_NIC: GID ::ffff:$VM_ADDR at index $GID_INDEX"
  else
    # rxe0 on lo: plain verbs between processes of this VM over 127.0.0.1.
    rdma link add rxe0 type rxe netdev lo || die "rdma link add rxe0 (netdev lo) failed"
    # rdma_cm cannot resolve routes over lo, so dummy0 (169.254.77.1) carries rxe1.
    rdma link add rxe1 type rxe netdev dummy0 || die "rdma link add rxe1 (netdev dummy0) failed"
    # Index 1 is ::ffff:127.0.0.1 (RoCE v2) on lo, which MSGR_RDMA_GID_INDEX names.
    wait_gid rxe0 0000:0000:0000:0000:0000:ffff:7f00:0001 && [[ $GID_INDEX == 1 ]] \
      || die "rxe0 GID index 1 is not ::ffff:127.0.0.1 (found at index '$GID_INDEX')"
  fi
  [[ -c /dev/infiniband/uverbs0 ]] || die "/dev/infiniband/uverbs0 is missing"
}

run_command() {
  local rc cmd kv
  export HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8
  export MSGR_IN_RXE_VM=1 MSGR_RDMA_DEVICE=rxe0
  if [[ -n "${VM_NIC:-}" ]]; then
    # No MSGR_RDMA_GID_INDEX: between two hosts the provider's own choice is under test.
    export MSGR_VM_ROLE=$VM_ROLE MSGR_VM_NIC=$VM_NIC MSGR_VM_ADDR=$VM_ADDR MSGR_VM_PEER_ADDR=$VM_PEER_ADDR
    export MSGR_RDMA_CM_DEVICE=rxe0 MSGR_RDMA_CM_ADDR=$VM_ADDR
  else
    export MSGR_RDMA_GID_INDEX=1 MSGR_RDMA_CM_DEVICE=rxe1 MSGR_RDMA_CM_ADDR=169.254.77.1
  fi
  for kv in "${VM_ENV[@]}"; do export "${kv?}"; done # NAME=VALUE pairs
  ulimit -l unlimited || die "ulimit -l unlimited failed"
  cd "$VM_CWD" || die "cannot cd to $VM_CWD"
  # bazel-bin points into the host's Bazel output base, which must be reachable here.
  if [[ -L bazel-bin && ! -d bazel-bin/ ]]; then
    log "warning: $PWD/bazel-bin points to something missing in the guest"
  fi
  IFS= read -r -d '' cmd <"$RUN/command"
  bash -c "$cmd" </dev/null >"$RUN/stdout" 2>"$RUN/stderr"
  rc=$?
  echo "$rc" >"$RUN/rc"
  uptime_s
  log "command exited with status $rc at $UP s of guest uptime"
}

main() {
  uptime_s
  log "phase 2 started at $UP s of guest uptime"
  # shellcheck source=/dev/null
  source "$RUN/config" || die "cannot read $RUN/config"
  echo "rxe-vm${VM_ROLE:+-$VM_ROLE}" >/proc/sys/kernel/hostname
  setup_rdma
  uptime_s
  echo "$UP" >"$RUN/ready"
  log "rxe0 ready at $UP s of guest uptime"
  run_command
  poweroff_now
}

main "$@"
