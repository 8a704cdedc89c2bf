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

# The host tools this script uses; tools/setup.sh installs the packages that carry them.
ensure_host_tools() {
  local tools=(qemu-system-x86_64 busybox cpio depmod modprobe timeout flock apt-get dpkg)
  local missing=() t
  for t in "${tools[@]}"; do command -v "$t" >/dev/null || missing+=("$t"); done
  [[ ${#missing[@]} -eq 0 ]] && return
  say "missing ${missing[*]}: running tools/setup.sh"
  bash "$REPO/tools/setup.sh" >&2 || fail "tools/setup.sh failed; install qemu-system-x86 busybox-static cpio kmod by hand"
  for t in "${tools[@]}"; do
    command -v "$t" >/dev/null || fail "'$t' is still missing after tools/setup.sh"
  done
}

cache_root() {
  if [[ -n "${MSGR_RXE_VM_CACHE:-}" ]]; then
    echo "$MSGR_RXE_VM_CACHE"
  elif [[ $(id -u) -eq 0 ]]; then
    echo /var/cache/msgr-rxe-vm
  else
    echo "${XDG_CACHE_HOME:-$HOME/.cache}/msgr/rxe-vm"
  fi
}

# The kernel package linux-image-amd64 currently depends on, e.g. linux-image-6.1.0-57-amd64.
kernel_package() {
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}' || true)
  if [[ -z "$pkg" ]]; then
    # A fresh machine may have no package lists yet.
    say "apt knows no linux-image-amd64: running apt-get update"
    apt-get update -qq >&2 || fail "apt-get update failed: the guest kernel cannot be fetched"
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}' || true)
  fi
  [[ -n "$pkg" ]] || fail "cannot find the package linux-image-amd64 depends on (is deb.debian.org in the apt sources?)"
  echo "$pkg"
}

# Writes the uncompressed ELF kernel inside bzImage $1 to $2. qemu boots such an image
# directly through its PVH entry point, which skips the firmware's real-mode loader and,
# above all, the kernel decompressing itself: several seconds under software emulation.
# The bzImage header gives the payload: it starts (setup_sects + 1) * 512 + payload_offset
# bytes in and is payload_length bytes long.
extract_vmlinux() {
  local bz=$1 out=$2 sects off len start magic size
  sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$bz" | tr -d ' ')
  [[ "$sects" -eq 0 ]] && sects=4
  off=$(od -An -tu4 -j $((0x248)) -N4 "$bz" | tr -d ' ')
  len=$(od -An -tu4 -j $((0x24c)) -N4 "$bz" | tr -d ' ')
  start=$(( (sects + 1) * 512 + off ))
  magic=$(od -An -tx1 -j "$start" -N4 "$bz" | tr -d ' ')
  local unpack
  case $magic in
    fd377a58)
      if command -v xz >/dev/null; then
        unpack=(xz -dc)
      else # xz-utils is not in minimal images, python3 (tools/setup.sh) has lzma
        unpack=(python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.LZMADecompressor().decompress(sys.stdin.buffer.read()))')
      fi ;;
    28b52ffd) unpack=(zstd -dcq) ;;
    1f8b*) unpack=(gzip -dc) ;;
    *) return 1 ;;
  esac
  command -v "${unpack[0]}" >/dev/null || return 1
  # The payload ends with the unpacked size (le32), which decompressors call trailing
  # garbage: ignore their status, check the result's size and ELF magic instead.
  size=$(od -An -tu4 -j $((start + len - 4)) -N4 "$bz" | tr -d ' ')
  dd if="$bz" bs=1M iflag=skip_bytes,count_bytes skip="$start" count="$len" status=none \
    | "${unpack[@]}" >"$out" 2>/dev/null || true
  [[ "$(stat -c %s "$out")" == "$size" && "$(od -An -tx1 -N4 "$out" | tr -d ' ')" == 7f454c46 ]]
}

