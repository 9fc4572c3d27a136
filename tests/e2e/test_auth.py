# SPDX-License-Identifier: MIT
"""API keys, tenants and isolation between tenants."""

import glob
import os
import re
import subprocess
import uuid

import pytest

from e2e_daemon import TIME_RE, assert_error_shape


def new_tenant():
    return "t" + uuid.uuid4().hex[:12]


def make_key(spaced, tenant=None, admin=None, name="e2e", key=None):
    body = {"name": name}
    if tenant is not None:
        body["tenant"] = tenant
    if admin is not None:
        body["admin"] = admin
    kw = {} if key is None else {"key": key}
    r = spaced.api("POST", "/v1/keys", json=body, **kw)
    assert r.status == 201, r
    v = r.json()
    assert re.match(r"^key_[A-Za-z0-9]+$", v["id"]), v
    assert v["key"].startswith("sk_") and len(v["key"]) >= 24, v
    assert TIME_RE.match(v["created_at"]), v
    return v


@pytest.fixture(scope="module")
def other(spaced):
    """A key of another tenant, and a sandbox of the default tenant."""
    k = make_key(spaced, tenant=new_tenant())
    sb = spaced.create()
    yield k, sb["id"]
    spaced.delete(sb["id"])


# ---- authentication ----

@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer sk_wrongwrongwrongwrongwrongwrongwrongwrong"},
    {"Authorization": "Bearer "},
    {"Authorization": "Bearer"},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "sk_nobearer"},
    {"Authorization": "Bearer " + "a" * 5000},
    {"Authorization": "Bearer sk_\u00e9\u00e9"},
], ids=["none", "wrong", "empty", "no-token", "basic", "no-scheme", "huge", "non-ascii"])
@pytest.mark.parametrize("method,path", [("GET", "/v1/sandboxes"), ("POST", "/v1/sandboxes"),
                                         ("GET", "/v1/info"), ("GET", "/v1/keys"), ("GET", "/v1/events"),
                                         ("GET", "/v1/templates"), ("DELETE", "/v1/sandboxes/abcd")])
def test_unauthorized(spaced, headers, method, path):
    h = dict(headers)
    if "Authorization" in h:
        h["Authorization"] = h["Authorization"].encode("utf-8").decode("latin-1")
    r = spaced.api(method, path, key=None, headers=h, json={} if method == "POST" else None)
    if r.status == 400 and "a" * 5000 in h.get("Authorization", ""):
        assert_error_shape(r, 400)   # an oversized header may be refused as such
        return
    assert_error_shape(r, 401, "unauthorized")


def test_no_key_needed_for_health_and_metrics(spaced):
    assert spaced.api("GET", "/healthz", key=None).status == 200
    assert spaced.api("GET", "/metrics", key=None).status == 200


# ---- tenants ----

def test_other_tenant_sees_nothing(spaced, other):
    k, sid = other
    key = k["key"]
    r = spaced.api("GET", "/v1/sandboxes", key=key)
    assert r.status == 200, r
    assert r.json()["sandboxes"] == [], r.json()
    for method, path, kw in [
        ("GET", f"/v1/sandboxes/{sid}", {}),
        ("DELETE", f"/v1/sandboxes/{sid}", {}),
        ("POST", f"/v1/sandboxes/{sid}/exec", {"json": {"cmd": ["true"]}}),
        ("GET", f"/v1/sandboxes/{sid}/exec", {}),
        ("GET", f"/v1/sandboxes/{sid}/files", {"params": {"path": "/etc/passwd"}}),
        ("GET", f"/v1/sandboxes/{sid}/files", {"params": {"path": "/", "list": 1}}),
        ("PUT", f"/v1/sandboxes/{sid}/files", {"params": {"path": "/tmp/x"}, "data": b"x"}),
        ("DELETE", f"/v1/sandboxes/{sid}/files", {"params": {"path": "/tmp"}}),
        ("POST", f"/v1/sandboxes/{sid}/files/move", {"json": {"from": "/a", "to": "/b"}}),
        ("POST", f"/v1/sandboxes/{sid}/exec/e1/signal", {"json": {"signal": "SIGKILL"}}),
    ]:
        r = spaced.api(method, path, key=key, **kw)
        e = assert_error_shape(r, 404, "not_found")
        assert "tenant" not in e["message"].lower(), e
    # the sandbox is untouched
    assert spaced.show(sid).json()["state"] == "running"
    assert spaced.sh(sid, "test ! -e /tmp/x && echo ok") == "ok\n"
    # the other tenant's answer for a foreign id equals the one for a missing id
    a = spaced.api("GET", f"/v1/sandboxes/{sid}", key=key).json()["error"]
    b = spaced.api("GET", "/v1/sandboxes/zzzzzzzzzzzzzzzz", key=key).json()["error"]
    assert a["code"] == b["code"] and a["message"].replace(sid, "ID") == b["message"].replace("zzzzzzzzzzzzzzzz", "ID")


def test_tenant_has_its_own_sandboxes(spaced, other):
    k, sid = other
    mine = spaced.create(key=k["key"])
    try:
        assert mine["tenant"] == k["tenant"]
        r = spaced.api("GET", "/v1/sandboxes", key=k["key"])
        assert [s["id"] for s in r.json()["sandboxes"]] == [mine["id"]]
        r = spaced.api("GET", "/v1/sandboxes")
        assert mine["id"] not in [s["id"] for s in r.json()["sandboxes"]], "the default tenant lists another's sandbox"
        assert spaced.sh(mine["id"], "echo mine", key=k["key"]) == "mine\n"
    finally:
        spaced.delete(mine["id"], key=k["key"])


