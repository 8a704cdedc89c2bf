#!/usr/bin/env bash
# Builds the rxe VM's initramfs: a static busybox, tools/rxe_vm/initramfs_init.sh as /init,
# and the few modules needed to reach the host root (virtio PCI, 9p, overlay) and to make
# Soft-RoCE devices.
#
#   build_initramfs.sh MODULES_ROOT KERNEL_VERSION OUTPUT.cpio
#
# MODULES_ROOT is the directory holding lib/modules/KERNEL_VERSION (depmod already run).
# The module load order comes from `modprobe --show-depends`, so a new kernel version with
# different dependencies needs no change here. The archive is uncompressed: it is small
# (a few MB) and the kernel then has nothing to decompress under slow emulation.
set -euo pipefail

# The modules phase 1 loads; their dependencies are added by modprobe. The first four
# reach the host root; the RDMA ones (Soft-RoCE, user verbs, rdma_cm's user interface, the
# dummy netdev for rdma_cm) and virtio_net (the NIC of a guest of tools/rxe_vms.sh) are
# loaded here too because busybox insmod from RAM is much faster under emulation than
# modprobe reading the module tree over 9p.
MODULES=(virtio_pci 9pnet_virtio 9p overlay rdma_rxe ib_uverbs rdma_ucm dummy virtio_net)

main() {
  [[ $# -eq 3 ]] || { echo "usage: $0 MODULES_ROOT KERNEL_VERSION OUTPUT.cpio" >&2; exit 2; }
  local modroot=$1 kver=$2 out=$3 here busybox m ko
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  busybox=$(command -v busybox) || { echo "busybox not found: run tools/setup.sh" >&2; exit 1; }
  # The initramfs has no libc: busybox must be the static build.
  if [[ "$(LC_ALL=C ldd "$busybox" 2>&1 || true)" != *"not a dynamic"* ]]; then
    echo "$busybox is not static: install busybox-static (tools/setup.sh)" >&2
    exit 1
  fi

  STAGE=$(mktemp -d)
  trap 'rm -rf "$STAGE"' EXIT
  local stage=$STAGE
  mkdir -p "$stage/bin" "$stage/modules"
  cp "$busybox" "$stage/bin/busybox"
  install -m 0755 "$here/initramfs_init.sh" "$stage/init"

  # `modprobe --show-depends` prints "insmod /path/x.ko" in load order, deps first.
  : >"$stage/modules.list"
  for m in "${MODULES[@]}"; do
    while read -r _ ko _; do
      [[ -n "$ko" ]] || continue
      if ! grep -qxF "$(basename "$ko")" "$stage/modules.list"; then
        cp "$ko" "$stage/modules/"
        basename "$ko" >>"$stage/modules.list"
      fi
    done < <(modprobe -d "$modroot" -S "$kver" --show-depends "$m" | grep '^insmod ')
  done
  [[ -s "$stage/modules.list" ]] || { echo "no modules found under $modroot for $kver" >&2; exit 1; }

  (cd "$stage" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) >"$out.tmp"
  mv "$out.tmp" "$out"
}

main "$@"
