# SPDX-License-Identifier: MIT
"""Lifecycle webhooks: signed deliveries in order to a real receiver, retries
and a receiver that is down, tenant isolation, bad input, the E2B form, and
the SSRF guard (loopback, metadata, a name resolving to loopback, a redirect)
with the default config."""

import base64
import hashlib
import hmac
import http.server
import json
import socket
import threading
import time
import uuid

import pytest

import e2e_host as host
import e2e_residue as residue
from e2e_daemon import assert_error_shape

WAIT_S = 90


class Receiver:
    """An HTTP receiver on 127.0.0.1: records every POST; fail_next answers
    500 that many times first; redirect answers 302 to that URL."""

    def __init__(self):
        self.got = []
        self.times = []               # time.monotonic() of each recorded delivery
        self.attempts = 0
        self.fail_next = 0
        self.redirect = None
        self.lock = threading.Lock()
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.srv = None
        self.start()

    def start(self):
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with rec.lock:
                    rec.attempts += 1
                    if rec.redirect:
                        self.send_response(302)
                        self.send_header("Location", rec.redirect)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    if rec.fail_next > 0:
                        rec.fail_next -= 1
                        self.send_response(500)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    rec.got.append((dict(self.headers), body))
                    rec.times.append(time.monotonic())
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        if self.srv:
            self.srv.shutdown()
            self.srv.server_close()
            self.srv = None

    def events(self):
        with self.lock:
            return [json.loads(b) for _, b in self.got]

    def deliveries(self):
        with self.lock:
            return list(self.got)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def d(e2e_session, request):
    """A spaced that lets webhooks call loopback (its receivers are there)."""
    dd = e2e_session.new_daemon(extra_args=["--webhook-allow-private=1"])
    dd.start()
    yield dd
    residue.finish_daemon(dd, request)


def new_key(d):
    r = d.api("POST", "/v1/keys", json={"name": "webhooks", "tenant": "t" + uuid.uuid4().hex[:12]})
    assert r.status == 201, r
    return r.json()["key"]


def create_webhook(d, key, url, status=201, **body):
    r = d.api("POST", "/v1/webhooks", json=dict(body, url=url), key=key)
    assert r.status == status, r
    return r.json()


def verify(secret, headers, body):
    """The receiver's checks: both signatures."""
    ts = headers["X-Space-Timestamp"]
    want = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert headers["X-Space-Signature"] == "sha256=" + want, headers
    e2b = base64.b64encode(hashlib.sha256(secret.encode() + body).digest()).decode().rstrip("=")
    assert headers["e2b-signature"] == e2b, headers
    assert headers["e2b-signature-version"] == "v1"
    assert headers["X-Space-Webhook-Id"] == headers["e2b-webhook-id"]


def of_sandbox(rec, sid):
    return [e for e in rec.events() if e.get("sandbox_id") == sid]


LIFECYCLE = ["sandbox.created", "sandbox.paused", "sandbox.resumed", "sandbox.deleted"]


def run_lifecycle(d, key):
    sid = d.create(key=key)["id"]
    for verb in ("pause", "resume"):
        r = d.api("POST", f"/v1/sandboxes/{sid}/{verb}", key=key)
        assert r.status == 200, r
    d.delete(sid, key=key)
    return sid


def wait_types(rec, sid, want):
    ok = host.wait_until(lambda: [e["type"] for e in of_sandbox(rec, sid)] == want, WAIT_S, 0.2)
    assert ok, [e["type"] for e in of_sandbox(rec, sid)]


