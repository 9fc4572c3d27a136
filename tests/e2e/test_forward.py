"""Port forwarding over the API (src/api/port-forward.c, src/cli/cli-forward.c):
GET /v1/sandboxes/{id}/ports/{port}/connect with Upgrade: tcp becomes a raw
TCP stream to that port inside the sandbox; `space forward ID LOCAL:REMOTE`
listens locally and carries each connection there, like kubectl port-forward.

Against an echo server (busybox nc) and an HTTP server inside the sandbox:
bytes both ways, half-close, several connections at once, a large transfer;
refusals (no key, another tenant's sandbox, a bad port, no Upgrade, a body,
nothing listening, a sandbox not running); the forward reaches only the named
sandbox's port; the CLI's port choice, errors and exit codes."""

import os
import signal
import socket
import subprocess
import threading

import pytest

import e2e_host as host
import e2e_http
from e2e_daemon import clean_env

ECHO_PORT = 9100
HTTP_PORT = 8100


@pytest.fixture(scope="module")
def fwd(spaced):
    d = spaced
    a = d.create()["id"]
    d.sh(a, f"mkdir -p /srv && echo hello-forward > /srv/index.html && httpd -p {HTTP_PORT} -h /srv")
    d.exec(a, shell=f"exec nc -ll -p {ECHO_PORT} -e cat", background=True)
    assert host.wait_until(lambda: listening(d, a, ECHO_PORT), 30)
    b = d.create()["id"]  # a neighbour of the same tenant, serving nothing
    r = d.api("POST", "/v1/keys", json={"name": "fwd2", "tenant": f"fwd-{os.getpid()}"})
    assert r.status == 201, r
    k2 = r.json()["key"]
    yield {"d": d, "a": a, "b": b, "k2": k2}


def listening(d, sid, port):
    return f":{port} " in d.sh(sid, "netstat -ltn")


def upgrade(d, sid, port, key=None, headers=None, body=None, raw_head=None):
    """Opens a connection to the API and asks for the TCP upgrade: (socket, status, head bytes, rest)."""
    s = socket.create_connection((d.host, d.port), timeout=30)
    if raw_head is None:
        h = {"Host": f"{d.host}:{d.port}", "Connection": "Upgrade", "Upgrade": "tcp"}
        if key is not False:
            h["Authorization"] = f"Bearer {key or d.admin_key}"
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        if body is not None:
            h["Content-Length"] = str(len(body))
        raw_head = f"GET /v1/sandboxes/{sid}/ports/{port}/connect HTTP/1.1\r\n" + \
            "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    s.sendall(raw_head.encode() + (body or b""))
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    return s, status, head, rest


def recv_exactly(s, n, have=b""):
    buf = have
    while len(buf) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def error_of(s, head, rest):
    """The JSON error body of a refused upgrade."""
    import json
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    body = recv_exactly(s, length, rest)
    s.close()
    return json.loads(body)["error"]


def test_echo_both_ways_and_half_close(fwd):
    d, a = fwd["d"], fwd["a"]
    s, status, head, rest = upgrade(d, a, ECHO_PORT)
    assert status == 101, head
    assert b"upgrade: tcp" in head.lower()
    try:
        s.sendall(b"ping\n")
        assert recv_exactly(s, 5, rest) == b"ping\n"
        s.sendall(b"pong\n")
        assert recv_exactly(s, 5) == b"pong\n"
        s.shutdown(socket.SHUT_WR)  # our end passes through: cat ends, and so does the stream
        s.settimeout(30)
        assert s.recv(10) == b""
    finally:
        s.close()


