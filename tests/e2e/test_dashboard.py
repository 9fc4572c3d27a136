# SPDX-License-Identifier: MIT
"""The web dashboard (/ui): its files over plain HTTP (types, security
headers, no traversal, 404s), and the pages in Debian's headless chromium
driven by playwright-core (tests/e2e/dashboard, pinned by package-lock.json):
a wrong key, the first load (measured), a tenant creating a sandbox, using
its terminal and files and deleting it, and what admin and non-admin keys
see. Screenshots go to <build>/test-artifacts/dashboard/."""

import json
import os
import shutil
import socket
import subprocess
import uuid

import pytest

import e2e_http
from e2e_daemon import clean_env

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER_DIR = os.path.join(HERE, "dashboard")
CHROMIUM = "/usr/bin/chromium"
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "xterm.mjs": "text/javascript; charset=utf-8",
    "xterm.css": "text/css; charset=utf-8",
    "addon-fit.mjs": "text/javascript; charset=utf-8",
    "third-party-licenses.txt": "text/plain; charset=utf-8",
}


def get(spaced, target, method="GET", headers=None):
    return e2e_http.request(spaced.url, method, target, headers=headers)


def raw(spaced, target):
    """The request line as given (http.client would not send some of these)."""
    host, port = e2e_http.split_url(spaced.url)
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head.decode(errors="replace"), body


def check_headers(r):
    csp = r.headers.get("content-security-policy", "")
    directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in csp.split(";") if d.strip())
    assert directives.get("default-src") == "'none'", csp
    assert directives.get("script-src") == "'self'", csp    # no inline scripts, no eval
    assert directives.get("connect-src") == "'self'", csp
    assert directives.get("frame-ancestors") == "'none'", csp
    assert r.headers.get("x-content-type-options") == "nosniff"
    assert r.headers.get("x-frame-options") == "DENY"
    assert "set-cookie" not in r.headers


def test_files_types_and_headers(spaced):
    for target in ("/ui", "/ui/", "/ui/index.html", "/ui/?x=1"):
        r = get(spaced, target)
        assert r.status == 200, (target, r)
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        assert b'<script type="module" src="/ui/app.js">' in r.body
        check_headers(r)
    for name, ctype in FILES.items():
        r = get(spaced, f"/ui/{name}")
        assert r.status == 200, (name, r)
        assert r.headers["content-type"] == ctype, name
        assert int(r.headers["content-length"]) == len(r.body) > 0
        check_headers(r)
    # the page has no inline script for the CSP to allow
    index = get(spaced, "/ui/").body.decode()
    assert "<script>" not in index and "onclick=" not in index
    # no auth for the static files; HEAD like GET without the body
    h = get(spaced, "/ui/app.js", method="HEAD")
    assert h.status == 200 and h.body == b"" and h.headers["content-length"] == str(len(get(spaced, "/ui/app.js").body))
    # revalidation by ETag
    etag = get(spaced, "/ui/app.js").headers["etag"]
    r = get(spaced, "/ui/app.js", headers={"If-None-Match": etag})
    assert r.status == 304 and r.body == b""
    assert get(spaced, "/ui/app.js", headers={"If-None-Match": '"other"'}).status == 200


def test_unknown_and_traversal(spaced):
    for target in ("/ui/nope.js", "/ui/.hidden", "/ui/app.js/", "/ui/x/app.js", "/ui/xterm.mjs.map",
                   "/ui/../v1/info", "/ui/..%2fv1%2finfo", "/ui/%2e%2e/%2e%2e/etc/passwd", "/ui/..",
                   "/ui/%2e%2e", "/ui//etc/passwd", "/ui/%2fetc%2fpasswd", "/ui/..%5c..%5cetc%5cpasswd",
                   "/ui/app.js%00.html", "/ui/" + "a" * 300, "/ui/meson.build", "/ui/embed.py",
                   "/ui/package.json"):
        status, head, body = raw(spaced, target)
        assert status in (400, 404), (target, head)
        assert b"root:" not in body and b"sandboxes" not in body, target
        if status == 404:
            assert "x-content-type-options: nosniff" in head.lower(), head
    # an absolute URI in the request line is not a way around either
    status, head, _ = raw(spaced, "http://x/ui/../../etc/passwd")
    assert status in (400, 404), head
    # writes are refused
    for method in ("POST", "PUT", "DELETE"):
        r = get(spaced, "/ui/index.html", method=method)
        assert r.status == 405 and r.headers["allow"] == "GET, HEAD", (method, r)
    # /uix is not the dashboard (an API 404, JSON)
    r = get(spaced, "/uix")
    assert r.status == 404 and r.content_type == "application/json"


