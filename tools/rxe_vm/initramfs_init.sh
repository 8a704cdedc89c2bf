#!/bin/busybox sh
# Phase 1 of the rxe VM boot: PID 1 inside the initramfs (busybox only).
#
# Its one job is to build the real root and hand over to phase 2:
#   * load the virtio / 9p / overlay modules listed (in dependency order) in /modules.list,
#   * mount the host's root file system (9p tag "rootfs", read-only) as the lower layer of an
#     overlay whose upper layer is a tmpfs, so the guest can write anywhere (into RAM) while
#     the host root stays untouched,
#   * mount the per-run directory (9p tag "run", read-write) at /run/msgr-vm in the new root,
#   * switch_root to /run/msgr-vm/guest_init.sh, run by the host's own bash.
# Any failure prints a message on the console and powers the VM off; the host sees no exit
# status file and reports a failed boot together with this console.
set -u
B=/bin/busybox

die() {
  echo "rxe-vm initramfs: $*" >&2
  # -f: there is no init system to ask; reboot(2) with -no-reboot ends qemu.
  $B poweroff -f
  sleep 5
  exit 1
}

$B mkdir -p /proc /sys /dev
$B mount -t proc proc /proc || die "cannot mount /proc"
$B mount -t devtmpfs dev /dev || die "cannot mount /dev"
# The initramfs has no /dev/console node of its own, so the kernel may have started us
# without one: attach to the console explicitly.
exec </dev/console >/dev/console 2>&1

# insmod (not modprobe): the list was resolved on the host with modprobe --show-depends.
while read -r ko; do
  [ -n "$ko" ] || continue
  $B insmod "/modules/$ko" || die "insmod $ko failed"
done </modules.list

# msize: bigger 9p messages make loading large host binaries much faster.
NINEP="trans=virtio,version=9p2000.L,msize=262144"
$B mkdir -p /lower /rw /newroot
# cache=loose: the host root does not change during a run, so the guest may cache it.
$B mount -t 9p -o "$NINEP,ro,cache=loose" rootfs /lower || die "cannot mount the host root (9p tag rootfs)"
$B mount -t tmpfs -o mode=0755 rw /rw || die "cannot mount the overlay tmpfs"
$B mkdir -p /rw/upper /rw/work
$B mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot \
  || die "cannot mount the overlay root"

# /run is a fresh tmpfs (the host's /run must not leak in); the run share goes inside it.
$B mount -t tmpfs -o mode=0755 run /newroot/run || die "cannot mount /run"
$B mkdir -p /newroot/run/msgr-vm
# cache=none: files written here (exit status, output) must reach the host at once.
$B mount -t 9p -o "$NINEP" run /newroot/run/msgr-vm || die "cannot mount the run directory (9p tag run)"
[ -f /newroot/run/msgr-vm/guest_init.sh ] || die "no guest_init.sh in the run directory"

# Our console is open on this devtmpfs, so move it (and /proc) instead of unmounting.
$B mount --move /dev /newroot/dev || die "cannot move /dev"
$B mount --move /proc /newroot/proc || die "cannot move /proc"
exec $B switch_root /newroot /bin/bash /run/msgr-vm/guest_init.sh