def test_lifecycle_events_arrive_in_order_signed(d, receiver):
    key = new_key(d)
    wh = create_webhook(d, key, receiver.url, events=LIFECYCLE)
    assert wh["id"].startswith("wh_") and wh["secret"].startswith("whsec_"), wh
    assert wh["enabled"] and wh["events"] == LIFECYCLE
    # the secret is shown once
    assert "secret" not in d.api("GET", f"/v1/webhooks/{wh['id']}", key=key).json()
    listed = d.api("GET", "/v1/webhooks", key=key).json()["webhooks"]
    assert [w["id"] for w in listed] == [wh["id"]] and "secret" not in listed[0]

    sid = d.create(key=key)["id"]
    for verb in ("pause", "resume"):
        r = d.api("POST", f"/v1/sandboxes/{sid}/{verb}", key=key)
        assert r.status == 200, r
    r = d.api("DELETE", f"/v1/sandboxes/{sid}", key=key, timeout=180)
    assert r.status == 200, r
    deleted = time.monotonic()
    d.known_alive.discard(sid)
    wait_types(receiver, sid, LIFECYCLE)
    # a figure, not a bound: the controller polls every second
    d.s.notes.append(f"webhook delivery after the event (role all, loopback receiver): "
                     f"{(receiver.times[-1] - deleted) * 1000:.0f} ms")
    evs = of_sandbox(receiver, sid)
    assert [int(e["id"]) for e in evs] == sorted(int(e["id"]) for e in evs)
    assert [e["e2b_type"] for e in evs] == ["sandbox.lifecycle.created", "sandbox.lifecycle.paused",
                                            "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"]
    for hdrs, body in receiver.deliveries():
        verify(wh["secret"], hdrs, body)
        assert hdrs["Content-Type"] == "application/json"
    # a tampered body does not verify
    hdrs, body = receiver.deliveries()[0]
    with pytest.raises(AssertionError):
        verify(wh["secret"], hdrs, body + b" ")
    state = d.api("GET", f"/v1/webhooks/{wh['id']}", key=key).json()["delivery"]
    assert state["failures"] == 0 and state["last_error"] == ""
    assert state["last_event_seq"] >= int(evs[-1]["id"])


def test_a_failing_receiver_gets_every_event_in_order(d, receiver):
    key = new_key(d)
    wh = create_webhook(d, key, receiver.url, events=["sandbox.*"])
    receiver.fail_next = 3
    sid = run_lifecycle(d, key)
    want = ["sandbox.created", "sandbox.paused", "sandbox.resumed", "sandbox.deleted"]
    ok = host.wait_until(lambda: [e["type"] for e in of_sandbox(receiver, sid) if e["type"] in want] == want,
                         WAIT_S, 0.2)
    assert ok, receiver.events()
    assert receiver.attempts >= len(receiver.got) + 3
    ids = [int(e["id"]) for e in receiver.events()]
    assert ids == sorted(ids) and len(ids) == len(set(ids)), ids
    for hdrs, body in receiver.deliveries():
        verify(wh["secret"], hdrs, body)


def test_a_receiver_down_gets_the_events_later(d, receiver):
    key = new_key(d)
    wh = create_webhook(d, key, receiver.url, events=LIFECYCLE)
    receiver.stop()
    sid = run_lifecycle(d, key)
    ok = host.wait_until(lambda: d.api("GET", f"/v1/webhooks/{wh['id']}", key=key).json()["delivery"]["failures"]
                         >= 1, WAIT_S, 0.2)
    assert ok
    state = d.api("GET", f"/v1/webhooks/{wh['id']}", key=key).json()["delivery"]
    assert state["last_error"] and state["next_attempt_at"] and state["failing_since"], state
    receiver.start()
    wait_types(receiver, sid, LIFECYCLE)


def test_tenant_isolation(d, receiver):
    a, b = new_key(d), new_key(d)
    rb = Receiver()
    try:
        create_webhook(d, a, receiver.url, events=["*"])
        whb = create_webhook(d, b, rb.url, events=["*"])
        # another tenant's webhook is not there for a
        for m, p in (("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/test")):
            r = d.api(m, f"/v1/webhooks/{whb['id']}{p}", key=a, json={"enabled": False} if m == "PATCH" else None)
            assert_error_shape(r, 404, "not_found")
        assert d.api("GET", "/v1/webhooks", key=a).json()["webhooks"][0]["id"] != whb["id"]
        # an admin key manages its own tenant's webhooks, not every tenant's
        assert_error_shape(d.api("GET", f"/v1/webhooks/{whb['id']}"), 404, "not_found")
        assert whb["id"] not in [w["id"] for w in d.api("GET", "/v1/webhooks").json()["webhooks"]]
        sa = run_lifecycle(d, a)
        sb = d.create(key=b)["id"]
        d.delete(sb, key=b)
        wait_types(receiver, sa, LIFECYCLE)
        ok = host.wait_until(lambda: "sandbox.deleted" in [e["type"] for e in of_sandbox(rb, sb)], WAIT_S, 0.2)
        assert ok, rb.events()
        # b's are after a's: had any of a's reached b, they would be there by now
        assert not of_sandbox(rb, sa), rb.events()
        assert not [e for e in receiver.events() if e.get("sandbox_id") == sb]
    finally:
        rb.stop()