def test_large_transfer_and_parallel_connections(fwd):
    d, a = fwd["d"], fwd["a"]
    payload = os.urandom(8 * 1024 * 1024)
    results = {}

    def one(i):
        s, status, head, rest = upgrade(d, a, ECHO_PORT)
        assert status == 101, head
        got = [rest]

        def reader():
            n = len(rest)
            while n < len(payload):
                c = s.recv(1 << 20)
                if not c:
                    break
                got.append(c)
                n += len(c)
        t = threading.Thread(target=reader)
        t.start()
        s.sendall(payload)
        t.join(120)
        s.close()
        results[i] = b"".join(got)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(180)
    assert sorted(results) == [0, 1, 2]
    for i, data in results.items():
        assert data == payload, f"connection {i}: {len(data)} of {len(payload)} bytes came back intact"


def test_http_through_the_stream(fwd):
    d, a = fwd["d"], fwd["a"]
    s, status, head, rest = upgrade(d, a, HTTP_PORT)
    assert status == 101, head
    s.sendall(b"GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n")
    s.settimeout(30)
    buf = rest
    while True:
        c = s.recv(65536)
        if not c:
            break
        buf += c
    s.close()
    assert b"200" in buf.split(b"\r\n", 1)[0] and b"hello-forward" in buf, buf


@pytest.mark.parametrize("case", ["no_key", "wrong_key", "other_tenant", "unknown_sandbox"])
def test_refused_who(fwd, case):
    d, a = fwd["d"], fwd["a"]
    key = {"no_key": False, "wrong_key": "space_bogus", "other_tenant": fwd["k2"], "unknown_sandbox": None}[case]
    sid = "zzzzzzzzzzzzzzzz" if case == "unknown_sandbox" else a
    s, status, head, rest = upgrade(d, sid, ECHO_PORT, key=key)
    want = 401 if case in ("no_key", "wrong_key") else 404
    assert status == want, head
    err = error_of(s, head, rest)
    assert err["code"] == ("unauthorized" if want == 401 else "not_found"), err


@pytest.mark.parametrize("port", ["0", "65536", "-1", "08080", "x", "99999999"])
def test_refused_bad_port(fwd, port):
    d, a = fwd["d"], fwd["a"]
    s, status, head, rest = upgrade(d, a, port)
    assert status == 400, head
    assert "port" in error_of(s, head, rest)["message"]


@pytest.mark.parametrize("case", ["no_upgrade", "websocket", "no_connection", "body"])
def test_refused_not_an_upgrade(fwd, case):
    d, a = fwd["d"], fwd["a"]
    headers = {"no_upgrade": {"Upgrade": None}, "websocket": {"Upgrade": "websocket"},
               "no_connection": {"Connection": None}, "body": {}}[case]
    s, status, head, rest = upgrade(d, a, ECHO_PORT, headers=headers, body=b"x" if case == "body" else None)
    assert status == 400, head
    err = error_of(s, head, rest)
    assert err["code"] == "bad_request", err


def test_nothing_listening_is_a_clean_502(fwd):
    d, b = fwd["d"], fwd["b"]
    s, status, head, rest = upgrade(d, b, ECHO_PORT)
    assert status == 502, head
    err = error_of(s, head, rest)
    assert "connection refused" in err["message"], err


def test_reaches_only_the_named_sandbox(fwd):
    """b's port that only a serves is refused through b: the stream goes to b's own address, nothing else
    (no address in the request to steer it; a Host naming the host or a neighbour changes nothing)."""
    d, b = fwd["d"], fwd["b"]
    for host_header in (f"{d.host}:{d.port}", f"{ECHO_PORT}-{fwd['a']}.localhost", "127.0.0.1:22"):
        s, status, head, rest = upgrade(d, b, ECHO_PORT, headers={"Host": host_header})
        assert status == 502, (host_header, head)
        s.close()


