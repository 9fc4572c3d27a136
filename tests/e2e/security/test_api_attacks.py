# SPDX-License-Identifier: MIT
"""Attacks on the API itself: oversized bodies and headers, slowloris, bad
JSON, invalid keys, and another tenant's key on every sandbox route (404,
indistinguishable from a sandbox that does not exist), the E2B surface
included."""

import json
import os
import re
import resource
import secrets
import socket
import threading
import time

import pytest

from e2e_daemon import assert_error_shape
import e2e_http
from attack_util import assert_spaced_healthy, run

MiB = 1024 * 1024
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def header_constant(name):
    with open(os.path.join(REPO, "src", "api", "http-server.h")) as f:
        m = re.search(r"#define\s+" + name + r"\s+(\d+)", f.read())
    assert m, f"{name} not found in http-server.h"
    return int(m.group(1))


def raw_request(spaced, data, timeout=30):
    """Sends bytes (ignoring a reset while sending: the server may answer
    early and close) and returns what the server answers."""
    host, port = e2e_http.split_url(spaced.url)
    s = socket.create_connection((host, port), timeout=timeout)
    out = b""
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            out += b
    finally:
        s.close()
    return out


def status_of(raw):
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", raw)
    return int(m.group(1)) if m else None


# ---- sizes ----

JSON_ROUTES = ["/v1/sandboxes", "/v1/keys", "exec", "move", "signal"]


@pytest.mark.parametrize("route", JSON_ROUTES)
def test_oversized_json_body(spaced, box, route):
    path = {"exec": f"/v1/sandboxes/{box}/exec", "move": f"/v1/sandboxes/{box}/files/move"}.get(route, route)
    if route == "signal":
        bg = spaced.exec(box, cmd=["sleep", "30"], background=True)
        path = f"/v1/sandboxes/{box}/exec/{bg.start['exec_id']}/signal"
    body = b'{"metadata":{"k":"' + b"x" * (2 * MiB) + b'"}}'
    r, sent, err = spaced.early("POST", path, iter([body[i:i + 65536] for i in range(0, len(body), 65536)]),
                                length=len(body), content_type="application/json")
    assert r is not None, f"no answer to a 2 MiB JSON body on {path} ({err})"
    assert_error_shape(r, 413, "payload_too_large")
    assert_spaced_healthy(spaced)
    if route == "signal":
        spaced.api("POST", path, json={"signal": "SIGKILL"})


@pytest.mark.parametrize("shape", ["one-64k-header", "many-headers", "64k-target"])
def test_oversized_head(spaced, shape):
    if shape == "one-64k-header":
        head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 * 1024) + b"\r\n\r\n"
    elif shape == "many-headers":
        head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1000)
                                                                 for i in range(64)) + b"\r\n"
    else:
        head = b"GET /healthz?" + b"q" * (64 * 1024) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    out = raw_request(spaced, head)
    st = status_of(out)
    want = (431,) if shape != "64k-target" else (414, 431, 400)
    assert st in want, f"answer to a {shape} request head: {out[:300]!r}"
    assert_spaced_healthy(spaced)


# ---- slowloris ----

class Slowloris(threading.Thread):
    """Sends a request head one byte per second; records when the server closed."""

    def __init__(self, spaced, interval=1.0):
        super().__init__(daemon=True)
        self.host, self.port = e2e_http.split_url(spaced.url)
        self.interval = interval
        self.closed_after = None
        self.answer = b""
        self.error = None
        self.sent = 0

    def run(self):
        data = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 200 + b"\r\n\r\n"
        t0 = time.monotonic()
        try:
            s = socket.create_connection((self.host, self.port), timeout=5)
        except OSError as e:
            self.error = e
            return
        s.settimeout(self.interval)
        try:
            for i in range(len(data)):
                try:
                    s.sendall(data[i:i + 1])
                    self.sent += 1
                except (BrokenPipeError, ConnectionResetError):
                    break
                try:
                    b = s.recv(4096)
                    self.answer += b
                    if not b:
                        break
                except socket.timeout:
                    continue
                except ConnectionResetError:
                    break
            self.closed_after = time.monotonic() - t0
        finally:
            s.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("clients", [1, 100])