def test_patch_delete_and_test_delivery(d, receiver):
    key = new_key(d)
    wh = create_webhook(d, key, receiver.url, secret="my-own-secret-0123", name="ci")
    assert wh["secret"] == "my-own-secret-0123" and wh["name"] == "ci"
    r = d.api("POST", f"/v1/webhooks/{wh['id']}/test", key=key)
    assert r.status == 200 and r.json() == {"delivered": True}, r
    hdrs, body = receiver.deliveries()[-1]
    verify("my-own-secret-0123", hdrs, body)
    assert json.loads(body)["type"] == "webhook.test"
    r = d.api("PATCH", f"/v1/webhooks/{wh['id']}", key=key, json={"enabled": False, "events": ["sandbox.created"]})
    assert r.status == 200 and r.json()["enabled"] is False and r.json()["events"] == ["sandbox.created"], r
    r = d.api("DELETE", f"/v1/webhooks/{wh['id']}", key=key)
    assert r.status == 204, r
    assert_error_shape(d.api("GET", f"/v1/webhooks/{wh['id']}", key=key), 404, "not_found")
    assert_error_shape(d.api("DELETE", f"/v1/webhooks/{wh['id']}", key=key), 404, "not_found")
    assert_error_shape(d.api("GET", "/v1/webhooks/wh_nope", key=key), 404, "not_found")


def test_a_redirect_is_not_followed(d, receiver):
    key = new_key(d)
    target = Receiver()
    try:
        receiver.redirect = target.url
        wh = create_webhook(d, key, receiver.url)
        r = d.api("POST", f"/v1/webhooks/{wh['id']}/test", key=key)
        assert_error_shape(r, 502)
        assert "redirect" in r.json()["error"]["message"], r
        assert receiver.attempts == 1 and target.attempts == 0
    finally:
        target.stop()


BAD = [
    ({"url": "ftp://example.com/"}, "http"),
    ({"url": "file:///etc/passwd"}, "http"),
    ({"url": "example.com"}, "http"),
    ({"url": "http://"}, "host"),
    ({"url": "http://user:pw@127.0.0.1/"}, "user"),
    ({"url": "http://127.0.0.1:0/"}, "port"),
    ({"url": "http://127.0.0.1/#x"}, "fragment"),
    ({"url": "http://127.0.0.1/" + "x" * 2100}, "longer"),
    ({"url": "http://no-such-host.invalid/"}, "resolve"),
    ({"url": 5}, "url"),
    ({}, "url is required"),
    ({"url": "http://127.0.0.1/", "events": []}, "events"),
    ({"url": "http://127.0.0.1/", "events": ["sandbox.nope"]}, "events[0]"),
    ({"url": "http://127.0.0.1/", "events": ["key.*"]}, "events[0]"),
    ({"url": "http://127.0.0.1/", "events": "sandbox.*"}, "events"),
    ({"url": "http://127.0.0.1/", "secret": "short"}, "secret"),
    ({"url": "http://127.0.0.1/", "secret": "has spaces in it, too"}, "secret"),
    ({"url": "http://127.0.0.1/", "enabled": "yes"}, "enabled"),
    ({"url": "http://127.0.0.1/", "bogus": 1}, "bogus"),
]


