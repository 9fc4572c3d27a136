# SPDX-License-Identifier: MIT
"""Credentials over HTTP/2 on intercepted connections (the topology of
test_gateway_cred.py: `sb` plays a sandbox, the upstreams run in `srv`).
H2HOST is nghttpd (HTTP/2 only, every frame it receives or sends logged:
what the upstream got is read from its log, by connection and stream);
CRED_HOST is the Python HTTP/1.1 server. The client is curl (with nghttp2)
in `sb`, trusting the sandbox's CA. The gateway offers upstream what the
client offered and answers the client with what the upstream chose."""

import contextlib
import hashlib
import json
import os
import re
import secrets
import subprocess
import time

import pytest

from e2e_host import netns_exec

from test_gateway_cred import (CRED_HOST, FLIPHOST, GRPCHOST, H2HOST, HOST_END, NGHTTPD, OTHER, SB_IP,  # noqa: F401
                               SRV_GRPC, SRV_H2, cnet, cnet_gateway, cred, curl, set_creds, upstream, wait_listening)

NGHTTP = "/usr/bin/nghttp"   # Debian nghttp2-client: shows every frame it receives
VALUE_RE = re.compile(r"^\[id=(\d+)\] \[[ 0-9.]+\] recv \(stream_id=(\d+)(?:, sensitive)?\) ([^:]+|:[a-z]+): (.*)$")


@pytest.fixture
def h2net(cnet):  # noqa: F811
    if not cnet["h2log"] or not os.path.exists(NGHTTP):
        pytest.skip("nghttpd or nghttp missing (Debian packages nghttp2-server, nghttp2-client)")
    return cnet


def received(net, tok):
    """The requests nghttpd received whose :path holds tok: [(connection, stream, {header: value})]."""
    reqs = {}
    with open(net["h2log"]) as f:
        for line in f:
            m = VALUE_RE.match(line.rstrip("\n"))
            if m:
                reqs.setdefault((m[1], m[2]), {})[m[3]] = m[4]
    return [(c, s, h) for (c, s), h in reqs.items() if tok in h.get(":path", "")]


def h2_log_text(net):
    with open(net["h2log"]) as f:
        return f.read()


def cred_uses(net, host):
    return [e for e in net["gw"].events if e["event"] == "credential.used" and e["data"]["host"] == host]


def test_h2_credential_on_every_stream_of_one_connection(h2net):
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(h2net, [cred(h2net, "h2c", v, [H2HOST])])["ok"]
    tok = secrets.token_hex(4)
    before = len(cred_uses(h2net, H2HOST))
    urls = [f"https://{H2HOST}/index.html?{tok}={i}" for i in range(4)]
    rc, out, err = curl(h2net, "--http2", "--parallel", "-w", "%{http_version} %{http_code}\n",
                        *[a for u in urls for a in ("-o", "/dev/null", u)])
    assert rc == 0, err
    assert out.split("\n")[:4] == ["2 200"] * 4, out
    got = received(h2net, tok)
    assert len(got) == 4, got
    assert len({c for c, _, _ in got}) == 1, got           # one upstream connection, several streams
    assert len({s for _, s, _ in got}) == 4, got
    assert all(h["authorization"] == f"Bearer {v}" and h[":authority"] == H2HOST for _, _, h in got), got
    # sent as never-indexed literals (HPACK) on the upstream leg; one credential-use event per request
    text = h2_log_text(h2net)
    assert all(f"[id={c}] " in text and re.search(rf"^\[id={c}\] .* recv \(stream_id={s}, sensitive\) authorization: ",
                                                  text, re.M) for c, s, _ in got)
    assert h2net["gw"].wait_event(lambda e: len(cred_uses(h2net, H2HOST)) >= before + 4)
    assert not any(v in json.dumps(e) for e in h2net["gw"].events)