def test_non_admin_limits(spaced):
    tenant = new_tenant()
    k = make_key(spaced, tenant=tenant)
    key = k["key"]
    assert k["admin"] is False
    # another tenant, or admin rights: refused
    r = spaced.api("POST", "/v1/keys", json={"name": "x", "tenant": new_tenant()}, key=key)
    assert_error_shape(r, 403, "forbidden")
    r = spaced.api("POST", "/v1/keys", json={"name": "x", "admin": True}, key=key)
    assert_error_shape(r, 403, "forbidden")
    # its own tenant: allowed
    own = make_key(spaced, key=key, name="own")
    assert own["tenant"] == tenant and own["admin"] is False
    r = spaced.api("POST", "/v1/keys", json={"name": "x", "tenant": tenant}, key=key)
    assert r.status == 201, r
    # templates: admin only
    r = spaced.api("POST", "/v1/templates", params={"name": "e2e-forbidden"}, data=b"x" * 1024,
                   headers={"Content-Type": "application/x-tar"}, key=key)
    assert_error_shape(r, 403, "forbidden")
    r = spaced.api("DELETE", "/v1/templates/base", key=key)
    assert_error_shape(r, 403, "forbidden")
    assert "base" in [t["name"] for t in spaced.api("GET", "/v1/templates", key=key).json()["templates"]]
    # the key list is its own tenant's
    ks = spaced.api("GET", "/v1/keys", key=key).json()["keys"]
    assert {x["tenant"] for x in ks} == {tenant}, ks
    assert all("key" not in x and "hash" not in x for x in ks), ks


def test_cli_key_create_for_tenant_is_admin_only(spaced):
    tenant = new_tenant()
    k = make_key(spaced, tenant=tenant)
    c = spaced.cli("key", "create", "--tenant", new_tenant(), key=k["key"])
    assert c.rc == 5 and c.err.count("\n") == 1, c  # 403: exit 5


def test_admin_lists_all_keys(spaced):
    k = make_key(spaced, tenant=new_tenant())
    ks = spaced.api("GET", "/v1/keys").json()["keys"]
    ids = {x["id"]: x for x in ks}
    assert k["id"] in ids and ids[k["id"]]["tenant"] == k["tenant"]
    assert any(x["tenant"] == "default" and x["admin"] for x in ks)
    assert all("key" not in x for x in ks), "a key listing shows secrets"


def test_key_rm(spaced):
    k = make_key(spaced, tenant=new_tenant())
    assert spaced.api("GET", "/v1/sandboxes", key=k["key"]).status == 200
    r = spaced.api("DELETE", f"/v1/keys/{k['id']}")
    assert r.status == 204, r
    assert_error_shape(spaced.api("GET", "/v1/sandboxes", key=k["key"]), 401, "unauthorized")
    assert_error_shape(spaced.api("DELETE", f"/v1/keys/{k['id']}"), 404, "not_found")
    assert_error_shape(spaced.api("DELETE", "/v1/keys/key_nosuchkey0"), 404, "not_found")


def test_key_rm_other_tenant_is_404(spaced):
    a = make_key(spaced, tenant=new_tenant())
    b = make_key(spaced, tenant=new_tenant())
    assert_error_shape(spaced.api("DELETE", f"/v1/keys/{b['id']}", key=a["key"]), 404, "not_found")
    assert spaced.api("GET", "/v1/sandboxes", key=b["key"]).status == 200


def test_key_cli(spaced):
    tenant = new_tenant()
    c = spaced.cli("--json", "key", "create", "--tenant", tenant, "--name", "cli")
    assert c.rc == 0, c
    import json
    v = json.loads(c.out)
    spaced.keys[v["key"]] = v["id"]
    c = spaced.cli("key", "ls")
    assert c.rc == 0 and v["id"] in c.out and v["key"] not in c.out, c
    c = spaced.cli("key", "rm", v["id"])
    assert c.rc == 0, c
    assert spaced.api("GET", "/v1/info", key=v["key"]).status == 401
    c = spaced.cli("key", "rm", v["id"])
    assert c.rc == 3 and c.err.count("\n") == 1, c  # 404: exit 3


def test_key_bad_input(spaced):
    for body, code in [({"name": "x", "tenant": ""}, "invalid_argument"),
                       ({"name": "x", "tenant": "Bad Tenant!"}, "invalid_argument"),
                       ({"name": "x" * 300}, "invalid_argument"),
                       ({"name": 5}, "invalid_argument"),
                       ({"name": "x", "admin": "yes"}, "invalid_argument"),
                       ({"name": "x", "bogus": 1}, "unknown_field")]:
        r = spaced.api("POST", "/v1/keys", json=body)
        assert_error_shape(r, 400, code)


def test_keys_are_stored_hashed(spaced):
    k = make_key(spaced, tenant=new_tenant(), name="hashed")
    dbs = glob.glob(os.path.join(spaced.state_dir, "space.db*"))
    assert dbs, f"no space.db* in {spaced.state_dir}"
    for secret in (k["key"], spaced.admin_key):
        r = subprocess.run(["grep", "-c", "-a", "-F", secret, *dbs], capture_output=True, text=True)
        counts = [int(line.rsplit(":", 1)[-1]) for line in r.stdout.split()]
        assert sum(counts) == 0, f"a key secret appears in the store: {r.stdout}"
    # nor in the log
    assert k["key"] not in spaced.log_text() and spaced.admin_key not in spaced.log_text(), \
        "a key secret appears in the spaced log"
