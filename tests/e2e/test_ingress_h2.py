"""HTTP/2 at the ingress (src/ingress/ingress-h2.c): h2c with prior
knowledge terminated by the ingress, each stream routed and authorized like
an HTTP/1.1 request and proxied to the sandbox as HTTP/1.1, through a real
spaced against busybox httpd inside a sandbox.

Many streams on one connection, a streamed 50 MiB download and a 20 MiB
upload, a token per stream (a wrong one refused on its own stream), a stream
naming another tenant's sandbox on the same connection refused (421), envd
over HTTP/2 refused clearly, garbage frames answered by GOAWAY with the
ingress still serving; WebSockets over HTTP/2 (RFC 8441: extended CONNECT
relayed both ways, a handshake the sandbox gets wrong or does not make
refused, no token refused). Clients: curl --http2-prior-knowledge (a custom
Host header becomes the stream's :authority), h2load, python3-h2 and raw
frames."""

import json
import os
import shutil
import socket
import ssl
import subprocess

import h2.config as h2config
import h2.connection as h2connection
import h2.events as h2events
import h2.settings as h2settings
import pytest

import e2e_host as host
import e2e_residue as residue
from test_ingress import BIG_MB, TOKEN_HEADER, UPGRADE_ECHO, request, start_servers

# a WebSocket handshake (RFC 6455 4.2.2) then an echo of raw bytes; WS_BAD_ACCEPT answers a wrong key
WS_ECHO = r"""#!/bin/sh
key=
while read -r l; do
  l=$(printf %s "$l" | tr -d '\r')
  [ -z "$l" ] && break
  case "$l" in [Ss]ec-[Ww]eb[Ss]ocket-[Kk]ey:*) key=$(printf %s "${l#*:}" | tr -d ' ');; esac
done
[ -n "$WS_BAD_ACCEPT" ] && key=not-the-key
acc=$(printf %s "${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11" | sha1sum | cut -c1-40 | xxd -r -p | base64)
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
printf 'Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: chat\r\n\r\n' "$acc"
exec cat
"""

COUNT_CGI = r"""#!/bin/sh
printf 'Content-Type: text/plain\r\n\r\n'
head -c "$CONTENT_LENGTH" | wc -c
"""


@pytest.fixture(scope="module")
def h2(spaced):
    d = spaced
    a = d.create()["id"]
    start_servers(d, a)
    d.sh(a, f"cat > /srv/cgi-bin/count <<'EOF'\n{COUNT_CGI}EOF\nchmod +x /srv/cgi-bin/count")
    d.sh(a, f"cat > /srv/ws.sh <<'EOF'\n{WS_ECHO}EOF\nchmod +x /srv/ws.sh")
    d.exec(a, shell="exec nc -ll -p 9100 -e /srv/ws.sh", background=True)
    d.exec(a, shell="WS_BAD_ACCEPT=1 exec nc -ll -p 9101 -e /srv/ws.sh", background=True)
    tok = d.api("GET", f"/v1/sandboxes/{a}/ports/8000").json()["token"]
    r = d.api("POST", "/v1/keys", json={"name": "h2", "tenant": f"h2-{os.getpid()}"})
    assert r.status == 201, r
    k2 = r.json()["key"]
    c = d.create(key=k2)["id"]
    tok_c = d.api("GET", f"/v1/sandboxes/{c}/ports/8000", key=k2).json()["token"]
    host.wait_until(lambda: request(d, f"8000-{a}.localhost", "/", {TOKEN_HEADER: tok})[0] == 200, 20)
    yield {"d": d, "a": a, "c": c, "tok": tok, "tok_c": tok_c, "k2": k2}
    for sid, key in ((a, None), (c, k2)):
        r = d.api("DELETE", f"/v1/sandboxes/{sid}", key=key or d.admin_key, timeout=180)
        assert r.status == 200, r


def curl(d, *args, timeout=60):
    r = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", *args], capture_output=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout


def url(d, path="/"):
    return f"http://127.0.0.1:{d.ingress_port}{path}"


def test_h2_get_reaches_the_sandbox(h2):
    d, a = h2["d"], h2["a"]
    out = curl(d, "-H", f"Host: 8000-{a}.localhost", "-H", f"{TOKEN_HEADER}: {h2['tok']}",
               "-w", "\n%{http_version} %{http_code}", url(d))
    assert out == b"hello-from-sandbox\n\n2 200", out


