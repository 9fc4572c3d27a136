# SPDX-License-Identifier: MIT
"""E2B template builds: the JS SDK's Template.build() (tests/e2e/e2b/template-build.mjs)
builds a template on a real spaced from fromTemplate('base') with copy (an upload, owned by a user
named in the image), setEnvs,
setWorkdir, runCmd and setStartCmd/readyCmd, a sandbox starts from it and sees the result;
a failing RUN is a build error with its output and leaves the template as it was;
buildInBackground + getBuildStatus. Then what the SDK cannot send, as raw requests: an
unknown step type, an upload whose hash is not its content's, another tenant's files URL,
template, build and upload URL."""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import urllib.parse
import uuid

import pytest

import e2e_http
from e2e_daemon import clean_env
from test_e2b_sdk import E2B_DIR, node_too_old, npm_ci

SCRIPT = os.path.join(E2B_DIR, "template-build.mjs")


def tenant_key(spaced, prefix):
    r = spaced.api("POST", "/v1/keys", json={"name": prefix, "tenant": prefix + uuid.uuid4().hex[:8]})
    assert r.status == 201, r
    return r.json()["key"]


def e2b(spaced, key, method, path, body=None, **kw):
    return e2e_http.request(spaced.url, method, path, json=body, headers={"X-API-KEY": key}, key=None, timeout=120,
                            **kw)


def remove_templates(spaced, *names):
    for n in names:
        r = spaced.api("DELETE", f"/v1/templates/{n}", timeout=120)
        assert r.status in (200, 204, 404), r


@pytest.fixture(scope="module")
def keys(spaced):
    return tenant_key(spaced, "tpla"), tenant_key(spaced, "tplb")


@pytest.mark.timeout(600)
def test_sdk_template_build(spaced, keys):
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed (scripts/install-deps.sh installs them)")
    old = node_too_old()
    if old:
        pytest.skip(old)
    npm_ci()
    name = "sdk-" + uuid.uuid4().hex[:8]
    env = clean_env({"E2B_API_URL": spaced.url, "E2B_SANDBOX_URL": spaced.url, "E2B_API_KEY": keys[0],
                     "TPL_NAME": name, "NODE_NO_WARNINGS": "1"})
    env.pop("E2B_DEBUG", None)
    env.pop("E2B_DOMAIN", None)
    try:
        p = subprocess.run(["node", SCRIPT], cwd=E2B_DIR, env=env, capture_output=True, text=True, timeout=500)
        assert p.returncode == 0, f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        out = json.loads(p.stdout.strip().splitlines()[-1])
        assert out["build"]["templateId"] == name
        assert out["exists"] is True
        assert any("hello from the context" in m for m in out["build"]["logs"]), out["build"]["logs"]
        assert out["run"]["exitCode"] == 0
        assert out["run"]["stdout"].splitlines() == ["built hi there", "hello from the context", "started", "/app",
                                                      "env=hi there", "1000:1000"], out["run"]
        fail = out["fail"]
        assert fail["threw"] and fail["name"] == "BuildError", fail
        assert "exited with code 3" in fail["message"], fail
        assert any("oops-output" in m for m in fail["logs"]), fail["logs"]
        # the SDK points at the line of the failing step (its stack trace)
        assert "template-build.mjs" in fail["stack"], fail["stack"]
        assert out["after_fail"] == "built hi there\n"
        bg = out["background"]
        assert bg["status"] == "ready" and bg["entries"] > 0 and bg["tail"] == 0, bg
        assert len(out["cache"]["again"]) == 1 and out["cache"]["again"][0].endswith("(cached)"), out["cache"]
        assert len(out["cache"]["skipped"]) == 1 and "(cached)" not in out["cache"]["skipped"][0], out["cache"]
        # the templates are the tenant's: another tenant neither sees nor starts them
        r = e2b(spaced, keys[1], "GET", f"/templates/aliases/{name}")
        assert r.status == 404, r
        r = e2b(spaced, keys[1], "POST", "/sandboxes", {"templateID": name})
        assert r.status == 404 and "not found" in r.json()["message"], r
        r = spaced.api("POST", "/v1/sandboxes", json={"template": name}, key=keys[1])
        assert r.status == 404, r
        r = e2b(spaced, keys[1], "POST", "/v3/templates", {"name": name})
        assert r.status == 409 and "taken" in r.json()["message"], r
        r = e2b(spaced, keys[1], "GET", f"/templates/{name}/builds/{bg['buildId']}/status")
        assert r.status == 404, r
    finally:
        remove_templates(spaced, name + "-bg", name + "-c", name)


def tar_gz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for n, data in files.items():
            info = tarfile.TarInfo(n)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def sdk_hash(src, dest, files):
    """calculateFilesHash of the SDK for regular files of mode 0644."""
    h = hashlib.sha256(f"COPY {src} {dest}".encode())
    for n in sorted(files):
        h.update(n.encode())
        h.update(str(0o100644).encode())
        h.update(str(len(files[n])).encode())
        h.update(files[n])
    return h.hexdigest()


def put(url, data):
    u = urllib.parse.urlsplit(url)
    return e2e_http.request(f"{u.scheme}://{u.netloc}", "PUT", u.path + "?" + u.query, data=data, key=None,
                            headers={"Content-Length": str(len(data))}, timeout=60)


