# SPDX-License-Identifier: MIT
"""Template versions and tags: every import is a version, the name means the
newest, NAME:TAG and NAME@vN pick one, a sandbox records its version, and an
old version is collected only once nothing uses it."""

import os
import shutil
import subprocess
import uuid

import pytest

from e2e_daemon import assert_error_shape, clean_env


def tname():
    return f"e2e-ver-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def tars(spaced, tmp_path_factory):
    """The base template with /etc/space-version saying v1, and v2."""
    d = tmp_path_factory.mktemp("ver")
    out = []
    for v in ("one", "two"):
        os.makedirs(d / v / "etc", exist_ok=True)
        (d / v / "etc" / "space-version").write_text(v + "\n")
        t = str(d / f"{v}.tar")
        shutil.copyfile(spaced.s.base_template(), t)
        subprocess.run(["tar", "-rf", t, "-C", str(d / v), "--numeric-owner", "--owner=0", "--group=0",
                        "./etc/space-version"], check=True)
        out.append(t)
    return out


def publish(spaced, name, tar):
    with open(tar, "rb") as f:
        r = spaced.api("POST", "/v1/templates", params={"name": name}, data=f,
                       headers={"Content-Type": "application/x-tar",
                                "Content-Length": str(os.path.getsize(tar))}, timeout=600)
    assert r.status == 201, r
    return r.json()


def versions(spaced, name):
    r = spaced.api("GET", f"/v1/templates/{name}/versions")
    assert r.status == 200, r
    return {v["version"]: v for v in r.json()["versions"]}


def e2b_rest(spaced, method, path, body=None, key=None):
    """E2B's REST API (X-API-KEY), checked against nothing but its status."""
    import json

    import e2e_http
    headers = {"X-API-KEY": key or spaced.admin_key}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    return e2e_http.request(spaced.url, method, path, data=data, key=None, headers=headers, timeout=120)


def version_of(spaced, sid):
    return spaced.sh(sid, "cat /etc/space-version").strip()


def test_versions_tags_and_collection(spaced, tars):
    name = tname()
    publish(spaced, name, tars[0])
    vs = versions(spaced, name)
    assert list(vs) == [1] and vs[1]["latest"] and vs[1]["size_bytes"] > 0 and vs[1]["tags"] == [], vs

    old = spaced.create(template=name)
    assert old["template"] == name and old["template_version"] == 1, old
    ck = spaced.api("POST", f"/v1/sandboxes/{old['id']}/checkpoints", json={"name": "v1state"}, timeout=180)
    assert ck.status == 201, ck
    r = spaced.api("POST", "/v1/templates/{}/tags".format(name), json={"tag": "stable"})
    assert r.status == 200 and r.json() == {"name": name, "tag": "stable", "version": 1}, r

    # v2: the name moves, v1 stays (in use and tagged)
    publish(spaced, name, tars[1])
    vs = versions(spaced, name)
    assert sorted(vs) == [1, 2] and vs[2]["latest"] and not vs[1]["latest"], vs
    assert vs[1]["tags"] == ["stable"] and vs[1]["in_use"] == 1 and vs[1]["sandboxes"] == [old["id"]], vs
    assert vs[2]["in_use"] == 0 and vs[2]["sandboxes"] == [], vs

    # a failed publish leaves the name where it was
    r = spaced.api("POST", "/v1/templates", params={"name": name}, data=b"not a tar archive" * 100,
                   headers={"Content-Type": "application/x-tar"})
    assert_error_shape(r, 400)
    assert sorted(versions(spaced, name)) == [1, 2]

    new = spaced.create(template=name)
    pinned = spaced.create(template=f"{name}:stable")
    by_num = spaced.create(template=f"{name}@v1")
    try:
        assert new["template_version"] == 2 and version_of(spaced, new["id"]) == "two", new
        assert pinned["template_version"] == 1 and version_of(spaced, pinned["id"]) == "one", pinned
        assert by_num["template_version"] == 1 and version_of(spaced, by_num["id"]) == "one", by_num
        latest = spaced.create(template=f"{name}:latest")
        assert latest["template_version"] == 2, latest
        spaced.delete(latest["id"])
        shown = spaced.show(pinned["id"]).json()
        assert shown["template"] == name and shown["template_version"] == 1, shown
        c = spaced.cli("show", pinned["id"])
        assert c.rc == 0 and name in c.out and any(
            "template_version" in line and line.split()[-1] == "1" for line in c.out.splitlines()), c
    finally:
        for sb in (new, pinned, by_num):
            spaced.delete(sb["id"])

    # untagged, v1 is still held by the old sandbox: it keeps running, its checkpoint restores
    r = spaced.api("DELETE", f"/v1/templates/{name}/tags/stable")
    assert r.status == 204, r
    assert 1 in versions(spaced, name)
    assert version_of(spaced, old["id"]) == "one"
    r = spaced.api("POST", f"/v1/sandboxes/{old['id']}/restore", json={"checkpoint": "v1state"}, timeout=180)
    assert r.status == 200, r
    assert version_of(spaced, old["id"]) == "one"

    # a template with versions in use is not removed
    r = spaced.api("DELETE", f"/v1/templates/{name}")
    assert_error_shape(r, 409, "template_in_use")

    # nothing holds v1 once its sandbox is deleted: it goes at that delete
    r = spaced.api("DELETE", f"/v1/sandboxes/{old['id']}/checkpoints/v1state")
    assert r.status in (200, 204), r
    assert 1 in versions(spaced, name)
    spaced.delete(old["id"])
    assert sorted(versions(spaced, name)) == [2]
    publish(spaced, name, tars[0])  # v3: numbers never go back; v2, unused and untagged, goes
    assert sorted(versions(spaced, name)) == [3]
    ev = spaced.api("GET", "/v1/events", params={"type": "template."}).json()["events"]
    assert any(e["type"] == "template.version_collected" and e["data"] == {"name": name, "version": 1}
               for e in ev), ev
    r = spaced.api("DELETE", f"/v1/templates/{name}")
    assert r.status == 204, r
    assert spaced.api("GET", f"/v1/templates/{name}/versions").status == 404