@pytest.mark.parametrize("body,words", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input(d, body, words):
    r = d.api("POST", "/v1/webhooks", json=body)
    assert r.status == 400, r
    assert_error_shape(r, 400)
    assert words in r.json()["error"]["message"], r.json()


def test_bad_patch(d, receiver):
    key = new_key(d)
    wh = create_webhook(d, key, receiver.url)
    for body in ({}, {"url": "gopher://x/"}, {"events": ["nope"]}, {"secret": "0123456789abcdefgh"}):
        r = d.api("PATCH", f"/v1/webhooks/{wh['id']}", key=key, json=body)
        assert_error_shape(r, 400)


def test_e2b_form(d, receiver):
    key = new_key(d)
    h = {"X-API-KEY": key}
    r = d.api("POST", "/events/webhooks", key=None, headers=h, validate=False,
              json={"name": "e2b", "url": receiver.url, "enabled": True,
                    "events": ["sandbox.lifecycle.created", "sandbox.lifecycle.killed"],
                    "signatureSecret": "secret-for-event-signature"})
    assert r.status == 201, r
    wh = r.json()
    assert wh["events"] == ["sandbox.lifecycle.created", "sandbox.lifecycle.killed"] and "createdAt" in wh, wh
    r = d.api("GET", "/events/webhooks", key=None, headers=h, validate=False)
    assert r.status == 200 and [w["id"] for w in r.json()] == [wh["id"]], r
    r = d.api("PATCH", f"/events/webhooks/{wh['id']}", key=None, headers=h, validate=False, json={"enabled": True})
    assert r.status == 200, r
    # it is the same webhook in the space form
    assert d.api("GET", f"/v1/webhooks/{wh['id']}", key=key).json()["name"] == "e2b"
    sid = d.create(key=key, metadata={"suite": "webhooks"})["id"]
    d.delete(sid, key=key)
    want = ["sandbox.lifecycle.created", "sandbox.lifecycle.killed"]
    ok = host.wait_until(lambda: [e["type"] for e in receiver.events() if e.get("sandboxId") == sid] == want,
                         WAIT_S, 0.2)
    assert ok, receiver.events()
    created, killed = [e for e in receiver.events() if e.get("sandboxId") == sid]
    # E2B's shape
    assert created["version"] == "v2" and created["sandboxTemplateId"] == "base", created
    assert created["eventData"]["sandbox_metadata"] == {"suite": "webhooks"}, created
    assert killed["eventData"]["execution"]["memory_mb"] > 0, killed
    for hdrs, body in receiver.deliveries():
        verify("secret-for-event-signature", hdrs, body)
    r = d.api("DELETE", f"/events/webhooks/{wh['id']}", key=None, headers=h, validate=False)
    assert r.status == 204, r


# ---- SSRF: the default config (webhook_allow_private=0) ----

SSRF = [
    ("http://127.0.0.1:7070/", "loopback"),
    ("http://127.9.9.9/", "loopback"),
    ("http://localhost:7070/", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://169.254.1.1/", "link-local"),
    ("http://[::1]:7070/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:169.254.169.254]/", "metadata"),
    ("http://0.0.0.0:7070/", "unspecified"),
    ("http://10.200.0.1/", "private"),
    ("http://192.168.1.1/", "private"),
    ("https://127.0.0.1/", "loopback"),
]


@pytest.mark.parametrize("url,why", SSRF, ids=[u for u, _ in SSRF])
def test_ssrf_refused_by_default(spaced, url, why):
    r = spaced.api("POST", "/v1/webhooks", json={"url": url})
    assert_error_shape(r, 400)
    msg = r.json()["error"]["message"]
    assert why in msg and "refused" in msg, msg


def test_ssrf_patch_refused_by_default(spaced):
    # no webhook can be made to point at loopback afterwards either
    r = spaced.api("POST", "/v1/webhooks", json={"url": "http://localhost/"})
    assert_error_shape(r, 400)
    assert spaced.api("GET", "/v1/webhooks").json()["webhooks"] == []


def test_https_certificate_is_verified(d, tmp_path):
    """A TLS receiver whose certificate no CA signed is not a receiver: the
    delivery fails (no insecure fallback)."""
    import ssl
    import subprocess

    cert, keyf = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(keyf),
                    "-out", str(cert)], check=True, capture_output=True)
    rec = Receiver()
    rec.stop()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(keyf))
    rec.start()
    rec.srv.socket = ctx.wrap_socket(rec.srv.socket, server_side=True)
    try:
        key = new_key(d)
        wh = create_webhook(d, key, f"https://127.0.0.1:{rec.port}/hook")
        r = d.api("POST", f"/v1/webhooks/{wh['id']}/test", key=key)
        assert_error_shape(r, 502)
        assert "certificate" in r.json()["error"]["message"], r
        assert rec.got == []
    finally:
        rec.stop()


