#!/bin/sh
# Installs the Debian 12 packages space needs to build, run and test.
# Idempotent: installs only what is missing. Run as root.
set -eu

PKGS="gcc libc6-dev meson ninja-build pkg-config libsqlite3-dev libpq-dev postgresql libssl-dev libseccomp-dev libnftables-dev libnghttp2-dev libpsl-dev zlib1g-dev publicsuffix nftables
busybox-static bash-static btrfs-progs tar util-linux iproute2 procps
python3 python3-pytest python3-pytest-xdist python3-h2 python3-yaml curl nghttp2-server nghttp2-client python3-grpcio nodejs npm strace chromium
qemu-system-x86 e2fsprogs lz4 cpio
docker-registry skopeo apache2-utils openssl"
# for the benchmark's peers and the debian template recipe
EXTRA="bubblewrap runc debootstrap"

want=""
for p in $PKGS ${SPACE_DEPS_EXTRA:-$EXTRA}; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
        # npm comes inside NodeSource's nodejs (which conflicts with Debian's npm package)
        [ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
        want="$want $p"
done
if [ -n "$want" ]; then
        echo "installing:$want"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $want >/dev/null
fi
# the template pull tests start docker-registry themselves, on loopback with
# their own certificate: the service the package just installed (port 5000)
# is not wanted (one that was there before is left alone)
case " $want " in
*" docker-registry "*)
        if command -v systemctl >/dev/null 2>&1; then
                systemctl disable --now docker-registry >/dev/null 2>&1 || true
        fi ;;
esac
echo "dependencies: ok"
