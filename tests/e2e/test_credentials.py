# SPDX-License-Identifier: MIT
"""Credentials: the API and CLI, values that never come back out (responses,
events, logs, the store file, the sandbox's env), grants, rotation,
revocation, tenant isolation, bad input, and the master key file."""

import os
import re
import sqlite3
import stat
import subprocess
import uuid

import pytest

from e2e_daemon import TIME_RE, assert_error_shape
import e2e_host as host
import e2e_residue as residue


def new_name():
    return "c" + uuid.uuid4().hex[:10]


def secret():
    return "sk-e2e-" + uuid.uuid4().hex


def add(spaced, name=None, value=None, **fields):
    body = {"name": name or new_name(), "value": value or secret(), "hosts": ["api.example.com"]}
    body.update(fields)
    r = spaced.api("POST", "/v1/credentials", json=body)
    assert r.status == 201, r
    return r.json(), body["value"]


def event_text(spaced, **params):
    r = spaced.api("GET", "/v1/events", params=dict(params, limit=1000))
    assert r.status == 200, r
    return r.body.decode()


def test_create_show_list_never_return_the_value(spaced):
    c, value = add(spaced, header="x-api-key: {value}", env="EXAMPLE_KEY")
    assert re.match(r"^cr_[a-z0-9]{16}$", c["id"]), c
    assert c["apply"] == "header" and c["header"] == "x-api-key: {value}", c
    assert c["env"] == "EXAMPLE_KEY" and c["placeholder"] == "space-cred-" + c["name"], c
    assert c["state"] == "active" and c["version"] == 1, c
    assert TIME_RE.match(c["created_at"]) and c["expires_at"] is None and c["revoked_at"] is None, c
    shown = spaced.api("GET", f"/v1/credentials/{c['name']}")
    listed = spaced.api("GET", "/v1/credentials")
    assert shown.status == 200 and listed.status == 200
    assert c["name"] in [x["name"] for x in listed.json()["credentials"]]
    for r in (shown, listed):
        assert value not in r.body.decode()
    assert value not in event_text(spaced, type="credential.")
    assert value not in spaced.log_text()


def test_default_header_and_basic(spaced):
    c, _ = add(spaced)
    assert c["header"] == "Authorization: Bearer {value}" and c["basic_user"] is None, c
    b, _ = add(spaced, basic_user="git", hosts=["*.git.example.org"])
    assert b["apply"] == "basic" and b["basic_user"] == "git" and b["header"] is None, b
    assert b["hosts"] == ["*.git.example.org"]


BAD = [
    ({"hosts": ["*"]}, "matches everything"),
    ({"hosts": ["*.com"]}, "top-level"),
    ({"hosts": ["com"]}, "top-level"),
    # a wildcard over a public suffix (Public Suffix List, either section): every
    # owner's site under it would receive the value
    ({"hosts": ["*.co.uk"]}, "'*.co.uk' covers the public suffix 'co.uk' (ICANN section of the Public Suffix List)"),
    ({"hosts": ["*.github.io"]}, "public suffix 'github.io' (private section"),
    ({"hosts": ["api.example.com", "*.s3.amazonaws.com"]}, "hosts[1]: '*.s3.amazonaws.com' covers the public suffix"),
    ({"hosts": ["*.xn--ciqpn.hk"]}, "public suffix 'xn--ciqpn.hk'"),
    ({"hosts": ["*.foo.ck"]}, "public suffix 'foo.ck'"),
    # amazonaws.com is Amazon's, but s3.amazonaws.com and others below it are suffixes
    ({"hosts": ["*.amazonaws.com"]}, "'*.amazonaws.com' covers public suffixes below 'amazonaws.com', such as '"),
    ({"hosts": ["*.uk"]}, "top-level"),
    ({"hosts": ["*.CO.UK"]}, "lower-case"),
    ({"hosts": ["10.0.0.1"]}, "IP"),
    ({"hosts": ["api.example.com:443"]}, "lower-case"),
    ({"hosts": ["API.example.com"]}, "lower-case"),
    ({"hosts": []}, "1 to"),
    ({"hosts": "api.example.com"}, "array"),
    ({"hosts": ["a.example.com", "a.example.com"]}, "twice"),
    ({"header": "Host: {value}"}, "cannot carry"),
    ({"header": "Authorization: Bearer"}, "{value}"),
    ({"header": "Authorization Bearer {value}"}, "Name: format"),
    ({"header": "X-A: {value}\r\nX-B: 1"}, "visible"),
    ({"header": "X-A: {value}", "basic_user": "u"}, "not both"),
    ({"basic_user": "a:b"}, "basic"),
    ({"env": "PATH"}, "platform"),
    ({"env": "1X"}, "env name"),
    ({"name": "a/b"}, "name must be"),
    ({"name": ""}, "name must be"),
    ({"value": ""}, "empty"),
    ({"value": "x" * 8193}, "longer than 8192"),
    ({"value": "abc\ndef"}, "control character"),
    ({"value": 5}, "string"),
    ({"expires_at": "2001-01-01T00:00:00Z"}, "future"),
    ({"expires_at": "tomorrow"}, "RFC 3339"),
]