@pytest.fixture(scope="module")
def node():
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed (scripts/install-deps.sh installs them)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip("Debian's chromium is needed (scripts/install-deps.sh installs it)")
    if not os.path.isdir(os.path.join(DRIVER_DIR, "node_modules", "playwright-core")):
        r = subprocess.run(["npm", "ci", "--prefix", DRIVER_DIR, "--no-audit", "--no-fund"], capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return shutil.which("node")


@pytest.fixture(scope="module")
def tenant_key(spaced):
    r = spaced.api("POST", "/v1/keys", json={"name": "dashboard", "tenant": "dash" + uuid.uuid4().hex[:10]})
    assert r.status == 201, r
    return r.json()["key"]


@pytest.mark.timeout(900)
def test_browser(spaced, node, tenant_key):
    out = os.path.join(spaced.s.build_dir, "test-artifacts", "dashboard")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".png"):
            os.unlink(os.path.join(out, f))
    r = subprocess.run([node, os.path.join(DRIVER_DIR, "drive.mjs"), spaced.url, tenant_key, spaced.admin_key, out],
                       cwd=DRIVER_DIR, env=clean_env({"HOME": os.environ.get("HOME", "/root")}),
                       capture_output=True, text=True, timeout=800)
    lines = r.stdout.strip().splitlines()
    seen = json.loads(lines[-1]) if lines else {}
    for f in seen.get("screenshots", []):
        print(f"screenshot: {f}")
    created = seen.get("created")
    if r.returncode != 0 and created:
        spaced.api("DELETE", f"/v1/sandboxes/{created}", timeout=180)
    assert r.returncode == 0, f"the browser run failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert seen["terminal"] and seen["file"] and seen["process"] and seen["network"] and seen["checkpoint"] and seen["deleted"] and seen["events"]
    assert seen["port"] and seen["volume"], seen
    # deleted for the API too
    g = spaced.api("GET", f"/v1/sandboxes/{created}", key=tenant_key)
    assert g.status == 404 or g.json()["state"] == "deleted", g
    listed = spaced.api("GET", "/v1/sandboxes", key=tenant_key).json()["sandboxes"]
    assert created not in [s["id"] for s in listed]
    # the admin saw every tenant and key; the page itself logged no errors
    assert "default" in seen["tenants"] or seen["tenants"], seen
    assert len(seen["keys"]) >= 2, seen
    assert not seen["console"], seen["console"]
    assert len(seen["screenshots"]) >= 8
    for f in seen["screenshots"]:
        assert os.path.getsize(f) > 1000, f
    load = seen["load"]
    spaced.s.notes.append(f"dashboard first load (headless chromium, cold cache): {load['list_rendered_ms']:.0f} ms "
                          f"to the sandbox list rendered (DOMContentLoaded {load['dom_content_loaded_ms']:.0f} ms, "
                          f"{load['transferred_bytes'] / 1024:.0f} KiB)")


def test_info_caller(spaced, tenant_key):
    """What the page asks to know whether to show the admin pages."""
    me = spaced.api("GET", "/v1/info", key=tenant_key).json()["caller"]
    assert me["admin"] is False and me["tenant"].startswith("dash") and me["key"].startswith("key_"), me
    admin = spaced.api("GET", "/v1/info").json()["caller"]
    assert admin["admin"] is True, admin
    # and the API itself still refuses the admin pages' calls to a tenant key
    assert spaced.api("GET", "/v1/tenants", key=tenant_key).status == 403