def test_slowloris(spaced, clients):
    head_timeout = header_constant("HTTP_HEAD_TIMEOUT_MSEC") / 1000
    loris = [Slowloris(spaced) for _ in range(clients)]
    for l in loris:
        l.start()
    worst = 0.0
    served = 0
    end = time.monotonic() + head_timeout + 2
    while time.monotonic() < end:
        t0 = time.monotonic()
        # served while the slow clients hold their connections: every request answers within its
        # timeout (the latency itself is a figure: it measures the host's load as much as spaced)
        r = spaced.api("GET", "/healthz", key=None, timeout=10)
        assert r.status == 200, f"/healthz during slowloris: {r!r}"
        r = spaced.api("GET", "/v1/sandboxes", params={"limit": 1})
        assert r.status == 200, r
        worst = max(worst, time.monotonic() - t0)
        served += 1
        time.sleep(0.2)
    for l in loris:
        l.join(head_timeout + 30)
    for l in loris:
        assert l.error is None, f"could not connect: {l.error!r}"
        assert l.closed_after is not None, "a slowloris connection is still open"
        assert l.closed_after <= head_timeout + 5, \
            f"a client dribbling one byte a second was served for {l.closed_after:.0f}s " \
            f"(head timeout {head_timeout:.0f}s, {l.sent} bytes sent)"
        st = status_of(l.answer)
        assert st in (None, 408, 400), f"answer to a slowloris client: {l.answer[:200]!r}"
    assert served >= 1
    print(f"slowloris x{clients}: {served} rounds served, worst {worst:.2f}s")


@pytest.mark.timeout(180)
def test_slowloris_beyond_the_connection_cap(spaced):
    """One unauthenticated client holding more slow connections than the
    server's connection cap (HTTP_CONNECTIONS_MAX): everyone else must still
    be served (a per-client bound, not one global pool, decides who waits)."""
    cap = header_constant("HTTP_CONNECTIONS_MAX")
    head_timeout = header_constant("HTTP_HEAD_TIMEOUT_MSEC") / 1000
    n = cap + 76
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, n + 256), max(hard, n + 256)))
    host, port = e2e_http.split_url(spaced.url)
    socks = []
    refused = []
    try:
        for _ in range(n):
            s = socket.create_connection((host, port), timeout=5)
            s.setblocking(False)
            try:
                s.send(b"G")
            except OSError:
                pass
            socks.append(s)
        failures = []
        end = time.monotonic() + head_timeout + 2
        data = b"ET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 100
        i = 0
        while time.monotonic() < end:
            for s in socks:
                try:
                    s.send(data[i % len(data):i % len(data) + 1])
                except OSError:
                    pass
            i += 1
            t0 = time.monotonic()
            try:
                r = spaced.api("GET", "/healthz", key=None, timeout=10, validate=False)
                if r.status != 200:
                    failures.append(f"{r.status} {r.body[:100]!r}")
            except OSError as e:
                failures.append(repr(e))   # no answer within the request's timeout among them
            time.sleep(max(0.0, 1 - (time.monotonic() - t0)))
        # how many of ours the server held open
        for s in socks:
            try:
                b = s.recv(4096)
                if b.startswith(b"HTTP/1.1 503"):
                    refused.append(s)
            except BlockingIOError:
                pass
            except OSError:
                pass
    finally:
        for s in socks:
            s.close()
    assert not failures, (f"with {n} slow connections from one client (cap {cap}), other clients got: "
                          f"{sorted(set(failures))[:5]} ({len(failures)} failed requests; "
                          f"{len(refused)} of the slow connections were refused with 503)")
    assert_spaced_healthy(spaced)


# ---- bad JSON and bad keys ----

BAD_JSON = [b'{"cmd":', b"{} x", b"{'a':1}", b'{"a":"\xff"}', b"[" * 50000, b'{"a":1,}', b"\x00"]


@pytest.mark.parametrize("i", range(len(BAD_JSON)))
def test_bad_json_every_sandbox_route(spaced, box, i):
    for path in (f"/v1/sandboxes/{box}/exec", f"/v1/sandboxes/{box}/files/move", "/v1/sandboxes", "/v1/keys"):
        r = spaced.api("POST", path, raw_json=BAD_JSON[i])
        assert_error_shape(r, 400, "invalid_json")
    assert run(spaced, box, cmd=["true"]).code == 0


BAD_AUTH = [None, "Bearer ", "Bearer sk_" + "0" * 40, "Bearer sk_\x7f", "bearer", "Basic YTpi",
            "Bearer " + "k" * 8000, "Bearer sk_a\tb", "Bearer sk_a sk_b"]