def test_paused_sandbox_is_refused_unless_auto_resume(fwd):
    d = fwd["d"]
    sid = d.create()["id"]
    try:
        d.exec(sid, shell=f"exec nc -ll -p {ECHO_PORT} -e cat", background=True)
        assert host.wait_until(lambda: listening(d, sid, ECHO_PORT), 30)
        assert d.api("POST", f"/v1/sandboxes/{sid}/pause").status == 200
        s, status, head, rest = upgrade(d, sid, ECHO_PORT)
        assert status == 409, head
        assert error_of(s, head, rest)["code"] == "sandbox_paused"
        assert d.api("PATCH", f"/v1/sandboxes/{sid}", json={"auto_resume": True}).status == 200
        s, status, head, rest = upgrade(d, sid, ECHO_PORT)
        assert status == 101, head
        s.sendall(b"awake\n")
        assert recv_exactly(s, 6, rest) == b"awake\n"
        s.close()
        assert d.show(sid).json()["state"] == "running"
    finally:
        d.delete(sid)


def start_cli_forward(d, *args, key=None):
    e = clean_env({"SPACE_URL": d.url, "SPACE_API_KEY": key or d.admin_key})
    p = subprocess.Popen([d.s.space_bin, "forward", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=e, stdin=subprocess.DEVNULL)
    return p


def test_cli_forward_free_port_echo_and_http(fwd):
    d, a = fwd["d"], fwd["a"]
    p = start_cli_forward(d, a, f":{ECHO_PORT}", f"0:{HTTP_PORT}")
    try:
        lines = [p.stdout.readline().decode() for _ in range(2)]
        ports = []
        for line, remote in zip(lines, (ECHO_PORT, HTTP_PORT)):
            assert line.startswith("Forwarding from 127.0.0.1:") and line.rstrip().endswith(f"-> {remote}"), lines
            ports.append(int(line.split("127.0.0.1:")[1].split()[0]))
        with socket.create_connection(("127.0.0.1", ports[0]), timeout=30) as s:
            s.sendall(b"through the cli\n")
            assert recv_exactly(s, 16) == b"through the cli\n"
        r = e2e_http.request(f"http://127.0.0.1:{ports[1]}", "GET", "/index.html", key=None, timeout=30)
        assert r.status == 200 and b"hello-forward" in r.body, r
        # a connection the sandbox refuses is closed and said; the forward goes on
        p2 = start_cli_forward(d, fwd["b"], f"0:{ECHO_PORT}")
        try:
            port_b = int(p2.stdout.readline().decode().split("127.0.0.1:")[1].split()[0])
            with socket.create_connection(("127.0.0.1", port_b), timeout=30) as s:
                s.settimeout(30)
                assert s.recv(10) == b""
            assert p2.poll() is None
        finally:
            p2.send_signal(signal.SIGTERM)
            _, err = p2.communicate(timeout=30)
        assert "connection refused" in err.decode(), err
        assert p2.returncode == 0
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
    assert p.returncode == 0


def test_cli_forward_json_and_errors(fwd):
    d, a = fwd["d"], fwd["a"]
    e = clean_env({"SPACE_URL": d.url, "SPACE_API_KEY": d.admin_key})
    p = subprocess.Popen([d.s.space_bin, "--json", "forward", a, f"0:{ECHO_PORT}"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e, stdin=subprocess.DEVNULL)
    try:
        import json
        obj = json.loads(p.stdout.readline())
        assert obj["sandbox_id"] == a and obj["remote_port"] == ECHO_PORT and obj["local_port"] > 0, obj
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
    r = d.cli("forward", "zzzzzzzzzzzzzzzz", "8000")
    assert r.rc == 3 and "no sandbox" in r.err, r  # not found
    r = d.cli("forward", a, "8000", key=fwd["k2"])
    assert r.rc == 3, r  # another tenant's: not found
    for bad in ("0", "70000", "1:2:3", "x:80", "80:"):
        r = d.cli("forward", a, bad)
        assert r.rc == 2, (bad, r)
    r = d.cli("forward", a)
    assert r.rc == 2, r
    r = d.cli("forward", a, "8000", "--address", "not-an-address")
    assert r.rc == 2 and "--address" in r.err, r
    # a local port already taken: a clean error, nothing left listening
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = d.cli("forward", a, f"{port}:{ECHO_PORT}")
        assert r.rc != 0 and "cannot listen" in r.err, r
