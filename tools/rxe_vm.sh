#!/usr/bin/env bash
# Runs a command inside a throw-away VM that has a real verbs device: Soft-RoCE (rdma_rxe).
#
#   tools/rxe_vm.sh [--timeout SECONDS] [--verbose] [--share DIR]... [--env NAME=VALUE]...
#                   -- COMMAND...
#
# COMMAND (its words joined by spaces) runs as `bash -c` in the work tree (this repo, or the
# current directory if it is inside the repo), as root, with `ulimit -l unlimited` and
#   MSGR_RDMA_DEVICE=rxe0 MSGR_RDMA_GID_INDEX=1        verbs over 127.0.0.1 (RoCE v2)
#   MSGR_RDMA_CM_DEVICE=rxe1 MSGR_RDMA_CM_ADDR=169.254.77.1   for rdma_cm (it cannot use lo)
#   MSGR_IN_RXE_VM=1
# Its stdout/stderr stream back to ours, and its exit status becomes ours. Other statuses:
#   124  the VM ran out of time (--timeout, default 600 s, covers boot and COMMAND)
#   125  the VM did not get as far as running COMMAND (boot or rxe setup failed)
# One line "rxe-vm: ..." with timings goes to stderr; the guest console only on failure or
# with --verbose.
#
# How it works (and why):
#  * The host kernel has no InfiniBand support, but Debian's stock kernel has rdma_rxe as a
#    module. Its package (whatever linux-image-amd64 depends on) is fetched with
#    `apt-get download`, unpacked with `dpkg -x` and cached per kernel version under
#    /var/cache/msgr-rxe-vm (or ~/.cache/msgr/rxe-vm when not root; MSGR_RXE_VM_CACHE
#    overrides). Once cached, no network is needed.
#  * qemu boots it with software emulation (TCG: KVM does not work on these machines), as
#    an uncompressed vmlinux through its PVH entry when possible (the bzImage would spend
#    seconds decompressing itself under emulation). A busybox initramfs
#    (tools/rxe_vm/initramfs_init.sh, built per run by tools/rxe_vm/build_initramfs.sh)
#    loads the virtio/9p/overlay and RDMA modules, mounts the host's own root file system
#    over 9p read-only under a RAM overlay, so binaries built on the host (bazel-bin points
#    into /root/.cache/bazel) run unchanged, mounts tmpfs /tmp and /dev/shm, brings up lo
#    and dummy0 (169.254.77.1/24), then hands over to tools/rxe_vm/guest_init.sh (run by the
#    host's bash), which creates rxe0 on lo and rxe1 on dummy0, waits for rxe0's GID 1 and
#    runs COMMAND. Under emulation every process start is expensive, hence this split.
#  * The work tree (and each --share DIR) is a read-write 9p share at the same path, so files
#    written by COMMAND come back. A per-run directory (also 9p) carries the command in and
#    its output and exit status out. Bazel never runs in the guest: it is too slow there and
#    the root is read-only. Build on the host first.
#  * Everything is bounded by `timeout` around qemu, and an exit trap kills qemu by pid, so
#    no process outlives this script (every process COMMAND starts lives inside qemu).
#
# Tunables (environment): MSGR_RXE_VM_CACHE, MSGR_RXE_VM_KERNEL (a cached or installable
# kernel version, e.g. 6.1.0-57-amd64), MSGR_RXE_VM_CPUS (2), MSGR_RXE_VM_MEM_MB (2048),
# MSGR_RXE_VM_KEEP=1 (keep the per-run directory for debugging).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPERS=$REPO/tools/rxe_vm

TIMEOUT=600
VERBOSE=0
SHARES=()
GUEST_ENV=()
COMMAND=""

RUN=""          # per-run directory, shared with the guest as 9p tag "run"
QEMU_WRAPPER="" # pid of `timeout` (qemu's parent)
TAIL_PIDS=()    # pids of the tails streaming output files back to us

say() { echo "rxe-vm: $*" >&2; }
fail() { say "$*"; exit 125; }

# shellcheck source=tools/lib/flags.sh
source "$REPO/tools/lib/flags.sh"
# shellcheck source=tools/rxe_vm/lib.sh
source "$HELPERS/lib.sh"
FLAGS_SCRIPT=rxe-vm
usage_text() { flags_header "${BASH_SOURCE[0]}"; }
usage() { usage_text >&2; exit 2; }

