"""The ingress (src/ingress): Host {port}-{id}.{domain} to a port inside a
sandbox, through a real spaced, against servers started inside the sandbox
(busybox httpd and an nc-based Upgrade echo of the base template).

Access (missing, wrong, another sandbox's, another tenant's token; forged,
expired, replayed links and cookies), routing that never reaches anything but
the named sandbox's port, request smuggling and oversized heads, a sandbox
reaching the ingress, keep-alive, an Upgrade relay, a streamed 50 MiB body,
envd by host name, and the first-use event. test_ingress_latency prints the
ingress's cost per request against a direct connection (no assert on time)."""

import base64
import hashlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse

import pytest

import e2e_host as host
import e2e_http

BIG_MB = 50
TOKEN_HEADER = "X-Space-Traffic-Token"

UPGRADE_ECHO = r"""#!/bin/sh
while read -r l; do
  l=$(printf %s "$l" | tr -d '\r')
  [ -z "$l" ] && break
done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n'
exec cat
"""

CGI_ENV = r"""#!/bin/sh
printf 'Content-Type: text/plain\r\n'
printf 'Set-Cookie: space_traffic=1.forged; Domain=localhost; Path=/\r\n'
printf 'Set-Cookie: app=2; Path=/\r\n\r\n'
echo "cookie=$HTTP_COOKIE"
echo "token=$HTTP_X_SPACE_TRAFFIC_TOKEN"
echo "xff=$HTTP_X_FORWARDED_FOR"
echo "host=$HTTP_HOST"
if [ -n "$CONTENT_LENGTH" ]; then printf 'body='; head -c "$CONTENT_LENGTH"; echo; fi
"""


def start_servers(d, sid):
    script = (
        "mkdir -p /srv/cgi-bin && cd /srv && "
        f"dd if=/dev/zero of=/srv/big bs=1M count={BIG_MB} 2>/dev/null && "
        "echo hello-from-sandbox > /srv/index.html && "
        f"cat > /srv/cgi-bin/env <<'EOF'\n{CGI_ENV}EOF\n"
        f"cat > /srv/up.sh <<'EOF'\n{UPGRADE_ECHO}EOF\n"
        "chmod +x /srv/cgi-bin/env /srv/up.sh && httpd -p 8000 -h /srv"
    )
    d.sh(sid, script)
    d.exec(sid, shell="exec nc -ll -p 9000 -e /srv/up.sh", background=True)


@pytest.fixture(scope="module")
def ing(spaced):
    d = spaced
    a = d.create(auto_resume=True)["id"]
    b = d.create()["id"]
    start_servers(d, a)
    r = d.api("GET", f"/v1/sandboxes/{a}/ports/8000")
    assert r.status == 200, r
    port_a = r.json()
    tok_b = d.api("GET", f"/v1/sandboxes/{b}/ports/8000").json()["token"]
    # a second tenant and its own sandbox
    r = d.api("POST", "/v1/keys", json={"name": "ing2", "tenant": f"ing-{os.getpid()}"})
    assert r.status == 201, r
    k2 = r.json()["key"]
    c = d.create(key=k2)["id"]
    tok_c = d.api("GET", f"/v1/sandboxes/{c}/ports/8000", key=k2).json()["token"]
    ctx = {"d": d, "a": a, "b": b, "c": c, "k2": k2, "tok": port_a["token"], "tok_b": tok_b, "tok_c": tok_c,
           "port_a": port_a}
    host.wait_until(lambda: request(d, f"8000-{a}.localhost", "/", {TOKEN_HEADER: ctx["tok"]})[0] == 200, 20)
    yield ctx
    for sid, key in ((a, None), (b, None), (c, k2)):
        r = d.api("DELETE", f"/v1/sandboxes/{sid}", key=key or d.admin_key, timeout=180)
        assert r.status == 200, r


def conn(d, timeout=30):
    return http.client.HTTPConnection("127.0.0.1", d.ingress_port, timeout=timeout)


def request(d, hostname, path, headers=None, method="GET", body=None):
    c = conn(d)
    try:
        h = {"Host": hostname}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.read(), r
    finally:
        c.close()