@pytest.mark.parametrize("auth", BAD_AUTH, ids=[f"auth{i}" for i in range(len(BAD_AUTH))])
def test_invalid_keys(spaced, box, auth):
    for method, path in [("GET", f"/v1/sandboxes/{box}"), ("POST", f"/v1/sandboxes/{box}/exec"),
                         ("GET", f"/v1/sandboxes/{box}/files?path=/etc/hostname"), ("GET", "/v1/keys"),
                         ("DELETE", f"/v1/sandboxes/{box}")]:
        headers = {"Authorization": auth}
        try:
            r = spaced.api(method, path, key=None, headers=headers, json={"cmd": ["true"]} if method == "POST" else None)
        except (ValueError, OSError) as e:          # the client library refuses some header values
            pytest.skip(f"cannot send this header: {e}")
        st = r.status
        assert st in (400, 401, 431), f"{method} {path} with Authorization {auth!r:.40}: {r!r}"
    assert spaced.show(box).json()["state"] == "running"


def test_deleted_key_is_dead(spaced, box):
    r = spaced.api("POST", "/v1/keys", json={"name": "short-lived"})
    assert r.status == 201, r
    k = r.json()
    assert spaced.api("GET", f"/v1/sandboxes/{box}", key=k["key"]).status == 200
    assert spaced.api("DELETE", f"/v1/keys/{k['id']}").status == 204
    r = spaced.api("GET", f"/v1/sandboxes/{box}", key=k["key"])
    assert_error_shape(r, 401)


# ---- another tenant ----

BODIES = {
    ("POST", "/v1/sandboxes/{id}/exec"): {"cmd": ["sh", "-c", "echo pwned > /tmp/pwned"]},
    ("POST", "/v1/sandboxes/{id}/exec/{exec_id}/stdin"): None,
    ("POST", "/v1/sandboxes/{id}/exec/{exec_id}/signal"): {"signal": "SIGKILL"},
    ("POST", "/v1/sandboxes/{id}/exec/{exec_id}/resize"): {"rows": 24, "cols": 80},
    ("POST", "/v1/sandboxes/{id}/files/move"): {"from": "/etc/hostname", "to": "/tmp/moved"},
    ("POST", "/v1/sandboxes/{id}/branch"): {"count": 1},
    ("POST", "/v1/sandboxes/{id}/restore"): {"checkpoint": "{checkpoint}"},
    ("POST", "/v1/sandboxes/{id}/checkpoints"): {},
    ("PATCH", "/v1/sandboxes/{id}"): {"metadata": {"owned": "yes"}},
    ("PUT", "/v1/sandboxes/{id}/policy"): {"allow": ["pwned.example.org"]},
}
FALLBACK_ROUTES = [("GET", "/v1/sandboxes/{id}"), ("DELETE", "/v1/sandboxes/{id}"),
                   ("POST", "/v1/sandboxes/{id}/exec"), ("GET", "/v1/sandboxes/{id}/exec"),
                   ("POST", "/v1/sandboxes/{id}/exec/{exec_id}/stdin"),
                   ("POST", "/v1/sandboxes/{id}/exec/{exec_id}/signal"),
                   ("POST", "/v1/sandboxes/{id}/exec/{exec_id}/resize"),
                   ("GET", "/v1/sandboxes/{id}/files"), ("PUT", "/v1/sandboxes/{id}/files"),
                   ("DELETE", "/v1/sandboxes/{id}/files"), ("POST", "/v1/sandboxes/{id}/files/move"),
                   ("POST", "/v1/sandboxes/{id}/pause"), ("POST", "/v1/sandboxes/{id}/resume"),
                   ("POST", "/v1/sandboxes/{id}/suspend"), ("POST", "/v1/sandboxes/{id}/checkpoints"),
                   ("GET", "/v1/sandboxes/{id}/checkpoints"), ("POST", "/v1/sandboxes/{id}/restore"),
                   ("POST", "/v1/sandboxes/{id}/branch")]


def sandbox_routes(spaced):
    """Every (method, path template) of the spec that names a sandbox, plus the
    ones the design names (in case the spec lags behind)."""
    routes = set(FALLBACK_ROUTES)
    spec = spaced.s.spec
    if spec is not None:
        for template, item in (spec.doc.get("paths") or {}).items():
            if not template.startswith("/v1/sandboxes/{id}"):
                continue
            for m in item:
                if m in ("get", "put", "post", "delete", "patch"):
                    routes.add((m.upper(), template))
    return sorted(routes)


def attack_request(spaced, key, method, template, sid, exec_id, checkpoint):
    path = template.replace("{id}", sid).replace("{exec_id}", exec_id).replace("{checkpoint}", checkpoint)
    params = None
    if template.endswith("/files"):
        params = {"path": "/etc/hostname"}
    body = BODIES.get((method, template))
    if body is not None:
        body = json.loads(json.dumps(body).replace("{checkpoint}", checkpoint))
    data = None
    if (method == "PUT" and template.endswith("/files")) or template.endswith("/stdin"):
        data = b"pwned\n"
        body = None
    return spaced.api(method, path, key=key, params=params, json=body if data is None else None, data=data,
                      validate=False)