def test_bad_refs_and_tags(spaced, tars):
    name = tname()
    publish(spaced, name, tars[0])
    try:
        for ref, status, code in ((f"{name}:nope", 404, "not_found"), (f"{name}@v9", 404, "not_found"),
                                  (f"{name}@v0", 400, "invalid_argument"), (f"{name}@1", 400, "invalid_argument"),
                                  (f"{name}:", 400, "invalid_argument"), (f"{name}:a/b", 400, "invalid_argument"),
                                  (f"{name}@v1:x", 400, "invalid_argument"), ("Bad:x", 400, "invalid_argument")):
            r = spaced.api("POST", "/v1/sandboxes", json={"template": ref})
            assert_error_shape(r, status, code)
        for body, status in (({"tag": "latest"}, 400), ({"tag": "-x"}, 400), ({"tag": "a" * 129}, 400),
                             ({"tag": "ok", "version": 0}, 400), ({"tag": "ok", "version": 7}, 404),
                             ({"tag": "ok", "extra": 1}, 400), ({}, 400)):
            r = spaced.api("POST", f"/v1/templates/{name}/tags", json=body)
            assert r.status == status, (body, r)
        r = spaced.api("POST", "/v1/templates/nope-none/tags", json={"tag": "x"})
        assert_error_shape(r, 404, "not_found")
        r = spaced.api("DELETE", f"/v1/templates/{name}/tags/none")
        assert_error_shape(r, 404, "not_found")
        # the tag list
        t = spaced.api("GET", f"/v1/templates/{name}/tags")
        assert t.status == 200 and t.json() == {"tags": []}, t
        # the CLI: tag, versions, untag
        c = spaced.cli("template", "tag", f"{name}@v1", "prod")
        assert c.rc == 0, c
        c = spaced.cli("template", "versions", name)
        assert c.rc == 0 and "prod" in c.out and "v1" in c.out, c
        c = spaced.cli("template", "untag", name, "prod")
        assert c.rc == 0, c
        assert spaced.api("GET", f"/v1/templates/{name}/tags").json() == {"tags": []}
    finally:
        r = spaced.api("DELETE", f"/v1/templates/{name}")
        assert r.status == 204, r


