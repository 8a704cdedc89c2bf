# The parts of the Soft-RoCE VM launchers shared by tools/rxe_vm.sh (one guest) and
# tools/rxe_vms.sh (two guests on one point-to-point link): host tools, the cached guest
# kernel, and the qemu command line of one guest. Sourced, not run.
#
# The caller defines REPO (the work tree), say MESSAGE (to stderr) and fail MESSAGE (say,
# then exit 125), and then calls ensure_host_tools and ensure_kernel, which set KVER, KDIR
# and KERNEL_IMAGE.

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

# Seconds between two epoch times, one decimal.
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }


# qemu_guest_args RUN CPUS MEM_MB: sets QEMU to the command line of one guest whose per-run
# directory (9p tag "run": guest_init.sh, config, mounts, initramfs.cpio) is RUN. Its
# console goes to RUN/console.log, its pid to RUN/qemu.pid. No NIC (-nodefaults): callers
# add one with -netdev/-device. The host root is shared read-only, the work tree read-write.
qemu_guest_args() {
  local run=$1 cpus=$2 mem=$3 ninep="security_model=none,multidevs=remap"
  # shellcheck disable=SC2054 # the commas belong to qemu's option syntax
  QEMU=(
    qemu-system-x86_64 -nodefaults -no-user-config -no-reboot
    -accel tcg,thread=multi -cpu max -smp "$cpus" -m "$mem"
    -display none -monitor none -serial "file:$run/console.log" -pidfile "$run/qemu.pid"
    -kernel "$KERNEL_IMAGE" -initrd "$run/initramfs.cpio"
    -append "console=ttyS0 panic=-1 quiet mitigations=off"
    -virtfs "local,path=/,mount_tag=rootfs,readonly=on,$ninep"
    -virtfs "local,path=$run,mount_tag=run,$ninep"
    -virtfs "local,path=$REPO,mount_tag=work,$ninep"
  )
}

# qemu_share_args TAG DIR: appends a read-write 9p share of DIR to QEMU.
qemu_share_args() {
  QEMU+=(-virtfs "local,path=$2,mount_tag=$1,security_model=none,multidevs=remap")
}

# kill_qemu PIDFILE: the qemu whose pid PIDFILE holds, if its wrapper's TERM has not ended
# it within a second, is killed (cleanup on exit).
kill_qemu() {
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    sleep 1
    kill -KILL "$pid" 2>/dev/null || true
  fi
}

# end_run: stops the tails streaming the guests' output (TAIL_PIDS) and removes the run
# directory RUN, unless MSGR_RXE_VM_KEEP=1 (cleanup on exit, after the guests are gone).
end_run() {
  local pid
  for pid in "${TAIL_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ -n "$RUN" ]]; then
    if [[ "${MSGR_RXE_VM_KEEP:-0}" == 1 ]]; then say "kept run directory $RUN"; else rm -rf "$RUN"; fi
  fi
}