def test_h2_placeholder_replaced_trailers_passed_push_refused(h2net):
    v = "sk-gw-" + secrets.token_hex(12)
    c = cred(h2net, "h2k", v, [H2HOST], header_name="X-Api-Key", header_format="{value}")
    assert set_creds(h2net, [c])["ok"]
    tok = secrets.token_hex(4)
    rc, out, err = curl(h2net, "--http2", "-D", "-", "-H", "x-api-key: space-cred-h2k",
                        "-H", "x-other: prefix space-cred-h2k", f"https://{H2HOST}/index.html?{tok}")
    assert rc == 0, err
    assert out.startswith("HTTP/2 200") and "hello h2" in out, out
    (_, _, h), = received(h2net, tok)
    assert h["x-api-key"] == v and h["x-other"] == f"prefix {v}", h
    # the upstream's trailer (HEADERS after DATA, as gRPC's status) reaches the client: nghttp shows it (curl does not)
    r = subprocess.run([*netns_exec(h2net["ns"]["sb"]), NGHTTP, "-v", f"https://{H2HOST}/index.html?{tok}t"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"recv \(stream_id=\d+\) x-space-trailer: done", r.stdout), r.stdout
    # the gateway told the upstream ENABLE_PUSH=0: nghttpd promised nothing
    assert "PUSH_PROMISE" not in h2_log_text(h2net)


def test_h2_authority_of_another_host_refused(h2net):
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(h2net, [cred(h2net, "h2f", v, [H2HOST])])["ok"]
    tok = secrets.token_hex(4)
    # curl sends a Host header as :authority: a request for OTHER on the connection made for H2HOST
    rc, out, err = curl(h2net, "--http2", "-w", " %{http_version} %{http_code}", "-H", f"Host: {OTHER}",
                        f"https://{H2HOST}/index.html?{tok}")
    assert rc == 0 and out.endswith(" 2 421") and "on a connection for h2.test" in out, (out, err)
    assert h2net["gw"].wait_event(lambda e: e["event"] == "network.deny" and f"request for {OTHER}" in e["reason"])
    assert received(h2net, tok) == []
    # the same with a port the connection is not for
    rc, out, err = curl(h2net, "--http2", "-w", " %{http_code}", "-H", f"Host: {H2HOST}:8443",
                        f"https://{H2HOST}/index.html?{tok}")
    assert rc == 0 and out.endswith(" 421"), (out, err)
    assert received(h2net, tok) == []


def test_h2_huge_header_block_refused(h2net):
    assert set_creds(h2net, [cred(h2net, "h2h", "sk-gw-" + secrets.token_hex(12), [H2HOST])])["ok"]
    tok = secrets.token_hex(4)
    rc, out, err = curl(h2net, "--http2", "-w", " %{http_code}", "-H", "x-big: " + "a" * 20000,
                        f"https://{H2HOST}/index.html?{tok}")
    assert rc == 0 and out.endswith(" 431") and "too large" in out, (out, err)
    assert received(h2net, tok) == []


def test_h2_bodies_both_ways_beyond_the_window(h2net, tmp_path):
    assert set_creds(h2net, [cred(h2net, "h2b", "sk-gw-" + secrets.token_hex(12), [H2HOST])])["ok"]
    tok = secrets.token_hex(4)
    want = hashlib.sha256(open(f"{h2net['tmp']}/www/big", "rb").read()).hexdigest()
    dst = f"{h2net['tmp']}/got-{tok}"
    rc, out, err = curl(h2net, "--http2", "-o", dst, f"https://{H2HOST}/big?{tok}b")
    assert rc == 0, err
    assert hashlib.sha256(open(dst, "rb").read()).hexdigest() == want
    os.unlink(dst)
    # an upload of 1 MiB + 1: nghttpd reads it all (DATA frames logged) before answering
    up = f"{h2net['tmp']}/up-{tok}"
    with open(up, "wb") as f:
        f.write(os.urandom(1024 * 1024 + 1))
    rc, out, err = curl(h2net, "--http2", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", f"@{up}",
                        f"https://{H2HOST}/index.html?{tok}up")
    os.unlink(up)
    assert rc == 0 and out == "200", (out, err)
    (conn, stream, _), = received(h2net, tok + "up")
    total = sum(int(m[1]) for m in re.finditer(
        rf"^\[id={conn}\] .* recv DATA frame <length=(\d+), flags=0x0[01], stream_id={stream}>", h2_log_text(h2net),
        re.M))
    assert total == 1024 * 1024 + 1


def test_h1_only_client_and_h1_only_upstream(h2net):
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(h2net, [cred(h2net, "h1", v, [CRED_HOST, H2HOST])])["ok"]
    tok = secrets.token_hex(4)
    # the upstream speaks HTTP/1.1 only: the client offered h2 but gets http/1.1
    rc, out, err = curl(h2net, "--http2", "-w", " %{http_version}", f"https://{CRED_HOST}/{tok}/h1up")
    assert rc == 0 and out.endswith(" 1.1"), (out, err)
    # a client offering http/1.1 only, to the same upstream
    rc, out, err = curl(h2net, "--http1.1", "-w", " %{http_version}", f"https://{CRED_HOST}/{tok}/h1client")
    assert rc == 0 and out.endswith(" 1.1"), (out, err)
    assert [e["auth"] for e in upstream(h2net, tok)] == [f"Bearer {v}"] * 2
    # http/1.1 only to an h2-only upstream cannot be served end to end: the upstream gets http/1.1 offered,
    # selects nothing and closes without answering: 502 with the reason, no request reached it
    rc, out, err = curl(h2net, "--http1.1", "-w", " %{http_code}", f"https://{H2HOST}/index.html?{tok}")
    assert rc == 0 and out.endswith(" 502") and "without answering" in out, (out, err)
    assert received(h2net, tok) == []


# An HTTP/1.1 client that waits after its handshake: the h2-only upstream has closed by then.
LATE_H1 = r'''
import socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[1])
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(socket.create_connection((sys.argv[2], 443), timeout=10), server_hostname=sys.argv[2])
time.sleep(float(sys.argv[4]))
s.sendall(b"GET /index.html?" + sys.argv[3].encode() + b" HTTP/1.1\r\nHost: " + sys.argv[2].encode() + b"\r\n\r\n")
out = b""
while True:
    try:
        k = s.recv(65536)
    except (ConnectionError, ssl.SSLError) as e:
        out += b"\n[" + type(e).__name__.encode() + b"]"
        break
    if not k:
        break
    out += k
sys.stdout.write(out.decode("latin-1"))
'''


def test_upstream_gone_before_the_first_request_is_answered(h2net):
    """An h2-only upstream offered http/1.1 closes right after its handshake. A sandbox that sends its
    request only afterwards gets the 502 with the reason, not a connection closed under it (a race
    that made test_h1_only_client_and_h1_only_upstream flaky: curl 'Empty reply')."""
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(h2net, [cred(h2net, "late", v, [H2HOST])])["ok"]
    for delay in ("0", "0.5"):
        tok = secrets.token_hex(4)
        r = subprocess.run([*netns_exec(h2net["ns"]["sb"]), "/usr/bin/python3", "-c", LATE_H1,
                            f"{h2net['tmp']}/sbca.pem", H2HOST, tok, delay], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("HTTP/1.1 502 "), (delay, r.stdout)
        assert "without answering" in r.stdout, (delay, r.stdout)
        assert received(h2net, tok) == []


# An HTTP/1.1 upstream that completes its handshake, and some time later closes its socket with no
# close_notify (what Python's close() does): its FIN comes after its last TLS record, on its own.
MUTE_SERVER = r"""
import socket, ssl, sys, time
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
ctx.set_alpn_protocols(["http/1.1"])
ls = socket.create_server((sys.argv[3], 443))
while True:
    c, _ = ls.accept()
    try:
        t = ctx.wrap_socket(c, server_side=True)
        time.sleep(0.2)
        t.close()
    except (OSError, ssl.SSLError):
        c.close()
"""


def test_upstream_socket_ends_without_close_notify_before_the_request(h2net):
    """The upstream's FIN alone, no close_notify, before the sandbox's request: that request gets the 502
    with the reason, not a connection the gateway closed under it."""
    assert set_creds(h2net, [cred(h2net, "mute", "sk-gw-" + secrets.token_hex(12), [GRPCHOST])])["ok"]
    ns, tmp = h2net["ns"]["srv"], h2net["tmp"]
    p = subprocess.Popen([*netns_exec(ns), "/usr/bin/python3", "-c", MUTE_SERVER, f"{tmp}/srv.pem",
                          f"{tmp}/srv.key", SRV_GRPC], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(ns, SRV_GRPC, 443)
        for delay in ("0.6", "1"):
            r = subprocess.run([*netns_exec(h2net["ns"]["sb"]), "/usr/bin/python3", "-c", LATE_H1,
                                f"{tmp}/sbca.pem", GRPCHOST, secrets.token_hex(4), delay],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert r.stdout.startswith("HTTP/1.1 502 "), (delay, r.stdout)
            assert "without answering" in r.stdout, (delay, r.stdout)
    finally:
        p.kill()
        p.wait()


# What the hand-made h2 clients below share (each runs as `python3 -c H2_WIRE + ITS_OWN`): the imports, a frame,
# a header field as a literal without indexing, new name, no Huffman, and the frames read so far.
H2_WIRE = r'''
import json, socket, ssl, struct, sys, time

def frame(t, f, sid, payload):
    return struct.pack("!I", len(payload))[1:] + bytes([t, f]) + struct.pack("!I", sid) + payload

def lit(n, v):
    n, v = n.encode(), v.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v

def frames(buf):
    """The complete frames at the head of buf as (type, flags, stream, payload), and the bytes after them."""
    got = []
    while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
        n = int.from_bytes(buf[:3], "big")
        got.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff, buf[9:9 + n]))
        buf = buf[9 + n:]
    return got, buf
'''

# A hand-made HTTP/2 client in the sandbox: frames as a hostile program would write them.
HOSTILE = H2_WIRE + r'''
ctx = ssl.create_default_context(cafile=sys.argv[1])
ctx.set_alpn_protocols(["h2"])
host, other, mode = sys.argv[2], sys.argv[3], sys.argv[4]
s = ctx.wrap_socket(socket.create_connection((host, 443), timeout=10), server_hostname=host)
assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()

def req(authority, path):
    return lit(":method", "GET") + lit(":scheme", "https") + lit(":path", path) + lit(":authority", authority)

s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
if mode == "coalesce":      # one connection, two hosts: stream 1 for the SNI's host, stream 3 for another
    s.sendall(frame(1, 0x5, 1, req(host, "/index.html?" + sys.argv[5])) +
              frame(1, 0x5, 3, req(other, "/index.html?" + sys.argv[5] + "x")))
elif mode == "continuation":  # a header block that never ends
    s.sendall(frame(1, 0x1, 1, req(host, "/index.html?" + sys.argv[5])))
    try:
        for i in range(5000):
            s.sendall(frame(9, 0, 1, lit("x-junk-%d" % i, "a" * 100)))
    except OSError:
        pass
elif mode == "push":         # clients may not push
    s.sendall(frame(5, 0x4, 1, struct.pack("!I", 2) + req(host, "/pushed.html")))
elif mode == "trailers":     # a request body, then trailers
    s.sendall(frame(1, 0x4, 1, lit(":method", "POST") + lit(":scheme", "https") + lit(":authority", host) +
                    lit(":path", "/index.html?" + sys.argv[5]) + lit("te", "trailers")) +
              frame(0, 0, 1, b"x" * 1000) + frame(1, 0x5, 1, lit("x-req-trailer", "t-" + sys.argv[5])))
elif mode == "reset":        # a big download cancelled after its first DATA, then another request
    s.sendall(frame(1, 0x5, 1, req(host, "/big?" + sys.argv[5])))
elif mode == "two":          # two requests at once
    s.sendall(frame(1, 0x5, 1, req(host, "/1")) + frame(1, 0x5, 3, req(host, "/3")))
elif mode == "garbage":
    s.sendall(frame(0xfa, 0, 0, b"junk") + bytes(range(256)) * 8)
out = {"goaway": None, "data": {}, "rst": {}, "ended": []}
buf = b""
try:
    while True:
        got, buf = frames(buf)
        for t, f, sid, p in got:
            n = len(p)
            if t == 0 and n > 0:   # the connection's window back (streams get theirs from SETTINGS)
                s.sendall(frame(8, 0, 0, struct.pack("!I", n)))
            if t == 0 and mode == "reset" and sid == 1 and 1 not in out["rst"]:
                out["rst"][1] = "sent"
                s.sendall(frame(3, 0, 1, struct.pack("!I", 8)) + frame(1, 0x5, 3, req(host, "/index.html?" + sys.argv[5])))
                continue
            if t == 0 and not (mode == "reset" and sid == 1):
                out["data"][sid] = out["data"].get(sid, "") + p.decode("utf-8", "replace")
            if t == 3:
                out["rst"][sid] = int.from_bytes(p[:4], "big")
            if t == 7:
                out["goaway"] = int.from_bytes(p[4:8], "big")
            if t in (0, 1) and f & 1:
                out["ended"].append(sid)
            if t == 4 and not f & 1:
                s.sendall(frame(4, 1, 0, b""))
        if mode == "two":
            if 1 in out["ended"] and 3 in out["rst"] and out["goaway"] is not None:
                break
        elif (out["goaway"] is not None or (mode == "coalesce" and {1, 3} <= set(out["ended"])) or
                (mode in ("trailers",) and 1 in out["ended"]) or (mode == "reset" and 3 in out["ended"])):
            break
        d = s.recv(65536)
        if not d:
            break
        buf += d
except OSError as e:
    out["error"] = str(e)
print(json.dumps(out))
'''


def hostile(net, mode, tok="", host=H2HOST):
    r = subprocess.run([*netns_exec(net["ns"]["sb"]), "/usr/bin/python3", "-c", HOSTILE,
                        f"{net['tmp']}/sbca.pem", host, OTHER, mode, tok], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_h2_coalescing_another_host_on_one_connection_refused(h2net):
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(h2net, [cred(h2net, "h2co", v, [H2HOST])])["ok"]
    tok = secrets.token_hex(4)
    out = hostile(h2net, "coalesce", tok)
    assert out["data"].get("1") == "hello h2\n", out                           # the SNI's host: served
    assert "HTTP/2 request for plain.test" in out["data"].get("3", ""), out    # another host: 421 on its stream
    assert out["goaway"] is None
    got = received(h2net, tok)
    assert [h[":path"] for _, _, h in got] == [f"/index.html?{tok}"], got      # only stream 1 went upstream
    assert got[0][2]["authorization"] == f"Bearer {v}"


def test_h2_endless_continuation_and_client_push_end_the_connection(h2net):
    assert set_creds(h2net, [cred(h2net, "h2x", "sk-gw-" + secrets.token_hex(12), [H2HOST])])["ok"]
    tok = secrets.token_hex(4)
    out = hostile(h2net, "continuation", tok)
    assert out["goaway"] is not None or "error" in out, out
    assert received(h2net, tok) == []
    out = hostile(h2net, "push")
    assert out["goaway"] == 1, out                                              # PROTOCOL_ERROR
    # the gateway still serves
    rc, out, err = curl(h2net, "--http2", "-w", " %{http_version} %{http_code}", f"https://{H2HOST}/index.html?{tok}")
    assert rc == 0 and out.endswith(" 2 200"), (out, err)


H1_SERVER = r"""
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"hello h1\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s = http.server.HTTPServer((sys.argv[3], 8443), H)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
"""


def test_h2_choice_remembered_and_relearned_when_the_upstream_changes(h2net):
    """The upstream's ALPN choice is remembered per sandbox and host: the next connection is answered at
    once. FLIPHOST:8443 is first nghttpd (h2), then an HTTP/1.1-only server: the first connection after
    the change is closed (an event says why), the next one is HTTP/1.1."""
    assert set_creds(h2net, [cred(h2net, "flip", "sk-gw-" + secrets.token_hex(12), [FLIPHOST])])["ok"]
    ns, tmp = h2net["ns"]["srv"], h2net["tmp"]
    url = f"https://{FLIPHOST}:8443/index.html"
    proxy = ("-x", f"http://{HOST_END}:10080")
    p = subprocess.Popen([*netns_exec(ns), NGHTTPD, "-a", SRV_H2, "-d", f"{tmp}/www", "8443",
                          f"{tmp}/srv.key", f"{tmp}/srv.pem"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(ns, SRV_H2, 8443)
        for _ in range(2):   # learnt, then from memory
            rc, out, err = curl(h2net, *proxy, "--http2", "-w", " %{http_version}", url)
            assert rc == 0 and out.endswith("hello h2\n 2"), (out, err)
    finally:
        p.kill()
        p.wait()
    p = subprocess.Popen([*netns_exec(ns), "/usr/bin/python3", "-c", H1_SERVER, f"{tmp}/srv.pem",
                          f"{tmp}/srv.key", SRV_H2], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(ns, SRV_H2, 8443)
        rc, out, err = curl(h2net, *proxy, "--http2", "-w", " %{http_version}", url)
        assert rc != 0, (out, err)
        assert h2net["gw"].wait_event(lambda e: e["event"] == "network.deny" and "no longer chose h2" in e["reason"])
        rc, out, err = curl(h2net, *proxy, "--http2", "-w", " %{http_version}", url)
        assert rc == 0 and out.endswith("hello h1\n 1.1"), (out, err)
    finally:
        p.kill()
        p.wait()


def test_h2_request_trailers_rst_stream_relayed_garbage_ends_the_connection(h2net):
    assert set_creds(h2net, [cred(h2net, "h2t", "sk-gw-" + secrets.token_hex(12), [H2HOST])])["ok"]
    tok = secrets.token_hex(4)
    out = hostile(h2net, "trailers", tok)
    assert 1 in out["ended"], out
    text = h2_log_text(h2net)
    assert re.search(rf"recv \(stream_id=\d+\) x-req-trailer: t-{tok}$", text, re.M), text[-2000:]
    # the sandbox cancels a download (RST_STREAM CANCEL): the upstream's stream is reset with the same code,
    # the connection goes on
    out = hostile(h2net, "reset", tok)
    assert out["data"].get("3") == "hello h2\n" and out["goaway"] is None, out
    (conn, stream, _), = [g for g in received(h2net, tok) if g[2][":path"] == f"/big?{tok}"]
    text = h2_log_text(h2net)
    assert re.search(rf"^\[id={conn}\] .* recv RST_STREAM frame <length=4, flags=0x00, stream_id={stream}>\n"
                     r"\s+\(error_code=CANCEL\(0x08\)\)", text, re.M), text[-3000:]
    out = hostile(h2net, "garbage")
    assert out["goaway"] is not None or "error" in out, out


GRPC_SERVER = r"""
import json, sys
from concurrent import futures
import grpc
log = open(sys.argv[4], "a", buffering=1)

def seen(context, what):
    md = dict(context.invocation_metadata())
    log.write(json.dumps({"what": what, "peer": context.peer(), "authorization": md.get("authorization"),
                          "x-key": md.get("x-key"), "authority": md.get(":authority")}) + "\n")

def echo(request, context):
    seen(context, request.decode())
    context.set_trailing_metadata((("x-space-trailer", "done"),))
    return b"echo:" + request

def chat(requests, context):
    seen(context, "chat")
    for r in requests:
        yield b"chat:" + r

h = grpc.method_handlers_generic_handler("space.Test", {"Echo": grpc.unary_unary_rpc_method_handler(echo),
                                                        "Chat": grpc.stream_stream_rpc_method_handler(chat)})
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
server.add_generic_rpc_handlers((h,))
server.add_secure_port(sys.argv[3] + ":443", grpc.ssl_server_credentials([(open(sys.argv[2], "rb").read(),
                                                                            open(sys.argv[1], "rb").read())]))
server.start()
print("ready", flush=True)
sys.stdin.read()
server.stop(0)
"""

GRPC_CLIENT = r"""
import json, sys
import grpc
ca, host, tok = sys.argv[1], sys.argv[2], sys.argv[3]
ch = grpc.secure_channel(host + ":443", grpc.ssl_channel_credentials(open(ca, "rb").read()))
echo = ch.unary_unary("/space.Test/Echo")
out = []
for i in range(3):
    resp, call = echo.with_call(("%s-%d" % (tok, i)).encode(), metadata=(("x-key", "space-cred-grpc"),), timeout=20)
    out.append([resp.decode(), dict(call.trailing_metadata()).get("x-space-trailer"), call.code().name])
chat = ch.stream_stream("/space.Test/Chat")
out.append([r.decode() for r in chat(iter([b"a", b"b", b"c"]), timeout=20)])
print(json.dumps(out))
"""


def test_grpc_client_gets_the_credential_on_every_call(h2net):
    """gRPC (grpcio: HTTP/2 only, trailers for its status) through the gateway: unary calls and a
    bidirectional stream on one channel; every call carries the credential."""
    pytest.importorskip("grpc")
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(h2net, [cred(h2net, "grpc", v, [GRPCHOST])])["ok"]
    ns, tmp, tok = h2net["ns"], h2net["tmp"], secrets.token_hex(4)
    log = f"{tmp}/grpc-{tok}.log"
    srv = subprocess.Popen([*netns_exec(ns["srv"]), "/usr/bin/python3", "-c", GRPC_SERVER, f"{tmp}/srv.pem",
                            f"{tmp}/srv.key", SRV_GRPC, log], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        r = subprocess.run([*netns_exec(ns["sb"]), "/usr/bin/python3", "-c", GRPC_CLIENT, f"{tmp}/sbca.pem",
                            GRPCHOST, tok], capture_output=True, text=True, timeout=60,
                           env={"GRPC_DNS_RESOLVER": "native", "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out[:3] == [[f"echo:{tok}-{i}", "done", "OK"] for i in range(3)], out
        assert out[3] == ["chat:a", "chat:b", "chat:c"], out
    finally:
        srv.stdin.close()
        srv.kill()
        srv.wait()
    with open(log) as f:
        calls = [json.loads(ln) for ln in f]
    assert len(calls) == 4, calls
    assert len({c["peer"] for c in calls}) == 1, calls           # one channel = one upstream connection
    # the unary calls carried the placeholder in x-key: replaced there (and no header added); the stream
    # carried none: the credential's header added
    assert [(c["x-key"], c["authorization"]) for c in calls] == [(v, None)] * 3 + [(None, f"Bearer {v}")], calls
    assert not any(v in json.dumps(e) for e in h2net["gw"].events)


# An upstream that answers stream 1, then says GOAWAY (last stream 1) without touching stream 3.
GOAWAY_SERVER = r"""
import socket, ssl, struct, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
ctx.set_alpn_protocols(["h2"])
ls = socket.create_server((sys.argv[3], 443))
print("ready", flush=True)
def frame(t, f, sid, payload):
    return struct.pack("!I", len(payload))[1:] + bytes([t, f]) + struct.pack("!I", sid) + payload
while True:
    c, _ = ls.accept()
    try:
        c = ctx.wrap_socket(c, server_side=True)
        c.sendall(frame(4, 0, 0, b""))
        buf, seen = b"", set()
        while 3 not in seen:
            d = c.recv(65536)
            if not d:
                break
            buf += d
            if buf.startswith(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"):
                buf = buf[24:]
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n, t, f = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
                sid = int.from_bytes(buf[5:9], "big") & 0x7fffffff
                buf = buf[9 + n:]
                if t == 4 and not f & 1:
                    c.sendall(frame(4, 1, 0, b""))
                if t == 1:
                    seen.add(sid)
        c.sendall(frame(1, 0x4, 1, b"\x88") + frame(0, 0x1, 1, b"one") + frame(7, 0, 0, struct.pack("!II", 1, 0)))
        c.recv(65536)
    except OSError:
        pass
    finally:
        c.close()
"""


def test_h2_upstream_goaway_relayed_and_unanswered_stream_refused(h2net):
    assert set_creds(h2net, [cred(h2net, "h2g", "sk-gw-" + secrets.token_hex(12), [GRPCHOST])])["ok"]
    ns, tmp = h2net["ns"], h2net["tmp"]
    srv = subprocess.Popen([*netns_exec(ns["srv"]), "/usr/bin/python3", "-c", GOAWAY_SERVER,
                            f"{tmp}/srv.pem", f"{tmp}/srv.key", SRV_GRPC], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        out = hostile(h2net, "two", host=GRPCHOST)
    finally:
        srv.kill()
        srv.wait()
    assert out["data"].get("1") == "one" and 1 in out["ended"], out   # the stream the upstream took: answered
    assert out["rst"].get("3") == 7, out                               # the other: REFUSED_STREAM (retry elsewhere)
    assert out["goaway"] == 0, out                                     # and the sandbox is told GOAWAY, NO_ERROR


def test_h2_connection_cut_when_its_host_is_denied(h2net):
    """An intercepted HTTP/2 connection in the middle of a download (curl,
    rate-limited so that it is): the policy denies the host, the connection is
    cut at once with a network.deny event, curl fails short of the body
    ("partial file") and reports (-v) the GOAWAY (NO_ERROR, after stream 1)."""
    from test_gateway_cred import POLICY
    from test_gateway import cut_events
    gw = h2net["gw"]
    assert set_creds(h2net, [cred(h2net, "h2cut", "sk-gw-" + secrets.token_hex(12), [H2HOST])])["ok"]
    size = os.path.getsize(f"{h2net['tmp']}/www/huge")
    dst = f"{h2net['tmp']}/cut-{secrets.token_hex(4)}"
    p = subprocess.Popen([*netns_exec(h2net["ns"]["sb"]), "curl", "-sSv", "--http2", "--limit-rate", "64k",
                          "--max-time", "120", "--cacert", f"{h2net['tmp']}/sbca.pem", "-w", "%{http_version}",
                          "-o", dst, f"https://{H2HOST}/huge"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if os.path.exists(dst) and os.path.getsize(dst) > 0:
                break
            assert p.poll() is None, p.communicate()
            time.sleep(0.05)
        since = len(gw.events)
        assert gw.request("policy", id="sb1", policy={**POLICY, "deny": [H2HOST]})["ok"]
        assert gw.wait_event(lambda e: cut_events(gw, H2HOST, since)), gw.events[since:]
        out, err = p.communicate(timeout=60)
        assert p.returncode != 0 and out == "2", (p.returncode, out, err)
        assert os.path.getsize(dst) < size
        assert "GOAWAY, error=0, last_stream=1" in err, err                 # curl 7.88: "recveived GOAWAY, ..."
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        if os.path.exists(dst):
            os.unlink(dst)
        assert gw.request("policy", id="sb1", policy=POLICY)["ok"]
        set_creds(h2net, [])


# A client that stalls a download mid-way (it opens no window beyond the first 64 KiB) and reports
# how the connection ends: every RST_STREAM, the GOAWAY (last stream, code, debug data), and whether
# the close was a FIN ("eof") or a reset.
CUT_CLIENT = H2_WIRE + r'''
ctx = ssl.create_default_context(cafile=sys.argv[1])
ctx.set_alpn_protocols(["h2"])
host, mode = sys.argv[2], sys.argv[3]
s = ctx.wrap_socket(socket.create_connection((host, 443), timeout=30), server_hostname=host)
if mode == "busy":
    s.settimeout(0.005)

def req(path):
    return lit(":method", "GET") + lit(":scheme", "https") + lit(":path", path) + lit(":authority", host)

s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frame(1, 0x5, 1, req("/index.html")))
out = {"rst": {}, "goaway": None, "ended": [], "data3": 0, "end": None}
buf, started = b"", False
try:
    while True:
        got, buf = frames(buf)
        for t, f, sid, p in got:
            n = len(p)
            if t == 4 and not f & 1:
                s.sendall(frame(4, 1, 0, b""))
            if t in (0, 1) and f & 1:
                out["ended"].append(sid)
                if sid == 1:   # the first one done: the download that stalls
                    # "partial": with stream 5's header block begun, not finished (no END_HEADERS): it never
                    # goes upstream; in the same TLS record, so the gateway has read it when 3's DATA comes
                    s.sendall(frame(1, 0x5, 3, req("/big")) +
                              (frame(1, 0x1, 5, lit(":method", "GET")) if mode == "partial" else b""))
            if t == 0 and sid == 3:
                out["data3"] += n
                if not started:
                    started = True
                    print("started", flush=True)
            if t == 3:
                out["rst"][sid] = int.from_bytes(p[:4], "big")
            if t == 7:
                out["goaway"] = {"last": int.from_bytes(p[:4], "big") & 0x7fffffff,
                                 "code": int.from_bytes(p[4:8], "big"), "debug": p[8:].decode("utf-8", "replace")}
        try:
            d = s.recv(65536)
        except TimeoutError:
            # "busy": a PING every few ms while the download stalls, until the GOAWAY: a client that
            # keeps sending (as window updates do) when the cut comes
            if started and out["goaway"] is None:
                s.sendall(frame(6, 0, 0, b"busyping"))
            continue
        if not d:
            out["end"] = "eof"
            break
        buf += d
except OSError as e:
    out["end"] = type(e).__name__ + ": " + str(e)
print(json.dumps(out), flush=True)
'''


@pytest.mark.parametrize("mode", ["plain", "partial", "busy"])
def test_h2_cut_by_the_policy_is_a_goaway(h2net, mode):
    """RFC 9113 §6.8: an intercepted HTTP/2 connection the policy no longer
    allows gets RST_STREAM for the streams in flight (CANCEL for the download
    whose request went upstream; REFUSED_STREAM for one whose header block
    had only begun, "partial": it was never processed) and a GOAWAY
    (NO_ERROR, last-stream-id = the last stream the gateway took, the reason
    as debug data), then a clean close (close_notify, FIN), also for a client
    that keeps sending until it sees the GOAWAY ("busy"); the network.deny
    event as for any cut connection."""
    from test_gateway_cred import POLICY
    from test_gateway import cut_events
    gw = h2net["gw"]
    assert set_creds(h2net, [cred(h2net, "h2ga", "sk-gw-" + secrets.token_hex(12), [H2HOST])])["ok"]
    p = subprocess.Popen([*netns_exec(h2net["ns"]["sb"]), "/usr/bin/python3", "-c", CUT_CLIENT,
                          f"{h2net['tmp']}/sbca.pem", H2HOST, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "started", p.communicate(timeout=60)
        since = len(gw.events)
        assert gw.request("policy", id="sb1", policy={**POLICY, "deny": [H2HOST]})["ok"]
        assert gw.wait_event(lambda e: cut_events(gw, H2HOST, since)), gw.events[since:]
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        res = json.loads(out)
        assert 1 in res["ended"] and 3 not in res["ended"] and res["data3"] > 0, res
        last = 5 if mode == "partial" else 3
        want_rst = {"3": 8, "5": 7} if mode == "partial" else {"3": 8}           # CANCEL; REFUSED_STREAM
        assert res["rst"] == want_rst, res
        assert res["goaway"] is not None, res
        assert res["goaway"]["last"] == last and res["goaway"]["code"] == 0, res  # NO_ERROR after the last
        assert "the policy changed" in res["goaway"]["debug"], res
        assert res["end"] == "eof", res                                          # a FIN after it, not a reset
        assert len(cut_events(gw, H2HOST, since)) == 1
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        assert gw.request("policy", id="sb1", policy=POLICY)["ok"]
        set_creds(h2net, [])


@contextlib.contextmanager
def gateway_options(net, *extra, env=None):
    """net's gateway replaced, for the block, by one started with extra options (in env if given; sb1
    registered with POLICY, no credentials); the fixture's own again after it. Each one's exit is checked:
    no sanitizer report, no credential value in its log."""
    old, net["gw"] = net["gw"], None
    gateway_exited(*old.close())
    try:
        net["gw"] = cnet_gateway(net, extra, env)
        yield net["gw"]
    finally:
        gw, net["gw"] = net["gw"], None
        rc, err = gw.close() if gw else (0, "")
        net["gw"] = cnet_gateway(net)
    gateway_exited(rc, err)


def gateway_exited(rc, err):
    assert rc == 0 and "Sanitizer" not in err and "runtime error" not in err, err
    assert "sk-gw-" not in err


def gateway_socket(net, port):
    """The gateway's established socket for the sandbox's connection from port (ss in the gateway's
    namespace; one the gateway has closed is no longer established, even while its kernel still sends
    what was queued)."""
    r = subprocess.run([*netns_exec(net["ns"]["gw"]), "ss", "-Htn", "state", "established",
                        f"dst {SB_IP}:{port}"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def cpu_ns(pid):
    """CPU time of every thread of pid so far (schedstat: ns, not ticks)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))


# A sandbox that starts a download on an intercepted h2 connection, then stops reading for good (a tiny receive
# buffer, no recv) and never closes: "silent" sends nothing more; "ping" and "data" flood the gateway once told
# to ("flood" on stdin: PINGs; DATA on a new stream) until the connection ends under them. "silent" reads again
# when told to ("read") and reports how the connection ended.
STUCK_CLIENT = H2_WIRE + r'''
ctx = ssl.create_default_context(cafile=sys.argv[1])
ctx.set_alpn_protocols(["h2"])
host, mode = sys.argv[2], sys.argv[3]
raw = socket.socket()
raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)   # before connect: the window stays small
raw.settimeout(30)
raw.connect((host, 443))
s = ctx.wrap_socket(raw, server_hostname=host)
assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()

def req(method, path):
    return lit(":method", method) + lit(":scheme", "https") + lit(":path", path) + lit(":authority", host)

s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frame(1, 0x5, 1, req("GET", "/big")))
buf = b""
while True:   # until the download's first DATA
    d = s.recv(16384)
    assert d, "closed before the download started"
    buf += d
    started = False
    got, buf = frames(buf)
    for t, f, sid, p in got:
        if t == 4 and not f & 1:
            s.sendall(frame(4, 1, 0, b""))
        started = started or (t == 0 and len(p) > 0)
    if started:
        break
print("started", s.getsockname()[1], flush=True)
out = {"sent": 0, "end": None}
cmd = sys.stdin.readline().strip()
if cmd == "read":
    try:
        while True:
            d = s.recv(65536)
            if not d:
                out["end"] = "eof"
                break
    except OSError as e:
        out["end"] = type(e).__name__ + ": " + str(e)
elif cmd == "flood":
    if mode == "ping":
        chunk = frame(6, 0, 0, b"floodpng") * 4096
    else:   # a new stream's request, then its body without end
        s.sendall(frame(1, 0x4, 3, req("POST", "/index.html")))
        chunk = frame(0, 0, 3, b"x" * 16384) * 4
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 60:
            s.sendall(chunk)
            out["sent"] += len(chunk)
        out["end"] = "still open after 60 s"
    except OSError as e:
        out["end"] = type(e).__name__ + ": " + str(e)
print(json.dumps(out), flush=True)
'''

# how a connection ended under its reader or writer (not the client's own timeout, not still open)
ENDED = re.compile(r"^(eof|ConnectionResetError|BrokenPipeError|SSLEOFError|SSLZeroReturnError|SSLError)")

MANY_CLIENT = H2_WIRE + r'''
ctx = ssl.create_default_context(cafile=sys.argv[1])
ctx.set_alpn_protocols(["h2"])
host, n = sys.argv[2], int(sys.argv[3])

def get(s):
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frame(1, 0x5, 1, lit(":method", "GET") +
              lit(":scheme", "https") + lit(":path", "/index.html") + lit(":authority", host)))
    buf, body = b"", b""
    while True:
        got, buf = frames(buf)
        for t, f, sid, p in got:
            if t == 4 and not f & 1:
                s.sendall(frame(4, 1, 0, b""))
            if t == 0 and sid == 1:
                body += p
            if t in (0, 1) and sid == 1 and f & 1:
                return body.decode()
            if t in (3, 7):
                return "ended: frame type %d" % t
        d = s.recv(65536)
        if not d:
            return "ended: eof"
        buf += d

out = []
held = []
for i in range(n):   # all open at once: each holds one of the sandbox's connection slots
    try:
        held.append(ctx.wrap_socket(socket.create_connection((host, 443), timeout=30), server_hostname=host))
    except OSError as e:
        out.append(type(e).__name__)
for s in held:
    try:
        out.append(get(s))
    except OSError as e:
        out.append(type(e).__name__)
print(json.dumps(out))
'''

STUCK_CONNS, STUCK_DEADLINE = 3, 5   # the gateway's --conns and --handshake-timeout for these tests
FLOOD_RSS_MAX_KIB = 32 * 1024        # what a flooding sandbox may add to the gateway's memory
FLOOD_TAKEN_MAX = 16 << 20           # what it may get sent at all: the two sockets' buffers (~1 MiB), with room


def slots_given_back(net):
    """STUCK_CONNS connections at once from the sandbox (the gateway's limit): every one served."""
    r = subprocess.run([*netns_exec(net["ns"]["sb"]), "/usr/bin/python3", "-c", MANY_CLIENT,
                        f"{net['tmp']}/sbca.pem", H2HOST, str(STUCK_CONNS)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) == ["hello h2\n"] * STUCK_CONNS, r.stdout


@pytest.mark.parametrize("mode", ["silent", "ping", "data"])
def test_h2_cut_of_a_sandbox_that_stops_reading_ends_at_the_deadline(h2net, mode):
    """The policy cuts an intercepted h2 connection whose sandbox no longer
    reads (a download stuck in its tiny receive buffer) and never closes: the
    GOAWAY cannot reach it, so the lingering close of the cut meets its
    deadline (--handshake-timeout) and the gateway closes the socket. "silent"
    sends nothing: the gateway's socket goes, and the sandbox, reading again,
    sees the end. "ping" and "data" keep sending as fast as they can (PINGs
    whose ACKs it never reads; DATA on a stream opened after the GOAWAY): the
    gateway reads nothing from a sandbox that leaves the GOAWAY unread, so
    the flood stops at the sockets' buffers (its memory and CPU are not the
    sandbox's to take), and their sending ends with the connection. Either
    way the gateway serves on and gives the connection's slot back: --conns
    connections at once work afterwards."""
    from test_gateway_cred import POLICY
    from test_gateway import cut_events
    # under ASan, freed memory waits in a quarantine (256 MiB by default) before it is reused: OpenSSL's
    # allocation per record read would count as growth; a small one, so that VmRSS means something
    asan = os.environ.get("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0") + ":quarantine_size_mb=4"
    with gateway_options(h2net, "--conns", str(STUCK_CONNS), "--handshake-timeout", str(STUCK_DEADLINE),
                         env={**os.environ, "ASAN_OPTIONS": asan}) as gw:
        assert set_creds(h2net, [cred(h2net, "h2stuck", "sk-gw-" + secrets.token_hex(12), [H2HOST])])["ok"]
        p = subprocess.Popen([*netns_exec(h2net["ns"]["sb"]), "/usr/bin/python3", "-c", STUCK_CLIENT,
                              f"{h2net['tmp']}/sbca.pem", H2HOST, mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline().split()
            assert line[:1] == ["started"], p.communicate(timeout=60)
            port = int(line[1])
            assert gateway_socket(h2net, port)                   # the check below can see it
            since = len(gw.events)
            assert gw.request("policy", id="sb1", policy={**POLICY, "deny": [H2HOST]})["ok"]
            assert gw.wait_event(lambda e: cut_events(gw, H2HOST, since)), gw.events[since:]
            if mode == "silent":
                for _ in range(600):                             # a generous bound, not a timing
                    if not gateway_socket(h2net, port):
                        break
                    time.sleep(0.1)
                assert not gateway_socket(h2net, port), "the gateway still holds the stuck connection"
                out, err = p.communicate("read\n", timeout=120)
            else:
                base = peak = vm_rss_kib(gw.proc.pid)
                cpu0 = cpu_ns(gw.proc.pid)
                p.stdin.write("flood\n")
                p.stdin.flush()
                for _ in range(12000):                           # the client ends itself within 60 s
                    if p.poll() is not None:
                        break
                    peak = max(peak, vm_rss_kib(gw.proc.pid))
                    time.sleep(0.01)
                out, err = p.communicate(timeout=60)
                cpu = cpu_ns(gw.proc.pid) - cpu0
            assert p.returncode == 0, err
            res = json.loads(out.splitlines()[-1])
            assert ENDED.match(res["end"]), res
            if mode != "silent":
                grew = peak - base
                print(f"{mode}: sent {res['sent'] >> 10} KiB, gateway VmRSS {base} KiB + {grew} KiB at most, "
                      f"gateway CPU {cpu / 1e6:.1f} ms during the flood")
                # the gateway reads nothing while the sandbox leaves the GOAWAY unread: the flood stops at the
                # sockets' buffers (without that: GiBs, each record decrypted, until the deadline)
                assert res["sent"] < FLOOD_TAKEN_MAX, res
                assert grew < FLOOD_RSS_MAX_KIB, (res, base, peak)
            assert len(cut_events(gw, H2HOST, since)) == 1
            assert not gateway_socket(h2net, port)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        assert gw.request("policy", id="sb1", policy=POLICY)["ok"]
        ok, got = slots_given_back(h2net)
        assert ok, got