def raw(d, data, timeout=10):
    """Sends bytes as they are; returns what comes back until close."""
    with socket.create_connection(("127.0.0.1", d.ingress_port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while True:
                k = s.recv(65536)
                if not k:
                    break
                out += k
        except socket.timeout:
            pass
        return out


def err_code(body):
    return json.loads(body)["error"]["code"]


# ---- access ----

def test_with_token_reaches_the_sandbox_port(ing):
    st, body, _ = request(ing["d"], f"8000-{ing['a']}.localhost", "/", {TOKEN_HEADER: ing["tok"]})
    assert st == 200 and body == b"hello-from-sandbox\n"
    # E2B's header works the same; the host name is case-insensitive and may name the listener's port
    st, body, _ = request(ing["d"], f"8000-{ing['a'].upper()}.LOCALHOST:{ing['d'].ingress_port}", "/",
                          {"e2b-traffic-access-token": ing["tok"]})
    assert st == 200 and body == b"hello-from-sandbox\n"


def test_missing_token_401(ing):
    st, body, _ = request(ing["d"], f"8000-{ing['a']}.localhost", "/")
    assert st == 401 and err_code(body) == "unauthorized"


def test_another_sandboxs_token_refused(ing):
    st, body, _ = request(ing["d"], f"8000-{ing['a']}.localhost", "/", {TOKEN_HEADER: ing["tok_b"]})
    assert st == 403 and err_code(body) == "forbidden"
    st, _, _ = request(ing["d"], f"8000-{ing['a']}.localhost", "/", {TOKEN_HEADER: "0" * 64})
    assert st == 403


def test_another_tenants_token_and_sandbox_refused(ing):
    d = ing["d"]
    # tenant 2's token on tenant 1's sandbox, and tenant 1's token on tenant 2's sandbox
    st, _, _ = request(d, f"8000-{ing['a']}.localhost", "/", {TOKEN_HEADER: ing["tok_c"]})
    assert st == 403
    st, _, _ = request(d, f"8000-{ing['c']}.localhost", "/", {TOKEN_HEADER: ing["tok"]})
    assert st == 403
    # tenant 2 cannot ask for tenant 1's sandbox's token
    r = d.api("GET", f"/v1/sandboxes/{ing['a']}/ports/8000", key=ing["k2"])
    assert r.status == 404


def test_this_token_cannot_name_another_sandbox_or_the_host(ing):
    d = ing["d"]
    for hostname in (f"8000-{ing['b']}.localhost", f"127.0.0.1:{d.port}", "localhost", f"{d.port}-localhost",
                     f"8000-{ing['a']}.localhost.evil.example", f"8000-{ing['a']}.evil.example",
                     f"8000-{ing['a']}@127.0.0.1", f"0-{ing['a']}.localhost", f"70000-{ing['a']}.localhost"):
        st, _, _ = request(d, hostname, "/", {TOKEN_HEADER: ing["tok"]})
        assert st in (400, 403), (hostname, st)
    # the host's own API port, named as a sandbox port: it is the sandbox's port of that number, where nothing listens
    st, body, _ = request(d, f"{d.port}-{ing['a']}.localhost", "/v1/info", {TOKEN_HEADER: ing["tok"]})
    assert st == 502 and err_code(body) == "bad_gateway"
    # an absolute-form target naming the API is not a way around the Host
    out = raw(d, f"GET http://127.0.0.1:{d.port}/v1/info HTTP/1.1\r\nHost: 8000-{ing['a']}.localhost\r\n"
                 f"{TOKEN_HEADER}: {ing['tok']}\r\n\r\n".encode())
    assert out.startswith(b"HTTP/1.1 400"), out[:200]


def test_port_not_listening_502(ing):
    st, body, _ = request(ing["d"], f"8001-{ing['a']}.localhost", "/", {TOKEN_HEADER: ing["tok"]})
    assert st == 502 and b"connection refused" in body


def test_one_time_link_sets_cookie_and_is_spent(ing):
    d, a = ing["d"], ing["a"]
    link = d.api("GET", f"/v1/sandboxes/{a}/ports/8000").json()["link"]
    path = link.split(f"{d.ingress_port}", 1)[1]
    assert path.startswith("/?space_token=")
    st, _, r = request(d, f"8000-{a}.localhost", path + "&keep=1")
    assert st == 302 and r.getheader("Location") == "/?keep=1"
    cookie = r.getheader("Set-Cookie").split(";", 1)[0]
    assert cookie.startswith("space_traffic=") and "HttpOnly" in r.getheader("Set-Cookie")
    # the cookie opens the sandbox's port and is not passed on to it; other cookies are
    st, body, _ = request(d, f"8000-{a}.localhost", "/cgi-bin/env", {"Cookie": f"app=1; {cookie}"})
    assert st == 200 and b"cookie=app=1\n" in body and b"space_traffic" not in body
    # the link again: spent
    st, body, _ = request(d, f"8000-{a}.localhost", path)
    assert st == 403 and b"used already" in body
    # the cookie on another sandbox, forged, expired
    st, _, _ = request(d, f"8000-{ing['b']}.localhost", "/", {"Cookie": cookie})
    assert st == 403
    exp, nonce, mac = cookie.split("=", 1)[1].split(".")
    for forged in (f"{int(exp) + 1}.{nonce}.{mac}", f"1000.{nonce}.{mac}", f"{exp}.{nonce[::-1]}.{mac}",
                   f"{exp}.{mac}", f"{exp}.{nonce}.{mac[:-1]}0"):
        st, _, _ = request(d, f"8000-{a}.localhost", "/", {"Cookie": f"space_traffic={forged}"})
        assert st == 403, forged
    st, _, _ = request(d, f"8000-{a}.localhost", "/?space_token=1.abc")
    assert st == 403
    # a link whose path starts with // redirects on this host, never to another
    link = d.api("GET", f"/v1/sandboxes/{a}/ports/8000").json()["link"]
    q = link.split("?", 1)[1]
    st, _, r = request(d, f"8000-{a}.localhost", f"//evil.example/x?{q}")
    assert st == 302 and r.getheader("Location") == "/evil.example/x"


def test_token_and_credentials_not_forwarded(ing):
    st, body, _ = request(ing["d"], f"8000-{ing['a']}.localhost", "/cgi-bin/env", {TOKEN_HEADER: ing["tok"]})
    assert st == 200, body
    assert b"token=\n" in body and b"xff=127.0.0.1\n" in body and f"host=8000-{ing['a']}.localhost".encode() in body
    # the sandbox's own cookies reach the client; one named like the ingress's does not
    _, _, r = request(ing["d"], f"8000-{ing['a']}.localhost", "/cgi-bin/env", {TOKEN_HEADER: ing["tok"]})
    cookies = [v for k, v in r.getheaders() if k.lower() == "set-cookie"]
    assert cookies == ["app=2; Path=/"], cookies


# ---- framing ----

@pytest.mark.parametrize("head", [
    "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
    "Content-Length: 5\r\nContent-Length: 6\r\n",
    "Transfer-Encoding: gzip, chunked\r\n",
])
def test_request_smuggling_400(ing, head):
    out = raw(ing["d"], (f"POST / HTTP/1.1\r\nHost: 8000-{ing['a']}.localhost\r\n{TOKEN_HEADER}: {ing['tok']}\r\n"
                         f"{head}\r\nhello0\r\n\r\n").encode())
    assert out.startswith(b"HTTP/1.1 400"), out[:200]


def test_duplicate_host_400(ing):
    out = raw(ing["d"], (f"GET / HTTP/1.1\r\nHost: 8000-{ing['a']}.localhost\r\nHost: 8000-{ing['b']}.localhost\r\n"
                         f"{TOKEN_HEADER}: {ing['tok']}\r\n\r\n").encode())
    assert out.startswith(b"HTTP/1.1 400"), out[:200]


def test_oversized_head_431(ing):
    out = raw(ing["d"], (f"GET / HTTP/1.1\r\nHost: 8000-{ing['a']}.localhost\r\nX-Big: {'a' * 20000}\r\n\r\n").encode())
    assert out.startswith(b"HTTP/1.1 431"), out[:200]


def test_keep_alive_several_requests_one_connection(ing):
    c = conn(ing["d"])
    try:
        h = {"Host": f"8000-{ing['a']}.localhost", TOKEN_HEADER: ing["tok"]}
        c.request("GET", "/", headers=h)
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"hello-from-sandbox\n"
        sock = c.sock
        for i in range(5):
            c.request("POST", "/cgi-bin/env", body=f"n{i}", headers=h)
            r = c.getresponse()
            assert r.status == 200
            assert f"body=n{i}".encode() in r.read()
            assert c.sock is sock  # the same connection
    finally:
        c.close()


def test_head_keeps_the_length_and_the_connection(ing):
    c = conn(ing["d"])
    try:
        h = {"Host": f"8000-{ing['a']}.localhost", TOKEN_HEADER: ing["tok"]}
        c.request("HEAD", "/big", headers=h)
        r = c.getresponse()
        assert r.status == 200 and int(r.getheader("Content-Length")) == BIG_MB << 20
        assert r.read() == b""
        c.request("GET", "/", headers=h)
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"hello-from-sandbox\n"
    finally:
        c.close()


def test_streamed_50mib_response(ing):
    c = conn(ing["d"], timeout=60)
    try:
        c.request("GET", "/big", headers={"Host": f"8000-{ing['a']}.localhost", TOKEN_HEADER: ing["tok"]})
        r = c.getresponse()
        assert r.status == 200 and int(r.getheader("Content-Length")) == BIG_MB << 20
        n = 0
        while True:
            k = r.read(1 << 20)
            if not k:
                break
            assert k.count(0) == len(k)
            n += len(k)
        assert n == BIG_MB << 20
    finally:
        c.close()


def test_upgrade_relays_both_ways(ing):
    with socket.create_connection(("127.0.0.1", ing["d"].ingress_port), timeout=20) as s:
        s.sendall((f"GET /ws HTTP/1.1\r\nHost: 9000-{ing['a']}.localhost\r\n{TOKEN_HEADER}: {ing['tok']}\r\n"
                   "Connection: Upgrade\r\nUpgrade: echo\r\n\r\n").encode())
        got = b""
        while b"\r\n\r\n" not in got:
            k = s.recv(4096)
            assert k, got
            got += k
        head, rest = got.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        assert b"upgrade: echo" in head.lower()
        rtt = []
        for i in range(50):
            msg = f"ping {i}\n".encode()
            t = time.perf_counter()
            s.sendall(msg)
            while len(rest) < len(msg):
                k = s.recv(4096)
                assert k
                rest += k
            rtt.append(time.perf_counter() - t)
            assert rest[:len(msg)] == msg
            rest = rest[len(msg):]
        # a big message both ways through the relay's bounded buffers
        blob = bytes(range(256)) * 4096   # 1 MiB, sent while the echo is read (no buffer needs to hold it all)
        sender = threading.Thread(target=s.sendall, args=(blob,))
        sender.start()
        while len(rest) < len(blob):
            k = s.recv(1 << 16)
            assert k
            rest += k
        sender.join()
        assert rest == blob
        rtt.sort()
        print(f"\nupgrade relay round trip (busybox nc + sh cat inside) p50={rtt[25] * 1e3:.2f}ms "
              f"p90={rtt[45] * 1e3:.2f}ms (n=50)")


H2C_DUMP = r"""#!/bin/sh
: > /tmp/h2c.req
while read -r l; do
  l=$(printf %s "$l" | tr -d '\r')
  [ -z "$l" ] && break
  printf '%s\n' "$l" >> /tmp/h2c.req
done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n'
cat /tmp/h2c.req
"""


def test_h2c_upgrade_reaches_the_sandbox_with_its_settings(ing):
    """Upgrade: h2c (curl --http2 on http://) goes through to the sandbox's
    server with HTTP2-Settings, named in Connection as RFC 7540 3.2 wants
    (an h2c server refuses the upgrade without it); a 101 turns the
    connection into a relay, so the HTTP/2 that follows is the sandbox's."""
    d, a = ing["d"], ing["a"]
    d.sh(a, f"cat > /srv/h2c.sh <<'EOF'\n{H2C_DUMP}EOF\nchmod +x /srv/h2c.sh")
    d.exec(a, shell="exec nc -ll -p 9001 -e /srv/h2c.sh", background=True)
    settings = "AAMAAABkAARAAAAAAAIAAAAA"
    req = (f"GET /grpc HTTP/1.1\r\nHost: 9001-{a}.localhost\r\n{TOKEN_HEADER}: {ing['tok']}\r\n"
           f"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: {settings}\r\n\r\n").encode()
    got = b""
    for _ in range(50):
        got = raw(d, req, timeout=5)
        if got.startswith(b"HTTP/1.1 101"):
            break
        time.sleep(0.2)  # nc not listening yet
    head, rest = got.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101") and b"upgrade: h2c" in head.lower(), got
    seen = rest.decode().splitlines()
    assert "Connection: Upgrade, HTTP2-Settings" in seen, seen
    assert "Upgrade: h2c" in seen and f"HTTP2-Settings: {settings}" in seen, seen
    assert seen.count(f"HTTP2-Settings: {settings}") == 1, seen  # hop-by-hop: not also copied as it came
    assert not any(TOKEN_HEADER.lower() in line.lower() for line in seen), seen


def test_h2c_upgrade_to_an_http1_server_is_plain_http1(ing):
    """curl --http2 against a server that speaks only HTTP/1.1 (busybox
    httpd ignores the Upgrade): the answer is the page, over HTTP/1.1."""
    d, a = ing["d"], ing["a"]
    r = host.run(["curl", "-sS", "--http2", "-o", "-", "-w", "\n%{http_version} %{http_code}",
                  "-H", f"Host: 8000-{a}.localhost", "-H", f"{TOKEN_HEADER}: {ing['tok']}",
                  f"http://127.0.0.1:{d.ingress_port}/"], timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello-from-sandbox\n\n1.1 200", r.stdout


@pytest.mark.parametrize("which", ["api"])
def test_http2_prior_knowledge_is_told_to_use_http1(ing, which):
    """A client that starts with the HTTP/2 preface at the API gets HTTP/2
    frames it can read, SETTINGS then GOAWAY HTTP_1_1_REQUIRED (RFC 9113),
    not an HTTP/1.1 400 it would take for a broken frame. (The ingress
    serves HTTP/2: test_ingress_h2.py.)"""
    d = ing["d"]
    port = d.ingress_port if which == "ingress" else d.port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        out = b""
        while True:
            k = s.recv(4096)
            if not k:
                break
            out += k
    frames = []
    while len(out) >= 9:
        n = int.from_bytes(out[:3], "big")
        frames.append((out[3], out[9:9 + n]))
        out = out[9 + n:]
    assert [t for t, _ in frames] == [4, 7], frames          # SETTINGS, GOAWAY
    goaway = frames[1][1]
    assert int.from_bytes(goaway[4:8], "big") == 0xd, goaway  # HTTP_1_1_REQUIRED
    assert b"HTTP/1.1" in goaway[8:], goaway


# ---- the sandbox side ----

def test_sandbox_cannot_reach_the_ingress(ing):
    d, a = ing["d"], ing["a"]
    hostend = d.sh(a, "ip route | sed -n 's/^default via \\([0-9.]*\\).*/\\1/p'").strip()
    targets = [f"127.0.0.1 {d.ingress_port}"] + ([f"{hostend} {d.ingress_port}"] if hostend else [])
    for t in targets:
        r = d.exec(a, shell=f"printf 'GET / HTTP/1.0\\r\\nHost: 8000-{a}.localhost\\r\\n\\r\\n' | nc -w 3 {t}")
        assert b"hello-from-sandbox" not in r.stdout and b"HTTP/1." not in r.stdout, (t, r)


def test_other_host_processes_cannot_reach_the_sandbox(ing):
    """Only the ingress's marked connections get answers: a plain connect from the host times out."""
    d, a = ing["d"], ing["a"]
    addr = sandbox_addr(d, a)
    assert addr
    with pytest.raises(OSError):
        socket.create_connection((addr, 8000), timeout=3).close()
    # the same connection with the ingress's mark is answered: the refusal above is the firewall's
    assert direct_get(addr, "/") > 0


def test_first_use_event(ing):
    d, a = ing["d"], ing["a"]
    r = d.api("GET", "/v1/events", params={"sandbox": a, "type": "sandbox.port_opened"})
    assert r.status == 200, r
    evs = [e for e in r.json()["events"] if e["type"] == "sandbox.port_opened"]
    ports = sorted(e["data"]["port"] for e in evs)
    assert 8000 in ports and ports.count(8000) == 1, evs


def test_paused_sandbox_resumes_on_traffic(ing):
    d, a = ing["d"], ing["a"]
    r = d.api("POST", f"/v1/sandboxes/{a}/pause")
    assert r.status == 200, r
    st, body, _ = request(d, f"8000-{a}.localhost", "/", {TOKEN_HEADER: ing["tok"]})
    assert st == 200 and body == b"hello-from-sandbox\n"
    assert d.show(a).json()["state"] == "running"


def test_envd_by_host_name(ing):
    d, a = ing["d"], ing["a"]
    r = e2e_http.request(d.url, "GET", f"/sandboxes/{a}", key=None, headers={"X-API-KEY": d.admin_key})
    assert r.status == 200, r
    info = r.json()
    envd = info["envdAccessToken"]
    # E2B's getHost(port) is `${port}-${id}.${domain}`: the domain names the ingress, its port included
    assert info["domain"] == f"localhost:{d.ingress_port}"
    r = e2e_http.request(d.url, "POST", f"/sandboxes/{a}/connect", json={"timeout": 300}, key=None,
                         headers={"X-API-KEY": d.admin_key})
    assert r.status in (200, 201), r
    assert r.json()["trafficAccessToken"] == ing["tok"] != envd
    assert r.json()["domain"] == info["domain"]
    st, body, _ = request(d, f"49983-{a}.localhost", "/health", {"X-Access-Token": envd})
    assert st in (200, 204), body
    st, body, _ = request(d, f"49983-{a}.localhost", "/files?path=/srv/index.html", {"X-Access-Token": envd})
    assert st == 200 and body == b"hello-from-sandbox\n"
    st, _, _ = request(d, f"49983-{a}.localhost", "/files?path=/srv/index.html", {"X-Access-Token": ing["tok"]})
    assert st == 401


def test_ports_endpoint_bad_input(ing):
    d = ing["d"]
    for p in ("0", "65536", "08000", "x", "-1"):
        r = d.api("GET", f"/v1/sandboxes/{ing['a']}/ports/{p}")
        assert r.status == 400, (p, r)
    r = d.api("GET", "/v1/sandboxes/aaaaaaaaaaaaaaaa/ports/80")
    assert r.status == 404


INGRESS_MARK = 0x73706163   # FIREWALL_INGRESS_MARK (src/net/firewall.h)


def sandbox_addr(d, sid):
    return d.sh(sid, "ip -4 addr | sed -n 's/.*inet \\([0-9.]*\\)\\/31.*/\\1/p'").strip()


def direct_get(addr, path, size_hint=0):
    """What the ingress does: a marked connection to the sandbox's address, one request."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, INGRESS_MARK)
    s.settimeout(30)
    try:
        s.connect((addr, 8000))
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        n = 0
        while True:
            k = s.recv(1 << 20)
            if not k:
                return n
            n += len(k)
    finally:
        s.close()


def test_ingress_latency(ing):
    """Prints the ingress's cost per small GET (one keep-alive client connection) against a direct
    connection per request to the sandbox's address (what the ingress opens), and 50 MiB both ways.
    Figures only: no assert on time."""
    d, a = ing["d"], ing["a"]
    addr = sandbox_addr(d, a)
    assert addr
    n = 200
    c = conn(d)
    h = {"Host": f"8000-{a}.localhost", TOKEN_HEADER: ing["tok"]}
    via, direct = [], []
    try:
        for _ in range(n):
            t = time.perf_counter()
            assert direct_get(addr, "/") > 0
            direct.append(time.perf_counter() - t)
            t = time.perf_counter()
            c.request("GET", "/", headers=h)
            r = c.getresponse()
            r.read()
            via.append(time.perf_counter() - t)
    finally:
        c.close()
    via.sort()
    direct.sort()
    t = time.perf_counter()
    assert direct_get(addr, "/big") > BIG_MB << 20
    big_direct = time.perf_counter() - t
    t = time.perf_counter()
    st, body, _ = request(d, f"8000-{a}.localhost", "/big", h)
    big = time.perf_counter() - t
    assert st == 200 and len(body) == BIG_MB << 20
    print(f"\ningress GET p50={via[n // 2] * 1e3:.2f}ms p90={via[n * 9 // 10] * 1e3:.2f}ms; "
          f"direct p50={direct[n // 2] * 1e3:.2f}ms p90={direct[n * 9 // 10] * 1e3:.2f}ms (n={n}); "
          f"added p50={(via[n // 2] - direct[n // 2]) * 1e3:.2f}ms; "
          f"{BIG_MB} MiB: ingress {BIG_MB / big:.0f} MiB/s, direct {BIG_MB / big_direct:.0f} MiB/s")


def test_cli_port_and_open(ing):
    d, a = ing["d"], ing["a"]
    r = d.cli("port", a, "8000")
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert lines[0] == f"http://8000-{a}.localhost:{d.ingress_port}/"
    assert f"token: {ing['tok']}" in r.out
    r = d.cli("open", a, "8000")
    assert r.rc == 0, r
    link = r.out.strip()
    assert link.startswith(f"http://8000-{a}.localhost:{d.ingress_port}/?space_token=")
    # the link it printed works once
    st, _, resp = request(d, f"8000-{a}.localhost", link.split(str(d.ingress_port), 1)[1])
    assert st == 302 and resp.getheader("Set-Cookie").startswith("space_traffic=")
    r = d.cli("port", a, "0")
    assert r.rc != 0 and "port" in r.err
    r = d.cli("port", a)
    assert r.rc != 0


def test_public_sandbox_reachable_without_token(ing):
    d = ing["d"]
    pub = d.create(public_traffic=True)
    assert pub["public_traffic"] is True
    assert d.show(ing["a"]).json()["public_traffic"] is False
    try:
        d.sh(pub["id"], "mkdir -p /w && echo public > /w/index.html && httpd -p 8000 -h /w")
        host.wait_until(lambda: request(d, f"8000-{pub['id']}.localhost", "/")[0] == 200, 20)
        st, body, _ = request(d, f"8000-{pub['id']}.localhost", "/")
        assert st == 200 and body == b"public\n"
        # a wrong token is still refused (never silently ignored)
        st, _, _ = request(d, f"8000-{pub['id']}.localhost", "/", {TOKEN_HEADER: ing["tok"]})
        assert st == 403
        # the private one next to it is not
        st, _, _ = request(d, f"8000-{ing['a']}.localhost", "/")
        assert st == 401
        # an unknown id without a token: the same answer as a private one
        st, _, _ = request(d, "8000-aaaaaaaaaaaaaaaa.localhost", "/")
        assert st == 401
    finally:
        d.delete(pub["id"])
    r = d.api("POST", "/v1/sandboxes", json={"public_traffic": "yes"})
    assert r.status == 400, r


def test_e2b_allow_public_traffic(ing):
    d = ing["d"]
    r = e2e_http.request(d.url, "POST", "/sandboxes", json={"templateID": "base", "network": {"allowPublicTraffic": True}},
                         key=None, headers={"X-API-KEY": d.admin_key})
    assert r.status == 201, r
    sid = r.json()["sandboxID"]
    try:
        assert d.show(sid).json()["public_traffic"] is True
    finally:
        d.delete(sid)
    r = e2e_http.request(d.url, "POST", "/sandboxes", json={"templateID": "base", "network": {"allowPublicTraffic": 1}},
                         key=None, headers={"X-API-KEY": d.admin_key})
    assert r.status == 400, r


def e2b_signature(path, op, user, token, exp=None):
    raw = f"{path}:{op}:{user}:{token}" + (f":{exp}" if exp is not None else "")
    return "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")


def test_e2b_signed_download_and_upload_urls(ing):
    """E2B's downloadUrl/uploadUrl: /files with signature= instead of X-Access-Token, on the envd host name."""
    d, a = ing["d"], ing["a"]
    r = e2e_http.request(d.url, "GET", f"/sandboxes/{a}", key=None, headers={"X-API-KEY": d.admin_key})
    envd = r.json()["envdAccessToken"]
    h = f"49983-{a}.localhost"
    path = "/srv/index.html"

    def get(query):
        return request(d, h, "/files?" + urllib.parse.urlencode(query))

    st, body, _ = get({"path": path, "signature": e2b_signature(path, "read", "", envd)})
    assert st == 200 and body == b"hello-from-sandbox\n"
    exp = int(time.time()) + 300
    st, body, _ = get({"path": path, "signature": e2b_signature(path, "read", "root", envd, exp),
                       "signature_expiration": exp, "username": "root"})
    assert st == 200 and body == b"hello-from-sandbox\n"
    # expired, for another path, for write, with another sandbox's token, tampered expiry, garbage: refused
    old = int(time.time()) - 10
    for q in ({"path": path, "signature": e2b_signature(path, "read", "", envd, old), "signature_expiration": old},
              {"path": "/etc/shadow", "signature": e2b_signature(path, "read", "", envd)},
              {"path": path, "signature": e2b_signature(path, "write", "", envd)},
              {"path": path, "signature": e2b_signature(path, "read", "", ing["tok"])},
              {"path": path, "signature": e2b_signature(path, "read", "", envd, exp), "signature_expiration": exp + 1},
              {"path": path, "signature": e2b_signature(path, "read", "", envd, exp)},
              {"path": path, "signature": "v1_"}, {"path": path, "signature": "x"}):
        st, _, _ = get(q)
        assert st == 401, q
    # an upload URL writes
    up = "/tmp/signed-upload.txt"
    q = urllib.parse.urlencode({"path": up, "signature": e2b_signature(up, "write", "", envd)})
    st, body, _ = request(d, h, "/files?" + q, {"Content-Type": "application/octet-stream"}, method="POST",
                          body=b"signed bytes")
    assert st == 200, body
    assert d.sh(a, f"cat {up}") == "signed bytes"
    # the same signature on the API's listener with E2b-Sandbox-Id
    q = urllib.parse.urlencode({"path": path, "signature": e2b_signature(path, "read", "", envd)})
    r = e2e_http.request(d.url, "GET", "/files?" + q, key=None, headers={"E2b-Sandbox-Id": a})
    assert r.status == 200 and r.body == b"hello-from-sandbox\n"


def test_e2b_mask_request_host(spaced):
    """E2B's network.maskRequestHost: the sandbox's server sees that Host
    (${PORT} = the port) for ingress requests, X-Forwarded-Host keeps the
    client's; anything that could end or add a header is a 400."""
    d = spaced

    def e2b(method, path, body=None):
        return e2e_http.request(d.url, method, path, json=body, key=None, headers={"X-API-KEY": d.admin_key},
                                timeout=120)

    for bad in ["a.example\r\nX-Evil: 1", "a b", "", 5, "x" * 300, "${PORT}.${PORT}", "a/b"]:
        r = e2b("POST", "/v2/sandboxes", {"templateID": "base", "network": {"maskRequestHost": bad}})
        assert r.status == 400 and r.json()["code"] == 400 and "maskRequestHost" in r.json()["message"], (bad, r)
    r = e2b("POST", "/v2/sandboxes", {"templateID": "base", "timeout": 300,
                                       "network": {"maskRequestHost": "localhost:${PORT}"}})
    assert r.status == 201, r
    sid, tok = r.json()["sandboxID"], r.json()["trafficAccessToken"]
    d.known_alive.add(sid)
    try:
        d.sh(sid, "mkdir -p /srv/cgi-bin && "
                  f"cat > /srv/cgi-bin/env <<'EOF'\n{CGI_ENV}EOF\n"
                  "chmod +x /srv/cgi-bin/env && httpd -p 8000 -h /srv")
        assert host.wait_until(lambda: request(d, f"8000-{sid}.localhost", "/cgi-bin/env",
                                                {"e2b-traffic-access-token": tok})[0] == 200, 20)
        st, body, _ = request(d, f"8000-{sid}.localhost", "/cgi-bin/env", {"e2b-traffic-access-token": tok})
        assert st == 200 and b"host=localhost:8000\n" in body, body
    finally:
        e2b("DELETE", f"/sandboxes/{sid}")
        d.known_alive.discard(sid)
