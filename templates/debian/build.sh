#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Builds the "debian" template: Debian bookworm (minbase) with bash,
# coreutils, python3, ca-certificates, curl, git and wget, plus an
# unprivileged "user" (uid/gid 1000), as a tar archive with numeric owners
# for `space template import debian OUTPUT.tar`.
#
#   templates/debian/build.sh OUTPUT.tar
#
# Needs root, debootstrap and network access to a Debian mirror:
# $SPACE_DEBIAN_MIRROR, else the first Debian mirror in the host's
# /etc/apt/sources.list{,.d}, else http://deb.debian.org/debian.
# $SPACE_DEBIAN_SUITE overrides the release (bookworm). Takes minutes.
set -euo pipefail

die() {
	echo "build.sh: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: $0 OUTPUT.tar"
out=$1
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
suite=${SPACE_DEBIAN_SUITE:-bookworm}
packages=bash,coreutils,python3,ca-certificates,curl,git,wget

# The host's Debian mirror: one-line "deb URI suite ..." entries and deb822
# stanzas ("URIs:" with "Suites:"), skipping security and third-party sources.
host_mirror() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		awk '$1 == "deb" {
			i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
			if ($i ~ /^https?:\/\// && $i !~ /security/ && $(i + 1) !~ /security/ && $i ~ /debian/) { print $i; exit }
		}' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		awk 'BEGIN { RS = ""; FS = "\n" } {
			uri = ""; suites = ""; enabled = 1
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^URIs:/) { uri = $i; sub(/^URIs:[ \t]*/, "", uri); sub(/[ \t].*/, "", uri) }
				if ($i ~ /^Suites:/) suites = $i
				if ($i ~ /^Enabled:[ \t]*no/) enabled = 0
			}
			if (enabled && uri ~ /^https?:\/\// && uri ~ /debian/ && uri !~ /security/ && suites !~ /security/) { print uri; exit }
		}' "$f"
	done
}

mirror=${SPACE_DEBIAN_MIRROR:-}
[ -n "$mirror" ] || mirror=$(host_mirror | head -n1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
case $mirror in http://* | https://* | file://*) ;; *) die "mirror '$mirror' is not a URL" ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/space-debian.XXXXXX")
root=$work/root

# Never rm -rf through a mount debootstrap may have left (proc, sys, dev/pts).
cleanup() {
	local m
	if [ -r /proc/self/mountinfo ]; then
		awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
			while read -r m; do umount -l "$m" || true; done
	fi
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT

echo "build.sh: debootstrap $suite from $mirror" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >&2 ||
	die "debootstrap failed (see $root/debootstrap/debootstrap.log)"

in_root() {
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"
}

in_root useradd --create-home --uid 1000 --user-group --shell /bin/bash user
in_root passwd --lock root >/dev/null
echo space >"$root/etc/hostname"
cat >"$root/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
127.0.1.1	space
EOF
: >"$root/etc/resolv.conf" # the runtime provides DNS
chmod 0644 "$root/etc/resolv.conf"
: >"$root/etc/machine-id"

in_root /bin/bash -c 'python3 -c "print(1)" >/dev/null && git --version >/dev/null && curl --version >/dev/null &&
	[ "$(id -u user)" = 1000 ]' || die "the new root fails its smoke test"

# Caches, logs and host leftovers do not belong in a template.
in_root apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/debconf/*-old \
	"$root"/var/lib/dpkg/*-old "$root"/var/log/apt/* "$root"/var/log/*.log "$root"/tmp/* "$root"/var/tmp/* \
	"$root"/debootstrap "$root"/root/.bash_history
find "$root/var/log" -type f -exec truncate -s 0 {} +
# /dev is the runtime's: keep the directory, drop the nodes debootstrap made
# (after the smoke test, whose redirections need /dev/null).
find "$root/dev" -mindepth 1 -delete

tmp_out="$out.tmp.$$"
tar --create --file="$tmp_out" --directory="$root" --one-file-system \
	--numeric-owner --sort=name --xattrs --xattrs-include='security.capability' .
mv -f "$tmp_out" "$out"
echo "build.sh: wrote $out ($(du -m "$out" | cut -f1) MiB)" >&2