def test_e2b_sdk_tags(spaced, tars):
    """The official JS SDK's Template.assignTags / getTags / removeTags, and Sandbox.create(NAME:TAG)."""
    from test_e2b_sdk import E2B_DIR, node_too_old, npm_ci
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed (scripts/install-deps.sh installs them)")
    old = node_too_old()
    if old:
        pytest.skip(old)
    npm_ci()
    name = tname()
    publish(spaced, name, tars[0])
    r = spaced.api("POST", f"/v1/templates/{name}/tags", json={"tag": "hold"})  # v1 stays
    assert r.status == 200, r
    publish(spaced, name, tars[1])
    try:
        env = clean_env({"E2B_API_URL": spaced.url, "E2B_SANDBOX_URL": spaced.url, "E2B_API_KEY": spaced.admin_key,
                         "TEMPLATE": name, "NODE_NO_WARNINGS": "1"})
        env.pop("E2B_DEBUG", None)
        env.pop("E2B_DOMAIN", None)
        p = subprocess.run(["node", os.path.join(E2B_DIR, "tags.mjs")], cwd=E2B_DIR, env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0 and p.stdout.strip() == "ok", (p.stdout[-3000:], p.stderr[-3000:])
        # a tenant key may read tags but not change them
        r = spaced.api("POST", "/v1/keys", json={"name": "tags", "tenant": "tags" + uuid.uuid4().hex[:8]})
        assert r.status == 201, r
        key = r.json()["key"]
        spaced.keys[key] = r.json()["id"]
        r = e2b_rest(spaced, "POST", "/templates/tags", {"target": name, "tags": ["x"]}, key=key)
        assert r.status == 403, r
        r = spaced.api("POST", f"/v1/templates/{name}/tags", json={"tag": "x"}, key=key)
        assert r.status == 403, r
        r = e2b_rest(spaced, "GET", f"/templates/{name}/tags", key=key)
        assert r.status == 200 and [t["tag"] for t in r.json()] == ["latest"], r
        for body in ({"target": name}, {"target": name, "tags": []}, {"target": name, "tags": ["latest"]},
                     {"target": name, "tags": ["a/b"]}, {"tags": ["x"]}):
            r = e2b_rest(spaced, "POST", "/templates/tags", body)
            assert r.status == 400, (body, r)
        r = e2b_rest(spaced, "DELETE", "/templates/tags", {"name": f"{name}:x", "tags": ["x"]})
        assert r.status == 400, r
    finally:
        r = spaced.api("DELETE", f"/v1/templates/{name}")
        assert r.status == 204, r


def test_python_sdk_versions_and_tags(spaced, tars):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python"))
    name = tname()
    try:
        import space_sdk
        with space_sdk.Client(spaced.url, spaced.admin_key, timeout=120) as c:
            with open(tars[0], "rb") as f:
                c.import_template(name, f)
            assert c.tag_template(name, "stable") == {"name": name, "tag": "stable", "version": 1}
            with open(tars[1], "rb") as f:
                c.import_template(name, f)
            vs = c.template_versions(name)
            assert [v.version for v in vs] == [2, 1] and vs[0].latest and vs[1].tags == ["stable"], vs
            assert c.template_tags(name) == {"stable": 1}
            sb = c.create(template=f"{name}:stable")
            try:
                assert sb.template == name and sb.template_version == 1, sb
            finally:
                c.delete(sb.id)
            c.untag_template(name, "stable")
            assert [v.version for v in c.template_versions(name)] == [2]
            with pytest.raises(space_sdk.SpaceError):
                c.tag_template(name, "latest")
    finally:
        sys.path.pop(0)
        for m in [m for m in sys.modules if m == "space_sdk" or m.startswith("space_sdk.")]:
            del sys.modules[m]
        assert spaced.api("DELETE", f"/v1/templates/{name}").status == 204


def test_builds_are_versions_and_share_layers(spaced):
    """A build is a version; a failed one leaves the name where it was; two builds of the same steps share
    their files (one layer)."""
    from test_templates_build import build
    name = tname()
    files = {"Dockerfile": b"FROM base\nRUN echo built > /etc/space-version\n"}
    status, lines = build(spaced, name, files)
    assert status == 200 and lines[-1]["type"] == "result", lines
    try:
        assert spaced.api("POST", f"/v1/templates/{name}/tags", json={"tag": "first"}).status == 200
        status, lines = build(spaced, name, files)  # the cache: the same last layer
        assert status == 200 and lines[-1]["type"] == "result", lines
        status, lines = build(spaced, name, {"Dockerfile": b"FROM base\nRUN exit 3\n"})
        assert status == 200 and lines[-1]["type"] == "error", lines
        vs = versions(spaced, name)
        assert sorted(vs) == [1, 2] and vs[2]["latest"], vs  # the failed build made none
        assert vs[1]["digest"] == vs[2]["digest"] != "", vs
        assert vs[2]["shared_with"] == [name, f"{name}@v1"] and vs[1]["shared_with"] == [f"{name}@v2"], vs
        sb = spaced.create(template=f"{name}:first")
        try:
            assert version_of(spaced, sb["id"]) == "built" and sb["template_version"] == 1, sb
        finally:
            spaced.delete(sb["id"])
    finally:
        assert spaced.api("DELETE", f"/v1/templates/{name}").status == 204


PG_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "pg-test-server.sh")
PG_LOCK_SLOTS = "pg_advisory_xact_lock(1936744803, 2)"  # src/store/store-postgres.h: the slots lock