# Fetches and unpacks kernel $1 (a version like 6.1.0-57-amd64) into $2, atomically.
fetch_kernel() {
  local kver=$1 dest=$2 tmp log
  tmp="$dest.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # _apt (apt's download user) must be able to write here, or apt warns.
  chmod 0777 "$tmp"
  log="$tmp/fetch.log"
  say "fetching guest kernel linux-image-$kver (once; cached in $dest)"
  if ! (cd "$tmp" && apt-get download "linux-image-$kver") >"$log" 2>&1; then
    cat "$log" >&2
    rm -rf "$tmp"
    fail "apt-get download linux-image-$kver failed (see above)"
  fi
  dpkg -x "$tmp"/linux-image-*.deb "$tmp/root" || { rm -rf "$tmp"; fail "dpkg -x of the kernel package failed"; }
  [[ -f "$tmp/root/boot/vmlinuz-$kver" && -d "$tmp/root/lib/modules/$kver" ]] \
    || { rm -rf "$tmp"; fail "the kernel package has no boot/vmlinuz-$kver or lib/modules/$kver"; }
  depmod -b "$tmp/root" "$kver" || { rm -rf "$tmp"; fail "depmod failed"; }
  mv "$tmp/root/boot/vmlinuz-$kver" "$tmp/vmlinuz"
  mv "$tmp/root/boot/config-$kver" "$tmp/config"
  mkdir -p "$tmp/lib/modules"
  mv "$tmp/root/lib/modules/$kver" "$tmp/lib/modules/$kver"
  rm -rf "$tmp/root" "$tmp"/*.deb "$log"
  chmod 0755 "$tmp"
  touch "$tmp/complete"
  rm -rf "$dest"
  mv "$tmp" "$dest"
}

# Sets KVER, KDIR (holding vmlinuz, maybe vmlinux, and lib/modules/KVER) and KERNEL_IMAGE to a ready guest kernel, fetching one if
# the cache has none. A cached kernel is reused even if Debian has a newer one: runs stay
# offline and reproducible; delete the cache directory to move on.
ensure_kernel() {
  local cache pkg dir
  cache=$(cache_root)
  mkdir -p "$cache" || fail "cannot create the kernel cache $cache (set MSGR_RXE_VM_CACHE)"
  # Several runs may start at once: one fetches, the others wait.
  exec 9>"$cache/.lock"
  flock 9
  KVER=${MSGR_RXE_VM_KERNEL:-}
  if [[ -z "$KVER" ]]; then
    # The newest complete entry (an interrupted fetch leaves no "complete").
    KVER=$(for dir in "$cache"/*/complete; do
             if [[ -f "$dir" ]]; then basename "$(dirname "$dir")"; fi
           done | sort -V | tail -n 1)
  fi
  if [[ -z "$KVER" ]]; then
    pkg=$(kernel_package)
    KVER=${pkg#linux-image-}
  fi
  KDIR=$cache/$KVER
  [[ -f "$KDIR/complete" ]] || fetch_kernel "$KVER" "$KDIR"
  # vmlinux only if the kernel has a PVH entry point; else qemu boots vmlinuz (slower).
  # Made here rather than at fetch time so older cache entries get it too.
  if [[ ! -f "$KDIR/vmlinux" && ! -f "$KDIR/no-vmlinux" ]]; then
    if grep -qx 'CONFIG_PVH=y' "$KDIR/config" 2>/dev/null \
       && extract_vmlinux "$KDIR/vmlinuz" "$KDIR/vmlinux.tmp"; then
      mv "$KDIR/vmlinux.tmp" "$KDIR/vmlinux"
    else
      rm -f "$KDIR/vmlinux.tmp"
      touch "$KDIR/no-vmlinux"
    fi
  fi
  KERNEL_IMAGE=$KDIR/vmlinuz
  [[ -f "$KDIR/vmlinux" ]] && KERNEL_IMAGE=$KDIR/vmlinux
  flock -u 9
  exec 9>&-
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
  local rc=$? pid
  trap - EXIT INT TERM
  if [[ -n "$QEMU_WRAPPER" ]] && kill -0 "$QEMU_WRAPPER" 2>/dev/null; then
    kill -TERM "$QEMU_WRAPPER" 2>/dev/null || true # timeout passes TERM on to qemu
  fi
  if [[ -n "$RUN" && -s "$RUN/qemu.pid" ]]; then
    pid=$(cat "$RUN/qemu.pid" 2>/dev/null || true)
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      sleep 1
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  for pid in "${TAIL_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ -n "$RUN" ]]; then
    if [[ "${MSGR_RXE_VM_KEEP:-0}" == 1 ]]; then say "kept run directory $RUN"; else rm -rf "$RUN"; fi
  fi
  exit "$rc"
}

# Streams file $1 to fd $2 while qemu runs (tail ends by itself once qemu's parent is gone).
stream() {
  tail -n +1 -s 0.2 -f --pid="$QEMU_WRAPPER" "$1" >&"$2" &
  TAIL_PIDS+=($!)
}

boot_and_run() {
  local qrc=0 ninep="security_model=none,multidevs=remap" i
  # shellcheck disable=SC2054 # the commas belong to qemu's option syntax
  local qemu=(
    qemu-system-x86_64 -nodefaults -no-user-config -no-reboot
    -accel tcg,thread=multi -cpu max -smp "${MSGR_RXE_VM_CPUS:-2}" -m "${MSGR_RXE_VM_MEM_MB:-2048}"
    -display none -monitor none -serial "file:$RUN/console.log" -pidfile "$RUN/qemu.pid"
    -kernel "$KERNEL_IMAGE" -initrd "$RUN/initramfs.cpio"
    -append "console=ttyS0 panic=-1 quiet mitigations=off"
    -virtfs "local,path=/,mount_tag=rootfs,readonly=on,$ninep"
    -virtfs "local,path=$RUN,mount_tag=run,$ninep"
    -virtfs "local,path=$REPO,mount_tag=work,$ninep"
  )
  for i in "${!SHARES[@]}"; do
    qemu+=(-virtfs "local,path=${SHARES[$i]},mount_tag=share$i,$ninep")
  done

  START=$(date +%s.%N)
  timeout --kill-after=5 "$TIMEOUT" "${qemu[@]}" </dev/null >"$RUN/qemu.out" 2>&1 &
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

# Seconds between two epoch times, one decimal.
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

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
