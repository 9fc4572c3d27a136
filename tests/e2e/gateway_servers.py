# SPDX-License-Identifier: MIT
"""Test upstreams for the gateway tests, run inside a test network namespace:
a DNS server (UDP+TCP, port 53) with a fixed zone, HTTP on 80 and 8080, HTTPS
on 443 and 8443 (certificate from the test's own CA), a TCP echo on 2222,
UDP echoes on 5000, 5001 and 443 (the reply is "echo:" + the datagram).
GET /big/N answers N bytes (benchmarks). Every DNS
question and HTTP request is appended to LOG (one JSON line each) so the tests
can tell what reached the upstreams (with the Authorization header the
credential tests look for).

usage: gateway_servers.py LOG CERT KEY ZONE_JSON"""

import json
import socket
import socketserver
import ssl
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG, CERT, KEY, ZONE = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
_lock = threading.Lock()


def log(**kw):
    if LOG == "-":
        return
    with _lock, open(LOG, "a") as f:
        f.write(json.dumps(kw) + "\n")


def dns_answer(q):
    if len(q) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    off, labels = 12, []
    while off < len(q) and q[off]:
        n = q[off]
        labels.append(q[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    off += 1
    qtype, qclass = struct.unpack("!HH", q[off:off + 4])
    name = ".".join(labels).lower()
    log(kind="dns", name=name, qtype=qtype)
    question = q[12:off + 4]
    addrs = ZONE.get(name)
    rcode = 0 if addrs is not None else 3
    answers = b""
    if qtype == 1 and addrs:
        for a in addrs:
            answers += struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(a)
    count = len(addrs) if qtype == 1 and addrs else 0
    return struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, count, 0, 0) + question + answers


def dns_udp(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    while True:
        q, peer = s.recvfrom(4096)
        a = dns_answer(q)
        if a:
            s.sendto(a, peer)


class DnsTcp(socketserver.BaseRequestHandler):
    def handle(self):
        hdr = self.request.recv(2)
        if len(hdr) < 2:
            return
        n = struct.unpack("!H", hdr)[0]
        q = b""
        while len(q) < n:
            c = self.request.recv(n - len(q))
            if not c:
                return
            q += c
        a = dns_answer(q)
        if a:
            self.request.sendall(struct.pack("!H", len(a)) + a)


class Http(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _reply(self):
        n = int(self.headers.get("Content-Length") or 0)
        body_in = self.rfile.read(n) if n else b""
        local = self.connection.getsockname()
        log(kind="http", host=self.headers.get("Host"), path=self.path, local=f"{local[0]}:{local[1]}",
            tls=isinstance(self.connection, ssl.SSLSocket), body=len(body_in),
            auth=self.headers.get("Authorization"), x_api_key=self.headers.get("X-Api-Key"))
        if self.path.startswith("/big/"):
            size = int(self.path.split("/")[2])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"x" * 65536
            while size > 0:
                self.wfile.write(chunk[:min(size, len(chunk))])
                size -= min(size, len(chunk))
            return
        body = f"hello host={self.headers.get('Host')} local={local[0]}:{local[1]} body={len(body_in)}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _reply

    def log_message(self, *a):
        pass


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        local = self.request.getsockname()
        log(kind="echo", local=f"{local[0]}:{local[1]}")
        self.request.sendall(b"echo-banner\n")
        while True:
            d = self.request.recv(65536)
            if not d:
                return
            self.request.sendall(d)


def udp_echo(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        d, peer = s.recvfrom(65536)
        log(kind="udp", port=port, peer=peer[0], data=d[:64].decode("ascii", "replace"))
        s.sendto(b"echo:" + d, peer)


class TServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main():
    for addr in ZONE["_listen"]:
        threading.Thread(target=dns_udp, args=(addr,), daemon=True).start()
        serve(TServer((addr, 53), DnsTcp))
    ThreadingHTTPServer.daemon_threads = True
    bind = ZONE.get("_bind", "0.0.0.0")   # TCP servers: one address, to leave the others' ports to other servers
    serve(ThreadingHTTPServer((bind, 80), Http))
    serve(ThreadingHTTPServer((bind, 8080), Http))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    for port in (443, 8443):
        https = ThreadingHTTPServer((bind, port), Http)
        # the handshake in the handler's thread (on its first read), not in accept(): one client that
        # never finishes its handshake must not hold up every other connection to the port
        https.socket = ctx.wrap_socket(https.socket, server_side=True, do_handshake_on_connect=False)
        serve(https)
    serve(TServer((bind, 2222), Echo))
    for port in (5000, 5001, 443):
        threading.Thread(target=udp_echo, args=(port,), daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes our stdin


if __name__ == "__main__":
    main()