@pytest.mark.parametrize("fields,words", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input(spaced, fields, words):
    name = new_name()
    body = {"name": name, "value": "sk-bad-input-value", "hosts": ["api.example.com"]}
    body.update(fields)
    r = spaced.api("POST", "/v1/credentials", json=body)
    e = assert_error_shape(r, 400, "invalid_argument")
    assert words.lower() in e["message"].lower(), e
    assert "sk-bad-input-value" not in e["message"]
    assert spaced.api("GET", f"/v1/credentials/{name}").status == 404  # nothing changed


PATCH_BAD = [
    ({"hosts": ["*"]}, "matches everything"),
    ({"hosts": ["*.com"]}, "top-level"),
    ({"hosts": ["api.example.com", "*.co.uk"]}, "hosts[1]: '*.co.uk' covers the public suffix 'co.uk'"),
    ({"hosts": ["*.github.io"]}, "public suffix 'github.io'"),
    ({"hosts": []}, "1 to"),
    ({"hosts": ["a.example.com", "a.example.com"]}, "twice"),
    ({"header": "Host: {value}"}, "cannot carry"),
    ({"header": "Authorization Bearer {value}"}, "Name: format"),
    ({"basic_user": "a:b"}, "basic"),
    ({"env": "LD_PRELOAD"}, "platform"),
    ({"value": ""}, "empty"),
    ({"value": "abc\ndef"}, "control character"),
    ({"value": "x" * 8193}, "longer than 8192"),
    ({"expires_at": "2001-01-01T00:00:00Z"}, "future"),
]


@pytest.mark.parametrize("fields,words", PATCH_BAD, ids=[str(i) for i in range(len(PATCH_BAD))])
def test_patch_bad_input_changes_nothing(spaced, fields, words):
    c, value = add(spaced, env="PATCHED_KEY")
    r = spaced.api("PATCH", f"/v1/credentials/{c['name']}", json=fields)
    e = assert_error_shape(r, 400, "invalid_argument")
    assert words.lower() in e["message"].lower(), e
    assert value not in e["message"]
    after = spaced.api("GET", f"/v1/credentials/{c['name']}").json()
    assert after == c, (c, after)   # same version, hosts, header, env, expiry
    evs = spaced.api("GET", "/v1/events", params={"type": "credential.", "limit": 1000}).json()["events"]
    assert [x["type"] for x in evs if x["data"].get("credential") == c["name"]] == ["credential.created"], evs


def test_hosts_below_a_public_suffix_are_accepted(spaced):
    # one owner's names: a wildcard under a registered domain, exact hosts even
    # when the host is itself a public suffix, one user's site under github.io
    hosts = ["*.example.co.uk", "api.co.uk", "co.uk", "*.someone.github.io", "*.city.kawasaki.jp"]
    c, _ = add(spaced, hosts=hosts)
    assert c["hosts"] == hosts, c
    r = spaced.api("PATCH", f"/v1/credentials/{c['name']}", json={"hosts": ["*.example.com.au"]})
    assert r.status == 200 and r.json()["hosts"] == ["*.example.com.au"], r


def test_unknown_field_duplicate_and_missing(spaced):
    r = spaced.api("POST", "/v1/credentials", json={"name": new_name(), "value": "v", "hosts": ["a.example.com"],
                                                    "colour": "red"})
    assert_error_shape(r, 400, "unknown_field")
    c, _ = add(spaced)
    r = spaced.api("POST", "/v1/credentials", json={"name": c["name"], "value": "v2", "hosts": ["b.example.com"]})
    assert_error_shape(r, 409, "already_exists")
    assert spaced.api("GET", f"/v1/credentials/{c['name']}").json() == c   # the first one, unchanged
    r = spaced.api("POST", "/v1/credentials", json={"name": new_name(), "hosts": ["b.example.com"]})
    assert_error_shape(r, 400, "invalid_argument")
    for method in ("GET", "DELETE", "PATCH"):
        r = spaced.api(method, "/v1/credentials/nope-" + new_name(), json={"value": "x"} if method == "PATCH" else None)
        assert_error_shape(r, 404, "not_found")
    r = spaced.api("PATCH", f"/v1/credentials/{c['name']}", json={})
    assert_error_shape(r, 400, "invalid_argument")
    r = spaced.api("PATCH", f"/v1/credentials/{c['name']}", json={"name": "x"})
    assert_error_shape(r, 400, "unknown_field")


def test_rotate_revoke_delete_and_events(spaced):
    c, v1 = add(spaced)
    v2 = secret()
    r = spaced.api("PATCH", f"/v1/credentials/{c['name']}", json={"value": v2, "hosts": ["api2.example.com"]})
    assert r.status == 200, r
    assert r.json()["version"] == 2 and r.json()["hosts"] == ["api2.example.com"], r.json()
    assert v2 not in r.body.decode()
    r = spaced.api("PATCH", f"/v1/credentials/{c['name']}", json={"expires_at": "2999-01-01T00:00:00Z"})
    assert r.status == 200 and r.json()["expires_at"].startswith("2999-01-01"), r
    r = spaced.api("POST", f"/v1/credentials/{c['name']}/revoke")
    assert r.status == 200 and r.json()["state"] == "revoked" and TIME_RE.match(r.json()["revoked_at"]), r
    # revocation is final
    r = spaced.api("PATCH", f"/v1/credentials/{c['name']}", json={"value": secret()})
    assert_error_shape(r, 409, "conflict")
    ev = event_text(spaced, type="credential.")
    for t in ("credential.created", "credential.rotated", "credential.updated", "credential.revoked"):
        assert t in ev, t
    assert v1 not in ev and v2 not in ev
    assert spaced.api("DELETE", f"/v1/credentials/{c['name']}").status == 204
    assert spaced.api("GET", f"/v1/credentials/{c['name']}").status == 404
    assert "credential.deleted" in event_text(spaced, type="credential.")
    # the name is free again
    add(spaced, name=c["name"])


def test_other_tenant_gets_404(spaced):
    r = spaced.api("POST", "/v1/keys", json={"name": "x", "tenant": "t" + uuid.uuid4().hex[:12]})
    assert r.status == 201
    other = r.json()["key"]
    c, _ = add(spaced)
    for method, path in (("GET", f"/v1/credentials/{c['name']}"), ("DELETE", f"/v1/credentials/{c['name']}"),
                         ("POST", f"/v1/credentials/{c['name']}/revoke")):
        assert_error_shape(spaced.api(method, path, key=other), 404, "not_found")
    assert spaced.api("PATCH", f"/v1/credentials/{c['name']}", json={"value": "x"}, key=other).status == 404
    assert c["name"] not in spaced.api("GET", "/v1/credentials", key=other).body.decode()
    # the same name in the other tenant is another credential
    r = spaced.api("POST", "/v1/credentials", json={"name": c["name"], "value": "v", "hosts": ["a.example.com"]},
                   key=other)
    assert r.status == 201 and r.json()["id"] != c["id"], r
    # and the other tenant cannot grant ours to its sandbox, nor its own to ours
    sb = spaced.create()
    try:
        assert spaced.api("POST", f"/v1/sandboxes/{sb['id']}/credentials/{c['name']}", key=other).status == 404
    finally:
        spaced.delete(sb["id"])


def test_grants_and_placeholder_env(spaced):
    c, value = add(spaced, env="EXAMPLE_API_KEY")
    late, late_value = add(spaced, env="LATE_KEY")
    sb = spaced.create(credentials=[c["name"]])
    sid = sb["id"]
    try:
        out = spaced.sh(sid, 'printf "%s|%s" "$EXAMPLE_API_KEY" "${LATE_KEY:-}"')
        assert out == f"space-cred-{c['name']}|", out
        granted = spaced.api("GET", f"/v1/sandboxes/{sid}/credentials")
        assert [x["name"] for x in granted.json()["credentials"]] == [c["name"]]
        # granted on the running sandbox: the next exec sees it
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/credentials/{late['name']}")
        assert r.status == 201, r
        assert_error_shape(spaced.api("POST", f"/v1/sandboxes/{sid}/credentials/{late['name']}"), 409,
                           "already_exists")
        out = spaced.sh(sid, 'printf "%s" "$LATE_KEY"')
        assert out == f"space-cred-{late['name']}", out
        # the values are nowhere in the sandbox's processes' environments or its files
        probe = spaced.exec(sid, shell=f"cat /proc/*/environ 2>/dev/null | grep -c -e '{value}' -e '{late_value}'; "
                                       f"grep -rlsF -e '{value}' -e '{late_value}' / --exclude-dir=proc "
                                       f"--exclude-dir=sys | head -3; true")
        assert probe.code == 0 and probe.out.split() == ["0"], probe
        ev = event_text(spaced, sandbox=sid)
        assert ev.count("credential.granted") == 2, ev
        assert spaced.api("DELETE", f"/v1/sandboxes/{sid}/credentials/{late['name']}").status == 204
        assert_error_shape(spaced.api("DELETE", f"/v1/sandboxes/{sid}/credentials/{late['name']}"), 404, "not_found")
        assert "credential.ungranted" in event_text(spaced, sandbox=sid)
    finally:
        spaced.delete(sid)


def sandbox_ids(spaced):
    r = spaced.api("GET", "/v1/sandboxes", params={"limit": "1000"})
    assert r.status == 200, r
    return {sb["id"] for sb in r.json()["sandboxes"]}


def test_create_with_bad_credentials(spaced):
    before = sandbox_ids(spaced)
    r = spaced.api("POST", "/v1/sandboxes", json={"credentials": ["nope-" + new_name()]})
    assert_error_shape(r, 404, "not_found")
    c, _ = add(spaced)
    r = spaced.api("POST", "/v1/sandboxes", json={"credentials": [c["name"], c["name"]]})
    assert_error_shape(r, 400, "invalid_argument")
    r = spaced.api("POST", "/v1/sandboxes", json={"credentials": "x"})
    assert_error_shape(r, 400, "invalid_argument")
    assert spaced.api("POST", f"/v1/credentials/{c['name']}/revoke").status == 200
    r = spaced.api("POST", "/v1/sandboxes", json={"credentials": [c["name"]]})
    assert_error_shape(r, 409, "conflict")
    assert sandbox_ids(spaced) == before   # nothing created by any of them


def test_value_not_left_in_the_api_servers_memory(spaced):
    """Once a create or a rotation answered, the value is nowhere in spaced's memory: the request's
    bytes (connection buffer, body, JSON tree) are wiped, and only the sealed value is kept."""
    values = []
    c, v = add(spaced)
    values.append(v)
    v2 = secret()
    assert spaced.api("PATCH", f"/v1/credentials/{c['name']}", json={"value": v2}).status == 200
    values.append(v2)
    # a value with JSON escapes (decoded by the parser into a buffer of its own)
    raw = "sk-e2e-" + uuid.uuid4().hex
    r = spaced.api("POST", "/v1/credentials", raw_json=('{"name":"%s","value":"%s\\/%s","hosts":["a.example.com"]}'
                                                        % (new_name(), raw[:20], raw[20:])).encode())
    assert r.status == 201, r
    values += [raw[:20] + "/" + raw[20:], raw[:20] + "\\/" + raw[20:]]
    for v in values:
        assert host.memory_hits(spaced.pid, v.encode()) == 0, "the value is still in spaced's memory"
    # the search finds what is there: the name is in memory (the last requests' paths)
    assert host.memory_hits(spaced.pid, c["name"].encode()) > 0


def test_store_holds_only_ciphertext_and_key_file_is_private(spaced):
    c, value = add(spaced)
    key = os.path.join(spaced.state_dir, "master.key")
    st = os.stat(key)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32, st
    db = os.path.join(spaced.state_dir, "space.db")
    if os.path.exists(db):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            row = conn.execute("SELECT ciphertext, nonce, key_id FROM credentials WHERE id = ?", (c["id"],)).fetchone()
        assert row and value not in "".join(row), row
        for f in os.listdir(spaced.state_dir):
            if f.startswith("space.db"):
                with open(os.path.join(spaced.state_dir, f), "rb") as fh:
                    assert value.encode() not in fh.read(), f
    with open(key, "rb") as fh:
        k = fh.read()
    assert k.hex() not in spaced.log_text()


def test_cli(spaced, tmp_path):
    name = new_name()
    value = secret()
    c = spaced.cli("cred", "add", name, "--host", "api.example.com", "--header", "x-api-key: {value}",
                   "--env", "CLI_KEY", input=value + "\n")
    assert c.rc == 0, c
    assert name in c.out and value not in c.out + c.err, c
    shown = spaced.api("GET", f"/v1/credentials/{name}").json()
    assert shown["header"] == "x-api-key: {value}" and shown["env"] == "CLI_KEY", shown
    ls = spaced.cli("cred", "ls")
    assert ls.rc == 0 and name in ls.out and value not in ls.out, ls
    vf = tmp_path / "v"
    vf.write_text(secret())
    r = spaced.cli("cred", "rotate", name, "--value-file", str(vf))
    assert r.rc == 0, r
    assert spaced.api("GET", f"/v1/credentials/{name}").json()["version"] == 2
    # no value on stdin: a clear one-line error
    r = spaced.cli("cred", "add", new_name(), "--host", "api.example.com", input="")
    assert r.rc != 0 and "value" in r.err, r
    created = spaced.cli("create", "--cred", name)
    assert created.rc == 0, created
    sid = created.out.strip()
    spaced.known_alive.add(sid)
    try:
        assert spaced.sh(sid, 'printf "%s" "$CLI_KEY"') == f"space-cred-{name}"
        g = spaced.cli("cred", "ls", sid)
        assert g.rc == 0 and name in g.out, g
    finally:
        spaced.delete(sid)
    r = spaced.cli("cred", "revoke", name)
    assert r.rc == 0 and "revoked" in r.out, r
    r = spaced.cli("cred", "rm", name)
    assert r.rc == 0, r
    assert spaced.api("GET", f"/v1/credentials/{name}").status == 404


def _start_with_key(e2e_session, prepare):
    d = e2e_session.new_daemon()
    try:
        prepare(d.state_dir)
        return subprocess.run(d.args(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    finally:
        residue.remove_daemon_dir(d)


@pytest.mark.parametrize("case", ["mode", "size", "symlink"])
def test_bad_master_key_is_refused(e2e_session, case, tmp_path):
    key_bytes = os.urandom(32)

    def prepare(state):
        path = os.path.join(state, "master.key")
        if case == "symlink":
            target = tmp_path / "k"
            target.write_bytes(key_bytes)
            os.chmod(target, 0o600)
            os.symlink(target, path)
            return
        with open(path, "wb") as f:
            f.write(key_bytes if case != "size" else key_bytes[:31])
        os.chmod(path, 0o644 if case == "mode" else 0o600)

    p = _start_with_key(e2e_session, prepare)
    assert p.returncode != 0, p
    words = {"mode": "0644", "size": "31 bytes", "symlink": "symbolic link"}[case]
    assert "master key" in p.stderr and words in p.stderr, p.stderr
    assert key_bytes.hex() not in p.stderr


def test_another_master_key_is_refused_at_start(e2e_session, request):
    """The store keeps the fingerprint of the master key it first saw: a
    spaced started again with another key (the file replaced) refuses to
    start, before it touches the host, rather than seal new values under a
    key the old ones do not open under; with its own key back it starts."""
    d = e2e_session.new_daemon()
    d.start()
    try:
        key = os.path.join(d.state_dir, "master.key")
        with open(key, "rb") as f:
            old = f.read()
        d.stop()
        with open(key, "wb") as f:
            f.write(os.urandom(32))
        p = subprocess.run(d.args(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert p.returncode != 0, p
        assert "is not the one this store's credentials are sealed under" in p.stderr, p.stderr[-2000:]
        assert old.hex() not in p.stderr
        with open(key, "wb") as f:
            f.write(old)
        d.start()
        assert d.api("GET", "/v1/credentials").status == 200
    finally:
        residue.finish_daemon(d, request)