parse_args() {
  local dir env cmd=()
  flags_begin "$@"
  while flags_next; do
    case $FLAG in
      --timeout) flag_value TIMEOUT ;;
      --verbose|-v) VERBOSE=1 ;;
      --share) flag_value dir; SHARES+=("$(cd "$dir" && pwd)") ;;
      --env) flag_value env
             [[ "$env" == [A-Za-z_]*=* ]] || { say "--env needs NAME=VALUE"; exit 2; }
             GUEST_ENV+=("$env") ;;
      --help|-h) usage ;;
      --) flags_rest cmd ;;
      -*) flag_unknown ;;
      *) say "unexpected argument '$FLAG' (the command goes after --)"; usage ;;
    esac
  done
  set -- "${cmd[@]}"
  [[ $# -gt 0 ]] || { say "no COMMAND given"; usage; }
  [[ "$TIMEOUT" =~ ^[0-9]+$ && "$TIMEOUT" -gt 0 ]] || { say "--timeout must be a positive number of seconds"; exit 2; }
  COMMAND="$*"
}

# Writes everything the guest needs into the per-run directory.
prepare_run_dir() {
  local cwd s i
  RUN=$(mktemp -d "${TMPDIR:-/tmp}/msgr-rxe-vm.XXXXXX")
  cp "$HELPERS/guest_init.sh" "$RUN/guest_init.sh"
  printf '%s' "$COMMAND" >"$RUN/command"
  : >"$RUN/stdout"
  : >"$RUN/stderr"
  : >"$RUN/console.log"
  # Run where the caller is if that is inside the work tree, else at its top.
  cwd=$REPO
  [[ "$PWD/" == "$REPO/"* ]] && cwd=$PWD
  # For phase 2 (bash): where to run, extra environment.
  {
    printf 'VM_WORKTREE=%q\n' "$REPO"
    printf 'VM_CWD=%q\n' "$cwd"
    printf 'VM_ENV=('; for s in "${GUEST_ENV[@]}"; do printf '%q ' "$s"; done; printf ')\n'
  } >"$RUN/config"
  # For phase 1 (busybox): what to mount where (see tools/rxe_vm/initramfs_init.sh).
  {
    echo "share work $REPO"
    for i in "${!SHARES[@]}"; do echo "share share$i ${SHARES[$i]}"; done
    echo "modules $KDIR/lib/modules/$KVER"
  } >"$RUN/mounts"
  bash "$HELPERS/build_initramfs.sh" "$KDIR" "$KVER" "$RUN/initramfs.cpio" >&2 \
    || fail "building the initramfs failed"
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$QEMU_WRAPPER" ]] && kill -0 "$QEMU_WRAPPER" 2>/dev/null; then
    kill -TERM "$QEMU_WRAPPER" 2>/dev/null || true # timeout passes TERM on to qemu
  fi
  if [[ -n "$RUN" && -s "$RUN/qemu.pid" ]]; then kill_qemu "$RUN/qemu.pid"; fi
  end_run
  exit "$rc"
}

# Streams file $1 to fd $2 while qemu runs (tail ends by itself once qemu's parent is gone).
stream() {
  tail -n +1 -s 0.2 -f --pid="$QEMU_WRAPPER" "$1" >&"$2" &
  TAIL_PIDS+=($!)
}

boot_and_run() {
  local qrc=0 i
  qemu_guest_args "$RUN" "${MSGR_RXE_VM_CPUS:-2}" "${MSGR_RXE_VM_MEM_MB:-2048}"
  for i in "${!SHARES[@]}"; do qemu_share_args "share$i" "${SHARES[$i]}"; done

  START=$(date +%s.%N)
  timeout --kill-after=5 "$TIMEOUT" "${QEMU[@]}" </dev/null >"$RUN/qemu.out" 2>&1 &
  QEMU_WRAPPER=$!
  stream "$RUN/stdout" 1
  stream "$RUN/stderr" 2
  [[ $VERBOSE -eq 1 ]] && stream "$RUN/console.log" 2
  wait "$QEMU_WRAPPER" || qrc=$?
  END=$(date +%s.%N)
  # Let the tails print what is left, then stop following.
  for i in "${TAIL_PIDS[@]}"; do wait "$i" 2>/dev/null || true; done
  TAIL_PIDS=()
  QEMU_RC=$qrc
}

show_console() {
  [[ $VERBOSE -eq 1 ]] && return # already streamed
  say "---- guest console ($1) ----"
  cat "$RUN/console.log" >&2
  [[ -s "$RUN/qemu.out" ]] && { say "---- qemu ----"; cat "$RUN/qemu.out" >&2; }
  say "---- end of guest console ----"
}

report() {
  local rc ready_at done_at
  if [[ ! -f "$RUN/rc" ]]; then
    if [[ $QEMU_RC -eq 124 || $QEMU_RC -eq 137 ]]; then
      show_console "timed out"
      say "timed out after $TIMEOUT s (boot + COMMAND); raise --timeout if COMMAND is just slow"
      exit 124
    fi
    show_console "no exit status"
    if [[ -s "$RUN/setup_failed" ]]; then
      say "VM setup failed: $(cat "$RUN/setup_failed")"
    else
      say "the VM stopped before COMMAND finished (qemu exit status $QEMU_RC); see the console above"
    fi
    exit 125
  fi
  rc=$(cat "$RUN/rc")
  ready_at=$(stat -c %.3Y "$RUN/ready")
  done_at=$(stat -c %.3Y "$RUN/rc")
  say "kernel $KVER, rxe0 ready $(span "$START" "$ready_at") s after start (guest uptime $(cat "$RUN/ready") s), COMMAND $(span "$ready_at" "$done_at") s, total $(span "$START" "$END") s, exit status $rc"
  [[ "$rc" -ne 0 ]] && show_console "COMMAND exited with status $rc"
  exit "$rc"
}

main() {
  parse_args "$@"
  ensure_host_tools
  ensure_kernel
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  prepare_run_dir
  boot_and_run
  report
}

main "$@"
