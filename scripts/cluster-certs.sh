#!/bin/sh
# SPDX-License-Identifier: MIT
# The cluster CA and node certificates of the worker protocol's mutual TLS
# (docs/operations.md, Cluster TLS), with openssl(1):
#   scripts/cluster-certs.sh DIR ca               DIR/ca.crt, DIR/ca.key (made once; keep ca.key offline)
#   scripts/cluster-certs.sh DIR node NAME [ADDR...]
#                                                 DIR/NAME.crt, DIR/NAME.key signed by DIR/ca.*
# A worker's NAME is its worker_name (the client checks the certificate names
# it); API servers and controllers take any NAME. ADDR: IP addresses added as
# subjectAltName IP entries. Keys are EC P-256, mode 0600; node certificates
# last DAYS (default 365) days: rotate by writing new files in place (each new
# connection reads them again).
set -eu
umask 077
dir=${1:?usage: cluster-certs.sh DIR ca | DIR node NAME [ADDR...]}
what=${2:?usage: cluster-certs.sh DIR ca | DIR node NAME [ADDR...]}
days=${DAYS:-365}
mkdir -p "$dir"
case $what in
ca)
        if [ -e "$dir/ca.key" ]; then
                echo "cluster-certs: $dir/ca.key exists: not replaced" >&2
                exit 1
        fi
        openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
                -days "${CA_DAYS:-3650}" -subj "/CN=space cluster CA" \
                -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
                -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
        echo "$dir/ca.crt"
        ;;
node)
        name=${3:?usage: cluster-certs.sh DIR node NAME [ADDR...]}
        case $name in
        *[!A-Za-z0-9._-]*|'') echo "cluster-certs: bad node name '$name' (letters, digits, ., _, -)" >&2; exit 2 ;;
        esac
        [ -e "$dir/ca.key" ] || { echo "cluster-certs: no $dir/ca.key: run '$0 $dir ca' first" >&2; exit 1; }
        shift 3
        san="DNS:$name"
        for a in "$@"; do
                san="$san,IP:$a"
        done
        ext=$(mktemp)
        trap 'rm -f "$ext" "$dir/$name.csr"' EXIT
        printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' \
                "$san" >"$ext"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -subj "/CN=$name" \
                -keyout "$dir/$name.key.new" -out "$dir/$name.csr" 2>/dev/null
        openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
                -days "$days" -sha256 -extfile "$ext" -out "$dir/$name.crt.new" 2>/dev/null
        # in place, key first: a connection between the two renames fails its
        # check and is retried, never served by a mismatched pair for long
        mv "$dir/$name.key.new" "$dir/$name.key"
        mv "$dir/$name.crt.new" "$dir/$name.crt"
        echo "$dir/$name.crt"
        ;;
*)
        echo "usage: cluster-certs.sh DIR ca | DIR node NAME [ADDR...]" >&2
        exit 2
        ;;
esac
