# SPDX-License-Identifier: MIT
"""docs/e2b-compat.md against the installed E2B JS SDK (tests/e2e/e2b,
pinned): tests/e2e/e2b/walk.mjs lists the SDK's public methods (its classes,
and the parts of a live sandbox) and the REST paths its API client calls.
Every one must have a row and every row must name one; each endpoint is
then called on a real spaced: one the table says is refused answers an
E2B-shaped 501 "not supported", one it says is served never does. Prints
how many of the SDK's methods the JS suite (e2b.test.mjs) calls by name."""

import json
import os
import re
import subprocess
import uuid

import pytest

import e2e_http
from e2e_daemon import clean_env
from test_e2b_sdk import E2B_DIR, TEST_FILE, node_too_old, npm_ci

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "e2b-compat.md")
WALK = os.path.join(E2B_DIR, "walk.mjs")
STATUSES = {"served", "client", "refused"}
ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<status>[a-z]+) \|")
MISSING_SANDBOX = "sbxnotthere00000"


def doc_rows():
    """{"methods": {name: status}, "endpoints": {...}} from the page's two tables."""
    rows = {"methods": {}, "endpoints": {}}
    section = None
    with open(DOC, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## SDK methods"):
                section = "methods"
            elif line.startswith("## REST endpoints"):
                section = "endpoints"
            m = ROW.match(line)
            if m and section:
                assert m["name"] not in rows[section], f"{m['name']} listed twice"
                assert m["status"] in STATUSES, line
                rows[section][m["name"]] = m["status"]
    return rows


@pytest.fixture(scope="module")
def walked(spaced):
    if not (subprocess.run(["sh", "-c", "command -v node && command -v npm"], capture_output=True).returncode == 0):
        pytest.skip("node and npm are needed (scripts/install-deps.sh installs them)")
    old = node_too_old()
    if old:
        pytest.skip(old)
    npm_ci()
    r = spaced.api("POST", "/v1/keys", json={"name": "e2b-compat", "tenant": "compat" + uuid.uuid4().hex[:8]})
    assert r.status == 201, r
    key = r.json()["key"]
    env = clean_env({"E2B_API_URL": spaced.url, "E2B_SANDBOX_URL": spaced.url, "E2B_API_KEY": key,
                     "NODE_NO_WARNINGS": "1"})
    p = subprocess.run(["node", WALK], cwd=E2B_DIR, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    out["key"] = key
    return out


def test_every_sdk_method_has_a_row(walked):
    rows = doc_rows()["methods"]
    missing = sorted(set(walked["methods"]) - set(rows))
    stale = sorted(set(rows) - set(walked["methods"]))
    assert not missing, f"SDK {walked['version']} methods without a row in docs/e2b-compat.md: {missing}"
    assert not stale, f"rows of docs/e2b-compat.md naming no method of SDK {walked['version']}: {stale}"


def test_every_endpoint_has_a_row(walked):
    rows = doc_rows()["endpoints"]
    missing = sorted(set(walked["endpoints"]) - set(rows))
    stale = sorted(set(rows) - set(walked["endpoints"]))
    assert not missing, f"SDK {walked['version']} endpoints without a row in docs/e2b-compat.md: {missing}"
    assert not stale, f"rows of docs/e2b-compat.md naming no endpoint of SDK {walked['version']}: {stale}"


def call(spaced, key, endpoint, volume):
    method, path = endpoint.split(" ", 1)
    headers = {"X-API-KEY": key}
    if path.startswith("/volumecontent/"):  # a volume's token opens its content, not a key
        path = path.replace("{volumeID}", volume["volumeID"]) + "?path=/compat-probe"
        headers = {"Authorization": f"Bearer {volume['token']}"}
    path = re.sub(r"\{sandboxID\}", MISSING_SANDBOX, path)
    path = re.sub(r"\{[A-Za-z]+\}", "compat-x", path)
    if path.startswith(("/files", "/health")):  # envd's: routed by the sandbox's id
        headers["E2b-Sandbox-Id"] = MISSING_SANDBOX
    body = b"{}" if method in ("POST", "PUT", "PATCH") else None
    if body is not None:
        headers["Content-Type"] = "application/json"
    return e2e_http.request(spaced.url, method, path, data=body, headers=headers, key=None, timeout=60)


def message_of(r):
    try:
        return str(json.loads(r.body).get("message", ""))
    except (ValueError, AttributeError):
        return r.body.decode("utf-8", "replace")[:300]


def test_refused_endpoints_are_refused_and_served_ones_are_not(spaced, walked):
    rows = doc_rows()["endpoints"]
    r = e2e_http.request(spaced.url, "POST", "/volumes", json={"name": "compat" + uuid.uuid4().hex[:6]},
                         headers={"X-API-KEY": walked["key"]}, key=None, timeout=60)
    assert r.status in (200, 201), r
    volume = r.json()
    wrong = []
    for endpoint, status in sorted(rows.items()):
        r = call(spaced, walked["key"], endpoint, volume)
        msg = message_of(r)
        if status == "refused":
            ok = r.status == 501 and "not supported" in msg and json.loads(r.body).get("code") == 501
        else:
            ok = r.status != 501 and "not supported" not in msg
        if not ok:
            wrong.append(f"{endpoint} ({status}): {r.status} {msg[:160]}")
    e2e_http.request(spaced.url, "DELETE", f"/volumes/{volume['volumeID']}", headers={"X-API-KEY": walked["key"]},
                     key=None, timeout=60)
    assert not wrong, "\n".join(wrong)


def test_methods_the_js_suite_calls(spaced, walked):
    """A figure for the report (no assert on it): the SDK methods e2b.test.mjs calls by name."""
    with open(TEST_FILE, encoding="utf-8") as f:
        src = f.read()
    used = []
    for m in walked["methods"]:
        parts = m.split(".")
        if parts[0] in ("Sandbox", "Template", "Volume", "Secret"):
            pat = re.escape(m) + r"\("
        elif len(parts) == 3:
            pat = r"\." + re.escape(parts[1]) + r"\." + re.escape(parts[2]) + r"\("
        else:
            pat = r"\b(sbx|sandbox|s|a|b|c|child|fork|copy|restored|other)\." + re.escape(parts[-1]) + r"\("
        if re.search(pat, src):
            used.append(m)
    rows = doc_rows()["methods"]
    served = [m for m in walked["methods"] if rows.get(m) == "served"]
    spaced.s.notes.append(f"E2B JS SDK {walked['version']}: {len(walked['methods'])} public methods "
          f"({len(served)} served, {sum(1 for v in rows.values() if v == 'client')} client-side, "
          f"{sum(1 for v in rows.values() if v == 'refused')} refused); the JS suite calls {len(used)} by name, "
          f"{len([m for m in used if m in served])} of the served")