@pytest.fixture(scope="module")
def pg_spaced(e2e_session, request):
    """A spaced on a private PostgreSQL (READ COMMITTED: where a create and a collection race)."""
    if not shutil.which("psql"):
        pytest.skip("psql is needed")
    r = subprocess.run(["sh", PG_SCRIPT, "start"], capture_output=True, text=True, timeout=120)
    if r.returncode == 77:
        pytest.skip("no PostgreSQL here")
    assert r.returncode == 0, r.stderr
    url = r.stdout.strip()
    d = None
    try:
        d = e2e_session.new_daemon(extra_args=["--store-url", url])
        d.pg_url = url
        d.start()
        yield d
    finally:
        try:
            if d is not None:
                import e2e_residue as residue
                residue.finish_daemon(d, request)
        finally:
            subprocess.run(["sh", PG_SCRIPT, "stop", url], capture_output=True, timeout=120)


class Psql:
    """One session of psql, held open: its transaction holds what it locked until commit."""

    def __init__(self, url):
        self.p = subprocess.Popen(["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", url], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env())

    def run(self, sql):
        """Runs sql; returns its output lines once it is done."""
        mark = "--done-" + uuid.uuid4().hex
        self.p.stdin.write(f"{sql}\n\\echo {mark}\n")
        self.p.stdin.flush()
        out = []
        for line in self.p.stdout:
            if line.strip() == mark:
                return out
            out.append(line.rstrip("\n"))
        raise AssertionError(f"psql ended: {out}")

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(30) == 0

    def kill(self):
        """After a failure: its transaction rolls back, what waited for it goes on."""
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(30)


