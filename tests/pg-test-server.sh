#!/bin/sh
# SPDX-License-Identifier: MIT
# A private, throw-away PostgreSQL for tests.
#
#   pg-test-server.sh start            initdb + start; prints the connection URL
#   pg-test-server.sh restart DIR|URL  fast stop (ends every session), start on the same port
#   pg-test-server.sh stop DIR|URL     immediate stop, then remove everything
#   pg-test-server.sh down DIR|URL     fast stop, keeping everything (an outage)
#   pg-test-server.sh up DIR|URL       start again after down, on the same port
#
# Everything lives in one directory /tmp/space-pg.XXXXXX: the data dir, the
# unix socket and the log. The server listens on that socket and on
# 127.0.0.1 at a random free port; unix-socket logins are trusted, TCP logins
# need a password (scram-sha-256). It runs as the postgres user when started
# as root (initdb refuses root), else as the caller. PG_BINDIR overrides where
# initdb and pg_ctl are found. Exit 77: no PostgreSQL binaries here.
set -eu

BASE_PREFIX=/tmp/space-pg.
START_TRIES=8
PORT_MIN=20000
PORT_SPAN=30000

die() {
        echo "pg-test-server: $*" >&2
        exit 1
}

find_bindir() {
        if [ -n "${PG_BINDIR:-}" ]; then
                if [ -x "$PG_BINDIR/initdb" ] && [ -x "$PG_BINDIR/pg_ctl" ]; then
                        echo "$PG_BINDIR"
                else
                        echo ""
                fi
                return
        fi
        for d in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
                if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
                        echo "$d"
                        return
                fi
        done
        echo ""
}

BINDIR=$(find_bindir)

as_owner() {
        if [ "$(id -u)" = 0 ]; then
                runuser -u postgres -- "$@"
        else
                "$@"
        fi
}

# The directory from a DIR or from the host= parameter of a URL we printed;
# only our own directories are accepted (this script removes them).
base_of() {
        case "$1" in
        postgres://* | postgresql://*)
                dir=$(printf '%s\n' "$1" | sed -n 's/.*[?&]host=\([^&]*\).*/\1/p')
                ;;
        *)
                dir=$1
                ;;
        esac
        suffix=${dir#"$BASE_PREFIX"}
        case "$suffix" in
        "$dir" | "" | */* | .*) die "not a directory of this script: '$dir'" ;;
        esac
        echo "$dir"
}

random_port() {
        echo $((PORT_MIN + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % PORT_SPAN))
}

# Starts the server of $base on port $1; returns non-zero if it did not come up.
start_on() {
        as_owner "$BINDIR/pg_ctl" start -w -t 30 -s -D "$base/data" -l "$base/log" \
                -o "-p $1 -k $base -c listen_addresses=127.0.0.1" >/dev/null 2>&1
}

url_of() {
        echo "postgresql://postgres@/postgres?host=$base&port=$1"
}

cmd_start() {
        [ -n "$BINDIR" ] || { echo "pg-test-server: no PostgreSQL binaries (initdb, pg_ctl)" >&2; exit 77; }
        [ "$(id -u)" != 0 ] || id postgres >/dev/null 2>&1 || die "running as root but there is no postgres user"

        base=$(mktemp -d "${BASE_PREFIX}XXXXXX")
        chmod 0700 "$base"
        [ "$(id -u)" != 0 ] || chown postgres: "$base"
        if ! as_owner "$BINDIR/initdb" -D "$base/data" -U postgres -E UTF8 --locale=C --no-sync \
                --auth-local=trust --auth-host=scram-sha-256 >"$base/initdb.log" 2>&1; then
                cat "$base/initdb.log" >&2
                rm -rf "$base"
                die "initdb failed"
        fi
        # Speed over durability: the data dies with the test anyway.
        cat >>"$base/data/postgresql.conf" <<EOF
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 60
shared_buffers = 16MB
max_wal_size = 256MB
log_min_messages = warning
EOF
        tries=0
        while :; do
                port=$(random_port)
                if start_on "$port"; then
                        echo "$port" >"$base/port"
                        url_of "$port"
                        return 0
                fi
                tries=$((tries + 1))
                if [ "$tries" -ge "$START_TRIES" ]; then
                        tail -n 20 "$base/log" >&2 || true
                        stop_dir
                        die "the server did not start"
                fi
        done
}

# Stops the server of $base (if running) and removes the directory.
stop_dir() {
        if [ -f "$base/data/postmaster.pid" ] && [ -n "$BINDIR" ]; then
                as_owner "$BINDIR/pg_ctl" stop -w -t 30 -s -m immediate -D "$base/data" >/dev/null 2>&1 || true
        fi
        # pg_ctl gave up or is missing: end the postmaster we started, by pid.
        if [ -f "$base/data/postmaster.pid" ]; then
                pid=$(head -n 1 "$base/data/postmaster.pid")
                if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                        kill -QUIT "$pid" 2>/dev/null || true
                        sleep 1
                        kill -KILL "$pid" 2>/dev/null || true
                fi
        fi
        rm -rf "$base"
}

cmd_stop() {
        base=$(base_of "$1")
        [ -d "$base" ] || return 0
        stop_dir
}

cmd_restart() {
        base=$(base_of "$1")
        [ -n "$BINDIR" ] || die "no PostgreSQL binaries"
        [ -f "$base/port" ] || die "no server in $base"
        port=$(cat "$base/port")
        as_owner "$BINDIR/pg_ctl" stop -w -t 30 -s -m fast -D "$base/data" >/dev/null 2>&1 || true
        start_on "$port" || { tail -n 20 "$base/log" >&2; die "restart failed"; }
}

cmd_down() {
        base=$(base_of "$1")
        [ -n "$BINDIR" ] || die "no PostgreSQL binaries"
        as_owner "$BINDIR/pg_ctl" stop -w -t 30 -s -m fast -D "$base/data" >/dev/null 2>&1 || die "stop failed"
}

cmd_up() {
        base=$(base_of "$1")
        [ -n "$BINDIR" ] || die "no PostgreSQL binaries"
        [ -f "$base/port" ] || die "no server in $base"
        start_on "$(cat "$base/port")" || { tail -n 20 "$base/log" >&2; die "start failed"; }
}

case "${1:-}" in
start) cmd_start ;;
stop) [ $# -eq 2 ] || die "usage: $0 stop DIR|URL"; cmd_stop "$2" ;;
restart) [ $# -eq 2 ] || die "usage: $0 restart DIR|URL"; cmd_restart "$2" ;;
down) [ $# -eq 2 ] || die "usage: $0 down DIR|URL"; cmd_down "$2" ;;
up) [ $# -eq 2 ] || die "usage: $0 up DIR|URL"; cmd_up "$2" ;;
*) die "usage: $0 start | stop DIR|URL | restart DIR|URL | down DIR|URL | up DIR|URL" ;;
esac