def test_h2_the_sandbox_sees_http1_without_our_credentials(h2):
    d, a = h2["d"], h2["a"]
    out = curl(d, "-H", f"Host: 8000-{a}.localhost", "-H", f"{TOKEN_HEADER}: {h2['tok']}",
               "-H", "Cookie: app=1", "-H", "Cookie: b=2", "-D", "-", url(d, "/cgi-bin/env")).decode()
    assert "token=\n" in out and "cookie=app=1; b=2\n" in out, out
    assert f"host=8000-{a}.localhost\n" in out and "xff=127.0.0.1\n" in out, out
    assert "set-cookie: app=2" in out.lower() and "space_traffic" not in out, out


def test_h2_many_streams_on_one_connection(h2):
    d, a = h2["d"], h2["a"]
    r = subprocess.run(["h2load", "-n", "200", "-c", "1", "-m", "32", "-H", f":authority: 8000-{a}.localhost",
                        "-H", f"{TOKEN_HEADER}: {h2['tok']}", url(d)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "200 total, 200 started, 200 done, 200 succeeded" in r.stdout, r.stdout
    assert "status codes: 200 2xx" in r.stdout, r.stdout


def test_h2_streamed_download_and_upload(h2, tmp_path):
    d, a = h2["d"], h2["a"]
    hdrs = ["-H", f"Host: 8000-{a}.localhost", "-H", f"{TOKEN_HEADER}: {h2['tok']}"]
    out = curl(d, *hdrs, "-o", "/dev/null", "-w", "%{http_version} %{http_code} %{size_download}", url(d, "/big"),
               timeout=120)
    assert out == f"2 200 {BIG_MB << 20}".encode(), out
    f = tmp_path / "up"
    with open(f, "wb") as w:
        w.truncate(20 << 20)
    out = curl(d, *hdrs, "--data-binary", f"@{f}", url(d, "/cgi-bin/count"), timeout=120)
    assert out.strip() == str(20 << 20).encode(), out


def hpack_int(n, prefix=7):
    if n < (1 << prefix) - 1:
        return bytes([n])
    out, n = [(1 << prefix) - 1], n - ((1 << prefix) - 1)
    while n >= 128:
        out.append((n & 127) | 128)
        n >>= 7
    return bytes(out + [n])


def hpack(fields):
    """Literal fields without indexing, no Huffman (RFC 7541 6.2.2)."""
    out = b""
    for k, v in fields:
        out += b"\x00" + hpack_int(len(k)) + k.encode() + hpack_int(len(v)) + v.encode()
    return out


def frame(t, flags, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([t, flags]) + sid.to_bytes(4, "big") + payload


def h2_streams(d, requests, timeout=20, order=None):
    """One connection, one GET stream per (authority, headers), all sent at
    once; returns each stream's response body (DATA payload) or 'reset'.
    order: a list that gets the index of each stream as its response ends."""
    with socket.create_connection(("127.0.0.1", d.ingress_port), timeout=timeout) as s:
        out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
        for i, (authority, hdrs) in enumerate(requests):
            fields = [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", authority)]
            out += frame(1, 0x5, 2 * i + 1, hpack(fields + list(hdrs.items())))
        s.sendall(out)
        bodies, done, buf = {}, set(), b""
        while len(done) < len(requests):
            k = s.recv(65536)
            if not k:
                break
            buf += k
            while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                n = int.from_bytes(buf[:3], "big")
                t, flags, sid, payload = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff, buf[9:9 + n]
                buf = buf[9 + n:]
                if t == 4 and not flags & 1:
                    s.sendall(frame(4, 1, 0, b""))
                elif t == 0:
                    bodies[sid] = bodies.get(sid, b"") + payload
                elif t == 3:
                    bodies[sid] = b"reset"
                if (t in (0, 1) and flags & 1 or t == 3) and sid not in done:
                    done.add(sid)
                    if order is not None:
                        order.append((sid - 1) // 2)
        return [bodies.get(2 * i + 1, b"").decode() for i in range(len(requests))]


def test_h2_each_stream_is_authorized(h2):
    """A wrong token, or none, on one stream is refused on that stream; the
    other streams on the same connection, with the right one, are served."""
    d, a = h2["d"], h2["a"]
    host_a = f"8000-{a}.localhost"
    got = h2_streams(d, [(host_a, {TOKEN_HEADER.lower(): "x" * 43}), (host_a, {}),
                         (host_a, {TOKEN_HEADER.lower(): h2["tok"]}), (host_a, {"cookie": "space_traffic=1.forged"}),
                         (host_a, {TOKEN_HEADER.lower(): h2["tok"]})])
    assert "wrong traffic token" in got[0] and "ports are private" in got[1], got
    assert got[2] == got[4] == "hello-from-sandbox\n", got
    assert "cookie is not valid" in got[3], got


def test_h2_stream_to_another_sandbox_on_the_connection_refused(h2):
    """The connection serves the sandbox its first stream named: a stream to
    another tenant's sandbox, even with that sandbox's own token, is 421 and
    never reaches it; the first sandbox is still served after. A's token on
    c's name is refused on a connection of c's own."""
    d, a, c = h2["d"], h2["a"], h2["c"]
    got = h2_streams(d, [(f"8000-{a}.localhost", {TOKEN_HEADER.lower(): h2["tok"]}),
                         (f"8000-{c}.localhost", {TOKEN_HEADER.lower(): h2["tok_c"]}),
                         (f"8000-{a}.localhost", {TOKEN_HEADER.lower(): h2["tok"]})])
    assert got[0] == got[2] == "hello-from-sandbox\n", got
    assert "misdirected_request" in got[1] and f"serves sandbox {a} only" in got[1], got
    got = h2_streams(d, [(f"8000-{c}.localhost", {TOKEN_HEADER.lower(): h2["tok"]})])
    assert "wrong traffic token" in got[0], got


def accept_queue(d, sid, port):
    """The accept queue of sid's listener on port (/proc/net/tcp6, tcp: rx_queue of the LISTEN row)."""
    out = d.sh(sid, f"cat /proc/net/tcp6 /proc/net/tcp | awk '$2 ~ /:{port:04X}$/ && $4 == \"0A\" {{print $5}}'")
    return int(out.split()[0].split(":")[1], 16) if out.strip() else -1


def test_h2_a_hanging_dial_holds_up_no_other_stream(h2):
    """A port whose listen backlog is full (its httpd stopped: a connect to
    it waits in SYN retransmits) holds up its own streams only: with more of
    them on one connection than the connection has routers, a stream to a
    port that answers, sent after them, is answered first; each of them gets
    the 502 of a connect that timed out, and a port nothing listens on the
    502 of a refused one, as over HTTP/1.1."""
    d, a = h2["d"], h2["a"]
    d.exec(a, shell="exec httpd -f -p 8001 -h /srv", background=True)
    pid = "for p in $(pidof httpd); do tr '\\0' ' ' </proc/$p/cmdline | grep -q -- '-p 8001' && echo $p; done; true"
    host.wait_until(lambda: d.sh(a, pid).strip() != "", 10)
    try:
        # stopped, it accepts nothing: connects from inside fill its backlog (9)
        d.sh(a, f"kill -STOP $({pid})")
        for _ in range(12):
            d.exec(a, shell="exec nc -w 60 127.0.0.1 8001 </dev/null >/dev/null 2>&1", background=True)
        assert host.wait_until(lambda: accept_queue(d, a, 8001) >= 10, 20), accept_queue(d, a, 8001)
        hdrs = {TOKEN_HEADER.lower(): h2["tok"]}
        order = []
        got = h2_streams(d, [(f"8001-{a}.localhost", hdrs)] * 6 + [(f"8000-{a}.localhost", hdrs),
                                                                   (f"8002-{a}.localhost", hdrs)], order=order)
        assert got[6] == "hello-from-sandbox\n", got
        assert order[0] in (6, 7) and order.index(6) < 2, (order, got)
        assert f"nothing answers on port 8002 of sandbox {a} (connection refused)" in got[7], got
        for body in got[:6]:
            assert "bad_gateway" in body and f"nothing answers on port 8001 of sandbox {a} (timed out)" in body, got
    finally:
        d.sh(a, f"kill -KILL $({pid}) 2>/dev/null; true")


def test_h2_bad_authority_and_envd(h2):
    d, a = h2["d"], h2["a"]
    out = curl(d, "-w", "\n%{http_code}", "-H", "Host: nowhere.example", url(d)).decode()
    assert out.endswith("\n400") and "bad_request" in out, out
    out = curl(d, "-w", "\n%{http_code}", "-H", f"Host: 49983-{a}.localhost", url(d, "/health")).decode()
    assert out.endswith("\n421") and "HTTP/1.1 only" in out, out


def frames_of(out):
    frames = []
    while len(out) >= 9:
        n = int.from_bytes(out[:3], "big")
        frames.append((out[3], out[9:9 + n]))
        out = out[9 + n:]
    return frames


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x04\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00",            # WINDOW_UPDATE of 0 on the connection
    b"\x00\x00\x05\x01\x05\x00\x00\x00\x01\xff\xff\xff\xff\xff",         # HEADERS with a broken HPACK block
    b"\x00\x00\x08\x00\x01\x00\x00\x00\x07hello!!!",                    # DATA on an idle stream
    b"\xff\xff\xff\x00\x00\x00\x00\x00\x01",                            # a frame past SETTINGS_MAX_FRAME_SIZE
    b"SM\r\n\r\n" * 4,                                                  # not frames at all
])
def test_h2_garbage_frames_goaway(h2, garbage):
    d, a = h2["d"], h2["a"]
    with socket.create_connection(("127.0.0.1", d.ingress_port), timeout=10) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" + garbage)
        out = b""
        while True:
            try:
                k = s.recv(65536)
            except ConnectionResetError:
                break
            if not k:
                break
            out += k
    types = [t for t, _ in frames_of(out)]
    assert types[0] == 4 and 7 in types, types          # SETTINGS first, then GOAWAY
    goaway = [p for t, p in frames_of(out) if t == 7][0]
    assert int.from_bytes(goaway[4:8], "big") != 0, goaway   # an error code
    # the ingress still serves
    assert request(d, f"8000-{a}.localhost", "/", {TOKEN_HEADER: h2["tok"]})[0] == 200





@pytest.mark.timeout(300)
def test_tls_alpn_h2_and_http1(e2e_session, tmp_path):
    """ingress_tls_cert/key: TLS on the ingress listener; ALPN h2 gets the
    HTTP/2 session, http/1.1 (or no ALPN) HTTP/1.1, both authorized the
    same; the sandbox sees X-Forwarded-Proto https; plaintext to a TLS
    listener is no way in."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "1", "-subj", "/CN=h2.test", "-addext", "subjectAltName=DNS:*.h2.test",
                        "-keyout", str(key), "-out", str(cert)], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    d = e2e_session.new_daemon(extra_args=[f"--ingress-tls-cert={cert}", f"--ingress-tls-key={key}",
                                           "--ingress-domain=h2.test"])
    d.start()
    try:
        sid = d.create()["id"]
        try:
            d.sh(sid, "mkdir -p /srv/cgi-bin && echo hello-tls > /srv/index.html && "
                      "printf '#!/bin/sh\\nprintf \"Content-Type: text/plain\\\\r\\\\n\\\\r\\\\n\"\\n"
                      "echo \"xfp=$HTTP_X_FORWARDED_PROTO\"\\n' > /srv/cgi-bin/env && chmod +x /srv/cgi-bin/env && "
                      f"httpd -p 8000 -h /srv && cat > /srv/up.sh <<'EOF'\n{UPGRADE_ECHO}EOF\nchmod +x /srv/up.sh")
            d.exec(sid, shell="exec nc -ll -p 9000 -e /srv/up.sh", background=True)
            port = d.api("GET", f"/v1/sandboxes/{sid}/ports/8000").json()
            tok = port["token"]
            name = f"8000-{sid}.h2.test"
            assert port["url"] == f"https://{name}:{d.ingress_port}/", port
            base = ["curl", "-sS", "--cacert", str(cert), "--resolve", f"{name}:{d.ingress_port}:127.0.0.1",
                    "-w", "\n%{http_version} %{http_code}"]
            u = f"https://{name}:{d.ingress_port}"

            def get(*args):
                r = subprocess.run(base + list(args), capture_output=True, text=True, timeout=30)
                assert r.returncode == 0, r.stderr
                return r.stdout

            host.wait_until(lambda: get("-H", f"{TOKEN_HEADER}: {tok}", u + "/").endswith(" 200"), 20)
            assert get("-H", f"{TOKEN_HEADER}: {tok}", u + "/") == "hello-tls\n\n2 200"
            assert get("--http1.1", "-H", f"{TOKEN_HEADER}: {tok}", u + "/") == "hello-tls\n\n1.1 200"
            assert get("-H", f"{TOKEN_HEADER}: {tok}", u + "/cgi-bin/env").startswith("xfp=https\n")
            out = get("-H", f"{TOKEN_HEADER}: {'x' * 43}", u + "/")
            assert out.endswith("\n2 403") and "wrong traffic token" in out, out
            out = get("--http1.1", u + "/")
            assert out.endswith("\n1.1 401"), out
            # the link's cookie is Secure over TLS, and works over HTTP/2
            out = subprocess.run(base + ["-D", "-", "-o", "/dev/null", port["link"]], capture_output=True, text=True,
                                 timeout=30).stdout
            cookie = [l for l in out.splitlines() if l.lower().startswith("set-cookie:")]
            assert len(cookie) == 1 and "; Secure" in cookie[0] and out.startswith("HTTP/2 302"), out
            value = cookie[0].split(":", 1)[1].strip().split(";")[0]
            assert get("-H", f"Cookie: {value}", u + "/") == "hello-tls\n\n2 200"
            # an Upgrade (what wss rides on) is relayed over TLS both ways
            ctx = ssl.create_default_context(cafile=str(cert))
            ctx.set_alpn_protocols(["http/1.1"])
            with socket.create_connection(("127.0.0.1", d.ingress_port), timeout=20) as raw_s:
                with ctx.wrap_socket(raw_s, server_hostname=f"9000-{sid}.h2.test") as t:
                    t.sendall(f"GET / HTTP/1.1\r\nHost: 9000-{sid}.h2.test\r\n{TOKEN_HEADER}: {tok}\r\n"
                              "Connection: Upgrade\r\nUpgrade: echo\r\n\r\n".encode())
                    got = b""
                    while b"\r\n\r\n" not in got:
                        got += t.recv(4096)
                    assert got.startswith(b"HTTP/1.1 101"), got
                    rest = got.split(b"\r\n\r\n", 1)[1]
                    t.sendall(b"ping-over-tls\n")
                    while b"ping-over-tls\n" not in rest:
                        rest += t.recv(4096)
            # plaintext HTTP/1.1 and h2c to the TLS listener get nowhere, and it still serves
            r = subprocess.run(["curl", "-sS", "-H", f"Host: {name}", "-H", f"{TOKEN_HEADER}: {tok}",
                                f"http://127.0.0.1:{d.ingress_port}/"], capture_output=True, text=True, timeout=30)
            assert r.returncode != 0 and "hello-tls" not in r.stdout, r
            assert get("-H", f"{TOKEN_HEADER}: {tok}", u + "/") == "hello-tls\n\n2 200"
        finally:
            d.api("DELETE", f"/v1/sandboxes/{sid}", timeout=180)
    finally:
        problems = residue.teardown_daemon(d)
        if not problems:
            residue.remove_daemon_dir(d)
        assert not problems, problems


@pytest.mark.timeout(120)
def test_tls_bad_config_leaves_the_ingress_off(e2e_session, tmp_path):
    """A certificate without its key, or one that does not load: the
    ingress stays off (said in the log), never plaintext instead; the API
    runs on."""
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    for args, said in (([f"--ingress-tls-cert={bad}"], "go together"),
                       ([f"--ingress-tls-cert={bad}", f"--ingress-tls-key={bad}"], "cannot load the TLS certificate")):
        d = e2e_session.new_daemon(extra_args=args)
        d.start()
        try:
            assert d.api("GET", "/v1/sandboxes").status == 200
            assert said in d.log_text() and "Cannot start the ingress" in d.log_text()
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", d.ingress_port), timeout=5).close()
        finally:
            problems = residue.teardown_daemon(d)
            if not problems:
                residue.remove_daemon_dir(d)
            assert not problems, problems


class H2Client:
    """python3-h2 over a plain socket to the ingress (h2c, prior knowledge)."""

    def __init__(self, d):
        self.sock = socket.create_connection(("127.0.0.1", d.ingress_port), timeout=30)
        self.conn = h2connection.H2Connection(h2config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()
        self.settings = {}
        self.events = []
        while h2settings.SettingCodes.ENABLE_CONNECT_PROTOCOL not in self.settings:
            self.pump()

    def flush(self):
        self.sock.sendall(self.conn.data_to_send())

    def pump(self):
        data = self.sock.recv(65536)
        assert data, "the ingress closed the connection"
        for ev in self.conn.receive_data(data):
            if isinstance(ev, h2events.RemoteSettingsChanged):
                self.settings.update({k: v.new_value for k, v in ev.changed_settings.items()})
            if isinstance(ev, h2events.DataReceived):
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            self.events.append(ev)
        self.flush()

    def take(self, sid, kind):
        while True:
            for i, ev in enumerate(self.events):
                if isinstance(ev, kind) and getattr(ev, "stream_id", None) == sid:
                    return self.events.pop(i)
                if isinstance(ev, h2events.StreamReset) and ev.stream_id == sid:
                    raise AssertionError(f"stream {sid} reset: {ev}")
            self.pump()

    def connect_ws(self, sid, authority, token=None, path="/chat"):
        headers = [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"), (":path", path),
                   (":authority", authority), ("sec-websocket-version", "13"),
                   ("sec-websocket-protocol", "chat")]
        if token:
            headers.append((TOKEN_HEADER.lower(), token))
        self.conn.send_headers(sid, headers)
        self.flush()
        return dict(self.take(sid, h2events.ResponseReceived).headers)

    def close(self):
        self.sock.close()


def test_h2_websocket_extended_connect(h2):
    """RFC 8441: the ingress offers extended CONNECT; a WebSocket over it reaches the sandbox as an
    HTTP/1.1 upgrade with a key of the ingress's own, is answered 200 with the subprotocol, and then
    relays bytes both ways; the client's END_STREAM reaches the sandbox as its input's end, which
    ends the stream. Another stream on the same connection meanwhile works."""
    d, a = h2["d"], h2["a"]
    c = H2Client(d)
    try:
        assert c.settings[h2settings.SettingCodes.ENABLE_CONNECT_PROTOCOL] == 1
        resp = c.connect_ws(1, f"9100-{a}.localhost", h2["tok"])
        assert resp[":status"] == "200" and resp.get("sec-websocket-protocol") == "chat", resp
        assert "sec-websocket-accept" not in resp, resp
        got = b""
        for i in range(3):
            msg = f"frame-{i}-".encode() * 100
            c.conn.send_data(1, msg)
            c.flush()
            want = len(got) + len(msg)
            while len(got) < want:
                got += c.take(1, h2events.DataReceived).data
        assert got == b"".join(f"frame-{i}-".encode() * 100 for i in range(3))
        # a plain request beside it on the same connection
        c.conn.send_headers(3, [(":method", "GET"), (":scheme", "http"), (":path", "/"),
                                (":authority", f"8000-{a}.localhost"), (TOKEN_HEADER.lower(), h2["tok"])],
                            end_stream=True)
        c.flush()
        assert dict(c.take(3, h2events.ResponseReceived).headers)[":status"] == "200"
        # the client ends its side: cat sees its input end and exits, which ends the stream
        c.conn.end_stream(1)
        c.flush()
        c.take(1, h2events.StreamEnded)
    finally:
        c.close()


def test_h2_websocket_refusals(h2):
    """A WebSocket without a token, to a server whose Sec-WebSocket-Accept is wrong, to one that does
    not switch (an HTTP server answering 200), and an extended CONNECT for another protocol: each
    refused on its own stream, the connection serving on."""
    d, a = h2["d"], h2["a"]
    c = H2Client(d)
    try:
        resp = c.connect_ws(1, f"9100-{a}.localhost")
        assert resp[":status"] in ("401", "403"), resp
        resp = c.connect_ws(3, f"9101-{a}.localhost", h2["tok"])
        assert resp[":status"] == "502", resp
        body = c.take(3, h2events.DataReceived).data
        assert b"WebSocket handshake" in body, body
        resp = c.connect_ws(5, f"8000-{a}.localhost", h2["tok"], path="/")
        assert resp[":status"] == "502", resp
        assert b"did not switch" in c.take(5, h2events.DataReceived).data
        # an answer other than 2xx is passed on as it is, and the stream ends with it
        resp = c.connect_ws(7, f"8000-{a}.localhost", h2["tok"], path="/no-such-page")
        assert resp[":status"] == "404", resp
        c.take(7, h2events.StreamEnded)
        c.conn.send_headers(9, [(":method", "CONNECT"), (":protocol", "chat-v2"), (":scheme", "http"),
                                (":path", "/"), (":authority", f"9100-{a}.localhost"),
                                (TOKEN_HEADER.lower(), h2["tok"])])
        c.flush()
        assert dict(c.take(9, h2events.ResponseReceived).headers)[":status"] == "501"
        resp = c.connect_ws(11, f"9100-{a}.localhost", h2["tok"])
        assert resp[":status"] == "200", resp
    finally:
        c.close()


# page and WebSocket on one port (so the browser carries the WebSocket on its HTTP/2 connection): the
# socket takes the browser's frame ("ping-from-browser", 2 + 4 mask + 17 bytes), then answers "echo"
WS_PAGE = ("<!doctype html><title>start</title><script>"
           "const ws = new WebSocket('wss://' + location.host + '/ws');"
           "ws.onopen = () => ws.send('ping-from-browser');"
           "ws.onmessage = (e) => { document.title = 'got:' + e.data; ws.close(); };"
           "ws.onerror = () => { document.title = 'error'; };</script>")
WS_PAGE_SERVER = r"""#!/bin/sh
read -r line
key=
while read -r l; do
  l=$(printf %s "$l" | tr -d '\r')
  [ -z "$l" ] && break
  case "$l" in [Ss]ec-[Ww]eb[Ss]ocket-[Kk]ey:*) key=$(printf %s "${l#*:}" | tr -d ' ');; esac
done
case "$line" in
"GET /ws "*)
  acc=$(printf %s "${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11" | sha1sum | cut -c1-40 | xxd -r -p | base64)
  printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
  printf 'Sec-WebSocket-Accept: %s\r\n\r\n' "$acc"
  head -c 23 >/dev/null
  printf '\201\004echo'
  head -c 8 >/dev/null ;;
*)
  page=$(cat /srv/ws.html)
  printf 'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s' ${#page} "$page" ;;
esac
"""


@pytest.mark.timeout(300)
def test_browser_websocket_over_tls_http2(e2e_session, tmp_path):
    """Chromium, given the ingress's extended CONNECT over TLS (ALPN h2), opens a page's WebSocket on
    its HTTP/2 connection: authorized by the link's cookie, relayed to the sandbox as an HTTP/1.1
    upgrade, and the echo comes back."""
    node = shutil.which("node")
    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboard")
    if not node or not os.access("/usr/bin/chromium", os.X_OK):
        pytest.skip("node and Debian's chromium are needed (scripts/install-deps.sh installs them)")
    if not os.path.isdir(os.path.join(driver, "node_modules", "playwright-core")):
        r = subprocess.run(["npm", "ci", "--prefix", driver, "--no-audit", "--no-fund"], capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "1", "-subj", "/CN=ws.test", "-addext", "subjectAltName=DNS:*.ws.test",
                        "-keyout", str(key), "-out", str(cert)], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    d = e2e_session.new_daemon(extra_args=[f"--ingress-tls-cert={cert}", f"--ingress-tls-key={key}",
                                           "--ingress-domain=ws.test"])
    d.start()
    try:
        sid = d.create()["id"]
        try:
            d.sh(sid, f"mkdir -p /srv && cat > /srv/ws.sh <<'EOF'\n{WS_PAGE_SERVER}EOF\n"
                      f"chmod +x /srv/ws.sh && printf %s \"{WS_PAGE}\" > /srv/ws.html")
            d.exec(sid, shell="exec nc -ll -p 8000 -e /srv/ws.sh", background=True)
            for attempt in range(3):
                # a link is spent by its first use: each attempt has its own
                link = d.api("GET", f"/v1/sandboxes/{sid}/ports/8000").json()["link"]
                r = subprocess.run([node, os.path.join(driver, "ws-h2.mjs"), link, "ws.test"], cwd=driver,
                                   capture_output=True, text=True, timeout=120)
                # Chromium drops a navigation, or the page's WebSocket, when the host's interfaces
                # change (the other test session makes and removes veths): that run says nothing
                # of the ingress
                if "ERR_NETWORK_CHANGED" not in r.stdout + r.stderr:
                    break
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
            out = json.loads(r.stdout.strip().splitlines()[-1])
            title = out["title"]
            assert title == "got:echo", out
            assert "a WebSocket over HTTP/2" in d.log_text(), "the browser did not use HTTP/2 for the WebSocket"
        finally:
            d.api("DELETE", f"/v1/sandboxes/{sid}", timeout=180)
    finally:
        d.stop()