def test_cli(d, receiver):
    """space webhook: create (the secret printed once), test, ls, disable/enable, show, rm; bad input."""
    key = new_key(d)
    r = d.cli("webhook", "create", receiver.url, "--event", "sandbox.*", "--name", "cli", key=key)
    assert r.rc == 0, r
    wid, secret_line = r.out.splitlines()[:2]
    assert wid.startswith("wh_") and secret_line.startswith("secret: "), r.out
    secret = secret_line.split()[1]
    assert d.cli("webhook", "test", wid, key=key).rc == 0
    hdrs, body = receiver.deliveries()[-1]
    verify(secret, hdrs, body)
    r = d.cli("webhook", "ls", key=key)
    assert r.rc == 0 and wid in r.out and receiver.url in r.out and secret not in r.out, r
    assert d.cli("webhook", "disable", wid, key=key).rc == 0
    assert d.api("GET", f"/v1/webhooks/{wid}", key=key).json()["enabled"] is False
    assert d.cli("webhook", "enable", wid, key=key).rc == 0
    r = d.cli("--json", "webhook", "show", wid, key=key)
    assert r.rc == 0 and json.loads(r.out)["enabled"] is True and "secret" not in json.loads(r.out), r
    assert d.cli("webhook", "show", wid, key=new_key(d)).rc == 3  # another tenant's: not found
    r = d.cli("webhook", "create", "ftp://x/", key=key)
    assert r.rc == 1 and "http://" in r.err, r  # the server's 400: a failure, not a usage error
    assert d.cli("webhook", "create", key=key).rc == 2
    assert d.cli("webhook", "rm", wid, key=key).rc == 0
    assert d.cli("webhook", "show", wid, key=key).rc == 3


def test_secrets_are_sealed_at_rest(d, receiver):
    """The store holds a webhook's secret sealed under the master key (never
    in clear, never returned after the create); a row stored in clear (from
    before sealing) is sealed when spaced starts and still signs."""
    import os
    import sqlite3
    key = new_key(d)
    secret = "clear-secret-" + uuid.uuid4().hex
    wh = create_webhook(d, key, receiver.url, secret=secret)
    for path in (f"/v1/webhooks/{wh['id']}", "/v1/webhooks"):
        r = d.api("GET", path, key=key)
        assert r.status == 200 and secret.encode() not in r.body, r
    db = os.path.join(d.state_dir, "space.db")
    if not os.path.exists(db):
        pytest.skip("the store is not SQLite here: the sealing of existing rows is checked by the unit tests")

    def sql(query, *args):
        conn = sqlite3.connect(db, timeout=30)
        try:
            with conn:
                row = conn.execute(query, args).fetchone()
            return row[0] if row else None
        finally:
            conn.close()

    def stored():
        return sql("SELECT secret FROM webhooks WHERE id = ?", wh["id"])

    assert stored().startswith("sealed1:") and secret not in stored()
    for f in os.listdir(d.state_dir):
        if f.startswith("space.db"):
            with open(os.path.join(d.state_dir, f), "rb") as fh:
                assert secret.encode() not in fh.read(), f
    # a row from before sealing: in clear until the next start seals it
    d.stop()
    sql("UPDATE webhooks SET secret = ? WHERE id = ?", secret, wh["id"])
    d.start()
    assert stored().startswith("sealed1:") and secret not in stored()
    assert "Sealed 1 webhook secrets stored in clear" in d.log_text()
    r = d.api("POST", f"/v1/webhooks/{wh['id']}/test", key=key)
    assert r.status == 200 and r.json() == {"delivered": True}, r
    hdrs, body = receiver.deliveries()[-1]
    verify(secret, hdrs, body)
    # a sealed value copied onto another webhook's row does not open there
    other = create_webhook(d, key, receiver.url)
    sql("UPDATE webhooks SET secret = ? WHERE id = ?", stored(), other["id"])
    r = d.api("POST", f"/v1/webhooks/{other['id']}/test", key=key)
    assert r.status == 500 and "does not open" in r.json()["error"]["message"], r
    for x in (wh, other):
        assert d.api("DELETE", f"/v1/webhooks/{x['id']}", key=key).status == 204