def pg_query(url, sql):
    r = subprocess.run(["psql", "-X", "-tA", url, "-c", sql], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def wait_lock_waiter(url, like):
    """Until a backend waits for a lock in a statement like `like` (bounded: not a timing assertion)."""
    import e2e_host as host
    sql = ("SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%"
           + like.replace("'", "''") + "%'")
    assert host.wait_until(lambda: pg_query(url, sql) != "0", 60), f"nothing waited in {like}"


def in_thread(fn):
    import threading
    out = {}
    t = threading.Thread(target=lambda: out.update(r=fn()))
    t.start()
    return t, out


def test_create_and_collection_of_its_version_take_turns(pg_spaced, tars):
    """Issue 22: a create that resolved an old version and a collection of that version, interleaved
    step by step on PostgreSQL through the locks each waits for."""
    d, url, name = pg_spaced, pg_spaced.pg_url, tname()
    publish(d, name, tars[0])
    assert d.api("POST", f"/v1/templates/{name}/tags", json={"tag": "old"}).status == 200  # v1 stays
    publish(d, name, tars[1])
    sid, sessions = None, []
    try:
        # the create first: it holds v1 and waits for the slots lock (held here); the collection
        # that the tag's removal starts waits for the create, then sees its sandbox: v1 stays
        s = Psql(url)
        sessions.append(s)
        s.run(f"BEGIN; SELECT {PG_LOCK_SLOTS};")
        create, made = in_thread(lambda: d.api("POST", "/v1/sandboxes", json={"template": f"{name}@v1"},
                                               timeout=180))
        wait_lock_waiter(url, "pg_advisory_xact_lock")
        untag, untagged = in_thread(lambda: d.api("DELETE", f"/v1/templates/{name}/tags/old"))
        wait_lock_waiter(url, "FOR UPDATE")
        s.run("COMMIT;")
        s.close()
        create.join(180)
        untag.join(180)
        r = made["r"]
        assert r.status == 201 and r.json()["template_version"] == 1, r
        sid = r.json()["id"]
        d.known_alive.add(sid)
        assert untagged["r"].status == 204, untagged["r"]
        vs = versions(d, name)
        assert sorted(vs) == [1, 2] and vs[1]["in_use"] == 1 and vs[1]["sandboxes"] == [sid], vs
        assert version_of(d, sid) == "one"
        d.delete(sid)
        sid = None
        assert sorted(versions(d, name)) == [2]  # collected at the delete

        # the collection first (its row delete done, not committed): a create of that version
        # waits for it, then is refused cleanly
        assert d.api("POST", f"/v1/templates/{name}/tags", json={"tag": "old"}).status == 200
        publish(d, name, tars[0])  # v3; v2 is kept by the tag
        row = pg_query(url, f"SELECT digest, size_bytes, created_usec FROM template_versions "
                            f"WHERE name = '{name}' AND version = 2").split("|")
        s = Psql(url)
        sessions.append(s)
        s.run(f"BEGIN; DELETE FROM template_tags WHERE name = '{name}'; "
              f"DELETE FROM template_versions WHERE name = '{name}' AND version = 2;")
        create, made = in_thread(lambda: d.api("POST", "/v1/sandboxes", json={"template": f"{name}@v2"},
                                               timeout=180))
        wait_lock_waiter(url, "FOR KEY SHARE")
        s.run("COMMIT;")
        create.join(180)
        e = assert_error_shape(made["r"], 409, "conflict")
        assert f"version 2 of template '{name}' was removed" in e["message"] and "try again" in e["message"], e
        # (what the collection would have removed: the row back, and a tag change collects it whole)
        s.run(f"INSERT INTO template_versions (name, version, digest, size_bytes, created_usec) "
              f"VALUES ('{name}', 2, '{row[0]}', {row[1]}, {row[2]});")
        s.close()
        assert d.api("POST", f"/v1/templates/{name}/tags", json={"tag": "now"}).status == 200
        assert sorted(versions(d, name)) == [3]
    finally:
        for s in sessions:
            s.kill()
        if sid:
            d.delete(sid)
        assert d.api("DELETE", f"/v1/templates/{name}").status == 204


def _warm_of(dd, name):
    """{id: template_version} of the paused warm sandboxes of name in dd's store."""
    import sqlite3
    db = sqlite3.connect(os.path.join(dd.state_dir, "space.db"), timeout=10)
    try:
        rows = db.execute("SELECT id, template_version FROM sandboxes WHERE warm_pool = ? AND state = 'paused'",
                          (name,)).fetchall()
    finally:
        db.close()
    return dict(rows)


@pytest.mark.timeout(600)
def test_a_warm_pool_follows_the_newest_version(e2e_session, tars):
    """A create from the name is made from its newest version, warm or not: a
    warm sandbox of an older version is not handed out, and the controller
    replaces it with one of the newest."""
    import e2e_host as host
    import e2e_residue as residue
    name = tname()
    dd = e2e_session.new_daemon(extra_args=[f"--warm-pool={name}:1"])
    dd.start()
    try:
        publish(dd, name, tars[0])
        assert host.wait_until(lambda: list(_warm_of(dd, name).values()) == [1], 60), dd.log_tail(40)
        old = next(iter(_warm_of(dd, name)))
        publish(dd, name, tars[1])
        r = dd.api("POST", "/v1/sandboxes", json={"template": name}, timeout=180)
        assert r.status == 201 and r.json()["template_version"] == 2, r
        assert r.json()["id"] != old and version_of(dd, r.json()["id"]) == "two"
        dd.delete(r.json()["id"])
        # the old one goes, a warm sandbox of version 2 takes its place, and the next create gets it
        assert host.wait_until(lambda: list(_warm_of(dd, name).values()) == [2], 60), dd.log_tail(40)
        new = next(iter(_warm_of(dd, name)))
        ev = dd.api("GET", "/v1/events", params={"sandbox": old, "type": "sandbox.deleted"}).json()["events"]
        assert ev and "older version" in ev[-1]["reason"], ev
        r = dd.api("POST", "/v1/sandboxes", json={"template": name}, timeout=180)
        assert r.status == 201 and r.json()["id"] == new and r.json()["template_version"] == 2, r
        assert version_of(dd, new) == "two"
        dd.delete(new)
        dd.stop()
        dd.extra_args = []
        dd.start()
        assert host.wait_until(lambda: not _warm_of(dd, name), 60)
        assert dd.api("DELETE", f"/v1/templates/{name}").status == 204
    finally:
        problems = residue.teardown_daemon(dd)
        if not problems:
            residue.remove_daemon_dir(dd)
    assert not problems, problems
