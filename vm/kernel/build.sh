#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The guest kernel of the vm runtime, without building one: Debian's cloud
# kernel (linux-image-cloud-amd64), whose compressed bzImage carries a
# PVH-bootable ELF vmlinux that QEMU's `microvm` machine loads directly.
#
#   vm/kernel/build.sh OUTDIR
#
# Writes into OUTDIR:
#   vmlinux       the uncompressed ELF kernel (PVH entry point)
#   modules.cpio  a newc cpio archive with the virtio modules the guest needs
#                 (the cloud kernel builds them as modules) under /modules/,
#                 and /modules/order listing them in load order
#   version       the kernel release (what `uname -r` says in the guest)
#
# spaced appends a second cpio holding space-agent as /init to modules.cpio
# to make the initramfs: the agent loads the modules, mounts the sandbox's
# disk and switches to it, so nothing of the agent is on the guest's disk.
#
# Needs: apt-get (the package is fetched with `apt-get download`, not
# installed), dpkg-deb, lz4 (the cloud kernel's bzImage is LZ4), cpio.
# The output depends only on the package version: the same package gives the
# same files.
set -euo pipefail

die() {
	echo "vm/kernel/build.sh: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
out=$1
modules=(virtio_ring virtio virtio_mmio virtio_blk virtio_console virtio_rng failover net_failover virtio_net fuse virtiofs)

for t in apt-get dpkg-deb lz4 cpio; do
	command -v "$t" >/dev/null || die "needs $t (scripts/install-deps.sh installs it)"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the meta package names the current ABI: linux-image-cloud-amd64 → linux-image-6.1.0-N-cloud-amd64
pkg=${SPACE_VM_KERNEL_PACKAGE:-}
if [ -z "$pkg" ]; then
	pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9].*-cloud-amd64\)$/\1/p' | head -n1)
	[ -n "$pkg" ] || die "cannot resolve linux-image-cloud-amd64 (apt-get update?)"
fi
(cd "$work" && apt-get download "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed"
deb=$(ls "$work"/*.deb | head -n1)
dpkg-deb -x "$deb" "$work/x"

vmlinuz=$(ls "$work"/x/boot/vmlinuz-* | head -n1)
release=${vmlinuz##*/vmlinuz-}
# the payload is an LZ4 legacy frame (magic 02 21 4c 18) inside the bzImage
off=$(grep -aboP '\x02\x21\x4c\x18' "$vmlinuz" | head -n1 | cut -d: -f1)
[ -n "$off" ] || die "no LZ4 payload in $vmlinuz"
tail -c +$((off + 1)) "$vmlinuz" | lz4 -dc >"$work/vmlinux" 2>/dev/null || true
head -c 4 "$work/vmlinux" | grep -q ELF || die "extracted kernel is not an ELF file"

mkdir -p "$work/cpio/modules"
: >"$work/cpio/modules/order"
for m in "${modules[@]}"; do
	f=$(find "$work/x/lib/modules/$release" -name "$m.ko" | head -n1)
	[ -n "$f" ] || continue # built in
	cp "$f" "$work/cpio/modules/$m.ko"
	echo "$m.ko" >>"$work/cpio/modules/order"
done
(cd "$work/cpio" && find . -mindepth 1 | LC_ALL=C sort |
	cpio --quiet -o -H newc --reproducible --owner=0:0 >"$work/modules.cpio")

mkdir -p "$out"
install -m 0644 "$work/vmlinux" "$out/vmlinux.tmp" && mv "$out/vmlinux.tmp" "$out/vmlinux"
install -m 0644 "$work/modules.cpio" "$out/modules.cpio.tmp" && mv "$out/modules.cpio.tmp" "$out/modules.cpio"
echo "$release" >"$out/version.tmp" && mv "$out/version.tmp" "$out/version"
echo "vm/kernel/build.sh: $release → $out" >&2
