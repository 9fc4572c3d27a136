#!/bin/sh
# One command: builds (release), starts a private spaced on a temporary state
# dir and port, runs bench.py against it and the peers, and cleans up.
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
./scripts/install-deps.sh >/dev/null
[ -f build-release/build.ninja ] || meson setup build-release --buildtype=release -Dwerror=false >/dev/null
ninja -C build-release >/dev/null
mkdir -p build-release/templates
[ -f build-release/templates/base.tar ] || ./templates/base/build.sh build-release/templates/base.tar

state=$(mktemp -d /tmp/space-bench-XXXXXX)
rootfs=$(mktemp -d /tmp/space-bench-rootfs-XXXXXX)
port=$((20000 + $$ % 20000))
# the benchmarks measure the server, not its rate limits: the admin key gets no practical limit
# host-global names of its own (nft table, link prefix, address pool), so a
# bench beside a running spaced or a test run does not touch theirs
net="--net-table spacebench$$ --net-link-prefix b$(($$ % 100000))- --net-pool 10.$((160 + $$ % 32)).0.0/16"
cleanup() {
        if [ -f "$state/spaced.pid" ]; then
                pid=$(cat "$state/spaced.pid")
                kill "$pid" 2>/dev/null || true
                while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        fi
        rm -rf "$state" "$rootfs"
}
trap cleanup EXIT INT TERM
tar -C "$rootfs" -xf build-release/templates/base.tar
build-release/src/spaced/spaced --state-dir "$state" --listen "127.0.0.1:$port" \
        --template-dir "$top/build-release/templates" --cgroup-root space-bench --pool-size-mb 4096 --disk-overcommit 100 \
        --log-level warning --ingress-listen "127.0.0.1:$((port + 1))" $net \
        --admin-key-rps 1000000 --admin-key-burst 1000000 >"$state/spaced.log" 2>&1 &
for i in $(seq 1 300); do
        curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
        sleep 0.1
done
key=$(cat "$state/admin.key")
if [ -n "${CHURN:-}" ]; then
        # CHURN=N ./bench/run.sh: only the churn benchmark, N cycles (minutes: 10,000 take ~10)
        /usr/bin/python3 bench/churn.py --url "http://127.0.0.1:$port" --key "$key" -n "$CHURN" "$@"
        exit 0
fi
if [ -n "${EXEC_RATE:-}" ]; then
        # EXEC_RATE=1 ./bench/run.sh: only the exec throughput
        /usr/bin/python3 bench/exec-rate.py --url "http://127.0.0.1:$port" --key "$key" "$@"
        exit 0
fi
if [ -n "${DENSITY:-}" ]; then
        # DENSITY=N ./bench/run.sh: only the density benchmark, N idle sandboxes
        /usr/bin/python3 bench/density.py --url "http://127.0.0.1:$port" --key "$key" --state-dir "$state" \
                --rootfs "$rootfs" -n "$DENSITY" "$@"
        exit 0
fi
/usr/bin/python3 bench/bench.py --url "http://127.0.0.1:$port" --key "$key" \
        --state-dir "$state" --rootfs "$rootfs" "$@"
# a burst of 100 creates at once beside bwrap started 100 at once
/usr/bin/python3 bench/burst.py --url "http://127.0.0.1:$port" --key "$key" \
        --rootfs "$rootfs" -n 100
# the ingress and the port forward against a direct connection
/usr/bin/python3 bench/ports.py --url "http://127.0.0.1:$port" --key "$key" \
        --ingress "127.0.0.1:$((port + 1))"
# exec throughput with 1 and 8 connections over 50 sandboxes
/usr/bin/python3 bench/exec-rate.py --url "http://127.0.0.1:$port" --key "$key"
# the clients' own cost: the Python SDK and the MCP server against raw HTTP
/usr/bin/python3 bench/clients.py --url "http://127.0.0.1:$port" --key "$key" \
        --space build-release/src/cli/space
