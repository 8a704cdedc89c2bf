#!/bin/bash
# Phase 2 of the rxe VM boot: PID 1 on the real root (the host's root, read-only, under a
# RAM overlay), run by the host's own bash, so every host tool (modprobe, ip, rdma) is here.
#
# The host's tools/rxe_vm.sh copies this file into the per-run directory, which the guest
# sees at /run/msgr-vm (9p, read-write), next to:
#   config    shell variables written by the host (work tree, modules tree, shares, env)
#   command   the COMMAND text, run with `bash -c`
# and this script writes back:
#   ready     guest uptime (s) when rxe0 was usable     stdout, stderr  COMMAND's output
#   rc        COMMAND's exit status                     setup_failed    why setup failed
# The VM powers itself off at the end; the host treats a missing rc as a failed run.
set -u
RUN=/run/msgr-vm
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

log() { echo "rxe-vm guest: $*"; }

poweroff_now() {
  sync
  # No init system to ask: the kernel's sysrq power-off works without one.
  echo o >/proc/sysrq-trigger
  sleep 30
}

die() {
  log "setup failed: $*"
  echo "$*" >"$RUN/setup_failed"
  poweroff_now
  exit 1
}

uptime_s() { cut -d' ' -f1 /proc/uptime; }

mount_fs() {
  # Standard kernel file systems, plus RAM-backed /tmp and /dev/shm for the tests.
  mountpoint -q /proc || mount -t proc proc /proc || die "cannot mount /proc"
  mountpoint -q /dev || mount -t devtmpfs dev /dev || die "cannot mount /dev"
  mount -t sysfs sys /sys || die "cannot mount /sys"
  mkdir -p /dev/pts /dev/shm
  mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts || die "cannot mount /dev/pts"
  mount -t tmpfs -o mode=1777 shm /dev/shm || die "cannot mount /dev/shm"
  mount -t tmpfs -o mode=1777 tmp /tmp || die "cannot mount /tmp"
}

mount_shares() {
  local opts="trans=virtio,version=9p2000.L,msize=262144" i
  # The work tree, read-write, at the same path as on the host (results come back).
  mkdir -p "$VM_WORKTREE"
  mount -t 9p -o "$opts" work "$VM_WORKTREE" || die "cannot mount the work tree (9p tag work)"
  for i in "${!VM_SHARES[@]}"; do
    mkdir -p "${VM_SHARES[$i]}"
    mount -t 9p -o "$opts" "share$i" "${VM_SHARES[$i]}" \
      || die "cannot mount ${VM_SHARES[$i]} (9p tag share$i)"
  done
  # The guest kernel's modules: the unpacked package in the host's cache (seen through the
  # shared root) bound where modprobe looks for them.
  local kver
  kver=$(uname -r)
  mkdir -p "/lib/modules/$kver"
  mount --bind "$VM_MODULES" "/lib/modules/$kver" || die "cannot bind $VM_MODULES"
}

setup_rdma() {
  local m want gid1 i
  ip link set lo up || die "cannot bring lo up"
  for m in rdma_rxe ib_uverbs rdma_ucm dummy; do
    modprobe "$m" || die "modprobe $m failed"
  done
  # rxe0 on lo: plain verbs between processes of this VM over 127.0.0.1.
  log "modules loaded at $(uptime_s) s"
  rdma link add rxe0 type rxe netdev lo || die "rdma link add rxe0 (netdev lo) failed"
  # rdma_cm cannot resolve routes over lo, so a dummy netdev with an address carries rxe1.
  ip link add dummy0 type dummy || die "cannot create dummy0"
  ip addr add 169.254.77.1/24 dev dummy0 || die "cannot address dummy0"
  ip link set dummy0 up || die "cannot bring dummy0 up"
  rdma link add rxe1 type rxe netdev dummy0 || die "rdma link add rxe1 (netdev dummy0) failed"

  # The GID table fills asynchronously: wait for index 1 = ::ffff:127.0.0.1 (RoCE v2).
  want=0000:0000:0000:0000:0000:ffff:7f00:0001
  for ((i = 0; i < 200; i++)); do
    gid1=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null || true)
    [[ "$gid1" == "$want" ]] && break
    sleep 0.1
  done
  if [[ "$gid1" != "$want" ]]; then
    grep -H . /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null | grep -v ':0000:0000:0000:0000:0000:0000:0000:0000$'
    die "rxe0 GID index 1 is '$gid1', expected $want"
  fi
  [[ -c /dev/infiniband/uverbs0 ]] || die "/dev/infiniband/uverbs0 is missing"
}

run_command() {
  local rc bin
  export HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8
  export MSGR_IN_RXE_VM=1 MSGR_RDMA_DEVICE=rxe0 MSGR_RDMA_GID_INDEX=1
  export MSGR_RDMA_CM_DEVICE=rxe1 MSGR_RDMA_CM_ADDR=169.254.77.1
  local kv
  for kv in "${VM_ENV[@]}"; do export "$kv"; done
  ulimit -l unlimited || die "ulimit -l unlimited failed"
  cd "$VM_CWD" || die "cannot cd to $VM_CWD"
  # bazel-bin points into the host's Bazel output base: it must be reachable here.
  bin=$VM_WORKTREE/bazel-bin
  if [[ -L "$bin" && ! -d "$bin/" ]]; then
    log "warning: $bin -> $(readlink "$bin") is not reachable in the guest"
  fi
  bash -c "$(cat "$RUN/command")" </dev/null >"$RUN/stdout" 2>"$RUN/stderr"
  rc=$?
  echo "$rc" >"$RUN/rc"
  log "command exited with status $rc after $(uptime_s) s of guest uptime"
}

main() {
  mount_fs
  log "phase 2 started at $(uptime_s) s of guest uptime"
  # shellcheck source=/dev/null
  source "$RUN/config" || die "cannot read $RUN/config"
  hostname rxe-vm 2>/dev/null || true
  mount_shares
  log "shares mounted at $(uptime_s) s"
  setup_rdma
  uptime_s >"$RUN/ready"
  log "rxe0 ready after $(uptime_s) s of guest uptime"
  run_command
  poweroff_now
}

main "$@"
