#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Builds the default "base" template, offline: a root file system made of
# Debian's static busybox (every applet as a symlink), static bash and curl
# with the libraries it links and the CA bundle (busybox wget's own TLS fails
# the handshake with most servers: it offers no signature algorithm they
# take, so HTTPS needs curl; wget does plain HTTP), with
# root and an unprivileged "user" (uid/gid 1000). The result is a tar archive
# with numeric owners that `space template import base OUTPUT.tar` (or
# pool_template_import_tar()) takes.
#
#   templates/base/build.sh OUTPUT.tar
#
# Needs root (the tree is owned by 0 and 1000). Installs busybox-static and
# bash-static with apt-get if they are missing. The archive is deterministic:
# sorted names, a fixed mtime ($SOURCE_DATE_EPOCH, default 2024-01-01), GNU
# format without atime/ctime, explicit modes.
set -euo pipefail

die() {
	echo "build.sh: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: $0 OUTPUT.tar"
out=$1
[ "$(id -u)" -eq 0 ] || die "must run as root (the tree has files owned by 0 and 1000)"
epoch=${SOURCE_DATE_EPOCH:-1704067200}
case $epoch in '' | *[!0-9]*) die "SOURCE_DATE_EPOCH must be a number" ;; esac

pkgs=()
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "ok installed" || pkgs+=(busybox-static)
dpkg-query -W -f='${Status}' bash-static 2>/dev/null | grep -q "ok installed" || pkgs+=(bash-static)
dpkg-query -W -f='${Status}' curl 2>/dev/null | grep -q "ok installed" || pkgs+=(curl)
dpkg-query -W -f='${Status}' ca-certificates 2>/dev/null | grep -q "ok installed" || pkgs+=(ca-certificates)
if [ ${#pkgs[@]} -gt 0 ]; then
	echo "build.sh: installing ${pkgs[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2 ||
		die "could not install ${pkgs[*]}"
fi
busybox=$(dpkg -L busybox-static | grep -E '/bin/busybox$' | head -n1)
bash_static=$(dpkg -L bash-static | grep -E '/bin/bash-static$' | head -n1)
[ -x "$busybox" ] || die "busybox-static has no bin/busybox"
[ -x "$bash_static" ] || die "bash-static has no bin/bash-static"
curl_bin=/usr/bin/curl
[ -x "$curl_bin" ] || die "curl has no /usr/bin/curl"
[ -f /etc/ssl/certs/ca-certificates.crt ] || die "ca-certificates has no /etc/ssl/certs/ca-certificates.crt"

work=$(mktemp -d "${TMPDIR:-/tmp}/space-base.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
root=$work/root
umask 022
mkdir -m 0755 "$root"

# Directories: mode and owner explicit so the result does not depend on the host.
for d in bin sbin usr usr/bin usr/sbin usr/lib etc dev proc sys run var var/log var/lib home; do
	install -d -m 0755 "$root/$d"
done
install -d -m 0700 "$root/root"
install -d -m 1777 "$root/tmp" "$root/var/tmp"
install -d -m 0755 -o 1000 -g 1000 "$root/home/user"

install -m 0755 "$busybox" "$root/bin/busybox"
install -m 0755 "$bash_static" "$root/bin/bash"
ln -s busybox "$root/bin/sh"

# Every applet as a symlink at its usual place (never over bash, sh or busybox).
n=0
while read -r applet; do
	case $applet in
	'' | */busybox | bin/sh | */bash | linuxrc) continue ;;
	/* | *..*) die "unexpected applet path '$applet'" ;;
	esac
	[ -e "$root/$applet" ] || [ -L "$root/$applet" ] && continue
	[ -d "$root/${applet%/*}" ] || mkdir -p "$root/${applet%/*}"
	ln -s /bin/busybox "$root/$applet"
	n=$((n + 1))
done < <("$busybox" --list-full | LC_ALL=C sort)
[ "$n" -gt 100 ] || die "busybox lists only $n applets"

# curl and the shared libraries it links (paths as ldd names them), the CA bundle.
install -m 0755 "$curl_bin" "$root/usr/bin/curl"
while read -r lib; do
	case $lib in /*) ;; *) continue ;; esac
	case $lib in *..*) die "unexpected library path '$lib'" ;; esac
	real=$(readlink -f "$lib")
	install -D -m "$(stat -c %a "$real")" "$real" "$root$lib"
done < <(ldd "$curl_bin" | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]*ld-linux/ { print $1 }' | LC_ALL=C sort -u)
install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"

put() { # put MODE PATH (content on stdin)
	cat >"$root/$2"
	chmod "$1" "$root/$2"
}

put 0644 etc/passwd <<'EOF'
root:x:0:0:root:/root:/bin/bash
user:x:1000:1000:user:/home/user:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
put 0644 etc/group <<'EOF'
root:x:0:
user:x:1000:
nogroup:x:65534:
EOF
put 0600 etc/shadow <<'EOF'
root:!:19723:0:99999:7:::
user:!:19723:0:99999:7:::
nobody:!:19723:0:99999:7:::
EOF
put 0644 etc/hostname <<'EOF'
space
EOF
put 0644 etc/hosts <<'EOF'
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
127.0.1.1	space
EOF
put 0644 etc/profile <<'EOF'
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# \$ is '#' for root, else '$': no $(id -u), whose fork and exec were half
# the cost of every login shell (the E2B SDKs run each command in one)
PS1='\u@\h:\w\$ '
export PS1
export HOME="${HOME:-/root}"
umask 022
EOF
put 0644 etc/shells <<'EOF'
/bin/sh
/bin/bash
EOF
put 0644 etc/os-release <<'EOF'
NAME="space base"
PRETTY_NAME="space base (busybox + bash)"
ID=space-base
ID_LIKE=debian
VERSION_ID=1
HOME_URL="https://github.com/space"
EOF
ln -s ../../etc/os-release "$root/usr/lib/os-release"
put 0644 etc/resolv.conf </dev/null
put 0644 root/.bashrc <<'EOF'
[ -f /etc/profile ] && . /etc/profile
EOF
install -m 0644 -o 1000 -g 1000 "$root/root/.bashrc" "$root/home/user/.bashrc"

# Smoke test: the shells, an applet and curl run from the new root.
if command -v chroot >/dev/null; then
	chroot "$root" /bin/bash -c 'ls / >/dev/null && [ "$(echo ok | cat)" = ok ] && curl --version >/dev/null' ||
		die "the new root does not run bash, busybox and curl"
fi

tmp_out="$out.tmp.$$"
tar --create --file="$tmp_out" --directory="$root" \
	--format=gnu --numeric-owner --sort=name --mtime="@$epoch" \
	--no-acls --no-selinux --no-xattrs .
mv -f "$tmp_out" "$out"
echo "build.sh: wrote $out ($(du -k "$out" | cut -f1) KiB, $n applets)" >&2
