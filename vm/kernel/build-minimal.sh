#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The minimal guest kernel of the vm runtime, built from the distribution's
# kernel source package (Debian's linux-source-6.1) with every driver the
# guest needs built in (vm/kernel/minimal.config on top of `allnoconfig`).
# It boots in well under half the time of the cloud kernel under TCG and
# needs no modules; vm/kernel/build.sh (the cloud kernel, no build) is the
# fallback when there is no time to build.
#
#   vm/kernel/build-minimal.sh OUTDIR
#
# Writes into OUTDIR the same files as build.sh, so spaced takes either:
#   vmlinux       the ELF kernel (PVH entry point)
#   modules.cpio  a newc cpio archive with an empty /modules/order (nothing
#                 to load: everything is built in)
#   version       the kernel release (what `uname -r` says in the guest)
#   config        the kernel's full .config, for review
#   cmdline-devices  (empty) the guest finds its virtio-mmio devices on its
#                 command line: spaced starts its VMs without ACPI tables
#
# Takes 10-15 minutes on 2 idle cores. Needs: apt-get, dpkg-deb, xz, make, gcc,
# bc, flex, bison, libelf-dev (`apt-get install -y make gcc bc flex bison
# libelf-dev xz-utils`). Reproducible: the same source package gives the same kernel
# (KBUILD_BUILD_TIMESTAMP/USER/HOST are fixed). SPACE_VM_KERNEL_SOURCE names
# an already downloaded linux-source-*.deb or .tar.xz to skip the download.
set -euo pipefail

die() {
	echo "vm/kernel/build-minimal.sh: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
out=$1
here=$(cd "$(dirname "$0")" && pwd)
fragment=$here/minimal.config
[ -r "$fragment" ] || die "missing $fragment"

for t in apt-get dpkg-deb xz make gcc bc flex bison cpio; do
	command -v "$t" >/dev/null || die "needs $t (apt-get install -y make gcc bc flex bison libelf-dev xz-utils)"
done
[ -e /usr/include/libelf.h ] || die "needs libelf-dev (apt-get install -y make gcc bc flex bison libelf-dev xz-utils)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

src=${SPACE_VM_KERNEL_SOURCE:-}
if [ -z "$src" ]; then
	pkg=${SPACE_VM_KERNEL_SOURCE_PACKAGE:-linux-source-6.1}
	(cd "$work" && apt-get download "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed (apt-get update?)"
	src=$(ls "$work"/*.deb | head -n1)
fi
case "$src" in
*.deb)
	dpkg-deb --fsys-tarfile "$src" | tar -x -C "$work" --wildcards './usr/src/linux-source-*.tar.xz' ||
		die "no kernel source tarball in $src"
	tarball=$(ls "$work"/usr/src/linux-source-*.tar.xz | head -n1)
	;;
*.tar.xz) tarball=$src ;;
*) die "SPACE_VM_KERNEL_SOURCE must be a .deb or .tar.xz: $src" ;;
esac
tar -xJf "$tarball" -C "$work"
tree=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'linux-source-*' | head -n1)
[ -n "$tree" ] || die "no linux-source-* directory in $tarball"

export ARCH=x86_64 KBUILD_BUILD_TIMESTAMP='1970-01-01' KBUILD_BUILD_USER=space KBUILD_BUILD_HOST=space
make -C "$tree" -s KCONFIG_ALLCONFIG="$fragment" allnoconfig
# every line the fragment sets must have survived Kconfig's dependency rules
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*) grep -qxF "$line" "$tree/.config" || die "Kconfig dropped '$line' (a dependency is missing from minimal.config)" ;;
	"# CONFIG_"*" is not set") grep -qxF "$line" "$tree/.config" || die "Kconfig turned on '${line#\# }'" ;;
	esac
done <"$fragment"
make -C "$tree" -s -j"$(nproc)" vmlinux
release=$(make -C "$tree" -s kernelrelease)
head -c 4 "$tree/vmlinux" | grep -q ELF || die "the built vmlinux is not an ELF file"

mkdir -p "$work/cpio/modules"
: >"$work/cpio/modules/order"
(cd "$work/cpio" && find . -mindepth 1 | LC_ALL=C sort |
	cpio --quiet -o -H newc --reproducible --owner=0:0 >"$work/modules.cpio")

mkdir -p "$out"
install -m 0644 "$tree/vmlinux" "$out/vmlinux.tmp" && mv "$out/vmlinux.tmp" "$out/vmlinux"
install -m 0644 "$work/modules.cpio" "$out/modules.cpio.tmp" && mv "$out/modules.cpio.tmp" "$out/modules.cpio"
install -m 0644 "$tree/.config" "$out/config.tmp" && mv "$out/config.tmp" "$out/config"
echo "$release" >"$out/version.tmp" && mv "$out/version.tmp" "$out/version"
: >"$out/cmdline-devices"
echo "vm/kernel/build-minimal.sh: $release → $out" >&2
