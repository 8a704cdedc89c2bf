#!/bin/busybox sh
# shellcheck shell=dash
# Phase 1 of the rxe VM boot: PID 1 inside the initramfs (busybox only).
#
# It builds the whole file system view and the network, then hands over to phase 2:
#   * loads the modules listed (in dependency order) in /modules.list: virtio / 9p / overlay
#     for the root, and the RDMA + dummy ones so that phase 2 finds them loaded,
#   * mounts the host's root file system (9p tag "rootfs", read-only) as the lower layer of an
#     overlay whose upper layer is a tmpfs, so the guest can write anywhere (into RAM) while
#     the host root stays untouched,
#   * mounts /proc, /sys, /dev (devtmpfs), /dev/pts, and tmpfs on /run, /tmp and /dev/shm,
#   * mounts the per-run directory (9p tag "run", read-write) at /run/msgr-vm, and then what
#     its file "mounts" lists (written by the host), one per line:
#        share TAG PATH   a read-write 9p share (the work tree, --share dirs) at PATH
#        modules PATH     the guest kernel's module tree (inside the host root), bound at
#                         /lib/modules/$(uname -r) so modprobe works in the guest
#   * brings lo up and gives dummy0 169.254.77.1/24 (rdma_cm needs a real netdev),
#   * if the run directory has a file "net" (a guest of tools/rxe_vms.sh), one line
#        IFACE ADDRESS/PREFIX MTU      e.g. "eth0 198.18.1.1/24 9000"
#     and brings that NIC (virtio-net, on the point-to-point link to the other guest) up,
#   * switch_root's to /run/msgr-vm/guest_init.sh, run by the host's own bash.
# All of this is done here with busybox because every process started under software
# emulation costs a lot, and busybox is already in RAM.
# Any failure prints a message on the console and powers the VM off; the host sees no exit
# status file and reports a failed boot together with this console.
set -u
B=/bin/busybox
NEW=/newroot
# msize: bigger 9p messages make loading large host binaries much faster.
NINEP="trans=virtio,version=9p2000.L,msize=262144"

die() {
  echo "rxe-vm initramfs: $*" >&2
  [ -d $NEW/run/msgr-vm ] && echo "initramfs: $*" >$NEW/run/msgr-vm/setup_failed
  # -f: there is no init system to ask; reboot(2) with -no-reboot ends qemu.
  $B poweroff -f
  $B sleep 5
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

$B mkdir -p /lower /rw $NEW
# cache=loose: the host root does not change during a run, so the guest may cache it.
$B mount -t 9p -o "$NINEP,ro,cache=loose" rootfs /lower || die "cannot mount the host root (9p tag rootfs)"
$B mount -t tmpfs -o mode=0755 rw /rw || die "cannot mount the overlay tmpfs"
$B mkdir -p /rw/upper /rw/work
$B mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work $NEW \
  || die "cannot mount the overlay root"

# Our console is open on this devtmpfs, so move it (and /proc) instead of remounting.
$B mount --move /dev $NEW/dev || die "cannot move /dev"
$B mount --move /proc $NEW/proc || die "cannot move /proc"
$B mount -t sysfs sys $NEW/sys || die "cannot mount /sys"
$B mkdir -p $NEW/dev/pts $NEW/dev/shm
$B mount -t devpts -o newinstance,ptmxmode=0666 devpts $NEW/dev/pts || die "cannot mount /dev/pts"
$B mount -t tmpfs -o mode=1777 shm $NEW/dev/shm || die "cannot mount /dev/shm"
$B mount -t tmpfs -o mode=1777 tmp $NEW/tmp || die "cannot mount /tmp"
# /run is a fresh tmpfs (the host's /run must not leak in); the run share goes inside it.
$B mount -t tmpfs -o mode=0755 run $NEW/run || die "cannot mount /run"
$B mkdir -p $NEW/run/msgr-vm
# cache=none (the default): files written here (exit status, output) reach the host at once.
$B mount -t 9p -o "$NINEP" run $NEW/run/msgr-vm || die "cannot mount the run directory (9p tag run)"
[ -f $NEW/run/msgr-vm/guest_init.sh ] || die "no guest_init.sh in the run directory"

kver=$($B uname -r)
while read -r kind a b; do
  case $kind in
    share)
      $B mkdir -p "$NEW$b"
      $B mount -t 9p -o "$NINEP" "$a" "$NEW$b" || die "cannot mount $b (9p tag $a)" ;;
    modules)
      # From /lower, the bare host root: in the new root a cache under /tmp is hidden by
      # the tmpfs. /lib is a relative symlink (usr/lib) on Debian: this stays in $NEW.
      $B mkdir -p "$NEW/lib/modules/$kver"
      $B mount --bind "/lower$a" "$NEW/lib/modules/$kver" || die "cannot bind $a" ;;
    "") ;;
    *) die "unknown line in mounts: $kind $a $b" ;;
  esac
done <$NEW/run/msgr-vm/mounts

$B ip link set lo up || die "cannot bring lo up"
# Loading the dummy module made dummy0 (numdummies defaults to 1).
[ -d $NEW/sys/class/net/dummy0 ] || $B ip link add dummy0 type dummy || die "cannot create dummy0"
$B ip addr add 169.254.77.1/24 dev dummy0 || die "cannot address dummy0"
$B ip link set dummy0 up || die "cannot bring dummy0 up"

if [ -f $NEW/run/msgr-vm/net ]; then
  read -r nic addr mtu <$NEW/run/msgr-vm/net
  [ -d "$NEW/sys/class/net/$nic" ] || die "no network interface $nic (is virtio_net loaded, a -device virtio-net-pci given?)"
  $B ip link set "$nic" mtu "$mtu" || die "cannot set the MTU of $nic to $mtu"
  $B ip addr add "$addr" dev "$nic" || die "cannot give $nic the address $addr"
  $B ip link set "$nic" up || die "cannot bring $nic up"
fi

exec $B switch_root $NEW /bin/bash /run/msgr-vm/guest_init.sh