def normalised_error(r, sid, ghost):
    try:
        v = r.json()
    except AssertionError:
        return r.status, r.body[:200]
    e = v.get("error", {}) if isinstance(v, dict) else {}
    msg = str(e.get("message", "")).replace(sid, "ID").replace(ghost, "ID")
    return r.status, e.get("code"), msg


def test_cross_tenant_every_route(spaced, box, attacker):
    key, _, tenant = attacker
    marker = "victim-" + secrets.token_hex(8)
    run(spaced, box, shell=f"echo {marker} > /tmp/victim; rm -f /tmp/pwned /tmp/moved")
    bg = spaced.exec(box, cmd=["sleep", "120"], background=True, stdin=True)
    assert bg.response is None, bg
    exec_id = bg.start["exec_id"]
    ck = spaced.api("POST", f"/v1/sandboxes/{box}/checkpoints", json={}, validate=False)
    checkpoint = ck.json().get("id", "ckpt-none") if ck.status in (200, 201) else "ckpt-none"
    ghost = "zz" + secrets.token_hex(7)
    problems = []
    try:
        for method, template in sandbox_routes(spaced):
            r = attack_request(spaced, key, method, template, box, exec_id, checkpoint)
            g = attack_request(spaced, key, method, template, ghost, exec_id, checkpoint)
            if r.status != 404:
                problems.append(f"{method} {template} on another tenant's sandbox → {r.status} {r.body[:200]!r}")
                continue
            if normalised_error(r, box, ghost) != normalised_error(g, box, ghost):
                problems.append(f"{method} {template}: another tenant's sandbox answers {r.status} {r.body[:200]!r}, "
                                f"a missing one {g.status} {g.body[:200]!r}")
        listed = spaced.api("GET", "/v1/sandboxes", key=key).json()["sandboxes"]
        if any(s["id"] == box for s in listed):
            problems.append("the other tenant's listing shows the sandbox")
        ev = spaced.api("GET", "/v1/events", key=key, params={"sandbox": box}, validate=False)
        if ev.status == 200 and ev.json().get("events"):
            problems.append(f"the other tenant reads the sandbox's events: {ev.json()['events'][:2]}")
        keys = spaced.api("GET", "/v1/keys", key=key).json()["keys"]
        if any(k.get("tenant") not in (tenant,) for k in keys):
            problems.append(f"the other tenant lists keys of other tenants: {keys}")
    finally:
        spaced.api("POST", f"/v1/sandboxes/{box}/exec/{exec_id}/signal", json={"signal": "SIGKILL"})
        if checkpoint != "ckpt-none":
            spaced.api("DELETE", f"/v1/sandboxes/{box}/checkpoints/{checkpoint}", validate=False)
    assert not problems, "cross-tenant access:\n  " + "\n  ".join(problems)
    # nothing happened to the victim
    v = spaced.show(box).json()
    assert v["state"] == "running" and v.get("metadata", {}).get("owned") is None, v
    assert "pwned" not in json.dumps(v.get("network")), v
    out = run(spaced, box, shell="cat /tmp/victim; ls /tmp/pwned /tmp/moved 2>&1; cat /etc/hostname").out
    assert marker in out and "pwned" not in out.replace("/tmp/pwned", ""), out


E2B_ROUTES = [("GET", "/sandboxes/{id}"), ("DELETE", "/sandboxes/{id}"), ("POST", "/sandboxes/{id}/connect"),
              ("POST", "/sandboxes/{id}/resume"), ("POST", "/sandboxes/{id}/pause"),
              ("POST", "/sandboxes/{id}/timeout"), ("POST", "/sandboxes/{id}/refreshes"),
              ("GET", "/sandboxes/{id}/metrics"), ("POST", "/v2/sandboxes/{id}/connect")]


