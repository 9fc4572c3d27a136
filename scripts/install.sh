#!/bin/sh
# Sets up and runs space on embedded defaults (SQLite, a loop-mounted btrfs
# pool in /var/lib/space): installs the Debian packages, builds, installs
# space/spaced to /usr/local, builds the offline `base` template, and starts
# spaced with `space up`. Run as root on Debian 12. Idempotent.
set -eu
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
if [ ! -f build-release/build.ninja ]; then
        meson setup build-release --buildtype=release -Dwerror=false --prefix=/usr/local >/dev/null
fi
ninja -C build-release >/dev/null
meson install -C build-release --quiet

tdir=/usr/local/share/space/templates
mkdir -p "$tdir"
if [ ! -f "$tdir/base.tar" ] || [ templates/base/build.sh -nt "$tdir/base.tar" ]; then
        ./templates/base/build.sh "$tdir/base.tar"
fi

space up
