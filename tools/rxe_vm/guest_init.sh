#!/bin/bash
# Phase 2 of the rxe VM boot: PID 1 on the real root (the host's root, read-only, under a
# RAM overlay), run by the host's own bash, so every host tool (rdma, modprobe, the tests'
# shared libraries) is here. Phase 1 (initramfs_init.sh) already mounted everything, loaded
# the modules and set up lo and dummy0.
#
# The host's tools/rxe_vm.sh copies this file into the per-run directory, which the guest
# sees at /run/msgr-vm (9p, read-write), next to:
#   config    shell variables written by the host (VM_WORKTREE, VM_CWD, VM_ENV)
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

setup_rdma() {
  local m want gid1="" i
  # Phase 1 normally loaded these already; modprobe is the fallback.
  for m in rdma_rxe ib_uverbs rdma_ucm; do
    [[ -d /sys/module/$m ]] || modprobe "$m" || die "modprobe $m failed"
  done
  # rxe0 on lo: plain verbs between processes of this VM over 127.0.0.1.
  rdma link add rxe0 type rxe netdev lo || die "rdma link add rxe0 (netdev lo) failed"
  # rdma_cm cannot resolve routes over lo, so dummy0 (169.254.77.1) carries rxe1.
  rdma link add rxe1 type rxe netdev dummy0 || die "rdma link add rxe1 (netdev dummy0) failed"

  # The GID table fills asynchronously: wait for index 1 = ::ffff:127.0.0.1 (RoCE v2).
  want=0000:0000:0000:0000:0000:ffff:7f00:0001
  for ((i = 0; i < 100; i++)); do
    read -r gid1 </sys/class/infiniband/rxe0/ports/1/gids/1 || gid1=""
    [[ "$gid1" == "$want" ]] && break
    sleep 0.1
  done
  [[ "$gid1" == "$want" ]] || die "rxe0 GID index 1 is '$gid1', expected $want"
  [[ -c /dev/infiniband/uverbs0 ]] || die "/dev/infiniband/uverbs0 is missing"
}

run_command() {
  local rc cmd kv
  export HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8
  export MSGR_IN_RXE_VM=1 MSGR_RDMA_DEVICE=rxe0 MSGR_RDMA_GID_INDEX=1
  export MSGR_RDMA_CM_DEVICE=rxe1 MSGR_RDMA_CM_ADDR=169.254.77.1
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
  echo rxe-vm >/proc/sys/kernel/hostname
  # shellcheck source=/dev/null
  source "$RUN/config" || die "cannot read $RUN/config"
  setup_rdma
  uptime_s
  echo "$UP" >"$RUN/ready"
  log "rxe0 ready at $UP s of guest uptime"
  run_command
  poweroff_now
}

main "$@"