def test_cross_tenant_e2b_surface(spaced, box, attacker):
    """The E2B control plane with another tenant's X-API-KEY: 404 like a
    missing sandbox, and never the sandbox's envd access token."""
    key, _, _ = attacker
    ghost = "zz" + secrets.token_hex(7)
    problems = []
    for method, template in E2B_ROUTES:
        body = {"timeout": 30} if method == "POST" else None
        res = []
        for sid in (box, ghost):
            r = spaced.api(method, template.replace("{id}", sid), key=None, headers={"X-API-KEY": key},
                           json=body, validate=False)
            res.append(r)
        r, g = res
        if b"envdAccessToken" in r.body or b"accessToken" in r.body:
            problems.append(f"{method} {template} gave another tenant a token: {r.body[:300]!r}")
        if r.status != g.status or r.body.replace(box.encode(), b"ID") != g.body.replace(ghost.encode(), b"ID"):
            problems.append(f"{method} {template}: victim → {r.status} {r.body[:200]!r}; "
                            f"missing → {g.status} {g.body[:200]!r}")
        elif r.status not in (404, 501, 405):
            problems.append(f"{method} {template} → {r.status} {r.body[:200]!r}")
    assert not problems, "cross-tenant access on the E2B surface:\n  " + "\n  ".join(problems)
    assert spaced.show(box).json()["state"] == "running"


def test_envd_token_is_per_sandbox(spaced, box, attacker):
    """envd requests need the sandbox's own access token: none, a wrong one,
    or another sandbox's token (the attacker's own) gets nothing."""
    key, _, _ = attacker
    r = spaced.api("POST", "/sandboxes", key=None, headers={"X-API-KEY": key}, json={"templateID": "base"},
                   validate=False)
    own_token = None
    own_id = None
    if r.status in (200, 201):
        own_id = r.json().get("sandboxID")
        own_token = r.json().get("envdAccessToken")
    try:
        tokens = [None, "", "0" * 64, "x" * 64] + ([own_token] if own_token else [])
        for t in tokens:
            headers = {"E2b-Sandbox-Id": box}
            if t is not None:
                headers["X-Access-Token"] = t
            for method, path, params in [("GET", "/files", {"path": "/etc/hostname"}), ("GET", "/health", None)]:
                r = spaced.api(method, path, key=None, headers=headers, params=params, validate=False)
                assert r.status in (401, 403), f"envd {path} with token {t!r:.20}: {r!r}"
                assert b"space" not in r.body or r.status != 200, r
        r = spaced.api("POST", "/filesystem.Filesystem/ListDir", key=None,
                       headers={"E2b-Sandbox-Id": box, "X-Access-Token": own_token or "0" * 64,
                                "Content-Type": "application/json"},
                       raw_json=b'{"path":"/"}', validate=False)
        assert r.status in (401, 403), f"Connect ListDir with a foreign token: {r!r}"
    finally:
        if own_id:
            spaced.api("DELETE", f"/sandboxes/{own_id}", key=None, headers={"X-API-KEY": key}, validate=False)
            spaced.known_alive.discard(own_id)


def test_envd_files_stay_inside(spaced, attacker, host_marker):
    """envd's /files (E2B surface) with a sandbox's own token: '..', symlinks
    and /proc paths resolve inside that sandbox, never on the host."""
    key, _, _ = attacker
    r = spaced.api("POST", "/sandboxes", key=None, headers={"X-API-KEY": key}, json={"templateID": "base"},
                   validate=False)
    assert r.status in (200, 201), f"E2B create: {r!r}"
    sid, token = r.json()["sandboxID"], r.json()["envdAccessToken"]
    spaced.known_alive.add(sid)
    try:
        m = host_marker.path
        run(spaced, sid, key=key, shell=f"ln -sfn / /tmp/rootlink; ln -sfn {m} /tmp/hostlink")
        own = run(spaced, sid, key=key, cmd=["cat", "/etc/hostname"]).stdout
        headers = {"E2b-Sandbox-Id": sid, "X-Access-Token": token}
        for path in ("/tmp/../etc/hostname", "../../../../etc/hostname", "/tmp/rootlink/etc/hostname",
                     "/proc/1/root/etc/hostname", "/proc/self/root/../etc/hostname"):
            g = spaced.api("GET", "/files", key=None, headers=headers, params={"path": path}, validate=False)
            assert g.status != 200 or g.body == own, f"envd GET {path}: {g!r} (the sandbox's is {own!r})"
        for path in (m, "/tmp/hostlink", f"/tmp/rootlink{m}", f"/proc/1/root{m}", f"/tmp/../..{m}"):
            g = spaced.api("GET", "/files", key=None, headers=headers, params={"path": path}, validate=False)
            assert host_marker.content.encode() not in g.body, f"envd GET {path} returned the host's file"
            assert g.status != 200, f"envd GET {path} (exists only on the host): {g!r}"
    finally:
        spaced.api("DELETE", f"/sandboxes/{sid}", key=None, headers={"X-API-KEY": key}, validate=False)
        spaced.known_alive.discard(sid)