def test_bad_builds_and_other_tenants(spaced, keys):
    a, b = keys
    name = "raw-" + uuid.uuid4().hex[:8]
    r = e2b(spaced, a, "POST", "/v3/templates", {"name": name})
    assert r.status == 202, r
    tid, bid = r.json()["templateID"], r.json()["buildID"]
    assert tid == name and r.json()["tags"] == ["default"]
    for bad, why in (({"name": "Bad Name"}, "template name"), ({}, "name is required"),
                     ({"name": "base"}, "taken"), ({"name": name + ":v2"}, "tags")):
        r = e2b(spaced, a, "POST", "/v3/templates", bad)
        assert r.status >= 400 and why in r.json()["message"], (bad, r)

    # the files URL: signed for the tenant, the template and the hash
    files = {"f.txt": b"the real content\n"}
    good = sdk_hash("f.txt", "/f.txt", files)
    r = e2b(spaced, a, "GET", f"/templates/{tid}/files/{good}")
    assert r.status == 200 and r.json()["present"] is False, r
    url = r.json()["url"]
    assert e2b(spaced, b, "GET", f"/templates/{tid}/files/{good}").status == 404
    assert e2b(spaced, a, "GET", f"/templates/{tid}/files/nothex").status == 400
    other_tenant = url.replace("tenant=", "tenant=x")
    r = put(other_tenant, tar_gz(files))
    assert r.status == 403 and "signature" in r.json()["message"], r
    r = put(url.replace(good, good[:-1] + ("0" if good[-1] != "0" else "1")), tar_gz(files))
    assert r.status == 403, r
    r = put(url, b"not a tar at all" * 64)
    assert r.status == 400 and "tar" in r.json()["message"], r
    r = put(url, tar_gz({"../escape": b"x"}))
    assert r.status == 400 and "outside" in r.json()["message"], r

    # content whose hash is not the one it was uploaded as: refused when the build names it
    r = put(url, tar_gz({"f.txt": b"other content\n"}))
    assert r.status == 200, r
    step = {"type": "COPY", "args": ["f.txt", "/f.txt", "", ""], "filesHash": good}
    r = e2b(spaced, a, "POST", f"/v2/templates/{tid}/builds/{bid}", {"fromTemplate": "base", "steps": [step]})
    assert r.status == 400 and "do not have that filesHash" in r.json()["message"], r
    assert e2b(spaced, a, "GET", f"/templates/{tid}/files/{good}").json()["present"] is False

    # unknown step types, bad args and bases: E2B-shaped errors before anything runs
    for steps, why in (([{"type": "EXPOSE", "args": ["80"]}], "not supported"),
                       ([{"type": "RUN", "args": []}], "RUN takes"),
                       ([{"type": "COPY", "args": ["x", "/x"], "filesHash": "0" * 64}], "not uploaded"),
                       ([{"args": ["x"]}], "no type")):
        r = e2b(spaced, a, "POST", f"/v2/templates/{tid}/builds/{bid}", {"fromTemplate": "base", "steps": steps})
        assert r.status == 400 and why in r.json()["message"] and r.json()["code"] == 400, (steps, r)
    r = e2b(spaced, a, "POST", f"/v2/templates/{tid}/builds/{bid}", {"fromTemplate": "nosuchtpl", "steps": []})
    assert r.status == 404, r
    r = e2b(spaced, a, "POST", f"/v2/templates/{tid}/builds/{bid}",
            {"fromImage": "x", "fromImageRegistry": {"type": "registry", "username": "u", "password": "p"}})
    assert r.status == 501, r

    # another tenant's build and template
    r = e2b(spaced, b, "POST", f"/v2/templates/{tid}/builds/{bid}", {"fromTemplate": "base", "steps": []})
    assert r.status == 404, r
    r = e2b(spaced, b, "GET", f"/templates/{tid}/builds/{bid}/status")
    assert r.status == 404, r
    r = e2b(spaced, a, "GET", f"/templates/{tid}/builds/{bid}/status")
    assert r.status == 200 and r.json()["status"] == "waiting" and r.json()["logEntries"] == [], r
    r = e2b(spaced, a, "GET", f"/templates/{tid}/builds/{bid}/status", params={"logsOffset": "x"})
    assert r.status == 400, r
    # a tenant opens at most 8 builds at a time (this one holds one already)
    opened = [e2b(spaced, a, "POST", "/v3/templates", {"name": f"{name}-{i}"}) for i in range(8)]
    assert [r.status for r in opened] == [202] * 7 + [429], opened
    assert "at most 8" in opened[-1].json()["message"]
    assert e2b(spaced, b, "POST", "/v3/templates", {"name": name + "-b"}).status == 202
    # tags are space's template tags: a tenant's key may not move them (admin keys only)
    r = e2b(spaced, a, "POST", "/templates/tags", {"target": tid, "tags": ["x"]})
    assert r.status == 403, r


def test_uploads_bounded(e2e_session, request):
    """A spaced whose uploads are limited to 1 MiB: a tar that unpacks past it is refused (a gzip bomb),
    and a tenant keeps at most 4 × that of uploads, the least recently used dropped first."""
    import e2e_residue as residue

    d = e2e_session.new_daemon(extra_args=["--upload-max-mb", "1"])
    d.start()
    try:
        key = tenant_key(d, "tplq")
        r = e2b(d, key, "POST", "/v3/templates", {"name": "quota-" + uuid.uuid4().hex[:8]})
        assert r.status == 202, r
        tid = r.json()["templateID"]

        def link(i):
            r = e2b(d, key, "GET", f"/templates/{tid}/files/{i:064x}")
            assert r.status == 200, r
            return r.json()

        bomb = tar_gz({"zeros": b"\0" * (2 << 20)})
        assert len(bomb) < (1 << 20)
        r = put(link(99)["url"], bomb)
        assert r.status == 413 and "MiB" in r.json()["message"], r
        assert link(99)["present"] is False
        for i in range(6):
            r = put(link(i)["url"], tar_gz({"f": os.urandom(900 << 10)}))
            assert r.status == 200, r
        present = [link(i)["present"] for i in range(6)]
        assert present[:2] == [False, False] and all(present[2:]), present
    finally:
        residue.finish_daemon(d, request)
